//! The host's view of a provider: one trait, whatever runs behind it.
//!
//! [`GuardrailProvider`] is what the middleware calls. [`AbiProvider`]
//! implements it for a provider behind the stable ABI (a library's, or a
//! built-in linked statically); an out-of-process provider, or a provider
//! written directly in Rust by an embedder, implements the same trait.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use abi_stable::std_types::{RCow, RCowStr, ROption, RResult, RStr};
use guardhost_abi::{
    declarations, Brief, Decision, ErrorKind, ProviderBox, ProviderError, Request, Verdict as AbiVerdict,
    VerdictResult,
};
use serde_json::{Map, Value};

use crate::request::{CallView, GuardrailDecision, GuardrailReason, GuardrailRequest};

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A control-flow signal from a provider (the twin of LangGraph's
/// `GraphBubbleUp`): never a decision, always handed to the caller.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("provider interrupt: {message}")]
pub struct Interrupt {
    /// What the provider said.
    pub message: String,
    /// The value it passed along (`null` when none).
    pub payload: Value,
}

/// How a provider failed to decide.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderFailure {
    /// An ordinary error (or a caught panic): `fail_closed` applies.
    #[error("{message}")]
    Error {
        /// What went wrong.
        message: String,
        /// Whether it was a panic caught at the boundary.
        panicked: bool,
    },
    /// A control-flow signal: propagated unchanged.
    #[error(transparent)]
    Interrupt(Interrupt),
}

impl ProviderFailure {
    /// An ordinary error.
    pub fn error(message: impl Into<String>) -> Self {
        ProviderFailure::Error { message: message.into(), panicked: false }
    }
}

/// Polls `future` to completion on this thread, parking between polls. A
/// provider's future must not need the host's runtime (the ABI's rule), so
/// this is all the executor the host needs where it has no runtime (the
/// conformance kit, the evaluation threads of `provider.timeout_ms`), and
/// all an embedder needs to take the async path without one (the Python
/// package does).
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    crate::wait::with_thread_waker(|waker| {
        let mut cx = std::task::Context::from_waker(waker);
        loop {
            if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut cx) {
                return output;
            }
            std::thread::park();
        }
    })
}

/// Asks `provider` on this thread, on the sync path or (driven here) the
/// async one. A panic (of a provider written in Rust against the host's
/// trait; a library's is caught at the ABI boundary) answers the call with
/// a provider error, so the calling worker thread goes on.
pub fn evaluate_here(
    provider: &dyn GuardrailProvider,
    request: &GuardrailRequest,
    asynchronous: bool,
) -> Evaluation {
    evaluate_here_with_args_text(provider, request, None, asynchronous)
}

/// [`evaluate_here`], the request's arguments handed on as `args_text`
/// when it is given (the JSON text they were parsed from: see
/// [`CallView::tool_input_json`]) to a provider that takes the borrowed
/// view.
pub fn evaluate_here_with_args_text(
    provider: &dyn GuardrailProvider,
    request: &GuardrailRequest,
    args_text: Option<&str>,
    asynchronous: bool,
) -> Evaluation {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let view = args_text.map(|text| CallView { tool_input_json: Some(text), ..request.view() });
        match (asynchronous, view.as_ref()) {
            (true, Some(view)) => match provider.aevaluate_view(view) {
                Some(evaluation) => block_on(evaluation),
                None => block_on(provider.aevaluate(request)),
            },
            (false, Some(view)) => match provider.rule_view(view) {
                Some(ruled) => ruled.map(Ruling::into_decision),
                None => provider.evaluate(request),
            },
            (true, None) => block_on(provider.aevaluate(request)),
            (false, None) => provider.evaluate(request),
        }
    }))
    .unwrap_or_else(|_| {
        Err(ProviderFailure::Error {
            message: format!("provider '{}' panicked", provider.name()),
            panicked: true,
        })
    })
}

/// The result of asking a provider.
pub type Evaluation = Result<GuardrailDecision, ProviderFailure>;

