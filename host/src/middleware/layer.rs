//! The guardrail as a `tower` layer, for runtimes built on `tower::Service`.

use std::sync::Arc;
use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use crate::middleware::guardrail::denied_message;
use crate::middleware::{GuardrailMiddleware, ToolCallError, ToolResult};
use crate::provider::BoxFuture;
use crate::request::{ToolCallRequest, ToolMessage};

/// Wraps a tool service in a [`GuardrailService`].
#[derive(Debug, Clone)]
pub struct GuardrailLayer {
    guardrail: Arc<GuardrailMiddleware>,
}

impl GuardrailLayer {
    /// A layer around `guardrail`.
    pub fn new(guardrail: GuardrailMiddleware) -> Self {
        GuardrailLayer { guardrail: Arc::new(guardrail) }
    }
}

impl<S> Layer<S> for GuardrailLayer {
    type Service = GuardrailService<S>;

    fn layer(&self, inner: S) -> GuardrailService<S> {
        GuardrailService { guardrail: Arc::clone(&self.guardrail), inner }
    }
}

/// A tool service that asks the guardrail (on its async path) before every
/// call; a denied call never reaches `inner`.
#[derive(Debug, Clone)]
pub struct GuardrailService<S> {
    guardrail: Arc<GuardrailMiddleware>,
    inner: S,
}

impl<S> GuardrailService<S> {
    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S> Service<ToolCallRequest> for GuardrailService<S>
where
    S: Service<ToolCallRequest, Response = ToolMessage, Error = ToolCallError> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = ToolMessage;
    type Error = ToolCallError;
    type Future = BoxFuture<'static, ToolResult>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ToolCallError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: ToolCallRequest) -> Self::Future {
        // The instance that was polled ready serves this call; a clone takes its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let guardrail = Arc::clone(&self.guardrail);
        Box::pin(async move {
            let verdict = guardrail.acheck(&request).await?;
            if verdict.allowed() {
                inner.call(request).await
            } else {
                Ok(denied_message(&request.tool_call, &verdict.decision))
            }
        })
    }
}
