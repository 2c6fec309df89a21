//! Reading DeerFlow's `GuardrailRequest` (any object with its attribute
//! names; missing ones take their defaults) into the host's borrowed view
//! of a call: strings are lent, not copied; the arguments, the attributes
//! and the attribution are read only for a provider (or a decision log)
//! that reads them.

use std::borrow::Cow;

use guardhost::{Attribution, CallView, Held};
use pyo3::exceptions::PyAttributeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyString};
use serde_json::{Map, Value};

use crate::convert::{dict_to_map, to_json};
use crate::errors::RequestError;

/// A text field as read: a Python string (lent when the call is made) or
/// the JSON text of any other value (as the host passes context values).
enum Text<'py> {
    Str(Bound<'py, PyString>),
    Json(String),
}

impl Text<'_> {
    fn as_str(&self) -> PyResult<&str> {
        match self {
            Text::Str(s) => s.to_str(),
            Text::Json(s) => Ok(s),
        }
    }
}

/// What of a request is read: what the provider (or the decision log)
/// reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reads {
    /// The arguments.
    pub(crate) arguments: bool,
    /// The attributes and who, where and when.
    pub(crate) attribution: bool,
}

/// A request's fields, read from the Python object.
pub(crate) struct Request<'py> {
    tool_name: Option<Text<'py>>,
    tool_input: Map<String, Value>,
    agent_id: Option<Text<'py>>,
    thread_id: Option<Text<'py>>,
    is_subagent: bool,
    timestamp: Option<Text<'py>>,
    user_id: Option<Text<'py>>,
    user_role: Option<Text<'py>>,
    oauth_provider: Option<Text<'py>>,
    oauth_id: Option<Text<'py>>,
    run_id: Option<Text<'py>>,
    tool_call_id: Option<Text<'py>>,
    channel_user_id: Option<Text<'py>>,
    is_internal: bool,
    authz_attributes: Map<String, Value>,
}

/// An attribute of `request`; `None` when it has none. (Read by attribute,
/// not from the instance dict: CPython keeps a fresh dataclass instance's
/// fields without a dict, and asking for `__dict__` would build one.)
fn attribute<'py>(
    request: &Bound<'py, PyAny>,
    name: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    match request.getattr(name) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_instance_of::<PyAttributeError>(request.py()) => Ok(None),
        Err(e) => Err(e),
    }
}

/// An attribution field: `None` as absent, a string as it is, anything
/// else as its JSON text.
fn text<'py>(value: Option<Bound<'py, PyAny>>, at: &str) -> PyResult<Option<Text<'py>>> {
    match value {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => match v.downcast_into::<PyString>() {
            Ok(s) => Ok(Some(Text::Str(s))),
            Err(e) => Ok(Some(Text::Json(to_json(&e.into_inner(), at)?.to_string()))),
        },
    }
}

