//! More than allow or deny (a guardhost extension): a provider may answer
//! `ask` (a human must approve this exact call) or `rewrite` (the
//! arguments to run instead).
//!
//! A provider says so in its decision's metadata under [`OUTCOME_KEY`]
//! (`guardhost_abi::Decision::ask` / `Decision::rewrite` write it), with
//! `allow: false`, so that a host that knows nothing of these outcomes
//! refuses the call. A provider that does not know them never writes the
//! key and is unaffected.
//!
//! An `ask` is bound to the call: its digest is SHA-256 over the deciding
//! entry's name, the tool, its arguments (keys sorted), the thread, the
//! user, the tool call's id and the deadline. The runtime resumes the call
//! with an [`Approval`] in its context (`approval`: one object or a list):
//! the host recomputes the digest from the call it is deciding and the
//! approval's deadline, and runs the call only when they match, the
//! deadline has not passed, and the approver is one the provider named.
//! The digest binds an approval to one call; it is not a signature:
//! whoever can resume the run can approve, as in LangGraph.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::request::{CallView, GuardrailDecision, GuardrailReason, GuardrailRequest};

pub use guardhost_abi::OUTCOME_KEY;

/// The longest a provider may give a human to approve a call: one day.
pub const MAX_ASK_TIMEOUT_S: u64 = 86_400;

/// What a provider's decision asks for beyond allow or deny, as it wrote it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Requested {
    /// Approval, by one of `approvers` (anyone when empty), within `timeout_s`.
    Ask { approvers: Vec<String>, timeout_s: u64 },
    /// These arguments instead.
    Rewrite(Map<String, Value>),
}

/// Takes the requested outcome out of a provider's decision: `Ok(None)`
/// for a plain allow or deny; an error, naming what was wrong, for an
/// outcome this host does not know or cannot read (the caller treats it as
/// a provider error, so `fail_closed` decides).
pub(crate) fn take_requested(decision: &mut GuardrailDecision) -> Result<Option<Requested>, String> {
    if decision.metadata.is_empty() {
        return Ok(None);
    }
    let Some(outcome) = decision.metadata.remove(OUTCOME_KEY) else { return Ok(None) };
    let bad = |what: &str| format!("the decision's `{OUTCOME_KEY}` {what}");
    let Value::Object(outcome) = outcome else { return Err(bad("is not an object")) };
    let mut entries = outcome.into_iter();
    let (Some((kind, body)), None) = (entries.next(), entries.next()) else {
        return Err(bad("must hold exactly one of `ask` or `rewrite`"));
    };
    match kind.as_str() {
        "ask" => {
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct AskBody {
                #[serde(default)]
                approvers: Vec<String>,
                timeout_s: u64,
            }
            let body: AskBody = serde_json::from_value(body)
                .map_err(|e| bad(&format!("`ask` is not {{approvers: [string], timeout_s: int}}: {e}")))?;
            if !(1..=MAX_ASK_TIMEOUT_S).contains(&body.timeout_s) {
                return Err(bad(&format!(
                    "`ask.timeout_s` is {}: it must be 1 to {MAX_ASK_TIMEOUT_S} seconds",
                    body.timeout_s
                )));
            }
            Ok(Some(Requested::Ask { approvers: body.approvers, timeout_s: body.timeout_s }))
        }
        "rewrite" => match body {
            Value::Object(mut body) => match (body.remove("tool_input"), body.is_empty()) {
                (Some(Value::Object(args)), true) => Ok(Some(Requested::Rewrite(args))),
                _ => Err(bad("`rewrite` is not {tool_input: object}")),
            },
            _ => Err(bad("`rewrite` is not {tool_input: object}")),
        },
        other => {
            Err(bad(&format!("names the outcome `{other}`, which this host does not know (ask, rewrite)")))
        }
    }
}

/// A call held for approval: what the runtime shows the approver, and
/// gives back (with `approved` and `approved_by`) as the [`Approval`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ask {
    /// The chain entry (guard) that asked.
    pub entry: String,
    /// `sha256:` and the hex digest of the call and the deadline.
    pub digest: String,
    /// When the approval must be given by: Unix seconds.
    pub deadline: u64,
    /// Who may approve (anyone the runtime lets approve, when empty).
    pub approvers: Vec<String>,
}