/// A provider's answer, in brief where it can be (the host's twin of
/// [`guardhost_abi::Verdict`]): a plain allow is its one reason, which a
/// caller that only acts on the answer (the middleware's wrapping paths,
/// for a guard alone) takes without making a decision of it.
#[derive(Debug, Clone, PartialEq)]
pub enum Ruling {
    /// An allow with this one reason, no policy id and no metadata.
    Allow(GuardrailReason),
    /// Any decision.
    Decision(GuardrailDecision),
}

impl Ruling {
    /// The decision it stands for.
    pub fn into_decision(self) -> GuardrailDecision {
        match self {
            Ruling::Allow(reason) => GuardrailDecision {
                allow: true,
                reasons: vec![reason],
                policy_id: None,
                metadata: Map::new(),
            },
            Ruling::Decision(decision) => decision,
        }
    }
}

/// The result of asking a provider for a [`Ruling`].
pub type Ruled = Result<Ruling, ProviderFailure>;

/// Asks `provider` about `call` through the borrowed view when it takes
/// one ([`GuardrailProvider::rule_view`]), else through the owned request
/// made from it.
pub fn evaluate_call(provider: &dyn GuardrailProvider, call: &CallView<'_>) -> Evaluation {
    rule_call(provider, call).map(Ruling::into_decision)
}

/// [`evaluate_call`], a plain allow kept in brief where the provider gives
/// it so.
pub(crate) fn rule_call(provider: &dyn GuardrailProvider, call: &CallView<'_>) -> Ruled {
    match provider.rule_view(call) {
        Some(ruled) => ruled,
        None => provider.evaluate(&call.to_request()).map(Ruling::Decision),
    }
}

/// [`evaluate_call`] on the async path.
pub async fn aevaluate_call(provider: &dyn GuardrailProvider, call: &CallView<'_>) -> Evaluation {
    match provider.aevaluate_view(call) {
        Some(evaluation) => evaluation.await,
        None => provider.aevaluate(&call.to_request()).await,
    }
}

/// A guardrail provider, as the middleware sees it.
///
/// A provider must say two things, its name and its decision
/// ([`GuardrailProvider::evaluate`]); everything else has a default
/// derived from them: the async path runs `evaluate`, the borrowed-view
/// paths are not taken (the middleware builds the owned request), and the
/// declarations claim nothing (the provider reads everything, may block,
/// and may quote its input).
pub trait GuardrailProvider: Send + Sync {
    /// The provider's name.
    fn name(&self) -> &str;

    /// Decides one tool call.
    fn evaluate(&self, request: &GuardrailRequest) -> Evaluation;

    /// Decides one tool call on the async path. By default `evaluate`,
    /// called when the future is first polled: a provider that waits (on
    /// a socket, a process, a lock) gives its own, so that the caller's
    /// runtime is not held up (or is put under `timeout_ms`, whose
    /// evaluation threads keep it off the caller's).
    fn aevaluate<'a>(&'a self, request: &'a GuardrailRequest) -> BoxFuture<'a, Evaluation> {
        Box::pin(async move { self.evaluate(request) })
    }

    /// Decides one tool call from the borrowed view the middleware's
    /// wrapping paths have, when this provider can without the owned
    /// [`GuardrailRequest`] (the request's fields, borrowed; no copy), as a
    /// [`Ruling`]: a provider that has its plain allows in brief (a
    /// library's, through its `decide`) saves the caller the decision. By
    /// default `None`: the middleware builds the request and calls
    /// [`GuardrailProvider::evaluate`]. Whatever this returns must stand
    /// for what `evaluate` returns for `call.to_request()`
    /// ([`evaluate_call`] asks either way).
    fn rule_view(&self, call: &CallView<'_>) -> Option<Ruled> {
        let _ = call;
        None
    }

