//! The `guardrails:` configuration section: keys, defaults, `$ENV_VAR`
//! secrets, and where relative paths are resolved from.

pub mod decision_log;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use self::decision_log::{DecisionLogConfig, WhenFull};
use crate::json::json_type;
use crate::paths::join_relative;
use crate::yaml;

/// The text of the embedded default config (what `guardhost` uses when no
/// `--config` is given).
pub const DEFAULT_CONFIG_YAML: &str = include_str!("default-config.yaml");

/// The keys of DeerFlow's `guardrails:` section: a file whose top level
/// holds one of them (and no `guardrails:` key) is the section itself.
const SECTION_KEYS: [&str; 5] = ["enabled", "fail_closed", "passport", "provider", "providers"];

/// Every key the section may hold: found at the top level next to a
/// `guardrails:` key, one of these was meant to be indented under it.
const ALL_SECTION_KEYS: [&str; 8] =
    ["enabled", "fail_closed", "passport", "provider", "providers", "mode", "decision_log", "audit_messages"];

/// The environment variable that makes a config installing no guardrail an
/// error, as `--require-guardrail` does: `1` or `true` (any case) to
/// require one, `0` or `false` not to; anything else is an error.
pub const REQUIRE_GUARDRAIL_VAR: &str = "GUARDHOST_REQUIRE_GUARDRAIL";

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

fn default_true() -> bool {
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

    /// Checks what serde cannot: exactly one of `use:` and `command:`, and
    /// the keys a program provider needs or cannot have. The message names
    /// the key and says what to write.
    pub fn validate(&self) -> Result<(), String> {
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

/// Where a config came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOrigin {
    /// The embedded default.
    Embedded,
    /// A file.
    File(PathBuf),
}

/// A parsed config together with what is needed to act on it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedConfig {
    /// The section.
    pub guardrails: GuardrailsConfig,
    /// Where relative `use:` paths are resolved from: the config file's
    /// directory (the working directory for the embedded default).
    pub base_dir: PathBuf,
    /// Where the config came from.
    pub origin: ConfigOrigin,
    /// False when the file was a whole application config without a
    /// `guardrails:` section (so the defaults apply).
    pub section_found: bool,
    /// DeerFlow's `authorization:` section (disabled when the file has
    /// none): the guard asked before every guardrail.
    pub authorization: AuthorizationConfig,
    /// `sha256:` and the SHA-256 of the config's text, in hex: names the
    /// version running (reload logs, `/readyz`) without showing what it
    /// holds.
    pub digest: String,
    /// The digest of each guard's entry as written (see
    /// [`LoadedConfig::guard_digests`]): the `authorization:` provider's,
    /// then each `guardrails:` entry's.
    entry_digests: EntryDigests,
}

/// The digests of the provider entries as the file writes them.
#[derive(Debug, Clone, Default, PartialEq)]
struct EntryDigests {
    authorization: Option<String>,
    guardrails: Vec<String>,
}

