//! `guardhost run`: JSON lines of tool calls in, one answer line out per
//! input line, in order: a tool message (`--output messages`) or a decision
//! object (`--output decisions`, the co-process protocol of
//! `docs/protocol.md`).

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use guardhost::{
    Guardrail, GuardrailMiddleware, Isolation, JsonlAuditSink, ProviderInfo, ProviderSource, ReloadPolicy,
    Reloader, ToolCallRequest,
};
use guardhost_lines::answer::{self, Counts, Handled, OutputFormat};
use guardhost_lines::jsonl::{parse_line, parse_line_with_args_text, read_line, Line};

use crate::error::CliError;
use crate::setup::load_guardrail;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[arg(long, value_name = "FILE", help = crate::setup::CONFIG_HELP)]
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
    /// How each line is answered; `decisions` is the protocol for a program
    /// that drives guardhost as a co-process (docs/protocol.md).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = Output::Messages)]
    output: Output,
    /// Use the async path (awrap_tool_call, the provider's aevaluate) on a
    /// tokio runtime. Lines are still answered one at a time, in order.
    #[arg(long = "async")]
    use_async: bool,
    #[arg(long, help = crate::setup::REQUIRE_HELP)]
    require_guardrail: bool,
    /// The longest input line, in bytes (without its line end); a longer
    /// one is answered with an error in its place, without being held in
    /// memory or echoed back.
    #[arg(long, value_name = "BYTES", default_value_t = guardhost_lines::jsonl::DEFAULT_MAX_LINE_BYTES,
          value_parser = line_limit)]
    max_line_bytes: usize,
}

/// `--output`: the command line's names of [`OutputFormat`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// One tool message a line (what the agent would read), or
    /// {"type": "interrupt", ...}.
    Messages,
    /// One decision object a line: `line`, `outcome` (allow, deny, error,
    /// interrupt), every reason, policy_id, metadata, and the tool message.
    Decisions,
}

impl From<Output> for OutputFormat {
    fn from(output: Output) -> Self {
        match output {
            Output::Messages => OutputFormat::Messages,
            Output::Decisions => OutputFormat::Decisions,
        }
    }
}

/// `--max-line-bytes`: a whole number of bytes, at least 1.
fn line_limit(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("a line limit of 0 bytes would refuse every line; give at least 1".into()),
        Ok(limit) => Ok(limit),
        Err(_) => Err(format!("`{text}` is not a number of bytes (e.g. 4194304 for 4 MiB)")),
    }
}

/// How often --watch looks at the files.
const WATCH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(200);

/// Where calls are decided: the sync path, or the async path on a runtime.
enum CallPath {
    Sync,
    Async { runtime: tokio::runtime::Runtime },
}

impl CallPath {
    fn new(use_async: bool) -> Result<Self, CliError> {
        if !use_async {
            return Ok(CallPath::Sync);
        }
        Ok(CallPath::Async { runtime: crate::setup::async_runtime()? })
    }

    /// Decides one call (the provider's `evaluate`, or its `aevaluate` on
    /// the runtime) and says what became of it.
    fn decide(
        &self,
        middleware: Option<&GuardrailMiddleware>,
        call: ToolCallRequest,
        args_text: Option<&str>,
    ) -> Handled {
        match self {
            CallPath::Sync => answer::decide(middleware, call, args_text),
            CallPath::Async { runtime } => runtime.block_on(answer::adecide(middleware, call, args_text)),
        }
    }
}

/// Whether the answers decided so far must reach stdout before `guardrail`'s
/// provider is asked about the next line: for every provider but the
/// built-in one running in this process. That one is the host's own code,
/// linked in: it cannot hang, crash or exit other than as the host itself
/// would, so flushing before each call to it would protect nothing (and
/// cost a write a line). A library (Rust or C ABI), a provider program and
/// `isolation: process` all get the flush.
fn flush_before_asking(guardrail: &Guardrail) -> bool {
    flush_before_asking_provider(&guardrail.info)
}

fn flush_before_asking_provider(info: &ProviderInfo) -> bool {
    !(matches!(info.source, ProviderSource::Builtin { .. }) && info.isolation == Isolation::InProcess)
}

