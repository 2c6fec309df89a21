//! `GuardrailMiddleware`: asks the provider before every tool call.

use std::borrow::Cow;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value};

use super::guard::{Guard, GuardKind};
use crate::audit::{AuditAction, AuditProvider, AuditRecord, AuditSink};
use crate::config::Mode;
use crate::decision_log::{ChainStep, Decided, DecisionLog};
use crate::middleware::{AsyncHandler, SyncHandler, ToolCallError, ToolCallMiddleware, ToolResult};
use crate::outcome::{self, Ask, CallFacts, Kind, Requested, Settled, OUTCOME_KEY};
use crate::provider::{BoxFuture, Evaluation, GuardrailProvider, ProviderFailure, Ruled, Ruling};
use crate::request::{
    Attribution, CallView, GuardrailDecision, GuardrailReason, GuardrailRequest, Held, Timestamp, ToolCall,
    ToolCallRequest, ToolMessage, ToolStatus,
};
use crate::tool_name;

/// Evaluates every tool call against its guards before it runs.
///
/// A guard is a provider with its `fail_closed`, mode, passport and the
/// calls it sees ([`Guard`]); a middleware built with
/// [`GuardrailMiddleware::new`] has one, and [`GuardrailMiddleware::then`]
/// adds more, asked in order: the first denial wins, and a chain's
/// decisions name the guard that decided (`decided_by` in the metadata).
///
/// A denied call is not an error: it becomes a tool message with
/// `status: error` that tells the agent why, so the run goes on. When a
/// provider fails, its guard's `fail_closed` (default true) blocks the
/// call; otherwise the next guard decides. A provider's control-flow
/// interrupt is returned as [`ToolCallError::Interrupt`], never turned into
/// a decision.
#[derive(Clone)]
pub struct GuardrailMiddleware {
    guards: Vec<Guard>,
    audit: Option<Arc<dyn AuditSink>>,
    decision_log: Option<Arc<DecisionLog>>,
}

impl std::fmt::Debug for GuardrailMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardrailMiddleware")
            .field("guards", &self.guards)
            .field("audit", &self.audit.is_some())
            .field("decision_log", &self.decision_log.is_some())
            .finish()
    }
}

/// What the guards of one call came to, as they are asked.
struct Tally {
    /// Whether the middleware is a chain (more than one guard, or a guard
    /// that sees only some calls): its decisions name the guard.
    chain: bool,
    /// The decision to report, whether its provider failed, and its guard.
    reported: Option<(GuardrailDecision, bool, usize)>,
    /// Each guard asked (chains with a decision log only).
    steps: Vec<ChainStep>,
    /// Whether to keep `steps`.
    keep_steps: bool,
    /// Whether a guard rewrote the call's arguments.
    rewrote: bool,
}

impl Tally {
    fn new(middleware: &GuardrailMiddleware) -> Self {
        let chain = middleware.is_chain();
        let keep_steps = chain && middleware.decision_log.is_some();
        Tally { chain, reported: None, steps: Vec::new(), keep_steps, rewrote: false }
    }

    /// Takes guard `index`'s conclusion; `false` when the call is decided
    /// (denied, or held for approval) and no later guard is asked. The
    /// decision reported is the denial, else the first allow worth telling
    /// (a rewrite, an approval, after a provider error, or a denial in
    /// `warn` or `observe` mode), else the last allow.
    fn add(
        &mut self,
        index: usize,
        guard: &Guard,
        (decision, provider_error): (GuardrailDecision, bool),
    ) -> bool {
        let kind = Kind::of(&decision, provider_error);
        if self.keep_steps {
            let code = decision.reasons.first().map_or_else(String::new, |r| r.code.to_string());
            self.steps.push(ChainStep { entry: guard.name.clone(), outcome: kind.as_str().into(), code });
        }
        self.rewrote |= kind == Kind::Rewrite;
        let allow = decision.allow;
        let worth_telling =
            |(d, error, _): &(GuardrailDecision, bool, usize)| Kind::of(d, *error) != Kind::Allow;
        if !allow || !self.reported.as_ref().is_some_and(worth_telling) {
            self.reported = Some((decision, provider_error, index));
        }
        allow
    }
}

/// Who decided a call no guard decided, in audit events and the decision
/// log.
fn no_provider() -> AuditProvider {
    AuditProvider { name: "none".into(), sha256: None }
}

/// No guard of a chain selects the call: it runs.
fn unselected(tool_name: &str) -> GuardrailDecision {
    GuardrailDecision::with_reason(
        true,
        "guardhost.not_selected",
        &format!("no guardrail entry decides tool '{tool_name}' (each selects other tools)"),
    )
}

/// One call's evaluation by the provider, owned, to run anywhere (see
/// [`GuardrailMiddleware::adecide_with`]).
pub struct ToEvaluate {
    provider: Arc<dyn GuardrailProvider>,
    request: Arc<GuardrailRequest>,
    /// The JSON text the request's arguments arrived in, for a provider
    /// that reads them (a copy: cheaper than their serialisation).
    args_text: Option<Arc<str>>,
}

impl std::fmt::Debug for ToEvaluate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the request's arguments.
        f.debug_struct("ToEvaluate").field("provider", &self.provider.name()).finish_non_exhaustive()
    }
}

impl ToEvaluate {
    /// The provider's name.
    pub fn provider_name(&self) -> &str {
        self.provider.name()
    }

    /// Runs the provider's async path (`aevaluate`) to its end on this
    /// thread, a panic caught as a provider error.
    pub fn run(self) -> Evaluation {
        let args_text = self.args_text.as_deref();
        crate::provider::evaluate_here_with_args_text(&*self.provider, &self.request, args_text, true)
    }
}

/// One guard's answer, recorded for [`GuardrailMiddleware::explain`].
struct Answer {
    index: usize,
    decision: GuardrailDecision,
    provider_error: bool,
    request: GuardrailRequest,
}

/// What the guards made of one call ([`GuardrailMiddleware::explain`]).
#[derive(Debug, Clone)]
pub struct Explained {
    /// Each guard, in the order they are asked.
    pub steps: Vec<Step>,
    /// The decision the call got.
    pub decision: GuardrailDecision,
    /// Whether the reported decision's provider failed.
    pub provider_error: bool,
}

/// One guard's part in a call's decision.
#[derive(Debug, Clone)]
pub struct Step {
    /// The guard's name.
    pub entry: String,
    /// The section it comes from.
    pub kind: GuardKind,
    /// What it made of the call.
    pub answer: StepAnswer,
}

