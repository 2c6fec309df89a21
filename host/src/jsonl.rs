//! The JSON-lines input of `guardhost run`: one tool call per line, and the
//! error tool message that answers a line that is not one.
//!
//! ```
//! let call = guardhost::jsonl::parse_line(1, br#"{"name": "bash", "args": {"command": "ls"}, "id": "c1"}"#).unwrap();
//! assert_eq!(call.tool_call.name.as_deref(), Some("bash"));
//! let error = guardhost::jsonl::parse_line(2, b"{").unwrap_err();
//! assert!(error.content.starts_with("guardhost: line 2: invalid JSON"));
//! ```

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::request::{ToolCall, ToolCallRequest, ToolMessage, ToolStatus};

/// One input line. Keys other than these are ignored (runtimes add their own,
/// such as `"type": "tool_call"`).
#[derive(Debug, Deserialize)]
struct Line {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    args: Option<Map<String, Value>>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    context: Option<Map<String, Value>>,
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
    let text = std::str::from_utf8(bytes)
        .map_err(|e| line_error(number, &format!("not valid UTF-8 ({e}); {EXPECTED}"), None, None))?;
    if text.trim().is_empty() {
        return Err(line_error(number, &format!("empty line; {EXPECTED}"), None, None));
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|e| line_error(number, &format!("invalid JSON ({e}); {EXPECTED}"), None, None))?;
    if !value.is_object() {
        return Err(line_error(number, &format!("not a JSON object; {EXPECTED}"), None, None));
    }
    let line = Line::deserialize(&value).map_err(|e| {
        let field = |key: &str| value.get(key).and_then(Value::as_str);
        line_error(number, &format!("invalid tool call: {e}; {EXPECTED}"), field("id"), field("name"))
    })?;
    Ok(ToolCallRequest {
        tool_call: ToolCall { name: line.name, args: line.args.unwrap_or_default(), id: line.id },
        context: line.context,
    })
}
