//! The Open Agent Passport (OAP) guardrail provider for guardhost: the
//! policy engine DeerFlow's second provider option points at, deciding in
//! microseconds what APort's reference evaluator decides.
//!
//! Exported as `OAPGuardrailProvider` (the name operators know from APort):
//!
//! ```yaml
//! guardrails:
//!   enabled: true
//!   passport: /etc/agent/passport.json      # becomes the request's agent_id
//!   provider:
//!     use: target/release/libguardhost_oap.so:OAPGuardrailProvider
//!     config:
//!       mode: enforce                         # or warn, observe
//! ```
//!
//! For each tool call, first failure wins (`docs/providers/oap.md` lists every code):
//! 1. the tool name is 1-128 of `A-Za-z0-9._-` and the arguments at most
//!    100 KB (a file write's `content` aside);
//! 2. a valid passport: `passport_path`, else the request's `agent_id` when
//!    it names a file, else `~/.aport/<framework>/aport/passport.json`; it
//!    is re-read when the file changes, so a suspension applies to every
//!    call that starts after the `rename` or `write` that made it returned.
//!    On Linux the change is noticed by inotify watches on the path
//!    ([`watch`]): a call costs one non-blocking `read` of the inotify
//!    descriptor, no `stat`; elsewhere, and where a path cannot be watched
//!    (a network file system, the watch limit), by one `stat` per call
//!    ([`passport::PassportStore`] says which when);
//! 3. `status: active`; 4. `spec_version: oap/1.0`
//!    (`oap.passport_version_mismatch`, as APort);
//! 5. the tool maps to a policy pack ([`mapping`]); 6. the passport has
//!    every capability the pack requires;
//! 7. the pack's checks with `limits[<pack without .vN>]` ([`packs`]);
//! 8. allow, `oap.allowed`, `policy_id` = the pack.
//!
//! Nothing is written to disk and every piece of state is behind a lock, so
//! concurrent calls are safe.
//!
//! # Map
//!
//! - [`config`]: the provider's config keys; [`engine`]: the pipeline
//!   above, in APort's order;
//! - [`passport`]: reading, validating and reloading passports; [`watch`]:
//!   noticing a passport file's change without a `stat` per call;
//! - [`mapping`]: a tool's policy pack; [`packs`]: the packs, checked
//!   natively or by the generic engine ([`generic`]);
//! - [`rate`]: per-minute rate limits in memory; [`redis`]: the same in
//!   Redis, for several processes.

#![forbid(unsafe_code)]

pub mod config;
pub mod engine;
pub mod mapping;
pub mod packs;
pub mod passport;
pub mod rate;
pub mod redis;
#[cfg(test)]
pub(crate) mod testdata;
pub mod watch;

use guardhost_abi::{Decision, Provider, ProviderError, Request};

pub use config::{Config, Mode};
pub use engine::Engine;
/// APort's generic policy engine, the packs read from `policies_dir`: the
/// crate `guardhost_oap_generic`.
pub use guardhost_oap_generic as generic;

/// The OAP provider.
#[derive(Debug)]
pub struct OapProvider {
    engine: Engine,
}

impl Provider for OapProvider {
    const NAME: &'static str = "oap";
    /// Relative ones are relative to the config file's directory.
    const PATH_KEYS: &'static [&'static str] = &["passport_path", "policies_dir"];
    type Config = Config;

    fn new(config: Config) -> Result<Self, ProviderError> {
        Engine::new(config).map(|engine| OapProvider { engine }).map_err(ProviderError::error)
    }

    fn evaluate(&self, request: &Request<'_>) -> Result<Decision, ProviderError> {
        self.engine.decide(request).map_err(ProviderError::error)
    }
}

guardhost_abi::export_provider!(OAPGuardrailProvider, OapProvider);
