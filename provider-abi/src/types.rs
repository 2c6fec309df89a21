//! The FFI-safe data that crosses the boundary: request, reason, decision.

use std::borrow::Cow;

use abi_stable::std_types::{RCow, RCowStr, ROption, RStr, RString, RVec};
use abi_stable::StableAbi;

/// One tool call, as the host hands it to a provider.
///
/// Every field mirrors the guardrail contract's `GuardrailRequest`. The
/// request borrows the host's data: it is valid for the duration of one
/// `evaluate` call (or until the future returned by `aevaluate` completes),
/// and copying a field out is the provider's business.
///
/// `tool_input` and `authz_attributes` are JSON object texts, exactly as the
/// host holds them; use [`Request::tool_input`] / [`Request::authz_attributes`]
/// to parse them only when the policy needs them.
///
/// Changing this struct is an ABI major change.
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The tool's name; `""` when the call had none.
    pub tool_name: RStr<'a>,
    /// The tool's arguments: a JSON object, as text; `""` when the provider
    /// declares it does not read them ([`crate::Provider::READS_TOOL_INPUT`]).
    pub tool_input_json: RStr<'a>,
    /// The configured passport (OAP passport path or hosted agent id).
    pub agent_id: ROption<RStr<'a>>,
    /// The conversation thread, from the runtime context.
    pub thread_id: ROption<RStr<'a>>,
    /// Whether the call comes from a sub-agent.
    pub is_subagent: bool,
    /// When the request was built: UTC, RFC 3339.
    pub timestamp: RStr<'a>,
    /// The end user, from the runtime context.
    pub user_id: ROption<RStr<'a>>,
    /// The end user's role, from the runtime context.
    pub user_role: ROption<RStr<'a>>,
    /// The OAuth provider that authenticated the user.
    pub oauth_provider: ROption<RStr<'a>>,
    /// The user's id at that OAuth provider.
    pub oauth_id: ROption<RStr<'a>>,
    /// The agent run this call belongs to.
    pub run_id: ROption<RStr<'a>>,
    /// The tool call's id.
    pub tool_call_id: ROption<RStr<'a>>,
    /// The user's id on the channel (chat app) the run came from.
    pub channel_user_id: ROption<RStr<'a>>,
    /// Whether the call is internal (only ever true when the context said
    /// exactly boolean `true`).
    pub is_internal: bool,
    /// Authorization attributes: a JSON object, as text; `""` when the
    /// provider declares it does not read them
    /// ([`crate::Provider::READS_AUTHZ_ATTRIBUTES`]).
    pub authz_attributes_json: RStr<'a>,
}

/// `text` parsed; an empty text is an input the provider declared (by
/// `declaration`) that it does not read, so the host did not pass it.
fn parse_object<T: serde::de::DeserializeOwned>(
    text: &str,
    declaration: &str,
) -> Result<T, serde_json::Error> {
    if text.is_empty() {
        return Err(<serde_json::Error as serde::de::Error>::custom(format!(
            "the host passed no value: the provider declares `{declaration} = false`"
        )));
    }
    serde_json::from_str(text)
}

fn opt<'a>(value: ROption<RStr<'a>>) -> Option<&'a str> {
    value.map(|s| s.as_str()).into_option()
}

impl<'a> Request<'a> {
    /// A request for `tool_name` with arguments `{}` and every other field at
    /// its default; handy in provider unit tests.
    pub const fn for_tool(tool_name: &'a str) -> Self {
        Request {
            tool_name: RStr::from_str(tool_name),
            tool_input_json: RStr::from_str("{}"),
            agent_id: ROption::RNone,
            thread_id: ROption::RNone,
            is_subagent: false,
            timestamp: RStr::from_str(""),
            user_id: ROption::RNone,
            user_role: ROption::RNone,
            oauth_provider: ROption::RNone,
            oauth_id: ROption::RNone,
            run_id: ROption::RNone,
            tool_call_id: ROption::RNone,
            channel_user_id: ROption::RNone,
            is_internal: false,
            authz_attributes_json: RStr::from_str("{}"),
        }
    }

    /// The same request with `tool_input_json` set to `json` (a JSON object
    /// as text); handy in provider unit tests.
    pub const fn with_tool_input_json(mut self, json: &'a str) -> Self {
        self.tool_input_json = RStr::from_str(json);
        self
    }

