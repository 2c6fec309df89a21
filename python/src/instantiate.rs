//! Building providers: where an `isolation: process` provider's server comes
//! from, and what the `Guardrail` and `Provider` classes share about a
//! built provider.

use std::path::{Path, PathBuf};

use guardhost::{
    BuildError as HostBuildError, Instantiation, Isolation, LoadedProvider, ProviderInfo, ProviderSpec,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;

use crate::errors::GuardhostError;
use crate::to_py::map_to_dict;

/// The environment variable naming the `guardhost` executable that runs an
/// `isolation: process` provider; when set it wins over the package's own
/// `guardhost-provider-server`.
pub(crate) use guardhost_isolation::SERVER_ENV;

/// Builds `spec`'s provider; an `isolation: process` one runs in
/// `$GUARDHOST_BIN` when set, else in the package's
/// `guardhost-provider-server` (`program`, given by the Python side), else
/// in what the launcher finds.
pub(crate) fn instantiate(
    spec: &ProviderSpec,
    base_dir: &Path,
    program: Option<PathBuf>,
) -> Result<LoadedProvider, HostBuildError> {
    let how = Instantiation { server_program: program, ..Instantiation::default() };
    guardhost::instantiate_with(spec, base_dir, &how)
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
