//! `guardhost._guardhost`: the extension module behind the `guardhost`
//! Python package. The pure-Python modules (`guardhost`, `guardhost.deerflow`,
//! `guardhost.langchain`) are the public face; this module holds what must
//! be fast or must touch the host library:
//!
//! - [`Guardrail`]: a whole `guardrails:` section, installed as the
//!   `guardhost` command installs it (middleware, `fail_closed`, passport);
//! - [`Provider`]: one provider, built from `use:` + `config` (what DeerFlow's
//!   `GuardrailProvider` is), deciding DeerFlow-shaped requests;
//! - [`conformance_json`]: the conformance kit;
//! - [`serve_provider`]: the child side of `isolation: process`.
//!
//! Every call into a provider releases the GIL.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use guardhost::conformance::{self, Options};
use guardhost::isolation::ProcessProvider;
use guardhost::middleware::denied_message;
use guardhost::{
    block_on, BuildError as HostBuildError, ConfigError as HostConfigError, ConfigOrigin, GuardrailDecision,
    GuardrailMiddleware, GuardrailProvider, GuardrailRequest, Isolation, LoadedConfig, LoadedProvider,
    ProviderFailure, ProviderInfo, ProviderSpec, ToolCall, ToolCallError, ToolCallRequest, Verdict,
};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use pyo3::{intern, IntoPyObjectExt};
use serde_json::{Map, Value};

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

/// The environment variable naming the `guardhost` executable that runs an
/// `isolation: process` provider; when set it wins over the package's own
/// `guardhost-provider-server`.
const SERVER_ENV: &str = "GUARDHOST_BIN";

fn config_error(error: HostConfigError) -> PyErr {
    ConfigError::new_err(error.to_string())
}

fn build_error(error: HostBuildError) -> PyErr {
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

// ---------------------------------------------------------------------------
// Python <-> JSON

/// Why a Python value is not JSON: the message, and where (the path is
/// built only when there is an error, innermost segment first).
struct NotJson {
    path: Vec<String>,
    message: String,
}

impl NotJson {
    fn new(message: String) -> Self {
        NotJson { path: Vec::new(), message }
    }
    fn within(mut self, segment: String) -> Self {
        self.path.push(segment);
        self
    }
    fn into_err(self, root: &str) -> PyErr {
        let mut at = root.to_owned();
        for segment in self.path.iter().rev() {
            at.push_str(segment);
        }
        RequestError::new_err(format!("{at}: {}", self.message))
    }
}

impl From<PyErr> for NotJson {
    fn from(error: PyErr) -> Self {
        NotJson::new(error.to_string())
    }
}

/// A Python value as JSON: `None`, `bool`, `int`, `float`, `str`, `dict` (string
/// keys), `list` and `tuple`. Anything else is a `RequestError` naming where it is.
fn to_json(value: &Bound<'_, PyAny>, at: &str) -> PyResult<Value> {
    json_value(value).map_err(|e| e.into_err(at))
}

fn json_value(value: &Bound<'_, PyAny>) -> Result<Value, NotJson> {
    if let Ok(s) = value.downcast::<PyString>() {
        Ok(Value::String(s.to_str()?.to_owned()))
    } else if value.is_none() {
        Ok(Value::Null)
    } else if let Ok(b) = value.downcast::<PyBool>() {
        Ok(Value::Bool(b.is_true()))
    } else if let Ok(i) = value.downcast::<PyInt>() {
        if let Ok(n) = i.extract::<i64>() {
            Ok(Value::from(n))
        } else if let Ok(n) = i.extract::<u64>() {
            Ok(Value::from(n))
        } else {
            Err(NotJson::new("the integer does not fit in 64 bits".into()))
        }
    } else if let Ok(f) = value.downcast::<PyFloat>() {
        serde_json::Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| NotJson::new(format!("{} is not a JSON number", f.value())))
    } else if let Ok(d) = value.downcast::<PyDict>() {
        Ok(Value::Object(json_map(d)?))
    } else if let Ok(l) = value.downcast::<PyList>() {
        let mut items = Vec::with_capacity(l.len());
        for (i, v) in l.iter().enumerate() {
            items.push(json_value(&v).map_err(|e| e.within(format!("[{i}]")))?);
        }
        Ok(Value::Array(items))
    } else if let Ok(t) = value.downcast::<PyTuple>() {
        let mut items = Vec::with_capacity(t.len());
        for (i, v) in t.iter().enumerate() {
            items.push(json_value(&v).map_err(|e| e.within(format!("[{i}]")))?);
        }
        Ok(Value::Array(items))
    } else {
        let type_name = value.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
        Err(NotJson::new(format!(
            "a value of type {type_name} is not JSON (guardhost passes None, bool, int, float, str, list, tuple and dict with string keys)"
        )))
    }
}

