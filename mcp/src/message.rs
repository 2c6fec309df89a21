//! JSON-RPC 2.0 messages as MCP carries them, read without losing a byte.
//!
//! A [`Message`] keeps each top-level member's value as the raw JSON text
//! the peer wrote ([`RawValue`]): a message the proxy only relays goes out
//! with every field, `_meta`, number and unknown member as it came in; only
//! what the proxy changes (an id it remaps, a rewritten argument list, a
//! filtered tool list) is written anew.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// JSON-RPC's code for a line that is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for JSON that is not a request, notification or response.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's code for parameters a method cannot take (MCP: an unknown tool).
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC's code for an error inside the proxy.
pub const INTERNAL_ERROR: i64 = -32603;
/// The proxy's code (JSON-RPC's implementation-defined range) for a request
/// the MCP server can no longer answer: it exited.
pub const SERVER_GONE: i64 = -32000;

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A request: `method` and `id`.
    Request,
    /// A notification: `method`, no `id`.
    Notification,
    /// A response: `id` and `result` or `error`.
    Response,
}

/// Why a line is not a message the proxy can relay; each is answered with
/// [`Problem::code`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// Not JSON.
    #[error("the message is not JSON: {0}")]
    NotJson(String),
    /// A JSON array: a batch, which MCP removed in 2025-06-18.
    #[error("JSON-RPC batches (arrays) are not supported: MCP removed them in protocol version 2025-06-18; send each message on a line of its own")]
    Batch,
    /// JSON, but not an object.
    #[error("a JSON-RPC message is a JSON object, and this is {0}")]
    NotObject(&'static str),
    /// No `"jsonrpc": "2.0"`.
    #[error("the message has no \"jsonrpc\": \"2.0\" member")]
    NotJsonRpc,
    /// Neither a request, a notification nor a response.
    #[error("the message has neither `method` nor `id` with `result` or `error`")]
    NoKind,
    /// `method` is not a string.
    #[error("`method` is not a string")]
    MethodNotString,
}

impl Problem {
    /// The JSON-RPC error code a message with this problem is answered with.
    pub fn code(&self) -> i64 {
        match self {
            Problem::NotJson(_) => PARSE_ERROR,
            _ => INVALID_REQUEST,
        }
    }
}

/// One JSON-RPC message: its top-level members in their order, each value
/// the raw text the peer wrote.
#[derive(Debug)]
pub struct Message {
    members: Vec<(String, Box<RawValue>)>,
}

impl Message {
    /// Reads one message (one line of the stdio transport).
    pub fn parse(line: &[u8]) -> Result<Message, Problem> {
        let text = std::str::from_utf8(line).map_err(|e| Problem::NotJson(e.to_string()))?;
        let trimmed = text.trim_start();
        match trimmed.as_bytes().first() {
            Some(b'{') => {}
            Some(b'[') => {
                // Valid JSON or not, an array is refused as a batch; one
                // that is not JSON is a parse error first.
                serde_json::from_str::<de::IgnoredAny>(text).map_err(|e| Problem::NotJson(e.to_string()))?;
                return Err(Problem::Batch);
            }
            _ => {
                let value: Value = serde_json::from_str(text).map_err(|e| Problem::NotJson(e.to_string()))?;
                return Err(Problem::NotObject(json_kind(&value)));
            }
        }
        let Members(members) = serde_json::from_str(text).map_err(|e| Problem::NotJson(e.to_string()))?;
        let message = Message { members };
        match message.get("jsonrpc").map(RawValue::get) {
            Some("\"2.0\"") => {}
            _ => return Err(Problem::NotJsonRpc),
        }
        message.kind()?;
        Ok(message)
    }

    /// A new message of these members, in this order.
    pub fn from_members(members: Vec<(String, Box<RawValue>)>) -> Message {
        Message { members }
    }

    /// A request the proxy sends: `id`, `method`, `params`.
    pub fn request(id: u64, method: &str, params: &Value) -> Message {
        Message::from_members(vec![
            ("jsonrpc".into(), raw(&Value::from("2.0"))),
            ("id".into(), raw(&Value::from(id))),
            ("method".into(), raw(&Value::from(method))),
            ("params".into(), raw(params)),
        ])
    }

    /// A notification the proxy sends.
    pub fn notification(method: &str, params: &Value) -> Message {
        Message::from_members(vec![
            ("jsonrpc".into(), raw(&Value::from("2.0"))),
            ("method".into(), raw(&Value::from(method))),
            ("params".into(), raw(params)),
        ])
    }

    /// A response with `result`, to the request `id` (raw, as it came).
    pub fn result(id: Box<RawValue>, result: Box<RawValue>) -> Message {
        Message::from_members(vec![
            ("jsonrpc".into(), raw(&Value::from("2.0"))),
            ("id".into(), id),
            ("result".into(), result),
        ])
    }

    /// An error response to the request `id` (`null` when it is unknown).
    pub fn error(id: Option<Box<RawValue>>, code: i64, message: &str) -> Message {
        let error = serde_json::json!({"code": code, "message": message});
        Message::from_members(vec![
            ("jsonrpc".into(), raw(&Value::from("2.0"))),
            ("id".into(), id.unwrap_or_else(|| raw(&Value::Null))),
            ("error".into(), raw(&error)),
        ])
    }

    /// What the message is.
    pub fn kind(&self) -> Result<Kind, Problem> {
        let id = self.get("id").is_some();
        match self.get("method") {
            Some(method) if method.get().starts_with('"') => {
                Ok(if id { Kind::Request } else { Kind::Notification })
            }
            Some(_) => Err(Problem::MethodNotString),
            None if id && (self.get("result").is_some() || self.get("error").is_some()) => Ok(Kind::Response),
            None => Err(Problem::NoKind),
        }
    }

