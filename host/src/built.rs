//! What building a provider gives: the live provider with its description
//! ([`LoadedProvider`], [`ProviderInfo`]), or why it could not be built
//! ([`BuildError`]). Shared by every way a provider is built: a library in
//! this process ([`mod@crate::instantiate`]) and a provider in a process of its
//! own ([`crate::launch`]).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::config::{Isolation, Transport};
use crate::load_error::LoadError;
use crate::provider::GuardrailProvider;
use crate::resolve::MalformedUse;

/// The key the host injects for providers that accept it.
pub const FRAMEWORK_KEY: &str = "framework";
/// The value it injects.
pub const FRAMEWORK_VALUE: &str = "deerflow";

/// Where a provider came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProviderSource {
    /// Built into the host.
    Builtin {
        /// Its symbol.
        symbol: String,
    },
    /// A dynamic library.
    Library {
        /// The library file (canonical).
        path: PathBuf,
        /// The descriptor's symbol.
        symbol: String,
    },
    /// A provider program (`provider.command`), speaking the provider
    /// protocol.
    Program {
        /// Its argv, as configured.
        command: Vec<String>,
    },
}

impl fmt::Display for ProviderSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProviderSource::Builtin { symbol } => write!(f, "built-in ({symbol})"),
            ProviderSource::Library { path, symbol } => {
                write!(f, "library {} (symbol {symbol})", path.display())
            }
            ProviderSource::Program { command } => write!(f, "program `{}`", command.join(" ")),
        }
    }
}

/// What is known about a constructed provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderInfo {
    /// Its name.
    pub name: String,
    /// Where it came from.
    pub source: ProviderSource,
    /// The ABI (major, minor) its descriptor was built with.
    pub abi_version: (u16, u16),
    /// Which ABI: the Rust one or the C one (`guardhost.h`).
    #[serde(default)]
    pub abi_kind: AbiKind,
    /// The config keys its constructor accepts by name.
    pub accepted_keys: Vec<String>,
    /// Whether it accepts other keys too.
    pub accepts_extra_keys: bool,
    /// Whether the host added `framework: "deerflow"` to its config.
    pub framework_injected: bool,
    /// Decision-metadata keys the provider declares volatile (may differ
    /// between evaluations of the same request).
    pub volatile_metadata_keys: Vec<String>,
    /// Config keys the provider declares to be paths (ABI 1.2): their
    /// relative values were joined to the config file's directory.
    #[serde(default)]
    pub path_keys: Vec<String>,
    /// The parts of a request the provider declares it never reads (ABI
    /// 1.3: `tool_input`, `authz_attributes`, `attribution`); it is handed
    /// `""` or the defaults for each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unread_inputs: Vec<String>,
    /// Whether the provider declares that every evaluation returns at once
    /// (ABI 1.3: no I/O, no waiting).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub never_blocks: bool,
    /// The per-call limit in milliseconds, when there is one
    /// (`provider.timeout_ms`, or its default with `isolation: process`).
    pub timeout_ms: Option<u64>,
    /// Where the provider runs.
    pub isolation: Isolation,
    /// With `isolation: process`: how calls reach the provider process
    /// (the first process's; `None` in process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<Transport>,
    /// The SHA-256 of the library bytes loaded (lower-case hex; `None` for
    /// a built-in provider).
    pub sha256: Option<String>,
}

/// The two provider ABIs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AbiKind {
    /// `guardhost_abi`'s `abi_stable` descriptor.
    #[default]
    Rust,
    /// A `guardhost_descriptor` from `guardhost.h`.
    C,
    /// No library: a provider program speaking the provider protocol
    /// (`abi_version` is then the protocol's version).
    Protocol,
}

impl fmt::Display for AbiKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AbiKind::Rust => "Rust",
            AbiKind::C => "C",
            AbiKind::Protocol => "provider protocol",
        })
    }
}

/// A constructed provider and what is known about it.
#[derive(Clone)]
pub struct LoadedProvider {
    /// The provider.
    pub provider: Arc<dyn GuardrailProvider>,
    /// Its description.
    pub info: ProviderInfo,
}

impl fmt::Debug for LoadedProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedProvider").field("info", &self.info).finish_non_exhaustive()
    }
}

/// Why a provider could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// `use:` is not `path:Symbol`.
    #[error(transparent)]
    MalformedUse(#[from] MalformedUse),
    /// `builtin:X` with an unknown X.
    #[error("`use: {value}` names no built-in provider; the built-ins are: {available}")]
    UnknownBuiltin {
        /// The `use:` value.
        value: String,
        /// The known symbols.
        available: String,
    },
    /// The library could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// `use:` names a Python module (`package.module:Class`) and no such
    /// library file exists.
    #[error("`use: {value}` looks like a Python module path; guardhost loads providers from dynamic libraries, so write `path/to/libfoo.so:Symbol` (or `builtin:AllowlistProvider`); no library was found at {tried}")]
    PythonModulePath {
        /// The `use:` value.
        value: String,
        /// The paths tried.
        tried: String,
    },
    /// `provider.config` has a key the constructor does not take.
    #[error("provider '{provider}' does not accept config key `{key}`; it accepts: {accepted}")]
    UnknownKey {
        /// The provider's name.
        provider: String,
        /// The key.
        key: String,
        /// What it accepts.
        accepted: String,
    },
    /// The provider spec contradicts itself (e.g. both `use:` and
    /// `command:`).
    #[error("{message}")]
    Spec {
        /// What is wrong, naming the key.
        message: String,
    },
    /// `isolation: process`: the provider process could not build the
    /// provider; the error it would have been in process.
    #[error("{message} (in the provider process)")]
    InProviderProcess {
        /// The error, as the host would have said it in process.
        message: String,
        /// Whether the constructor panicked rather than returning an error.
        panicked: bool,
    },
    /// A provider program answered `init` with `failed`: it refused its
    /// config.
    #[error("the provider program `{program}` refused to start: {message}")]
    ProgramRefused {
        /// `provider.command`, joined with spaces.
        program: String,
        /// The program's own message.
        message: String,
    },
    /// `provider.timeout_ms` could not be set up.
    #[error("{message}")]
    Timeout {
        /// What went wrong.
        message: String,
    },
    /// `isolation: process` could not start the provider's process, or
    /// the provider failed to build in it.
    #[error("{message}")]
    Isolation {
        /// What went wrong.
        message: String,
    },
    /// `decision_log` could not be opened.
    #[error("`decision_log`: cannot open {}: {message}", path.display())]
    DecisionLog {
        /// The file.
        path: std::path::PathBuf,
        /// Why (the system's error).
        message: String,
    },
    /// One provider of several (the `authorization:` provider, or an entry
    /// of `guardrails.providers`) could not be built.
    #[error("{entry}: {source}")]
    Entry {
        /// Which one (`` `authorization.provider` ``,
        /// `` `guardrails.providers[1]` ('cedar') `` ...).
        entry: String,
        /// Why.
        source: Box<BuildError>,
    },
    /// The `authorization:` section cannot be used with its provider (its
    /// `default_role` is not a role the RBAC provider defines).
    #[error("{message}")]
    Authorization {
        /// What is wrong, in DeerFlow's words.
        message: String,
    },
    /// The constructor refused the config.
    #[error("provider '{provider}' rejected its config: {message}")]
    Constructor {
        /// The provider's name.
        provider: String,
        /// Its message.
        message: String,
        /// Whether the constructor (or the key listing) panicked rather than
        /// returning an error.
        panicked: bool,
    },
}
