//! JSON values named in messages: by their type, never by their content
//! (a value may be a secret).

use serde_json::Value;

/// The JSON type name of a value, for error messages.
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}