/// A config that cannot be used. Every variant says what to fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Another user could change the file, or an entry on its path.
    #[error("config file {}: {source}{} (`provider.allow_insecure_permissions` in the file cannot: whoever can write the file could set it)", path.display(), source.accept_hint(&format!("start guardhost with {ALLOW_INSECURE_CONFIG_VAR}=1 to accept that")))]
    Insecure {
        /// The file, as named.
        path: PathBuf,
        /// The entry and what is wrong with it.
        source: crate::permissions::PermissionError,
    },
    /// The text is not YAML.
    #[error("{origin}: {source}")]
    Yaml {
        /// The file, or "embedded default".
        origin: String,
        /// The parser's message.
        source: yaml::YamlError,
    },
    /// The document's top level is not a mapping.
    #[error("{origin}: the top level must be a mapping (either a `guardrails:` section or its keys: enabled, fail_closed, passport, provider), found {found}")]
    NotAMapping {
        /// The file.
        origin: String,
        /// The JSON type found.
        found: &'static str,
    },
    /// The file holds no YAML at all (empty, or only comments): almost
    /// surely a mistake, and read as it is it would install no guardrail.
    #[error("{origin}: the config is empty (no YAML in it, or only comments), so it would install no guardrail; write a `guardrails:` section with `enabled: true` and a `provider:` (config.example.yaml shows one), or leave the config out to use the embedded default")]
    Empty {
        /// The file.
        origin: String,
    },
    /// `guardrails:` holds something other than a mapping: nothing under
    /// it (null), a list or a scalar. DeerFlow refuses it at start-up.
    #[error("{origin}: `guardrails` must be a mapping of the section's keys (enabled, fail_closed, passport, provider ...), found {found}; as it is no guardrail would be installed (DeerFlow refuses it too). Indent the keys under it: `guardrails:` then `  enabled: true` and `  provider:` with its `use:` on the lines below")]
    SectionNotAMapping {
        /// The file.
        origin: String,
        /// What was found instead (`null (nothing under it)`, `a list` ...).
        found: String,
    },
    /// Keys of the section at the top level of a file that has a
    /// `guardrails:` key: meant to be indented under it.
    #[error("{origin}: {keys} belong in the `guardrails:` section but are at the top level of the file, next to `guardrails:`{empty}; as written the guardrail would not see them. Indent them under `guardrails:`")]
    MisplacedKeys {
        /// The file.
        origin: String,
        /// The keys, each in backquotes, comma-separated.
        keys: String,
        /// `" (which has nothing under it)"` when the section is null.
        empty: &'static str,
    },
    /// No `guardrails:` section, but a top-level key that looks like a
    /// misspelling of it: the guardrail would be silently left out.
    #[error("{origin}: the file has no `guardrails:` section, but a top-level key `{key}`: did you mean `guardrails`? As written no guardrail would be installed; rename the key to `guardrails`")]
    MisspelledSection {
        /// The file.
        origin: String,
        /// The key found.
        key: String,
    },
    /// A guardrail is required (`--require-guardrail`,
    /// [`REQUIRE_GUARDRAIL_VAR`]) and the config installs none.
    #[error("{origin}: installs no guardrail ({why}), and a guardrail is required (--require-guardrail or {REQUIRE_GUARDRAIL_VAR}=1), so every tool call would run unchecked; set `enabled: true` and a `provider:` in the `guardrails:` section, or drop the requirement to run without a guardrail")]
    Unguarded {
        /// The file, or "embedded default config".
        origin: String,
        /// Why none is installed ([`LoadedConfig::unguarded_reason`]).
        why: &'static str,
    },
    /// [`REQUIRE_GUARDRAIL_VAR`] is set to something else than `1`, `0`,
    /// `true` or `false`.
    #[error("the environment variable {REQUIRE_GUARDRAIL_VAR} must be 1 or true (require a guardrail) or 0 or false (do not), but it is set to something else; fix or unset it")]
    RequireGuardrailVar,
    /// A key or value in the section is wrong.
    #[error("{origin}: invalid `guardrails` section: {message}")]
    Section {
        /// The file.
        origin: String,
        /// serde's message, which names the key.
        message: String,
    },
    /// A key or value in the `authorization:` section is wrong.
    #[error("{origin}: invalid `authorization` section: {message}")]
    Authorization {
        /// The file.
        origin: String,
        /// What is wrong, naming the key.
        message: String,
    },
    /// A provider config given on its own is not a mapping.
    #[error("{origin}: a provider config must be a mapping of config keys (what goes under `provider.config:`), found {found}")]
    ProviderConfigNotAMapping {
        /// The file, or the flag.
        origin: String,
        /// The JSON type found.
        found: &'static str,
    },
    /// A `$NAME` string in the section names an environment variable that
    /// is not set. The message keeps DeerFlow's wording.
    #[error("{origin}: `{key}`: Environment variable {var} not found for config value `${var}`; export {var} before starting guardhost")]
    MissingEnvVar {
        /// The file.
        origin: String,
        /// The config key (dotted path from the section, e.g.
        /// `guardrails.provider.config.api_key`) that refers to it.
        key: String,
        /// The variable.
        var: String,
    },
}

