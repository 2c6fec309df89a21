//! `guardhost-server` (also `guardhost serve`): the configured guardrail as
//! an HTTP/JSON decision service. docs/server.md is its guide.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use guardhost::{install, LoadedConfig, ReloadPolicy, Reloader};
use guardhost_server::options::{DEFAULT_DECISION_TIMEOUT_MS, DEFAULT_LISTEN};
use guardhost_server::pending::Pending;
use guardhost_server::{Approvers, Listen, Metrics, Options, Server, Service, Source};

/// How often --watch looks at the config file and the provider's library.
const WATCH_INTERVAL: Duration = Duration::from_millis(200);

/// guardhost-server: asks the configured guardrail, over HTTP, whether a
/// tool call may run.
#[derive(Debug, Parser)]
#[command(name = "guardhost-server", version, about, after_help = AFTER_HELP)]
struct Args {
    /// A DeerFlow-style config.yaml (its `guardrails:` section is used) or a
    /// file whose top level is that section. Default: the embedded default
    /// config (the built-in allowlist, denying bash, write_file and
    /// str_replace).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The TCP address to listen on; port 0 lets the system choose (the
    /// address is printed).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN, conflicts_with = "unix")]
    listen: std::net::SocketAddr,
    /// Listen on a Unix socket at this path instead.
    #[arg(long, value_name = "PATH")]
    unix: Option<PathBuf>,
    /// Require `Authorization: Bearer <token>` on every route but /healthz
    /// and /readyz, the token read from this environment variable (never
    /// from the command line, which other users can read).
    #[arg(long, value_name = "NAME")]
    token_env: Option<String>,
    /// Reload when the config file or the provider's library changes (the
    /// new guardrail is built aside and swapped in only if it works); SIGHUP
    /// reloads too. Needs --config.
    #[arg(long, requires = "config")]
    watch: bool,
    /// The largest request body accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    max_body: usize,
    /// The most calls one batch may carry.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    max_batch: usize,
    /// Connections served at once; a connection beyond is answered 503.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_connections: usize,
    /// How long a client may take to send a request's head (an idle
    /// connection is closed after this), then its body, and to take each
    /// part of an answer, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    request_timeout_ms: u64,
    /// How long a shutdown (SIGTERM, SIGINT) waits for the calls in flight,
    /// in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    drain_timeout_ms: u64,
    /// How long one call's decision may take, in milliseconds; past it the
    /// call is answered as a provider error, which `fail_closed` decides
    /// (deny with oap.evaluator_error, or allow under fail-open).
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_DECISION_TIMEOUT_MS,
          value_parser = clap::value_parser!(u64).range(1..))]
    decision_timeout_ms: u64,
    /// Threads of the async runtime (default: one per CPU).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Refuse to start (exit 2) when the config installs no guardrail
    /// (`enabled: false`, no provider, or no `guardrails:` section). The
    /// environment variable GUARDHOST_REQUIRE_GUARDRAIL=1 (or true) does
    /// the same.
    #[arg(long, conflicts_with = "allow_unguarded")]
    require_guardrail: bool,
    /// Serve even when the config installs no guardrail, every call allowed
    /// undecided, and say ready (/readyz 200). Without it /readyz answers
    /// 503 `unguarded` then, so a rollout of such a config does not pass.
    #[arg(long)]
    allow_unguarded: bool,
    /// An approver of held calls and the environment variable holding
    /// their bearer token (NAME=ENV; repeat for each approver). The token
    /// is read, then removed from the environment; it authenticates the
    /// approver on /v1/pending, and names who answered.
    #[arg(long, value_name = "NAME=ENV")]
    approver: Vec<String>,
    /// A file of approvers, one NAME=ENV a line (as --approver takes it;
    /// blank lines and lines starting with # are skipped): the names and
    /// the environment variables holding their tokens, never the tokens.
    #[arg(long, value_name = "FILE")]
    approvers_file: Option<PathBuf>,
    /// A header naming the approver, set by a proxy in front of this
    /// server that authenticates approvers (e.g. X-Forwarded-User). Needs
    /// --trust-approver-header.
    #[arg(long, value_name = "HEADER", requires = "trust_approver_header")]
    approver_header: Option<String>,
    /// The operator's word that every request reaching this server comes
    /// through the proxy that sets --approver-header (anyone else who can
    /// reach it could name any approver).
    #[arg(long, requires = "approver_header")]
    trust_approver_header: bool,
    /// Let an answer to a held call come without an approver's identity,
    /// `approved_by` being whatever its body says (the behaviour before
    /// approvers were authenticated). Logged as a warning at start.
    #[arg(long)]
    approvals_unauthenticated: bool,
    /// Keep held calls in this Redis server (redis://[:password@]host[:port][/db],
    /// or env:NAME to read that URL from the environment variable NAME),
    /// shared by every replica that names it, instead of this process's
    /// memory.
    #[arg(long, value_name = "URL")]
    pending_store: Option<String>,
}