impl Ask {
    /// The ask as the `guardhost.outcome` metadata value.
    pub fn to_metadata(&self) -> Value {
        json!({"ask": self})
    }

    /// The ask a decision holds (one [`GuardrailMiddleware`] made), if any.
    ///
    /// [`GuardrailMiddleware`]: crate::GuardrailMiddleware
    pub fn of(decision: &GuardrailDecision) -> Option<Ask> {
        if decision.metadata.is_empty() {
            return None;
        }
        let ask = decision.metadata.get(OUTCOME_KEY)?.get("ask")?;
        serde_json::from_value(ask.clone()).ok()
    }
}

/// The arguments a decision says to run the call with instead of its own
/// (a `rewrite` in the chain), if any.
pub fn rewritten_args(decision: &GuardrailDecision) -> Option<&Map<String, Value>> {
    if decision.metadata.is_empty() {
        return None;
    }
    decision.metadata.get(OUTCOME_KEY)?.get("rewrite")?.get("tool_input")?.as_object()
}

/// What one guard's answer was ([`step_outcome`] names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Allow,
    Deny,
    Ask,
    Rewrite,
    Approved,
    WouldDeny,
    WouldAsk,
    WouldRewrite,
    ErrorAllow,
    ErrorDeny,
}

impl Kind {
    /// A decision's kind; most decisions carry no metadata, and are told
    /// apart by `allow` alone.
    pub(crate) fn of(decision: &GuardrailDecision, provider_error: bool) -> Kind {
        let metadata = &decision.metadata;
        match (decision.allow, provider_error) {
            (true, true) => Kind::ErrorAllow,
            (false, true) => Kind::ErrorDeny,
            (true, false) if metadata.is_empty() => Kind::Allow,
            (false, false) if metadata.is_empty() => Kind::Deny,
            (true, false) => {
                if metadata.contains_key("would_deny") {
                    Kind::WouldDeny
                } else if metadata.contains_key("would_ask") {
                    Kind::WouldAsk
                } else if metadata.contains_key("would_rewrite") {
                    Kind::WouldRewrite
                } else if metadata.contains_key("approved_by") {
                    Kind::Approved
                } else if metadata.get(OUTCOME_KEY).is_some_and(|o| o.get("rewrite").is_some()) {
                    Kind::Rewrite
                } else {
                    Kind::Allow
                }
            }
            (false, false) => match metadata.get(OUTCOME_KEY).is_some_and(|o| o.get("ask").is_some()) {
                true => Kind::Ask,
                false => Kind::Deny,
            },
        }
    }

    /// Its name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Allow => "allow",
            Kind::Deny => "deny",
            Kind::Ask => "ask",
            Kind::Rewrite => "rewrite",
            Kind::Approved => "approved",
            Kind::WouldDeny => "would_deny",
            Kind::WouldAsk => "would_ask",
            Kind::WouldRewrite => "would_rewrite",
            Kind::ErrorAllow => "error_allow",
            Kind::ErrorDeny => "error_deny",
        }
    }
}

/// A decided call's outcome: `allow`, `deny`, `ask` (held until a human
/// approves it) or `rewrite` (allowed, to run with other arguments).
pub fn outcome_of(decision: &GuardrailDecision) -> &'static str {
    match Kind::of(decision, false) {
        Kind::Ask => "ask",
        Kind::Rewrite => "rewrite",
        Kind::Deny => "deny",
        _ if decision.allow => "allow",
        _ => "deny",
    }
}

/// What one guard's answer was, as a chain's steps name it: the
/// [`outcome_of`] its decision, `approved` (its ask was approved),
/// `would_deny`, `would_ask` or `would_rewrite` (shadow mode), or
/// `error_allow` / `error_deny` (its provider failed).
pub fn step_outcome(decision: &GuardrailDecision, provider_error: bool) -> &'static str {
    Kind::of(decision, provider_error).as_str()
}