impl LoadedConfig {
    /// Reads a config file: a whole application `config.yaml` (its
    /// `guardrails:` section is used, everything else ignored) or a file whose
    /// top level is the section itself.
    ///
    /// The file, and every directory and link on its path, must be safe from
    /// other users (see [`crate::permissions`]), unless the environment sets
    /// [`ALLOW_INSECURE_CONFIG_VAR`]`=1`.
    pub fn from_path(path: &Path) -> Result<Self, ConfigError> {
        let text = read_bounded(path)?;
        if !insecure_config_allowed() {
            crate::permissions::check(path, crate::permissions::Subject::Config)
                .map_err(|source| ConfigError::Insecure { path: path.into(), source })?;
        }
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let base_dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        Self::from_yaml(&text, base_dir, ConfigOrigin::File(path.into()), env_lookup)
    }

    /// The embedded default config.
    pub fn embedded_default() -> Self {
        let base_dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        Self::from_yaml(DEFAULT_CONFIG_YAML, base_dir, ConfigOrigin::Embedded, env_lookup)
            .expect("the embedded default config is valid")
    }

    /// The provider specs of the guards it installs, in the order the
    /// middleware asks them: the `authorization:` provider (when enabled),
    /// then each `guardrails:` entry (when enabled). The same order as
    /// [`crate::Guardrail::entries`].
    pub fn guard_specs(&self) -> Vec<&ProviderSpec> {
        let authorization = &self.authorization;
        let first = authorization.enabled.then_some(authorization.provider.as_ref()).flatten();
        let guardrails = if self.guardrails.enabled { self.guardrails.entries() } else { &[] };
        first.into_iter().chain(guardrails).collect()
    }

    /// The digest of each guard's entry as the file writes it (before
    /// `$ENV_VAR` references are resolved), in the order of
    /// [`LoadedConfig::guard_specs`]: `sha256:` and hex, or `""` for a spec
    /// that was not read from YAML.
    pub fn guard_digests(&self) -> Vec<String> {
        let digests = &self.entry_digests;
        let authorization = &self.authorization;
        let first = (authorization.enabled && authorization.provider.is_some())
            .then(|| digests.authorization.clone().unwrap_or_default());
        let count = if self.guardrails.enabled { self.guardrails.entries().len() } else { 0 };
        let rest = (0..count).map(|i| digests.guardrails.get(i).cloned().unwrap_or_default());
        first.into_iter().chain(rest).collect()
    }

    /// Where the config writes each guard, in the order of
    /// [`LoadedConfig::guard_specs`]: `authorization.provider`, then
    /// [`entry_place`] of each `guardrails:` entry.
    pub fn guard_places(&self) -> Vec<String> {
        let authorization = &self.authorization;
        let first = (authorization.enabled && authorization.provider.is_some())
            .then(|| "`authorization.provider`".to_owned());
        let chain = self.guardrails.providers.is_some();
        let entries = if self.guardrails.enabled { self.guardrails.entries() } else { &[] };
        let rest = entries.iter().enumerate().map(|(i, _)| entry_place(chain, i, None));
        first.into_iter().chain(rest).collect()
    }

