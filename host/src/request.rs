//! The data of the contract on the host side: tool calls and tool messages
//! (what an agent runtime hands the middleware), and the guardrail request,
//! reason and decision (what a provider sees and answers).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::config::json_type;

/// One tool call as the model produced it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The tool's name (absent in malformed calls).
    #[serde(default)]
    pub name: Option<String>,
    /// The arguments; `{}` when absent.
    #[serde(default)]
    pub args: Map<String, Value>,
    /// The call's id; `None` when it was absent or `null`.
    #[serde(default)]
    pub id: Option<String>,
    /// Whether the id was written as `null` rather than left out. The
    /// request's `tool_call_id` is `None` either way, but a denial message
    /// then names the call `None`, as DeerFlow's `str(None)` does, where a
    /// call without an id is named `missing_id`.
    #[serde(skip)]
    pub null_id: bool,
}

/// A tool call with the runtime context of the run it belongs to (the twin
/// of LangGraph's `ToolCallRequest`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    /// The call.
    pub tool_call: ToolCall,
    /// The runtime context (`thread_id`, `user_id`, ... ), if the runtime has one.
    #[serde(default)]
    pub context: Option<Map<String, Value>>,
}

impl ToolCallRequest {
    /// A call of `name` with `args` and no id or context.
    pub fn new(name: impl Into<String>, args: Map<String, Value>) -> Self {
        ToolCallRequest {
            tool_call: ToolCall { name: Some(name.into()), args, ..ToolCall::default() },
            context: None,
        }
    }

    /// Sets the call id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.tool_call.id = Some(id.into());
        self.tool_call.null_id = false;
        self
    }

    /// Sets the runtime context.
    pub fn with_context(mut self, context: Map<String, Value>) -> Self {
        self.context = Some(context);
        self
    }
}

/// Whether a tool message reports success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    /// The tool ran.
    Success,
    /// The tool did not run, or failed; the agent reads `content` and adapts.
    Error,
}

/// The result of a tool call, as the agent reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "tool")]
pub struct ToolMessage {
    /// What the agent reads.
    pub content: String,
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub name: Option<String>,
    /// Success or error.
    pub status: ToolStatus,
}

/// What a provider is asked about one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardrailRequest {
    /// `tool_call.name`, `""` if absent.
    pub tool_name: String,
    /// `tool_call.args`, `{}` if absent.
    pub tool_input: Map<String, Value>,
    /// The configured passport.
    pub agent_id: Option<String>,
    /// From the context.
    pub thread_id: Option<String>,
    /// From the context; truthy → true.
    pub is_subagent: bool,
    /// Now, UTC, RFC 3339.
    pub timestamp: String,
    /// From the context.
    pub user_id: Option<String>,
    /// From the context.
    pub user_role: Option<String>,
    /// From the context.
    pub oauth_provider: Option<String>,
    /// From the context.
    pub oauth_id: Option<String>,
    /// From the context.
    pub run_id: Option<String>,
    /// `tool_call.id`.
    pub tool_call_id: Option<String>,
    /// From the context.
    pub channel_user_id: Option<String>,
    /// From the context; true only for exactly boolean `true`.
    pub is_internal: bool,
    /// From the context; a copy; `{}` when absent or null.
    pub authz_attributes: Map<String, Value>,
}

/// A runtime context the request cannot be built from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// `authz_attributes` is neither null nor a mapping. The message starts
    /// with DeerFlow's own wording.
    #[error("authz_attributes must be a Mapping, got {python_type}: the runtime context's `authz_attributes` must be a JSON object or null, found {found}")]
    AuthzAttributesNotMapping {
        /// The JSON type found.
        found: &'static str,
        /// What Python calls that type (`int`, `str`, `list` ...).
        python_type: &'static str,
    },
}