/// A human's answer to an [`Ask`], as the runtime puts it in the call's
/// context under `approval` (one object, or a list for several entries).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    /// `true` to run the call, `false` to refuse it.
    pub approved: bool,
    /// The entry that asked ([`Ask::entry`]).
    pub entry: String,
    /// The digest of the call approved ([`Ask::digest`]).
    pub digest: String,
    /// The deadline the ask gave ([`Ask::deadline`]).
    pub deadline: u64,
    /// Who approved; must be one of the ask's approvers when it names any.
    #[serde(default)]
    pub approved_by: Option<String>,
}

/// What one call is, for its digest.
pub(crate) struct CallFacts<'a> {
    pub tool_name: &'a str,
    pub args: &'a Map<String, Value>,
    pub thread_id: Option<&'a str>,
    pub user_id: Option<&'a str>,
    pub tool_call_id: Option<&'a str>,
}

impl<'a> CallFacts<'a> {
    /// The call a borrowed view shows.
    pub(crate) fn of_view(view: &'a CallView<'_>) -> Self {
        CallFacts {
            tool_name: view.tool_name,
            args: view.tool_input,
            thread_id: view.attribution.thread_id.as_deref(),
            user_id: view.attribution.user_id.as_deref(),
            tool_call_id: view.tool_call_id,
        }
    }

    /// The call an owned request holds.
    pub(crate) fn of_request(request: &'a GuardrailRequest) -> Self {
        CallFacts {
            tool_name: &request.tool_name,
            args: &request.tool_input,
            thread_id: request.thread_id.as_deref(),
            user_id: request.user_id.as_deref(),
            tool_call_id: request.tool_call_id.as_deref(),
        }
    }
}

/// The digest an approval of `facts`, asked by `entry`, due by `deadline`,
/// must carry.
pub(crate) fn digest(entry: &str, facts: &CallFacts<'_>, deadline: u64) -> String {
    Digester::new(entry, facts).with_deadline(deadline)
}

/// The digest of one call, all but its deadline: the canonical text of the
/// entry, the tool, the arguments, the thread, the user and the call's id,
/// hashed once, so each approval of the call (each with its own deadline)
/// costs a copy of the hash state, whatever the arguments' size.
pub(crate) struct Digester {
    state: Sha256,
    /// Whether the arguments hold an integer that JSON readers can read
    /// apart (see [`Digester::exact`]).
    inexact: bool,
}

impl Digester {
    pub(crate) fn new(entry: &str, facts: &CallFacts<'_>) -> Digester {
        // A JSON array, each part written canonically; the deadline last.
        let mut text = String::from("[\"guardhost.approval.v1\"");
        let mut inexact = false;
        for part in [json!(entry), json!(facts.tool_name)] {
            text.push(',');
            canonical(&part, &mut text, &mut inexact);
        }
        text.push(',');
        canonical_map(facts.args, &mut text, &mut inexact);
        for part in [json!(facts.thread_id), json!(facts.user_id), json!(facts.tool_call_id)] {
            text.push(',');
            canonical(&part, &mut text, &mut inexact);
        }
        Digester { state: Sha256::new_with_prefix(text.as_bytes()), inexact }
    }

    /// Whether the digest binds the arguments exactly. A number this host
    /// holds as a float with an integer value of 2^53 or more may have been
    /// written as an integer its readers keep exactly (Python's `json`, a
    /// runtime that runs the call): `18446744073709551616` and
    /// `18446744073709551617` are one float here, two calls there. An
    /// approval of such a call would approve its neighbours, so none is
    /// given.
    pub(crate) fn exact(&self) -> bool {
        !self.inexact
    }

    /// The digest with `deadline`.
    pub(crate) fn with_deadline(&self, deadline: u64) -> String {
        let mut state = self.state.clone();
        state.update(format!(",{deadline}]").as_bytes());
        let mut hex = String::with_capacity(7 + 64);
        hex.push_str("sha256:");
        for byte in state.finalize() {
            use std::fmt::Write;
            let _ = write!(hex, "{byte:02x}");
        }
        hex
    }
}

