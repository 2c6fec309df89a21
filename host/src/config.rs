//! The `guardrails:` and `authorization:` configuration sections: keys,
//! defaults, `$ENV_VAR` secrets, and where relative paths are resolved
//! from.
//!
//! # Map
//! - `types`: the `guardrails:` section and a provider entry
//!   ([`ProviderSpec`]), with modes, isolation and transports;
//! - `authorization`: DeerFlow's `authorization:` section;
//! - `decision_log`: the section's `decision_log:` settings;
//! - `loading`: reading a config ([`LoadedConfig`]): the file, the
//!   section in it, the entries checked, their digests;
//! - `error`: why a config cannot be used ([`ConfigError`]);
//! - `secrets`: `$ENV_VAR` references resolved;
//! - `lax`: the boolean spellings DeerFlow accepts;
//! - `hints`: a misspelled `guardrails` key named;
//! - `vars`: the environment variables that change how a config is read.

mod authorization;
mod decision_log;
mod error;
mod hints;
mod lax;
mod loading;
mod secrets;
mod types;
mod vars;

pub use authorization::AuthorizationConfig;
pub use decision_log::{DecisionLogConfig, WhenFull};
pub use error::ConfigError;
pub use loading::{
    entry_place, provider_config_from_path, provider_config_from_yaml, require_guardrail_from_env,
    ConfigOrigin, LoadedConfig,
};
pub use types::{AuditMessages, GuardrailsConfig, Isolation, Mode, ProviderSpec, Transport};
pub use vars::{ALLOW_INSECURE_CONFIG_VAR, REQUIRE_GUARDRAIL_VAR};

#[cfg(test)]
use {hints::edit_distance, loading::parse_require, std::path::PathBuf};

#[cfg(test)]
mod tests;
