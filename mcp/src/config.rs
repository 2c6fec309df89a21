//! The `mcp:` section of a config file: what the proxy does besides the
//! guardrail (which the same file's `guardrails:` and `authorization:`
//! sections configure, as for every other way in).
//!
//! ```yaml
//! mcp:
//!   name: files            # the server's name: in pins, logs and the policy's context
//!   pins: mcp-pins.json    # where pins persist (relative to this file); absent: the session only
//!   pinning: true          # withhold tools whose definition changed (default true)
//!   max_message_bytes: 16777216
//!   restarts: 3            # start a server that exits again, this many times (default 0)
//!   ca_file: internal-ca.pem  # trusted for https:// servers besides the system's roots
//!   servers:               # several servers behind one proxy, their tools named `NAME__TOOL`
//!     files: {command: [npx, -y, "@modelcontextprotocol/server-filesystem", /data]}
//!     search: {url: "http://127.0.0.1:3001/mcp"}
//!     github: {url: "https://api.githubcopilot.com/mcp/", token_env: GITHUB_TOKEN}
//! ```

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::http::{Bearer, Endpoint};

/// The default limit of one message, either way: 16 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The server name when neither the config nor `--name` gives one.
pub const DEFAULT_NAME: &str = "server";

/// The `mcp:` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// The server's name.
    #[serde(default)]
    pub name: Option<String>,
    /// The pins file, relative to the config file's folder.
    #[serde(default)]
    pub pins: Option<PathBuf>,
    /// Whether tools whose definition changed are withheld.
    #[serde(default = "yes")]
    pub pinning: bool,
    /// The largest message accepted, either way, in bytes.
    #[serde(default = "default_max")]
    pub max_message_bytes: usize,
    /// How many times a server that exits is started again in one session
    /// (0: the proxy ends with it).
    #[serde(default)]
    pub restarts: u32,
    /// Several servers behind one proxy, by name (used when the command
    /// line names no server).
    #[serde(default)]
    pub servers: BTreeMap<String, ServerEntry>,
    /// PEM certificates trusted for `https://` servers besides the
    /// system's roots, relative to the config file's folder.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

/// The server a proxy stands in front of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A program the proxy starts, spoken to over its standard input and
    /// output (the stdio transport).
    Command(Vec<OsString>),
    /// A server already running, spoken to over the streamable HTTP
    /// transport.
    Http(Endpoint),
}

/// What a proxy stands in front of: one server, or several by name (their
/// tools and prompts named `NAME__T` towards the client).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Servers {
    /// One server, its names unchanged.
    One(Target),
    /// Several, by name (`mcp.servers`).
    Several(Vec<(String, Target)>),
}

/// One of `mcp.servers`: a command to start, or the URL of a running
/// server.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerEntry {
    /// The server's command and its arguments (the stdio transport).
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// The server's URL (the streamable HTTP transport).
    #[serde(default)]
    pub url: Option<String>,
    /// With `url`: the environment variable holding the token sent to the
    /// server as `Authorization: Bearer TOKEN`.
    #[serde(default)]
    pub token_env: Option<String>,
}

/// What separates a server's name from its tools' and prompts' names
/// towards the client when several servers stand behind one proxy.
pub const SEPARATOR: &str = "__";

fn yes() -> bool {
    true
}

fn default_max() -> usize {
    DEFAULT_MAX_MESSAGE_BYTES
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            name: None,
            pins: None,
            pinning: true,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            restarts: 0,
            servers: BTreeMap::new(),
            ca_file: None,
        }
    }
}

/// An `mcp:` section that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum McpConfigError {
    /// The file could not be read.
    #[error("cannot read the config file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The section is not what the proxy reads.
    #[error("{path}: the `mcp:` section is not valid: {message}; it takes name (string), pins (a file path), pinning (true or false), max_message_bytes (a positive integer), restarts (a count), servers (NAME: {{command: [PROGRAM, ARG...]}} or NAME: {{url: http(s)://HOST:PORT/mcp, token_env: VAR}}) and ca_file (a file of PEM certificates)")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, where.
        message: String,
    },
}

