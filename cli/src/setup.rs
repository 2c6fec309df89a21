//! What every command does first: read the config (or the embedded
//! default), build its guardrail, and, for `--async`, a tokio runtime; and
//! the help texts of the options every command shares.

use guardhost::{install, Guardrail, LoadedConfig};

use crate::error::CliError;

/// The help text of every `--config`.
pub const CONFIG_HELP: &str = "A DeerFlow-style config.yaml (its `guardrails:` section is used) or a file \
whose top level is that section. Default: the embedded default config: the built-in allowlist, \
enabled, fail-closed, denying bash, write_file and str_replace";

/// The help text of every `--require-guardrail`.
pub const REQUIRE_HELP: &str = "Refuse (exit 2) a config that installs no guardrail: `enabled: false`, no \
provider, or no `guardrails:` section. The environment variable GUARDHOST_REQUIRE_GUARDRAIL=1 (or true) \
does the same";

/// The tokio runtime of `--async` (`eval` and `run`).
pub fn async_runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|source| CliError::Io { what: "cannot start the async runtime".into(), source })
}

/// Loads the config named on the command line, or the embedded default.
pub fn load_config(path: Option<&std::path::Path>) -> Result<LoadedConfig, CliError> {
    Ok(match path {
        Some(path) => LoadedConfig::from_path(path)?,
        None => LoadedConfig::embedded_default(),
    })
}

/// Whether a guardrail is required: by `--require-guardrail` (`flag`) or
/// by the environment ([`guardhost::REQUIRE_GUARDRAIL_VAR`], whose value
/// is checked either way).
pub fn required(flag: bool) -> Result<bool, CliError> {
    Ok(guardhost::require_guardrail_from_env()? || flag)
}

/// Loads the config and builds its guardrail (`None` when not installed);
/// with `require`, a config that installs none is an error.
pub fn load_guardrail(
    path: Option<&std::path::Path>,
    require: bool,
) -> Result<(LoadedConfig, Option<Guardrail>), CliError> {
    let config = load_config(path)?;
    if require {
        config.require_guardrail()?;
    }
    let guardrail = install(&config)?;
    Ok((config, guardrail))
}

/// Says on stderr that `config` installs no guardrail, so that every call
/// `eval` or `run` is given is allowed unchecked.
pub fn warn_unguarded(config: &LoadedConfig) {
    if let Some(why) = config.unguarded_reason() {
        tracing::warn!(
            "{}: no guardrail is installed ({why}): every tool call is allowed unchecked \
             (--require-guardrail refuses such a config)",
            config.origin_name()
        );
    }
}
