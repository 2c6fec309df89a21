//! `Guardrail`: a whole `guardrails:` section, installed as the `guardhost`
//! command installs it (middleware, `fail_closed`, passport), deciding
//! LangChain-shaped tool calls.

use std::path::PathBuf;

use guardhost::denied_message;
use guardhost::{
    block_on, install_using, ConfigOrigin, GuardrailDecision, GuardrailMiddleware, LoadedConfig,
    ProviderInfo, ToolCall, ToolCallRequest,
};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use serde_json::{Map, Value};

use crate::convert::dict_to_map;
use crate::decision::Decision;
use crate::errors::{approval_required, build_error, config_error, tool_call_error, RequestError};
use crate::instantiate::{absolute_base, info_dict, instantiate, may_block};
use crate::to_py::to_python;

/// A guardrail installed from a `guardrails:` section, exactly as the
/// `guardhost` command installs it.
#[pyclass(frozen, module = "guardhost._guardhost")]
pub(crate) struct Guardrail {
    middleware: GuardrailMiddleware,
    info: ProviderInfo,
    /// The whole guardrail (its `filter_tools`).
    installed: guardhost::Guardrail,
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
        let installed = install_using(config, |spec, base_dir| instantiate(spec, base_dir, program.clone()))
            .map_err(build_error)?;
        Ok(installed.map(|installed| Guardrail {
            middleware: installed.middleware.clone(),
            info: installed.info.clone(),
            installed,
        }))
    }

    /// The decision to act on and whether the provider failed, through the
    /// middleware's borrowed view of the call (no owned request is built).
    fn decided(
        &self,
        py: Python<'_>,
        call: &ToolCallRequest,
        asynchronous: bool,
    ) -> PyResult<(GuardrailDecision, bool)> {
        let middleware = &self.middleware;
        let result = py.allow_threads(|| {
            if asynchronous {
                block_on(middleware.adecide(call))
            } else {
                middleware.decide(call)
            }
        });
        result.map_err(|e| tool_call_error(py, e))
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
        let (decision, provider_error) = self.decided(py, &call, asynchronous)?;
        Decision::from_decision(py, &call.tool_call, decision, provider_error)
    }

    /// The fast path of the LangChain middleware: decides a LangChain tool
    /// call (a dict with `name`, `args`, `id`) in a runtime `context`;
    /// `None` when it may run as it is, a dict (the arguments to run it
    /// with) when a guard rewrote it, else the denial's `(content,
    /// tool_call_id, name)`. A call held for approval raises
    /// `ApprovalRequired`.
    #[pyo3(signature = (tool_call, context=None, asynchronous=false))]
    fn check(
        &self,
        py: Python<'_>,
        tool_call: &Bound<'_, PyAny>,
        context: Option<&Bound<'_, PyAny>>,
        asynchronous: bool,
    ) -> PyResult<Option<PyObject>> {
        let tool_call = tool_call_from(tool_call)?;
        let call = ToolCallRequest { tool_call, context: context_from(context)? };
        let (decision, _) = self.decided(py, &call, asynchronous)?;
        if decision.allow {
            return match guardhost::rewritten_args(&decision) {
                None => Ok(None),
                Some(args) => Ok(Some(to_python(py, &serde_json::Value::Object(args.clone()))?.unbind())),
            };
        }
        if let Some(ask) = guardhost::Ask::of(&decision) {
            let tool = call.tool_call.name.as_deref().unwrap_or_default();
            return Err(approval_required(py, tool, &ask, &decision));
        }
        let m = denied_message(&call.tool_call, &decision);
        Ok(Some(
            (m.content, m.tool_call_id, m.name.unwrap_or_default()).into_pyobject(py)?.into_any().unbind(),
        ))
    }

    /// The tools of `tools` (names) the caller of `context` may use, in
    /// their order: what the config's `authorization:` provider allows
    /// (every tool without one). Asked before the model sees the tools,
    /// as DeerFlow's assembly layer does; a provider error gives no tool
    /// (`fail_closed`) or every tool.
    #[pyo3(signature = (tools, context=None))]
    fn filter_tools(
        &self,
        py: Python<'_>,
        tools: Vec<String>,
        context: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<String>> {
        let context = context_from(context)?;
        let names: Vec<&str> = tools.iter().map(String::as_str).collect();
        let installed = &self.installed;
        py.allow_threads(|| installed.filter_tools(context.as_ref(), &names)).map_err(|error| match error {
            guardhost::authorization::FilterError::Call(error) => tool_call_error(py, error),
            other => pyo3::exceptions::PyValueError::new_err(other.to_string()),
        })
    }

    /// Each guard, in the order they are asked: `(name, kind, provider)`,
    /// `kind` being `authorization` or `guardrail`.
    #[getter]
    fn guards(&self) -> Vec<(String, &'static str, String)> {
        let guards = self.middleware.guards().iter().zip(&self.installed.entries);
        guards
            .map(|(guard, info)| {
                let kind = match guard.kind() {
                    guardhost::GuardKind::Authorization => "authorization",
                    _ => "guardrail",
                };
                (guard.name().to_owned(), kind, info.name.clone())
            })
            .collect()
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
