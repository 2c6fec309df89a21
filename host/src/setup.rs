//! From a loaded config to an installed guardrail (or none).

use std::sync::Arc;

use crate::config::LoadedConfig;
use crate::decision_log::DecisionLog;
use crate::instantiate::{instantiate_with, BuildError, LoadedProvider, ProviderInfo};
use crate::middleware::GuardrailMiddleware;
use crate::provider::GuardrailProvider;

/// A guardrail ready to wrap tool calls.
#[derive(Debug, Clone)]
pub struct Guardrail {
    /// The middleware.
    pub middleware: GuardrailMiddleware,
    /// What provider it runs.
    pub info: ProviderInfo,
}

/// Builds the guardrail a config asks for: `None` when the config leaves it
/// out (`enabled: false`, or no provider), as DeerFlow's middleware builder
/// does.
pub fn install(config: &LoadedConfig) -> Result<Option<Guardrail>, BuildError> {
    install_with(config, false)
}

/// [`install`]; `content_addressed` as in [`crate::instantiate::instantiate_with`].
pub(crate) fn install_with(
    config: &LoadedConfig,
    content_addressed: bool,
) -> Result<Option<Guardrail>, BuildError> {
    let section = &config.guardrails;
    let (true, Some(spec)) = (section.enabled, section.provider.as_ref()) else {
        return Ok(None);
    };
    let LoadedProvider { provider, info } = instantiate_with(spec, &config.base_dir, content_addressed)?;
    let middleware = middleware_for(config, provider, &info)?;
    Ok(Some(Guardrail { middleware, info }))
}

/// The middleware a config's `guardrails:` section puts around `provider`
/// (built from its `provider` spec): `fail_closed`, the passport, the
/// mode, the library's digest for audit events, and the decision log,
/// which is opened here.
pub fn middleware_for(
    config: &LoadedConfig,
    provider: Arc<dyn GuardrailProvider>,
    info: &ProviderInfo,
) -> Result<GuardrailMiddleware, BuildError> {
    let section = &config.guardrails;
    let decision_log = match &section.decision_log {
        Some(log) => Some(Arc::new(DecisionLog::open(log, &config.base_dir).map_err(|error| {
            BuildError::DecisionLog {
                path: crate::paths::join_relative(&config.base_dir, &log.path),
                message: error.to_string(),
            }
        })?)),
        None => None,
    };
    Ok(GuardrailMiddleware::new(provider)
        .with_fail_closed(section.fail_closed)
        .with_passport(section.passport.clone())
        .with_mode(section.mode)
        .with_library_sha256(info.sha256.clone())
        .with_decision_log(decision_log))
}