impl<'py> Request<'py> {
    /// Reads `request`. What the provider does not read is left at its
    /// default (`Reads`), but the arguments must be a dict and the
    /// attributes a mapping (or `None`) either way.
    pub(crate) fn read(request: &Bound<'py, PyAny>, reads: Reads) -> PyResult<Self> {
        let py = request.py();
        let get = |name: &Bound<'py, PyString>| attribute(request, name);
        let required = |name: &Bound<'py, PyString>| {
            get(name)?.ok_or_else(|| PyAttributeError::new_err(format!("the request has no `{name}`")))
        };
        let tool_name = match required(intern!(py, "tool_name"))? {
            v if v.is_none() => None,
            v => match v.downcast_into::<PyString>() {
                Ok(s) => Some(Text::Str(s)),
                Err(e) => Some(Text::Json(e.into_inner().str()?.to_str()?.to_owned())),
            },
        };
        let tool_input = match required(intern!(py, "tool_input"))? {
            v if v.is_none() => Map::new(),
            v => match v.downcast::<PyDict>() {
                Ok(d) if reads.arguments => dict_to_map(d, "tool_input")?,
                Ok(_) => Map::new(),
                Err(_) => return Err(RequestError::new_err("request.tool_input must be a dict")),
            },
        };
        let authz_attributes = match get(intern!(py, "authz_attributes"))? {
            None => Map::new(),
            Some(v) if v.is_none() => Map::new(),
            Some(v) => match v.downcast::<PyDict>() {
                Ok(d) if reads.attribution => dict_to_map(d, "authz_attributes")?,
                Ok(_) => Map::new(),
                Err(_) => {
                    let type_name = v.get_type().name()?.to_string();
                    return Err(RequestError::new_err(format!(
                        "authz_attributes must be a Mapping, got {type_name}"
                    )));
                }
            },
        };
        let mut read = Request {
            tool_name,
            tool_input,
            agent_id: None,
            thread_id: None,
            is_subagent: false,
            timestamp: None,
            user_id: None,
            user_role: None,
            oauth_provider: None,
            oauth_id: None,
            run_id: None,
            tool_call_id: None,
            channel_user_id: None,
            is_internal: false,
            authz_attributes,
        };
        if reads.attribution {
            read.agent_id = text(get(intern!(py, "agent_id"))?, "agent_id")?;
            read.thread_id = text(get(intern!(py, "thread_id"))?, "thread_id")?;
            read.is_subagent =
                get(intern!(py, "is_subagent"))?.map(|v| v.is_truthy()).transpose()?.unwrap_or(false);
            read.timestamp = text(get(intern!(py, "timestamp"))?, "timestamp")?;
            read.user_id = text(get(intern!(py, "user_id"))?, "user_id")?;
            read.user_role = text(get(intern!(py, "user_role"))?, "user_role")?;
            read.oauth_provider = text(get(intern!(py, "oauth_provider"))?, "oauth_provider")?;
            read.oauth_id = text(get(intern!(py, "oauth_id"))?, "oauth_id")?;
            read.run_id = text(get(intern!(py, "run_id"))?, "run_id")?;
            read.tool_call_id = text(get(intern!(py, "tool_call_id"))?, "tool_call_id")?;
            read.channel_user_id = text(get(intern!(py, "channel_user_id"))?, "channel_user_id")?;
            read.is_internal = get(intern!(py, "is_internal"))?.is_some_and(|v| v.is(PyBool::new(py, true)));
        }
        Ok(read)
    }

    /// The host's view of the call, borrowing this request's strings.
    pub(crate) fn view(&self) -> PyResult<CallView<'_>> {
        fn borrowed<'a>(value: &'a Option<Text<'_>>) -> PyResult<Option<&'a str>> {
            value.as_ref().map(Text::as_str).transpose()
        }
        fn text<'a>(value: &'a Option<Text<'_>>) -> PyResult<Option<Cow<'a, str>>> {
            Ok(borrowed(value)?.map(Cow::Borrowed))
        }
        Ok(CallView {
            tool_name: borrowed(&self.tool_name)?.unwrap_or_default(),
            tool_input: &self.tool_input,
            tool_input_json: None,
            agent_id: borrowed(&self.agent_id)?,
            tool_call_id: borrowed(&self.tool_call_id)?,
            timestamp: borrowed(&self.timestamp)?.unwrap_or_default(),
            attribution: Held::Owned(Attribution {
                thread_id: text(&self.thread_id)?,
                is_subagent: self.is_subagent,
                user_id: text(&self.user_id)?,
                user_role: text(&self.user_role)?,
                oauth_provider: text(&self.oauth_provider)?,
                oauth_id: text(&self.oauth_id)?,
                run_id: text(&self.run_id)?,
                channel_user_id: text(&self.channel_user_id)?,
                is_internal: self.is_internal,
                authz_attributes: Some(&self.authz_attributes),
            }),
        })
    }
}
