//! What runs as the child: `guardhost provider-server`, or the author's
//! own program (`provider.command`), and what its `ready` message says.

use std::path::PathBuf;
use std::process::Command;

use guardhost::ProviderInfo;
use guardhost::Transport;

use crate::protocol::PROTOCOL_VERSION;

/// The environment variable that names the program to run providers in
/// (`guardhost`, or `guardhost-provider-server`), for programs that embed
/// the host library.
pub const SERVER_ENV: &str = "GUARDHOST_BIN";

/// What runs as the child process.
#[derive(Debug, Clone)]
pub(super) enum ChildKind {
    /// `guardhost provider-server`, which loads the provider library.
    Server {
        /// The `guardhost` executable.
        program: PathBuf,
    },
    /// The author's own program (`provider.command`).
    Program {
        /// The program (`argv[0]`), resolved.
        program: PathBuf,
        /// Where it runs: the config file's directory.
        dir: PathBuf,
        /// `provider.command` as written: the program and its arguments.
        argv: Vec<String>,
    },
}

impl std::fmt::Display for ChildKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChildKind::Server { program } => write!(f, "{}", program.display()),
            ChildKind::Program { argv, dir, .. } => write!(f, "`{}` (in {})", argv.join(" "), dir.display()),
        }
    }
}

impl ChildKind {
    pub(super) fn command(&self) -> Command {
        match self {
            ChildKind::Server { program } => {
                let mut command = Command::new(program);
                command.arg("provider-server");
                command
            }
            ChildKind::Program { program, dir, argv } => {
                let mut command = Command::new(program);
                command.args(&argv[1..]).current_dir(dir);
                command
            }
        }
    }

    /// The provider's info from a `ready` message's `info`: the server
    /// sends the whole [`ProviderInfo`]; a program sends its name (and may
    /// declare volatile metadata keys), and the host knows the rest.
    pub(super) fn info(&self, info: serde_json::Value) -> Result<ProviderInfo, String> {
        match self {
            ChildKind::Server { .. } => serde_json::from_value(info)
                .map_err(|e| format!("the provider process sent a ready message this host cannot read: {e}")),
            ChildKind::Program { argv, .. } => {
                let ready: ProgramInfo = serde_json::from_value(info).map_err(|e| {
                    format!(
                        "the provider program {self} sent a ready message whose `info` is not \
                         {{\"name\": string, \"volatile_metadata_keys\": [string, ...]}}: {e} \
                         (docs/provider-protocol.md)"
                    )
                })?;
                if ready.name.trim().is_empty() {
                    return Err(format!(
                        "the provider program {self} sent a ready message with an empty `info.name`; name \
                         the provider: operators see the name in logs and audit events"
                    ));
                }
                Ok(ProviderInfo {
                    name: ready.name,
                    source: guardhost::ProviderSource::Program { command: argv.clone() },
                    abi_version: (PROTOCOL_VERSION as u16, 0),
                    abi_kind: guardhost::AbiKind::Protocol,
                    accepted_keys: Vec::new(),
                    accepts_extra_keys: true,
                    framework_injected: false,
                    volatile_metadata_keys: ready.volatile_metadata_keys,
                    path_keys: Vec::new(),
                    unread_inputs: Vec::new(),
                    never_blocks: false,
                    timeout_ms: None,
                    isolation: guardhost::Isolation::Process,
                    transport: Some(Transport::Pipes),
                    sha256: None,
                })
            }
        }
    }
}

/// What a provider program's `ready` message says about it.
#[derive(Debug, serde::Deserialize)]
struct ProgramInfo {
    name: String,
    #[serde(default)]
    volatile_metadata_keys: Vec<String>,
}
