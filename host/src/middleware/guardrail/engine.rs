//! The decision engine: the guards of one call asked in order, each
//! provider's answer concluded (failures, outcomes, the mode), until one
//! decides.
//!
//! [`Deciding`] is one call being decided, and every way in drives it: it
//! refuses a tool name the host refuses, yields the guards that select the
//! call, concludes each answer, follows rewrites, tallies, and finishes
//! (the decision named, the decision log written). What differs between
//! the ways in is only how a provider is asked: [`Deciding::ask`]
//! (synchronously, through the borrowed view where the provider can),
//! [`Deciding::ask_now`] and [`Deciding::ask_later`] (the async path), or
//! by the caller ([`GuardrailMiddleware::adecide_text_with`] hands each
//! evaluation out).
//! An outcome is added in `conclude`, `settle` and `enforce`, once.

use std::borrow::Cow;
use std::ops::ControlFlow;
use std::time::Instant;

use serde_json::{Map, Value};

use super::shadow::shadowed;
use super::GuardrailMiddleware;
use crate::audit::{AuditAction, AuditProvider};
use crate::config::Mode;
use crate::decision_log::{ChainStep, Decided};
use crate::middleware::guard::Guard;
use crate::middleware::ToolCallError;
use crate::outcome::{self, CallFacts, Kind, Requested, Settled, OUTCOME_KEY};
use crate::provider::{Evaluation, ProviderFailure, Ruled, Ruling};
use crate::request::{
    Attribution, CallView, GuardrailDecision, GuardrailReason, GuardrailRequest, Held, ToolCallRequest,
};
use crate::tool_name;

/// What the guards of one call came to, as they are asked.
pub(super) struct Tally {
    /// Whether the middleware is a chain (more than one guard, or a guard
    /// that sees only some calls): its decisions name the guard.
    pub(super) chain: bool,
    /// The decision to report, whether its provider failed, and its guard.
    pub(super) reported: Option<(GuardrailDecision, bool, usize)>,
    /// Each guard asked (chains with a decision log only).
    pub(super) steps: Vec<ChainStep>,
    /// Whether to keep `steps`.
    pub(super) keep_steps: bool,
    /// Whether a guard rewrote the call's arguments.
    pub(super) rewrote: bool,
}

impl Tally {
    #[inline(always)]
    pub(super) fn new(middleware: &GuardrailMiddleware) -> Self {
        let chain = middleware.is_chain();
        let keep_steps = chain && middleware.decision_log.is_some();
        Tally { chain, reported: None, steps: Vec::new(), keep_steps, rewrote: false }
    }

