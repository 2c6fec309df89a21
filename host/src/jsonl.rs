//! The JSON-lines input of `guardhost run`: one tool call per line, and the
//! error tool message that answers a line that is not one.
//!
//! ```
//! let call = guardhost::jsonl::parse_line(1, br#"{"name": "bash", "args": {"command": "ls"}, "id": "c1"}"#).unwrap();
//! assert_eq!(call.tool_call.name.as_deref(), Some("bash"));
//! let error = guardhost::jsonl::parse_line(2, b"{").unwrap_err();
//! assert!(error.content.starts_with("guardhost: line 2: invalid JSON"));
//! ```

use serde_json::{Map, Value};

use crate::request::{ToolCall, ToolCallRequest, ToolMessage, ToolStatus};

/// A tool call's `name` or `id` as DeerFlow reads it with `str(...)`: a
/// string as it is, `null` as `None`, a number or boolean as Python
/// prints it. A list or mapping is refused (`Err` names its type).
fn python_str(value: &Value) -> Result<String, &'static str> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Null => Ok("None".to_owned()),
        Value::Bool(true) => Ok("True".to_owned()),
        Value::Bool(false) => Ok("False".to_owned()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Array(_) => Err("a list"),
        Value::Object(_) => Err("a mapping"),
    }
}

/// The answer to a line that is not a usable tool call; the call's id and
/// name are kept when they could be read.
pub fn line_error(number: u64, problem: &str, id: Option<&str>, name: Option<&str>) -> ToolMessage {
    ToolMessage {
        content: format!("guardhost: line {number}: {problem}"),
        tool_call_id: id.unwrap_or("missing_id").to_owned(),
        name: Some(name.unwrap_or("unknown_tool").to_owned()),
        status: ToolStatus::Error,
    }
}

/// What a well-formed line looks like, for the answers to malformed ones.
const EXPECTED: &str =
    "expected one JSON object per line: {\"name\": \"tool\", \"args\": {...}, \"id\": \"call id\", \"context\": {...}}";

/// Parses one line into a tool call, or says what is wrong with it.
pub fn parse_line(number: u64, bytes: &[u8]) -> Result<ToolCallRequest, ToolMessage> {
    // The common line (an object with string or null `name` and `id`,
    // mappings or null for `args` and `context`, no key twice) straight
    // into the call, without a `Value` for the whole line; any other line,
    // well-formed or not, takes the general path, which has the last word
    // on every answer.
    if let Ok(Fast(call)) = serde_json::from_slice::<Fast>(bytes) {
        return Ok(call);
    }
    parse_general(number, bytes)
}

/// A line read by [`parse_line`]'s fast path: what the general path makes
/// of it, whenever this reads it at all.
struct Fast(ToolCallRequest);

/// A key of a line's object.
enum Key {
    Name,
    Args,
    Id,
    Context,
    Other,
}

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "name" => Key::Name,
                    "args" => Key::Args,
                    "id" => Key::Id,
                    "context" => Key::Context,
                    _ => Key::Other,
                })
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> serde::Deserialize<'de> for Fast {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        struct FastVisitor;
        impl<'de> serde::de::Visitor<'de> for FastVisitor {
            type Value = Fast;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a tool call")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Fast, A::Error> {
                // `None`: the key was not seen; the general path reads a
                // key seen twice (the last one wins there).
                let (mut name, mut id, mut args, mut context) = (None, None, None, None);
                fn once<T, E: Error>(slot: &mut Option<T>, value: T) -> Result<(), E> {
                    match slot.replace(value) {
                        None => Ok(()),
                        Some(_) => Err(E::custom("a key twice")),
                    }
                }
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        // A string, or null (`str(None)`); a number or a
                        // boolean takes the general path.
                        Key::Name => once(&mut name, map.next_value::<Option<String>>()?)?,
                        Key::Id => once(&mut id, map.next_value::<Option<String>>()?)?,
                        Key::Args => once(&mut args, map.next_value::<Option<Map<String, Value>>>()?)?,
                        // A context that is not a mapping is warned about
                        // by the general path.
                        Key::Context => once(&mut context, map.next_value::<Option<Map<String, Value>>>()?)?,
                        // As a `Value`, which refuses what the general path
                        // refuses (an out-of-range number, ...).
                        Key::Other => drop(map.next_value::<Value>()?),
                    }
                }
                let null_id = matches!(id, Some(None));
                let call = ToolCall {
                    name: name.map(|name: Option<String>| name.unwrap_or_else(|| "None".to_owned())),
                    args: args.flatten().unwrap_or_default(),
                    id: id.flatten(),
                    null_id,
                };
                Ok(Fast(ToolCallRequest { tool_call: call, context: context.flatten() }))
            }
        }
        deserializer.deserialize_map(FastVisitor)
    }
}

