//! DeerFlow's authorization layer on guardhost's providers: the adapter
//! that asks an authorization provider about a tool call
//! (`GuardrailAuthorizationAdapter`), and the tool filter that hides the
//! tools a caller may never use before the model sees them
//! (`filter_tools_by_authorization`).
//!
//! An authorization provider is a provider like any other (built in, a
//! library, a provider process): it is asked about one call with the
//! request's `user_role` set to the caller's role (`default_role` when the
//! context has none), the tool as its target, and no passport. The
//! built-in one is DeerFlow's RBAC (`guardhost-rbac`).

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::middleware::{Guard, ToolCallError};
use crate::provider::{BoxFuture, Evaluation, GuardrailProvider, ProviderFailure, Ruled, Ruling};
use crate::request::{
    CallView, GuardrailDecision, GuardrailReason, GuardrailRequest, Timestamp, ToolCallRequest,
};

/// The name DeerFlow's adapter has, which audit events and logs use.
pub const ADAPTER_NAME: &str = "authorization";

/// Presents an authorization provider as the guard asked before the
/// guardrails (DeerFlow's `GuardrailAuthorizationAdapter`).
pub struct AuthorizationAdapter {
    inner: Arc<dyn GuardrailProvider>,
    default_role: String,
    infrastructure: HashSet<String>,
}

impl std::fmt::Debug for AuthorizationAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorizationAdapter")
            .field("provider", &self.inner.name())
            .field("default_role", &self.default_role)
            .field("infrastructure", &self.infrastructure)
            .finish()
    }
}

impl AuthorizationAdapter {
    /// Asks `inner`, giving callers without a role `default_role`, and
    /// letting the `infrastructure` tools through unasked.
    pub fn new(
        inner: Arc<dyn GuardrailProvider>,
        default_role: impl Into<String>,
        infrastructure: impl IntoIterator<Item = String>,
    ) -> Self {
        AuthorizationAdapter {
            inner,
            default_role: default_role.into(),
            infrastructure: infrastructure.into_iter().collect(),
        }
    }

    /// The authorization provider asked.
    pub fn inner(&self) -> &Arc<dyn GuardrailProvider> {
        &self.inner
    }

    /// DeerFlow's answer for a framework tool made from an already
    /// authorized set.
    fn infrastructure(&self, tool: &str) -> Option<GuardrailDecision> {
        self.infrastructure.contains(tool).then(|| GuardrailDecision {
            allow: true,
            reasons: vec![GuardrailReason::new("authz.infrastructure_tool", "")],
            policy_id: Some("authz:infrastructure".into()),
            metadata: Map::new(),
        })
    }

    /// `call` with the caller's role: its own, or `default_role` when it
    /// has none or an empty one (an unknown role is kept).
    fn with_role<'a>(&'a self, call: &CallView<'a>) -> CallView<'a> {
        let mut call = call.clone();
        if call.attribution.user_role.as_deref().is_none_or(str::is_empty) {
            call.attribution.to_mut().user_role = Some(Cow::Borrowed(self.default_role.as_str()));
        }
        call
    }

    /// [`Self::with_role`] for an owned request; `None` when it has one.
    fn request_with_role(&self, request: &GuardrailRequest) -> Option<GuardrailRequest> {
        request
            .user_role
            .as_deref()
            .is_none_or(str::is_empty)
            .then(|| GuardrailRequest { user_role: Some(self.default_role.clone()), ..request.clone() })
    }
}

impl GuardrailProvider for AuthorizationAdapter {
    fn name(&self) -> &str {
        ADAPTER_NAME
    }

    fn evaluate(&self, request: &GuardrailRequest) -> Evaluation {
        if let Some(decision) = self.infrastructure(&request.tool_name) {
            return Ok(decision);
        }
        match self.request_with_role(request) {
            Some(request) => self.inner.evaluate(&request),
            None => self.inner.evaluate(request),
        }
    }

    fn aevaluate<'a>(&'a self, request: &'a GuardrailRequest) -> BoxFuture<'a, Evaluation> {
        Box::pin(async move {
            if let Some(decision) = self.infrastructure(&request.tool_name) {
                return Ok(decision);
            }
            match self.request_with_role(request) {
                Some(request) => self.inner.aevaluate(&request).await,
                None => self.inner.aevaluate(request).await,
            }
        })
    }

