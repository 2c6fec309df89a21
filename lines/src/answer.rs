//! What a decided tool call is answered with, in the two formats `guardhost
//! run` writes and `guardhost-server` returns: `messages` (the tool message
//! the agent would read) and `decisions` (one self-describing JSON object a
//! call, for a program that drives guardhost from another process).
//! `docs/protocol.md` documents both.

use serde::Serialize;
use serde_json::{Map, Value};

use guardhost::{denied_message, GuardrailMiddleware};
use guardhost::{outcome_of, rewritten_args, OUTCOME_KEY};
use guardhost::{GuardrailDecision, GuardrailReason, ToolCall, ToolCallRequest, ToolMessage, ToolStatus};
use guardhost::{Interrupt, ToolCallError};

/// How each call is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// One tool message a line (what the agent would read), or
    /// {"type": "interrupt", ...}, or {"type": "ask", ...} for a call held
    /// for approval.
    #[default]
    Messages,
    /// One decision object a line: `line`, `outcome` (allow, deny, ask,
    /// rewrite, error, interrupt), every reason, policy_id, metadata, and
    /// the tool message.
    Decisions,
}

/// What became of one call (an input line of `run`, a request to the
/// server), before it is written in either format.
#[derive(Debug)]
pub enum Handled {
    /// The call got an answer: a decision by the guardrail, or none
    /// (`decision: None`) when no guardrail is installed.
    Decided {
        /// The call's id, as the call had it.
        id: Option<String>,
        /// The call's tool name, as the call had it.
        name: Option<String>,
        /// What the guardrail decided.
        decision: Option<GuardrailDecision>,
        /// Whether the provider failed (the decision is then the
        /// middleware's fail-closed or fail-open one).
        provider_error: bool,
        /// The tool message the call gets (denial, or the dry run's success).
        message: ToolMessage,
    },
    /// Not a usable tool call (not UTF-8, not JSON, ...).
    Malformed {
        /// The call's id, when it could be read.
        id: Option<String>,
        /// The call's tool name, when it could be read.
        name: Option<String>,
        /// The error tool message that the `messages` format writes.
        message: ToolMessage,
    },
    /// A tool call the middleware could not take (an unusable context,
    /// such as `authz_attributes` not a mapping).
    Failed {
        /// The call's id.
        id: Option<String>,
        /// The call's tool name.
        name: Option<String>,
        /// Why.
        error: ToolCallError,
    },
    /// The provider raised a control-flow signal: not a decision.
    Interrupted {
        /// The call's id.
        id: Option<String>,
        /// The call's tool name.
        name: Option<String>,
        /// What the provider said.
        interrupt: Interrupt,
    },
}

/// The tally behind `run`'s stderr summary and exit code.
#[derive(Debug, Default)]
pub struct Counts {
    /// Calls (lines) answered.
    pub lines: u64,
    /// Decided by the policy (or no guardrail installed): allowed.
    pub allowed: u64,
    /// Decided by the policy: denied.
    pub denied: u64,
    /// Malformed lines and calls that could not be taken.
    pub errors: u64,
    /// Calls the provider failed on: answered by the middleware's
    /// fail-closed denial or fail-open allowance, not by the policy.
    pub provider_errors: u64,
    /// Of `provider_errors`: denied (`fail_closed: true`).
    pub failed_closed: u64,
    /// Of `provider_errors`: allowed (`fail_closed: false`).
    pub failed_open: u64,
    /// Interrupts raised by the provider.
    pub interrupts: u64,
    /// Calls held for a human's approval (`ask`; not in `denied`).
    pub held: u64,
    /// Of `allowed`: calls whose arguments a provider rewrote.
    pub rewritten: u64,
}

impl Counts {
    /// Counts one answered call.
    pub fn add(&mut self, handled: &Handled) {
        self.lines += 1;
        match handled {
            Handled::Decided { decision: Some(decision), provider_error: true, .. } => {
                self.provider_errors += 1;
                if decision.allow {
                    self.failed_open += 1;
                } else {
                    self.failed_closed += 1;
                }
            }
            Handled::Decided { decision: Some(decision), .. } => match outcome_of(decision) {
                "ask" => self.held += 1,
                "rewrite" => {
                    self.allowed += 1;
                    self.rewritten += 1;
                }
                "deny" => self.denied += 1,
                _ => self.allowed += 1,
            },
            Handled::Decided { .. } => self.allowed += 1,
            Handled::Malformed { .. } | Handled::Failed { .. } => self.errors += 1,
            Handled::Interrupted { .. } => self.interrupts += 1,
        }
    }
}