/// The Python type name of a JSON value, as DeerFlow's messages name it.
fn python_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// An attribution value as it crosses the ABI, where these fields are
/// strings: a string as it is, `null` as absent, and any other value as
/// its compact JSON text (`42`, `true`, `{"team":"a"}`). DeerFlow passes
/// such values through to its providers unchanged; this keeps them rather
/// than refusing the call.
fn attribution(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// Python's `bool(value)`.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

impl GuardrailRequest {
    /// Builds the request for one tool call, as the contract says: the tool
    /// from the call, `agent_id` from the configured passport, attribution
    /// from the runtime context, `timestamp` = now (UTC).
    pub fn from_tool_call(call: &ToolCallRequest, passport: Option<&str>) -> Result<Self, RequestError> {
        Self::with_args(call, call.tool_call.args.clone(), passport)
    }

    /// [`GuardrailRequest::from_tool_call`] with the arguments given rather
    /// than copied (the middleware moves them in and back out, so a call's
    /// arguments are never cloned).
    pub(crate) fn with_args(
        call: &ToolCallRequest,
        tool_input: Map<String, Value>,
        passport: Option<&str>,
    ) -> Result<Self, RequestError> {
        let mut request = GuardrailRequest {
            tool_name: call.tool_call.name.clone().unwrap_or_default(),
            tool_input,
            agent_id: passport.map(str::to_owned),
            thread_id: None,
            is_subagent: false,
            timestamp: timestamp(chrono::Utc::now()),
            user_id: None,
            user_role: None,
            oauth_provider: None,
            oauth_id: None,
            run_id: None,
            tool_call_id: call.tool_call.id.clone(),
            channel_user_id: None,
            is_internal: false,
            authz_attributes: Map::new(),
        };
        // One pass over the context (not a lookup per field).
        for (key, value) in call.context.iter().flatten() {
            let slot = match key.as_str() {
                "thread_id" => &mut request.thread_id,
                "user_id" => &mut request.user_id,
                "user_role" => &mut request.user_role,
                "oauth_provider" => &mut request.oauth_provider,
                "oauth_id" => &mut request.oauth_id,
                "run_id" => &mut request.run_id,
                "channel_user_id" => &mut request.channel_user_id,
                "is_subagent" => {
                    request.is_subagent = truthy(value);
                    continue;
                }
                "is_internal" => {
                    request.is_internal = *value == Value::Bool(true);
                    continue;
                }
                "authz_attributes" => {
                    match value {
                        Value::Null => {}
                        Value::Object(map) => request.authz_attributes = map.clone(),
                        other => {
                            return Err(RequestError::AuthzAttributesNotMapping {
                                found: json_type(other),
                                python_type: python_type(other),
                            })
                        }
                    }
                    continue;
                }
                _ => continue,
            };
            *slot = attribution(value);
        }
        Ok(request)
    }
}

/// `now` as RFC 3339 with microseconds and `+00:00`, exactly as chrono's
/// `to_rfc3339_opts(Micros, false)` writes it; the date and time up to the
/// second are formatted once per second and thread.
fn timestamp(now: chrono::DateTime<chrono::Utc>) -> String {
    use std::cell::RefCell;
    use std::fmt::Write as _;
    thread_local! {
        static SECOND: RefCell<(i64, String)> = const { RefCell::new((i64::MIN, String::new())) };
    }
    let seconds = now.timestamp();
    let micros = now.timestamp_subsec_micros();
    if micros > 999_999 {
        // A leap second: rare enough for the general path.
        return now.to_rfc3339_opts(chrono::SecondsFormat::Micros, false);
    }
    SECOND.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.0 != seconds {
            *cache = (seconds, now.format("%Y-%m-%dT%H:%M:%S").to_string());
        }
        let mut out = String::with_capacity(cache.1.len() + 13);
        out.push_str(&cache.1);
        let _ = write!(out, ".{micros:06}+00:00");
        out
    })
}

/// Why a decision was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardrailReason {
    /// A namespaced code, e.g. `oap.tool_not_allowed`.
    pub code: String,
    /// A human-readable explanation; may be empty.
    #[serde(default)]
    pub message: String,
}

impl GuardrailReason {
    /// A reason.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        GuardrailReason { code: code.into(), message: message.into() }
    }
}

