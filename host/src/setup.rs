//! From a loaded config to an installed guardrail (or none): the
//! `authorization:` provider first, then each provider of `guardrails:`,
//! as the guards of one middleware.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::authorization::{filter_tools, usable_names, AuthorizationAdapter, FilterError, ADAPTER_NAME};
use crate::built::{BuildError, LoadedProvider, ProviderInfo};
use crate::config::{LoadedConfig, ProviderSpec};
use crate::decision_log::DecisionLog;
use crate::instantiate::{instantiate_with, Instantiation};
use crate::middleware::{Guard, GuardKind, GuardrailMiddleware, ToolSelector};
use crate::provider::GuardrailProvider;

/// A guardrail ready to wrap tool calls.
#[derive(Debug, Clone)]
pub struct Guardrail {
    /// The middleware.
    pub middleware: GuardrailMiddleware,
    /// What provider it runs: the first of the `guardrails:` section (the
    /// authorization provider when that section installs none).
    pub info: ProviderInfo,
    /// Each guard's provider, in the middleware's order (the
    /// authorization provider first, when there is one).
    pub entries: Vec<ProviderInfo>,
    /// Where the config writes each guard and the digest of its entry as
    /// written, in the same order (see [`Guardrail::described`]).
    pub written: Vec<Written>,
}

/// What a guard built outside a config file is written as.
static NO_PLACE: Written = Written { place: String::new(), digest: String::new() };

/// Where the config writes a guard, and its entry's digest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// `authorization.provider`, `guardrails.provider` or
    /// `guardrails.providers[N]` (counting from 0).
    pub place: String,
    /// `sha256:` and the hex SHA-256 of the entry's text as written (its
    /// `$ENV_VAR` references unresolved); empty for a guardrail not built
    /// from a config file.
    pub digest: String,
}

/// One guard of a guardrail as an operator sees it: its name (what
/// decisions, metrics and audit events call it), where the config writes
/// it, its provider, and its middleware settings.
#[derive(Debug, Clone, Copy)]
pub struct Described<'a> {
    /// The guard's name (`decided_by`).
    pub name: &'a str,
    /// Where the config writes it, and its entry's digest.
    pub written: &'a Written,
    /// Its provider.
    pub provider: &'a ProviderInfo,
    /// The guard.
    pub guard: &'a Guard,
}

impl Described<'_> {
    /// `name` (`place`), as messages name the entry.
    pub fn label(&self) -> String {
        match self.written.place.is_empty() {
            true => format!("'{}'", self.name),
            false => format!("'{}' ({})", self.name, self.written.place),
        }
    }
}

impl Guardrail {
    /// Every guard, in the order they are asked, with its name, place,
    /// provider and settings: what `check`, the server's banner and
    /// `/readyz` show.
    pub fn described(&self) -> impl Iterator<Item = Described<'_>> {
        let guards = self.middleware.guards();
        guards.iter().zip(&self.entries).enumerate().map(|(index, (guard, provider))| Described {
            name: guard.name(),
            written: self.written.get(index).unwrap_or(&NO_PLACE),
            provider,
            guard,
        })
    }

    /// The provider of the guard named `name` (a decision's `decided_by`).
    pub fn provider_of(&self, name: &str) -> Option<&ProviderInfo> {
        let guards = self.middleware.guards();
        guards.iter().position(|g| g.name() == name).and_then(|index| self.entries.get(index))
    }

    /// The tools of `tools` the caller of `context` may use, in their
    /// order: what the `authorization:` provider allows (every tool when
    /// there is none), asked before the model sees the tools; never a
    /// name the host refuses ([`crate::tool_name`]). See
    /// [`crate::authorization::filter_tools`].
    pub fn filter_tools(
        &self,
        context: Option<&Map<String, Value>>,
        tools: &[&str],
    ) -> Result<Vec<String>, FilterError> {
        match self.middleware.guards().iter().find(|g| g.kind() == GuardKind::Authorization) {
            Some(guard) => filter_tools(guard, context, tools),
            None => Ok(usable_names(tools)?.into_iter().map(str::to_owned).collect()),
        }
    }
}

/// Builds the guardrail a config asks for: `None` when the config leaves it
/// out (`enabled: false`, or no provider, in both sections), as DeerFlow's
/// middleware builder does.
pub fn install(config: &LoadedConfig) -> Result<Option<Guardrail>, BuildError> {
    install_with(config, false)
}

/// [`install`]; `content_addressed` as in [`crate::instantiate::instantiate_with`].
pub(crate) fn install_with(
    config: &LoadedConfig,
    content_addressed: bool,
) -> Result<Option<Guardrail>, BuildError> {
    let how = Instantiation { content_addressed, ..Instantiation::default() };
    install_using(config, |spec, base_dir| instantiate_with(spec, base_dir, &how))
}

