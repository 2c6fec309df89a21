//! Building providers: where an `isolation: process` provider's server comes
//! from, and what the `Guardrail` and `Provider` classes share about a
//! built provider.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use guardhost::{BuildError as HostBuildError, Isolation, LoadedProvider, ProviderInfo, ProviderSpec};
use guardhost_isolation::ProcessProvider;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;

use crate::errors::GuardhostError;
use crate::to_py::map_to_dict;

/// The environment variable naming the `guardhost` executable that runs an
/// `isolation: process` provider; when set it wins over the package's own
/// `guardhost-provider-server`.
pub(crate) use guardhost_isolation::SERVER_ENV;

/// The program that runs an `isolation: process` provider: `$GUARDHOST_BIN`
/// when set, else the package's `guardhost-provider-server` (given by the
/// Python side), else the host's own search.
pub(crate) fn instantiate(
    spec: &ProviderSpec,
    base_dir: &Path,
    program: Option<PathBuf>,
) -> Result<LoadedProvider, HostBuildError> {
    if spec.isolation == Isolation::Process && std::env::var_os(SERVER_ENV).is_none() {
        if let Some(program) = program {
            let (provider, info) = ProcessProvider::start(spec, base_dir, program)?;
            return Ok(LoadedProvider { provider: Arc::new(provider), info });
        }
    }
    guardhost::instantiate(spec, base_dir)
}

/// Whether a call to the provider can block for long (a limit, or a child
/// process): then Python's async paths run it in a worker thread.
pub(crate) fn may_block(info: &ProviderInfo) -> bool {
    info.isolation == Isolation::Process || info.timeout_ms.is_some()
}

pub(crate) fn info_dict<'py>(py: Python<'py>, info: &ProviderInfo) -> PyResult<Bound<'py, PyDict>> {
    let value = serde_json::to_value(info).map_err(|e| GuardhostError::new_err(e.to_string()))?;
    match value {
        Value::Object(map) => map_to_dict(py, &map),
        _ => Ok(PyDict::new(py)),
    }
}

pub(crate) fn absolute_base(base_dir: Option<PathBuf>) -> PathBuf {
    let dir = base_dir.unwrap_or_else(|| PathBuf::from("."));
    std::path::absolute(&dir).unwrap_or(dir)
}