    /// Takes guard `index`'s conclusion; `false` when the call is decided
    /// (denied, or held for approval) and no later guard is asked. The
    /// decision reported is the denial, else the first allow worth telling
    /// (a rewrite, an approval, after a provider error, or a denial in
    /// `warn` or `observe` mode), else the last allow.
    pub(super) fn add(
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
pub(super) fn no_provider() -> AuditProvider {
    AuditProvider { name: "none".into(), sha256: None }
}

/// No guard of a chain selects the call: it runs.
pub(super) fn unselected(tool_name: &str) -> GuardrailDecision {
    GuardrailDecision::with_reason(
        true,
        "guardhost.not_selected",
        &format!("no guardrail entry decides tool '{tool_name}' (each selects other tools)"),
    )
}

/// The arguments of the call being decided: lent by the caller (a
/// provider that needs the owned request gets them moved in, and they are
/// given back), or only borrowed (such a provider gets a copy).
pub(super) enum Args<'a> {
    Lent(&'a mut Map<String, Value>),
    Borrowed(&'a Map<String, Value>),
    /// Borrowed, then rewritten by a guard.
    Owned(Map<String, Value>),
}

impl Args<'_> {
    pub(super) fn get(&self) -> &Map<String, Value> {
        match self {
            Args::Lent(args) => args,
            Args::Borrowed(args) => args,
            Args::Owned(args) => args,
        }
    }

    pub(super) fn take(&mut self) -> Map<String, Value> {
        match self {
            Args::Lent(args) => std::mem::take(*args),
            Args::Borrowed(args) => (*args).clone(),
            Args::Owned(args) => std::mem::take(args),
        }
    }

    pub(super) fn give_back(&mut self, args: Map<String, Value>) {
        match self {
            Args::Lent(lent) => **lent = args,
            Args::Owned(owned) => *owned = args,
            Args::Borrowed(_) => {}
        }
    }

    /// Takes the arguments a guard's decision rewrote the call to, if it
    /// did (`true`): later guards see them, and the tool runs with them.
    pub(super) fn follow(&mut self, concluded: &Conclusion) -> bool {
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
pub(super) struct Call<'c> {
    pub(super) call: &'c ToolCallRequest,
    pub(super) timestamp: &'c str,
    /// `None` when the call has no context (every field at its default).
    pub(super) attribution: Option<Attribution<'c>>,
    /// The arguments' JSON text as the call arrived with it, until a guard
    /// rewrites them.
    pub(super) args_text: Option<&'c str>,
}

impl<'c> Call<'c> {
    pub(super) fn new(
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
    pub(super) fn follow(&mut self, args: &mut Args<'_>, concluded: &Conclusion) {
        if args.follow(concluded) {
            self.args_text = None;
        }
    }

    pub(super) fn tool_name(&self) -> &'c str {
        self.call.tool_call.name.as_deref().unwrap_or_default()
    }

    /// The call as `guard`'s provider sees it, with `args`.
    pub(super) fn view<'v>(&'v self, guard: &'v Guard, args: &'v Map<String, Value>) -> CallView<'v> {
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
pub(super) static NO_ATTRIBUTION: Attribution<'static> = Attribution {
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
pub(super) type Concluded = (GuardrailDecision, bool, Option<usize>);

/// A guard's ruling: what the guards came to when it is a plain allow of
/// a guard `alone` (the decision as it stands: see
/// [`GuardrailMiddleware::is_plain`]), else the evaluation to conclude.
#[inline(always)]
pub(super) fn plain_allow(ruled: Ruled, alone: bool, index: usize) -> ControlFlow<Reached, Evaluation> {
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
pub(super) enum Reached {
    /// The reason, and the guard's place.
    Allowed(GuardrailReason, usize),
    Concluded(Concluded),
}

impl Reached {
    pub(super) fn into_concluded(self) -> Concluded {
        match self {
            Reached::Allowed(reason, index) => (Ruling::Allow(reason).into_decision(), false, Some(index)),
            Reached::Concluded(concluded) => concluded,
        }
    }
}

/// One call being decided (see the module's documentation).
pub(super) struct Deciding<'m, 'c, 'd> {
    middleware: &'m GuardrailMiddleware,
    /// The call, kept by the caller (not moved here: it is large).
    this: &'d mut Call<'c>,
    args: Args<'c>,
    tally: Tally,
    started: Option<Instant>,
    /// Whether a guard's plain allow is the call's decision as it stands
    /// ([`plain_allow`]).
    alone: bool,
}

impl<'m, 'c, 'd> Deciding<'m, 'c, 'd> {
    /// Starts deciding the call `this` (made by [`Call::new`], which is
    /// what can fail), whose arguments are `args`. `alone`: whether a
    /// guard's plain allow may end the decision at once (a caller that
    /// records each answer says no). `Err`: the host refused the call's
    /// tool name, and that is the decision: no guard is asked.
    #[inline(always)]
    #[expect(
        clippy::result_large_err,
        reason = "inlined where it is matched, and `Ok` is as large: boxing the rare refusal saves nothing"
    )]
    pub(super) fn new(
        middleware: &'m GuardrailMiddleware,
        this: &'d mut Call<'c>,
        args: Args<'c>,
        started: Option<Instant>,
        alone: bool,
    ) -> Result<Self, Reached> {
        if let Some(refused) = middleware.refuse_name(this, args.get(), started) {
            return Err(Reached::Concluded((refused, false, None)));
        }
        Ok(Deciding { middleware, this, args, tally: Tally::new(middleware), started, alone })
    }

    /// The guards to ask, in order, with their places: those that select
    /// the call.
    #[inline(always)]
    pub(super) fn guards(&self) -> impl Iterator<Item = (usize, &'m Guard)> + use<'m, 'c> {
        let tool_name = self.this.tool_name();
        let guards = self.middleware.guards.iter().enumerate();
        guards.filter(move |(_, guard)| guard.selects(tool_name))
    }

    /// Ends the decision with a guard's plain allow (a `Break` of
    /// [`Self::ask`], [`Self::ask_now`] or [`Self::ask_later`]). That
    /// happens only to a guard alone, at the first answer, before any was
    /// taken: the tally is empty and the arguments are still lent or
    /// borrowed, so nothing here owns memory, and the engine is let go
    /// without its drop glue (some 30 instructions the hot path would pay
    /// for nothing: BENCHMARKS.md's instruction counts).
    #[inline(always)]
    pub(super) fn allowed(self, reached: Reached) -> Reached {
        debug_assert!(
            self.tally.reported.is_none()
                && self.tally.steps.capacity() == 0
                && !matches!(self.args, Args::Owned(_)),
            "a plain allow ended a decision that had taken an answer"
        );
        std::mem::forget(self);
        reached
    }

    /// The call as `guard`'s provider sees it.
    #[inline(always)]
    pub(super) fn view<'v>(&'v self, guard: &'v Guard) -> CallView<'v> {
        self.this.view(guard, self.args.get())
    }

    /// The arguments' JSON text, until a guard rewrites them.
    pub(super) fn args_text(&self) -> Option<&'c str> {
        self.this.args_text
    }