impl Counts {
    /// The stderr summary: `guardhost run: N lines: A allowed, D denied,
    /// E errors, P provider errors (C failed closed, O failed open)`, then
    /// `, I interrupts`, `, H held for approval` and `, R rewritten` if
    /// any. The provider errors are always counted, so a
    /// run whose every call failed in the provider never looks clean.
    pub fn summary(&self) -> String {
        let mut summary = format!(
            "guardhost run: {} lines: {} allowed, {} denied, {} errors, {} provider errors",
            self.lines, self.allowed, self.denied, self.errors, self.provider_errors
        );
        let mut how = Vec::new();
        if self.failed_closed > 0 {
            how.push(format!("{} failed closed", self.failed_closed));
        }
        if self.failed_open > 0 {
            how.push(format!("{} failed open", self.failed_open));
        }
        if !how.is_empty() {
            summary.push_str(&format!(" ({})", how.join(", ")));
        }
        if self.interrupts > 0 {
            summary.push_str(&format!(", {} interrupts", self.interrupts));
        }
        if self.held > 0 {
            summary.push_str(&format!(", {} held for approval", self.held));
        }
        if self.rewritten > 0 {
            summary.push_str(&format!(", {} rewritten", self.rewritten));
        }
        summary
    }

    /// The exit status: 3 if the provider raised an interrupt, else 4 if it
    /// failed on any call, else 1 if any line got no decision, else 0 (2,
    /// a usage, config or load error, is decided before any line is read).
    pub fn exit_code(&self) -> u8 {
        if self.interrupts > 0 {
            3
        } else if self.provider_errors > 0 {
            4
        } else if self.errors > 0 {
            1
        } else {
            0
        }
    }
}

/// What an allowed call's dry run answers: the handler `run`, `eval` and
/// the server stand in for the tool with.
pub fn dry_run(call: &ToolCall) -> ToolMessage {
    let name = call.name.as_deref().unwrap_or("unknown_tool");
    ToolMessage {
        // The map's compact JSON, as `Value::Object` would print it (no copy).
        content: format!(
            "dry run: tool '{name}' allowed; would run with args {}",
            serde_json::to_string(&call.args).unwrap_or_default()
        ),
        tool_call_id: call.id.clone().unwrap_or_else(|| "missing_id".to_owned()),
        name: Some(name.to_owned()),
        status: ToolStatus::Success,
    }
}

/// What became of `call`, given what the middleware decided about it
/// (`None`: no guardrail is installed, and the call runs): the denial, or
/// the dry run's message (what the wrapping paths would answer).
pub fn handled(
    call: ToolCallRequest,
    decided: Option<Result<(GuardrailDecision, bool), ToolCallError>>,
) -> Handled {
    let Some(decided) = decided else {
        let message = dry_run(&call.tool_call);
        let ToolCall { id, name, .. } = call.tool_call;
        return Handled::Decided { id, name, decision: None, provider_error: false, message };
    };
    let ToolCall { id, name, .. } = &call.tool_call;
    match decided {
        Ok((decision, provider_error)) => {
            let message = match (decision.allow, rewritten_args(&decision)) {
                (true, Some(args)) => dry_run(&ToolCall { args: args.clone(), ..call.tool_call.clone() }),
                (true, None) => dry_run(&call.tool_call),
                (false, _) => denied_message(&call.tool_call, &decision),
            };
            let ToolCall { id, name, .. } = call.tool_call;
            Handled::Decided { id, name, decision: Some(decision), provider_error, message }
        }
        Err(ToolCallError::Interrupt(interrupt)) => {
            Handled::Interrupted { id: id.clone(), name: name.clone(), interrupt }
        }
        Err(error) => Handled::Failed { id: id.clone(), name: name.clone(), error },
    }
}

