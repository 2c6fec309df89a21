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
    /// Denials of these codes become questions for a person (an `ask`
    /// outcome the host's approvals machinery holds the call for) instead
    /// of refusals: what the command model cannot say, put to someone who
    /// can.
    #[serde(default)]
    pub ask: Option<Ask>,
}

/// `ask:` of the provider's config.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ask {
    /// The denial codes asked about instead (one of [`ASKABLE`]).
    pub codes: Vec<String>,
    /// Who may approve (names the approval's `approved_by` must match).
    pub approvers: Vec<String>,
    /// How long an approval may take, in seconds (default 600).
    #[serde(default = "default_ask_timeout")]
    pub timeout_s: u32,
}

fn default_ask_timeout() -> u32 {
    600
}

/// The codes that may be asked about: what the command model could not
/// verify, never a dangerous operation or an unreadable command.
pub const ASKABLE: &[&str] = &[
    "oap.command_not_allowed",
    "oap.command_exec_not_allowed",
    "oap.command_unverified",
    "oap.command_environment",
    "oap.command_runtime_code",
    "oap.command_unresolved",
    "oap.command_chain_unsupported",
];

impl Ask {
    /// Checks the codes and approvers; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(code) = self.codes.iter().find(|c| !ASKABLE.contains(&c.as_str())) {
            return Err(format!(
                "ask.codes: `{}` cannot be asked about; use one of {}",
                code.escape_debug(),
                ASKABLE.join(", ")
            ));
        }
        if self.codes.is_empty() {
            return Err("ask.codes: list at least one code to ask about".to_owned());
        }
        if self.approvers.is_empty() || self.approvers.iter().any(|a| a.trim().is_empty()) {
            return Err("ask.approvers: list who may approve (non-empty names)".to_owned());
        }
        if self.timeout_s == 0 {
            return Err("ask.timeout_s: a number of seconds above 0".to_owned());
        }
        Ok(())
    }
}