impl McpConfig {
    /// The `mcp:` section of the config file `path` (its defaults when the
    /// file has none), with `pins` resolved against the file's folder.
    pub fn from_path(path: &Path) -> Result<McpConfig, McpConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| McpConfigError::Io { path: path.to_owned(), source })?;
        let invalid = |message: String| McpConfigError::Invalid { path: path.to_owned(), message };
        #[derive(Deserialize)]
        struct File {
            #[serde(default)]
            mcp: Option<McpConfig>,
        }
        let file: File = serde_yaml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        let mut config = file.mcp.unwrap_or_default();
        if config.max_message_bytes == 0 {
            return Err(invalid("max_message_bytes is 0".into()));
        }
        let folder = path.parent().unwrap_or(Path::new("."));
        if let Some(pins) = &config.pins {
            config.pins = Some(folder.join(pins));
        }
        if let Some(ca_file) = &config.ca_file {
            config.ca_file = Some(folder.join(ca_file));
        }
        // Checked without their tokens: a command that only reads the file
        // (`guardhost mcp pins`) needs none.
        config.parse_targets(false).map_err(invalid)?;
        Ok(config)
    }

    /// `mcp.servers` as the proxy reaches them, in name order, each
    /// `token_env` read; why not, when an entry is not usable.
    pub fn targets(&self) -> Result<Vec<(String, Target)>, String> {
        self.parse_targets(true)
    }

    fn parse_targets(&self, tokens: bool) -> Result<Vec<(String, Target)>, String> {
        self.servers
            .iter()
            .map(|(name, entry)| {
                let valid = !name.is_empty()
                    && !name.contains(SEPARATOR)
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if !valid {
                    return Err(format!(
                        "servers: `{name}` is not a server name: use letters, digits, `-` and single `_` \
                         (the client sees its tools as NAME{SEPARATOR}TOOL, so `{SEPARATOR}` would make names ambiguous)"
                    ));
                }
                let target = match (&entry.command, &entry.url) {
                    (Some(_), _) if entry.token_env.is_some() => {
                        return Err(format!(
                            "servers.{name}: token_env goes with url (a server started with a command is \
                             given its secrets through its own environment)"
                        ))
                    }
                    (Some(command), None) if !command.is_empty() => {
                        Target::Command(command.iter().map(OsString::from).collect())
                    }
                    (None, Some(url)) => {
                        let mut endpoint = Endpoint::parse(url).map_err(|e| format!("servers.{name}: {e}"))?;
                        if let Some(var) = entry.token_env.as_ref().filter(|_| tokens) {
                            let bearer = Bearer::from_env(var).map_err(|e| format!("servers.{name}.token_env: {e}"))?;
                            endpoint.bearer = Some(bearer);
                        }
                        Target::Http(endpoint)
                    }
                    _ => {
                        return Err(format!(
                            "servers.{name} needs exactly one of command (a non-empty list: [PROGRAM, ARG...]) \
                             and url"
                        ))
                    }
                };
                Ok((name.clone(), target))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_a_section_and_its_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "guardrails: {enabled: false}\n").unwrap();
        assert_eq!(McpConfig::from_path(&path).unwrap(), McpConfig::default());

        std::fs::write(&path, "mcp: {name: files, pins: p.json, max_message_bytes: 1024}\n").unwrap();
        let config = McpConfig::from_path(&path).unwrap();
        assert_eq!(config.name.as_deref(), Some("files"));
        assert_eq!(config.pins, Some(dir.path().join("p.json")));
        assert_eq!(config.max_message_bytes, 1024);
        assert!(config.pinning);

        std::fs::write(
            &path,
            "mcp: {servers: {files: {command: [srv, /data]}, web: {url: 'http://127.0.0.1:9/mcp'}}}\n",
        )
        .unwrap();
        let targets = McpConfig::from_path(&path).unwrap().targets().unwrap();
        assert_eq!(targets[0], ("files".into(), Target::Command(vec!["srv".into(), "/data".into()])));
        assert!(matches!(&targets[1], (name, Target::Http(_)) if name == "web"));
        for (servers, says) in [
            ("{a__b: {command: [x]}}", "ambiguous"),
            ("{a: {command: []}}", "exactly one of command"),
            ("{a: {command: [x], url: 'http://h/'}}", "exactly one of command"),
            ("{a: {url: 'ftp://h/'}}", "servers.a"),
            ("{a: {cmd: [x]}}", "unknown field `cmd`"),
            ("{a: {command: [x], token_env: T}}", "token_env goes with url"),
        ] {
            std::fs::write(&path, format!("mcp: {{servers: {servers}}}\n")).unwrap();
            let error = McpConfig::from_path(&path).unwrap_err().to_string();
            assert!(error.contains(says), "{servers}: {error}");
        }

        // A token is read when the servers are reached, not when the file is.
        std::fs::write(
            &path,
            "mcp: {servers: {a: {url: 'https://h/', token_env: GUARDHOST_MCP_TEST_UNSET}}}\n",
        )
        .unwrap();
        let error = McpConfig::from_path(&path).unwrap().targets().unwrap_err();
        assert!(
            error.contains("servers.a.token_env: the environment variable GUARDHOST_MCP_TEST_UNSET is unset"),
            "{error}"
        );

        std::fs::write(&path, "mcp: {pinnning: false}\n").unwrap();
        let error = McpConfig::from_path(&path).unwrap_err().to_string();
        assert!(error.contains("unknown field `pinnning`") && error.contains("it takes name"), "{error}");
    }
}