/// Decides `call` on the sync path and says what became of it;
/// `args_text` is the JSON text its arguments arrived in, if kept
/// ([`crate::jsonl::parse_line_with_args_text`]).
pub fn decide(
    middleware: Option<&GuardrailMiddleware>,
    call: ToolCallRequest,
    args_text: Option<&str>,
) -> Handled {
    let decided = middleware.map(|middleware| middleware.decide_with_args_text(&call, args_text));
    handled(call, decided)
}

/// Decides `call` on the async path and says what became of it.
pub async fn adecide(
    middleware: Option<&GuardrailMiddleware>,
    call: ToolCallRequest,
    args_text: Option<&str>,
) -> Handled {
    let decided = match middleware {
        Some(middleware) => Some(middleware.adecide_with_args_text(&call, args_text).await),
        None => None,
    };
    handled(call, decided)
}

/// The `problem` part of a `guardhost: line N: problem` error message.
fn problem(number: u64, content: &str) -> &str {
    content.strip_prefix(&format!("guardhost: line {number}: ")).unwrap_or(content)
}

/// The error tool message for a call the middleware could not take.
fn failed_message(number: u64, error: &ToolCallError, id: Option<&str>, name: Option<&str>) -> ToolMessage {
    crate::jsonl::line_error(number, &error.to_string(), id, name)
}

// ---------------------------------------------------------------- messages

/// `--output messages`: a tool message, or `{"type": "interrupt", ...}`,
/// or `{"type": "ask", ...}`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum MessageLine<'a> {
    Message(&'a ToolMessage),
    Interrupt(InterruptLine<'a>),
    Ask(AskLine<'a>),
}

/// `{"type": "ask", ...}`: the line, the call, why, and the ask to approve.
#[derive(Debug, Serialize)]
struct AskLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    line: u64,
    tool_call_id: Option<&'a str>,
    name: Option<&'a str>,
    reasons: &'a [GuardrailReason],
    ask: &'a Value,
}

/// `{"type": "interrupt", ...}`: the line, the call, and what the provider said.
#[derive(Debug, Serialize)]
struct InterruptLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    line: u64,
    tool_call_id: Option<&'a str>,
    name: Option<&'a str>,
    message: &'a str,
    payload: &'a Value,
}

// --------------------------------------------------------------- decisions

/// What a caller switches on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The call may run.
    Allow,
    /// The call is denied (by the policy, or by `fail_closed`).
    Deny,
    /// The call waits for a human's approval (`metadata["guardhost.outcome"].ask`
    /// says which, and who may give it): resume it with the approval in
    /// its context.
    Ask,
    /// The call may run, with the arguments in
    /// `metadata["guardhost.outcome"].rewrite.tool_input`.
    Rewrite,
    /// No decision: a malformed call, one the middleware could not take.
    Error,
    /// The provider raised an interrupt.
    Interrupt,
}

/// One line of `--output decisions`. The first four fields are on every
/// line; the others only for the outcomes that have them.
#[derive(Debug, Serialize)]
struct DecisionLine<'a> {
    line: u64,
    outcome: Outcome,
    tool_call_id: Option<&'a str>,
    name: Option<&'a str>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    decision: Option<DecisionFields<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorField<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    interrupt: Option<InterruptField<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a ToolMessage>,
}

/// The decision of an `allow` or `deny` line.
#[derive(Debug, Serialize)]
struct DecisionFields<'a> {
    /// False when no guardrail is installed: nothing decided, the call runs.
    guardrail: bool,
    allow: bool,
    reasons: &'a [GuardrailReason],
    policy_id: Option<&'a str>,
    metadata: &'a Map<String, Value>,
    provider_error: bool,
}

/// Why a line got no decision.
#[derive(Debug, Serialize)]
struct ErrorField<'a> {
    kind: ErrorKind,
    message: &'a str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum ErrorKind {
    /// Not a usable tool call: not UTF-8, empty, not JSON, not an object, a
    /// field of the wrong type.
    MalformedLine,
    /// A tool call whose guardrail request cannot be built (its context).
    InvalidRequest,
    /// The tool handler failed; the dry-run handler of `run` never does.
    HandlerError,
}

#[derive(Debug, Serialize)]
struct InterruptField<'a> {
    message: &'a str,
    payload: &'a Value,
}

