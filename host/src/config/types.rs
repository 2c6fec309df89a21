//! The `guardrails:` section's types: the section, a provider entry
//! (`ProviderSpec`), modes, isolation and transports, and their checks.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::decision_log::DecisionLogConfig;

/// The text of the embedded default config (what `guardhost` uses when no
/// `--config` is given).
pub const DEFAULT_CONFIG_YAML: &str = include_str!("../default-config.yaml");

/// The `guardrails:` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardrailsConfig {
    /// Install the middleware at all (default `false`).
    #[serde(default)]
    pub enabled: bool,
    /// Block the call when the provider errors (default `true`).
    #[serde(default = "default_true")]
    pub fail_closed: bool,
    /// OAP passport path or hosted agent id; becomes `request.agent_id`.
    #[serde(default)]
    pub passport: Option<String>,
    /// Where the provider is and how to construct it: the one-entry form
    /// of [`GuardrailsConfig::providers`].
    #[serde(default)]
    pub provider: Option<ProviderSpec>,
    /// A chain of providers, asked in order: the first denial wins, and
    /// each entry sees only the calls its `tools` / `except_tools` select.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub providers: Option<Vec<ProviderSpec>>,
    /// What a denial does: block the call (`enforce`, the default), or let
    /// it run and log it (`warn`) or only record and count it (`observe`),
    /// to try a policy on live traffic first.
    #[serde(default)]
    pub mode: Mode,
    /// Every decision, allowed ones too, as JSON lines (see
    /// [`crate::decision_log`]).
    #[serde(default)]
    pub decision_log: Option<DecisionLogConfig>,
    /// How audit events record the providers' reason messages (see
    /// [`AuditMessages`]).
    #[serde(default, skip_serializing_if = "AuditMessages::is_default")]
    pub audit_messages: AuditMessages,
}

/// `guardrails.audit_messages`: how audit events record a provider's
/// reason messages, which may quote the call's arguments (a command, a
/// path) that an audit log must not hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditMessages {
    /// As written for a provider that declares its messages never quote a
    /// call's input (the built-in allowlist and RBAC providers: DeerFlow's
    /// configs audit exactly as DeerFlow does), a fixed text per reason
    /// code for every other provider.
    #[default]
    Declared,
    /// A fixed text per reason code, whatever the provider declares.
    Fixed,
    /// As written, whatever the provider declares (DeerFlow's own
    /// behaviour; the audit log may then hold arguments a provider quotes).
    AsWritten,
}

impl AuditMessages {
    fn is_default(&self) -> bool {
        *self == AuditMessages::Declared
    }
}

/// `guardrails.mode`: what a denial does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// A denial blocks the call.
    #[default]
    Enforce,
    /// A denial lets the call run, logged as a warning (and recorded in the
    /// audit log as `would_deny_tool_call`).
    Warn,
    /// A denial lets the call run, recorded in the audit log and counted,
    /// logged at debug level only.
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

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

pub(super) fn default_true() -> bool {
    true
}

impl Default for GuardrailsConfig {
    fn default() -> Self {
        GuardrailsConfig {
            enabled: false,
            fail_closed: true,
            passport: None,
            provider: None,
            providers: None,
            mode: Mode::Enforce,
            decision_log: None,
            audit_messages: AuditMessages::Declared,
        }
    }
}

/// `guardrails.provider`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSpec {
    /// `path/to/libfoo.so:Symbol`, or `builtin:AllowlistProvider`. Empty
    /// when the provider is a program ([`ProviderSpec::command`]).
    #[serde(rename = "use", default, skip_serializing_if = "String::is_empty")]
    pub use_: String,
    /// A provider program instead of a library: its argv (`[python3,
    /// my_provider.py]`), run with `isolation: process` as the provider
    /// process. It speaks the provider protocol (`docs/provider-protocol.md`)
    /// and runs in the config file's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// The constructor's keyword arguments (after `$ENV_VAR` resolution).
    #[serde(default)]
    pub config: Map<String, Value>,
    /// The library file's SHA-256, in hex: checked before the library is
    /// loaded; a mismatch loads nothing.
    #[serde(default)]
    pub sha256: Option<String>,
    /// Load a library even when it, or a directory on its path, can be
    /// written by group or others (refused by default, as OpenSSH's
    /// `StrictModes` refuses such key files).
    #[serde(default)]
    pub allow_insecure_permissions: bool,
    /// Give up on a call after this many milliseconds: a provider error,
    /// decided by `fail_closed`. Default: none for an in-process provider
    /// (a call is waited for), 5000 with `isolation: process`.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Where the provider runs: in the host (`in_process`, the default) or
    /// in a child process of its own (`process`), whose crash or hang the
    /// host survives.
    #[serde(default)]
    pub isolation: Isolation,
    /// With `isolation: process`: how calls reach the provider process.
    /// Default: shared memory where it can be set up (Linux, a
    /// `guardhost provider-server` child), pipes otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<Transport>,
    /// The entry's name in a chain (`decided_by`, audit events, `check`);
    /// by default the provider's own name (with `#2`, `#3` ... when two
    /// entries share it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Glob patterns (`*` any run of characters, `?` one) of the tools this
    /// entry decides; empty: every tool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Glob patterns of tools this entry never decides (even when `tools`
    /// selects them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub except_tools: Vec<String>,
    /// Block the call when this entry errors; default: the section's
    /// `fail_closed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_closed: Option<bool>,
    /// What this entry's denials do; default: the section's `mode`. An
    /// entry in `warn` or `observe` runs in shadow beside enforcing ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
}

