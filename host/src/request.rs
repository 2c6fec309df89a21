//! The data of the contract on the host side: tool calls and tool messages
//! (what an agent runtime hands the middleware), and the guardrail request,
//! reason and decision (what a provider sees and answers).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::json::json_type;

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
fn attribution(value: &Value) -> Option<Cow<'_, str>> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(Cow::Borrowed(s)),
        other => Some(Cow::Owned(other.to_string())),
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

/// What a runtime context says about a call, borrowed from it: the fields
/// of a [`GuardrailRequest`] that come from the context, read in one pass.
#[derive(Debug, Clone, Default)]
pub struct Attribution<'a> {
    /// `thread_id`.
    pub thread_id: Option<Cow<'a, str>>,
    /// `is_subagent`, truthy → true.
    pub is_subagent: bool,
    /// `user_id`.
    pub user_id: Option<Cow<'a, str>>,
    /// `user_role`.
    pub user_role: Option<Cow<'a, str>>,
    /// `oauth_provider`.
    pub oauth_provider: Option<Cow<'a, str>>,
    /// `oauth_id`.
    pub oauth_id: Option<Cow<'a, str>>,
    /// `run_id`.
    pub run_id: Option<Cow<'a, str>>,
    /// `channel_user_id`.
    pub channel_user_id: Option<Cow<'a, str>>,
    /// `is_internal`: exactly boolean `true`.
    pub is_internal: bool,
    /// `authz_attributes`; `None` when absent or null.
    pub authz_attributes: Option<&'a Map<String, Value>>,
}

impl<'a> Attribution<'a> {
    /// Reads `context` (none: every field at its default). A non-mapping
    /// `authz_attributes` is an error, in DeerFlow's words.
    pub fn of(context: Option<&'a Map<String, Value>>) -> Result<Self, RequestError> {
        let mut attribution = Attribution::default();
        // One pass over the context (not a lookup per field).
        for (key, value) in context.into_iter().flatten() {
            let slot = match key.as_str() {
                "thread_id" => &mut attribution.thread_id,
                "user_id" => &mut attribution.user_id,
                "user_role" => &mut attribution.user_role,
                "oauth_provider" => &mut attribution.oauth_provider,
                "oauth_id" => &mut attribution.oauth_id,
                "run_id" => &mut attribution.run_id,
                "channel_user_id" => &mut attribution.channel_user_id,
                "is_subagent" => {
                    attribution.is_subagent = truthy(value);
                    continue;
                }
                "is_internal" => {
                    attribution.is_internal = *value == Value::Bool(true);
                    continue;
                }
                "authz_attributes" => {
                    match value {
                        Value::Null => {}
                        Value::Object(map) => attribution.authz_attributes = Some(map),
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
            *slot = self::attribution(value);
        }
        Ok(attribution)
    }
}

/// A value borrowed or owned: [`Cow`] for a type that borrows itself
/// ([`Attribution`]), which a view holds without becoming invariant in its
/// lifetime. Reads go through [`Deref`](std::ops::Deref).
#[derive(Debug)]
pub enum Held<'a, T> {
    /// Borrowed from whoever read it (the middleware, once for a call's
    /// guards).
    Borrowed(&'a T),
    /// Owned by the view.
    Owned(T),
}

impl<T: Clone> Held<'_, T> {
    /// The value to change, owned first if it was borrowed.
    pub fn to_mut(&mut self) -> &mut T {
        if let Held::Borrowed(value) = *self {
            *self = Held::Owned(value.clone());
        }
        match self {
            Held::Owned(value) => value,
            Held::Borrowed(_) => unreachable!("owned just above"),
        }
    }
}

impl<T> std::ops::Deref for Held<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        match self {
            Held::Borrowed(value) => value,
            Held::Owned(value) => value,
        }
    }
}

impl<T: Clone> Clone for Held<'_, T> {
    fn clone(&self) -> Self {
        match self {
            Held::Borrowed(value) => Held::Borrowed(value),
            Held::Owned(value) => Held::Owned(value.clone()),
        }
    }
}

impl<T> From<T> for Held<'_, T> {
    fn from(value: T) -> Self {
        Held::Owned(value)
    }
}

