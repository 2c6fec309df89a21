//! The `guardhost` command: `check`, `eval`, `run`, `explain`, `test`,
//! `diff`, `schema`, `conformance`, `bench`, `serve`, `mcp` and
//! `provider-server`, over the
//! guardhost library (`guardhost`), process isolation
//! (`guardhost-isolation`), the conformance kit (`guardhost-kit`) and the
//! MCP proxy (`guardhost-mcp`). This file parses the arguments, sets up logging and
//! dispatches; each command is a module of its own, over `error` (how a
//! command fails, and its writes to standard output) and `setup` (what every
//! command does first). `docs/cli.md` documents them.

/// `println!` for a command's output, used with `?`: a closed standard
/// output is `CliError::StdoutClosed` (the command ends quietly with
/// status 141), never a panic.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::error::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` likewise (see [`outln`]).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::error::write_stdout(format_args!($($arg)*))
    };
}

mod bench;
mod check;
mod conformance;
mod diff;
mod error;
mod eval;
mod exit_guard;
mod explain;
mod mcp;
mod run;
mod schema;
mod setup;
mod test;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use error::{CliError, CLOSED_STDOUT};
use setup::{CONFIG_HELP, REQUIRE_HELP};

const AFTER_HELP: &str = "\
Without --config, guardhost uses its embedded default: the built-in allowlist
provider (builtin:AllowlistProvider), enabled, fail-closed, denying the tools
`bash`, `write_file` and `str_replace` and allowing every other tool.
`guardhost check` shows it; docs/authors.md shows how to write your own.

Exit codes: 0 ok / allowed, 1 denied (eval), malformed input lines (run), a
failed check (conformance) or a changed decision (diff), 2 usage, config or
load error (and input lines that are not calls, for diff), 3 a provider
interrupt, 4 the provider failed on some calls (run), 5 a provider in this
process ended it (it called exit), 141 stdout was closed before everything
was written (its reader went away, as with `| head`).
Logs go to stderr; set GUARDHOST_LOG (e.g. `error`, `info`, `debug`) to change
how much (default `warn`: every denial is logged).
GUARDHOST_REQUIRE_GUARDRAIL=1 makes every command refuse a config that installs
no guardrail, as --require-guardrail does.";