/// `provider.transport`: how calls reach a provider process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// A memory region both processes map, each side spinning briefly
    /// before it sleeps (Linux; the default there). Requests and answers
    /// too large for a slot, and the connection's end, still go over the
    /// pipes.
    SharedMemory,
    /// Framed messages over the child's stdin and stdout only.
    Pipes,
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::SharedMemory => "shared_memory",
            Transport::Pipes => "pipes",
        })
    }
}

/// `provider.isolation`: where the provider runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// In the host process: the fastest, but a provider that aborts,
    /// segfaults or exits takes the host with it.
    #[default]
    InProcess,
    /// In a child process over pipes (`guardhost provider-server`, or the
    /// program `provider.command` names): a crash, an `exit` or a hang
    /// becomes a provider error for the calls in flight and the process is
    /// restarted.
    Process,
}

impl std::fmt::Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Isolation::InProcess => "in_process",
            Isolation::Process => "process",
        })
    }
}

impl ProviderSpec {
    /// A spec with `use:` and `config`, and the other keys at their defaults.
    pub fn new(use_: impl Into<String>, config: Map<String, Value>) -> Self {
        ProviderSpec {
            use_: use_.into(),
            config,
            sha256: None,
            allow_insecure_permissions: false,
            timeout_ms: None,
            isolation: Isolation::InProcess,
            command: None,
            transport: None,
            name: None,
            tools: Vec::new(),
            except_tools: Vec::new(),
            fail_closed: None,
            mode: None,
        }
    }

    /// A spec for the provider program `command` (argv), run with
    /// `isolation: process`, constructed from `config`.
    pub fn program(command: Vec<String>, config: Map<String, Value>) -> Self {
        ProviderSpec {
            command: Some(command),
            isolation: Isolation::Process,
            ..ProviderSpec::new("", config)
        }
    }

    /// The per-call limit `timeout_ms` sets, if it sets one (a spec that
    /// passed [`Self::validate`] sets none of 0).
    pub fn call_limit(&self) -> Option<std::time::Duration> {
        self.timeout_ms.map(std::time::Duration::from_millis)
    }

    /// Checks what serde cannot: exactly one of `use:` and `command:`, the
    /// keys a program provider needs or cannot have, and a `timeout_ms` of
    /// at least 1. The message names the key and says what to write.
    pub fn validate(&self) -> Result<(), String> {
        if self.timeout_ms == Some(0) {
            return Err("`provider.timeout_ms` must be at least 1".into());
        }
        for (key, patterns) in [("tools", &self.tools), ("except_tools", &self.except_tools)] {
            if patterns.iter().any(|p| p.trim().is_empty()) {
                return Err(format!(
                    "`provider.{key}` holds an empty pattern, which selects no tool; write tool names or \
                     globs such as `write_*`, or remove it"
                ));
            }
        }
        if self.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
            return Err("`provider.name` is empty; name the entry, or remove `name` to use the provider's \
                        own name"
                .into());
        }
        if let Some(transport) = self.transport {
            if self.isolation != Isolation::Process {
                return Err(format!(
                    "`provider.transport: {transport}` chooses how calls reach a provider process; add \
                     `isolation: process`, or remove `transport`"
                ));
            }
            if self.command.is_some() && transport == Transport::SharedMemory {
                return Err("`provider.transport: shared_memory` is for libraries run by `guardhost \
                            provider-server`; a `command:` provider program speaks over pipes, so remove \
                            `transport`"
                    .into());
            }
            if transport == Transport::SharedMemory && !cfg!(target_os = "linux") {
                return Err("`provider.transport: shared_memory` is Linux only (it maps memory both \
                            processes share through a Linux memfd); on this system calls reach a provider \
                            process over pipes, so write `transport: pipes` or remove `transport`"
                    .into());
            }
        }
        let Some(command) = &self.command else {
            if self.use_.is_empty() {
                return Err("`provider`: missing field `use` (write `use: path/to/libfoo.so:Symbol` or \
                            `use: builtin:AllowlistProvider`; or, for a provider program, \
                            `command: [program, args...]` with `isolation: process`)"
                    .into());
            }
            return Ok(());
        };
        if !self.use_.is_empty() {
            return Err("`provider`: give either `use:` (a provider library) or `command:` (a provider \
                        program), not both"
                .into());
        }
        if command.first().is_none_or(|program| program.trim().is_empty()) {
            return Err("`provider.command` must name a program and its arguments, e.g. \
                        `command: [python3, my_provider.py]`"
                .into());
        }
        if self.isolation != Isolation::Process {
            return Err("`provider.command` runs the provider as a program of its own, which only \
                        `isolation: process` does; add `isolation: process`"
                .into());
        }
        if self.sha256.is_some() {
            return Err("`provider.sha256` pins a provider library's bytes; a `command:` provider has no \
                        library, so remove `sha256`"
                .into());
        }
        Ok(())
    }
}

impl GuardrailsConfig {
    /// Whether the middleware is installed: `enabled` **and** a provider set.
    pub fn is_active(&self) -> bool {
        self.enabled && !self.entries().is_empty()
    }

    /// The providers, in the order they are asked: `provider`, or the
    /// entries of `providers`.
    pub fn entries(&self) -> &[ProviderSpec] {
        match (&self.provider, &self.providers) {
            (Some(provider), _) => std::slice::from_ref(provider),
            (None, Some(providers)) => providers,
            (None, None) => &[],
        }
    }
}