    /// The tool's name.
    pub fn tool_name(&self) -> &'a str {
        self.tool_name.as_str()
    }

    /// The tool's arguments, parsed into `T` (for example
    /// `serde_json::Map<String, serde_json::Value>` or your own struct). An
    /// error when the host passed none because the provider declares
    /// [`crate::Provider::READS_TOOL_INPUT`] `false`.
    pub fn tool_input<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        parse_object(self.tool_input_json.as_str(), "READS_TOOL_INPUT")
    }

    /// The authorization attributes, parsed into `T`; an error when the host
    /// passed none ([`crate::Provider::READS_AUTHZ_ATTRIBUTES`] `false`).
    pub fn authz_attributes<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        parse_object(self.authz_attributes_json.as_str(), "READS_AUTHZ_ATTRIBUTES")
    }

    /// When the request was built (UTC, RFC 3339).
    pub fn timestamp(&self) -> &'a str {
        self.timestamp.as_str()
    }

    /// The configured passport, if any.
    pub fn agent_id(&self) -> Option<&'a str> {
        opt(self.agent_id)
    }
    /// The thread id, if any.
    pub fn thread_id(&self) -> Option<&'a str> {
        opt(self.thread_id)
    }
    /// The user id, if any.
    pub fn user_id(&self) -> Option<&'a str> {
        opt(self.user_id)
    }
    /// The user role, if any.
    pub fn user_role(&self) -> Option<&'a str> {
        opt(self.user_role)
    }
    /// The OAuth provider, if any.
    pub fn oauth_provider(&self) -> Option<&'a str> {
        opt(self.oauth_provider)
    }
    /// The OAuth id, if any.
    pub fn oauth_id(&self) -> Option<&'a str> {
        opt(self.oauth_id)
    }
    /// The run id, if any.
    pub fn run_id(&self) -> Option<&'a str> {
        opt(self.run_id)
    }
    /// The tool call id, if any.
    pub fn tool_call_id(&self) -> Option<&'a str> {
        opt(self.tool_call_id)
    }
    /// The channel user id, if any.
    pub fn channel_user_id(&self) -> Option<&'a str> {
        opt(self.channel_user_id)
    }
}

/// Why a decision was made: an OAP-style reason.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct Reason {
    /// A namespaced code such as `oap.tool_not_allowed`.
    pub code: RString,
    /// A human-readable explanation; may be empty.
    pub message: RString,
}

impl Reason {
    /// A reason with a code and a message.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Reason { code: RString::from(code.into()), message: RString::from(message.into()) }
    }
}

/// A provider's verdict on one tool call.
///
/// Build one with [`Decision::allow`] or [`Decision::deny`] and the `with_*`
/// methods.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Whether the tool call may run.
    pub allow: bool,
    /// Why; the host's denial message quotes the first one.
    pub reasons: RVec<Reason>,
    /// The policy that decided, if the provider has such a notion.
    pub policy_id: ROption<RString>,
    /// Free-form metadata: a JSON object as text, or `""` for `{}`.
    pub metadata_json: RString,
}

impl Decision {
    /// An allowing decision with no reasons.
    pub fn allow() -> Self {
        Decision {
            allow: true,
            reasons: RVec::new(),
            policy_id: ROption::RNone,
            metadata_json: RString::new(),
        }
    }

    /// A denying decision with no reasons (add one: a denial without reasons
    /// reaches the agent as the host's generic fallback text).
    pub fn deny() -> Self {
        Decision { allow: false, ..Decision::allow() }
    }

    /// Appends a reason.
    pub fn with_reason(mut self, code: impl Into<String>, message: impl Into<String>) -> Self {
        // Through a `Vec` (the `RVec` was made here, so this moves it
        // without a copy): an `RVec` grows through its vtable, which costs
        // several times a `Vec` push.
        let mut reasons = std::mem::take(&mut self.reasons).into_vec();
        reasons.push(Reason::new(code, message));
        self.reasons = reasons.into();
        self
    }

    /// Sets the policy id.
    pub fn with_policy_id(mut self, policy_id: impl Into<String>) -> Self {
        self.policy_id = ROption::RSome(RString::from(policy_id.into()));
        self
    }

