//! `guardhost mcp`: the guardrail in front of an MCP server (the
//! `guardhost-mcp` crate), and `guardhost mcp pins`, which lists and
//! accepts changed tool definitions.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use guardhost_mcp::http::{Bearer, Endpoint};
use guardhost_mcp::{config::DEFAULT_NAME, pins, Ended, Gate, McpConfig, McpError, Servers, Target};

use crate::error::CliError;
use crate::setup::{load_guardrail, required, warn_unguarded};

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct McpArgs {
    #[command(subcommand)]
    pins: Option<McpCommand>,
    #[arg(long, value_name = "FILE", help = crate::setup::CONFIG_HELP)]
    config: Option<PathBuf>,
    /// The server's name: in pins, logs and the policy's context
    /// (`authz_attributes.mcp_server`). Default: the config's `mcp.name`,
    /// else `server`.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    #[arg(long, help = crate::setup::REQUIRE_HELP)]
    require_guardrail: bool,
    /// The URL of an MCP server already running (`http://HOST:PORT/mcp`,
    /// or `https://`: its certificate checked against the system's roots
    /// and the config's `mcp.ca_file`), spoken to over the streamable HTTP
    /// transport, instead of a command after `--`.
    #[arg(long, value_name = "URL", conflicts_with = "server")]
    upstream: Option<String>,
    /// With --upstream: the environment variable holding the token sent to
    /// the server as `Authorization: Bearer TOKEN` (never logged).
    #[arg(long, value_name = "VAR", requires = "upstream")]
    upstream_token_env: Option<String>,
    /// Serve MCP's streamable HTTP transport at http://ADDR/mcp (https://
    /// with --tls-cert and --tls-key) instead of
    /// speaking stdio to one client: each client's session gets its own
    /// server (or upstream session). ADDR is HOST:PORT (127.0.0.1:8931;
    /// port 0 picks a free one, printed at start).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// With --listen: the environment variable that holds the token every
    /// request must carry (`Authorization: Bearer TOKEN`). Required when
    /// ADDR is not a loopback address.
    #[arg(long, value_name = "VAR", requires = "listen")]
    token_env: Option<String>,
    /// With --listen: a browser Origin accepted besides the listening
    /// address's own (repeatable), e.g. https://app.example.com.
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "listen")]
    allow_origin: Vec<String>,
    /// With --listen: a Host header answered besides the listening
    /// address's own names (repeatable), e.g. the name a reverse proxy in
    /// front uses.
    #[arg(long = "allow-host", value_name = "HOST", requires = "listen")]
    allow_host: Vec<String>,
    /// With --listen: sessions at once (each may run a server process); one
    /// more ends the session idle the longest.
    #[arg(long, value_name = "N", default_value_t = 32, requires = "listen")]
    max_sessions: usize,
    /// With --listen: end a session with no stream open and no message for
    /// this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 1800, requires = "listen")]
    session_idle: u64,
    /// With --listen: serve https://ADDR/mcp with this certificate chain
    /// (PEM, the server's certificate first); needs --tls-key.
    #[arg(long, value_name = "FILE", requires_all = ["listen", "tls_key"])]
    tls_cert: Option<PathBuf>,
    /// With --tls-cert: the certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The MCP server's command and its arguments, after `--`. Without one
    /// (and without --upstream), the servers of the config's `mcp.servers`,
    /// their tools named SERVER__TOOL.
    #[arg(last = true, value_name = "COMMAND")]
    server: Vec<OsString>,
}

#[derive(Debug, clap::Subcommand)]
enum McpCommand {
    /// The pinned tool definitions, and the changed ones waiting.
    Pins {
        #[command(subcommand)]
        action: PinsAction,
    },
}

#[derive(Debug, clap::Subcommand)]
enum PinsAction {
    /// List every server's pinned tools and the changed versions waiting.
    List {
        #[arg(long, value_name = "FILE", help = "The config whose `mcp.pins` names the pins file")]
        config: PathBuf,
    },
    /// Accept the changed version of a tool (`SERVER/TOOL`): it becomes the
    /// pin, and the next list shows the tool again.
    Accept {
        #[arg(long, value_name = "FILE", help = "The config whose `mcp.pins` names the pins file")]
        config: PathBuf,
        /// `SERVER/TOOL`, as `pins list` and the proxy's warning name it.
        #[arg(value_name = "SERVER/TOOL")]
        name: String,
    },
}

