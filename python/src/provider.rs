//! `Provider`: one provider, built from `use:` + `config` (what DeerFlow's
//! `GuardrailProvider` is), deciding DeerFlow-shaped requests.

use std::path::PathBuf;
use std::sync::Arc;

use guardhost::decision_log::{Decided, DecisionLog, DecisionLogConfig};
use guardhost::{
    block_on, GuardrailProvider, GuardrailRequest, Isolation, LoadedProvider, ProviderFailure, ProviderInfo,
    ProviderSpec, Transport,
};
use guardhost::{middleware::shadowed, AuditProvider, Mode};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString};
use serde_json::Map;

use crate::convert::{config_map, dict_to_map, to_json};
use crate::errors::{build_error, ConfigError, ProviderError, RequestError};
use crate::instantiate::{absolute_base, info_dict, instantiate, may_block};
use crate::to_py::{map_to_dict, to_python};

/// One provider built from `use:` and `config` (DeerFlow's
/// `GuardrailProvider`). Decisions are built with the classes given at
/// construction (DeerFlow's own dataclasses, or guardhost's).
#[pyclass(frozen, module = "guardhost._guardhost")]
pub(crate) struct Provider {
    provider: Arc<dyn GuardrailProvider>,
    info: ProviderInfo,
    /// `enforce`, or shadow mode: denials returned as allows that say what
    /// would have been denied.
    mode: Mode,
    /// Where every decision is written, if anywhere.
    decision_log: Option<DecisionLog>,
    decision_cls: Py<PyAny>,
    reason_cls: Py<PyAny>,
    interrupt: Py<PyAny>,
}

/// An attribution field: `None` as absent, a string as it is, anything else
/// as its JSON text (as the host passes context values).
fn optional_text(value: Bound<'_, PyAny>, at: &str) -> PyResult<Option<String>> {
    if value.is_none() {
        return Ok(None);
    }
    if let Ok(s) = value.downcast::<PyString>() {
        return Ok(Some(s.to_str()?.to_owned()));
    }
    Ok(Some(to_json(&value, at)?.to_string()))
}

/// Reads DeerFlow's `GuardrailRequest` by attribute (any object with the
/// same attribute names; missing ones take their defaults).
fn request_from<'py>(request: &Bound<'py, PyAny>) -> PyResult<GuardrailRequest> {
    let py = request.py();
    fn attribute<'py>(
        request: &Bound<'py, PyAny>,
        fields: Option<&Bound<'py, PyDict>>,
        name: &Bound<'py, PyString>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        // A dataclass keeps its fields in the instance dict: a lookup there
        // is cheaper than the attribute protocol.
        if let Some(value) = fields.map(|f| f.get_item(name)).transpose()?.flatten() {
            return Ok(Some(value));
        }
        match request.getattr(name) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(request.py()) => Ok(None),
            Err(e) => Err(e),
        }
    }
    let fields = request.getattr(intern!(py, "__dict__")).ok().and_then(|d| d.downcast_into::<PyDict>().ok());
    let get = |name: &Bound<'py, PyString>| attribute(request, fields.as_ref(), name);
    let text = |name: &Bound<'py, PyString>, field: &str| -> PyResult<Option<String>> {
        match get(name)? {
            Some(v) => optional_text(v, field),
            None => Ok(None),
        }
    };
    let required = |name: &Bound<'py, PyString>| {
        get(name)?.ok_or_else(|| {
            pyo3::exceptions::PyAttributeError::new_err(format!("the request has no `{name}`"))
        })
    };
    let tool_name = match required(intern!(py, "tool_name"))? {
        v if v.is_none() => String::new(),
        v => match v.downcast::<PyString>() {
            Ok(s) => s.to_str()?.to_owned(),
            Err(_) => v.str()?.to_str()?.to_owned(),
        },
    };
    let tool_input = match required(intern!(py, "tool_input"))? {
        v if v.is_none() => Map::new(),
        v => match v.downcast::<PyDict>() {
            Ok(d) => dict_to_map(d, "tool_input")?,
            Err(_) => return Err(RequestError::new_err("request.tool_input must be a dict")),
        },
    };
    let authz_attributes = match get(intern!(py, "authz_attributes"))? {
        None => Map::new(),
        Some(v) if v.is_none() => Map::new(),
        Some(v) => match v.downcast::<PyDict>() {
            Ok(d) => dict_to_map(d, "authz_attributes")?,
            Err(_) => {
                let type_name = v.get_type().name()?.to_string();
                return Err(RequestError::new_err(format!(
                    "authz_attributes must be a Mapping, got {type_name}"
                )));
            }
        },
    };
    Ok(GuardrailRequest {
        tool_name,
        tool_input,
        agent_id: text(intern!(py, "agent_id"), "agent_id")?,
        thread_id: text(intern!(py, "thread_id"), "thread_id")?,
        is_subagent: get(intern!(py, "is_subagent"))?.map(|v| v.is_truthy()).transpose()?.unwrap_or(false),
        timestamp: text(intern!(py, "timestamp"), "timestamp")?.unwrap_or_default(),
        user_id: text(intern!(py, "user_id"), "user_id")?,
        user_role: text(intern!(py, "user_role"), "user_role")?,
        oauth_provider: text(intern!(py, "oauth_provider"), "oauth_provider")?,
        oauth_id: text(intern!(py, "oauth_id"), "oauth_id")?,
        run_id: text(intern!(py, "run_id"), "run_id")?,
        tool_call_id: text(intern!(py, "tool_call_id"), "tool_call_id")?,
        channel_user_id: text(intern!(py, "channel_user_id"), "channel_user_id")?,
        is_internal: get(intern!(py, "is_internal"))?.is_some_and(|v| v.is(PyBool::new(py, true))),
        authz_attributes,
    })
}