    /// Asks `guard` (at `index`) synchronously: through the borrowed view
    /// where its provider can, else through the owned request. `Break`: a
    /// plain allow that is the call's decision as it stands.
    #[inline(always)]
    pub(super) fn ask(&mut self, index: usize, guard: &Guard) -> ControlFlow<Reached, Conclusion> {
        {
            let view = self.view(guard);
            if let Some(ruled) = guard.provider.rule_view(&view) {
                return self.ruled(index, guard, &view, ruled, "sync");
            }
        }
        let mut request = self.request(guard);
        let evaluation = guard.provider.evaluate(&request);
        ControlFlow::Continue(self.evaluated(guard, &mut request, evaluation, "sync"))
    }

    /// [`Self::ask`] on the async path, as far as it goes without waiting:
    /// a provider that never blocks is asked through the borrowed view as
    /// on the sync path (no future to make, box or wait for). `None`: ask
    /// with [`Self::ask_later`].
    #[inline(always)]
    pub(super) fn ask_now(
        &mut self,
        index: usize,
        guard: &Guard,
    ) -> Option<ControlFlow<Reached, Conclusion>> {
        if !guard.provider.never_blocks() {
            return None;
        }
        let view = self.view(guard);
        let ruled = guard.provider.rule_view(&view)?;
        Some(self.ruled(index, guard, &view, ruled, "async"))
    }

    /// [`Self::ask`] on the async path, awaited: through the borrowed view
    /// where the provider takes it, else the owned request.
    pub(super) async fn ask_later(
        &mut self,
        index: usize,
        guard: &Guard,
    ) -> ControlFlow<Reached, Conclusion> {
        if !guard.provider.never_blocks() {
            let view = self.view(guard);
            // Bound, so that the provider's future is gone before `view`.
            let answer = guard.provider.aevaluate_view(&view);
            if let Some(future) = answer {
                let ruled = future.await.map(Ruling::Decision);
                return self.ruled(index, guard, &view, ruled, "async");
            }
        }
        let mut request = self.request(guard);
        let evaluation = guard.provider.aevaluate(&request).await;
        ControlFlow::Continue(self.evaluated(guard, &mut request, evaluation, "async"))
    }

    /// `guard`'s ruling about the call `view` shows, concluded; `Break`
    /// for a plain allow of a guard alone.
    #[inline(always)]
    fn ruled(
        &self,
        index: usize,
        guard: &Guard,
        view: &CallView<'_>,
        ruled: Ruled,
        path: &str,
    ) -> ControlFlow<Reached, Conclusion> {
        let evaluation = plain_allow(ruled, self.alone, index)?;
        ControlFlow::Continue(self.middleware.conclude_view(guard, self.this, view, evaluation, path))
    }

    /// The owned request for `guard`'s provider, the call's arguments
    /// moved in (or copied, when only borrowed): [`Self::evaluated`] gives
    /// them back.
    fn request(&mut self, guard: &Guard) -> Box<GuardrailRequest> {
        let mut request = Box::new(self.view(guard).to_request_with(Map::new()));
        request.tool_input = self.args.take();
        request
    }

    /// `guard`'s evaluation of `request` (from [`Self::request`]),
    /// concluded; the arguments given back.
    fn evaluated(
        &mut self,
        guard: &Guard,
        request: &mut GuardrailRequest,
        evaluation: Evaluation,
        path: &str,
    ) -> Conclusion {
        let concluded = self.conclude(guard, request, evaluation, path);
        self.args.give_back(std::mem::take(&mut request.tool_input));
        concluded
    }

    /// `guard`'s evaluation of `request`, concluded.
    pub(super) fn conclude(
        &self,
        guard: &Guard,
        request: &GuardrailRequest,
        evaluation: Evaluation,
        path: &str,
    ) -> Conclusion {
        let facts = CallFacts::of_request(request);
        self.middleware.conclude(guard, self.this, facts, evaluation, path, || Cow::Borrowed(request))
    }

