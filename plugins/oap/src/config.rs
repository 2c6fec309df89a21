//! The provider's config keys.

use std::collections::BTreeMap;

use serde::Deserialize;

/// What the provider does with a denial.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Denials deny (the default).
    #[default]
    Enforce,
    /// Denials become allows that carry the would-be denial in metadata,
    /// except hard failures (no usable passport, a suspended or revoked one,
    /// a dangerous operation, a command injection), which still deny.
    Warn,
    /// Every denial becomes an allow that carries the would-be denial in
    /// metadata: a dry run of a passport.
    Observe,
}

impl Mode {
    /// Its name in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Warn => "warn",
            Mode::Observe => "observe",
        }
    }
}

/// `provider.config` of the OAP provider.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The passport file. Without it, the request's `agent_id` (DeerFlow's
    /// `guardrails.passport`) when it names a file, else
    /// `~/.aport/<framework>/aport/passport.json`.
    #[serde(default)]
    pub passport_path: Option<String>,
    /// The agent framework (the host injects `deerflow`); names the default
    /// passport location.
    #[serde(default)]
    pub framework: Option<String>,
    /// `enforce` (default), `warn` or `observe`.
    #[serde(default)]
    pub mode: Mode,
    /// Tool name (or `prefix*`) → policy pack id; wins over the built-in
    /// mapping.
    #[serde(default)]
    pub tool_mapping: BTreeMap<String, String>,
    /// A directory of extra policy packs (`<pack>/policy.json` or
    /// `<pack>.json`), evaluated by their `evaluation_rules`.
    #[serde(default)]
    pub policies_dir: Option<String>,
    /// Where the per-minute rate windows and the policy packs' running
    /// totals, counters and key sets live: `memory` (this process, the
    /// default) or `redis://[:password@]host[:port][/db]`, shared by every
    /// process that uses the same server.
    #[serde(default)]
    pub state: Option<String>,
}