/// A provider's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardrailDecision {
    /// Whether the call may run.
    pub allow: bool,
    /// Why.
    #[serde(default)]
    pub reasons: Vec<GuardrailReason>,
    /// The deciding policy, if any.
    #[serde(default)]
    pub policy_id: Option<String>,
    /// Free-form metadata.
    #[serde(default)]
    pub metadata: Map<String, Value>,
}

impl GuardrailDecision {
    /// A decision with one reason.
    pub fn with_reason(allow: bool, code: &str, message: &str) -> Self {
        GuardrailDecision {
            allow,
            reasons: vec![GuardrailReason::new(code, message)],
            policy_id: None,
            metadata: Map::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn truthiness_follows_python() {
        for v in [json!(true), json!(1), json!(-0.5), json!("x"), json!([0]), json!({"a": 1})] {
            assert!(truthy(&v), "{v}");
        }
        for v in [json!(null), json!(false), json!(0), json!(0.0), json!(""), json!([]), json!({})] {
            assert!(!truthy(&v), "{v}");
        }
    }

    #[test]
    fn tool_message_serialises_with_type_tool() {
        let m = ToolMessage {
            content: "c".into(),
            tool_call_id: "id".into(),
            name: Some("bash".into()),
            status: ToolStatus::Error,
        };
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            json!({"type": "tool", "content": "c", "tool_call_id": "id", "name": "bash", "status": "error"})
        );
    }

    #[test]
    fn non_string_attribution_values_cross_as_json_text() {
        let context = json!({
            "user_id": 42, "thread_id": "t-1", "run_id": true, "user_role": null,
            "channel_user_id": {"team": "a"}, "oauth_id": 1.5, "oauth_provider": ["x"],
        });
        let call = ToolCallRequest::new("t", Map::new()).with_context(context.as_object().unwrap().clone());
        let r = GuardrailRequest::from_tool_call(&call, None).unwrap();
        assert_eq!(r.user_id.as_deref(), Some("42"));
        assert_eq!(r.thread_id.as_deref(), Some("t-1"));
        assert_eq!(r.run_id.as_deref(), Some("true"));
        assert_eq!(r.user_role, None);
        assert_eq!(r.channel_user_id.as_deref(), Some(r#"{"team":"a"}"#));
        assert_eq!(r.oauth_id.as_deref(), Some("1.5"));
        assert_eq!(r.oauth_provider.as_deref(), Some(r#"["x"]"#));
    }

    #[test]
    fn a_non_mapping_authz_attributes_is_refused_in_deerflows_words() {
        for (value, python) in
            [(json!(3), "int"), (json!(2.5), "float"), (json!("a"), "str"), (json!([]), "list")]
        {
            let context = json!({"authz_attributes": value});
            let call =
                ToolCallRequest::new("t", Map::new()).with_context(context.as_object().unwrap().clone());
            let error = GuardrailRequest::from_tool_call(&call, None).unwrap_err().to_string();
            assert!(
                error.starts_with(&format!("authz_attributes must be a Mapping, got {python}")),
                "{error}"
            );
        }
    }

    #[test]
    fn the_fast_timestamp_is_chronos() {
        use chrono::TimeZone;
        for (secs, nanos) in [
            (0, 0),
            (1_764_480_000, 123_456_789),
            (1_764_480_000, 999_999_999),
            (4_102_444_799, 1_000),
            (-62_000_000_000, 5_000),
            (300_000_000_000, 42_000),
        ] {
            let t = chrono::Utc.timestamp_opt(secs, nanos).unwrap();
            assert_eq!(timestamp(t), t.to_rfc3339_opts(chrono::SecondsFormat::Micros, false));
        }
        let leap = chrono::Utc.timestamp_opt(1_483_228_799, 1_500_000_000).unwrap();
        assert_eq!(timestamp(leap), leap.to_rfc3339_opts(chrono::SecondsFormat::Micros, false));
    }

    #[test]
    fn timestamp_is_utc_rfc3339() {
        let r = GuardrailRequest::from_tool_call(&ToolCallRequest::default(), None).unwrap();
        assert!(r.timestamp.ends_with("+00:00"), "{}", r.timestamp);
        chrono::DateTime::parse_from_rfc3339(&r.timestamp).unwrap();
    }
}