/// Writes the answer to call `number` (its line, or its place in a batch)
/// in `format`, without a newline.
pub fn write(
    out: &mut impl std::io::Write,
    format: OutputFormat,
    number: u64,
    handled: &Handled,
) -> serde_json::Result<()> {
    match format {
        OutputFormat::Messages => write_message(out, number, handled),
        OutputFormat::Decisions => write_decision(out, number, handled),
    }
}

fn write_message(out: &mut impl std::io::Write, number: u64, handled: &Handled) -> serde_json::Result<()> {
    let failed;
    let line = match handled {
        Handled::Decided { id, name, decision: Some(decision), .. } if outcome_of(decision) == "ask" => {
            MessageLine::Ask(AskLine {
                kind: "ask",
                line: number,
                tool_call_id: id.as_deref(),
                name: name.as_deref(),
                reasons: &decision.reasons,
                ask: &decision.metadata[OUTCOME_KEY]["ask"],
            })
        }
        Handled::Decided { message, .. } | Handled::Malformed { message, .. } => {
            MessageLine::Message(message)
        }
        Handled::Failed { id, name, error } => {
            failed = failed_message(number, error, id.as_deref(), name.as_deref());
            MessageLine::Message(&failed)
        }
        Handled::Interrupted { id, name, interrupt } => MessageLine::Interrupt(InterruptLine {
            kind: "interrupt",
            line: number,
            tool_call_id: id.as_deref(),
            name: name.as_deref(),
            message: &interrupt.message,
            payload: &interrupt.payload,
        }),
    };
    serde_json::to_writer(out, &line)
}

fn write_decision(out: &mut impl std::io::Write, number: u64, handled: &Handled) -> serde_json::Result<()> {
    let failed;
    let failed_text;
    let no_metadata = Map::new();
    let (id, name) = match handled {
        Handled::Decided { id, name, .. }
        | Handled::Malformed { id, name, .. }
        | Handled::Failed { id, name, .. }
        | Handled::Interrupted { id, name, .. } => (id.as_deref(), name.as_deref()),
    };
    let mut line = DecisionLine {
        line: number,
        outcome: Outcome::Error,
        tool_call_id: id,
        name,
        decision: None,
        error: None,
        interrupt: None,
        message: None,
    };
    match handled {
        Handled::Decided { decision, provider_error, message, .. } => {
            let fields = match decision {
                Some(decision) => DecisionFields {
                    guardrail: true,
                    allow: decision.allow,
                    reasons: &decision.reasons,
                    policy_id: decision.policy_id.as_deref(),
                    metadata: &decision.metadata,
                    provider_error: *provider_error,
                },
                None => DecisionFields {
                    guardrail: false,
                    allow: true,
                    reasons: &[],
                    policy_id: None,
                    metadata: &no_metadata,
                    provider_error: false,
                },
            };
            line.outcome = match decision.as_ref().map_or("allow", outcome_of) {
                "ask" => Outcome::Ask,
                "rewrite" => Outcome::Rewrite,
                "deny" => Outcome::Deny,
                _ => Outcome::Allow,
            };
            line.decision = Some(fields);
            line.message = Some(message);
        }
        Handled::Malformed { message, .. } => {
            line.error = Some(ErrorField {
                kind: ErrorKind::MalformedLine,
                message: problem(number, &message.content),
            });
            line.message = Some(message);
        }
        Handled::Failed { error, .. } => {
            let kind = match error {
                ToolCallError::InvalidRequest(_) => ErrorKind::InvalidRequest,
                _ => ErrorKind::HandlerError,
            };
            failed = failed_message(number, error, id, name);
            failed_text = error.to_string();
            line.error = Some(ErrorField { kind, message: &failed_text });
            line.message = Some(&failed);
        }
        Handled::Interrupted { interrupt, .. } => {
            line.outcome = Outcome::Interrupt;
            line.interrupt =
                Some(InterruptField { message: &interrupt.message, payload: &interrupt.payload });
        }
    }
    serde_json::to_writer(out, &line)
}

/// The id and name of a malformed line, when it is a JSON object that has
/// them as strings, each once (a line with two ids has none to trust).
pub fn readable_id_and_name(bytes: &[u8]) -> (Option<String>, Option<String>) {
    crate::jsonl::unambiguous_id_and_name(bytes)
}
