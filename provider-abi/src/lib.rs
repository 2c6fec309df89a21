//! The stable provider ABI of **guardhost**: the crate a third-party guardrail
//! provider compiles against and ships as a `.so` / `.dll` / `.dylib`.
//!
//! A provider decides, before each tool call an agent makes, whether the call
//! may run. You implement [`Provider`], export it with [`export_provider!`]
//! under a symbol of your choice, build a `cdylib`, and operators point
//! guardhost at it in YAML:
//!
//! ```yaml
//! guardrails:
//!   enabled: true
//!   provider:
//!     use: plugins/libmy_policy.so:MyGuardrailProvider
//!     config: { blocked_prefixes: ["bash"] }
//! ```
//!
//! # Example
//!
//! ```
//! use guardhost_abi::{Decision, Provider, ProviderError, Request};
//! use serde::Deserialize;
//!
//! #[derive(Deserialize)]
//! pub struct Config {
//!     #[serde(default)]
//!     blocked_prefixes: Vec<String>,
//! }
//!
//! pub struct MyPolicy(Config);
//!
//! impl Provider for MyPolicy {
//!     const NAME: &'static str = "my-policy";
//!     type Config = Config;
//!
//!     fn new(config: Config) -> Result<Self, ProviderError> {
//!         Ok(MyPolicy(config))
//!     }
//!
//!     fn evaluate(&self, request: &Request<'_>) -> Result<Decision, ProviderError> {
//!         let name = request.tool_name();
//!         if self.0.blocked_prefixes.iter().any(|p| name.starts_with(p.as_str())) {
//!             return Ok(Decision::deny().with_reason("custom.blocked", format!("{name} blocked")));
//!         }
//!         Ok(Decision::allow().with_reason("custom.allowed", ""))
//!     }
//! }
//!
//! guardhost_abi::export_provider!(MyGuardrailProvider, MyPolicy);
//!
//! # fn main() -> Result<(), ProviderError> {
//! // The accepted config keys come from `Config`'s fields:
//! assert_eq!(MyPolicy::accepted_keys(), ["blocked_prefixes"]);
//! let policy = MyPolicy::new(Config { blocked_prefixes: vec!["bash".into()] })?;
//! assert!(!policy.evaluate(&Request::for_tool("bash"))?.allow);
//! # Ok(()) }
//! ```
//!
//! # What crosses the boundary
//!
//! Only `#[repr(C)]` types checked by `abi_stable`: the host reads the
//! descriptor's [`DescriptorHeader`] (magic, ABI major/minor, flags) first,
//! then checks the factory's type layout against its own, and only then calls
//! into the library. Strings and vectors are `abi_stable`'s `RString` /
//! `RVec`, freed by the side that allocated them.
//!
//! # Versioning
//!
//! The crate's major version is [`ABI_MAJOR`]: a provider built against any
//! guardhost-abi 1.x loads in every host of ABI major 1 (README.md has the
//! whole compatibility policy, CHANGELOG.md the ABI minor of each release).
//! A library is loaded only by a host with the same [`ABI_MAJOR`]. Within a
//! major version, minor versions may only append fields to
//! [`ProviderFactory`] below its last prefix field; a host reads such a field
//! only when the library is new enough to have it, so a library built
//! against 1.x loads in every 1.y host (the loader's tests load a library
//! that exports a 1.0 and a 1.1 descriptor, with [`compat`]'s shapes). 1.1
//! added [`Provider::VOLATILE_METADATA`], 1.2 [`Provider::PATH_KEYS`], 1.3
//! the declarations ([`Provider::READS_TOOL_INPUT`] and its kin), 1.4
//! [`Provider::decide`] ([`Verdict`]). Changing [`Request`], [`Decision`],
//! [`Reason`], [`ProviderError`] or [`ProviderObject`] is a major change. The
//! layout check at load time catches a library whose types differ from what
//! its header claims.
//!
//! # Providers in C, C++, Zig or Go
//!
//! [`c_abi`] and the header `include/guardhost.h` give the same interface
//! as a plain C ABI (JSON text in and out); the host accepts either kind of
//! descriptor under `use:`.
//!
//! # Failures
//!
//! A provider fails with a [`ProviderError`]: [`ProviderError::error`] (the
//! host applies `fail_closed`) or [`ProviderError::interrupt`] (a control-flow
//! signal the host passes to its caller unchanged). A panic anywhere in
//! provider code is caught on the provider's side and becomes an error of kind
//! [`ErrorKind::PANIC`]; it never unwinds into the host. Libraries built with
//! `panic = "abort"` cannot catch panics, so the host refuses to load them.
//!
//! # Map
//!
//! - `provider`: [`Provider`], the trait an author implements, and
//!   [`export_provider!`]; `keys`: its accepted config keys from its
//!   `Config` type;
//! - `types`: what crosses the boundary: [`Request`], [`Decision`],
//!   [`Reason`], [`Verdict`]; `error`: [`ProviderError`];
//! - `object`: the provider as an FFI-safe trait object, [`ProviderBox`];
//! - `descriptor`: what the host finds under a provider's symbol, with the
//!   ABI's versions and the older shapes ([`compat`]);
//! - [`c_abi`]: the same interface as a plain C ABI;
//! - `pattern`: tool-name patterns ([`glob`]), for providers' configs.
// `#[sabi_trait]` expands to impls the `non_local_definitions` lint dislikes.
#![allow(non_local_definitions)]

/// The README's example compiles (`cargo test --doc`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme {}

pub mod c_abi;
mod descriptor;
mod error;
mod keys;
mod object;
mod pattern;
mod provider;
mod types;

pub use descriptor::{
    compat, declarations, flags, DescriptorHeader, ProviderDescriptor, ProviderFactory, ProviderFactoryRef,
    ABI_MAJOR, ABI_MINOR, FACTORY_LAYOUT, MAGIC,
};
pub use error::{ErrorKind, ProviderError};
pub use keys::config_keys;
pub use object::{EvalResult, ProviderBox, ProviderObject, ProviderObject_TO, VerdictResult};
pub use pattern::glob;
pub use provider::{deserialize_config, Provider};
pub use types::{Brief, Decision, Reason, Request, Verdict, OUTCOME_KEY};

/// Re-exports for the export macro and for hosts; not part of the author API.
#[doc(hidden)]
pub mod reexports {
    pub use abi_stable;
    pub use async_ffi;
}