/// What one guard made of a call.
#[derive(Debug, Clone)]
pub enum StepAnswer {
    /// Its `tools:` / `except_tools:` leave the call out.
    NotSelected,
    /// Asked: its decision (after `fail_closed`, approvals and shadow
    /// mode), whether its provider failed, and the request it saw.
    Asked {
        /// The decision.
        decision: GuardrailDecision,
        /// Whether its provider failed.
        provider_error: bool,
        /// The request it saw.
        request: Box<GuardrailRequest>,
        /// When its provider failed: why, in the provider's words (asked
        /// again with the same request). For the operator's own tools
        /// (`explain`, `test`), never for audit events or logs at their
        /// default level: a provider's error may quote what it was given.
        cause: Option<String>,
    },
    /// Not asked: a guard before it decided the call, or the host refused
    /// the call's tool name ([`crate::tool_name`]) before any guard.
    NotAsked,
}

/// What the middleware decided about one call, before any handler ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The request the provider saw.
    pub request: GuardrailRequest,
    /// The decision (the provider's, or the fail-closed / fail-open one).
    pub decision: GuardrailDecision,
    /// Whether the provider failed.
    pub provider_error: bool,
}

impl Verdict {
    /// Whether the tool may run.
    pub fn allowed(&self) -> bool {
        self.decision.allow
    }

    /// Gives `call` the arguments a guard rewrote it to, if one did.
    pub fn rewrite(&self, call: &mut ToolCallRequest) {
        if outcome::rewritten_args(&self.decision).is_some() {
            call.tool_call.args = self.request.tool_input.clone();
        }
    }
}

/// What a call that may not run comes to: the denial's tool message, or,
/// when a guard holds it for approval, [`ToolCallError::ApprovalRequired`].
fn not_run(call: ToolCallRequest, decision: GuardrailDecision) -> ToolResult {
    match Ask::of(&decision) {
        Some(ask) => Err(ToolCallError::ApprovalRequired {
            tool: call.tool_call.name.unwrap_or_default(),
            ask: Box::new(ask),
            decision: Box::new(decision),
        }),
        None => Ok(into_denied_message(call.tool_call, &decision)),
    }
}

/// What a denial becomes in `warn` or `observe` mode: an allow, whose one
/// reason (`guardhost.shadow`) says what would have been denied, and whose
/// metadata adds `mode` and `would_deny` (`code`, `message`, `policy_id`,
/// every `reasons`), as the OAP provider's own modes do. An `ask` becomes
/// such an allow with `would_ask` (and the ask), a `rewrite` one with
/// `would_rewrite` (the call runs with its own arguments). Decisions that
/// allow, and `enforce` mode, pass unchanged.
pub fn shadowed(decision: GuardrailDecision, mode: Mode) -> GuardrailDecision {
    let kind = outcome::outcome_of(&decision);
    if kind == "allow" || mode == Mode::Enforce {
        return decision;
    }
    let GuardrailDecision { reasons, policy_id, mut metadata, .. } = decision;
    let extension = metadata.remove(OUTCOME_KEY);
    let (code, message) = match reasons.first() {
        Some(reason) => (reason.code.clone(), reason.message.clone()),
        None => (Cow::Borrowed("oap.denied"), Cow::Borrowed("blocked by guardrail policy")),
    };
    let mut would =
        serde_json::json!({"code": code, "message": message, "policy_id": policy_id, "reasons": reasons});
    let (key, what) = match kind {
        "ask" => {
            would["ask"] = extension.and_then(|mut e| e.get_mut("ask").map(Value::take)).unwrap_or_default();
            ("would_ask", "asked for approval")
        }
        "rewrite" => ("would_rewrite", "rewritten the arguments"),
        _ => ("would_deny", "denied"),
    };
    metadata.insert("mode".into(), serde_json::Value::from(mode.as_str()));
    metadata.insert(key.into(), would);
    GuardrailDecision {
        allow: true,
        reasons: vec![crate::GuardrailReason::new(
            "guardhost.shadow",
            format!("{mode} mode: would have {what} ({code}): {message}"),
        )],
        policy_id,
        metadata,
    }
}

/// The tool message a denied call gets.
pub fn denied_message(call: &ToolCall, decision: &GuardrailDecision) -> ToolMessage {
    let tool_name = call.name.as_deref().unwrap_or(UNKNOWN_TOOL);
    ToolMessage {
        content: denial_text(tool_name, decision),
        tool_call_id: call_id_of(call).to_owned(),
        name: Some(tool_name.to_owned()),
        status: ToolStatus::Error,
    }
}

/// [`denied_message`] of a call given up: its name and id are moved into
/// the message, not copied.
pub fn into_denied_message(call: ToolCall, decision: &GuardrailDecision) -> ToolMessage {
    let tool_call_id = match call.id {
        Some(id) => id,
        None => call_id_of(&call).to_owned(),
    };
    let name = call.name.unwrap_or_else(|| UNKNOWN_TOOL.to_owned());
    ToolMessage {
        content: denial_text(&name, decision),
        tool_call_id,
        name: Some(name),
        status: ToolStatus::Error,
    }
}

/// The name a denial gives a call without one.
const UNKNOWN_TOOL: &str = "unknown_tool";

/// The id a denial gives `call`: its own, else DeerFlow's stand-in.
fn call_id_of(call: &ToolCall) -> &str {
    match (&call.id, call.null_id) {
        (Some(id), _) => id.as_str(),
        (None, true) => "None",
        (None, false) => "missing_id",
    }
}

/// DeerFlow's text of a denial; joined rather than formatted, which costs
/// a fifth as much. A call held for approval is not a denial: its text
/// says so ([`held_text`]).
fn denial_text(name: &str, decision: &GuardrailDecision) -> String {
    let (code, message) = match decision.reasons.first() {
        Some(reason) => (&*reason.code, &*reason.message),
        None => ("oap.denied", "blocked by guardrail policy"),
    };
    // A name the host refuses is shown without its invisible characters.
    let name = tool_name::escaped(name);
    if let Some(ask) = Ask::of(decision) {
        return held_text(&name, code, message, &ask);
    }
    [
        "Guardrail denied: tool '",
        &name,
        "' was blocked (",
        code,
        "). Reason: ",
        message,
        ". Choose an alternative approach.",
    ]
    .concat()
}

/// What the agent reads of a call held for a human's approval: that it
/// waits (by whom, until when), and that the runtime brings the answer,
/// so that it neither gives up on the call nor makes it again meanwhile.
fn held_text(name: &str, code: &str, message: &str, ask: &Ask) -> String {
    let by = match ask.approvers.as_slice() {
        [] => String::new(),
        [one] => format!(" from {one}"),
        many => format!(" from one of {}", many.join(", ")),
    };
    let until = i64::try_from(ask.deadline)
        .ok()
        .and_then(|at| chrono::DateTime::from_timestamp(at, 0))
        .map_or_else(|| ask.deadline.to_string(), |at| at.format("%Y-%m-%dT%H:%M:%SZ").to_string());
    format!(
        "Guardrail held: tool '{name}' awaits a human's approval{by} ({code}), until {until}. Reason: \
         {message}. Do not make this call again or work around it: once an approver answers, the runtime \
         resumes it and you receive its result, or the refusal if it is refused or the time runs out."
    )
}