/// [`parse_line`] for any line: through a `Value`.
fn parse_general(number: u64, bytes: &[u8]) -> Result<ToolCallRequest, ToolMessage> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| line_error(number, &format!("not valid UTF-8 ({e}); {EXPECTED}"), None, None))?;
    if text.trim().is_empty() {
        return Err(line_error(number, &format!("empty line; {EXPECTED}"), None, None));
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|e| line_error(number, &format!("invalid JSON ({e}); {EXPECTED}"), None, None))?;
    let Value::Object(mut object) = value else {
        return Err(line_error(number, &format!("not a JSON object; {EXPECTED}"), None, None));
    };
    let invalid = |object: &Map<String, Value>, problem: String| {
        let field = |key: &str| object.get(key).and_then(|v| python_str(v).ok());
        let (id, name) = (field("id"), field("name"));
        line_error(
            number,
            &format!("invalid tool call: {problem}; {EXPECTED}"),
            id.as_deref(),
            name.as_deref(),
        )
    };
    let args = match object.remove("args") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(args)) => args,
        Some(other) => {
            let problem = format!("`args` must be a mapping, found {}", crate::config::json_type(&other));
            return Err(invalid(&object, problem));
        }
    };
    let name = match object.get("name").map(python_str).transpose() {
        Ok(name) => name,
        Err(found) => return Err(invalid(&object, format!("`name` must be a string, found {found}"))),
    };
    let id = match object.get("id") {
        None | Some(Value::Null) => None,
        Some(id) => match python_str(id) {
            Ok(id) => Some(id),
            Err(found) => return Err(invalid(&object, format!("`id` must be a string, found {found}"))),
        },
    };
    let null_id = object.get("id") == Some(&Value::Null);
    let context = match object.remove("context") {
        None | Some(Value::Null) => None,
        Some(Value::Object(context)) => Some(context),
        // DeerFlow reads a runtime context that is not a dict as empty.
        Some(other) => {
            tracing::warn!(
                line = number,
                "the context is {}, not a mapping: read as empty, as DeerFlow does",
                crate::config::json_type(&other)
            );
            Some(Map::new())
        }
    };
    Ok(ToolCallRequest { tool_call: ToolCall { name, args, id, null_id }, context })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::middleware::denied_message;
    use crate::request::GuardrailDecision;

    fn denied(line: &str) -> ToolMessage {
        let call = parse_line(1, line.as_bytes()).unwrap();
        denied_message(&call.tool_call, &GuardrailDecision::with_reason(false, "c", "m"))
    }

    #[test]
    fn null_ids_and_names_read_as_deerflow_reads_them() {
        let m = denied(r#"{"name": null, "id": null}"#);
        assert_eq!((m.tool_call_id.as_str(), m.name.as_deref()), ("None", Some("None")));
        let m = denied(r#"{}"#);
        assert_eq!((m.tool_call_id.as_str(), m.name.as_deref()), ("missing_id", Some("unknown_tool")));
        let m = denied(r#"{"name": 7, "id": 42}"#);
        assert_eq!((m.tool_call_id.as_str(), m.name.as_deref()), ("42", Some("7")));
        assert!(m.content.starts_with("Guardrail denied: tool '7' was blocked"), "{}", m.content);
        // The request's tool_call_id stays null, as DeerFlow's does.
        let call = parse_line(1, br#"{"name": "ls", "id": null}"#).unwrap();
        assert_eq!(call.tool_call.id, None);
        assert!(call.tool_call.null_id);
    }

    #[test]
    fn a_list_or_mapping_name_is_refused_by_name() {
        let error = parse_line(3, br#"{"name": ["a"], "id": "c1"}"#).unwrap_err();
        assert!(error.content.contains("`name` must be a string, found a list"), "{}", error.content);
        assert_eq!(error.tool_call_id, "c1");
        let error = parse_line(3, br#"{"name": "ls", "id": {"a": 1}}"#).unwrap_err();
        assert!(error.content.contains("`id` must be a string, found a mapping"), "{}", error.content);
    }

    #[test]
    fn the_fast_path_reads_every_line_as_the_general_path_does() {
        let lines: &[&[u8]] = &[
            br#"{"name": "read_file", "args": {"path": "README.md"}, "id": "c1", "context": {"thread_id": "t"}}"#,
            br#"{"name":"ls","args":{"z":1,"a":[1,{"y":null}]},"id":"k","type":"tool_call"}"#,
            br#"{"n\u0061me":"l\"s\n","args":{"s":"\u00e9 \ud83d\ude00 \/"},"id":"\u0041"}"#,
            "{\"name\":\"ls\",\"args\":{\"s\":\"é 日本\"},\"id\":\"ü\"}".as_bytes(),
            br#"{"name":"ls","args":{"f":1.5,"e":1e5,"n":-0,"big":12345678901234567890,"x":0.1}}"#,
            br#"{"name":"ls","args":{"dup":1,"dup":2},"name":"bash"}"#,
            br#"{"name": null, "id": null}"#,
            br#"{"name": "ls", "id": null, "id": "1"}"#,
            br#"{"name": "ls", "args": null, "context": null}"#,
            br#"{"name": "ls", "args": {"x": 1}, "args": "bad"}"#,
            br#"{"name": "ls", "context": {"a": 1}, "context": 5}"#,
            br#"{"name": "ls", "context": [1]}"#,
            br#"{"name": "ls", "context": {"authz_attributes": 3}}"#,
            br#"{"name": 7, "id": 42}"#,
            br#"{"name": true, "id": 1.5}"#,
            br#"{"name": ["a"], "id": "c1"}"#,
            br#"{"name": "ls", "id": {"a": 1}}"#,
            br#"{"name": "ls", "args": [1]}"#,
            br#"{"name": "ls", "x": 1e400}"#,
            br#"{"name": "ls", "args": {"x": 1e400}}"#,
            br#"{"name": "ls"} trailing"#,
            br#"  {"name": "ls"}  "#,
            br#"{"name": "ls",}"#,
            b"{\"name\": \"ls\xff\"}",
            b"\xef\xbb\xbf{\"name\": \"ls\"}",
            br#"{"name":"ls","args":{"s":"\ud800"}}"#,
            b"{}",
            b"",
            b"  ",
            b"[1]",
            b"null",
            b"{",
        ];
        for line in lines {
            assert_eq!(parse_line(4, line), parse_general(4, line), "{}", String::from_utf8_lossy(line));
        }
        let deep = format!(r#"{{"name":"ls","args":{{"d":{}{}}}}}"#, "[".repeat(200), "]".repeat(200));
        assert_eq!(parse_line(4, deep.as_bytes()), parse_general(4, deep.as_bytes()));
        assert!(parse_line(4, deep.as_bytes()).is_err());
    }

    #[test]
    fn a_context_that_is_not_a_mapping_is_read_as_empty() {
        for context in ["[1]", "\"text\"", "3", "true"] {
            let line = format!(r#"{{"name": "ls", "context": {context}}}"#);
            let call = parse_line(1, line.as_bytes()).unwrap();
            assert_eq!(call.context, Some(Map::new()), "{context}");
        }
        let call = parse_line(1, br#"{"name": "ls", "context": null}"#).unwrap();
        assert_eq!(call.context, None);
    }
}