pub fn run(args: McpArgs) -> Result<ExitCode, CliError> {
    match args.pins {
        Some(McpCommand::Pins { action: PinsAction::List { config } }) => list(&config),
        Some(McpCommand::Pins { action: PinsAction::Accept { config, name } }) => accept(&config, &name),
        None => proxy(args),
    }
}

fn mcp_config(path: Option<&Path>) -> Result<McpConfig, CliError> {
    match path {
        Some(path) => McpConfig::from_path(path).map_err(mcp_error),
        None => Ok(McpConfig::default()),
    }
}

fn mcp_error(error: impl Into<McpError>) -> CliError {
    CliError::Usage(error.into().to_string())
}

fn pins_file(config: &Path) -> Result<PathBuf, CliError> {
    mcp_config(Some(config))?.pins.ok_or_else(|| {
        CliError::Usage(format!(
            "{} names no pins file (mcp.pins): without one, pins live for a proxy's session only and there is \
             nothing to list or accept; add `mcp: {{pins: mcp-pins.json}}`",
            config.display()
        ))
    })
}

fn list(config: &Path) -> Result<ExitCode, CliError> {
    let path = pins_file(config)?;
    let file = pins::read(&path).map_err(mcp_error)?;
    if file.servers.is_empty() {
        outln!(
            "{}: no pins yet (a proxy pins each tool the first time its server lists it)",
            path.display()
        )?;
    }
    for (server, pins) in &file.servers {
        for (tool, hash) in &pins.pinned {
            match pins.changed.get(tool) {
                Some(offered) => outln!("{server}/{tool}\tCHANGED\tpinned {hash}\toffered {offered}")?,
                None => outln!("{server}/{tool}\tpinned\t{hash}")?,
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn accept(config: &Path, name: &str) -> Result<ExitCode, CliError> {
    let Some((server, tool)) = name.split_once('/') else {
        return Err(CliError::Usage(format!(
            "`{name}` is not SERVER/TOOL: name the tool as `guardhost mcp pins list` shows it, e.g. files/write_file"
        )));
    };
    let path = pins_file(config)?;
    let hash = pins::accept(&path, server, tool).map_err(mcp_error)?;
    outln!("{server}/{tool}: the new version is pinned ({hash}); the next list shows the tool again")?;
    Ok(ExitCode::SUCCESS)
}

/// Reads the trust roots now when a server is reached over `https://`, so
/// that a bad `mcp.ca_file` or a machine without roots stops the start
/// rather than each session.
fn check_tls(mcp: &McpConfig, servers: &Servers) -> Result<(), CliError> {
    let https = match servers {
        Servers::One(target) => vec![target],
        Servers::Several(servers) => servers.iter().map(|(_, target)| target).collect(),
    };
    if https.into_iter().any(|target| matches!(target, Target::Http(endpoint) if endpoint.tls.is_some())) {
        guardhost_mcp::tls::connector(mcp.ca_file.as_deref()).map_err(mcp_error)?;
    }
    Ok(())
}

fn proxy(args: McpArgs) -> Result<ExitCode, CliError> {
    let mcp = mcp_config(args.config.as_deref())?;
    // The command line's server, else the config's (`mcp.servers`).
    let servers = match &args.upstream {
        Some(url) => {
            let mut endpoint = Endpoint::parse(url).map_err(|e| CliError::Usage(e.to_string()))?;
            if let Some(var) = &args.upstream_token_env {
                let bearer = Bearer::from_env(var)
                    .map_err(|e| CliError::Usage(format!("--upstream-token-env: {e}")))?;
                endpoint.bearer = Some(bearer);
            }
            Servers::One(Target::Http(endpoint))
        }
        None if !args.server.is_empty() => Servers::One(Target::Command(args.server.clone())),
        None => match mcp.targets().map_err(CliError::Usage)? {
            targets if targets.is_empty() => return Err(mcp_error(McpError::NoServer)),
            targets => Servers::Several(targets),
        },
    };
    check_tls(&mcp, &servers)?;
    let token = listen_token(&args)?;
    // The tokens are read: out of the environment that the servers
    // guardhost starts inherit. (No other thread runs yet: providers start
    // theirs when they load, below.)
    let upstream_tokens = mcp.servers.values().filter_map(|entry| entry.token_env.as_ref());
    for var in args.token_env.iter().chain(&args.upstream_token_env).chain(upstream_tokens) {
        std::env::remove_var(var);
    }
    let (config, guardrail) = load_guardrail(args.config.as_deref(), required(args.require_guardrail)?)?;
    warn_unguarded(&config);
    let name = args.name.clone().or_else(|| mcp.name.clone()).unwrap_or_else(|| DEFAULT_NAME.to_owned());
    let gate = Gate::new(guardrail, name);
    if let Some(address) = &args.listen {
        return listen(address, &args, token, gate, mcp, servers);
    }
    // One thread: the relay's tasks hand each message on within it, with no
    // thread switch (decisions take microseconds; a provider that waits
    // does so asynchronously, or on the threads of `provider.timeout_ms`).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| CliError::Io { what: "cannot start the async runtime".into(), source })?;
    // The relay runs as a task: a wake of the future `block_on` drives
    // makes the runtime poll its event loop once more without waiting
    // (three `epoll_wait` calls per tool call more, by strace).
    let ended = runtime
        .block_on(async {
            tokio::spawn(async move {
                let (input, output) = guardhost_mcp::stdio::client();
                guardhost_mcp::mux::relay(gate, mcp, &servers, input, output).await
            })
            .await
            .expect("the relay does not panic")
        })
        .map_err(mcp_error)?;
    // The runtime's blocking stdin reader never returns on its own.
    runtime.shutdown_background();
    Ok(match ended {
        Ended::ClientClosed => ExitCode::SUCCESS,
        Ended::ServerExited(how) => {
            eprintln!(
                "guardhost: the MCP server exited ({how}); every request it had was answered with an error"
            );
            ExitCode::from(1)
        }
    })
}

/// The token `--listen`'s clients must send (`--token-env`).
fn listen_token(args: &McpArgs) -> Result<Option<String>, CliError> {
    let Some(var) = &args.token_env else { return Ok(None) };
    match std::env::var(var) {
        Ok(token) if !token.trim().is_empty() => Ok(Some(token.trim().to_owned())),
        _ => Err(CliError::Usage(format!(
            "--token-env {var}: the environment variable {var} is unset or empty; set it to the token \
             clients send as `Authorization: Bearer TOKEN`"
        ))),
    }
}

/// `--listen ADDR`: the streamable HTTP transport towards clients, until
/// SIGINT or SIGTERM.
fn listen(
    address: &str,
    args: &McpArgs,
    token: Option<String>,
    gate: Gate,
    mcp: McpConfig,
    servers: Servers,
) -> Result<ExitCode, CliError> {
    use std::net::ToSocketAddrs;
    let bad = |why: String| CliError::Usage(format!("--listen {address}: {why}"));
    let socket = address
        .to_socket_addrs()
        .map_err(|e| bad(format!("not HOST:PORT ({e}); e.g. --listen 127.0.0.1:8931")))?
        .next()
        .ok_or_else(|| bad("names no address".into()))?;
    if token.is_none() && !socket.ip().is_loopback() {
        return Err(bad(format!(
            "{} is reachable from other machines, and no token is asked: give --token-env VAR (the \
             environment variable holding the token clients must send), or listen on 127.0.0.1",
            socket.ip()
        )));
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(guardhost_mcp::tls::acceptor(cert, key).map_err(mcp_error)?),
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let options = guardhost_mcp::listen::Listen {
        token,
        hosts: args.allow_host.clone(),
        origins: args.allow_origin.clone(),
        max_sessions: args.max_sessions.max(1),
        idle: std::time::Duration::from_secs(args.session_idle.max(1)),
        tls,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|source| CliError::Io { what: "cannot start the async runtime".into(), source })?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(socket)
            .await
            .map_err(|source| CliError::Io { what: format!("cannot listen on {socket}"), source })?;
        let local = listener
            .local_addr()
            .map_err(|source| CliError::Io { what: "the listening address".into(), source })?;
        let each = match &servers {
            Servers::One(Target::Command(_)) => "each session starts its own server",
            Servers::One(Target::Http(_)) => "each session opens its own upstream session",
            Servers::Several(_) => "each session reaches every server of mcp.servers on its own",
        };
        eprintln!(
            "guardhost mcp: serving MCP at {scheme}://{local}{} ({each}; SIGINT or SIGTERM ends)",
            guardhost_mcp::listen::PATH
        );
        guardhost_mcp::listen::serve(listener, options, gate, mcp, servers, shutdown_signal())
            .await
            .map_err(|source| CliError::Io { what: "serving MCP over HTTP failed".into(), source })
    })?;
    Ok(ExitCode::SUCCESS)
}

/// SIGINT (Ctrl-C) or, on Unix, SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
