//! The exception classes the module raises, and the conversions from the
//! host's errors to them.

use guardhost::{BuildError as HostBuildError, ConfigError as HostConfigError, ToolCallError};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use serde_json::Value;

use crate::to_py::to_python;

create_exception!(guardhost, GuardhostError, PyException, "The base of every error guardhost raises.");
create_exception!(
    guardhost,
    ConfigError,
    GuardhostError,
    "A config that cannot be used (unreadable file, bad YAML, an unknown or mistyped key, a missing `$ENV_VAR`)."
);
create_exception!(
    guardhost,
    BuildError,
    GuardhostError,
    "A provider that cannot be built: a bad `use:`, a missing library, a failed ABI or SHA-256 check, an unknown config key, a constructor that refused its config."
);
create_exception!(
    guardhost,
    ProviderError,
    GuardhostError,
    "The provider failed to decide a call (an error, a caught panic, a timeout, a crashed provider process)."
);
create_exception!(
    guardhost,
    RequestError,
    GuardhostError,
    "A request that cannot be built (e.g. `authz_attributes` is not a mapping, an argument is not JSON)."
);
create_exception!(
    guardhost,
    Interrupt,
    GuardhostError,
    "A provider's control-flow signal (LangGraph's interrupt): never a decision. `.message` and `.payload` hold what the provider said."
);

create_exception!(
    guardhost,
    ApprovalRequired,
    GuardhostError,
    "A guard holds the call for a human's approval (`ask`): it did not run. `.tool`, `.reasons` (a list of `(code, message)`) and `.ask` (a dict: `entry`, `digest`, `deadline`, `approvers`) say what to approve; decide the call again with `{\"approved\": True, \"approved_by\": ..., **ask}` as `approval` in its context."
);

/// `ApprovalRequired` for a call held by `ask`.
pub(crate) fn approval_required(
    py: Python<'_>,
    tool: &str,
    ask: &guardhost::Ask,
    decision: &guardhost::GuardrailDecision,
) -> PyErr {
    let message = match decision.reasons.first() {
        Some(reason) => {
            format!("tool '{tool}' must be approved before it runs ({}): {}", reason.code, reason.message)
        }
        None => format!("tool '{tool}' must be approved before it runs"),
    };
    let error = ApprovalRequired::new_err(message);
    let value = error.value(py);
    let _ = value.setattr("tool", tool);
    let reasons: Vec<(String, String)> =
        decision.reasons.iter().map(|r| (r.code.to_string(), r.message.to_string())).collect();
    let _ = value.setattr("reasons", reasons);
    if let Ok(ask) = serde_json::to_value(ask).map_err(|_| ()).and_then(|v| to_python(py, &v).map_err(|_| ()))
    {
        let _ = value.setattr("ask", ask);
    }
    error
}

pub(crate) fn config_error(error: HostConfigError) -> PyErr {
    ConfigError::new_err(error.to_string())
}

pub(crate) fn build_error(error: HostBuildError) -> PyErr {
    BuildError::new_err(error.to_string())
}

fn interrupt_error(py: Python<'_>, message: String, payload: &Value) -> PyErr {
    let error = Interrupt::new_err(message.clone());
    let value = error.value(py);
    let _ = value.setattr("message", message);
    if let Ok(payload) = to_python(py, payload) {
        let _ = value.setattr("payload", payload);
    }
    error
}

/// A failed check of a tool call: an interrupt raises `Interrupt`, a bad
/// request `RequestError`, anything else `GuardhostError`.
pub(crate) fn tool_call_error(py: Python<'_>, error: ToolCallError) -> PyErr {
    match error {
        ToolCallError::Interrupt(interrupt) => interrupt_error(py, interrupt.message, &interrupt.payload),
        ToolCallError::InvalidRequest(error) => RequestError::new_err(error.to_string()),
        ToolCallError::ApprovalRequired { tool, ask, decision } => {
            approval_required(py, &tool, &ask, &decision)
        }
        other => GuardhostError::new_err(other.to_string()),
    }
}