/// The arguments of the call being decided: lent by the caller (a
/// provider that needs the owned request gets them moved in, and they are
/// given back), or only borrowed (such a provider gets a copy).
enum Args<'a> {
    Lent(&'a mut Map<String, Value>),
    Borrowed(&'a Map<String, Value>),
    /// Borrowed, then rewritten by a guard.
    Owned(Map<String, Value>),
}

impl Args<'_> {
    fn get(&self) -> &Map<String, Value> {
        match self {
            Args::Lent(args) => args,
            Args::Borrowed(args) => args,
            Args::Owned(args) => args,
        }
    }

    fn take(&mut self) -> Map<String, Value> {
        match self {
            Args::Lent(args) => std::mem::take(*args),
            Args::Borrowed(args) => (*args).clone(),
            Args::Owned(args) => std::mem::take(args),
        }
    }

    fn give_back(&mut self, args: Map<String, Value>) {
        match self {
            Args::Lent(lent) => **lent = args,
            Args::Owned(owned) => *owned = args,
            Args::Borrowed(_) => {}
        }
    }

    /// Takes the arguments a guard's decision rewrote the call to, if it
    /// did (`true`): later guards see them, and the tool runs with them.
    fn follow(&mut self, concluded: &Result<(GuardrailDecision, bool), ToolCallError>) -> bool {
        let Ok((decision, _)) = concluded else { return false };
        let Some(rewritten) = outcome::rewritten_args(decision) else { return false };
        match self {
            Args::Lent(lent) => **lent = rewritten.clone(),
            other => *other = Args::Owned(rewritten.clone()),
        }
        true
    }
}

/// What one call is, besides its arguments: borrowed for every guard.
struct Call<'c> {
    call: &'c ToolCallRequest,
    timestamp: &'c str,
    /// `None` when the call has no context (every field at its default).
    attribution: Option<Attribution<'c>>,
    /// The arguments' JSON text as the call arrived with it, until a guard
    /// rewrites them.
    args_text: Option<&'c str>,
}

impl<'c> Call<'c> {
    fn new(
        call: &'c ToolCallRequest,
        timestamp: &'c str,
        args_text: Option<&'c str>,
    ) -> Result<Self, ToolCallError> {
        let attribution = match &call.context {
            Some(context) => Some(Attribution::of(Some(context))?),
            None => None,
        };
        Ok(Call { call, timestamp, attribution, args_text })
    }

    /// Takes `concluded`'s rewrite of the arguments, if any, into `args`:
    /// the text they arrived in no longer says what they are.
    fn follow(&mut self, args: &mut Args<'_>, concluded: &Result<(GuardrailDecision, bool), ToolCallError>) {
        if args.follow(concluded) {
            self.args_text = None;
        }
    }

    fn tool_name(&self) -> &'c str {
        self.call.tool_call.name.as_deref().unwrap_or_default()
    }

    /// The call as `guard`'s provider sees it, with `args`.
    fn view<'v>(&'v self, guard: &'v Guard, args: &'v Map<String, Value>) -> CallView<'v> {
        CallView {
            tool_name: self.tool_name(),
            tool_input: args,
            tool_input_json: self.args_text,
            agent_id: guard.passport.as_deref(),
            tool_call_id: self.call.tool_call.id.as_deref(),
            timestamp: self.timestamp,
            attribution: Held::Borrowed(self.attribution.as_ref().unwrap_or(&NO_ATTRIBUTION)),
        }
    }
}

/// The attribution of a call without a context.
static NO_ATTRIBUTION: Attribution<'static> = Attribution {
    thread_id: None,
    is_subagent: false,
    user_id: None,
    user_role: None,
    oauth_provider: None,
    oauth_id: None,
    run_id: None,
    channel_user_id: None,
    is_internal: false,
    authz_attributes: None,
};

/// What a decided call comes to: the decision, whether its provider
/// failed, and the guard it is reported from (none when no guard of a
/// chain selected the call).
type Concluded = (GuardrailDecision, bool, Option<usize>);

/// A guard's ruling: what the guards came to when it is a plain allow of
/// a guard `alone` (the decision as it stands: see
/// [`GuardrailMiddleware::is_plain`]), else the evaluation to conclude.
#[inline(always)]
fn plain_allow(ruled: Ruled, alone: bool, index: usize) -> ControlFlow<Reached, Evaluation> {
    match ruled {
        Ok(Ruling::Allow(reason)) if alone => ControlFlow::Break(Reached::Allowed(reason, index)),
        Ok(Ruling::Decision(decision)) => {
            if alone && Kind::of(&decision, false) == Kind::Allow {
                return ControlFlow::Break(Reached::Concluded((decision, false, Some(index))));
            }
            ControlFlow::Continue(Ok(decision))
        }
        Ok(allow) => ControlFlow::Continue(Ok(allow.into_decision())),
        Err(failure) => ControlFlow::Continue(Err(failure)),
    }
}

/// What the guards came to: a plain allow in brief (a guard alone allowed
/// the call with one reason and nothing beyond it: nothing to tally, audit
/// or log, and no decision made of it), or the decision concluded.
enum Reached {
    /// The reason, and the guard's place.
    Allowed(GuardrailReason, usize),
    Concluded(Concluded),
}

impl Reached {
    fn into_concluded(self) -> Concluded {
        match self {
            Reached::Allowed(reason, index) => (Ruling::Allow(reason).into_decision(), false, Some(index)),
            Reached::Concluded(concluded) => concluded,
        }
    }
}

impl GuardrailMiddleware {
    /// A middleware around `provider`: one guard, failing closed, in
    /// `enforce` mode, with no passport and no audit sink.
    pub fn new(provider: Arc<dyn GuardrailProvider>) -> Self {
        Self::from_guard(Guard::new(provider))
    }

    /// A middleware with `guard` as its first guard.
    pub fn from_guard(guard: Guard) -> Self {
        GuardrailMiddleware { guards: vec![guard], audit: None, decision_log: None }
    }

    /// Adds `guard`, asked after the ones already added.
    pub fn then(mut self, guard: Guard) -> Self {
        self.guards.push(guard);
        self
    }

    /// The guards, in the order they are asked.
    pub fn guards(&self) -> &[Guard] {
        &self.guards
    }

    /// Whether decisions name their guard: more than one guard, or one
    /// that sees only some calls.
    pub fn is_chain(&self) -> bool {
        self.guards.len() > 1 || self.guards.iter().any(|g| g.selector.is_some())
    }

    /// One guard that sees every call, and no decision log: its allow
    /// (without an outcome beyond it) is the call's decision as it stands,
    /// which concluding, tallying and finishing would leave unchanged (an
    /// allow is neither audited nor logged).
    fn is_plain(&self) -> bool {
        !self.is_chain() && self.decision_log.is_none()
    }