    /// The async path's [`GuardrailProvider::rule_view`], answered in full:
    /// `None` (the default) has the middleware call
    /// [`GuardrailProvider::aevaluate`].
    fn aevaluate_view<'a>(&'a self, call: &'a CallView<'a>) -> Option<BoxFuture<'a, Evaluation>> {
        let _ = call;
        None
    }

    /// Whether the provider reads the tool's arguments (by default, yes).
    /// A caller that would have to convert them for the provider alone
    /// (the Python package) may pass empty ones when this is `false`.
    fn reads_tool_input(&self) -> bool {
        true
    }

    /// Whether the provider reads anything of a request beyond the tool's
    /// name and arguments (the attributes and the attribution; by default,
    /// yes). A caller may leave them at their defaults when this is `false`.
    fn reads_attribution(&self) -> bool {
        true
    }

    /// Whether every evaluation decides from memory and returns at once
    /// (by default, no: it may wait). A caller may then call it where it
    /// would not call code that can wait (the Python package keeps the
    /// interpreter's lock), and decide an async call through
    /// [`GuardrailProvider::rule_view`] or [`GuardrailProvider::evaluate`]
    /// (the middleware does: nothing is boxed or awaited).
    fn never_blocks(&self) -> bool {
        false
    }

    /// Whether its reason messages may quote what a call carries beyond the
    /// tool's name and the caller's role (by default, yes). Audit events
    /// record the messages of a provider that says no as written, and a
    /// fixed text per code otherwise (see `guardrails.audit_messages`).
    fn messages_quote_input(&self) -> bool {
        true
    }
}

/// A provider behind the stable ABI.
pub struct AbiProvider {
    object: ProviderBox,
    name: String,
    /// What the provider declares: bits of [`guardhost_abi::declarations`].
    declared: u32,
    /// The library's `decide` (ABI 1.4), called instead of the object's
    /// `evaluate` when present.
    decide: Option<DecideFn>,
}

/// A library's [`guardhost_abi::ProviderFactory::decide`].
pub type DecideFn = extern "C" fn(&ProviderBox, &Request<'_>) -> VerdictResult;

impl std::fmt::Debug for AbiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbiProvider").field("name", &self.name).finish_non_exhaustive()
    }
}

impl AbiProvider {
    /// Wraps a constructed provider.
    pub fn new(object: ProviderBox) -> Self {
        let name = object.name().as_str().to_owned();
        AbiProvider { object, name, declared: 0, decide: None }
    }

    /// The same provider, decided through its library's `decide` (ABI 1.4):
    /// `decide` must be the entry of the factory that constructed it (the
    /// library answers another provider with an error).
    pub fn deciding_through(self, decide: DecideFn) -> Self {
        AbiProvider { decide: Some(decide), ..self }
    }

    /// The same provider, taken at its word: `declarations` (bits of
    /// [`guardhost_abi::declarations`]) name the parts of a request it is
    /// not handed, and whether it never blocks.
    pub fn with_declarations(self, declarations: u32) -> Self {
        AbiProvider { declared: declarations, ..self }
    }

    /// Whether the provider reads any of the inputs of `unread` (bits
    /// `NO_...`).
    fn reads(&self, unread: u32) -> bool {
        self.declared & unread != unread
    }
}

/// The text a provider is handed for an input it declares it never reads.
const NOT_PASSED: &str = "";

/// A map as JSON text; an empty one (the common case) costs no allocation.
fn object_text(map: &Map<String, Value>) -> Cow<'static, str> {
    if map.is_empty() {
        Cow::Borrowed("{}")
    } else {
        // Serialising a map of JSON values cannot fail.
        Cow::Owned(serde_json::to_string(map).unwrap_or_else(|_| "{}".to_owned()))
    }
}

/// Calls `f` with `map` as JSON text, written into a buffer this thread
/// keeps (no allocation once it has grown); an empty map is `{}`.
fn with_object_text<R>(map: &Map<String, Value>, f: impl FnOnce(&str) -> R) -> R {
    use std::cell::RefCell;
    /// A buffer grown past this by one large call is not kept.
    const KEEP: usize = 64 * 1024;
    thread_local! {
        static TEXT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    if map.is_empty() {
        return f("{}");
    }
    TEXT.with(|cell| {
        let Ok(mut text) = cell.try_borrow_mut() else {
            // Only if a provider's evaluation re-enters this thread's
            // middleware: a text of its own.
            return f(&object_text(map));
        };
        text.clear();
        // Serialising a map of JSON values cannot fail, and writes UTF-8.
        let result = match serde_json::to_writer(&mut *text, map) {
            Ok(()) => f(std::str::from_utf8(&text).unwrap_or("{}")),
            Err(_) => f("{}"),
        };
        if text.capacity() > KEEP {
            *text = Vec::new();
        }
        result
    })
}

fn ropt<'a>(value: Option<&'a str>) -> ROption<RStr<'a>> {
    match value {
        Some(s) => ROption::RSome(RStr::from_str(s)),
        None => ROption::RNone,
    }
}

