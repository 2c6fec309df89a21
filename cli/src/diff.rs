//! `guardhost diff --config OLD --config NEW`: every call of an input
//! decided under both configs, and the calls whose decision changes (the
//! outcome, the first reason's code, the deciding policy or the chain
//! entry that decided). The input is the `run` protocol's JSON lines, or a
//! decision log written with `args: true`. Only names and codes are
//! printed: never arguments, reason messages or configured values. Exit 0
//! when nothing changed, 1 when some call did, 2 when a config or some
//! input line could not be used.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;

use guardhost::outcome_of;
use guardhost::{install, GuardrailMiddleware, LoadedConfig, ToolCall, ToolCallError, ToolCallRequest};
use guardhost_lines::jsonl::{parse_line, read_line, Line, DEFAULT_MAX_LINE_BYTES};
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::error::CliError;

/// How `diff` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DiffFormat {
    /// A line a changed call, then the counts.
    Text,
    /// One JSON document.
    Json,
}

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The two configs to compare, the old one first: `--config OLD
    /// --config NEW` (DeerFlow-style config.yaml files, or files whose top
    /// level is the `guardrails:` section).
    #[arg(long, value_name = "FILE", required = true, num_args = 1)]
    config: Vec<PathBuf>,
    /// The calls: `guardhost run` input lines (one tool call a line), or a
    /// decision log written with `decision_log.args: true`. Default: stdin.
    #[arg(long, value_name = "FILE")]
    input: Option<PathBuf>,
    /// How to report: `text` or `json`.
    #[arg(long, value_enum, default_value = "text")]
    format: DiffFormat,
}

/// What one config made of a call: names and codes only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Side {
    /// `allow`, `deny`, `ask`, `rewrite`, `error` (the provider failed)
    /// or `interrupt`.
    outcome: String,
    /// The first reason's code.
    code: Option<String>,
    /// The deciding policy.
    policy: Option<String>,
    /// The chain entry that decided.
    decided_by: Option<String>,
}

/// What can change between the two sides, in the order they are reported.
const KINDS: [&str; 4] = ["outcome", "code", "policy", "decided_by"];

impl Side {
    /// The kinds of change from `self` to `other`.
    fn changes(&self, other: &Side) -> Vec<&'static str> {
        let pairs = [
            self.outcome != other.outcome,
            self.code != other.code,
            self.policy != other.policy,
            self.decided_by != other.decided_by,
        ];
        KINDS.iter().zip(pairs).filter(|(_, changed)| *changed).map(|(kind, _)| *kind).collect()
    }

    fn text(&self) -> String {
        let mut details = Vec::new();
        if let Some(code) = &self.code {
            details.push(code.clone());
        }
        if let Some(policy) = &self.policy {
            details.push(format!("policy {policy}"));
        }
        if let Some(by) = &self.decided_by {
            details.push(format!("by {by}"));
        }
        if details.is_empty() {
            self.outcome.clone()
        } else {
            format!("{} ({})", self.outcome, details.join(", "))
        }
    }
}

/// A call whose decision changed.
#[derive(Debug, Serialize)]
struct Changed {
    line: u64,
    tool: String,
    tool_call_id: Option<String>,
    changed: Vec<&'static str>,
    old: Side,
    new: Side,
}

/// An input line that is not a call.
#[derive(Debug, Serialize)]
struct LineError {
    line: u64,
    error: String,
}

/// One of the two configs, its guardrail built (`None`: it installs none,
/// and every call runs unchecked).
struct Decider {
    middleware: Option<GuardrailMiddleware>,
}

impl Decider {
    fn load(path: &std::path::Path, which: &str) -> Result<Decider, CliError> {
        let unusable = |error: String| {
            CliError::Usage(format!(
                "cannot use the {which} config ({which} --config, {}): {error}",
                path.display()
            ))
        };
        let mut config = LoadedConfig::from_path(path).map_err(|e| unusable(e.to_string()))?;
        // A dry run: nothing is written to the config's decision log.
        config.guardrails.decision_log = None;
        let guardrail = install(&config).map_err(|e| unusable(e.to_string()))?;
        Ok(Decider { middleware: guardrail.map(|g| g.middleware) })
    }

    fn decide(&self, call: &ToolCallRequest) -> Side {
        let Some(middleware) = &self.middleware else {
            return Side { outcome: "allow".into(), code: None, policy: None, decided_by: None };
        };
        match middleware.decide(call) {
            Ok((decision, provider_error)) => Side {
                outcome: if provider_error { "error".into() } else { outcome_of(&decision).into() },
                code: decision.reasons.first().map(|r| r.code.to_string()),
                policy: decision.policy_id.clone(),
                decided_by: decision.metadata.get("decided_by").and_then(Value::as_str).map(str::to_owned),
            },
            Err(ToolCallError::Interrupt(_)) => {
                Side { outcome: "interrupt".into(), code: None, policy: None, decided_by: None }
            }
            Err(ToolCallError::InvalidRequest(_)) => {
                Side { outcome: "invalid_request".into(), code: None, policy: None, decided_by: None }
            }
            Err(_) => Side { outcome: "error".into(), code: None, policy: None, decided_by: None },
        }
    }
}