    /// The first guard of the `guardrails:` section (the first guard when
    /// there is none).
    fn main_guard(&self) -> &Guard {
        self.guards.iter().find(|g| g.kind == GuardKind::Guardrail).unwrap_or(&self.guards[0])
    }

    fn guardrail_guards(&mut self) -> impl Iterator<Item = &mut Guard> {
        self.guards.iter_mut().filter(|g| g.kind == GuardKind::Guardrail)
    }

    /// Sets `fail_closed` of every guardrail guard (an authorization guard
    /// keeps its own).
    pub fn with_fail_closed(mut self, fail_closed: bool) -> Self {
        self.guardrail_guards().for_each(|g| g.fail_closed = fail_closed);
        self
    }

    /// Sets what a denial of a guardrail guard does (`guardrails.mode`):
    /// in `warn` and `observe` mode, a denied call runs all the same; see
    /// [`shadowed`]. An authorization guard always enforces.
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.guardrail_guards().for_each(|g| g.mode = mode);
        self
    }

    /// What a denial of the (first) guardrail guard does.
    pub fn mode(&self) -> Mode {
        self.main_guard().mode
    }

    /// Sets the passport of every guardrail guard (it becomes their
    /// requests' `agent_id`; an authorization guard is given none, as in
    /// DeerFlow).
    pub fn with_passport(mut self, passport: Option<String>) -> Self {
        self.guardrail_guards().for_each(|g| g.passport = passport.clone());
        self
    }

    /// Sets the SHA-256 of the last guard's library, which audit events
    /// carry to say exactly which library decided ([`crate::install`] sets
    /// each guard's).
    pub fn with_library_sha256(mut self, sha256: Option<String>) -> Self {
        if let Some(guard) = self.guards.last_mut() {
            guard.audit_provider.sha256 = sha256;
        }
        self
    }

    /// Sets the decision log: every decided call is written to it.
    pub fn with_decision_log(mut self, log: Option<Arc<DecisionLog>>) -> Self {
        self.decision_log = log;
        self
    }

    /// The decision log, if one is set.
    pub fn decision_log(&self) -> Option<&Arc<DecisionLog>> {
        self.decision_log.as_ref()
    }

    /// When deciding started, if the decision log needs to know.
    fn started(&self) -> Option<Instant> {
        self.decision_log.as_ref().map(|_| Instant::now())
    }

    /// The time of a call about to be decided: now, unless no provider
    /// reads it (each declares it does not read the request's attribution,
    /// of which the timestamp is part), when it is left empty, as such a
    /// provider is handed it. An audit event or a decision-log entry of such
    /// a call takes the time it is recorded, a few microseconds later: an
    /// allowed call, which neither records, reads no clock.
    fn now(&self) -> Timestamp {
        if self.guards.iter().any(|guard| guard.provider.reads_attribution()) {
            Timestamp::now()
        } else {
            Timestamp::empty()
        }
    }

    /// Sets the audit sink.
    pub fn with_audit_sink(mut self, sink: Arc<dyn AuditSink>) -> Self {
        self.audit = Some(sink);
        self
    }

    /// The (first) guardrail guard's provider.
    pub fn provider(&self) -> &Arc<dyn GuardrailProvider> {
        &self.main_guard().provider
    }

    /// Whether errors of the (first) guardrail guard's provider block calls.
    pub fn fail_closed(&self) -> bool {
        self.main_guard().fail_closed
    }

    /// The passport.
    pub fn passport(&self) -> Option<&str> {
        self.main_guard().passport.as_deref()
    }

    /// Decides a call synchronously without running anything.
    pub fn check(&self, call: &ToolCallRequest) -> Result<Verdict, ToolCallError> {
        let started = self.started();
        let now = Timestamp::now();
        let mut args = call.tool_call.args.clone();
        let (decision, provider_error, by) =
            self.decide_sync(call, Args::Lent(&mut args), None, now.as_str(), started)?.into_concluded();
        let request = self.request_seen(call, args, now.as_str(), by)?;
        Ok(Verdict { request, decision, provider_error })
    }

    /// Decides a call asynchronously (through the providers' `aevaluate`)
    /// without running anything.
    pub async fn acheck(&self, call: &ToolCallRequest) -> Result<Verdict, ToolCallError> {
        let started = self.started();
        let now = Timestamp::now();
        let mut args = call.tool_call.args.clone();
        let (decision, provider_error, by) = self
            .decide_async(call, Args::Lent(&mut args), None, now.as_str(), started)
            .await?
            .into_concluded();
        let request = self.request_seen(call, args, now.as_str(), by)?;
        Ok(Verdict { request, decision, provider_error })
    }

    /// The request the reporting guard saw.
    fn request_seen(
        &self,
        call: &ToolCallRequest,
        args: Map<String, Value>,
        timestamp: &str,
        by: Option<usize>,
    ) -> Result<GuardrailRequest, ToolCallError> {
        let passport = by.map_or(self.passport(), |index| self.guards[index].passport.as_deref());
        let view = CallView::new(call, &call.tool_call.args, passport, timestamp)?;
        Ok(view.to_request_with(args))
    }

    /// The synchronous wrapper: decide, then run `handler` or return the
    /// denial.
    pub fn wrap_tool_call(&self, mut call: ToolCallRequest, handler: SyncHandler<'_>) -> ToolResult {
        let started = self.started();
        let mut args = std::mem::take(&mut call.tool_call.args);
        let now = self.now();
        let decided = self.decide_sync(&call, Args::Lent(&mut args), None, now.as_str(), started);
        call.tool_call.args = args;
        match decided? {
            Reached::Allowed(..) => handler(call),
            Reached::Concluded((decision, ..)) if decision.allow => handler(call),
            Reached::Concluded((decision, ..)) => not_run(call, decision),
        }
    }

    /// The asynchronous wrapper.
    pub async fn awrap_tool_call(&self, mut call: ToolCallRequest, handler: AsyncHandler) -> ToolResult {
        let started = self.started();
        let mut args = std::mem::take(&mut call.tool_call.args);
        let now = self.now();
        let decided = self.decide_async(&call, Args::Lent(&mut args), None, now.as_str(), started).await;
        call.tool_call.args = args;
        match decided? {
            Reached::Allowed(..) => handler(call).await,
            Reached::Concluded((decision, ..)) if decision.allow => handler(call).await,
            Reached::Concluded((decision, ..)) => not_run(call, decision),
        }
    }

    /// Decides `call` as the wrapping paths do, through the borrowed view
    /// where a provider can (no owned request is built, nothing is
    /// copied), and runs nothing: the decision to act on and whether a
    /// provider failed. [`Self::check`] is the same decision with the
    /// request the provider saw.
    pub fn decide(&self, call: &ToolCallRequest) -> Result<(GuardrailDecision, bool), ToolCallError> {
        self.decide_with_args_text(call, None)
    }

    /// [`Self::decide`] on the async path (the providers' `aevaluate`).
    pub async fn adecide(&self, call: &ToolCallRequest) -> Result<(GuardrailDecision, bool), ToolCallError> {
        self.adecide_with_args_text(call, None).await
    }

    /// [`Self::decide`] of a call whose arguments arrived as the JSON text
    /// `args_text` (a `guardhost run` line, a request to `guardhost
    /// serve`): a provider library that reads arguments is handed that text
    /// instead of their serialisation, until a guard rewrites them. It must
    /// be the text `call.tool_call.args` was parsed from; ask for it only
    /// when [`Self::reads_tool_input`] (keeping it costs the parser a little).
    pub fn decide_with_args_text(
        &self,
        call: &ToolCallRequest,
        args_text: Option<&str>,
    ) -> Result<(GuardrailDecision, bool), ToolCallError> {
        let started = self.started();
        let now = self.now();
        let args = Args::Borrowed(&call.tool_call.args);
        let (decision, provider_error, _) =
            self.decide_sync(call, args, args_text, now.as_str(), started)?.into_concluded();
        Ok((decision, provider_error))
    }

    /// [`Self::decide_with_args_text`] on the async path.
    pub async fn adecide_with_args_text(
        &self,
        call: &ToolCallRequest,
        args_text: Option<&str>,
    ) -> Result<(GuardrailDecision, bool), ToolCallError> {
        let started = self.started();
        let now = self.now();
        let args = Args::Borrowed(&call.tool_call.args);
        let (decision, provider_error, _) =
            self.decide_async(call, args, args_text, now.as_str(), started).await?.into_concluded();
        Ok((decision, provider_error))
    }

    /// Whether a provider of a guard reads the calls' arguments (else none
    /// is handed them: their text is not worth keeping).
    pub fn reads_tool_input(&self) -> bool {
        self.guards.iter().any(|guard| guard.provider.reads_tool_input())
    }

    /// [`Self::adecide`], with each guard's evaluation handed to
    /// `evaluate` as an [`Evaluation`] to run: on another thread, say, or
    /// given up on at a deadline. What `evaluate` returns is that guard's
    /// answer: an `Err` is a provider error, decided by its `fail_closed`,
    /// audited and logged as any other, once.
    pub async fn adecide_with<F, Fut>(
        &self,
        call: &ToolCallRequest,
        evaluate: F,
    ) -> Result<(GuardrailDecision, bool), ToolCallError>
    where
        F: FnMut(ToEvaluate) -> Fut,
        Fut: std::future::Future<Output = Evaluation>,
    {
        self.adecide_text_with(call, None, evaluate).await
    }

    /// [`Self::adecide_with`] of a call whose arguments arrived as the JSON
    /// text `args_text` (see [`Self::decide_with_args_text`]): each
    /// evaluation carries a copy of it for a provider that reads them.
    pub async fn adecide_text_with<F, Fut>(
        &self,
        call: &ToolCallRequest,
        args_text: Option<&str>,
        mut evaluate: F,
    ) -> Result<(GuardrailDecision, bool), ToolCallError>
    where
        F: FnMut(ToEvaluate) -> Fut,
        Fut: std::future::Future<Output = Evaluation>,
    {
        let started = self.started();
        let now = Timestamp::now();
        let mut args = Args::Borrowed(&call.tool_call.args);
        let mut this = Call::new(call, now.as_str(), args_text)?;
        if let Some(refused) = self.refuse_name(&this, args.get(), started) {
            return Ok((refused, false));
        }
        let mut tally = Tally::new(self);
        for (index, guard) in self.selected(this.tool_name()) {
            let request = Arc::new(this.view(guard, args.get()).to_request());
            let args_text = this.args_text.filter(|_| guard.provider.reads_tool_input()).map(Arc::from);
            let to_evaluate = ToEvaluate {
                provider: Arc::clone(&guard.provider),
                request: Arc::clone(&request),
                args_text,
            };
            let evaluation = evaluate(to_evaluate).await;
            let facts = CallFacts::of_request(&request);
            let concluded =
                self.conclude(guard, &this, facts, evaluation, "async", || Cow::Borrowed(&*request));
            this.follow(&mut args, &concluded);
            if !self.tally(&mut tally, index, guard, concluded, &this, args.get(), started)? {
                break;
            }
        }
        let (decision, provider_error, _) = self.finish(tally, &this, args.get(), started);
        Ok((decision, provider_error))
    }

    /// The guards that decide calls of `tool_name`, with their places.
    fn selected<'s>(&'s self, tool_name: &'s str) -> impl Iterator<Item = (usize, &'s Guard)> + 's {
        self.guards.iter().enumerate().filter(move |(_, guard)| guard.selects(tool_name))
    }

    /// Asks the guards in order, synchronously, until one denies.
    fn decide_sync(
        &self,
        call: &ToolCallRequest,
        args: Args<'_>,
        args_text: Option<&str>,
        timestamp: &str,
        started: Option<Instant>,
    ) -> Result<Reached, ToolCallError> {
        self.decide_sync_recording(call, args, args_text, timestamp, started, None)
    }

    /// [`Self::decide_sync`], each guard's answer and the request it saw
    /// pushed to `answers` when given.
    fn decide_sync_recording(
        &self,
        call: &ToolCallRequest,
        mut args: Args<'_>,
        args_text: Option<&str>,
        timestamp: &str,
        started: Option<Instant>,
        mut answers: Option<&mut Vec<Answer>>,
    ) -> Result<Reached, ToolCallError> {
        let mut this = Call::new(call, timestamp, args_text)?;
        if let Some(refused) = self.refuse_name(&this, args.get(), started) {
            return Ok(Reached::Concluded((refused, false, None)));
        }
        let mut tally = Tally::new(self);
        let alone = answers.is_none() && self.is_plain();
        for (index, guard) in self.selected(this.tool_name()) {
            let asked = {
                let view = this.view(guard, args.get());
                match guard.provider.rule_view(&view) {
                    Some(ruled) => match plain_allow(ruled, alone, index) {
                        ControlFlow::Break(reached) => return Ok(reached),
                        ControlFlow::Continue(evaluation) => {
                            Asked::Decided(self.conclude_view(guard, &this, &view, evaluation, "sync"))
                        }
                    },
                    None => Asked::Not(Box::new(view.to_request_with(Map::new()))),
                }
            };
            let concluded = match asked {
                Asked::Decided(concluded) => concluded,
                Asked::Not(mut request) => {
                    request.tool_input = args.take();
                    let evaluation = guard.provider.evaluate(&request);
                    let facts = CallFacts::of_request(&request);
                    let concluded =
                        self.conclude(guard, &this, facts, evaluation, "sync", || Cow::Borrowed(&*request));
                    args.give_back(std::mem::take(&mut request.tool_input));
                    concluded
                }
            };
            if let (Some(answers), Ok((decision, provider_error))) = (answers.as_deref_mut(), &concluded) {
                let request = this.view(guard, args.get()).to_request();
                answers.push(Answer {
                    index,
                    decision: decision.clone(),
                    provider_error: *provider_error,
                    request,
                });
            }
            this.follow(&mut args, &concluded);
            if !self.tally(&mut tally, index, guard, concluded, &this, args.get(), started)? {
                break;
            }
        }
        Ok(Reached::Concluded(self.finish(tally, &this, args.get(), started)))
    }

    /// Decides `call` as [`Self::decide`] does, and says what each guard
    /// made of it: not selected (its `tools:` leave the call out), asked
    /// (its decision, and the request it saw: after the rewrites of the
    /// guards before it), or not asked (a guard before it denied the call,
    /// or holds it for approval).
    pub fn explain(&self, call: &ToolCallRequest) -> Result<Explained, ToolCallError> {
        let now = Timestamp::now();
        let mut answers = Vec::new();
        let args = Args::Borrowed(&call.tool_call.args);
        let (decision, provider_error, _) = self
            .decide_sync_recording(call, args, None, now.as_str(), self.started(), Some(&mut answers))?
            .into_concluded();
        let tool = call.tool_call.name.as_deref().unwrap_or_default();
        // A name the host refuses is decided before any guard.
        let refused = !tool_name::is_valid(tool);
        let mut answers = answers.into_iter().peekable();
        let steps = self
            .guards
            .iter()
            .enumerate()
            .map(|(index, guard)| {
                let answer = if refused {
                    StepAnswer::NotAsked
                } else if !guard.selects(tool) {
                    StepAnswer::NotSelected
                } else {
                    match answers.next_if(|a| a.index == index) {
                        Some(Answer { decision, provider_error, request, .. }) => {
                            let cause = provider_error.then(|| guard.cause_of_failure(&request)).flatten();
                            StepAnswer::Asked { decision, provider_error, request: Box::new(request), cause }
                        }
                        None => StepAnswer::NotAsked,
                    }
                };
                Step { entry: guard.name.clone(), kind: guard.kind, answer }
            })
            .collect();
        Ok(Explained { steps, decision, provider_error })
    }

    /// [`Self::decide_sync`] on the async path.
    async fn decide_async(
        &self,
        call: &ToolCallRequest,
        mut args: Args<'_>,
        args_text: Option<&str>,
        timestamp: &str,
        started: Option<Instant>,
    ) -> Result<Reached, ToolCallError> {
        let mut this = Call::new(call, timestamp, args_text)?;
        if let Some(refused) = self.refuse_name(&this, args.get(), started) {
            return Ok(Reached::Concluded((refused, false, None)));
        }
        let mut tally = Tally::new(self);
        let alone = self.is_plain();
        for (index, guard) in self.selected(this.tool_name()) {
            let asked = {
                let view = this.view(guard, args.get());
                // A provider that never blocks is asked as on the sync path
                // (no future to box, nothing to wait for).
                let evaluation = match guard.provider.never_blocks() {
                    true => guard.provider.rule_view(&view).map(Answered::Now),
                    false => guard.provider.aevaluate_view(&view).map(Answered::Later),
                };
                // Bound, so that the provider's future is gone before `view`.
                let asked = match evaluation {
                    Some(evaluation) => {
                        let ruled = match evaluation {
                            Answered::Now(ruled) => ruled,
                            Answered::Later(future) => future.await.map(Ruling::Decision),
                        };
                        match plain_allow(ruled, alone, index) {
                            ControlFlow::Break(reached) => return Ok(reached),
                            ControlFlow::Continue(evaluation) => {
                                Asked::Decided(self.conclude_view(guard, &this, &view, evaluation, "async"))
                            }
                        }
                    }
                    None => Asked::Not(Box::new(view.to_request_with(Map::new()))),
                };
                asked
            };
            let concluded = match asked {
                Asked::Decided(concluded) => concluded,
                Asked::Not(mut request) => {
                    request.tool_input = args.take();
                    let evaluation = guard.provider.aevaluate(&request).await;
                    let facts = CallFacts::of_request(&request);
                    let concluded =
                        self.conclude(guard, &this, facts, evaluation, "async", || Cow::Borrowed(&*request));
                    args.give_back(std::mem::take(&mut request.tool_input));
                    concluded
                }
            };
            this.follow(&mut args, &concluded);
            if !self.tally(&mut tally, index, guard, concluded, &this, args.get(), started)? {
                break;
            }
        }
        Ok(Reached::Concluded(self.finish(tally, &this, args.get(), started)))
    }

    /// Takes guard `index`'s conclusion into `tally`: `Ok(false)` when the
    /// call is decided (denied); an interrupt is logged and returned.
    #[allow(clippy::too_many_arguments)]
    fn tally(
        &self,
        tally: &mut Tally,
        index: usize,
        guard: &Guard,
        concluded: Result<(GuardrailDecision, bool), ToolCallError>,
        this: &Call<'_>,
        args: &Map<String, Value>,
        started: Option<Instant>,
    ) -> Result<bool, ToolCallError> {
        match concluded {
            Ok(concluded) => Ok(tally.add(index, guard, concluded)),
            Err(error) => {
                if let (Some(log), Some(started)) = (&self.decision_log, started) {
                    let view = this.view(guard, args);
                    log.record_call(
                        &view,
                        Decided::Interrupt,
                        guard.mode,
                        &guard.audit_provider,
                        started.elapsed(),
                    );
                }
                Err(error)
            }
        }
    }

    /// The decision the guards came to, named by its guard in a chain, and
    /// written to the decision log.
    fn finish(
        &self,
        tally: Tally,
        this: &Call<'_>,
        args: &Map<String, Value>,
        started: Option<Instant>,
    ) -> Concluded {
        let Tally { chain, reported, steps, rewrote, .. } = tally;
        let (mut decision, provider_error, by) = match reported {
            Some((decision, provider_error, index)) => (decision, provider_error, Some(index)),
            None => (unselected(this.tool_name()), false, None),
        };
        let guard = by.map(|index| &self.guards[index]);
        if decision.allow && rewrote {
            // The arguments the tool runs with: the last rewrite's.
            decision
                .metadata
                .insert(OUTCOME_KEY.into(), serde_json::json!({"rewrite": {"tool_input": args}}));
        }
        if let (true, Some(guard)) = (chain, guard) {
            decision.metadata.insert("decided_by".into(), Value::from(guard.name.as_str()));
        }
        if let (Some(log), Some(started)) = (&self.decision_log, started) {
            let none = no_provider();
            let (mode, provider) = guard.map_or((Mode::Enforce, &none), |g| (g.mode, &g.audit_provider));
            let view = match guard {
                Some(guard) => this.view(guard, args),
                None => this.view(&self.guards[0], args),
            };
            let decided = Decided::Decision(&decision, provider_error);
            let took = started.elapsed();
            match chain {
                false => log.record_call(&view, decided, mode, provider, took),
                true => log.record_chain_call(&view, decided, mode, provider, took, steps),
            }
        }
        (decision, provider_error, by)
    }

    /// The host's denial of a call whose tool name it refuses
    /// ([`crate::tool_name`]), made before any guard is asked: logged,
    /// audited (provider `none`) and written to the decision log as any
    /// denial. `None` for a name it accepts. No mode shadows it.
    fn refuse_name(
        &self,
        this: &Call<'_>,
        args: &Map<String, Value>,
        started: Option<Instant>,
    ) -> Option<GuardrailDecision> {
        let name = this.tool_name();
        let problem = tool_name::check(name).err()?;
        let decision = tool_name::refusal(name, &problem);
        tracing::warn!(
            "Guardrail denied: tool={} policy=None code={} ({problem})",
            tool_name::escaped(name),
            tool_name::INVALID_CODE
        );
        let none = no_provider();
        let view = this.view(&self.guards[0], args);
        let request = || Cow::Owned(view.to_request_with(Map::new()));
        // The host's own message quotes the refused name: a fixed text.
        let by = (self.fail_closed(), &none, false);
        self.record_by(by, request, &decision, AuditAction::DenyToolCall, false);
        if let (Some(log), Some(started)) = (&self.decision_log, started) {
            let decided = Decided::Decision(&decision, false);
            let took = started.elapsed();
            match self.is_chain() {
                false => log.record_call(&view, decided, Mode::Enforce, &none, took),
                true => log.record_chain_call(&view, decided, Mode::Enforce, &none, took, Vec::new()),
            }
        }
        Some(decision)
    }

    /// [`Self::wrap_tool_call`], also returning the verdict.
    pub fn call_with_verdict(
        &self,
        call: ToolCallRequest,
        handler: SyncHandler<'_>,
    ) -> Result<(Verdict, ToolMessage), ToolCallError> {
        let mut call = call;
        let verdict = self.check(&call)?;
        let message = if verdict.allowed() {
            verdict.rewrite(&mut call);
            handler(call)?
        } else {
            not_run(call, verdict.decision.clone())?
        };
        Ok((verdict, message))
    }

    /// [`Self::awrap_tool_call`], also returning the verdict.
    pub async fn acall_with_verdict(
        &self,
        call: ToolCallRequest,
        handler: AsyncHandler,
    ) -> Result<(Verdict, ToolMessage), ToolCallError> {
        let mut call = call;
        let verdict = self.acheck(&call).await?;
        let message = if verdict.allowed() {
            verdict.rewrite(&mut call);
            handler(call).await?
        } else {
            not_run(call, verdict.decision.clone())?
        };
        Ok((verdict, message))
    }

    /// [`Self::conclude`] for `guard`'s answer about the call `view` shows.
    fn conclude_view(
        &self,
        guard: &Guard,
        this: &Call<'_>,
        view: &CallView<'_>,
        evaluation: Evaluation,
        path: &str,
    ) -> Result<(GuardrailDecision, bool), ToolCallError> {
        // An audit event never holds the arguments: its request needs none.
        self.conclude(guard, this, CallFacts::of_view(view), evaluation, path, || {
            Cow::Owned(view.to_request_with(Map::new()))
        })
    }

    /// `guard`'s decision about the call `facts` describes, and whether its
    /// provider failed: errors per its `fail_closed`, interrupts passed
    /// through, `ask` and `rewrite` settled ([`outcome`]), denials shadowed
    /// in `warn` and `observe` mode, logging and audit. `request` gives the
    /// request an audit event is made from, asked for only when there is a
    /// sink and an event.
    fn conclude<'r>(
        &self,
        guard: &Guard,
        this: &Call<'_>,
        facts: CallFacts<'_>,
        evaluation: Evaluation,
        path: &str,
        request: impl FnOnce() -> Cow<'r, GuardrailRequest>,
    ) -> Result<(GuardrailDecision, bool), ToolCallError> {
        let tool_name = facts.tool_name;
        let (decision, provider_error) = match evaluation {
            Ok(mut decision) => match outcome::take_requested(&mut decision) {
                Ok(None) => (decision, false),
                Ok(Some(requested)) => {
                    let settled = self.settle(guard, this, &facts, decision, requested);
                    return Ok(self.enforce(guard, tool_name, settled, request));
                }
                Err(problem) => self.failed(guard, tool_name, path, &problem),
            },
            Err(ProviderFailure::Interrupt(interrupt)) => return Err(ToolCallError::Interrupt(interrupt)),
            Err(error) => self.failed(guard, tool_name, path, &error),
        };
        Ok(self.enforce(guard, tool_name, (decision, provider_error), request))
    }

    /// The decision `guard`'s `fail_closed` makes when its provider failed.
    fn failed(
        &self,
        guard: &Guard,
        tool_name: &str,
        path: &str,
        error: &dyn std::fmt::Display,
    ) -> (GuardrailDecision, bool) {
        tracing::error!(provider = %guard.provider.name(), tool = %tool_name, "Guardrail provider error ({path}): {error}");
        let decision = if guard.fail_closed {
            GuardrailDecision::with_reason(
                false,
                "oap.evaluator_error",
                "guardrail provider error (fail-closed)",
            )
        } else {
            GuardrailDecision::with_reason(
                true,
                "oap.evaluator_error",
                "guardrail provider error (fail-open)",
            )
        };
        (decision, true)
    }

    /// What a provider's `ask` or `rewrite` comes to for this call: a
    /// rewrite allows with the new arguments; an ask is approved by an
    /// approval of this exact call in the context, refused by any other,
    /// and held (not allowed, the [`Ask`] in the metadata) without one.
    fn settle(
        &self,
        guard: &Guard,
        this: &Call<'_>,
        facts: &CallFacts<'_>,
        mut decision: GuardrailDecision,
        requested: Requested,
    ) -> (GuardrailDecision, bool) {
        let tool_name = facts.tool_name;
        match requested {
            Requested::Rewrite(args) => {
                decision.allow = true;
                if decision.reasons.is_empty() {
                    decision.reasons.push(GuardrailReason::new(
                        "guardhost.rewrite",
                        format!("entry '{}' rewrote the arguments of tool '{tool_name}'", guard.name),
                    ));
                }
                decision
                    .metadata
                    .insert(OUTCOME_KEY.into(), serde_json::json!({"rewrite": {"tool_input": args}}));
                (decision, false)
            }
            Requested::Ask { approvers, timeout_s } => {
                let settled = outcome::approvals(this.call.context.as_ref())
                    .map(|approvals| outcome::settle(&guard.name, facts, approvers, timeout_s, &approvals));
                let decision = match settled {
                    Ok(Settled::Held(ask)) => {
                        if decision.reasons.is_empty() {
                            let by = match ask.approvers.is_empty() {
                                true => String::new(),
                                false => format!(" by one of {:?}", ask.approvers),
                            };
                            decision.reasons.push(GuardrailReason::new(
                                "guardhost.ask",
                                format!("tool '{tool_name}' must be approved{by} before it runs"),
                            ));
                        }
                        decision.allow = false;
                        decision.metadata.insert(OUTCOME_KEY.into(), ask.to_metadata());
                        decision
                    }
                    Ok(Settled::Approved(by)) => {
                        let message = match &by {
                            Some(by) => format!("approved by '{by}'"),
                            None => "approved".to_owned(),
                        };
                        let mut approved =
                            outcome::with_first_reason(true, "guardhost.approved", message, decision);
                        approved.metadata.insert("approved_by".into(), Value::from(by));
                        approved
                    }
                    Ok(Settled::Refused(code, message)) => {
                        outcome::with_first_reason(false, code, message, decision)
                    }
                    Err(problem) => {
                        outcome::with_first_reason(false, "guardhost.bad_approval", problem, decision)
                    }
                };
                (decision, false)
            }
        }
    }

    /// Logs, audits, and in `warn` or `observe` mode shadows `guard`'s
    /// decision.
    fn enforce<'r>(
        &self,
        guard: &Guard,
        tool_name: &str,
        (decision, provider_error): (GuardrailDecision, bool),
        request: impl FnOnce() -> Cow<'r, GuardrailRequest>,
    ) -> (GuardrailDecision, bool) {
        let kind = Kind::of(&decision, provider_error);
        if kind == Kind::Allow {
            return (decision, provider_error);
        }
        if guard.mode != Mode::Enforce
            && matches!(kind, Kind::Deny | Kind::ErrorDeny | Kind::Ask | Kind::Rewrite)
        {
            let code = decision.reasons.first().map_or("oap.denied", |r| &*r.code);
            let would = match kind {
                Kind::Ask => "ask for approval",
                Kind::Rewrite => "rewrite the arguments",
                _ => "deny",
            };
            match guard.mode {
                Mode::Warn => tracing::warn!(
                    "Guardrail would {would} (warn mode; the call runs): tool={} policy={} code={}",
                    tool_name,
                    decision.policy_id.as_deref().unwrap_or("None"),
                    code
                ),
                _ => tracing::debug!(
                    "Guardrail would {would} (observe mode; the call runs): tool={tool_name} code={code}"
                ),
            }
            if !decision.allow {
                self.record(guard, request, &decision, AuditAction::WouldDenyToolCall, provider_error);
            }
            return (shadowed(decision, guard.mode), provider_error);
        }
        match kind {
            Kind::Deny | Kind::ErrorDeny => {
                if !provider_error {
                    tracing::warn!(
                        "Guardrail denied: tool={} policy={} code={}",
                        tool_name,
                        decision.policy_id.as_deref().unwrap_or("None"),
                        decision.reasons.first().map_or("unknown", |r| &*r.code)
                    );
                }
                self.record(guard, request, &decision, AuditAction::DenyToolCall, provider_error);
            }
            Kind::ErrorAllow => {
                self.record(guard, request, &decision, AuditAction::AllowToolCallAfterProviderError, true)
            }
            Kind::Ask => {
                tracing::info!(entry = %guard.name, "Guardrail holds the call for approval: tool={tool_name}");
                self.record(guard, request, &decision, AuditAction::AskToolCall, false);
            }
            Kind::Approved => {
                tracing::info!(entry = %guard.name, "Guardrail approval accepted: tool={tool_name}");
                self.record(guard, request, &decision, AuditAction::ApprovedToolCall, false);
            }
            Kind::Rewrite => {
                tracing::info!(entry = %guard.name, "Guardrail rewrote the arguments: tool={tool_name}");
                self.record(guard, request, &decision, AuditAction::RewriteToolCall, false);
            }
            _ => {}
        }
        (decision, provider_error)
    }

    fn record<'r>(
        &self,
        guard: &Guard,
        request: impl FnOnce() -> Cow<'r, GuardrailRequest>,
        decision: &GuardrailDecision,
        action: AuditAction,
        provider_error: bool,
    ) {
        let by = (guard.fail_closed, &guard.audit_provider, guard.verbatim_messages);
        self.record_by(by, request, decision, action, provider_error);
    }

    /// [`Self::record`] of a decision made with `fail_closed` by
    /// `provider`.
    fn record_by<'r>(
        &self,
        (fail_closed, provider, verbatim): (bool, &AuditProvider, bool),
        request: impl FnOnce() -> Cow<'r, GuardrailRequest>,
        decision: &GuardrailDecision,
        action: AuditAction,
        provider_error: bool,
    ) {
        let Some(sink) = &self.audit else { return };
        let mut request = request();
        if request.timestamp.is_empty() {
            // No provider read the call's time (see `now`): it is now.
            request.to_mut().timestamp = Timestamp::now().as_str().to_owned();
        }
        let record = AuditRecord {
            action,
            request: &request,
            decision,
            fail_closed,
            provider_error,
            provider,
            verbatim,
        };
        if let Err(error) = sink.record_call(&record) {
            tracing::warn!("Failed to record middleware:guardrail event: {error}");
        }
    }
}