/// JSON text with every object's keys sorted, whatever order the map keeps;
/// `inexact` set when a number is an integral float of 2^53 or more.
fn canonical(value: &Value, out: &mut String, inexact: &mut bool) {
    match value {
        Value::Object(map) => canonical_map(map, out, inexact),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out, inexact);
            }
            out.push(']');
        }
        Value::Number(number) => {
            if let Some(float) = number.as_f64().filter(|_| number.is_f64()) {
                *inexact |= float.fract() == 0.0 && float.abs() >= EXACT_INTEGERS;
            }
            out.push_str(&number.to_string());
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// 2^53: every integer below it has one float; at and above it, neighbours
/// share one.
const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0;

fn canonical_map(map: &Map<String, Value>, out: &mut String, inexact: &mut bool) {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    out.push('{');
    for (i, key) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::from(key.as_str()).to_string());
        out.push(':');
        canonical(&map[key], out, inexact);
    }
    out.push('}');
}

/// The digest an approval of `call`, asked by chain entry `entry`, due by
/// `deadline` (Unix seconds), must carry: what a runtime that builds its
/// own approvals compares with [`Ask::digest`]. (The call as that entry
/// saw it: after the rewrites of the entries before it.)
pub fn call_digest(
    entry: &str,
    call: &crate::ToolCallRequest,
    deadline: u64,
) -> Result<String, crate::RequestError> {
    let attribution = crate::Attribution::of(call.context.as_ref())?;
    let facts = CallFacts {
        tool_name: call.tool_call.name.as_deref().unwrap_or_default(),
        args: &call.tool_call.args,
        thread_id: attribution.thread_id.as_deref(),
        user_id: attribution.user_id.as_deref(),
        tool_call_id: call.tool_call.id.as_deref(),
    };
    Ok(digest(entry, &facts, deadline))
}

/// Now, in Unix seconds.
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The most approvals a call's context may carry: enough for every entry of
/// a long chain, few enough that reading them is cheap.
pub const MAX_APPROVALS: usize = 64;

/// The approvals in a call's context: `Ok(vec![])` when it has none; an
/// error naming what was wrong when `approval` is not an approval or a list
/// of them, or holds more than [`MAX_APPROVALS`].
pub(crate) fn approvals(context: Option<&Map<String, Value>>) -> Result<Vec<Approval>, String> {
    let Some(value) = context.and_then(|c| c.get("approval")) else { return Ok(Vec::new()) };
    let items = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items.as_slice(),
        single => std::slice::from_ref(single),
    };
    if items.len() > MAX_APPROVALS {
        return Err(format!(
            "the context's `approval` holds {} approvals, more than the {MAX_APPROVALS} a call may carry: resume the call with the approvals of its own asks",
            items.len()
        ));
    }
    items
        .iter()
        .map(|item| {
            Approval::deserialize(item).map_err(|e| {
                format!(
                    "the context's `approval` is not {{approved: bool, entry: string, digest: string, deadline: int, approved_by: string}} (or a list of them): {e}"
                )
            })
        })
        .collect()
}