const AFTER_HELP: &str = "\
Routes: POST /v1/decide (one tool call, the shape of a `guardhost run` line:
{\"name\", \"args\", \"id\", \"context\"}) answers the decision `guardhost run
--output decisions` prints; POST /v1/decide/batch ({\"calls\": [...]}) answers
{\"decisions\": [...]} in order; GET /v1/pending lists the calls held for
approval, GET /v1/pending/{id} shows one (and its answer), POST
/v1/pending/{id} answers it (approvers: --approver, --approver-header); GET
/healthz, /readyz, /metrics (Prometheus), /openapi.json.
Exit codes: 0 after a clean shutdown (SIGTERM, SIGINT), 2 when the config,
the provider or the listener cannot be set up, or when a guardrail is required
(--require-guardrail, GUARDHOST_REQUIRE_GUARDRAIL=1) and the config installs
none. Without a guardrail /readyz answers 503 `unguarded` unless
--allow-unguarded is given.
Logs go to stderr; set GUARDHOST_LOG (e.g. `error`, `info`, `debug`).";

fn main() -> ExitCode {
    let args = Args::parse();
    // `isolation: process` and `command:` providers start through
    // guardhost-isolation.
    guardhost_isolation::install();
    // The shipped providers, built in for this program (the library links
    // none): `use: builtin:AllowlistProvider` and the others.
    guardhost_builtins::register();
    let filter = tracing_subscriber::EnvFilter::try_from_env("GUARDHOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("guardhost-server: error: {error}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> Result<(), String> {
    let require =
        guardhost::require_guardrail_from_env().map_err(|e| e.to_string())? || args.require_guardrail;
    if require && args.allow_unguarded {
        return Err(format!(
            "--allow-unguarded serves without a guardrail, but {}=1 in the environment requires one; drop one of \
             the two",
            guardhost::REQUIRE_GUARDRAIL_VAR
        ));
    }
    let token = match &args.token_env {
        Some(name) => match std::env::var(name) {
            Ok(token) if !token.is_empty() => {
                // Out of the environment that provider processes and
                // programs inherit. (No other thread runs yet.)
                std::env::remove_var(name);
                Some(token)
            }
            // Never the value: name the variable.
            _ => {
                return Err(format!(
                    "--token-env {name}: the environment variable {name} is not set or empty"
                ))
            }
        },
        None => None,
    };
    let mut given: Vec<(String, String)> =
        args.approver.iter().map(|a| ("--approver".to_owned(), a.clone())).collect();
    if let Some(path) = &args.approvers_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--approvers-file {}: cannot read it: {e}", path.display()))?;
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if !line.is_empty() && !line.starts_with('#') {
                given.push((
                    format!("--approvers-file {} line {}", path.display(), number + 1),
                    line.to_owned(),
                ));
            }
        }
    }
    let mut approvers = Vec::new();
    for (from, given) in &given {
        let Some((name, variable)) = given.split_once('=') else {
            return Err(format!(
                "{from}: expected NAME=ENV (the approver's name, and the environment variable holding their \
                 token)"
            ));
        };
        let token = secret_from_env(&format!("{from}: "), variable.trim())?;
        approvers.push((name.trim().to_owned(), token));
    }
    let mut approvers = Approvers::new(approvers, args.approver_header.clone(), token.as_deref())
        .map_err(|e| e.to_string())?;
    approvers.unauthenticated = args.approvals_unauthenticated;
    let pending = match &args.pending_store {
        Some(url) => {
            let url = match url.strip_prefix("env:") {
                Some(variable) => secret_from_env("--pending-store env:", variable.trim())?,
                None => url.clone(),
            };
            Some(Pending::redis(&url).map_err(|e| e.to_string())?)
        }
        None => None,
    };
    let listen = match args.unix {
        Some(path) => Listen::Unix(path),
        None => Listen::Tcp(args.listen),
    };
    if token.is_none() && matches!(&listen, Listen::Tcp(address) if !address.ip().is_loopback()) {
        tracing::warn!(
            "listening beyond this machine without a token: anyone who can reach {listen} can ask"
        );
    }
    let options = Options {
        listen,
        token,
        max_body_bytes: args.max_body,
        max_batch: args.max_batch,
        max_connections: args.max_connections,
        request_timeout: Duration::from_millis(args.request_timeout_ms),
        drain_timeout: Duration::from_millis(args.drain_timeout_ms),
        allow_unguarded: args.allow_unguarded,
        decision_timeout: Duration::from_millis(args.decision_timeout_ms),
        approvers,
    };
    let mut warning = None;
    let source = match (&args.config, args.watch) {
        (Some(path), true) => {
            // Under --require-guardrail a reload may not weaken the
            // guardrail either; without, it is reported (/readyz, metrics).
            let policy = if require { ReloadPolicy::Refuse } else { ReloadPolicy::Report };
            let reloader = Arc::new(Reloader::open_with(path, policy).map_err(|e| e.to_string())?);
            if reloader.current().is_none() {
                // Loaded again to say why (a reload never takes a guardrail away).
                let config = LoadedConfig::from_path(path).map_err(|e| e.to_string())?;
                warning = unguarded(&config, require)?;
            }
            Arc::clone(&reloader)
                .watch(WATCH_INTERVAL)
                .map_err(|e| format!("cannot start the config watcher: {e}"))?;
            Source::Reloading(reloader)
        }
        (path, _) => {
            let config = match path {
                Some(path) => LoadedConfig::from_path(path).map_err(|e| e.to_string())?,
                None => LoadedConfig::embedded_default(),
            };
            warning = unguarded(&config, require)?;
            Source::Fixed(install(&config).map_err(|e| e.to_string())?.map(Arc::new))
        }
    };
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = args.threads {
        runtime.worker_threads(threads.max(1));
    }
    let runtime = runtime.enable_all().build().map_err(|e| format!("cannot start the async runtime: {e}"))?;
    runtime.block_on(async move {
        let (warnings, note) = (approval_warnings(&options), approval_note(&options));
        let mut service = Service::new(source.clone(), options, Arc::new(Metrics::default()));
        let mut unreachable = None;
        if let Some(pending) = pending {
            // Unreachable now is not fatal (it may come back): said once.
            unreachable = pending.check().await.err();
            service = service.with_pending(pending);
        }
        let server = Server::bind(service).await.map_err(|e| e.to_string())?;
        let guards = source.current().map_or("provider: none (every call allowed)".to_owned(), |g| {
            match g.middleware.is_chain() {
                true => {
                    let names: Vec<String> =
                        g.described().map(|d| format!("{} ({})", d.name, d.provider.name)).collect();
                    format!("chain: {}", names.join(", "))
                }
                false => format!("provider: {}", g.info.name),
            }
        });
        // The one line a supervisor or a test reads to learn the address.
        eprintln!("guardhost-server: listening on {} ({guards})", server.local());
        if let Some(warning) = warning {
            tracing::warn!("{warning}");
        }
        for warning in warnings {
            tracing::warn!("{warning}");
        }
        if let Some(note) = note {
            tracing::info!("{note}");
        }
        if let Some(error) = unreachable {
            tracing::error!("{error}; calls held for approval get no pending id until it answers");
        }
        server.run(signals(source)).await;
        eprintln!("guardhost-server: stopped");
        Ok(())
    })
}

/// The secret in the environment variable `name` (then removed from the
/// environment, so provider processes never inherit it); the error,
/// after `prefix` (where the name was given), names the variable, never a
/// value.
fn secret_from_env(prefix: &str, name: &str) -> Result<String, String> {
    match std::env::var(name) {
        Ok(value) if !value.is_empty() => {
            // No other thread runs yet.
            std::env::remove_var(name);
            Ok(value)
        }
        _ => Err(format!("{prefix}{name}: the environment variable {name} is not set or empty")),
    }
}

/// What to warn about how held calls are answered.
fn approval_warnings(options: &Options) -> Vec<String> {
    let approvers = &options.approvers;
    let mut warnings = Vec::new();
    if approvers.unauthenticated {
        warnings.push(
            "--approvals-unauthenticated: whoever can reach /v1/pending can answer a held call, as anyone \
             (`approved_by` is what the answer says)"
                .to_owned(),
        );
    }
    if approvers.header().is_some() && options.token.is_none() {
        warnings.push(
            "--approver-header without --token-env: whoever reaches this server without the proxy can name \
             any approver; listen where only the proxy can reach it, or give the proxy a --token-env token"
                .to_owned(),
        );
    }
    warnings
}

/// What to say at start when nobody can answer held calls.
fn approval_note(options: &Options) -> Option<&'static str> {
    let approvers = &options.approvers;
    (!approvers.any() && !approvers.unauthenticated).then_some(
        "no approver is configured (--approver, --approver-header): held calls can be listed, not answered over \
         HTTP",
    )
}

/// With `require`, refuses a config that installs no guardrail; without,
/// the warning to log once the server listens (its first line says where).
fn unguarded(config: &LoadedConfig, require: bool) -> Result<Option<String>, String> {
    if require {
        config.require_guardrail().map_err(|e| e.to_string())?;
    }
    Ok(config.unguarded_reason().map(|why| {
        format!(
            "{}: no guardrail is installed ({why}): every call will be allowed undecided (/readyz answers 503 \
             `unguarded` unless the server was started with --allow-unguarded)",
            config.origin_name()
        )
    }))
}

/// Windows: completes at Ctrl+C or Ctrl+Break; there is no SIGHUP to
/// reload at (`--watch` reloads when the config changes).
#[cfg(not(unix))]
async fn signals(_source: Source) {
    if let Err(error) = tokio::signal::ctrl_c().await {
        tracing::error!("cannot wait for Ctrl+C ({error}); stop the server by ending its process");
        std::future::pending::<()>().await;
    }
}

/// Completes at SIGTERM or SIGINT; reloads at SIGHUP meanwhile.
#[cfg(unix)]
async fn signals(source: Source) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut terminate), Ok(mut interrupt), Ok(mut hangup)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()), signal(SignalKind::hangup()))
    else {
        tracing::error!("cannot install the signal handlers; stop the server with SIGKILL");
        return std::future::pending().await;
    };
    loop {
        tokio::select! {
            _ = terminate.recv() => return,
            _ = interrupt.recv() => return,
            _ = hangup.recv() => {
                let source = source.clone();
                // Building a provider can take a while: not on the runtime.
                let reloaded = tokio::task::spawn_blocking(move || source.reload()).await;
                match reloaded {
                    Ok(Ok(())) => tracing::info!("SIGHUP: the config was reloaded"),
                    Ok(Err(error)) => tracing::error!("SIGHUP: the reload failed, the current guardrail keeps serving: {error}"),
                    Err(error) => tracing::error!("SIGHUP: the reload failed: {error}"),
                }
            }
        }
    }
}
