//! `guardhost mcp`: the guardrail in front of an MCP server (the
//! `guardhost-mcp` crate), and `guardhost mcp pins`, which lists and
//! accepts changed tool definitions.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use guardhost_mcp::http::Endpoint;
use guardhost_mcp::{config::DEFAULT_NAME, pins, Ended, Gate, McpConfig, McpError, Target};

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
    /// The URL of an MCP server already running (`http://HOST:PORT/mcp`),
    /// spoken to over the streamable HTTP transport, instead of a command
    /// after `--`.
    #[arg(long, value_name = "URL", conflicts_with = "server")]
    upstream: Option<String>,
    /// The MCP server's command and its arguments, after `--`.
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

fn proxy(args: McpArgs) -> Result<ExitCode, CliError> {
    let target = match &args.upstream {
        Some(url) => Target::Http(Endpoint::parse(url).map_err(|e| CliError::Usage(e.to_string()))?),
        None if args.server.is_empty() => return Err(mcp_error(McpError::NoServer)),
        None => Target::Command(args.server.clone()),
    };
    let (config, guardrail) = load_guardrail(args.config.as_deref(), required(args.require_guardrail)?)?;
    warn_unguarded(&config);
    let mcp = mcp_config(args.config.as_deref())?;
    let name = args.name.or_else(|| mcp.name.clone()).unwrap_or_else(|| DEFAULT_NAME.to_owned());
    let gate = Gate::new(guardrail, name);
    // One thread: the relay's tasks hand each message on within it, with no
    // thread switch (decisions take microseconds; a provider that waits
    // does so asynchronously, or on the threads of `provider.timeout_ms`).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| CliError::Io { what: "cannot start the async runtime".into(), source })?;
    let ended = runtime
        .block_on(async {
            let (input, output) = guardhost_mcp::stdio::client();
            guardhost_mcp::run(gate, mcp, &target, input, output).await
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