/// Whether a provider decided from the borrowed view, or needs the owned
/// request (built, its arguments still to be moved in).
enum Asked {
    Decided(Result<(GuardrailDecision, bool), ToolCallError>),
    Not(Box<GuardrailRequest>),
}

/// A provider's answer about the borrowed view on the async path: at once
/// (it never blocks), or to be awaited.
enum Answered<'a> {
    Now(Ruled),
    Later(BoxFuture<'a, Evaluation>),
}

impl ToolCallMiddleware for GuardrailMiddleware {
    fn wrap_tool_call(&self, request: ToolCallRequest, handler: SyncHandler<'_>) -> ToolResult {
        GuardrailMiddleware::wrap_tool_call(self, request, handler)
    }

    fn awrap_tool_call<'a>(
        &'a self,
        request: ToolCallRequest,
        handler: AsyncHandler,
    ) -> BoxFuture<'a, ToolResult> {
        Box::pin(GuardrailMiddleware::awrap_tool_call(self, request, handler))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_without_context_is_attributed_as_one_with_an_empty_context() {
        let read = |context: Option<&Map<String, Value>>| format!("{:?}", Attribution::of(context).unwrap());
        assert_eq!(format!("{NO_ATTRIBUTION:?}"), read(None));
        assert_eq!(format!("{NO_ATTRIBUTION:?}"), read(Some(&Map::new())));
    }
}
