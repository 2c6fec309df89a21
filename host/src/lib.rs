//! **guardhost** decides, before each tool call an autonomous agent makes,
//! whether the call may run.
//!
//! It reads a `guardrails:` YAML section, loads the provider named by
//! `use: path/to/libfoo.so:Symbol` (a library built against
//! [`guardhost_abi`]) or a built-in one, checks the library's ABI, constructs
//! the provider from `provider.config`, and wraps every tool call in a
//! [`GuardrailMiddleware`] that behaves exactly like DeerFlow's: a denied
//! call becomes an error tool message the agent can read and adapt to.
//!
//! # Example
//!
//! ```
//! use guardhost::{install, ConfigOrigin, LoadedConfig, ToolCallRequest, ToolStatus};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let yaml = "
//! guardrails:
//!   enabled: true
//!   provider:
//!     use: builtin:AllowlistProvider
//!     config: { denied_tools: [bash] }
//! ";
//! let config = LoadedConfig::from_yaml(yaml, ".".into(), ConfigOrigin::Embedded, |_| None)?;
//! let guardrail = install(&config)?.expect("enabled with a provider");
//!
//! let call = ToolCallRequest::new("bash", Default::default()).with_id("call-1");
//! let message = guardrail.middleware.wrap_tool_call(call, &|_| unreachable!("denied calls never run"))?;
//! assert_eq!(message.status, ToolStatus::Error);
//! assert_eq!(
//!     message.content,
//!     "Guardrail denied: tool 'bash' was blocked (oap.tool_not_allowed). \
//!      Reason: tool 'bash' is denied. Choose an alternative approach."
//! );
//! # Ok(()) }
//! ```
//!
//! # Map
//!
//! - [`config`]: the `guardrails:` section, defaults, `$ENV_VAR` secrets;
//! - [`resolve`]: parsing `use:` and finding the library file;
//! - [`loader`]: opening libraries and checking descriptors (`unsafe`);
//! - [`c_provider`]: providers behind the C ABI, `guardhost.h` (the FFI
//!   boundary, with `unsafe`);
//! - `elf`: the exported symbols of a library file, read from its bytes
//!   (for the message that lists a library's providers);
//! - [`permissions`]: who may change a library or config file (`StrictModes`);
//! - [`mod@instantiate`]: config keys, `framework` injection, construction;
//! - [`provider`]: the host's provider trait and the ABI adapter;
//! - [`middleware`]: `GuardrailMiddleware` and the middleware chain;
//! - [`audit`]: audit events and sinks;
//! - [`decision_log`]: every decision as a JSON line, off the call path;
//! - [`timeout`]: per-call timeouts (`provider.timeout_ms`);
//! - [`isolation`]: providers in a child process (`provider.isolation: process`),
//!   reached over shared memory on Linux (its region's mapping,
//!   `isolation::shm::region`, is the third module with `unsafe`);
//! - [`reload`]: hot reload of the config file and the provider library;
//! - [`conformance`]: the conformance kit for provider libraries (its
//!   `heap` module, one call into glibc's `malloc_trim` before memory is
//!   measured, is the fourth and last with `unsafe`);
//! - [`request`]: tool calls, tool messages, requests and decisions;
//! - [`jsonl`]: the JSON-lines input of `guardhost run`;
//! - [`answer`]: what a decided call is answered with (`run`'s output
//!   lines, the server's responses).
#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
// `unsafe` is allowed in four modules only: `loader`, `c_provider`,
// `isolation::shm::region` and `conformance::heap`.
#![deny(unsafe_code)]

pub mod answer;
pub mod audit;
pub mod c_provider;
pub mod config;
pub mod conformance;
pub mod decision_log;
mod elf;
pub mod instantiate;
pub mod isolation;
pub mod jsonl;
pub mod loader;
pub mod middleware;
pub mod permissions;
pub mod provider;
pub mod reload;
mod reply;
pub mod request;
pub mod resolve;
mod setup;
pub mod timeout;
mod yaml;

pub use audit::{
    AuditAction, AuditChanges, AuditError, AuditEvent, AuditProvider, AuditRecord, AuditSink, JsonlAuditSink,
    MemoryAuditSink,
};
pub use config::{
    provider_config_from_path, provider_config_from_yaml, require_guardrail_from_env, ConfigError,
    ConfigOrigin, GuardrailsConfig, Isolation, LoadedConfig, Mode, ProviderSpec, Transport,
    ALLOW_INSECURE_CONFIG_VAR, REQUIRE_GUARDRAIL_VAR,
};
pub use instantiate::{
    instantiate, locate, AbiKind, BuildError, Descriptor, LoadedProvider, ProviderInfo, ProviderSource,
};
pub use loader::{LibraryDescriptor, LoadError, LoadErrorKind};
pub use middleware::{
    async_handler, AsyncHandler, GuardrailLayer, GuardrailMiddleware, GuardrailService, MiddlewareChain,
    SyncHandler, ToEvaluate, ToolCallError, ToolCallMiddleware, ToolResult, Verdict,
};
pub use provider::{block_on, AbiProvider, BoxFuture, GuardrailProvider, Interrupt, ProviderFailure};
pub use reload::{ReloadError, Reloader};
pub use request::{
    Attribution, CallView, GuardrailDecision, GuardrailReason, GuardrailRequest, RequestError, Timestamp,
    ToolCall, ToolCallRequest, ToolMessage, ToolStatus,
};
pub use setup::{install, middleware_for, Guardrail};
pub use yaml::YamlError;
