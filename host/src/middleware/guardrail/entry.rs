//! The ways into the middleware: check, decide and wrap, sync and async,
//! with the arguments' JSON text or without, and the tool-call middleware
//! trait.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::denial::not_run;
use super::engine::{Args, Call, Deciding, Reached};
use super::GuardrailMiddleware;
use crate::middleware::{AsyncHandler, SyncHandler, ToolCallError, ToolCallMiddleware, ToolResult};
use crate::outcome;
use crate::provider::{BoxFuture, Evaluation, GuardrailProvider};
use crate::request::{
    CallView, GuardrailDecision, GuardrailRequest, Timestamp, ToolCallRequest, ToolMessage,
};

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

/// What the middleware decided about one call, before any handler ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// The request the provider saw.
    pub request: GuardrailRequest,
    /// The decision (the provider's, or the fail-closed / fail-open one).
    pub decision: GuardrailDecision,
    /// Whether the provider failed.
    pub provider_error: bool,
}

impl Checked {
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

impl GuardrailMiddleware {
    /// Decides a call synchronously without running anything.
    pub fn check(&self, call: &ToolCallRequest) -> Result<Checked, ToolCallError> {
        let started = self.started();
        let now = Timestamp::now();
        let mut args = call.tool_call.args.clone();
        let (decision, provider_error, by) =
            self.decide_sync(call, Args::Lent(&mut args), None, now.as_str(), started)?.into_concluded();
        let request = self.request_seen(call, args, now.as_str(), by)?;
        Ok(Checked { request, decision, provider_error })
    }

    /// Decides a call asynchronously (through the providers' `aevaluate`)
    /// without running anything.
    pub async fn acheck(&self, call: &ToolCallRequest) -> Result<Checked, ToolCallError> {
        let started = self.started();
        let now = Timestamp::now();
        let mut args = call.tool_call.args.clone();
        let (decision, provider_error, by) = self
            .decide_async(call, Args::Lent(&mut args), None, now.as_str(), started)
            .await?
            .into_concluded();
        let request = self.request_seen(call, args, now.as_str(), by)?;
        Ok(Checked { request, decision, provider_error })
    }

    /// The request the reporting guard saw.
    pub(super) fn request_seen(
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
        let args = Args::Borrowed(&call.tool_call.args);
        let mut this = Call::new(call, now.as_str(), args_text)?;
        let mut deciding = match Deciding::new(self, &mut this, args, started, false) {
            Ok(deciding) => deciding,
            Err(refused) => {
                let (decision, provider_error, _) = refused.into_concluded();
                return Ok((decision, provider_error));
            }
        };
        for (index, guard) in deciding.guards() {
            let request = Arc::new(deciding.view(guard).to_request());
            let args_text = deciding.args_text().filter(|_| guard.provider.reads_tool_input()).map(Arc::from);
            let to_evaluate = ToEvaluate {
                provider: Arc::clone(&guard.provider),
                request: Arc::clone(&request),
                args_text,
            };
            let evaluation = evaluate(to_evaluate).await;
            let concluded = deciding.conclude(guard, &request, evaluation, "async");
            if !deciding.take(index, guard, concluded)? {
                break;
            }
        }
        let (decision, provider_error, _) = deciding.finish();
        Ok((decision, provider_error))
    }

    /// [`Self::wrap_tool_call`], also returning the verdict.
    pub fn call_with_verdict(
        &self,
        call: ToolCallRequest,
        handler: SyncHandler<'_>,
    ) -> Result<(Checked, ToolMessage), ToolCallError> {
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
    ) -> Result<(Checked, ToolMessage), ToolCallError> {
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
}
