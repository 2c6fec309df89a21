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
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

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
}

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
    #[error("{path}: the `mcp:` section is not valid: {message}; it takes name (string), pins (a file path), pinning (true or false), max_message_bytes (a positive integer) and restarts (a count)")]
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
        if let Some(pins) = &config.pins {
            let folder = path.parent().unwrap_or(Path::new("."));
            config.pins = Some(folder.join(pins));
        }
        Ok(config)
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

        std::fs::write(&path, "mcp: {pinnning: false}\n").unwrap();
        let error = McpConfig::from_path(&path).unwrap_err().to_string();
        assert!(error.contains("unknown field `pinnning`") && error.contains("it takes name"), "{error}");
    }
}