pub fn run(args: RunArgs) -> Result<ExitCode, CliError> {
    let require = crate::setup::required(args.require_guardrail)?;
    // Before any provider is loaded: what it prints goes to stderr, never
    // between the answers, and it cannot read the calls.
    let (stdin, stdout) = guardhost_isolation::stdio::private_stdio()
        .map_err(|source| CliError::Io { what: "cannot set up the standard streams".into(), source })?;
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
            // Under --require-guardrail a reload may not weaken the
            // guardrail either; without, it is logged as an error.
            let policy = if require { ReloadPolicy::Refuse } else { ReloadPolicy::Report };
            let reloader = Arc::new(Reloader::open_with(path, policy).map_err(|e| match e {
                guardhost::ReloadError::Config(e) => CliError::Config(e),
                guardhost::ReloadError::Build(e) => CliError::Build(e),
                other => CliError::Usage(other.to_string()),
            })?);
            if reloader.current().is_none() {
                // Loaded again to say why (a reload never takes a guardrail away).
                let config = crate::setup::load_config(Some(path))?;
                if require {
                    config.require_guardrail()?;
                }
                crate::setup::warn_unguarded(&config);
            }
            Arc::clone(&reloader)
                .watch(WATCH_INTERVAL)
                .map_err(|source| CliError::Io { what: "cannot start the config watcher".into(), source })?;
            (None, Some(reloader))
        }
        _ => {
            let (config, guardrail) = load_guardrail(args.config.as_deref(), require)?;
            crate::setup::warn_unguarded(&config);
            (guardrail, None)
        }
    };
    let fixed_flush = fixed.as_ref().is_some_and(flush_before_asking);
    let fixed = fixed.map(|g| with_audit(g.middleware));
    let input: Box<dyn Read> = match &args.input {
        Some(path) => Box::new(File::open(path).map_err(|source| CliError::Io {
            what: format!("cannot open input {}", path.display()),
            source,
        })?),
        None => stdin,
    };
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut out = BufWriter::with_capacity(64 * 1024, stdout);
    let write_error = crate::error::stdout_error;

    let path = CallPath::new(args.use_async)?;
    let mut counts = Counts::default();
    let mut bytes = Vec::with_capacity(1024);
    loop {
        // Flush before blocking on input, so an interactive caller sees each
        // answer as soon as its line is processed (and before each call into
        // the provider, below).
        if reader.buffer().is_empty() {
            out.flush().map_err(write_error)?;
        }
        let read = read_line(&mut reader, &mut bytes, args.max_line_bytes)
            .map_err(|source| CliError::Io { what: "cannot read input".into(), source })?;
        let Some(read) = read else { break };
        let number = counts.lines + 1;
        if let Line::TooLong { length } = read {
            let (message, id, name) =
                guardhost_lines::jsonl::too_long(number, length, args.max_line_bytes, &bytes);
            let handled = Handled::Malformed { id, name, message };
            counts.add(&handled);
            answer::write(&mut out, args.output.into(), number, &handled)
                .map_err(|e| write_error(e.into()))?;
            out.write_all(b"\n").map_err(write_error)?;
            continue;
        }
        let current = reloader.as_ref().and_then(|r| r.current());
        let flush = match &current {
            Some(guardrail) => flush_before_asking(guardrail),
            None => fixed_flush,
        };
        let current = current.map(|g| with_audit(g.middleware.clone()));
        let middleware = if reloader.is_some() { current.as_ref() } else { fixed.as_ref() };
        // The arguments' text is kept for a provider that reads them: it is
        // handed that text rather than their serialisation.
        let parsed = match middleware.is_some_and(GuardrailMiddleware::reads_tool_input) {
            true => parse_line_with_args_text(number, &bytes),
            false => parse_line(number, &bytes).map(|call| (call, None)),
        };
        let handled = match parsed {
            Ok((call, args_text)) => {
                // Every answer decided so far reaches stdout before the
                // provider is asked again: a provider that hangs, crashes or
                // exits on this call cannot take them down with it (the
                // built-in one, the host's own code, cannot do any of that).
                if middleware.is_some() && flush {
                    out.flush().map_err(write_error)?;
                }
                crate::exit_guard::deciding_line(number);
                let handled = path.decide(middleware, call, args_text);
                crate::exit_guard::deciding_line(0);
                if let Handled::Interrupted { interrupt, .. } = &handled {
                    eprintln!(
                        "guardhost: line {number}: the provider raised an interrupt: {}",
                        interrupt.message
                    );
                }
                handled
            }
            Err(message) => {
                let (id, name) = answer::readable_id_and_name(&bytes);
                Handled::Malformed { id, name, message }
            }
        };
        counts.add(&handled);
        answer::write(&mut out, args.output.into(), number, &handled).map_err(|e| write_error(e.into()))?;
        out.write_all(b"\n").map_err(write_error)?;
    }
    out.flush().map_err(write_error)?;
    // Every audit event is in its file before the summary says the run is over.
    if let Some(sink) = &audit {
        sink.flush();
    }

    eprintln!("{}", counts.summary());
    Ok(ExitCode::from(counts.exit_code()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(source: ProviderSource, isolation: Isolation) -> ProviderInfo {
        ProviderInfo {
            name: "p".into(),
            source,
            abi_version: (1, 0),
            abi_kind: guardhost::AbiKind::Rust,
            accepted_keys: Vec::new(),
            accepts_extra_keys: false,
            framework_injected: false,
            volatile_metadata_keys: Vec::new(),
            path_keys: Vec::new(),
            unread_inputs: Vec::new(),
            never_blocks: false,
            timeout_ms: None,
            isolation,
            transport: None,
            sha256: None,
        }
    }

    #[test]
    fn only_the_built_in_provider_in_process_goes_without_the_flush_before_each_call() {
        let builtin = || ProviderSource::Builtin { symbol: "AllowlistProvider".into() };
        assert!(!flush_before_asking_provider(&info(builtin(), Isolation::InProcess)));
        assert!(flush_before_asking_provider(&info(builtin(), Isolation::Process)));
        let library = ProviderSource::Library { path: "/lib/libp.so".into(), symbol: "P".into() };
        assert!(flush_before_asking_provider(&info(library, Isolation::InProcess)));
        let program = ProviderSource::Program { command: vec!["p".into()] };
        assert!(flush_before_asking_provider(&info(program, Isolation::Process)));
    }
}