/// The ABI's request for `call`, its two JSON objects given as text.
fn abi_request<'a>(call: &'a CallView<'_>, tool_input: &'a str, authz_attributes: &'a str) -> Request<'a> {
    let a = &call.attribution;
    Request {
        tool_name: RStr::from_str(call.tool_name),
        tool_input_json: RStr::from_str(tool_input),
        agent_id: ropt(call.agent_id),
        thread_id: ropt(a.thread_id.as_deref()),
        is_subagent: a.is_subagent,
        timestamp: RStr::from_str(call.timestamp),
        user_id: ropt(a.user_id.as_deref()),
        user_role: ropt(a.user_role.as_deref()),
        oauth_provider: ropt(a.oauth_provider.as_deref()),
        oauth_id: ropt(a.oauth_id.as_deref()),
        run_id: ropt(a.run_id.as_deref()),
        tool_call_id: ropt(call.tool_call_id),
        channel_user_id: ropt(a.channel_user_id.as_deref()),
        is_internal: a.is_internal,
        authz_attributes_json: RStr::from_str(authz_attributes),
    }
}

/// Calls `f` with `request` as the ABI's borrowed request: what a library
/// provider is handed for it (for a program that calls a provider's own
/// Rust API with the request a guard saw, as `guardhost explain` does).
pub fn with_abi_request<R>(request: &GuardrailRequest, f: impl FnOnce(&Request<'_>) -> R) -> R {
    let tool_input = object_text(&request.tool_input);
    let authz_attributes = object_text(&request.authz_attributes);
    f(&Request {
        tool_name: RStr::from_str(&request.tool_name),
        tool_input_json: RStr::from_str(&tool_input),
        agent_id: ropt(request.agent_id.as_deref()),
        thread_id: ropt(request.thread_id.as_deref()),
        is_subagent: request.is_subagent,
        timestamp: RStr::from_str(&request.timestamp),
        user_id: ropt(request.user_id.as_deref()),
        user_role: ropt(request.user_role.as_deref()),
        oauth_provider: ropt(request.oauth_provider.as_deref()),
        oauth_id: ropt(request.oauth_id.as_deref()),
        run_id: ropt(request.run_id.as_deref()),
        tool_call_id: ropt(request.tool_call_id.as_deref()),
        channel_user_id: ropt(request.channel_user_id.as_deref()),
        is_internal: request.is_internal,
        authz_attributes_json: RStr::from_str(&authz_attributes),
    })
}

/// `call.attribution.authz_attributes` as JSON text (`{}` when absent).
fn authz_text(call: &CallView<'_>) -> Cow<'static, str> {
    call.attribution.authz_attributes.map_or(Cow::Borrowed("{}"), object_text)
}

/// What the host makes of a library's answer: the decision
/// ([`GuardrailDecision`]), or the ruling ([`Ruling`], a plain allow kept
/// in brief). Each reads the answer straight into its own form.
trait Reading: Sized {
    /// Of a library's [`AbiVerdict`] (ABI 1.4 `decide`): a brief one's
    /// texts are read in place (its code is the library's static text, and
    /// a library is never unloaded), a full one's as [`from_abi`] does.
    fn of_verdict(result: VerdictResult) -> Result<Self, ProviderFailure>;
    /// Of a library's decision (`evaluate`, `aevaluate`).
    fn of_decision(result: RResult<Decision, ProviderError>) -> Result<Self, ProviderFailure>;
}

impl Reading for GuardrailDecision {
    fn of_verdict(result: VerdictResult) -> Evaluation {
        match result {
            RResult::ROk(AbiVerdict::Brief(Brief { allow, code, message })) => Ok(GuardrailDecision {
                allow,
                reasons: vec![brief_reason(code, message)],
                policy_id: None,
                metadata: Map::new(),
            }),
            RResult::ROk(AbiVerdict::Full(decision)) => from_abi(RResult::ROk(decision)),
            RResult::RErr(error) => Err(failure(error)),
        }
    }

    fn of_decision(result: RResult<Decision, ProviderError>) -> Evaluation {
        from_abi(result)
    }
}

impl Reading for Ruling {
    fn of_verdict(result: VerdictResult) -> Ruled {
        match result {
            RResult::ROk(AbiVerdict::Brief(Brief { allow: true, code, message })) => {
                Ok(Ruling::Allow(brief_reason(code, message)))
            }
            result => GuardrailDecision::of_verdict(result).map(Ruling::Decision),
        }
    }

    fn of_decision(result: RResult<Decision, ProviderError>) -> Ruled {
        from_abi(result).map(Ruling::Decision)
    }
}

/// A brief verdict's reason, its static code and static message borrowed.
fn brief_reason(code: RStr<'static>, message: RCowStr<'static>) -> GuardrailReason {
    GuardrailReason {
        code: Cow::Borrowed(code.as_str()),
        message: match message {
            RCow::Borrowed(text) => Cow::Borrowed(text.as_str()),
            RCow::Owned(text) => Cow::Owned(text.into_string()),
        },
    }
}

fn from_abi(result: RResult<Decision, ProviderError>) -> Evaluation {
    let decision = match result {
        RResult::ROk(decision) => decision,
        RResult::RErr(error) => return Err(failure(error)),
    };
    let metadata = if decision.metadata_json.is_empty() {
        Map::new()
    } else {
        match serde_json::from_str::<Value>(&decision.metadata_json) {
            Ok(Value::Object(map)) => map,
            Ok(_) | Err(_) => {
                return Err(ProviderFailure::error(format!(
                    "provider returned decision metadata that is not a JSON object: {:.200}",
                    decision.metadata_json.as_str()
                )))
            }
        }
    };
    Ok(GuardrailDecision {
        allow: decision.allow,
        reasons: decision
            .reasons
            .iter()
            .map(|r| GuardrailReason::new(r.code.as_str().to_owned(), r.message.as_str().to_owned()))
            .collect(),
        policy_id: decision.policy_id.as_ref().map(|p| p.as_str().to_owned()).into_option(),
        metadata,
    })
}

pub(crate) fn failure(error: ProviderError) -> ProviderFailure {
    match error.kind {
        ErrorKind::INTERRUPT => ProviderFailure::Interrupt(Interrupt {
            message: error.message.into_string(),
            payload: if error.payload_json.is_empty() {
                Value::Null
            } else {
                // A payload that is not JSON is kept, as text.
                serde_json::from_str(&error.payload_json)
                    .unwrap_or_else(|_| Value::String(error.payload_json.to_string()))
            },
        }),
        kind => ProviderFailure::Error { message: error.to_string(), panicked: kind == ErrorKind::PANIC },
    }
}

impl GuardrailProvider for AbiProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn evaluate(&self, request: &GuardrailRequest) -> Evaluation {
        self.decide::<GuardrailDecision>(&request.view())
    }

    fn aevaluate<'a>(&'a self, request: &'a GuardrailRequest) -> BoxFuture<'a, Evaluation> {
        Box::pin(async move { self.adecide(&request.view()).await })
    }

    fn rule_view(&self, call: &CallView<'_>) -> Option<Ruled> {
        Some(self.decide::<Ruling>(call))
    }

    fn aevaluate_view<'a>(&'a self, call: &'a CallView<'a>) -> Option<BoxFuture<'a, Evaluation>> {
        Some(Box::pin(self.adecide(call)))
    }

    fn reads_tool_input(&self) -> bool {
        self.reads(declarations::NO_TOOL_INPUT)
    }

    fn reads_attribution(&self) -> bool {
        self.reads(declarations::NO_AUTHZ_ATTRIBUTES | declarations::NO_ATTRIBUTION)
    }

    fn never_blocks(&self) -> bool {
        self.declared & declarations::NEVER_BLOCKS != 0
    }

    fn messages_quote_input(&self) -> bool {
        self.declared & declarations::MESSAGES_QUOTE_NO_INPUT == 0
    }
}