/// guardhost: decides, before each tool call an agent makes, whether it may run.
#[derive(Debug, Parser)]
#[command(name = "guardhost", version, about, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Load, resolve and construct the configured provider, decide one
    /// harmless call with it, and describe it.
    Check {
        #[arg(long, value_name = "FILE", help = CONFIG_HELP)]
        config: Option<PathBuf>,
        #[arg(long, help = REQUIRE_HELP)]
        require_guardrail: bool,
    },
    /// Run one tool call through the guardrail and print the outcome as JSON.
    Eval(eval::EvalArgs),
    /// Read tool calls as JSON lines and answer each with one JSON line, in
    /// order: a tool message (allowed: a dry run; denied or malformed: an
    /// error message), or {"type": "interrupt", ...} when the provider raised
    /// an interrupt. With --output decisions, one decision object per line
    /// (docs/protocol.md): the way to drive guardhost from another process.
    Run(run::RunArgs),
    /// Check that a provider library is fit to guard every tool call: load,
    /// descriptor, construction, a corpus of requests, decision hygiene,
    /// sync/async agreement, determinism, thread safety, latency, memory.
    /// Exit 0 when no check fails, 1 when one does, 2 when the kit could not
    /// run.
    Conformance(conformance::ConformanceArgs),
    /// For one call, what every guard (authorization, each chain entry)
    /// made of it, in order, with every reason (a Cedar entry's reasons are
    /// the policies that decided).
    Explain(explain::ExplainArgs),
    /// Run policy tests: YAML files of calls and the outcome each must get
    /// (allow, deny, ask, rewrite, error; optionally the reason's code, the
    /// deciding policy, the chain entry), decided by the configured
    /// guardrail. Exit 0 when every case passes, 1 when one fails.
    Test(test::TestArgs),
    /// Decide every call of an input (`run` lines, or a decision log written
    /// with `args: true`) under two configs, `--config OLD --config NEW`,
    /// and print each call whose outcome, reason code, deciding policy or
    /// deciding chain entry changes, with the counts. Only names and codes
    /// are printed. Exit 0 when nothing changed, 1 when a call did, 2 when
    /// a config or an input line cannot be used.
    #[command(
        override_usage = "guardhost diff --config OLD --config NEW [--input FILE] [--format text|json]"
    )]
    Diff(diff::DiffArgs),
    /// Print a JSON Schema (draft 2020-12) of the config file: the
    /// `guardrails:`, `authorization:` and `mcp:` sections, and the
    /// `config:` of each built-in provider by the symbol its `use:` names.
    /// Editors validate a config with it (`# yaml-language-server:
    /// $schema=...` on the file's first line).
    Schema,
    /// Measure what the guardrail costs per tool call: a realistic mixed
    /// stream of DeerFlow tool calls through the configured provider; p50 /
    /// p99 / max per call, calls per second, peak memory.
    Bench(bench::BenchArgs),
    /// Serve the guardrail over HTTP/JSON (runs `guardhost-server`, which
    /// must be beside this executable; `guardhost serve --help` lists its
    /// options): POST /v1/decide, /v1/decide/batch; GET /healthz, /readyz,
    /// /metrics, /openapi.json.
    #[command(disable_help_flag = true)]
    Serve {
        /// The options of `guardhost-server`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "OPTIONS")]
        options: Vec<std::ffi::OsString>,
    },
    /// Guard an MCP server for any MCP client: `guardhost mcp --config F --
    /// CMD ARGS...` starts the server (`--upstream URL` reaches one over
    /// HTTP) and relays the Model Context Protocol over stdio (`--listen
    /// ADDR`: over HTTP, a session per client), deciding every tools/call
    /// (and resources/read, prompts/get) with the configured guardrail,
    /// filtering tools/list and pinning tool definitions (docs/mcp.md).
    /// `guardhost mcp pins` lists and accepts changed tools.
    Mcp(mcp::McpArgs),
    /// Serve one provider to a host over stdin/stdout (what
    /// `isolation: process` starts; not for interactive use).
    #[command(hide = true)]
    ProviderServer,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `isolation: process` and `command:` providers start through
    // guardhost-isolation.
    guardhost_isolation::install();
    // The shipped providers, built in for this program (the library links
    // none): `use: builtin:AllowlistProvider` and the others.
    guardhost_builtins::register();
    // A benchmark logs errors only by default: a warning per denial would
    // measure the terminal, not the guardrail.
    init_logging(match cli.command {
        Command::Bench(_) => "error",
        // The report says what each case got (each entry's answer); logs
        // would only repeat it.
        Command::Test(_) | Command::Explain(_) | Command::Diff(_) => "off",
        _ => "warn",
    });
    // A provider in this process that calls `exit` must not pass for a
    // clean end (see `exit_guard`). The provider server's own end is read
    // by its host.
    let _armed = match cli.command {
        Command::Check { .. } => Some(exit_guard::arm(exit_guard::Armed::Check)),
        Command::Eval(_) => Some(exit_guard::arm(exit_guard::Armed::Eval)),
        Command::Explain(_) => Some(exit_guard::arm(exit_guard::Armed::Other)),
        Command::Run(_) => Some(exit_guard::arm(exit_guard::Armed::Run)),
        Command::Mcp(_) => Some(exit_guard::arm(exit_guard::Armed::Other)),
        Command::Conformance(_) | Command::Bench(_) | Command::Test(_) | Command::Diff(_) => {
            Some(exit_guard::arm(exit_guard::Armed::Other))
        }
        Command::ProviderServer | Command::Serve { .. } | Command::Schema => None,
    };
    let result = match cli.command {
        Command::Check { config, require_guardrail } => check::run(config.as_deref(), require_guardrail),
        Command::Eval(args) => eval::run(args),
        Command::Run(args) => run::run(args),
        Command::Conformance(args) => conformance::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Test(args) => test::run(args),
        Command::Diff(args) => diff::run(args),
        Command::Schema => schema::run(),
        Command::Explain(args) => explain::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::ProviderServer => match guardhost_isolation::entry::run() {
            Ok(code) => Ok(ExitCode::from(code)),
            Err(error) => Err(CliError::Usage(error.to_string())),
        },
        Command::Serve { options } => serve(options),
    };
    match result {
        Ok(code) => code,
        // A reader that went away is no error to report: `guardhost eval
        // ... | head -c 10` ends like `cat ... | head -c 10`.
        Err(CliError::StdoutClosed) => ExitCode::from(CLOSED_STDOUT),
        Err(error) => {
            eprintln!("guardhost: error: {error}");
            ExitCode::from(2)
        }
    }
}

/// The environment variable naming the `guardhost-server` executable that
/// `guardhost serve` runs, when it is not beside this one.
const SERVER_BIN_ENV: &str = "GUARDHOST_SERVER_BIN";

/// `guardhost serve`: replaces this process with `guardhost-server`, found
/// beside this executable (or named by `$GUARDHOST_SERVER_BIN`).
fn serve(options: Vec<std::ffi::OsString>) -> Result<ExitCode, CliError> {
    let program = match std::env::var_os(SERVER_BIN_ENV) {
        Some(path) => PathBuf::from(path),
        None => std::env::current_exe()
            .map_err(|source| CliError::Io { what: "cannot find this executable".into(), source })?
            .with_file_name(format!("guardhost-server{}", std::env::consts::EXE_SUFFIX)),
    };
    if !program.is_file() {
        return Err(CliError::Usage(format!(
            "`guardhost serve` runs guardhost-server, and there is none at {}: build it with `cargo build \
             --release -p guardhost-server` (it lands beside guardhost), install it with `cargo install --path \
             server`, or set {SERVER_BIN_ENV} to its path",
            program.display()
        )));
    }
    let mut command = std::process::Command::new(&program);
    command.args(options);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let error = command.exec();
        Err(CliError::Io { what: format!("cannot run {}", program.display()), source: error })
    }
    #[cfg(not(unix))]
    {
        let status = command
            .status()
            .map_err(|source| CliError::Io { what: format!("cannot run {}", program.display()), source })?;
        Ok(ExitCode::from(status.code().unwrap_or(2).clamp(0, 255) as u8))
    }
}

fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("GUARDHOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .without_time()
        .init();
}
