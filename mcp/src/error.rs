//! How the proxy fails to start or run.

use crate::config::McpConfigError;
use crate::pins::PinsError;
use crate::tls::TlsError;

/// Why `guardhost mcp` could not proxy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// No server command was given.
    #[error("no MCP server to proxy: give its command after `--` (guardhost mcp --config F -- npx -y @modelcontextprotocol/server-filesystem /some/folder), or the URL of a running one with --upstream http://HOST:PORT/mcp, or several in the config's `mcp.servers`")]
    NoServer,
    /// The server could not be started.
    #[error("cannot start the MCP server `{program}`: {source}; check the command after `--` (is it installed and on PATH?)")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The `mcp:` section.
    #[error(transparent)]
    Config(#[from] McpConfigError),
    /// The pins file.
    #[error(transparent)]
    Pins(#[from] PinsError),
    /// TLS towards an `https://` server.
    #[error(transparent)]
    Tls(#[from] TlsError),
}