#[pymethods]
impl Provider {
    /// Builds the provider of `use_` from `config`, as the host builds
    /// `guardrails.provider` (key check, `framework` injection, path keys
    /// joined to `base_dir`, default: the working directory).
    #[new]
    #[pyo3(signature = (use_, config=None, *, isolation=None, timeout_ms=None, sha256=None,
                        allow_insecure_permissions=false, base_dir=None, program=None, command=None,
                        transport=None, mode=None, decision_log=None, decision_cls, reason_cls, interrupt))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        use_: String,
        config: Option<&Bound<'_, PyAny>>,
        isolation: Option<&str>,
        timeout_ms: Option<u64>,
        sha256: Option<String>,
        allow_insecure_permissions: bool,
        base_dir: Option<PathBuf>,
        program: Option<PathBuf>,
        command: Option<Vec<String>>,
        transport: Option<&str>,
        mode: Option<&str>,
        decision_log: Option<&Bound<'_, PyAny>>,
        decision_cls: Py<PyAny>,
        reason_cls: Py<PyAny>,
        interrupt: Py<PyAny>,
    ) -> PyResult<Self> {
        let config = config_map(config, "config")?;
        let isolation = match isolation {
            None | Some("in_process") => Isolation::InProcess,
            Some("process") => Isolation::Process,
            Some(other) => {
                // Never the value: it may come from a secret.
                return Err(ConfigError::new_err(format!(
                    "isolation: unknown variant (a string of {} characters), expected `in_process` or `process`",
                    other.chars().count()
                )));
            }
        };
        let transport = match transport {
            None => None,
            Some("shared_memory") => Some(Transport::SharedMemory),
            Some("pipes") => Some(Transport::Pipes),
            Some(other) => {
                return Err(ConfigError::new_err(format!(
                    "transport: unknown variant (a string of {} characters), expected `shared_memory` or `pipes`",
                    other.chars().count()
                )));
            }
        };
        let mode = match mode {
            None | Some("enforce") => Mode::Enforce,
            Some("warn") => Mode::Warn,
            Some("observe") => Mode::Observe,
            Some(other) => {
                return Err(ConfigError::new_err(format!(
                    "mode: unknown variant (a string of {} characters), expected `enforce`, `warn` or `observe`",
                    other.chars().count()
                )));
            }
        };
        let spec = ProviderSpec {
            sha256,
            allow_insecure_permissions,
            timeout_ms,
            isolation,
            command,
            transport,
            ..ProviderSpec::new(use_, config)
        };
        let base_dir = absolute_base(base_dir);
        let decision_log = match decision_log {
            Some(section) => {
                let section = serde_json::Value::Object(config_map(Some(section), "decision_log")?);
                let config: DecisionLogConfig = serde_json::from_value(section)
                    .map_err(|e| ConfigError::new_err(format!("decision_log: {e}")))?;
                let log = DecisionLog::open(&config, &base_dir).map_err(|e| {
                    ConfigError::new_err(format!("decision_log: cannot open {}: {e}", config.path.display()))
                })?;
                Some(log)
            }
            None => None,
        };
        let LoadedProvider { provider, info } =
            py.allow_threads(|| instantiate(&spec, &base_dir, program)).map_err(build_error)?;
        Ok(Provider { provider, info, mode, decision_log, decision_cls, reason_cls, interrupt })
    }

    /// The provider's name.
    #[getter]
    fn name(&self) -> &str {
        &self.info.name
    }

    /// What is known about the provider.
    #[getter]
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        info_dict(py, &self.info)
    }

    /// Whether a decision can block for long (`timeout_ms`, `isolation: process`).
    #[getter]
    fn may_block(&self) -> bool {
        may_block(&self.info)
    }

    /// Decides a DeerFlow `GuardrailRequest` (read by attribute); returns a
    /// `decision_cls(allow, [reason_cls(code, message)...], policy_id, metadata)`.
    /// A provider error raises `ProviderError`; an interrupt raises what
    /// `interrupt(message, payload)` returns.
    #[pyo3(signature = (request, asynchronous=false))]
    fn evaluate<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, PyAny>,
        asynchronous: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = request_from(request)?;
        let provider = &self.provider;
        let started = std::time::Instant::now();
        let evaluation = py.allow_threads(|| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if asynchronous {
                    block_on(provider.aevaluate(&request))
                } else {
                    provider.evaluate(&request)
                }
            }))
            .unwrap_or_else(|_| {
                Err(ProviderFailure::error(format!("provider '{}' panicked", provider.name())))
            })
        });
        let evaluation = evaluation.map(|decision| shadowed(decision, self.mode));
        if let Some(log) = &self.decision_log {
            let decided = match &evaluation {
                Ok(decision) => Decided::Decision(decision, false),
                Err(ProviderFailure::Interrupt(_)) => Decided::Interrupt,
                Err(_) => Decided::ProviderError,
            };
            let provider = AuditProvider { name: self.info.name.clone(), sha256: self.info.sha256.clone() };
            log.record_call(&request.view(), decided, self.mode, &provider, started.elapsed());
        }
        match evaluation {
            Ok(decision) => {
                let reasons = PyList::empty(py);
                let reason_cls = self.reason_cls.bind(py);
                for r in &decision.reasons {
                    reasons.append(reason_cls.call1((r.code.as_str(), r.message.as_str()))?)?;
                }
                let metadata = map_to_dict(py, &decision.metadata)?;
                self.decision_cls.bind(py).call1((decision.allow, reasons, decision.policy_id, metadata))
            }
            Err(ProviderFailure::Interrupt(interrupt)) => {
                let payload = to_python(py, &interrupt.payload)?;
                let error = self.interrupt.bind(py).call1((interrupt.message, payload))?;
                Err(PyErr::from_value(error))
            }
            Err(error) => Err(ProviderError::new_err(error.to_string())),
        }
    }

    fn __repr__(&self) -> String {
        format!("Provider(name={:?}, source={:?})", self.info.name, self.info.source.to_string())
    }
}
