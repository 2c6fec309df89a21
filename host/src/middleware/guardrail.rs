//! `GuardrailMiddleware`: asks the provider before every tool call.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Map;

use crate::audit::{AuditAction, AuditProvider, AuditRecord, AuditSink};
use crate::config::Mode;
use crate::decision_log::{Decided, DecisionLog};
use crate::middleware::{AsyncHandler, SyncHandler, ToolCallError, ToolCallMiddleware, ToolResult};
use crate::provider::{BoxFuture, Evaluation, GuardrailProvider, ProviderFailure};
use crate::request::{
    CallView, GuardrailDecision, GuardrailRequest, Timestamp, ToolCall, ToolCallRequest, ToolMessage,
    ToolStatus,
};

/// Evaluates every tool call against a provider before it runs.
///
/// A denied call is not an error: it becomes a tool message with
/// `status: error` that tells the agent why, so the run goes on. When the
/// provider fails, `fail_closed` (default true) blocks the call; otherwise it
/// runs. A provider's control-flow interrupt is returned as
/// [`ToolCallError::Interrupt`], never turned into a decision.
#[derive(Clone)]
pub struct GuardrailMiddleware {
    provider: Arc<dyn GuardrailProvider>,
    fail_closed: bool,
    mode: Mode,
    passport: Option<String>,
    audit: Option<Arc<dyn AuditSink>>,
    /// Who decides, as audit events name it.
    audit_provider: AuditProvider,
    decision_log: Option<Arc<DecisionLog>>,
}

impl std::fmt::Debug for GuardrailMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardrailMiddleware")
            .field("provider", &self.provider.name())
            .field("fail_closed", &self.fail_closed)
            .field("mode", &self.mode)
            .field("passport", &self.passport)
            .field("audit", &self.audit.is_some())
            .field("decision_log", &self.decision_log.is_some())
            .finish()
    }
}

/// One call's evaluation by the provider, owned, to run anywhere (see
/// [`GuardrailMiddleware::adecide_with`]).
pub struct ToEvaluate {
    provider: Arc<dyn GuardrailProvider>,
    request: Arc<GuardrailRequest>,
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
        crate::provider::evaluate_here(&*self.provider, &self.request, true)
    }
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
}

/// What a denial becomes in `warn` or `observe` mode: an allow, whose one
/// reason (`guardhost.shadow`) says what would have been denied, and whose
/// metadata adds `mode` and `would_deny` (`code`, `message`, `policy_id`,
/// every `reasons`), as the OAP provider's own modes do. Decisions that
/// allow, and `enforce` mode, pass unchanged.
pub fn shadowed(decision: GuardrailDecision, mode: Mode) -> GuardrailDecision {
    if decision.allow || mode == Mode::Enforce {
        return decision;
    }
    let GuardrailDecision { reasons, policy_id, mut metadata, .. } = decision;
    let (code, message) = match reasons.first() {
        Some(reason) => (reason.code.clone(), reason.message.clone()),
        None => ("oap.denied".to_owned(), "blocked by guardrail policy".to_owned()),
    };
    metadata.insert("mode".into(), serde_json::Value::from(mode.as_str()));
    metadata.insert(
        "would_deny".into(),
        serde_json::json!({"code": code, "message": message, "policy_id": policy_id, "reasons": reasons}),
    );
    GuardrailDecision {
        allow: true,
        reasons: vec![crate::GuardrailReason::new(
            "guardhost.shadow",
            format!("{mode} mode: would have denied ({code}): {message}"),
        )],
        policy_id,
        metadata,
    }
}

/// The tool message a denied call gets.
pub fn denied_message(call: &ToolCall, decision: &GuardrailDecision) -> ToolMessage {
    let tool_name = call.name.as_deref().unwrap_or("unknown_tool");
    let tool_call_id = match (&call.id, call.null_id) {
        (Some(id), _) => id.as_str(),
        (None, true) => "None",
        (None, false) => "missing_id",
    };
    let (code, message) = match decision.reasons.first() {
        Some(reason) => (reason.code.as_str(), reason.message.as_str()),
        None => ("oap.denied", "blocked by guardrail policy"),
    };
    ToolMessage {
        content: format!(
            "Guardrail denied: tool '{tool_name}' was blocked ({code}). Reason: {message}. Choose an alternative approach."
        ),
        tool_call_id: tool_call_id.to_owned(),
        name: Some(tool_name.to_owned()),
        status: ToolStatus::Error,
    }
}

impl GuardrailMiddleware {
    /// A middleware around `provider`, failing closed, with no passport and
    /// no audit sink.
    pub fn new(provider: Arc<dyn GuardrailProvider>) -> Self {
        let audit_provider = AuditProvider { name: provider.name().to_owned(), sha256: None };
        GuardrailMiddleware {
            provider,
            fail_closed: true,
            mode: Mode::Enforce,
            passport: None,
            audit: None,
            audit_provider,
            decision_log: None,
        }
    }

