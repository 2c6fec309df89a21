//! From a `provider:` spec to a live provider: resolve `use:`, load and
//! check the library, check the config keys, inject `framework`, construct.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use abi_stable::std_types::{RResult, RStr};
use guardhost_abi::{ProviderDescriptor, ProviderFactoryRef};
use serde_json::{Map, Value};

use crate::config::ProviderSpec;
use crate::loader::{self, LoadError, LoadErrorKind};
use crate::provider::{AbiProvider, GuardrailProvider};
use crate::resolve::{self, MalformedUse, UseTarget};

/// The key the host injects for providers that accept it.
pub const FRAMEWORK_KEY: &str = "framework";
/// The value it injects.
pub const FRAMEWORK_VALUE: &str = "deerflow";

/// The providers built into the host, by symbol.
fn builtins() -> [(&'static str, &'static ProviderDescriptor); 1] {
    [("AllowlistProvider", &guardhost_allowlist::AllowlistProvider)]
}

/// Where a provider came from.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

impl fmt::Display for ProviderSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProviderSource::Builtin { symbol } => write!(f, "built-in ({symbol})"),
            ProviderSource::Library { path, symbol } => {
                write!(f, "library {} (symbol {symbol})", path.display())
            }
        }
    }
}

/// What is known about a constructed provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderInfo {
    /// Its name.
    pub name: String,
    /// Where it came from.
    pub source: ProviderSource,
    /// The ABI (major, minor) its descriptor was built with.
    pub abi_version: (u16, u16),
    /// The config keys its constructor accepts by name.
    pub accepted_keys: Vec<String>,
    /// Whether it accepts other keys too.
    pub accepts_extra_keys: bool,
    /// Whether the host added `framework: "deerflow"` to its config.
    pub framework_injected: bool,
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
    /// The constructor refused the config.
    #[error("provider '{provider}' rejected its config: {message}")]
    Constructor {
        /// The provider's name.
        provider: String,
        /// Its message.
        message: String,
    },
}

/// Resolves, loads, checks and constructs the provider of `spec`. Relative
/// library paths are resolved against `base_dir`.
pub fn instantiate(spec: &ProviderSpec, base_dir: &Path) -> Result<LoadedProvider, BuildError> {
    let (descriptor, source) = match resolve::parse_use(&spec.use_)? {
        UseTarget::Builtin { symbol } => {
            let found = builtins().into_iter().find(|(name, _)| *name == symbol);
            let Some((_, descriptor)) = found else {
                let available = builtins().map(|(name, _)| format!("builtin:{name}")).join(", ");
                return Err(BuildError::UnknownBuiltin { value: spec.use_.clone(), available });
            };
            (descriptor, ProviderSource::Builtin { symbol })
        }
        UseTarget::Library { path, symbol } => {
            let candidates = resolve::library_candidates(&path, base_dir);
            let (path, descriptor) = loader::load(&candidates, &symbol).map_err(|error| {
                match (&error.kind, resolve::looks_like_python_module(&path)) {
                    (LoadErrorKind::NotFound { tried }, true) => BuildError::PythonModulePath {
                        value: spec.use_.clone(),
                        tried: loader::list_paths(tried),
                    },
                    _ => BuildError::Load(error),
                }
            })?;
            (descriptor, ProviderSource::Library { path, symbol })
        }
    };
    construct(descriptor, source, &spec.config)
}

fn construct(
    descriptor: &'static ProviderDescriptor,
    source: ProviderSource,
    config: &Map<String, Value>,
) -> Result<LoadedProvider, BuildError> {
    let factory: ProviderFactoryRef = descriptor.factory;
    let name = factory.name().as_str().to_owned();
    let accepted_keys: Vec<String> = match (factory.accepted_keys())() {
        RResult::ROk(keys) => keys.into_iter().map(|k| k.into_string()).collect(),
        RResult::RErr(error) => {
            return Err(BuildError::Constructor { provider: name, message: error.to_string() });
        }
    };
    let accepts_extra_keys = factory.accepts_extra_keys();

    if !accepts_extra_keys {
        if let Some(key) = config.keys().find(|k| !accepted_keys.contains(k)) {
            let accepted =
                if accepted_keys.is_empty() { "no keys at all".to_owned() } else { accepted_keys.join(", ") };
            return Err(BuildError::UnknownKey { provider: name, key: key.clone(), accepted });
        }
    }
    let framework_injected = !config.contains_key(FRAMEWORK_KEY)
        && (accepts_extra_keys || accepted_keys.iter().any(|k| k == FRAMEWORK_KEY));
    let json = if framework_injected {
        let mut with_framework = config.clone();
        with_framework.insert(FRAMEWORK_KEY.to_owned(), Value::from(FRAMEWORK_VALUE));
        Value::Object(with_framework).to_string()
    } else {
        Value::Object(config.clone()).to_string()
    };
    let object = match (factory.construct())(RStr::from_str(&json)) {
        RResult::ROk(object) => object,
        RResult::RErr(error) => {
            return Err(BuildError::Constructor { provider: name, message: error.to_string() })
        }
    };
    tracing::debug!(provider = %name, %source, framework_injected, "provider constructed");
    let info = ProviderInfo {
        name,
        source,
        abi_version: (descriptor.header.abi_major, descriptor.header.abi_minor),
        accepted_keys,
        accepts_extra_keys,
        framework_injected,
    };
    Ok(LoadedProvider { provider: Arc::new(AbiProvider::new(object)), info })
}
