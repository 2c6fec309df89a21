//! The providers a program builds in: what `use: builtin:<symbol>` finds,
//! and the checks a provider registers for the host to run on its config.
//!
//! The library links no provider. A program adds the shipped ones with
//! `guardhost_builtins::register()`, and its own with [`register_builtin`].

use std::sync::RwLock;

use guardhost_abi::ProviderDescriptor;
use serde_json::{Map, Value};

/// A provider's check of `authorization.default_role` against its own
/// config (the provider's `config:` as written, and the role): `Err` says
/// why the role is refused. The host runs it when it builds the provider
/// as the `authorization:` provider, so that an unknown fallback role fails
/// at start, not as an empty tool set later.
pub type DefaultRoleCheck = fn(config: &Map<String, Value>, role: &str) -> Result<(), String>;

/// Built-in providers by symbol, in the order registered.
static BUILTINS: RwLock<Vec<(&'static str, &'static ProviderDescriptor)>> = RwLock::new(Vec::new());

/// Default-role checks by provider name.
static DEFAULT_ROLE_CHECKS: RwLock<Vec<(&'static str, DefaultRoleCheck)>> = RwLock::new(Vec::new());

/// Makes the provider `descriptor` (a Rust provider linked into this
/// program, exported with `export_provider!`) available as
/// `builtin:<symbol>` (and under DeerFlow's module names for it, such as
/// `deerflow.guardrails:<symbol>`). Registering a symbol again changes
/// nothing: the first registration stands.
pub fn register_builtin(symbol: &'static str, descriptor: &'static ProviderDescriptor) {
    let mut builtins = BUILTINS.write().unwrap_or_else(|poisoned| poisoned.into_inner());
    if !builtins.iter().any(|(name, _)| *name == symbol) {
        builtins.push((symbol, descriptor));
    }
}

/// Has the host run `check` on the config of the provider named `provider`
/// (its descriptor's name, however it is loaded) when that provider is the
/// `authorization:` provider. Registering a name again changes nothing.
pub fn register_default_role_check(provider: &'static str, check: DefaultRoleCheck) {
    let mut checks = DEFAULT_ROLE_CHECKS.write().unwrap_or_else(|poisoned| poisoned.into_inner());
    if !checks.iter().any(|(name, _)| *name == provider) {
        checks.push((provider, check));
    }
}

/// The built-in provider registered as `symbol`.
pub(crate) fn builtin(symbol: &str) -> Option<&'static ProviderDescriptor> {
    let builtins = BUILTINS.read().unwrap_or_else(|poisoned| poisoned.into_inner());
    builtins.iter().find(|(name, _)| *name == symbol).map(|(_, descriptor)| *descriptor)
}

/// Every registered built-in, as `use:` names it, for messages.
pub(crate) fn builtin_names() -> String {
    let builtins = BUILTINS.read().unwrap_or_else(|poisoned| poisoned.into_inner());
    if builtins.is_empty() {
        return "none (this program registers no built-in provider; `guardhost_builtins::register()` adds \
                the shipped ones)"
            .to_owned();
    }
    builtins.iter().map(|(name, _)| format!("builtin:{name}")).collect::<Vec<_>>().join(", ")
}

/// The default-role check the provider named `provider` registered.
pub(crate) fn default_role_check(provider: &str) -> Option<DefaultRoleCheck> {
    let checks = DEFAULT_ROLE_CHECKS.read().unwrap_or_else(|poisoned| poisoned.into_inner());
    checks.iter().find(|(name, _)| *name == provider).map(|(_, check)| *check)
}

#[cfg(test)]
mod tests {
    // This test program registers nothing: the library links no provider.
    #[test]
    fn with_nothing_registered_no_builtin_is_found_and_the_message_says_how_to_add_them() {
        assert!(super::builtin("AllowlistProvider").is_none());
        assert!(super::default_role_check("rbac").is_none());
        assert!(
            super::builtin_names().contains("`guardhost_builtins::register()`"),
            "{}",
            super::builtin_names()
        );
    }
}