/// [`install`], each provider built by `instantiate` (the Python package
/// builds provider programs its own way).
pub fn install_using(
    config: &LoadedConfig,
    mut instantiate: impl FnMut(&ProviderSpec, &Path) -> Result<LoadedProvider, BuildError>,
) -> Result<Option<Guardrail>, BuildError> {
    let section = &config.guardrails;
    let authorization = &config.authorization;
    let specs = if section.enabled { section.entries() } else { &[] };
    let authorize = authorization.enabled.then_some(authorization.provider.as_ref()).flatten();
    if specs.is_empty() && authorize.is_none() {
        return Ok(None);
    }
    let mut guards = Vec::new();
    let mut entries = Vec::new();
    if let Some(spec) = authorize {
        let in_entry =
            |source| BuildError::Entry { entry: "`authorization.provider`".into(), source: Box::new(source) };
        let LoadedProvider { provider, info } = instantiate(spec, &config.base_dir).map_err(in_entry)?;
        check_default_role(spec, &info, &authorization.default_role)?;
        let adapter = AuthorizationAdapter::new(
            provider,
            authorization.default_role.clone(),
            authorization.infrastructure_tools.iter().cloned(),
        );
        guards.push(
            Guard::new(Arc::new(adapter))
                .named(ADAPTER_NAME)
                .with_kind(GuardKind::Authorization)
                .with_fail_closed(authorization.fail_closed)
                .with_audit_messages(section.audit_messages)
                .with_library_sha256(info.sha256.clone()),
        );
        entries.push(info);
    }
    let chain = section.providers.is_some();
    for (index, spec) in specs.iter().enumerate() {
        let in_entry = |source| match chain {
            true => BuildError::Entry {
                entry: crate::config::entry_place(chain, index, spec.name.as_deref()),
                source: Box::new(source),
            },
            false => source,
        };
        let LoadedProvider { provider, info } = instantiate(spec, &config.base_dir).map_err(in_entry)?;
        let name = spec.name.clone().unwrap_or_else(|| unique_name(&info.name, &guards));
        guards.push(
            Guard::new(provider)
                .named(name)
                .with_fail_closed(spec.fail_closed.unwrap_or(section.fail_closed))
                .with_mode(spec.mode.unwrap_or(section.mode))
                .with_audit_messages(section.audit_messages)
                .with_passport(section.passport.clone())
                .with_library_sha256(info.sha256.clone())
                .with_selector(Some(ToolSelector::new(spec.tools.clone(), spec.except_tools.clone()))),
        );
        entries.push(info);
    }
    if let Some(duplicate) = duplicate_name(&guards) {
        return Err(BuildError::Spec {
            message: format!(
                "two `guardrails.providers` entries are named '{duplicate}'; give each its own `name:` (decisions, \
                 audit events and the decision log name the entry that decided)"
            ),
        });
    }
    let main = if authorize.is_some() && entries.len() > 1 { 1 } else { 0 };
    let info = entries[main].clone();
    let mut guards = guards.into_iter();
    let first = guards.next().expect("one guard at least");
    let middleware = guards.fold(GuardrailMiddleware::from_guard(first), GuardrailMiddleware::then);
    let middleware = with_decision_log(config, middleware)?;
    let written = config
        .guard_places()
        .into_iter()
        .zip(config.guard_digests())
        .map(|(place, digest)| Written { place: place.trim_matches('`').to_owned(), digest })
        .collect();
    Ok(Some(Guardrail { middleware, info, entries, written }))
}

/// `name`, or `name#2`, `name#3` ... when guards before have it.
fn unique_name(name: &str, guards: &[Guard]) -> String {
    let taken = |candidate: &str| guards.iter().any(|g| g.name() == candidate);
    if !taken(name) {
        return name.to_owned();
    }
    (2..).map(|n| format!("{name}#{n}")).find(|candidate| !taken(candidate)).expect("a free name")
}

fn duplicate_name(guards: &[Guard]) -> Option<&str> {
    guards
        .iter()
        .enumerate()
        .find_map(|(i, g)| guards[..i].iter().any(|h| h.name() == g.name()).then(|| g.name()))
}

/// DeerFlow checks `default_role` against the RBAC provider's roles when
/// it builds the provider: an unknown fallback role fails here, not as an
/// empty tool set later. The provider registers the check
/// ([`crate::registry::register_default_role_check`]).
fn check_default_role(
    spec: &ProviderSpec,
    info: &ProviderInfo,
    default_role: &str,
) -> Result<(), BuildError> {
    let Some(check) = crate::registry::default_role_check(&info.name) else { return Ok(()) };
    check(&spec.config, default_role).map_err(|error| BuildError::Authorization {
        message: format!("Invalid authorization default_role for provider '{}': {error}", spec.use_),
    })
}

/// Opens the section's decision log, if any, for `middleware`.
fn with_decision_log(
    config: &LoadedConfig,
    middleware: GuardrailMiddleware,
) -> Result<GuardrailMiddleware, BuildError> {
    let decision_log = match &config.guardrails.decision_log {
        Some(log) => Some(Arc::new(DecisionLog::open(log, &config.base_dir).map_err(|error| {
            BuildError::DecisionLog {
                path: crate::paths::join_relative(&config.base_dir, &log.path),
                message: error.to_string(),
            }
        })?)),
        None => None,
    };
    Ok(middleware.with_decision_log(decision_log))
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
    let middleware = GuardrailMiddleware::new(provider)
        .with_fail_closed(section.fail_closed)
        .with_passport(section.passport.clone())
        .with_mode(section.mode)
        .with_library_sha256(info.sha256.clone());
    with_decision_log(config, middleware)
}