    /// Sets the metadata object (an `ask` or `rewrite` outcome already set
    /// is kept).
    pub fn with_metadata(mut self, mut metadata: serde_json::Map<String, serde_json::Value>) -> Self {
        if let Some(outcome) = self.metadata_map().remove(OUTCOME_KEY) {
            metadata.insert(OUTCOME_KEY.to_owned(), outcome);
        }
        self.metadata_json = if metadata.is_empty() {
            RString::new()
        } else {
            RString::from(serde_json::Value::Object(metadata).to_string())
        };
        self
    }

    /// A human must approve this exact call before it runs (a guardhost
    /// extension). `approvers` names who may approve (empty: anyone the
    /// runtime lets approve), `timeout_s` how long the approval may take
    /// (1 to 86,400 seconds); past it, the call is denied.
    ///
    /// The host binds the approval to the call: it computes the call's
    /// digest and deadline, and runs the call only when the runtime resumes
    /// it with an approval of that digest. The decision denies (`allow` is
    /// false): a host that knows nothing of approvals refuses the call.
    /// Add a reason to say why approval is needed.
    ///
    /// ```
    /// use guardhost_abi::Decision;
    /// let decision = Decision::ask(["admin"], 600).with_reason("ops.needs_approval", "bash runs commands");
    /// assert!(!decision.allow);
    /// ```
    pub fn ask<S: Into<String>>(approvers: impl IntoIterator<Item = S>, timeout_s: u32) -> Self {
        let approvers: Vec<String> = approvers.into_iter().map(Into::into).collect();
        Decision::deny()
            .with_outcome(serde_json::json!({"ask": {"approvers": approvers, "timeout_s": timeout_s}}))
    }

    /// Run the call with `tool_input` instead of its arguments (a guardhost
    /// extension): the next provider of a chain sees them, and the tool
    /// runs with them.
    ///
    /// The decision denies (`allow` is false) so that a host that cannot
    /// rewrite refuses the call rather than run the arguments this
    /// provider replaced; a host that can rewrite allows it.
    ///
    /// ```
    /// use guardhost_abi::Decision;
    /// let mut args = serde_json::Map::new();
    /// args.insert("timeout".into(), 30.into());
    /// let decision = Decision::rewrite(args).with_reason("ops.timeout_capped", "at most 30 s");
    /// assert!(!decision.allow);
    /// ```
    pub fn rewrite(tool_input: serde_json::Map<String, serde_json::Value>) -> Self {
        Decision::deny().with_outcome(serde_json::json!({"rewrite": {"tool_input": tool_input}}))
    }

    fn metadata_map(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::from_str(self.metadata_json.as_str()).unwrap_or_default()
    }

    fn with_outcome(mut self, outcome: serde_json::Value) -> Self {
        let mut metadata = self.metadata_map();
        metadata.insert(OUTCOME_KEY.to_owned(), outcome);
        self.metadata_json = RString::from(serde_json::Value::Object(metadata).to_string());
        self
    }
}

/// What [`crate::Provider::decide`] returns: a decision of one reason made
/// without allocating ([`Verdict::allow`], [`Verdict::deny`]), or a whole
/// [`Decision`].
///
/// A brief verdict's code is static text (and its message static text or a
/// string of its own): the host reads them in place, where a [`Decision`]'s
/// reasons are allocated by the provider and copied by the host. A host
/// turns either into the same decision ([`Verdict::into_decision`]), so the
/// choice changes nothing an agent or an operator sees.
///
/// ```
/// use guardhost_abi::{Decision, Verdict};
/// let allowed = Verdict::allow("custom.allowed");
/// assert_eq!(allowed.into_decision(), Decision::allow().with_reason("custom.allowed", ""));
/// let denied = Verdict::deny("custom.blocked", format!("tool '{}' is blocked", "bash"));
/// assert!(!denied.allows());
/// ```
///
/// Added in ABI 1.4 (a library of ABI 1.4 or later exports
/// [`crate::ProviderFactory::decide`]); changing it is an ABI major change.
#[repr(u8)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A decision of one reason.
    Brief(Brief),
    /// A whole decision: several reasons, a policy id, metadata, an outcome
    /// beyond allow or deny.
    Full(Decision),
}

