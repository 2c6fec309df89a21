//! Why a config cannot be used; every variant says what to fix.

use std::path::PathBuf;

use super::vars::{ALLOW_INSECURE_CONFIG_VAR, REQUIRE_GUARDRAIL_VAR};
use crate::yaml;

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
        /// Why none is installed ([`super::LoadedConfig::unguarded_reason`]).
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