    /// Why this config installs no guardrail (`None` when it installs one):
    /// the file has no section, `enabled` is false, or no provider is set.
    pub fn unguarded_reason(&self) -> Option<&'static str> {
        if self.guardrails.is_active() || self.authorization.enabled {
            None
        } else if !self.section_found {
            Some("the file has no `guardrails:` section")
        } else if !self.guardrails.enabled {
            Some("`enabled` is false")
        } else {
            Some("no `provider` is set")
        }
    }

    /// Where the config came from, as errors name it.
    pub fn origin_name(&self) -> String {
        match &self.origin {
            ConfigOrigin::Embedded => "embedded default config".to_owned(),
            ConfigOrigin::File(p) => p.display().to_string(),
        }
    }

    /// [`ConfigError::Unguarded`] when this config installs no guardrail:
    /// what `--require-guardrail` checks.
    pub fn require_guardrail(&self) -> Result<(), ConfigError> {
        match self.unguarded_reason() {
            None => Ok(()),
            Some(why) => Err(ConfigError::Unguarded { origin: self.origin_name(), why }),
        }
    }

    /// Parses config text; `lookup` resolves `$ENV_VAR` references.
    pub fn from_yaml(
        text: &str,
        base_dir: PathBuf,
        origin: ConfigOrigin,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let name = match &origin {
            ConfigOrigin::Embedded => "embedded default config".to_owned(),
            ConfigOrigin::File(p) => p.display().to_string(),
        };
        let document =
            yaml::parse(text).map_err(|source| ConfigError::Yaml { origin: name.clone(), source })?;
        let (section, section_found, authorization) = match document {
            Value::Null => return Err(ConfigError::Empty { origin: name }),
            Value::Object(mut top) => {
                // DeerFlow's `authorization:` sits beside `guardrails:`.
                let authorization = top.remove("authorization");
                let (section, found) = section_of(top, &name)?;
                (section, found, authorization)
            }
            other => return Err(ConfigError::NotAMapping { origin: name, found: json_type(&other) }),
        };
        let entry_digests = EntryDigests {
            authorization: authorization
                .as_ref()
                .and_then(|a| a.get("provider"))
                .map(|p| digest_of(&p.to_string())),
            guardrails: entry_digests(&section),
        };
        let authorization = read_authorization(authorization, &name, &lookup)?;
        // DeerFlow takes `provider: null` for no provider; here it is an
        // error, since a section that names `provider` means to have one.
        if section.get("provider").is_some_and(Value::is_null) {
            return Err(ConfigError::Section {
                origin: name,
                message: "`provider` is empty (null): give it `use: path/to/libfoo.so:Symbol` (or `use: \
                          builtin:AllowlistProvider`) on an indented line below, or remove the `provider` key \
                          and set `enabled: false` to run without a guardrail"
                    .into(),
            });
        }
        // DeerFlow resolves `$NAME` in every string of the application config
        // before its schema reads the section, so `enabled: $FLAG` and
        // `passport: $PASSPORT` work as well as secrets in `provider.config`.
        let mut section = section;
        resolve_env(&mut section, "guardrails", &lookup)
            .map_err(|(key, var)| ConfigError::MissingEnvVar { origin: name.clone(), key, var })?;
        lax_booleans(&mut section, &name);
        // The message names the key and the expected type, never the value
        // (which may be a secret from the environment).
        let mut guardrails: GuardrailsConfig = guardhost_abi::deserialize_config(section)
            .map_err(|message| ConfigError::Section { origin: name.clone(), message })?;
        check_entries(&guardrails)
            .map_err(|message| ConfigError::Section { origin: name.clone(), message })?;
        if let Some(passport) = guardrails.passport.as_mut() {
            *passport = passport_from(passport, &base_dir);
        }
        Ok(LoadedConfig {
            guardrails,
            base_dir,
            origin,
            section_found,
            authorization,
            digest: digest_of(text),
            entry_digests,
        })
    }
}

/// Checks the section's providers: not both `provider` and `providers`, a
/// chain with at least one entry, and each entry's keys.
fn check_entries(section: &GuardrailsConfig) -> Result<(), String> {
    match (&section.provider, &section.providers) {
        (Some(_), Some(_)) => {
            return Err("give either `provider:` (one provider) or `providers:` (a chain, asked in order), \
                        not both; a one-entry `providers:` list is the same as `provider:`"
                .into())
        }
        (None, Some(list)) if list.is_empty() => {
            return Err(
                "`providers` is an empty list, so no guardrail would be installed; list at least one \
                        provider (each with its `use:`), or set `enabled: false`"
                    .into(),
            )
        }
        _ => {}
    }
    let chain = section.providers.is_some();
    for (index, spec) in section.entries().iter().enumerate() {
        spec.validate().map_err(|message| match chain {
            // Each entry's messages name `provider.<key>`: say which entry.
            true => format!("{}: {message}", entry_place(chain, index, spec.name.as_deref())),
            false => message,
        })?;
    }
    Ok(())
}

