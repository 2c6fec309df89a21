//! Shared helpers: find the workspace's real provider libraries, build
//! providers and middleware from them, write real YAML files.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use guardhost::{instantiate, GuardrailMiddleware, GuardrailProvider, LoadedProvider, ProviderSpec};
use serde_json::{Map, Value};

/// The library file of a workspace cdylib (by its lib name, e.g.
/// `guardhost_test_providers`). Cargo builds the host's dev-dependencies,
/// cdylib included, next to the test executable before running tests.
pub fn library(lib_name: &str) -> PathBuf {
    guardhost::conformance::cdylib(lib_name)
}

/// `use:` value for a symbol of a workspace cdylib.
pub fn use_of(lib_name: &str, symbol: &str) -> String {
    format!("{}:{symbol}", library(lib_name).display())
}

/// A provider from the scripted test-provider library.
pub fn test_provider(symbol: &str) -> Arc<dyn GuardrailProvider> {
    load(&use_of("guardhost_test_providers", symbol), Map::new()).provider
}

/// Constructs whatever `use_` names, with `config`.
pub fn load(use_: &str, config: Map<String, Value>) -> LoadedProvider {
    try_load(use_, config).unwrap_or_else(|e| panic!("cannot load {use_}: {e}"))
}

/// Like [`load`], returning the error.
pub fn try_load(use_: &str, config: Map<String, Value>) -> Result<LoadedProvider, guardhost::BuildError> {
    instantiate(&ProviderSpec::new(use_, config), Path::new("/"))
}

/// A middleware around a scripted test provider.
pub fn middleware(symbol: &str) -> GuardrailMiddleware {
    GuardrailMiddleware::new(test_provider(symbol))
}

/// A JSON object from a `json!` value.
pub fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// Writes `text` to `name` inside `dir` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}