/// One tool call as a provider may see it on the wrapping paths, borrowed
/// from the call: the tool, the arguments, the passport, the context's
/// attribution and the time, with no copy of any of them.
/// [`CallView::to_request`] makes the owned [`GuardrailRequest`] with the
/// same fields.
#[derive(Debug, Clone)]
pub struct CallView<'a> {
    /// `tool_call.name`, `""` if absent.
    pub tool_name: &'a str,
    /// `tool_call.args`.
    pub tool_input: &'a Map<String, Value>,
    /// `tool_input` as the JSON text it arrived in, when the caller has it
    /// (a `guardhost run` line, a request to `guardhost serve`): a provider
    /// library that reads the arguments is handed this text instead of
    /// their serialisation. It must be the text `tool_input` was parsed
    /// from.
    pub tool_input_json: Option<&'a str>,
    /// The configured passport.
    pub agent_id: Option<&'a str>,
    /// `tool_call.id`.
    pub tool_call_id: Option<&'a str>,
    /// When the call was decided, UTC, RFC 3339.
    pub timestamp: &'a str,
    /// From the runtime context (borrowed where the caller has read it
    /// already: the middleware reads it once for all of a call's guards).
    pub attribution: Held<'a, Attribution<'a>>,
}

impl<'a> CallView<'a> {
    /// The view of `call` with `args` (the call's own arguments, lent out
    /// by the middleware), the configured `passport` and the `timestamp`.
    pub fn new(
        call: &'a ToolCallRequest,
        args: &'a Map<String, Value>,
        passport: Option<&'a str>,
        timestamp: &'a str,
    ) -> Result<Self, RequestError> {
        Ok(CallView {
            tool_name: call.tool_call.name.as_deref().unwrap_or_default(),
            tool_input: args,
            tool_input_json: None,
            agent_id: passport,
            tool_call_id: call.tool_call.id.as_deref(),
            timestamp,
            attribution: Held::Owned(Attribution::of(call.context.as_ref())?),
        })
    }

    /// The owned request, its arguments copied.
    pub fn to_request(&self) -> GuardrailRequest {
        self.to_request_with(self.tool_input.clone())
    }

    /// The owned request with `tool_input` as its arguments.
    pub fn to_request_with(&self, tool_input: Map<String, Value>) -> GuardrailRequest {
        let owned = |value: &Option<Cow<'_, str>>| value.as_deref().map(str::to_owned);
        let a = &self.attribution;
        GuardrailRequest {
            tool_name: self.tool_name.to_owned(),
            tool_input,
            agent_id: self.agent_id.map(str::to_owned),
            thread_id: owned(&a.thread_id),
            is_subagent: a.is_subagent,
            timestamp: self.timestamp.to_owned(),
            user_id: owned(&a.user_id),
            user_role: owned(&a.user_role),
            oauth_provider: owned(&a.oauth_provider),
            oauth_id: owned(&a.oauth_id),
            run_id: owned(&a.run_id),
            tool_call_id: self.tool_call_id.map(str::to_owned),
            channel_user_id: owned(&a.channel_user_id),
            is_internal: a.is_internal,
            authz_attributes: a.authz_attributes.cloned().unwrap_or_default(),
        }
    }
}

/// A view serialises exactly as the owned request it stands for
/// ([`CallView::to_request`]): the same fields, in the same order.
impl Serialize for CallView<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let a = &self.attribution;
        let empty = Map::new();
        let mut request = serializer.serialize_struct("GuardrailRequest", 15)?;
        request.serialize_field("tool_name", self.tool_name)?;
        request.serialize_field("tool_input", self.tool_input)?;
        request.serialize_field("agent_id", &self.agent_id)?;
        request.serialize_field("thread_id", &a.thread_id)?;
        request.serialize_field("is_subagent", &a.is_subagent)?;
        request.serialize_field("timestamp", self.timestamp)?;
        request.serialize_field("user_id", &a.user_id)?;
        request.serialize_field("user_role", &a.user_role)?;
        request.serialize_field("oauth_provider", &a.oauth_provider)?;
        request.serialize_field("oauth_id", &a.oauth_id)?;
        request.serialize_field("run_id", &a.run_id)?;
        request.serialize_field("tool_call_id", &self.tool_call_id)?;
        request.serialize_field("channel_user_id", &a.channel_user_id)?;
        request.serialize_field("is_internal", &a.is_internal)?;
        request.serialize_field("authz_attributes", a.authz_attributes.unwrap_or(&empty))?;
        request.end()
    }
}

impl GuardrailRequest {
    /// The request's fields, borrowed.
    pub fn view(&self) -> CallView<'_> {
        fn borrowed(value: &Option<String>) -> Option<Cow<'_, str>> {
            value.as_deref().map(Cow::Borrowed)
        }
        CallView {
            tool_name: &self.tool_name,
            tool_input: &self.tool_input,
            tool_input_json: None,
            agent_id: self.agent_id.as_deref(),
            tool_call_id: self.tool_call_id.as_deref(),
            timestamp: &self.timestamp,
            attribution: Held::Owned(Attribution {
                thread_id: borrowed(&self.thread_id),
                is_subagent: self.is_subagent,
                user_id: borrowed(&self.user_id),
                user_role: borrowed(&self.user_role),
                oauth_provider: borrowed(&self.oauth_provider),
                oauth_id: borrowed(&self.oauth_id),
                run_id: borrowed(&self.run_id),
                channel_user_id: borrowed(&self.channel_user_id),
                is_internal: self.is_internal,
                authz_attributes: Some(&self.authz_attributes),
            }),
        }
    }

    /// Builds the request for one tool call, as the contract says: the tool
    /// from the call, `agent_id` from the configured passport, attribution
    /// from the runtime context, `timestamp` = now (UTC).
    pub fn from_tool_call(call: &ToolCallRequest, passport: Option<&str>) -> Result<Self, RequestError> {
        let now = Timestamp::now();
        let view = CallView::new(call, &call.tool_call.args, passport, now.as_str())?;
        Ok(view.to_request())
    }
}