/// Where the config writes entry `index` of the `guardrails:` section, as
/// every message names it: `guardrails.provider`, or
/// `guardrails.providers[1]` (counting from 0, as a YAML path does), with
/// the entry's `name:` when it has one.
pub fn entry_place(chain: bool, index: usize, name: Option<&str>) -> String {
    let place = match chain {
        true => format!("`guardrails.providers[{index}]`"),
        false => "`guardrails.provider`".to_owned(),
    };
    match name {
        Some(name) => format!("{place} ('{name}')"),
        None => place,
    }
}

/// The digest of each provider entry as the file writes it (before
/// `$ENV_VAR` references are resolved, so no secret goes into it), in the
/// order of [`GuardrailsConfig::entries`]: what names an entry's version on
/// `/readyz` and in reload messages.
fn entry_digests(section: &Value) -> Vec<String> {
    let written = |entry: &Value| digest_of(&entry.to_string());
    match (section.get("provider"), section.get("providers")) {
        (Some(entry), _) if !entry.is_null() => vec![written(entry)],
        (_, Some(Value::Array(entries))) => entries.iter().map(written).collect(),
        _ => Vec::new(),
    }
}

/// The section of a document whose top level is `top`, and whether the
/// file has one: its `guardrails:` mapping, or `top` itself when it holds
/// the section's keys. A `guardrails:` key that is not a mapping, section
/// keys beside it, and a misspelled `guardrails` key are refused.
fn section_of(mut top: Map<String, Value>, origin: &str) -> Result<(Value, bool), ConfigError> {
    let misplaced: Vec<String> =
        ALL_SECTION_KEYS.iter().filter(|k| top.contains_key(**k)).map(|k| format!("`{k}`")).collect();
    match top.remove("guardrails") {
        Some(section) if !misplaced.is_empty() => Err(ConfigError::MisplacedKeys {
            origin: origin.to_owned(),
            keys: misplaced.join(", "),
            empty: if section.is_null() { " (which has nothing under it)" } else { "" },
        }),
        Some(section @ Value::Object(_)) => Ok((section, true)),
        Some(other) => Err(ConfigError::SectionNotAMapping {
            origin: origin.to_owned(),
            found: match other {
                Value::Null => "nothing under it (null)".to_owned(),
                other => json_type(&other).to_owned(),
            },
        }),
        None if top.keys().any(|k| SECTION_KEYS.contains(&k.as_str())) => Ok((Value::Object(top), true)),
        None => match top.keys().find(|k| looks_like_guardrails(k)) {
            Some(key) => Err(ConfigError::MisspelledSection { origin: origin.to_owned(), key: key.clone() }),
            None => Ok((Value::Object(Map::new()), false)),
        },
    }
}

/// Whether a top-level key looks like a misspelling of `guardrails`: at
/// most two edits from it (an insertion, deletion, substitution or swap of
/// two neighbours each), case aside.
fn looks_like_guardrails(key: &str) -> bool {
    const SECTION: &str = "guardrails";
    // A key much longer or shorter cannot be two edits away.
    if key == SECTION || key.len() > SECTION.len() + 8 {
        return false;
    }
    edit_distance(&key.to_lowercase(), SECTION) <= 2
}

/// The optimal string alignment distance between `a` and `b`: insertions,
/// deletions, substitutions and swaps of two adjacent characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1).min(rows[i][j - 1] + 1).min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