    /// The member `key`'s raw value.
    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.members.iter().find(|(k, _)| k == key).map(|(_, v)| &**v)
    }

    /// Replaces (or adds, last) the member `key`.
    pub fn set(&mut self, key: &str, value: Box<RawValue>) {
        match self.members.iter_mut().find(|(k, _)| k == key) {
            Some((_, slot)) => *slot = value,
            None => self.members.push((key.to_owned(), value)),
        }
    }

    /// Takes the member `key` out.
    pub fn take(&mut self, key: &str) -> Option<Box<RawValue>> {
        let at = self.members.iter().position(|(k, _)| k == key)?;
        Some(self.members.remove(at).1)
    }

    /// The method, for a request or notification.
    pub fn method(&self) -> Option<String> {
        self.get("method").and_then(|raw| serde_json::from_str(raw.get()).ok())
    }

    /// The id as this side's proxy counter wrote it, if it is one.
    pub fn numeric_id(&self) -> Option<u64> {
        self.get("id").and_then(|raw| raw.get().parse().ok())
    }

    /// The member `key` read as a JSON value (`None` when absent).
    pub fn value(&self, key: &str) -> Option<Value> {
        self.get(key).and_then(|raw| serde_json::from_str(raw.get()).ok())
    }

    /// The message as one line of the stdio transport, without its newline.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line =
            Vec::with_capacity(self.members.iter().map(|(k, v)| k.len() + v.get().len() + 4).sum());
        write_object(&self.members, &mut line);
        line
    }
}

/// The members of the JSON object `raw`, in order, their values raw
/// (`None` when it is not an object).
pub fn object(raw: &RawValue) -> Option<Vec<(String, Box<RawValue>)>> {
    serde_json::from_str::<Members>(raw.get()).ok().map(|Members(members)| members)
}

/// The JSON object of these members, in order.
pub fn to_object(members: &[(String, Box<RawValue>)]) -> Box<RawValue> {
    let mut text = Vec::new();
    write_object(members, &mut text);
    // Keys serialised as strings and values that were JSON make JSON.
    RawValue::from_string(String::from_utf8(text).expect("JSON text is UTF-8"))
        .expect("members make an object")
}

fn write_object(members: &[(String, Box<RawValue>)], out: &mut Vec<u8>) {
    out.push(b'{');
    for (index, (key, value)) in members.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key).expect("a string serialises");
        out.push(b':');
        out.extend_from_slice(value.get().as_bytes());
    }
    out.push(b'}');
}

/// The raw JSON text of `value`.
pub fn raw(value: &Value) -> Box<RawValue> {
    // A `Value` always serialises, and its text is valid JSON.
    RawValue::from_string(value.to_string()).expect("a serialised value is JSON")
}

/// The name of a JSON value's type, for messages.
pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An object's members in order, their values raw.
struct Members(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Each;
        impl<'de> Visitor<'de> for Each {
            type Value = Members;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut members: Vec<(String, Box<RawValue>)> =
                    Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some((key, value)) = map.next_entry::<String, Box<RawValue>>()? {
                    if members.iter().any(|(k, _)| *k == key) {
                        return Err(de::Error::custom(format!("the member `{key}` appears twice")));
                    }
                    members.push((key, value));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(Each)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relayed_message_keeps_every_byte_of_its_values() {
        let line = br#"{"jsonrpc":"2.0","id":7,"result":{"n":18446744073709551617,"x":1.0e0,"_meta":{"k":[1, 2]}},"extra":true}"#;
        let message = Message::parse(line).unwrap();
        assert_eq!(message.kind().unwrap(), Kind::Response);
        assert_eq!(message.to_line(), line.to_vec());
    }

    #[test]
    fn kinds_and_problems() {
        let request = Message::parse(br#"{"jsonrpc":"2.0","id":"a","method":"tools/list"}"#).unwrap();
        assert_eq!(request.kind().unwrap(), Kind::Request);
        assert_eq!(request.method().as_deref(), Some("tools/list"));
        let note = Message::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert_eq!(note.kind().unwrap(), Kind::Notification);
        assert!(matches!(Message::parse(b"{nope"), Err(Problem::NotJson(_))));
        assert_eq!(Message::parse(b"[1]").unwrap_err(), Problem::Batch);
        assert_eq!(Message::parse(b"[1").unwrap_err().code(), PARSE_ERROR);
        assert_eq!(Message::parse(b"3").unwrap_err(), Problem::NotObject("a number"));
        assert_eq!(Message::parse(br#"{"id":1,"method":"x"}"#).unwrap_err(), Problem::NotJsonRpc);
        assert_eq!(Message::parse(br#"{"jsonrpc":"2.0","id":1}"#).unwrap_err(), Problem::NoKind);
        assert_eq!(Message::parse(br#"{"jsonrpc":"2.0","method":3}"#).unwrap_err(), Problem::MethodNotString);
        assert!(Message::parse(br#"{"jsonrpc":"2.0","id":1,"id":2,"result":{}}"#).is_err());
    }

    #[test]
    fn replies_the_proxy_writes() {
        let error = Message::error(None, PARSE_ERROR, "bad \"line\"");
        let value: Value = serde_json::from_slice(&error.to_line()).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "bad \"line\""}})
        );
        let mut request = Message::request(3, "elicitation/create", &serde_json::json!({}));
        assert_eq!(request.numeric_id(), Some(3));
        request.set("id", raw(&Value::from("x")));
        assert_eq!(request.numeric_id(), None);
        assert_eq!(request.take("params").unwrap().get(), "{}");
    }
}