    /// Sets `fail_closed`.
    pub fn with_fail_closed(mut self, fail_closed: bool) -> Self {
        self.fail_closed = fail_closed;
        self
    }

    /// Sets what a denial does (`guardrails.mode`): in `warn` and
    /// `observe` mode, a denied call runs all the same; see [`shadowed`].
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// What a denial does.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Sets the passport (becomes every request's `agent_id`).
    pub fn with_passport(mut self, passport: Option<String>) -> Self {
        self.passport = passport;
        self
    }

    /// Sets the SHA-256 of the provider's library, which audit events
    /// carry to say exactly which library decided ([`crate::install`] sets
    /// it).
    pub fn with_library_sha256(mut self, sha256: Option<String>) -> Self {
        self.audit_provider.sha256 = sha256;
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

    /// Sets the audit sink.
    pub fn with_audit_sink(mut self, sink: Arc<dyn AuditSink>) -> Self {
        self.audit = Some(sink);
        self
    }

    /// The provider.
    pub fn provider(&self) -> &Arc<dyn GuardrailProvider> {
        &self.provider
    }

    /// Whether provider errors block calls.
    pub fn fail_closed(&self) -> bool {
        self.fail_closed
    }

    /// The passport.
    pub fn passport(&self) -> Option<&str> {
        self.passport.as_deref()
    }

    /// Decides a call synchronously without running anything.
    pub fn check(&self, call: &ToolCallRequest) -> Result<Verdict, ToolCallError> {
        let started = self.started();
        let request = GuardrailRequest::from_tool_call(call, self.passport.as_deref())?;
        let evaluation = self.provider.evaluate(&request);
        self.settle(request, evaluation, "sync", started)
    }

    /// Decides a call asynchronously (through the provider's `aevaluate`)
    /// without running anything.
    pub async fn acheck(&self, call: &ToolCallRequest) -> Result<Verdict, ToolCallError> {
        let started = self.started();
        let request = GuardrailRequest::from_tool_call(call, self.passport.as_deref())?;
        let evaluation = self.provider.aevaluate(&request).await;
        self.settle(request, evaluation, "async", started)
    }

    /// The synchronous wrapper: decide, then run `handler` or return the
    /// denial.
    pub fn wrap_tool_call(&self, mut call: ToolCallRequest, handler: SyncHandler<'_>) -> ToolResult {
        let started = self.started();
        let args = std::mem::take(&mut call.tool_call.args);
        let now = Timestamp::now();
        let asked = {
            let view = CallView::new(&call, &args, self.passport.as_deref(), now.as_str())?;
            match self.provider.evaluate_view(&view) {
                Some(evaluation) => {
                    Asked::Decided(self.denial_view(&call.tool_call, &view, evaluation, "sync", started)?)
                }
                None => Asked::Not(view.to_request_with(Map::new())),
            }
        };
        let denied = match asked {
            Asked::Decided(denied) => {
                call.tool_call.args = args;
                denied
            }
            Asked::Not(mut request) => {
                request.tool_input = args;
                let evaluation = self.provider.evaluate(&request);
                let verdict = self.settle(request, evaluation, "sync", started)?;
                Self::take_back(&mut call, verdict)
            }
        };
        match denied {
            None => handler(call),
            Some(denied) => Ok(denied),
        }
    }

    /// The asynchronous wrapper.
    pub async fn awrap_tool_call(&self, mut call: ToolCallRequest, handler: AsyncHandler) -> ToolResult {
        let started = self.started();
        let args = std::mem::take(&mut call.tool_call.args);
        let now = Timestamp::now();
        let asked = {
            let view = CallView::new(&call, &args, self.passport.as_deref(), now.as_str())?;
            // Bound, so that the provider's future is gone before `view`.
            let asked = match self.provider.aevaluate_view(&view) {
                Some(evaluation) => {
                    let evaluation = evaluation.await;
                    Asked::Decided(self.denial_view(&call.tool_call, &view, evaluation, "async", started)?)
                }
                None => Asked::Not(view.to_request_with(Map::new())),
            };
            asked
        };
        let denied = match asked {
            Asked::Decided(denied) => {
                call.tool_call.args = args;
                denied
            }
            Asked::Not(mut request) => {
                request.tool_input = args;
                let evaluation = self.provider.aevaluate(&request).await;
                let verdict = self.settle(request, evaluation, "async", started)?;
                Self::take_back(&mut call, verdict)
            }
        };
        match denied {
            None => handler(call).await,
            Some(denied) => Ok(denied),
        }
    }

    /// Decides `call` as the wrapping paths do, through the borrowed view
    /// when the provider can (no owned request is built, nothing is
    /// copied), and runs nothing: the decision to act on and whether the
    /// provider failed. [`Self::check`] is the same decision with the
    /// request the provider saw.
    pub fn decide(&self, call: &ToolCallRequest) -> Result<(GuardrailDecision, bool), ToolCallError> {
        let started = self.started();
        let now = Timestamp::now();
        let view = CallView::new(call, &call.tool_call.args, self.passport.as_deref(), now.as_str())?;
        match self.provider.evaluate_view(&view) {
            Some(evaluation) => self.conclude_view(&view, evaluation, "sync", started),
            None => {
                let request = view.to_request();
                let evaluation = self.provider.evaluate(&request);
                self.conclude(&view, evaluation, "sync", started, || Cow::Borrowed(&request))
            }
        }
    }

    /// [`Self::decide`] on the async path (the provider's `aevaluate`).
    pub async fn adecide(&self, call: &ToolCallRequest) -> Result<(GuardrailDecision, bool), ToolCallError> {
        let started = self.started();
        let now = Timestamp::now();
        let view = CallView::new(call, &call.tool_call.args, self.passport.as_deref(), now.as_str())?;
        // Bound, so that the provider's future is gone before `view`.
        let decided = match self.provider.aevaluate_view(&view) {
            Some(evaluation) => {
                let evaluation = evaluation.await;
                self.conclude_view(&view, evaluation, "async", started)
            }
            None => {
                let request = view.to_request();
                let evaluation = self.provider.aevaluate(&request).await;
                self.conclude(&view, evaluation, "async", started, || Cow::Borrowed(&request))
            }
        };
        decided
    }

    /// [`Self::adecide`], with the provider's evaluation handed to
    /// `evaluate` as an [`Evaluation`] to run: on another thread, say, or
    /// given up on at a deadline. What `evaluate` returns is the
    /// provider's answer: an `Err` is a provider error, decided by
    /// `fail_closed`, audited and logged as any other, once.
    pub async fn adecide_with<F, Fut>(
        &self,
        call: &ToolCallRequest,
        evaluate: F,
    ) -> Result<(GuardrailDecision, bool), ToolCallError>
    where
        F: FnOnce(ToEvaluate) -> Fut,
        Fut: std::future::Future<Output = Evaluation>,
    {
        let started = self.started();
        let now = Timestamp::now();
        let view = CallView::new(call, &call.tool_call.args, self.passport.as_deref(), now.as_str())?;
        let request = Arc::new(view.to_request());
        let evaluation =
            evaluate(ToEvaluate { provider: Arc::clone(&self.provider), request: Arc::clone(&request) })
                .await;
        self.conclude(&view, evaluation, "async", started, || Cow::Borrowed(&*request))
    }

    /// Gives `call` its arguments back; the denial message when denied.
    fn take_back(call: &mut ToolCallRequest, verdict: Verdict) -> Option<ToolMessage> {
        let Verdict { request, decision, .. } = verdict;
        call.tool_call.args = request.tool_input;
        (!decision.allow).then(|| denied_message(&call.tool_call, &decision))
    }

    /// [`Self::wrap_tool_call`], also returning the verdict.
    pub fn call_with_verdict(
        &self,
        call: ToolCallRequest,
        handler: SyncHandler<'_>,
    ) -> Result<(Verdict, ToolMessage), ToolCallError> {
        let verdict = self.check(&call)?;
        let message = if verdict.allowed() {
            handler(call)?
        } else {
            denied_message(&call.tool_call, &verdict.decision)
        };
        Ok((verdict, message))
    }

    /// [`Self::awrap_tool_call`], also returning the verdict.
    pub async fn acall_with_verdict(
        &self,
        call: ToolCallRequest,
        handler: AsyncHandler,
    ) -> Result<(Verdict, ToolMessage), ToolCallError> {
        let verdict = self.acheck(&call).await?;
        let message = if verdict.allowed() {
            handler(call).await?
        } else {
            denied_message(&call.tool_call, &verdict.decision)
        };
        Ok((verdict, message))
    }

    /// Turns the provider's answer into a verdict.
    fn settle(
        &self,
        request: GuardrailRequest,
        evaluation: Evaluation,
        path: &str,
        started: Option<Instant>,
    ) -> Result<Verdict, ToolCallError> {
        let (decision, provider_error) =
            self.conclude(&request.view(), evaluation, path, started, || Cow::Borrowed(&request))?;
        Ok(Verdict { request, decision, provider_error })
    }

    /// [`Self::conclude`] for the provider's answer about the call `view`
    /// shows.
    fn conclude_view(
        &self,
        view: &CallView<'_>,
        evaluation: Evaluation,
        path: &str,
        started: Option<Instant>,
    ) -> Result<(GuardrailDecision, bool), ToolCallError> {
        // An audit event never holds the arguments: its request needs none.
        self.conclude(view, evaluation, path, started, || Cow::Owned(view.to_request_with(Map::new())))
    }

    /// The denial message, if the provider's answer about the call `view`
    /// shows is a denial.
    fn denial_view(
        &self,
        call: &ToolCall,
        view: &CallView<'_>,
        evaluation: Evaluation,
        path: &str,
        started: Option<Instant>,
    ) -> Result<Option<ToolMessage>, ToolCallError> {
        let (decision, _) = self.conclude_view(view, evaluation, path, started)?;
        Ok((!decision.allow).then(|| denied_message(call, &decision)))
    }

    /// The decision to act on, and whether the provider failed: errors per
    /// `fail_closed`, interrupts passed through, logging and audit.
    /// `request` gives the request an audit event is made from, asked for
    /// only when there is a sink and an event.
    fn conclude<'r>(
        &self,
        view: &CallView<'_>,
        evaluation: Evaluation,
        path: &str,
        started: Option<Instant>,
        request: impl FnOnce() -> Cow<'r, GuardrailRequest>,
    ) -> Result<(GuardrailDecision, bool), ToolCallError> {
        let concluded = self.conclude_unlogged(view.tool_name, evaluation, path, request);
        if let (Some(log), Some(started)) = (&self.decision_log, started) {
            let decided = match &concluded {
                Ok((decision, provider_error)) => Decided::Decision(decision, *provider_error),
                Err(_) => Decided::Interrupt,
            };
            log.record_call(view, decided, self.mode, &self.audit_provider, started.elapsed());
        }
        concluded
    }