fn json_map(dict: &Bound<'_, PyDict>) -> Result<Map<String, Value>, NotJson> {
    let mut map = Map::new();
    for (key, value) in dict.iter() {
        let Ok(key) = key.downcast::<PyString>() else {
            return Err(NotJson::new("a mapping key is not a string".into()));
        };
        let key = key.to_str()?;
        let value = json_value(&value).map_err(|e| e.within(format!(".{key}")))?;
        map.insert(key.to_owned(), value);
    }
    Ok(map)
}

fn dict_to_map(dict: &Bound<'_, PyDict>, at: &str) -> PyResult<Map<String, Value>> {
    json_map(dict).map_err(|e| e.into_err(at))
}

/// A JSON value as a Python value.
fn to_python<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_bound_py_any(py)?,
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_bound_py_any(py)?,
            (None, Some(u)) => u.into_bound_py_any(py)?,
            _ => n.as_f64().unwrap_or(f64::NAN).into_bound_py_any(py)?,
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_python(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => map_to_dict(py, map)?.into_any(),
    })
}

fn map_to_dict<'py>(py: Python<'py>, map: &Map<String, Value>) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (key, value) in map {
        dict.set_item(key, to_python(py, value)?)?;
    }
    Ok(dict)
}

/// A config mapping from Python (`None` is empty).
fn config_map(config: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Map<String, Value>> {
    match config {
        None => Ok(Map::new()),
        Some(c) if c.is_none() => Ok(Map::new()),
        Some(c) => match c.downcast::<PyDict>() {
            Ok(d) => dict_to_map(d, what).map_err(|e| ConfigError::new_err(e.to_string())),
            Err(_) => Err(ConfigError::new_err(format!("{what} must be a mapping of config keys"))),
        },
    }
}

// ---------------------------------------------------------------------------
// Running providers

/// The program that runs an `isolation: process` provider: `$GUARDHOST_BIN`
/// when set, else the package's `guardhost-provider-server` (given by the
/// Python side), else the host's own search.
fn instantiate(
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
fn may_block(info: &ProviderInfo) -> bool {
    info.isolation == Isolation::Process || info.timeout_ms.is_some()
}

fn info_dict<'py>(py: Python<'py>, info: &ProviderInfo) -> PyResult<Bound<'py, PyDict>> {
    let value = serde_json::to_value(info).map_err(|e| GuardhostError::new_err(e.to_string()))?;
    match value {
        Value::Object(map) => map_to_dict(py, &map),
        _ => Ok(PyDict::new(py)),
    }
}

fn absolute_base(base_dir: Option<PathBuf>) -> PathBuf {
    let dir = base_dir.unwrap_or_else(|| PathBuf::from("."));
    std::path::absolute(&dir).unwrap_or(dir)
}

// ---------------------------------------------------------------------------
// Guardrail: a whole `guardrails:` section