/// `sha256:` and the hex SHA-256 of a config's text.
fn digest_of(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let hex: String = Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Whether a guardrail is required by the environment
/// ([`REQUIRE_GUARDRAIL_VAR`]): `false` when it is unset.
pub fn require_guardrail_from_env() -> Result<bool, ConfigError> {
    match std::env::var_os(REQUIRE_GUARDRAIL_VAR) {
        None => Ok(false),
        Some(value) => parse_require(value.to_str()),
    }
}

/// [`REQUIRE_GUARDRAIL_VAR`]'s value read: `1`/`true` or `0`/`false`.
fn parse_require(value: Option<&str>) -> Result<bool, ConfigError> {
    match value.map(str::to_ascii_lowercase).as_deref() {
        Some("1" | "true") => Ok(true),
        Some("0" | "false") => Ok(false),
        _ => Err(ConfigError::RequireGuardrailVar),
    }
}

/// Parses a provider's config on its own (what goes under
/// `provider.config:`), as YAML or JSON, and resolves `$ENV_VAR` references
/// as a full config would. `origin` names the source in errors.
pub fn provider_config_from_yaml(text: &str, origin: &str) -> Result<Map<String, Value>, ConfigError> {
    let document =
        yaml::parse(text).map_err(|source| ConfigError::Yaml { origin: origin.to_owned(), source })?;
    let mut config = match document {
        Value::Null => Map::new(),
        Value::Object(map) => map,
        other => {
            return Err(ConfigError::ProviderConfigNotAMapping {
                origin: origin.to_owned(),
                found: json_type(&other),
            })
        }
    };
    resolve_env_vars(&mut config, origin, &env_lookup)?;
    Ok(config)
}

/// Reads a provider's config on its own from a YAML or JSON file; see
/// [`provider_config_from_yaml`].
pub fn provider_config_from_path(path: &Path) -> Result<Map<String, Value>, ConfigError> {
    let text = read_bounded(path)?;
    provider_config_from_yaml(&text, &path.display().to_string())
}

/// The environment variable that lets a config file others can change be
/// read: set by whoever starts guardhost, never by the file.
pub const ALLOW_INSECURE_CONFIG_VAR: &str = "GUARDHOST_ALLOW_INSECURE_CONFIG";

/// Whether [`ALLOW_INSECURE_CONFIG_VAR`] is `1`, `true` or `yes`.
fn insecure_config_allowed() -> bool {
    std::env::var(ALLOW_INSECURE_CONFIG_VAR)
        .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
}

/// Reads a config file, never more than [`yaml::MAX_BYTES`] and one byte of
/// it: a huge file (or `/dev/zero`) is refused without being read whole.
fn read_bounded(path: &Path) -> Result<String, ConfigError> {
    use std::io::Read;
    let read_error = |source| ConfigError::Read { path: path.into(), source };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::new();
    file.take(yaml::MAX_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(read_error)?;
    if bytes.len() > yaml::MAX_BYTES {
        return Err(ConfigError::Yaml { origin: path.display().to_string(), source: yaml::too_large(None) });
    }
    String::from_utf8(bytes).map_err(|_| {
        read_error(std::io::Error::new(std::io::ErrorKind::InvalidData, "stream did not contain valid UTF-8"))
    })
}

/// Resolves `$ENV_VAR` strings anywhere in a provider config given on its
/// own.
fn resolve_env_vars(
    config: &mut Map<String, Value>,
    origin: &str,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    for (key, value) in config.iter_mut() {
        resolve_env(value, key, lookup).map_err(|(key, var)| ConfigError::MissingEnvVar {
            origin: origin.to_owned(),
            key,
            var,
        })?;
    }
    Ok(())
}

/// A section's boolean keys, and those of each provider entry.
const BOOLEAN_KEYS: [&str; 2] = ["enabled", "fail_closed"];
const ENTRY_BOOLEAN_KEYS: [&str; 2] = ["allow_insecure_permissions", "fail_closed"];

/// Reads the boolean spellings DeerFlow accepts (PyYAML's `yes`/`on`,
/// pydantic's `"true"`, `1`, `0` ...) as booleans, with a warning that
/// names the key (never the value, which may come from the environment),
/// in the section `name` (`guardrails`, `authorization`) and its
/// providers.
pub(crate) fn lax_booleans_in(section: &mut Value, name: &str, origin: &str) {
    fn lax(holder: &mut Value, keys: &[&str], at: &str, origin: &str) {
        for key in keys {
            let Some(value) = holder.get_mut(*key) else { continue };
            if value.is_boolean() {
                continue;
            }
            if let Some(b) = pydantic_bool(value) {
                tracing::warn!(
                    "{origin}: `{at}.{key}` is {}, read as {b} the way DeerFlow reads it; write `{b}`",
                    json_type(value)
                );
                *value = Value::Bool(b);
            }
        }
    }
    lax(section, &BOOLEAN_KEYS, name, origin);
    if let Some(provider) = section.get_mut("provider") {
        lax(provider, &ENTRY_BOOLEAN_KEYS, &format!("{name}.provider"), origin);
    }
    if let Some(Value::Array(entries)) = section.get_mut("providers") {
        for (index, entry) in entries.iter_mut().enumerate() {
            lax(entry, &ENTRY_BOOLEAN_KEYS, &format!("{name}.providers[{index}]"), origin);
        }
    }
}

fn lax_booleans(section: &mut Value, origin: &str) {
    lax_booleans_in(section, "guardrails", origin);
}

/// pydantic's lax boolean: the strings `true/false, yes/no, on/off, t/f,
/// y/n, 1/0` (any case, PyYAML's YAML 1.1 booleans among them), and the
/// numbers 0 and 1. `None` for anything else, which is then refused.
pub(crate) fn pydantic_bool(value: &Value) -> Option<bool> {
    match value {
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "t" | "y" | "1" => Some(true),
            "false" | "no" | "off" | "f" | "n" | "0" => Some(false),
            _ => None,
        },
        Value::Number(n) => match n.as_f64() {
            Some(1.0) => Some(true),
            Some(0.0) => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// `guardrails.passport` as the provider sees it: a relative path (it has
/// a directory separator or ends in `.json`) is joined to the config
/// file's directory, like every relative path in the file; anything else
/// (a hosted agent id) is kept as written.
fn passport_from(passport: &str, base_dir: &Path) -> String {
    let path = Path::new(passport);
    let looks_like_a_path = passport.contains(['/', '\\']) || passport.ends_with(".json");
    // `has_root`: `/etc/aport/passport.json` is taken as written on Windows
    // too (on the current drive), not joined to the config's folder.
    if !looks_like_a_path || path.is_absolute() || path.has_root() || passport.starts_with('~') {
        return passport.to_owned();
    }
    join_relative(base_dir, path).to_string_lossy().into_owned()
}

fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The variable a string refers to when the whole string is `$NAME` or
/// `${NAME}` (NAME: letters, digits, `_`, not starting with a digit).
fn env_reference(s: &str) -> Option<&str> {
    let name = s.strip_prefix('$')?;
    let name = name.strip_prefix('{').and_then(|n| n.strip_suffix('}')).unwrap_or(name);
    let mut chars = name.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic() || first == '_')
        .then_some(())
        .filter(|_| chars.all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(|_| name)
}

/// Replaces `$NAME` strings anywhere inside `value`; on a missing variable
/// returns (dotted key path, variable).
pub(crate) fn resolve_env(
    value: &mut Value,
    path: &str,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<(), (String, String)> {
    match value {
        Value::String(s) => {
            if let Some(var) = env_reference(s) {
                *s = lookup(var).ok_or_else(|| (path.to_owned(), var.to_owned()))?;
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                resolve_env(item, &format!("{path}[{i}]"), lookup)?;
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                resolve_env(v, &format!("{path}.{k}"), lookup)?;
            }
        }
        _ => {}
    }
    Ok(())
}

// DeerFlow's `authorization:` section: the guard asked before the
// guardrails, with its own `fail_closed` and the role given to callers
// without one.
/// The `authorization:` section, as DeerFlow's `AuthorizationConfig` reads
/// it, and `infrastructure_tools`, guardhost's way to name the framework
/// tools DeerFlow lets through (`authz.infrastructure_tool`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorizationConfig {
    /// Ask the authorization provider before every tool call (default
    /// `false`).
    #[serde(default)]
    pub enabled: bool,
    /// Block the call when the provider errors, an unknown role among
    /// other causes (default `true`).
    #[serde(default = "default_true")]
    pub fail_closed: bool,
    /// The role of a caller whose context has no `user_role` (or an empty
    /// one), default `user`. An unknown role is not replaced.
    #[serde(default = "default_role")]
    pub default_role: String,
    /// The provider: `use:` (DeerFlow's
    /// `deerflow.authz.rbac:RbacAuthorizationProvider`, guardhost's
    /// `builtin:RbacAuthorizationProvider`, or a library) and `config:`;
    /// the other keys of a guardrail provider (`isolation`, `timeout_ms`,
    /// `sha256` ...) work here too.
    #[serde(default)]
    pub provider: Option<ProviderSpec>,
    /// Tools allowed without asking the provider, with reason
    /// `authz.infrastructure_tool`: framework tools made from an
    /// already-authorized set (DeerFlow's `tool_search`). Exact names.
    #[serde(default)]
    pub infrastructure_tools: Vec<String>,
}

fn default_role() -> String {
    "user".into()
}

impl Default for AuthorizationConfig {
    fn default() -> Self {
        AuthorizationConfig {
            enabled: false,
            fail_closed: true,
            default_role: default_role(),
            provider: None,
            infrastructure_tools: Vec::new(),
        }
    }
}

/// Reads the `authorization:` value of a document (absent: disabled), its
/// `$ENV_VAR` strings resolved as in `guardrails:`.
fn read_authorization(
    value: Option<Value>,
    origin: &str,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<AuthorizationConfig, ConfigError> {
    let section_error = |message: String| ConfigError::Authorization { origin: origin.to_owned(), message };
    let mut value =
        match value {
            None => return Ok(AuthorizationConfig::default()),
            Some(Value::Object(map)) => Value::Object(map),
            Some(Value::Null) => return Err(section_error(
                "`authorization` has nothing under it (null); indent its keys under it (`enabled: true`, \
                 `provider:` ...), or remove it to run without authorization"
                    .into(),
            )),
            Some(other) => {
                return Err(section_error(format!(
            "`authorization` must be a mapping of its keys (enabled, fail_closed, default_role, provider), \
                 found {}",
            json_type(&other)
        )))
            }
        };
    resolve_env(&mut value, "authorization", lookup).map_err(|(key, var)| ConfigError::MissingEnvVar {
        origin: origin.to_owned(),
        key,
        var,
    })?;
    lax_booleans_in(&mut value, "authorization", origin);
    let config: AuthorizationConfig = guardhost_abi::deserialize_config(value).map_err(section_error)?;
    if config.default_role.is_empty() {
        return Err(section_error(
            "`default_role` is empty; name the role callers without one get (DeerFlow's default is `user`)"
                .into(),
        ));
    }
    if let Some(spec) = &config.provider {
        spec.validate().map_err(section_error)?;
        let chain_keys = [
            ("name", spec.name.is_some()),
            ("tools", !spec.tools.is_empty()),
            ("except_tools", !spec.except_tools.is_empty()),
            ("fail_closed", spec.fail_closed.is_some()),
            ("mode", spec.mode.is_some()),
        ];
        if let Some((key, _)) = chain_keys.iter().find(|(_, set)| *set) {
            return Err(section_error(format!(
                "`provider.{key}` is a key of a `guardrails:` chain entry; the authorization provider decides \
                 every call (set `fail_closed` on the section, and list framework tools to let through in \
                 `infrastructure_tools`)"
            )));
        }
    } else if config.enabled {
        // DeerFlow's resolve_authorization_provider raises this.
        return Err(section_error(
            "authorization.enabled is true but no provider is configured; set authorization.provider.use to \
             a class path (`deerflow.authz.rbac:RbacAuthorizationProvider`, or a provider library)"
                .into(),
        ));
    }
    if config.infrastructure_tools.iter().any(|t| t.is_empty()) {
        return Err(section_error("`infrastructure_tools` holds an empty name; list tool names".into()));
    }
    Ok(config)
}

#[cfg(test)]
mod tests;