    /// [`Self::conclude`] before the decision log.
    fn conclude_unlogged<'r>(
        &self,
        tool_name: &str,
        evaluation: Evaluation,
        path: &str,
        request: impl FnOnce() -> Cow<'r, GuardrailRequest>,
    ) -> Result<(GuardrailDecision, bool), ToolCallError> {
        let (decision, provider_error) = match evaluation {
            Ok(decision) => (decision, false),
            Err(ProviderFailure::Interrupt(interrupt)) => return Err(ToolCallError::Interrupt(interrupt)),
            Err(error) => {
                tracing::error!(provider = %self.provider.name(), tool = %tool_name, "Guardrail provider error ({path}): {error}");
                let decision = if self.fail_closed {
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
        };
        if !decision.allow && self.mode != Mode::Enforce {
            let code = decision.reasons.first().map_or("oap.denied", |r| r.code.as_str());
            match self.mode {
                Mode::Warn => tracing::warn!(
                    "Guardrail would deny (warn mode; the call runs): tool={} policy={} code={}",
                    tool_name,
                    decision.policy_id.as_deref().unwrap_or("None"),
                    code
                ),
                _ => tracing::debug!(
                    "Guardrail would deny (observe mode; the call runs): tool={tool_name} code={code}"
                ),
            }
            self.record(request, &decision, AuditAction::WouldDenyToolCall, provider_error);
            return Ok((shadowed(decision, self.mode), provider_error));
        }
        if !decision.allow {
            if !provider_error {
                tracing::warn!(
                    "Guardrail denied: tool={} policy={} code={}",
                    tool_name,
                    decision.policy_id.as_deref().unwrap_or("None"),
                    decision.reasons.first().map_or("unknown", |r| r.code.as_str())
                );
            }
            self.record(request, &decision, AuditAction::DenyToolCall, provider_error);
        } else if provider_error {
            self.record(request, &decision, AuditAction::AllowToolCallAfterProviderError, true);
        }
        Ok((decision, provider_error))
    }

    fn record<'r>(
        &self,
        request: impl FnOnce() -> Cow<'r, GuardrailRequest>,
        decision: &GuardrailDecision,
        action: AuditAction,
        provider_error: bool,
    ) {
        let Some(sink) = &self.audit else { return };
        let request = request();
        let record = AuditRecord {
            action,
            request: &request,
            decision,
            fail_closed: self.fail_closed,
            provider_error,
            provider: &self.audit_provider,
        };
        if let Err(error) = sink.record_call(&record) {
            tracing::warn!("Failed to record middleware:guardrail event: {error}");
        }
    }
}

/// Whether the provider decided from the borrowed view, or needs the
/// owned request (built, its arguments still to be moved in). It lives on
/// the stack for one call: boxing the request would add an allocation.
#[allow(clippy::large_enum_variant)]
enum Asked {
    Decided(Option<ToolMessage>),
    Not(GuardrailRequest),
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