pub fn run(args: DiffArgs) -> Result<ExitCode, CliError> {
    let [old_path, new_path] = <[PathBuf; 2]>::try_from(args.config).map_err(|given| {
        CliError::Usage(format!(
            "diff compares two configs: give --config OLD --config NEW (got {} --config)",
            given.len()
        ))
    })?;
    let old = Decider::load(&old_path, "old")?;
    let new = Decider::load(&new_path, "new")?;
    let (mut reader, input_name): (Box<dyn BufRead>, String) = match &args.input {
        Some(path) => {
            let file = std::fs::File::open(path).map_err(|source| CliError::Io {
                what: format!("cannot read --input {}", path.display()),
                source,
            })?;
            (Box::new(std::io::BufReader::new(file)), path.display().to_string())
        }
        None => (Box::new(std::io::stdin().lock()), "stdin".to_owned()),
    };

    let mut calls = 0u64;
    let mut changed = Vec::new();
    let mut errors = Vec::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        let read = read_line(&mut reader, &mut line, DEFAULT_MAX_LINE_BYTES)
            .map_err(|source| CliError::Io { what: format!("cannot read {input_name}"), source })?;
        let Some(read) = read else { break };
        number += 1;
        let call = match read {
            Line::Whole => call_of(number, &line),
            Line::TooLong { length } => {
                Err(format!("the line is {length} bytes long, more than {DEFAULT_MAX_LINE_BYTES}"))
            }
        };
        let call = match call {
            Ok(call) => call,
            Err(error) => {
                errors.push(LineError { line: number, error });
                continue;
            }
        };
        calls += 1;
        let (before, after) = (old.decide(&call), new.decide(&call));
        let kinds = before.changes(&after);
        if !kinds.is_empty() {
            changed.push(Changed {
                line: number,
                tool: call.tool_call.name.clone().unwrap_or_default(),
                tool_call_id: call.tool_call.id.clone(),
                changed: kinds,
                old: before,
                new: after,
            });
        }
    }

    let per_kind: Vec<(&str, usize)> = KINDS
        .iter()
        .map(|kind| (*kind, changed.iter().filter(|c| c.changed.contains(kind)).count()))
        .collect();
    let report = match args.format {
        DiffFormat::Text => {
            let mut out = String::new();
            for change in &changed {
                let id = change.tool_call_id.as_deref().map_or_else(String::new, |id| format!(" {id}"));
                out.push_str(&format!(
                    "line {} ({}{id}): {} -> {}   [{}]\n",
                    change.line,
                    change.tool,
                    change.old.text(),
                    change.new.text(),
                    change.changed.join(", ")
                ));
            }
            for error in &errors {
                out.push_str(&format!("line {}: not a call: {}\n", error.line, error.error));
            }
            let kinds: Vec<String> = per_kind.iter().map(|(kind, n)| format!("{kind} {n}")).collect();
            out.push_str(&format!(
                "{calls} calls: {} changed ({}), {} unusable lines\n",
                changed.len(),
                kinds.join(", "),
                errors.len()
            ));
            out
        }
        DiffFormat::Json => {
            let kinds: Map<String, Value> =
                per_kind.iter().map(|(k, n)| ((*k).to_owned(), json!(n))).collect();
            let document = json!({
                "old": old_path, "new": new_path,
                "calls": calls, "changed": changed.len(), "changes": kinds, "errors": errors.len(),
                "calls_changed": changed, "line_errors": errors,
            });
            format!("{}\n", serde_json::to_string_pretty(&document).unwrap_or_default())
        }
    };
    crate::error::write_stdout(format_args!("{report}"))?;
    if !errors.is_empty() {
        let lines: Vec<String> = errors.iter().take(5).map(|e| e.line.to_string()).collect();
        let more = if errors.len() > 5 { ", ..." } else { "" };
        return Err(CliError::Usage(format!(
            "{} line(s) of {input_name} are not calls (line {}{more}), so the comparison is incomplete; \
             each is listed above with why: fix or remove them (a call is {{\"name\": ..., \"args\": {{...}}}}, \
             a decision log entry needs its `args`)",
            errors.len(),
            lines.join(", ")
        )));
    }
    Ok(if changed.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The call on line `number`: a `run` input line, or a decision log entry
/// (it has `decision_id` and `tool`, and no `name`), or why it is neither.
fn call_of(number: u64, bytes: &[u8]) -> Result<ToolCallRequest, String> {
    let entry = serde_json::from_slice::<Value>(bytes).ok().and_then(|value| match value {
        Value::Object(map)
            if map.contains_key("decision_id") && map.contains_key("tool") && !map.contains_key("name") =>
        {
            Some(map)
        }
        _ => None,
    });
    if let Some(entry) = entry {
        return logged_call(&entry);
    }
    parse_line(number, bytes).map_err(|message| {
        let prefix = format!("guardhost: line {number}: ");
        message.content.strip_prefix(&prefix).unwrap_or(&message.content).to_owned()
    })
}

/// The call a decision log entry records: its tool, arguments (as logged:
/// masked values are `"***"`), id, and the context it keeps (`thread_id`,
/// `run_id`).
fn logged_call(entry: &Map<String, Value>) -> Result<ToolCallRequest, String> {
    let tool = match entry.get("tool") {
        Some(Value::String(tool)) => tool.clone(),
        _ => return Err("a decision log entry whose `tool` is not a string".into()),
    };
    let args = match entry.get("args") {
        Some(Value::Object(args)) => args.clone(),
        None | Some(Value::Null) => {
            return Err(format!(
                "a decision log entry of tool '{tool}' without its arguments: the log was written without \
                 `decision_log.args: true`, so the call cannot be decided again"
            ))
        }
        Some(_) => {
            return Err(format!("a decision log entry of tool '{tool}' whose `args` is not a mapping"))
        }
    };
    let context: Map<String, Value> = ["thread_id", "run_id"]
        .iter()
        .filter_map(|key| entry.get(*key).filter(|v| v.is_string()).map(|v| ((*key).to_owned(), v.clone())))
        .collect();
    let id = entry.get("tool_call_id").and_then(Value::as_str).map(str::to_owned);
    Ok(ToolCallRequest {
        tool_call: ToolCall { name: Some(tool), args, id, null_id: false },
        context: (!context.is_empty()).then_some(context),
    })
}
