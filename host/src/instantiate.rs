//! From a `provider:` spec to a live provider: resolve `use:`, load and
//! check the library, check the config keys, inject `framework`, construct.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use abi_stable::std_types::{RResult, RStr, RString};
use guardhost_abi::ProviderFactoryRef;
use serde_json::{Map, Value};

use crate::built::{
    AbiKind, BuildError, LoadedProvider, ProviderInfo, ProviderSource, FRAMEWORK_KEY, FRAMEWORK_VALUE,
};
use crate::c_provider::CFactory;
use crate::config::{Isolation, ProviderSpec};
use crate::load_error::LoadErrorKind;
use crate::loader::{self, FileChecks, LibraryDescriptor};
use crate::provider::{failure, AbiProvider, GuardrailProvider, ProviderFailure};
use crate::resolve::{self, UseTarget};

/// Resolves, loads, checks and constructs the provider of `spec`. Relative
/// library paths are resolved against `base_dir`.
pub fn instantiate(spec: &ProviderSpec, base_dir: &Path) -> Result<LoadedProvider, BuildError> {
    instantiate_with(spec, base_dir, &Instantiation::default())
}

/// How [`instantiate_with`] builds a provider, beyond what its spec says.
#[derive(Debug, Clone, Default)]
pub struct Instantiation {
    /// Load a library from a private copy of the checked bytes, named by
    /// their digest, as hot reload needs.
    pub content_addressed: bool,
    /// The program an `isolation: process` provider runs in, where the
    /// caller ships one (the Python package its `guardhost-provider-server`):
    /// `$GUARDHOST_BIN` still comes first, and without either the launcher
    /// looks for one.
    pub server_program: Option<PathBuf>,
}

/// [`instantiate`], built as `how` says. The spec is checked here, once,
/// and goes down one way: to the launcher for a provider in a process of
/// its own (`isolation: process`, `command:`), else to the loader.
pub fn instantiate_with(
    spec: &ProviderSpec,
    base_dir: &Path,
    how: &Instantiation,
) -> Result<LoadedProvider, BuildError> {
    spec.validate().map_err(|message| BuildError::Spec { message })?;
    if spec.command.is_some() || spec.isolation == Isolation::Process {
        return crate::launch::launch(spec, base_dir, how.server_program.as_deref());
    }
    let checks = FileChecks {
        sha256: spec.sha256.clone(),
        allow_insecure_permissions: spec.allow_insecure_permissions,
        content_addressed: how.content_addressed,
    };
    let limit = spec.call_limit();
    let descriptor = locate_checked(&spec.use_, base_dir, &checks)?;
    let config = descriptor.resolve_paths(&spec.config, base_dir);
    let mut loaded = descriptor.construct(&config)?;
    if let Some(limit) = limit {
        let provider = crate::timeout::TimeoutProvider::new(loaded.provider, limit).map_err(|e| {
            BuildError::Timeout { message: format!("cannot start the evaluation threads: {e}") }
        })?;
        loaded.provider = Arc::new(provider);
        loaded.info.timeout_ms = spec.timeout_ms;
    }
    Ok(loaded)
}

/// Resolves `use:` and loads and checks the library (or finds the
/// built-in), without constructing anything; the library file must not be
/// writable by group or others.
pub fn locate(use_: &str, base_dir: &Path) -> Result<Descriptor, BuildError> {
    locate_checked(use_, base_dir, &FileChecks::default())
}

/// [`locate`], with the file checks of `provider.sha256` and
/// `provider.allow_insecure_permissions`.
pub fn locate_checked(use_: &str, base_dir: &Path, checks: &FileChecks) -> Result<Descriptor, BuildError> {
    match resolve::parse_use(use_)? {
        UseTarget::Builtin { symbol } => {
            let Some(descriptor) = crate::registry::builtin(&symbol) else {
                let available = crate::registry::builtin_names();
                return Err(BuildError::UnknownBuiltin { value: use_.to_owned(), available });
            };
            Ok(Descriptor {
                descriptor: LibraryDescriptor::Rust(descriptor),
                source: ProviderSource::Builtin { symbol },
                sha256: None,
            })
        }
        UseTarget::Library { path, symbol } => {
            let candidates = resolve::library_candidates(&path, base_dir);
            let loaded = loader::load(&candidates, &symbol, checks).map_err(|error| {
                match (&error.kind, resolve::looks_like_python_module(&path)) {
                    (LoadErrorKind::NotFound { tried }, true) => BuildError::PythonModulePath {
                        value: use_.to_owned(),
                        tried: crate::load_error::list_paths(tried),
                    },
                    _ => BuildError::Load(error),
                }
            })?;
            Ok(Descriptor {
                descriptor: loaded.descriptor,
                source: ProviderSource::Library { path: loaded.path, symbol },
                sha256: loaded.sha256,
            })
        }
    }
}

