//! `guardhost run`: JSON lines of tool calls in, one tool message line out
//! per input line, in order.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use guardhost::{GuardrailMiddleware, JsonlAuditSink, Reloader, ToolCallError, ToolCallRequest, ToolMessage};
use serde::Serialize;
use serde_json::Value;

use guardhost::jsonl::{line_error, parse_line};

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
    /// Reload when the config file or the provider's library changes: the
    /// new guardrail is built aside and swapped in only if it works (a
    /// broken one is logged and the old one keeps serving). Needs --config.
    #[arg(long, requires = "config")]
    watch: bool,
}

/// How often --watch looks at the files.
const WATCH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(200);

#[derive(Debug, Default)]
struct Counts {
    allowed: u64,
    denied: u64,
    errors: u64,
    interrupts: u64,
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
    let audit = match &args.audit {
        Some(path) => Some(Arc::new(JsonlAuditSink::open(path).map_err(|source| CliError::Io {
            what: format!("cannot open audit file {}", path.display()),
            source,
        })?)),
        None => None,
    };
    let with_audit = |middleware: GuardrailMiddleware| match &audit {
        Some(sink) => middleware.with_audit_sink(sink.clone()),
        None => middleware,
    };
    // With --watch, each line takes the guardrail current at that moment.
    let (fixed, reloader) = match (&args.config, args.watch) {
        (Some(path), true) => {
            let reloader = Arc::new(Reloader::open(path).map_err(|e| match e {
                guardhost::ReloadError::Config(e) => CliError::Config(e),
                guardhost::ReloadError::Build(e) => CliError::Build(e),
                other => CliError::Usage(other.to_string()),
            })?);
            Arc::clone(&reloader)
                .watch(WATCH_INTERVAL)
                .map_err(|source| CliError::Io { what: "cannot start the config watcher".into(), source })?;
            (None, Some(reloader))
        }
        _ => (load_guardrail(args.config.as_deref())?.1.map(|g| with_audit(g.middleware)), None),
    };
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
        let current = reloader.as_ref().and_then(|r| r.current()).map(|g| with_audit(g.middleware.clone()));
        let middleware = if reloader.is_some() { current.as_ref() } else { fixed.as_ref() };
        let message = match parse_line(number, &bytes) {
            Ok(call) => answer(middleware, number, call, &mut counts),
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
