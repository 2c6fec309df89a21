//! `guardhost run`: JSON lines of tool calls in, one tool message line out
//! per input line, in order.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use guardhost::{
    GuardrailMiddleware, JsonlAuditSink, ToolCall, ToolCallError, ToolCallRequest, ToolMessage, ToolStatus,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::eval::dry_run;
use super::{load_guardrail, CliError};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[arg(long, value_name = "FILE", help = super::CONFIG_HELP)]
    config: Option<PathBuf>,
    /// Read tool calls from FILE instead of stdin; one JSON object a line:
    /// {"name": ..., "args": {...}, "id": ..., "context": {...}}.
    #[arg(long, value_name = "FILE")]
    input: Option<PathBuf>,
    /// Append an audit event (JSON line) to FILE for every denial and
    /// provider error.
    #[arg(long, value_name = "FILE")]
    audit: Option<PathBuf>,
}

/// One input line. Keys other than these are ignored (runtimes add their own,
/// such as `"type": "tool_call"`).
#[derive(Debug, Deserialize)]
struct Line {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    args: Option<Map<String, Value>>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    context: Option<Map<String, Value>>,
}

#[derive(Debug, Default)]
struct Counts {
    allowed: u64,
    denied: u64,
    errors: u64,
    interrupts: u64,
}

/// The answer to a line that is not a usable tool call; the call's id and
/// name are kept when they could be read.
fn line_error(number: u64, problem: &str, id: Option<&str>, name: Option<&str>) -> ToolMessage {
    ToolMessage {
        content: format!("guardhost: line {number}: {problem}"),
        tool_call_id: id.unwrap_or("missing_id").to_owned(),
        name: Some(name.unwrap_or("unknown_tool").to_owned()),
        status: ToolStatus::Error,
    }
}

/// What a well-formed line looks like, for the answers to malformed ones.
const EXPECTED: &str =
    "expected one JSON object per line: {\"name\": \"tool\", \"args\": {...}, \"id\": \"call id\", \"context\": {...}}";

/// Parses one line into a tool call, or says what is wrong with it.
fn parse_line(number: u64, bytes: &[u8]) -> Result<ToolCallRequest, ToolMessage> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| line_error(number, &format!("not valid UTF-8 ({e}); {EXPECTED}"), None, None))?;
    if text.trim().is_empty() {
        return Err(line_error(number, &format!("empty line; {EXPECTED}"), None, None));
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|e| line_error(number, &format!("invalid JSON ({e}); {EXPECTED}"), None, None))?;
    if !value.is_object() {
        return Err(line_error(number, &format!("not a JSON object; {EXPECTED}"), None, None));
    }
    let line = Line::deserialize(&value).map_err(|e| {
        let field = |key: &str| value.get(key).and_then(Value::as_str);
        line_error(number, &format!("invalid tool call: {e}; {EXPECTED}"), field("id"), field("name"))
    })?;
    Ok(ToolCallRequest {
        tool_call: ToolCall { name: line.name, args: line.args.unwrap_or_default(), id: line.id },
        context: line.context,
    })
}

/// What one input line is answered with.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Answer {
    /// The tool message the agent would read.
    Message(ToolMessage),
    /// The provider raised a control-flow signal: not a decision, so not a
    /// tool message either.
    Interrupt(InterruptLine),
}

/// `{"type": "interrupt", ...}`: the line, the call, and what the provider said.
#[derive(Debug, Serialize)]
struct InterruptLine {
    #[serde(rename = "type")]
    kind: &'static str,
    line: u64,
    tool_call_id: Option<String>,
    name: Option<String>,
    message: String,
    payload: Value,
}

/// Answers one parsed call.
fn answer(
    middleware: Option<&GuardrailMiddleware>,
    number: u64,
    call: ToolCallRequest,
    counts: &mut Counts,
) -> Answer {
    let Some(middleware) = middleware else {
        counts.allowed += 1;
        return Answer::Message(dry_run(&call.tool_call));
    };
    let (tool_call_id, name) = (call.tool_call.id.clone(), call.tool_call.name.clone());
    match middleware.call_with_verdict(call, &|call| Ok(dry_run(&call.tool_call))) {
        Ok((verdict, message)) => {
            if verdict.allowed() {
                counts.allowed += 1;
            } else {
                counts.denied += 1;
            }
            Answer::Message(message)
        }
        Err(ToolCallError::Interrupt(interrupt)) => {
            counts.interrupts += 1;
            eprintln!("guardhost: line {number}: the provider raised an interrupt: {}", interrupt.message);
            Answer::Interrupt(InterruptLine {
                kind: "interrupt",
                line: number,
                tool_call_id,
                name,
                message: interrupt.message,
                payload: interrupt.payload,
            })
        }
        Err(error) => {
            counts.errors += 1;
            Answer::Message(line_error(number, &error.to_string(), tool_call_id.as_deref(), name.as_deref()))
        }
    }
}

pub fn run(args: RunArgs) -> Result<ExitCode, CliError> {
    let (_, guardrail) = load_guardrail(args.config.as_deref())?;
    let mut middleware = guardrail.map(|g| g.middleware);
    if let Some(path) = &args.audit {
        let sink = JsonlAuditSink::open(path).map_err(|source| CliError::Io {
            what: format!("cannot open audit file {}", path.display()),
            source,
        })?;
        middleware = middleware.map(|m| m.with_audit_sink(Arc::new(sink)));
    }
    let input: Box<dyn Read> = match &args.input {
        Some(path) => Box::new(File::open(path).map_err(|source| CliError::Io {
            what: format!("cannot open input {}", path.display()),
            source,
        })?),
        None => Box::new(io::stdin().lock()),
    };
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut out = BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    let write_error = |source| CliError::Io { what: "cannot write to stdout".into(), source };

    let mut counts = Counts::default();
    let mut malformed = 0u64;
    let mut bytes = Vec::with_capacity(1024);
    let mut number = 0u64;
    loop {
        // Flush before blocking on input, so an interactive caller sees each
        // answer as soon as its line is processed.
        if reader.buffer().is_empty() {
            out.flush().map_err(write_error)?;
        }
        bytes.clear();
        let read = reader
            .read_until(b'\n', &mut bytes)
            .map_err(|source| CliError::Io { what: "cannot read input".into(), source })?;
        if read == 0 {
            break;
        }
        number += 1;
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        let message = match parse_line(number, &bytes) {
            Ok(call) => answer(middleware.as_ref(), number, call, &mut counts),
            Err(message) => {
                malformed += 1;
                Answer::Message(message)
            }
        };
        serde_json::to_writer(&mut out, &message).map_err(|e| write_error(e.into()))?;
        out.write_all(b"\n").map_err(write_error)?;
    }
    out.flush().map_err(write_error)?;

    let mut summary = format!(
        "guardhost run: {number} lines: {} allowed, {} denied, {} errors",
        counts.allowed,
        counts.denied,
        counts.errors + malformed
    );
    if counts.interrupts > 0 {
        summary.push_str(&format!(", {} interrupts", counts.interrupts));
    }
    eprintln!("{summary}");
    Ok(if counts.interrupts > 0 {
        ExitCode::from(3)
    } else if malformed + counts.errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