/// A provider's descriptor, found and checked (magic, ABI version, layout),
/// and not yet constructed.
#[derive(Clone)]
pub struct Descriptor {
    descriptor: LibraryDescriptor,
    /// Where it came from.
    pub source: ProviderSource,
    /// The SHA-256 of the library bytes loaded (lower-case hex; `None` for
    /// a built-in provider).
    pub sha256: Option<String>,
}

impl fmt::Debug for Descriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Descriptor").field("name", &self.name()).field("source", &self.source).finish()
    }
}

impl Descriptor {
    /// The Rust factory, or the C one.
    fn kind(&self) -> Result<ProviderFactoryRef, &'static CFactory> {
        match self.descriptor {
            LibraryDescriptor::Rust(descriptor) => Ok(descriptor.factory),
            LibraryDescriptor::C(factory) => Err(factory),
        }
    }

    /// The provider's name.
    pub fn name(&self) -> &'static str {
        match self.kind() {
            Ok(factory) => factory.name().as_str(),
            Err(factory) => factory.name(),
        }
    }

    /// Which ABI the descriptor speaks.
    pub fn abi_kind(&self) -> AbiKind {
        match self.descriptor {
            LibraryDescriptor::Rust(_) => AbiKind::Rust,
            LibraryDescriptor::C(_) => AbiKind::C,
        }
    }

    /// The ABI (major, minor) the library was built against.
    pub fn abi_version(&self) -> (u16, u16) {
        match self.descriptor {
            LibraryDescriptor::Rust(descriptor) => (descriptor.header.abi_major, descriptor.header.abi_minor),
            LibraryDescriptor::C(factory) => factory.abi_version(),
        }
    }

    /// Whether the constructor accepts keys beyond [`Descriptor::accepted_keys`].
    pub fn accepts_extra_keys(&self) -> bool {
        match self.kind() {
            Ok(factory) => factory.accepts_extra_keys(),
            Err(factory) => factory.accepts_extra_keys(),
        }
    }

    /// The config keys the constructor accepts by name, as the library
    /// reports them.
    pub fn accepted_keys(&self) -> Result<Vec<String>, ProviderFailure> {
        match self.kind() {
            Ok(factory) => match (factory.accepted_keys())() {
                RResult::ROk(keys) => Ok(keys.into_iter().map(RString::into_string).collect()),
                RResult::RErr(error) => Err(failure(error)),
            },
            Err(factory) => Ok(factory.accepted_keys().to_vec()),
        }
    }

    /// The decision-metadata keys the provider declares volatile (ABI 1.1;
    /// none for a 1.0 library or a C one).
    pub fn volatile_metadata_keys(&self) -> Vec<String> {
        match self.kind() {
            Ok(factory) => {
                (factory.volatile_metadata_keys())().into_iter().map(RString::into_string).collect()
            }
            Err(_) => Vec::new(),
        }
    }

    /// The config keys the provider declares to be paths (ABI 1.2; none
    /// for an older library or a C one).
    pub fn path_keys(&self) -> Vec<String> {
        match self.kind() {
            Ok(factory) => (factory.path_keys())().into_iter().map(RString::into_string).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// What the provider declares about its evaluations: bits of
    /// [`guardhost_abi::declarations`] (ABI 1.3; none for an older library
    /// or a C one).
    pub fn declarations(&self) -> u32 {
        match self.kind() {
            Ok(factory) => factory.declarations(),
            Err(_) => 0,
        }
    }

    /// `config` with the relative string values of [`Descriptor::path_keys`]
    /// (a string, or each string of a list) joined to `base_dir` (the
    /// config file's directory), so every relative
    /// path in a config file has that one base. Absolute paths and `~/...`
    /// are left alone.
    pub fn resolve_paths(&self, config: &Map<String, Value>, base_dir: &Path) -> Map<String, Value> {
        let path_keys = self.path_keys();
        let mut config = config.clone();
        let join = |key: &str, path: &mut String| {
            if !path.is_empty() && !path.starts_with('~') && Path::new(path.as_str()).is_relative() {
                let joined = crate::paths::join_relative(base_dir, Path::new(path.as_str()));
                tracing::debug!(key = %key, "relative path joined to {}", base_dir.display());
                *path = joined.to_string_lossy().into_owned();
            }
        };
        for key in &path_keys {
            match config.get_mut(key) {
                Some(Value::String(path)) => join(key, path),
                Some(Value::Array(paths)) => {
                    for path in paths.iter_mut() {
                        if let Value::String(path) = path {
                            join(key, path);
                        }
                    }
                }
                _ => {}
            }
        }
        config
    }

    /// Calls the library's constructor with `config` exactly as given: no key
    /// check, no `framework` injection. The host never does this; the
    /// conformance kit does, to see what the library itself does with a key.
    pub fn construct_raw(
        &self,
        config: &Map<String, Value>,
    ) -> Result<Arc<dyn GuardrailProvider>, ProviderFailure> {
        self.construct_handed(config, self.declarations(), true)
    }

    /// As [`Descriptor::construct_raw`], but the provider is handed every
    /// part of each request, whatever it declares it does not read (and
    /// treated as if it may block): the conformance kit decides the same
    /// calls with both to check the declarations.
    pub fn construct_raw_reading_everything(
        &self,
        config: &Map<String, Value>,
    ) -> Result<Arc<dyn GuardrailProvider>, ProviderFailure> {
        self.construct_handed(config, 0, true)
    }

    /// As [`Descriptor::construct_raw`], but the provider is decided through
    /// its `evaluate` even when its library has `decide` (ABI 1.4), which
    /// the host calls instead: the conformance kit decides the same calls
    /// with both to check that they agree.
    pub fn construct_raw_through_evaluate(
        &self,
        config: &Map<String, Value>,
    ) -> Result<Arc<dyn GuardrailProvider>, ProviderFailure> {
        self.construct_handed(config, self.declarations(), false)
    }

    /// Whether the library has `decide` (ABI 1.4).
    pub fn has_decide(&self) -> bool {
        matches!(self.kind(), Ok(factory) if factory.decide().is_some())
    }

    fn construct_handed(
        &self,
        config: &Map<String, Value>,
        declarations: u32,
        through_decide: bool,
    ) -> Result<Arc<dyn GuardrailProvider>, ProviderFailure> {
        match self.kind() {
            Ok(factory) => {
                let json = Value::Object(config.clone()).to_string();
                match (factory.construct())(RStr::from_str(&json)) {
                    RResult::ROk(object) => {
                        let provider = AbiProvider::new(object).with_declarations(declarations);
                        Ok(Arc::new(match factory.decide() {
                            Some(decide) if through_decide => provider.deciding_through(decide),
                            _ => provider,
                        }))
                    }
                    RResult::RErr(error) => Err(failure(error)),
                }
            }
            Err(factory) => Ok(Arc::new(factory.create(config)?)),
        }
    }

    /// Constructs the provider as the host does: checks `config`'s keys
    /// against the descriptor, injects `framework` where accepted, calls the
    /// constructor.
    pub fn construct(&self, config: &Map<String, Value>) -> Result<LoadedProvider, BuildError> {
        let name = self.name().to_owned();
        let constructor_error = |failure: ProviderFailure| BuildError::Constructor {
            provider: name.clone(),
            panicked: matches!(failure, ProviderFailure::Error { panicked: true, .. }),
            message: failure.to_string(),
        };
        let accepted_keys = self.accepted_keys().map_err(constructor_error)?;
        let accepts_extra_keys = self.accepts_extra_keys();
        if !accepts_extra_keys {
            if let Some(key) = config.keys().find(|k| !accepted_keys.contains(k)) {
                let accepted = if accepted_keys.is_empty() {
                    "no keys at all".to_owned()
                } else {
                    accepted_keys.join(", ")
                };
                return Err(BuildError::UnknownKey { provider: name, key: key.clone(), accepted });
            }
        }
        let framework_injected = !config.contains_key(FRAMEWORK_KEY)
            && (accepts_extra_keys || accepted_keys.iter().any(|k| k == FRAMEWORK_KEY));
        let provider = if framework_injected {
            let mut with_framework = config.clone();
            with_framework.insert(FRAMEWORK_KEY.to_owned(), Value::from(FRAMEWORK_VALUE));
            self.construct_raw(&with_framework)
        } else {
            self.construct_raw(config)
        }
        .map_err(constructor_error)?;
        tracing::debug!(provider = %name, source = %self.source, framework_injected, "provider constructed");
        let info = ProviderInfo {
            name,
            source: self.source.clone(),
            abi_version: self.abi_version(),
            abi_kind: self.abi_kind(),
            accepted_keys,
            accepts_extra_keys,
            framework_injected,
            volatile_metadata_keys: self.volatile_metadata_keys(),
            path_keys: self.path_keys(),
            unread_inputs: unread_input_names(self.declarations()),
            never_blocks: self.declarations() & guardhost_abi::declarations::NEVER_BLOCKS != 0,
            timeout_ms: None,
            isolation: Isolation::InProcess,
            transport: None,
            sha256: self.sha256.clone(),
        };
        Ok(LoadedProvider { provider, info })
    }
}

/// The inputs that `declarations` say are never read, as
/// [`ProviderInfo::unread_inputs`] lists them.
fn unread_input_names(declarations: u32) -> Vec<String> {
    use guardhost_abi::declarations::{NO_ATTRIBUTION, NO_AUTHZ_ATTRIBUTES, NO_TOOL_INPUT};
    [
        (NO_TOOL_INPUT, "tool_input"),
        (NO_AUTHZ_ATTRIBUTES, "authz_attributes"),
        (NO_ATTRIBUTION, "attribution"),
    ]
    .into_iter()
    .filter(|(bit, _)| declarations & bit != 0)
    .map(|(_, name)| name.to_owned())
    .collect()
}
