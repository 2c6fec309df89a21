//! The conformance kit (`guardhost.conformance`).

use guardhost_kit::{self as conformance, Options};
use pyo3::prelude::*;

use crate::convert::config_map;

/// Runs the conformance kit against `use_` (relative paths from the working
/// directory) constructed from `config`; returns the report as JSON text
/// (`guardhost conformance --format json`). `quick` uses the kit's quick
/// options (fewer iterations, a 50 ms latency budget).
#[pyfunction]
#[pyo3(signature = (use_, config=None, quick=false, threads=None, iterations=None, latency_budget_us=None,
                    allow_insecure_permissions=false, command=None, isolation=None, fuzz_seconds=None, seed=None,
                    program=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn conformance_json(
    py: Python<'_>,
    use_: Option<String>,
    config: Option<&Bound<'_, PyAny>>,
    quick: bool,
    threads: Option<usize>,
    iterations: Option<usize>,
    latency_budget_us: Option<u64>,
    allow_insecure_permissions: bool,
    command: Option<Vec<String>>,
    isolation: Option<&str>,
    fuzz_seconds: Option<f64>,
    seed: Option<u64>,
    program: Option<std::path::PathBuf>,
) -> PyResult<(String, String)> {
    let config = config_map(config, "config")?;
    let mut options = if quick { Options::quick() } else { Options::default() };
    if let Some(threads) = threads {
        options.threads = threads.max(1);
    }
    if let Some(iterations) = iterations {
        options.iterations = iterations.max(1);
    }
    if let Some(us) = latency_budget_us {
        options.latency_budget = std::time::Duration::from_micros(us);
    }
    options.allow_insecure_permissions = allow_insecure_permissions;
    options.isolation = match isolation {
        None | Some("in_process") => guardhost::Isolation::InProcess,
        Some("process") => guardhost::Isolation::Process,
        Some(_) => {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "isolation must be \"in_process\" or \"process\"",
            ))
        }
    };
    if let Some(seconds) = fuzz_seconds {
        if !(0.0..=86_400.0).contains(&seconds) {
            return Err(pyo3::exceptions::PyValueError::new_err("fuzz_seconds must be from 0 to 86400"));
        }
        options.fuzz = std::time::Duration::from_secs_f64(seconds);
    }
    options.seed = seed;
    // As for a provider: $GUARDHOST_BIN wins over the package's own server.
    if std::env::var_os(crate::instantiate::SERVER_ENV).is_none() {
        options.server_program = program;
    }
    options.caller = conformance::Caller::Python;
    let report = match (use_, command) {
        (Some(use_), None) => py.allow_threads(|| conformance::run(&use_, &config, &options)),
        (None, Some(command)) if !command.is_empty() => {
            py.allow_threads(|| conformance::run_program(&command, &config, &options))
        }
        _ => {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "conformance takes a provider library (use=...) or a provider program (command=[...]), exactly one of them",
            ))
        }
    };
    Ok((report.to_json(), report.to_text()))
}