    /// Takes guard `index`'s conclusion: its rewrite followed (later guards
    /// and the tool see the new arguments), tallied. `Ok(false)` when the
    /// call is decided (denied, or held for approval) and no later guard
    /// is asked; an interrupt is logged and returned.
    #[inline(always)]
    pub(super) fn take(
        &mut self,
        index: usize,
        guard: &Guard,
        concluded: Conclusion,
    ) -> Result<bool, ToolCallError> {
        self.this.follow(&mut self.args, &concluded);
        let (middleware, args) = (self.middleware, self.args.get());
        middleware.tally(&mut self.tally, index, guard, concluded, self.this, args, self.started)
    }

    /// What the guards came to: the decision named by its guard in a
    /// chain, and written to the decision log.
    // Not inlined: called, it writes the decision where the caller keeps
    // it; inlined, the decision was copied twice more on the way out (18
    // instructions more on every denial, by `scripts/instructions`).
    #[inline(never)]
    pub(super) fn finish(self) -> Concluded {
        self.middleware.finish(self.tally, self.this, self.args.get(), self.started)
    }
}

/// A guard's decision, and whether its provider failed, once concluded;
/// or an interrupt to pass on.
pub(super) type Conclusion = Result<(GuardrailDecision, bool), ToolCallError>;

impl GuardrailMiddleware {
    /// Asks the guards in order, synchronously, until one denies.
    pub(super) fn decide_sync(
        &self,
        call: &ToolCallRequest,
        args: Args<'_>,
        args_text: Option<&str>,
        timestamp: &str,
        started: Option<Instant>,
    ) -> Result<Reached, ToolCallError> {
        let mut this = Call::new(call, timestamp, args_text)?;
        let mut deciding = match Deciding::new(self, &mut this, args, started, self.is_plain()) {
            Ok(deciding) => deciding,
            Err(refused) => return Ok(refused),
        };
        for (index, guard) in deciding.guards() {
            let concluded = match deciding.ask(index, guard) {
                ControlFlow::Break(reached) => return Ok(deciding.allowed(reached)),
                ControlFlow::Continue(concluded) => concluded,
            };
            if !deciding.take(index, guard, concluded)? {
                break;
            }
        }
        Ok(Reached::Concluded(deciding.finish()))
    }

    /// [`Self::decide_sync`] on the async path.
    pub(super) async fn decide_async(
        &self,
        call: &ToolCallRequest,
        args: Args<'_>,
        args_text: Option<&str>,
        timestamp: &str,
        started: Option<Instant>,
    ) -> Result<Reached, ToolCallError> {
        let mut this = Call::new(call, timestamp, args_text)?;
        let mut deciding = match Deciding::new(self, &mut this, args, started, self.is_plain()) {
            Ok(deciding) => deciding,
            Err(refused) => return Ok(refused),
        };
        for (index, guard) in deciding.guards() {
            let asked = match deciding.ask_now(index, guard) {
                Some(asked) => asked,
                None => deciding.ask_later(index, guard).await,
            };
            let concluded = match asked {
                ControlFlow::Break(reached) => return Ok(deciding.allowed(reached)),
                ControlFlow::Continue(concluded) => concluded,
            };
            if !deciding.take(index, guard, concluded)? {
                break;
            }
        }
        Ok(Reached::Concluded(deciding.finish()))
    }

    /// The host's denial of a call whose tool name it refuses
    /// ([`crate::tool_name`]), made before any guard is asked: logged,
    /// audited (provider `none`) and written to the decision log as any
    /// denial. `None` for a name it accepts. No mode shadows it.
    pub(super) fn refuse_name(
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

    /// [`Self::conclude`] for `guard`'s answer about the call `view` shows.
    pub(super) fn conclude_view(
        &self,
        guard: &Guard,
        this: &Call<'_>,
        view: &CallView<'_>,
        evaluation: Evaluation,
        path: &str,
    ) -> Conclusion {
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
    pub(super) fn conclude<'r>(
        &self,
        guard: &Guard,
        this: &Call<'_>,
        facts: CallFacts<'_>,
        evaluation: Evaluation,
        path: &str,
        request: impl FnOnce() -> Cow<'r, GuardrailRequest>,
    ) -> Conclusion {
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
    pub(super) fn failed(
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
    pub(super) fn settle(
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
    pub(super) fn enforce<'r>(
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Attribution;

    #[test]
    fn a_call_without_context_is_attributed_as_one_with_an_empty_context() {
        let read = |context: Option<&Map<String, Value>>| format!("{:?}", Attribution::of(context).unwrap());
        assert_eq!(format!("{NO_ATTRIBUTION:?}"), read(None));
        assert_eq!(format!("{NO_ATTRIBUTION:?}"), read(Some(&Map::new())));
    }
}
