//! **guardhost** decides, before each tool call an autonomous agent makes,
//! whether the call may run.
//!
//! It reads a `guardrails:` YAML section, loads the provider named by
//! `use: path/to/libfoo.so:Symbol` (a library built against
//! [`guardhost_abi`]) or a built-in one (`builtin:Symbol`, a provider the
//! program registered: `guardhost-builtins` registers the shipped ones, in
//! one call; the library links no provider), checks the library's ABI, constructs
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
//! // The shipped providers (the library links none of its own).
//! guardhost_builtins::register();
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
//! What an embedder uses is re-exported here; a module is public only when
//! its name is the API (linked below).
//!
//! From the YAML to a live provider:
//! - `config`: the `guardrails:` and `authorization:` sections (types,
//!   loading, errors, `$ENV_VAR` secrets, lax booleans, typo hints; `yaml`:
//!   reading it, with line and column in errors);
//! - [`resolve`]: parsing `use:` and finding the library file;
//! - `registry`: the providers a program builds in ([`register_builtin`]),
//!   and the checks a provider registers for the host to run
//!   ([`register_default_role_check`]);
//! - [`permissions`]: who may change a library or config file (`StrictModes`;
//!   on Windows from access-control lists: the rule in `access`, read
//!   through `acl`, the FFI boundary to `advapi32`);
//! - `loader`: opening libraries and checking descriptors (`unsafe`), with
//!   its errors in `load_error` and, in `elf` and `pe` (over `bytes`),
//!   whether a library file is whole and its exported symbols, read from
//!   its bytes;
//! - `c_provider`: providers behind the C ABI, `guardhost.h` (the FFI
//!   boundary, with `unsafe`);
//! - `instantiate`: config keys, `framework` injection, construction; what
//!   it gives, or why not, is in `built`;
//! - [`launch`]: the narrow interface to providers in a process of their own
//!   (`isolation: process`), which the `guardhost-isolation` crate implements;
//! - `reload`: hot reload of the config file and the provider library.
//!
//! Around every tool call:
//! - `request`: tool calls, tool messages, requests and decisions;
//! - [`tool_name`]: the tool names the host accepts, checked before any
//!   guard sees a call (`guardhost.tool_name_invalid`) or a tool filter
//!   lists a tool;
//! - `provider`: the host's provider trait and the ABI adapter;
//! - `middleware`: `GuardrailMiddleware` (its builder, decision engine,
//!   entry points, `explain`, denial text and shadow mode) and its guards
//!   (the providers of a chain, asked in order), the middleware chain and
//!   the tower layer;
//! - `outcome`: more than allow or deny: `ask` (approval bound to the
//!   call's digest) and `rewrite` (the arguments to run instead);
//! - [`authorization`]: DeerFlow's `authorization:` layer, the guard asked
//!   first, and the tool filter before the model sees the tools;
//! - [`timeout`]: per-call timeouts (`provider.timeout_ms`), over [`reply`]
//!   (one answer handed between threads) and [`wait`] (waiting with a
//!   deadline, sync or async);
//! - `audit`: audit events and sinks;
//! - [`decision_log`]: every decision as a JSON line, off the call path.
//!
//! At the edges: [`json`] and [`paths`], how messages name values and where
//! relative paths lead.
//!
//! Beside this crate: `guardhost-lines` (the `run` protocol's lines: the
//! JSON-lines input of `run` and the server, and what a decided call is
//! answered with), `guardhost-isolation` (providers in a child process),
//! `guardhost-kit` (the conformance kit), `guardhost-cli` (the `guardhost`
//! command) and `guardhost-server` (the decision service over HTTP).
#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
// `unsafe` is allowed in three modules only: `loader`, `c_provider` and,
// on Windows, `acl` (reading security descriptors).
#![deny(unsafe_code)]

// Every item has one path: the root's re-export, or its module's when the
// module's name is the API (`authorization`, `decision_log`, `launch`,
// `timeout` ...). `config`, `instantiate`, `provider` and `request` are
// still public for the isolation client's imports, until it takes their
// items from the root.

mod access;
#[cfg(windows)]
mod acl;
mod audit;
pub mod authorization;
mod built;
mod bytes;
mod c_provider;
mod config;
pub mod decision_log;
mod elf;
mod instantiate;
pub mod json;
pub mod launch;
mod load_error;
mod loader;
mod middleware;
mod outcome;
pub mod paths;
mod pe;
pub mod permissions;
mod provider;
mod registry;
mod reload;
pub mod reply;
mod request;
pub mod resolve;
mod setup;
pub mod timeout;
pub mod tool_name;
pub mod wait;
mod yaml;

pub use audit::{
    AuditAction, AuditChanges, AuditError, AuditEvent, AuditProvider, AuditRecord, AuditSink, JsonlAuditSink,
    MemoryAuditSink, UNRECORDED_MESSAGE,
};
pub use built::{
    AbiKind, BuildError, LoadedProvider, ProviderInfo, ProviderSource, FRAMEWORK_KEY, FRAMEWORK_VALUE,
};
pub use config::{
    provider_config_from_path, provider_config_from_yaml, require_guardrail_from_env, AuditMessages,
    AuthorizationConfig, ConfigError, ConfigOrigin, GuardrailsConfig, Isolation, LoadedConfig, Mode,
    ProviderSpec, Transport, ALLOW_INSECURE_CONFIG_VAR, REQUIRE_GUARDRAIL_VAR,
};
pub use instantiate::{instantiate, instantiate_with, locate, locate_checked, Descriptor, Instantiation};
pub use load_error::{list_paths, LoadError, LoadErrorKind};
pub use loader::{FileChecks, LibraryDescriptor};
pub use middleware::{
    async_handler, denied_message, into_denied_message, shadowed, AsyncHandler, Checked, Explained, Guard,
    GuardKind, GuardrailLayer, GuardrailMiddleware, GuardrailService, MiddlewareChain, Step, StepAnswer,
    SyncHandler, ToEvaluate, ToolCallError, ToolCallMiddleware, ToolResult, ToolSelector,
};
pub use outcome::{
    call_digest, outcome_of, rewritten_args, step_outcome, unix_now, Approval, Ask, OUTCOME_KEY,
};
pub use provider::{
    aevaluate_call, block_on, evaluate_call, evaluate_here, with_abi_request, AbiProvider, BoxFuture,
    Evaluation, GuardrailProvider, Interrupt, ProviderFailure, Ruled, Ruling,
};
pub use registry::{register_builtin, register_default_role_check, DefaultRoleCheck};
pub use reload::{ReloadError, ReloadPolicy, ReloadStatus, Reloader};
pub use request::{
    Attribution, CallView, GuardrailDecision, GuardrailReason, GuardrailRequest, Held, RequestError,
    Timestamp, ToolCall, ToolCallRequest, ToolMessage, ToolStatus,
};
pub use setup::{install, install_using, middleware_for, Described, Guardrail, Written};
pub use yaml::YamlError;