    fn rule_view(&self, call: &CallView<'_>) -> Option<Ruled> {
        if let Some(decision) = self.infrastructure(call.tool_name) {
            return Some(Ok(Ruling::Decision(decision)));
        }
        let call = self.with_role(call);
        Some(crate::provider::rule_call(&*self.inner, &call))
    }

    fn aevaluate_view<'a>(&'a self, call: &'a CallView<'a>) -> Option<BoxFuture<'a, Evaluation>> {
        Some(Box::pin(async move {
            if let Some(decision) = self.infrastructure(call.tool_name) {
                return Ok(decision);
            }
            let call = self.with_role(call);
            // Bound, so that the provider's future is gone before `call`.
            let evaluation = crate::provider::aevaluate_call(&*self.inner, &call).await;
            evaluation
        }))
    }

    /// The adapter's own reason (`authz.infrastructure_tool`) has no
    /// message: the provider's declaration is the adapter's.
    fn messages_quote_input(&self) -> bool {
        self.inner.messages_quote_input()
    }
}

/// Why a tool list could not be filtered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FilterError {
    /// The runtime context is unusable (`authz_attributes` not a mapping).
    #[error(transparent)]
    Call(#[from] ToolCallError),
    /// A tool name is empty (DeerFlow's RBAC refuses one).
    #[error("candidates[{index}] must be a non-empty string, got ''")]
    EmptyName {
        /// Its place in the list, from 0.
        index: usize,
    },
}

/// The tools of `tools` the authorization `guard` lets the caller of
/// `context` use, in their order (duplicates kept): DeerFlow's layer 1,
/// asked before the model sees the tools. Each tool is asked about as a
/// call without arguments, so the answer is what the guard would say of
/// any call of it. A name the host refuses ([`crate::tool_name`]) is
/// dropped unasked; an empty one is an error of the list, as in DeerFlow.
/// When the provider fails on any tool, the guard's `fail_closed` decides
/// for the whole list, as in DeerFlow: no tool, or every tool whose name
/// the host accepts.
pub fn filter_tools(
    guard: &Guard,
    context: Option<&Map<String, Value>>,
    tools: &[&str],
) -> Result<Vec<String>, FilterError> {
    let tools = usable_names(tools)?;
    let now = Timestamp::now();
    let empty = Map::new();
    let mut allowed = Vec::with_capacity(tools.len());
    let mut call = ToolCallRequest { context: context.cloned(), ..ToolCallRequest::default() };
    for tool in &tools {
        call.tool_call.name = Some((*tool).to_owned());
        let view =
            CallView::new(&call, &empty, guard.passport(), now.as_str()).map_err(ToolCallError::from)?;
        let evaluation = crate::provider::evaluate_call(&**guard.provider(), &view);
        match evaluation {
            Ok(decision) if decision.allow => allowed.push((*tool).to_owned()),
            Ok(_) => {}
            Err(ProviderFailure::Interrupt(interrupt)) => {
                return Err(ToolCallError::Interrupt(interrupt).into())
            }
            Err(error) => {
                tracing::error!(provider = %guard.provider().name(), tool = %tool, "Authorization provider failed while filtering tools: {error}");
                return Ok(match guard.fail_closed() {
                    true => Vec::new(),
                    false => tools.iter().map(|t| (*t).to_owned()).collect(),
                });
            }
        }
    }
    Ok(allowed)
}

/// The names of `tools` the host accepts ([`crate::tool_name`]), in their
/// order; the others are dropped, each with a warning. An empty name is an
/// error ([`FilterError::EmptyName`]), as DeerFlow's RBAC makes it.
pub fn usable_names<'t>(tools: &[&'t str]) -> Result<Vec<&'t str>, FilterError> {
    if let Some(index) = tools.iter().position(|t| t.is_empty()) {
        return Err(FilterError::EmptyName { index });
    }
    let mut usable = Vec::with_capacity(tools.len());
    for (index, tool) in tools.iter().enumerate() {
        match crate::tool_name::check(tool) {
            Ok(()) => usable.push(*tool),
            Err(problem) => tracing::warn!(
                "Tool filter drops candidates[{index}] '{}' ({}): {problem}",
                crate::tool_name::escaped(tool),
                crate::tool_name::INVALID_CODE
            ),
        }
    }
    Ok(usable)
}