/// A decision of one reason whose code is static text: see [`Verdict`].
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct Brief {
    /// Whether the tool call may run.
    pub allow: bool,
    /// The reason's code, such as `oap.allowed`.
    pub code: RStr<'static>,
    /// The reason's message; may be empty.
    pub message: RCowStr<'static>,
}

impl Verdict {
    /// Allows the call, for the reason `code` (with no message).
    pub const fn allow(code: &'static str) -> Self {
        Verdict::Brief(Brief {
            allow: true,
            code: RStr::from_str(code),
            message: RCow::Borrowed(RStr::from_str("")),
        })
    }

    /// Denies the call, for the reason `code`, with `message` (static text,
    /// or a `String`, which is moved, not copied).
    pub fn deny(code: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        let message = match message.into() {
            Cow::Borrowed(text) => RCow::Borrowed(RStr::from_str(text)),
            Cow::Owned(text) => RCow::Owned(RString::from(text)),
        };
        Verdict::Brief(Brief { allow: false, code: RStr::from_str(code), message })
    }

    /// Whether the call may run.
    pub fn allows(&self) -> bool {
        match self {
            Verdict::Brief(brief) => brief.allow,
            Verdict::Full(decision) => decision.allow,
        }
    }

    /// The same verdict as a [`Decision`].
    pub fn into_decision(self) -> Decision {
        match self {
            Verdict::Brief(Brief { allow, code, message }) => {
                let decision = if allow { Decision::allow() } else { Decision::deny() };
                decision.with_reason(code.as_str(), message.as_str())
            }
            Verdict::Full(decision) => decision,
        }
    }
}

impl From<Decision> for Verdict {
    fn from(decision: Decision) -> Self {
        Verdict::Full(decision)
    }
}

impl From<Verdict> for Decision {
    fn from(verdict: Verdict) -> Self {
        verdict.into_decision()
    }
}

/// The decision-metadata key that holds an outcome beyond allow or deny
/// ([`Decision::ask`], [`Decision::rewrite`]). Metadata keys starting with
/// `guardhost.` are reserved to the host and this crate.
pub const OUTCOME_KEY: &str = "guardhost.outcome";

#[cfg(test)]
mod tests {
    use super::{Brief, Decision, Request, Verdict};
    use abi_stable::std_types::RCow;

    #[test]
    fn a_verdict_is_the_decision_it_stands_for() {
        assert_eq!(
            Verdict::allow("x.allowed").into_decision(),
            Decision::allow().with_reason("x.allowed", "")
        );
        let message = String::from("tool 'bash' is denied");
        let address = message.as_ptr();
        let denied = Verdict::deny("x.denied", message);
        // An owned message is moved in, not copied.
        let Verdict::Brief(Brief { message: RCow::Owned(text), .. }) = &denied else { panic!("{denied:?}") };
        assert_eq!(text.as_ptr(), address);
        assert!(!denied.allows());
        assert_eq!(denied.into_decision(), Decision::deny().with_reason("x.denied", "tool 'bash' is denied"));
        // Static text stays borrowed.
        let Verdict::Brief(brief) = Verdict::deny("x.denied", "no") else { unreachable!() };
        assert!(matches!(brief.message, RCow::Borrowed(_)));
        // A whole decision passes through unchanged.
        let whole = Decision::deny().with_reason("a.b", "c").with_reason("d.e", "").with_policy_id("p");
        assert_eq!(Verdict::from(whole.clone()).into_decision(), whole);
        assert_eq!(Decision::from(Verdict::Full(whole.clone())), whole);
    }

    type Object = serde_json::Map<String, serde_json::Value>;

    #[test]
    fn an_input_not_passed_is_an_error_that_names_the_declaration() {
        let request = Request::for_tool("ls").with_tool_input_json("");
        let error = request.tool_input::<Object>().unwrap_err().to_string();
        assert_eq!(error, "the host passed no value: the provider declares `READS_TOOL_INPUT = false`");
        let request = Request { authz_attributes_json: "".into(), ..Request::for_tool("ls") };
        let error = request.authz_attributes::<Object>().unwrap_err().to_string();
        assert!(error.contains("READS_AUTHZ_ATTRIBUTES = false"), "{error}");
        // `{}` is an empty object, as ever.
        assert!(Request::for_tool("ls").tool_input::<Object>().unwrap().is_empty());
    }
}