/// One reason of a decision.
#[pyclass(frozen, get_all, module = "guardhost._guardhost")]
struct Reason {
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
struct Decision {
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

/// A guardrail installed from a `guardrails:` section, exactly as the
/// `guardhost` command installs it.
#[pyclass(frozen, module = "guardhost._guardhost")]
struct Guardrail {
    middleware: GuardrailMiddleware,
    info: ProviderInfo,
}

/// Reads a tool call the way DeerFlow's middleware does: `name` (absent →
/// no name; `None` → `"None"`, as `str(None)`), `args` (absent or `None` →
/// `{}`), `id` (absent → none; `None` → none, named `None` in a denial).
fn tool_call_from(tool_call: &Bound<'_, PyAny>) -> PyResult<ToolCall> {
    let py = tool_call.py();
    let dict = tool_call
        .downcast::<PyDict>()
        .map_err(|_| PyTypeError::new_err("tool_call must be a dict with `name`, `args` and `id`"))?;
    let text = |value: Bound<'_, PyAny>| -> PyResult<String> {
        match value.downcast::<PyString>() {
            Ok(s) => Ok(s.to_str()?.to_owned()),
            Err(_) => Ok(value.str()?.to_str()?.to_owned()),
        }
    };
    let name = dict.get_item(intern!(py, "name"))?.map(text).transpose()?;
    let args = match dict.get_item(intern!(py, "args"))? {
        None => Map::new(),
        Some(a) if a.is_none() => Map::new(),
        Some(a) => match a.downcast::<PyDict>() {
            Ok(d) => dict_to_map(d, "args")?,
            Err(_) => return Err(RequestError::new_err("the tool call's `args` must be a dict")),
        },
    };
    let (id, null_id) = match dict.get_item(intern!(py, "id"))? {
        None => (None, false),
        Some(i) if i.is_none() => (None, true),
        Some(i) => (Some(text(i)?), false),
    };
    Ok(ToolCall { name, args, id, null_id })
}

/// The runtime context DeerFlow reads: a dict, else nothing.
fn context_from(context: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Map<String, Value>>> {
    match context.map(|c| c.downcast::<PyDict>()) {
        Some(Ok(d)) => Ok(Some(dict_to_map(d, "context")?)),
        _ => Ok(None),
    }
}

impl Guardrail {
    fn from_loaded(config: &LoadedConfig, program: Option<PathBuf>) -> PyResult<Option<Self>> {
        let section = &config.guardrails;
        let (true, Some(spec)) = (section.enabled, section.provider.as_ref()) else {
            return Ok(None);
        };
        let LoadedProvider { provider, info } =
            instantiate(spec, &config.base_dir, program).map_err(build_error)?;
        let middleware = GuardrailMiddleware::new(provider)
            .with_fail_closed(section.fail_closed)
            .with_passport(section.passport.clone())
            .with_library_sha256(info.sha256.clone());
        Ok(Some(Guardrail { middleware, info }))
    }

    fn verdict(&self, py: Python<'_>, call: ToolCallRequest, asynchronous: bool) -> PyResult<Verdict> {
        let middleware = &self.middleware;
        let result = py.allow_threads(|| {
            if asynchronous {
                block_on(middleware.acheck(&call)).map(|v| (v, call))
            } else {
                middleware.check(&call).map(|v| (v, call))
            }
        });
        match result {
            Ok((verdict, _)) => Ok(verdict),
            Err(ToolCallError::Interrupt(interrupt)) => {
                Err(interrupt_error(py, interrupt.message, &interrupt.payload))
            }
            Err(ToolCallError::InvalidRequest(error)) => Err(RequestError::new_err(error.to_string())),
            Err(other) => Err(GuardhostError::new_err(other.to_string())),
        }
    }
}

#[pymethods]
impl Guardrail {
    /// Loads a config file (a DeerFlow `config.yaml`, or a bare `guardrails:`
    /// section) and installs its guardrail, as `guardhost check` does;
    /// `None` when the section leaves it out (`enabled: false`, or no
    /// provider). Relative paths are taken from the file's directory.
    #[staticmethod]
    #[pyo3(signature = (path, program=None))]
    fn from_path(py: Python<'_>, path: PathBuf, program: Option<PathBuf>) -> PyResult<Option<Self>> {
        py.allow_threads(|| {
            let config = LoadedConfig::from_path(&path).map_err(config_error)?;
            Guardrail::from_loaded(&config, program)
        })
    }

    /// Parses config text (YAML or JSON: a whole config or the section) and
    /// installs its guardrail; relative paths are taken from `base_dir`
    /// (default: the working directory). `origin` names the text in errors.
    #[staticmethod]
    #[pyo3(signature = (text, base_dir=None, origin="<config>", program=None))]
    fn from_yaml(
        py: Python<'_>,
        text: &str,
        base_dir: Option<PathBuf>,
        origin: &str,
        program: Option<PathBuf>,
    ) -> PyResult<Option<Self>> {
        let base_dir = absolute_base(base_dir);
        let origin = ConfigOrigin::File(PathBuf::from(origin));
        py.allow_threads(|| {
            let config = LoadedConfig::from_yaml(text, base_dir, origin, |name| std::env::var(name).ok())
                .map_err(config_error)?;
            Guardrail::from_loaded(&config, program)
        })
    }

    /// The provider's name.
    #[getter]
    fn name(&self) -> &str {
        &self.info.name
    }

    /// What is known about the provider (as `guardhost check` shows it).
    #[getter]
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        info_dict(py, &self.info)
    }

    /// Whether provider errors block calls.
    #[getter]
    fn fail_closed(&self) -> bool {
        self.middleware.fail_closed()
    }

    /// The passport (every request's `agent_id`).
    #[getter]
    fn passport(&self) -> Option<&str> {
        self.middleware.passport()
    }

    /// Whether a decision can block for long (`timeout_ms`, `isolation: process`).
    #[getter]
    fn may_block(&self) -> bool {
        may_block(&self.info)
    }

    /// Decides one call, running nothing. `args` and `context` are dicts
    /// (JSON values); `asynchronous` asks the provider's `aevaluate`.
    #[pyo3(signature = (tool_name, args=None, context=None, tool_call_id=None, *, asynchronous=false))]
    fn decide(
        &self,
        py: Python<'_>,
        tool_name: Option<&str>,
        args: Option<&Bound<'_, PyDict>>,
        context: Option<&Bound<'_, PyAny>>,
        tool_call_id: Option<&str>,
        asynchronous: bool,
    ) -> PyResult<Decision> {
        let args = args.map(|a| dict_to_map(a, "args")).transpose()?.unwrap_or_default();
        let call = ToolCallRequest {
            tool_call: ToolCall {
                name: tool_name.map(str::to_owned),
                args,
                id: tool_call_id.map(str::to_owned),
                null_id: false,
            },
            context: context_from(context)?,
        };
        let tool_call = call.tool_call.clone();
        let verdict = self.verdict(py, call, asynchronous)?;
        let message = if verdict.decision.allow {
            None
        } else {
            let m = denied_message(&tool_call, &verdict.decision);
            let dict = PyDict::new(py);
            dict.set_item("content", m.content)?;
            dict.set_item("tool_call_id", m.tool_call_id)?;
            dict.set_item("name", m.name)?;
            dict.set_item("status", "error")?;
            Some(dict.unbind())
        };
        let GuardrailDecision { allow, reasons, policy_id, metadata } = verdict.decision;
        let list = PyList::empty(py);
        for r in reasons {
            list.append(Reason { code: r.code, message: r.message })?;
        }
        Ok(Decision {
            allow,
            reasons: list.unbind(),
            policy_id,
            metadata: map_to_dict(py, &metadata)?.unbind(),
            provider_error: verdict.provider_error,
            message,
        })
    }

    /// The fast path of the LangChain middleware: decides a LangChain tool
    /// call (a dict with `name`, `args`, `id`) in a runtime `context`;
    /// `None` when it may run, else the denial's `(content, tool_call_id, name)`.
    #[pyo3(signature = (tool_call, context=None, asynchronous=false))]
    fn check(
        &self,
        py: Python<'_>,
        tool_call: &Bound<'_, PyAny>,
        context: Option<&Bound<'_, PyAny>>,
        asynchronous: bool,
    ) -> PyResult<Option<(String, String, String)>> {
        let tool_call = tool_call_from(tool_call)?;
        let call = ToolCallRequest { tool_call, context: context_from(context)? };
        let middleware = &self.middleware;
        let result = py.allow_threads(|| {
            let verdict =
                if asynchronous { block_on(middleware.acheck(&call)) } else { middleware.check(&call) };
            verdict.map(|v| {
                (!v.decision.allow).then(|| {
                    let m = denied_message(&call.tool_call, &v.decision);
                    (m.content, m.tool_call_id, m.name.unwrap_or_default())
                })
            })
        });
        match result {
            Ok(denial) => Ok(denial),
            Err(ToolCallError::Interrupt(interrupt)) => {
                Err(interrupt_error(py, interrupt.message, &interrupt.payload))
            }
            Err(ToolCallError::InvalidRequest(error)) => Err(RequestError::new_err(error.to_string())),
            Err(other) => Err(GuardhostError::new_err(other.to_string())),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "Guardrail(provider={:?}, source={:?}, fail_closed={})",
            self.info.name,
            self.info.source.to_string(),
            if self.middleware.fail_closed() { "True" } else { "False" }
        )
    }
}

// ---------------------------------------------------------------------------
// Provider: one provider, deciding DeerFlow-shaped requests

/// One provider built from `use:` and `config` (DeerFlow's
/// `GuardrailProvider`). Decisions are built with the classes given at
/// construction (DeerFlow's own dataclasses, or guardhost's).
#[pyclass(frozen, module = "guardhost._guardhost")]
struct Provider {
    provider: Arc<dyn GuardrailProvider>,
    info: ProviderInfo,
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
                    "authz_attributes must be a mapping, got {type_name}"
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
                        allow_insecure_permissions=false, base_dir=None, program=None,
                        decision_cls, reason_cls, interrupt))]
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
        decision_cls: Py<PyAny>,
        reason_cls: Py<PyAny>,
        interrupt: Py<PyAny>,
    ) -> PyResult<Self> {
        let config = config_map(config, "config")?;
        let isolation = match isolation {
            None | Some("in_process") => Isolation::InProcess,
            Some("process") => Isolation::Process,
            Some(other) => {
                return Err(ConfigError::new_err(format!(
                    "isolation: unknown variant `{other}`, expected `in_process` or `process`"
                )))
            }
        };
        let spec = ProviderSpec { use_, config, sha256, allow_insecure_permissions, timeout_ms, isolation };
        let base_dir = absolute_base(base_dir);
        let LoadedProvider { provider, info } =
            py.allow_threads(|| instantiate(&spec, &base_dir, program)).map_err(build_error)?;
        Ok(Provider { provider, info, decision_cls, reason_cls, interrupt })
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

// ---------------------------------------------------------------------------
// The conformance kit and the provider server

/// Runs the conformance kit against `use_` (relative paths from the working
/// directory) constructed from `config`; returns the report as JSON text
/// (`guardhost conformance --format json`). `quick` uses the kit's quick
/// options (fewer iterations, a 50 ms latency budget).
#[pyfunction]
#[pyo3(signature = (use_, config=None, quick=false, threads=None, iterations=None, latency_budget_us=None))]
fn conformance_json(
    py: Python<'_>,
    use_: String,
    config: Option<&Bound<'_, PyAny>>,
    quick: bool,
    threads: Option<usize>,
    iterations: Option<usize>,
    latency_budget_us: Option<u64>,
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
    let report = py.allow_threads(|| conformance::run(&use_, &config, &options));
    Ok((report.to_json(), report.to_text()))
}

/// Serves one provider on the file descriptors `input` and `output` until
/// the host closes `input`: the body of `guardhost-provider-server`. Takes
/// ownership of both descriptors.
#[pyfunction]
fn serve_provider(py: Python<'_>, input: i32, output: i32) -> PyResult<i32> {
    #[cfg(unix)]
    {
        use std::os::fd::FromRawFd;
        // SAFETY: the caller (`guardhost._server`) hands over two descriptors
        // it duplicated for this call and never uses or closes again, so
        // each `File` is their only owner.
        #[allow(unsafe_code)]
        let (input, output) =
            unsafe { (std::fs::File::from_raw_fd(input), std::fs::File::from_raw_fd(output)) };
        let input = std::io::BufReader::with_capacity(64 << 10, input);
        let result = py.allow_threads(|| guardhost::isolation::serve(input, output));
        match result {
            Ok(()) => Ok(0),
            Err(guardhost::isolation::ServeError::Build(_)) => Ok(2),
            Err(error) => {
                eprintln!("guardhost provider server: {error}");
                Ok(1)
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (py, input, output);
        Err(GuardhostError::new_err("isolation: process is supported on Unix only in the Python package"))
    }
}

/// The extension module.
#[pymodule]
fn _guardhost(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("GuardhostError", py.get_type::<GuardhostError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("BuildError", py.get_type::<BuildError>())?;
    m.add("ProviderError", py.get_type::<ProviderError>())?;
    m.add("RequestError", py.get_type::<RequestError>())?;
    m.add("Interrupt", py.get_type::<Interrupt>())?;
    m.add_class::<Guardrail>()?;
    m.add_class::<Provider>()?;
    m.add_class::<Decision>()?;
    m.add_class::<Reason>()?;
    m.add_function(wrap_pyfunction!(conformance_json, m)?)?;
    m.add_function(wrap_pyfunction!(serve_provider, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("SERVER_ENV", SERVER_ENV)?;
    Ok(())
}