/// What `entry`'s ask about `facts` comes to, given the call's approvals.
pub(crate) enum Settled {
    /// No approval for this entry: the call waits for one.
    Held(Ask),
    /// Approved, by this approver.
    Approved(Option<String>),
    /// Refused: the code and the message why.
    Refused(&'static str, String),
}

/// Settles `entry`'s ask about `facts` against `approvals`.
pub(crate) fn settle(
    entry: &str,
    facts: &CallFacts<'_>,
    approvers: Vec<String>,
    timeout_s: u64,
    approvals: &[Approval],
) -> Settled {
    let digester = Digester::new(entry, facts);
    if !digester.exact() {
        return Settled::Refused(
            "guardhost.approval_inexact",
            "an approval cannot be bound to this call exactly: its arguments hold a whole number of 2^53 or more \
             that JSON readers do not all read alike; send such numbers as strings"
                .to_owned(),
        );
    }
    let mine: Vec<&Approval> = approvals.iter().filter(|a| a.entry == entry).collect();
    if mine.is_empty() {
        let deadline = unix_now() + timeout_s;
        let digest = digester.with_deadline(deadline);
        return Settled::Held(Ask { entry: entry.to_owned(), digest, deadline, approvers });
    }
    let Some(approval) = mine.into_iter().find(|a| a.digest == digester.with_deadline(a.deadline)) else {
        return Settled::Refused(
            "guardhost.approval_mismatch",
            format!(
                "the approval given for entry '{entry}' is for another call (its digest does not match this call's tool, arguments, thread, user and id)"
            ),
        );
    };
    if !approval.approved {
        return Settled::Refused("guardhost.approval_refused", "the approver refused the call".to_owned());
    }
    if unix_now() > approval.deadline {
        return Settled::Refused(
            "guardhost.approval_expired",
            format!("the approval came after its deadline ({} Unix seconds)", approval.deadline),
        );
    }
    if !approvers.is_empty() && !approval.approved_by.as_ref().is_some_and(|by| approvers.contains(by)) {
        return Settled::Refused(
            "guardhost.approver_not_allowed",
            format!(
                "the call must be approved by one of {approvers:?}, and `approved_by` names none of them"
            ),
        );
    }
    Settled::Approved(approval.approved_by.clone())
}

/// A decision with one reason (and the provider's reasons after it).
pub(crate) fn with_first_reason(
    allow: bool,
    code: &str,
    message: String,
    decision: GuardrailDecision,
) -> GuardrailDecision {
    let mut reasons = vec![GuardrailReason::new(code.to_owned(), message)];
    reasons.extend(decision.reasons);
    GuardrailDecision { allow, reasons, policy_id: decision.policy_id, metadata: decision.metadata }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(args: &'a Map<String, Value>) -> CallFacts<'a> {
        CallFacts {
            tool_name: "bash",
            args,
            thread_id: Some("t-1"),
            user_id: Some("u-1"),
            tool_call_id: Some("call-1"),
        }
    }

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn the_digest_ignores_key_order_and_binds_everything_else() {
        let a = args(json!({"command": "ls", "cwd": {"b": 1, "a": 2}}));
        let b: Map<String, Value> =
            serde_json::from_str(r#"{"cwd": {"a": 2, "b": 1}, "command": "ls"}"#).unwrap();
        let base = digest("approvals", &facts(&a), 100);
        assert_eq!(base, digest("approvals", &facts(&b), 100));
        assert!(base.starts_with("sha256:") && base.len() == 7 + 64, "{base}");
        let other_args = args(json!({"command": "ls -a", "cwd": {"b": 1, "a": 2}}));
        let changed = [
            digest("other-entry", &facts(&a), 100),
            digest("approvals", &facts(&other_args), 100),
            digest("approvals", &CallFacts { tool_name: "sh", ..facts(&a) }, 100),
            digest("approvals", &CallFacts { thread_id: Some("t-2"), ..facts(&a) }, 100),
            digest("approvals", &CallFacts { user_id: None, ..facts(&a) }, 100),
            digest("approvals", &CallFacts { tool_call_id: Some("call-2"), ..facts(&a) }, 100),
            digest("approvals", &facts(&a), 101),
        ];
        for other in changed {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn the_digest_is_the_sha256_of_the_documented_text() {
        // The format runtimes that build their own approvals reproduce:
        // it must not change with how the host computes it.
        let a = args(json!({"b": [1, 2.5, "x"], "a": {"d": null, "c": true}}));
        let text = r#"["guardhost.approval.v1","approvals","bash",{"a":{"c":true,"d":null},"b":[1,2.5,"x"]},"t-1","u-1","call-1",1700000000]"#;
        let expected: String = Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(digest("approvals", &facts(&a), 1_700_000_000), format!("sha256:{expected}"));
        let digester = Digester::new("approvals", &facts(&a));
        assert_eq!(digester.with_deadline(1_700_000_000), format!("sha256:{expected}"));
        assert_ne!(digester.with_deadline(1_700_000_001), format!("sha256:{expected}"));
    }

    #[test]
    fn a_whole_number_past_two_to_the_53_cannot_be_approved_and_smaller_ones_can() {
        let settled = |text: &str| {
            let args: Map<String, Value> = serde_json::from_str(text).unwrap();
            match settle("approvals", &facts(&args), vec![], 60, &[]) {
                Settled::Held(_) => "held",
                Settled::Refused(code, _) => code,
                Settled::Approved(_) => "approved",
            }
        };
        // 2^64 and 2^64 + 1 are one float here; Python reads two integers.
        assert_eq!(settled(r#"{"n": 18446744073709551616}"#), "guardhost.approval_inexact");
        assert_eq!(settled(r#"{"deep": [{"n": 18446744073709551617}]}"#), "guardhost.approval_inexact");
        assert_eq!(settled(r#"{"n": 1e300}"#), "guardhost.approval_inexact");
        assert_eq!(
            digest(
                "approvals",
                &facts(&args(serde_json::from_str(r#"{"n": 18446744073709551616}"#).unwrap())),
                1
            ),
            digest(
                "approvals",
                &facts(&args(serde_json::from_str(r#"{"n": 18446744073709551617}"#).unwrap())),
                1
            ),
            "why: the two calls would share an approval"
        );
        // Integers this host keeps exactly, and fractions, are bound as read.
        for exact in [
            r#"{"n": 18446744073709551615}"#,
            r#"{"n": -9223372036854775808}"#,
            r#"{"n": 9007199254740991.0}"#,
            r#"{"n": 0.1, "m": -2.5e-300}"#,
            r#"{"s": "18446744073709551616"}"#,
        ] {
            assert_eq!(settled(exact), "held", "{exact}");
        }
    }

    #[test]
    fn a_context_may_carry_up_to_64_approvals() {
        let one = json!({"approved": true, "entry": "e", "digest": "sha256:0", "deadline": 1});
        let context = |n: usize| args(json!({"approval": vec![one.clone(); n]}));
        assert_eq!(approvals(Some(&context(MAX_APPROVALS))).unwrap().len(), MAX_APPROVALS);
        let error = approvals(Some(&context(12_000))).unwrap_err();
        assert!(error.contains("holds 12000 approvals, more than the 64"), "{error}");
        assert_eq!(approvals(Some(&args(json!({"approval": one})))).unwrap().len(), 1);
        assert!(approvals(Some(&args(json!({"approval": null})))).unwrap().is_empty());
    }

    #[test]
    fn an_argument_that_reads_null_cannot_pass_for_another_field() {
        let a = args(json!({"x": null}));
        let empty = Map::new();
        assert_ne!(digest("e", &facts(&a), 1), digest("e", &facts(&empty), 1));
    }

    fn decision(outcome: Value) -> GuardrailDecision {
        let mut metadata = Map::new();
        metadata.insert(OUTCOME_KEY.into(), outcome);
        GuardrailDecision { allow: false, reasons: vec![], policy_id: None, metadata }
    }

    #[test]
    fn requested_outcomes_are_read_and_anything_else_is_an_error() {
        let mut ask = decision(json!({"ask": {"approvers": ["admin"], "timeout_s": 60}}));
        assert_eq!(
            take_requested(&mut ask).unwrap(),
            Some(Requested::Ask { approvers: vec!["admin".into()], timeout_s: 60 })
        );
        assert!(ask.metadata.is_empty(), "the key is taken out");
        let mut rewrite = decision(json!({"rewrite": {"tool_input": {"command": "ls"}}}));
        assert_eq!(
            take_requested(&mut rewrite).unwrap(),
            Some(Requested::Rewrite(args(json!({"command": "ls"}))))
        );
        let mut plain = GuardrailDecision::with_reason(true, "x", "");
        assert_eq!(take_requested(&mut plain).unwrap(), None);
        for (bad, says) in [
            (json!("ask"), "is not an object"),
            (json!({}), "exactly one"),
            (json!({"ask": {"timeout_s": 1}, "rewrite": {"tool_input": {}}}), "exactly one"),
            (json!({"escalate": {}}), "`escalate`, which this host does not know"),
            (json!({"ask": {"timeout_s": 0}}), "must be 1 to 86400"),
            (json!({"ask": {"timeout_s": 86401}}), "must be 1 to 86400"),
            (json!({"ask": {"approvers": "admin", "timeout_s": 5}}), "`ask` is not"),
            (json!({"ask": {"timeout_s": 5, "when": 1}}), "`ask` is not"),
            (json!({"rewrite": {"tool_input": [1]}}), "`rewrite` is not"),
            (json!({"rewrite": {"tool_input": {}, "also": 1}}), "`rewrite` is not"),
        ] {
            let error = take_requested(&mut decision(bad.clone())).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    fn approval(entry: &str, digest: &str, deadline: u64, by: Option<&str>) -> Approval {
        Approval {
            approved: true,
            entry: entry.into(),
            digest: digest.into(),
            deadline,
            approved_by: by.map(Into::into),
        }
    }

    #[test]
    fn an_ask_is_held_then_settled_by_its_approval_only() {
        let a = args(json!({"command": "rm -rf build"}));
        let held = match settle("approvals", &facts(&a), vec!["admin".into()], 60, &[]) {
            Settled::Held(ask) => ask,
            _ => panic!("no approval: held"),
        };
        assert!(held.deadline >= unix_now() + 59 && held.deadline <= unix_now() + 60);
        assert_eq!(held.digest, digest("approvals", &facts(&a), held.deadline));
        let approvers = || vec!["admin".to_owned()];
        let good = approval("approvals", &held.digest, held.deadline, Some("admin"));
        assert!(matches!(
            settle("approvals", &facts(&a), approvers(), 60, std::slice::from_ref(&good)),
            Settled::Approved(Some(by)) if by == "admin"
        ));
        // Another entry's approval does not count: this one is still held.
        let elsewhere = approval("other", &held.digest, held.deadline, Some("admin"));
        assert!(matches!(settle("approvals", &facts(&a), approvers(), 60, &[elsewhere]), Settled::Held(_)));
        let refused = |approvals: &[Approval], args: &Map<String, Value>| match settle(
            "approvals",
            &facts(args),
            approvers(),
            60,
            approvals,
        ) {
            Settled::Refused(code, _) => code,
            _ => panic!("refused"),
        };
        let other_call = args(json!({"command": "rm -rf /"}));
        assert_eq!(refused(std::slice::from_ref(&good), &other_call), "guardhost.approval_mismatch");
        let later = approval("approvals", &held.digest, held.deadline + 3600, Some("admin"));
        assert_eq!(
            refused(&[later], &a),
            "guardhost.approval_mismatch",
            "a moved deadline changes the digest"
        );
        let past = unix_now() - 10;
        let expired = approval("approvals", &digest("approvals", &facts(&a), past), past, Some("admin"));
        assert_eq!(refused(&[expired], &a), "guardhost.approval_expired");
        let stranger = approval("approvals", &held.digest, held.deadline, Some("mallory"));
        assert_eq!(refused(&[stranger], &a), "guardhost.approver_not_allowed");
        let nobody = approval("approvals", &held.digest, held.deadline, None);
        assert_eq!(refused(&[nobody], &a), "guardhost.approver_not_allowed");
        let no = Approval { approved: false, ..good };
        assert_eq!(refused(&[no], &a), "guardhost.approval_refused");
    }

    #[test]
    fn approvals_are_read_from_the_context() {
        let context = |v: Value| args(json!({ "approval": v }));
        let one = json!({"approved": true, "entry": "e", "digest": "sha256:00", "deadline": 5});
        assert_eq!(approvals(None).unwrap(), vec![]);
        assert_eq!(approvals(Some(&context(Value::Null))).unwrap(), vec![]);
        assert_eq!(approvals(Some(&context(one.clone()))).unwrap().len(), 1);
        assert_eq!(approvals(Some(&context(json!([one.clone(), one])))).unwrap().len(), 2);
        let error = approvals(Some(&context(json!({"approved": "yes"})))).unwrap_err();
        assert!(error.contains("the context's `approval` is not"), "{error}");
    }
}