/// A moment as RFC 3339 with microseconds and `+00:00`, exactly as
/// chrono's `to_rfc3339_opts(Micros, false)` writes it, held inline (no
/// allocation); the date and time up to the second are formatted once per
/// second and thread.
#[derive(Clone, Copy)]
pub struct Timestamp {
    text: [u8; Timestamp::CAPACITY],
    len: u8,
}

impl std::fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Timestamp {
    /// Longer than chrono ever writes: `+262143-12-31T23:59:60.999999+00:00`
    /// is 36 bytes.
    const CAPACITY: usize = 48;

    /// Now, UTC.
    pub fn now() -> Self {
        Self::at(chrono::Utc::now())
    }

    /// No time at all: `""` (for a call whose time no one reads).
    pub fn empty() -> Self {
        Timestamp { text: [0; Self::CAPACITY], len: 0 }
    }

    /// `at`, formatted.
    pub fn at(at: chrono::DateTime<chrono::Utc>) -> Self {
        use std::cell::RefCell;
        thread_local! {
            static SECOND: RefCell<(i64, String)> = const { RefCell::new((i64::MIN, String::new())) };
        }
        let mut stamp = Timestamp { text: [0; Self::CAPACITY], len: 0 };
        let seconds = at.timestamp();
        let micros = at.timestamp_subsec_micros();
        if micros > 999_999 {
            // A leap second: rare enough for the general path.
            stamp.push(at.to_rfc3339_opts(chrono::SecondsFormat::Micros, false).as_bytes());
            return stamp;
        }
        SECOND.with(|cache| {
            let mut cache = cache.borrow_mut();
            if cache.0 != seconds {
                *cache = (seconds, at.format("%Y-%m-%dT%H:%M:%S").to_string());
            }
            stamp.push(cache.1.as_bytes());
        });
        let mut fraction = *b".000000+00:00";
        let mut rest = micros;
        for digit in fraction[1..7].iter_mut().rev() {
            *digit = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        stamp.push(&fraction);
        stamp
    }

    fn push(&mut self, bytes: &[u8]) {
        // Never more than CAPACITY: see its comment.
        let start = usize::from(self.len);
        let end = (start + bytes.len()).min(Self::CAPACITY);
        self.text[start..end].copy_from_slice(&bytes[..end - start]);
        self.len = end as u8;
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // Only whole ASCII texts are pushed, never cut in practice; a cut
        // one would still be ASCII.
        std::str::from_utf8(&self.text[..usize::from(self.len)]).unwrap_or_default()
    }
}

/// Why a decision was made.
///
/// Both texts are borrowed when they are static: the host's own codes, and
/// those a provider library returns in a [`guardhost_abi::Verdict`] (a
/// library is never unloaded, so its static text lives as long as the
/// process), and owned otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardrailReason {
    /// A namespaced code, e.g. `oap.tool_not_allowed`.
    pub code: Cow<'static, str>,
    /// A human-readable explanation; may be empty.
    #[serde(default)]
    pub message: Cow<'static, str>,
}

impl GuardrailReason {
    /// A reason.
    pub fn new(code: impl Into<Cow<'static, str>>, message: impl Into<Cow<'static, str>>) -> Self {
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
            reasons: vec![GuardrailReason::new(code.to_owned(), message.to_owned())],
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
            assert_eq!(Timestamp::at(t).as_str(), t.to_rfc3339_opts(chrono::SecondsFormat::Micros, false));
        }
        let leap = chrono::Utc.timestamp_opt(1_483_228_799, 1_500_000_000).unwrap();
        assert_eq!(Timestamp::at(leap).as_str(), leap.to_rfc3339_opts(chrono::SecondsFormat::Micros, false));
    }

    #[test]
    fn timestamp_is_utc_rfc3339() {
        let r = GuardrailRequest::from_tool_call(&ToolCallRequest::default(), None).unwrap();
        assert!(r.timestamp.ends_with("+00:00"), "{}", r.timestamp);
        chrono::DateTime::parse_from_rfc3339(&r.timestamp).unwrap();
    }
}
