//! **guardhost-builtins** builds the providers shipped with guardhost into
//! a program: one call, [`register`], and `use: builtin:<symbol>` (or
//! DeerFlow's module names, such as `deerflow.guardrails:AllowlistProvider`
//! and `deerflow.authz.rbac:RbacAuthorizationProvider`) finds them.
//!
//! The `guardhost` library links no provider; the `guardhost` command, the
//! decision service and the Python module call [`register`] at start, and
//! an embedder that wants the shipped providers does the same.
//!
//! ```
//! guardhost_builtins::register();
//! let spec = guardhost::ProviderSpec::new("builtin:AllowlistProvider", Default::default());
//! let loaded = guardhost::instantiate(&spec, ".".as_ref()).unwrap();
//! assert_eq!(loaded.info.name, "allowlist");
//! ```
//!
//! # Map
//!
//! One module: [`SHIPPED`], the providers by symbol, and [`register`].
#![deny(missing_docs)]
#![deny(unsafe_code)]

use guardhost_abi::ProviderDescriptor;

/// The shipped providers, by the symbol `builtin:` names them with, in
/// the order messages list them.
pub static SHIPPED: &[(&str, &ProviderDescriptor)] = &[
    ("AllowlistProvider", &guardhost_allowlist::AllowlistProvider),
    ("RbacAuthorizationProvider", &guardhost_rbac::RbacAuthorizationProvider),
    ("ApprovalGuardrailProvider", &guardhost_approvals::ApprovalGuardrailProvider),
    #[cfg(feature = "cedar")]
    ("CedarGuardrailProvider", &guardhost_cedar::CedarGuardrailProvider),
];

/// Registers every [`SHIPPED`] provider as a built-in, and the RBAC
/// provider's check of `authorization.default_role`. Calling it again
/// changes nothing.
pub fn register() {
    for (symbol, descriptor) in SHIPPED {
        guardhost::register_builtin(symbol, descriptor);
    }
    guardhost::register_default_role_check("rbac", guardhost_rbac::Rbac::check_default_role);
}
