//! `Reason` and `Decision`: what `Guardrail.decide` returns.

use guardhost::denied_message;
use guardhost::{GuardrailDecision, ToolCall};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::to_py::map_to_dict;

/// One reason of a decision.
#[pyclass(frozen, get_all, module = "guardhost._guardhost")]
pub(crate) struct Reason {
    /// A namespaced code, e.g. `oap.tool_not_allowed`.
    code: String,
    /// A human-readable explanation; may be empty.
    message: String,
}

#[pymethods]
impl Reason {
    fn __repr__(&self) -> String {
        format!("Reason(code={:?}, message={:?})", self.code, self.message)
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.downcast::<Reason>().is_ok_and(|o| o.get().code == self.code && o.get().message == self.message)
    }
}

/// What the guardrail decided about one call, before any tool ran.
#[pyclass(frozen, get_all, module = "guardhost._guardhost")]
pub(crate) struct Decision {
    /// Whether the tool may run.
    allow: bool,
    /// Why (the provider's reasons; `oap.evaluator_error` after a provider error).
    reasons: Py<PyList>,
    /// The deciding policy, if any.
    policy_id: Option<String>,
    /// The provider's metadata.
    metadata: Py<PyDict>,
    /// Whether the provider failed (then `fail_closed` decided).
    provider_error: bool,
    /// The tool message a denied call gets (a dict with `content`,
    /// `tool_call_id`, `name`, `status`); `None` when the call may run (it then
    /// gets whatever the tool returns).
    message: Option<Py<PyDict>>,
}

impl Decision {
    /// The decision on `tool_call` from the middleware's verdict.
    pub(crate) fn from_decision(
        py: Python<'_>,
        tool_call: &ToolCall,
        decision: GuardrailDecision,
        provider_error: bool,
    ) -> PyResult<Self> {
        let message = if decision.allow {
            None
        } else {
            let m = denied_message(tool_call, &decision);
            let dict = PyDict::new(py);
            dict.set_item("content", m.content)?;
            dict.set_item("tool_call_id", m.tool_call_id)?;
            dict.set_item("name", m.name)?;
            dict.set_item("status", "error")?;
            Some(dict.unbind())
        };
        let GuardrailDecision { allow, reasons, policy_id, metadata } = decision;
        let list = PyList::empty(py);
        for r in reasons {
            list.append(Reason { code: r.code.into_owned(), message: r.message.into_owned() })?;
        }
        Ok(Decision {
            allow,
            reasons: list.unbind(),
            policy_id,
            metadata: map_to_dict(py, &metadata)?.unbind(),
            provider_error,
            message,
        })
    }
}

#[pymethods]
impl Decision {
    /// The decision as a plain dict (reasons as `{"code", "message"}` dicts).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        dict.set_item("allow", self.allow)?;
        let reasons = PyList::empty(py);
        for reason in self.reasons.bind(py).iter() {
            let reason = reason.downcast::<Reason>()?.get();
            let r = PyDict::new(py);
            r.set_item("code", &reason.code)?;
            r.set_item("message", &reason.message)?;
            reasons.append(r)?;
        }
        dict.set_item("reasons", reasons)?;
        dict.set_item("policy_id", &self.policy_id)?;
        dict.set_item("metadata", self.metadata.bind(py))?;
        dict.set_item("provider_error", self.provider_error)?;
        dict.set_item("message", &self.message)?;
        Ok(dict)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let reasons = self.reasons.bind(py).repr()?;
        Ok(format!(
            "Decision(allow={}, reasons={reasons}, policy_id={:?}, provider_error={})",
            if self.allow { "True" } else { "False" },
            self.policy_id,
            if self.provider_error { "True" } else { "False" }
        ))
    }
}