impl AbiProvider {
    /// The ABI's request for `call`, with the given texts; the attribution
    /// at its defaults when the provider does not read it.
    fn request<'a>(
        &self,
        call: &'a CallView<'_>,
        tool_input: &'a str,
        authz_attributes: &'a str,
    ) -> Request<'a> {
        if self.reads(declarations::NO_ATTRIBUTION) {
            abi_request(call, tool_input, authz_attributes)
        } else {
            Request {
                tool_input_json: RStr::from_str(tool_input),
                authz_attributes_json: RStr::from_str(authz_attributes),
                ..Request::for_tool(call.tool_name)
            }
        }
    }

    /// `call.attribution.authz_attributes` as JSON text, `""` when the
    /// provider does not read them.
    fn authz_text(&self, call: &CallView<'_>) -> Cow<'static, str> {
        if self.reads(declarations::NO_AUTHZ_ATTRIBUTES) {
            authz_text(call)
        } else {
            Cow::Borrowed(NOT_PASSED)
        }
    }

    fn decide<R: Reading>(&self, call: &CallView<'_>) -> Result<R, ProviderFailure> {
        let authz = self.authz_text(call);
        if !self.reads(declarations::NO_TOOL_INPUT) {
            return self.call(&self.request(call, NOT_PASSED, &authz));
        }
        // The text the arguments arrived in, else their serialisation.
        if let Some(args) = call.tool_input_json {
            return self.call(&self.request(call, args, &authz));
        }
        with_object_text(call.tool_input, |args| self.call(&self.request(call, args, &authz)))
    }

    /// The provider's decision of `request`: through the library's
    /// `decide` when it has one, else the object's `evaluate`.
    fn call<R: Reading>(&self, request: &Request<'_>) -> Result<R, ProviderFailure> {
        match self.decide {
            Some(decide) => R::of_verdict(decide(&self.object, request)),
            None => R::of_decision(self.object.evaluate(request)),
        }
    }

    async fn adecide(&self, call: &CallView<'_>) -> Evaluation {
        // A provider that declares it never blocks is decided through its
        // sync entry on the async path too (`NEVER_BLOCKS` says so): its
        // decision is ready at once, and the future's boxing on both sides
        // of the boundary would cost more than the decision.
        if self.never_blocks() {
            return self.decide::<GuardrailDecision>(call);
        }
        // The texts outlive the provider's future: owned here, or the
        // caller's.
        let args: Cow<'_, str> = match (self.reads(declarations::NO_TOOL_INPUT), call.tool_input_json) {
            (false, _) => Cow::Borrowed(NOT_PASSED),
            (true, Some(text)) => Cow::Borrowed(text),
            (true, None) => object_text(call.tool_input),
        };
        let authz = self.authz_text(call);
        from_abi(self.object.aevaluate(self.request(call, &args, &authz)).await)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::task::{Poll, Waker};
    use std::thread;

    use super::block_on;

    #[test]
    fn block_on_drives_a_future_woken_from_another_thread() {
        let (sender, receiver) = std::sync::mpsc::channel::<Waker>();
        let woken = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = woken.clone();
        let waker_thread = thread::spawn(move || {
            let waker = receiver.recv().unwrap();
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            waker.wake();
        });
        let value = block_on(std::future::poll_fn(|cx| {
            if woken.load(std::sync::atomic::Ordering::SeqCst) {
                Poll::Ready(42)
            } else {
                let _ = sender.send(cx.waker().clone());
                Poll::Pending
            }
        }));
        assert_eq!(value, 42);
        waker_thread.join().unwrap();
    }
}
