//! Python values as JSON values (`serde_json::Value`), with errors that
//! name where in the value the problem is (the other way is `to_py`).

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Value};

use crate::errors::{ConfigError, RequestError};

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
pub(crate) fn to_json(value: &Bound<'_, PyAny>, at: &str) -> PyResult<Value> {
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

pub(crate) fn dict_to_map(dict: &Bound<'_, PyDict>, at: &str) -> PyResult<Map<String, Value>> {
    json_map(dict).map_err(|e| e.into_err(at))
}

/// A config mapping from Python (`None` is empty).
pub(crate) fn config_map(config: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Map<String, Value>> {
    match config {
        None => Ok(Map::new()),
        Some(c) if c.is_none() => Ok(Map::new()),
        Some(c) => match c.downcast::<PyDict>() {
            Ok(d) => dict_to_map(d, what).map_err(|e| ConfigError::new_err(e.to_string())),
            Err(_) => Err(ConfigError::new_err(format!("{what} must be a mapping of config keys"))),
        },
    }
}
