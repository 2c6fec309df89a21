//! Tool-call middleware: the shape every layer around a tool call has, and
//! a chain that composes them (first = outermost); the guardrail middleware
//! and its guards (a provider each, asked in order).

mod guard;
mod guardrail;
mod layer;

use std::error::Error;
use std::future::Future;
use std::sync::Arc;

pub use guard::{Guard, GuardKind, ToolSelector};
pub use guardrail::{
    denied_message, into_denied_message, shadowed, Checked, Explained, GuardrailMiddleware, Step, StepAnswer,
    ToEvaluate,
};
pub use layer::{GuardrailLayer, GuardrailService};

use crate::provider::{BoxFuture, Interrupt};
use crate::request::{RequestError, ToolCallRequest, ToolMessage};

/// Why a wrapped tool call produced no tool message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolCallError {
    /// A provider raised a control-flow signal; hand it to the runtime.
    #[error(transparent)]
    Interrupt(#[from] Interrupt),
    /// The runtime context was unusable (e.g. `authz_attributes` not a mapping).
    #[error("cannot build the guardrail request: {0}")]
    InvalidRequest(#[from] RequestError),
    /// A provider asked for approval of this call: it did not run. Resume
    /// it with an [`crate::Approval`] of the ask in the call's context
    /// (`approval`).
    #[error("tool '{tool}' must be approved before it runs (entry '{}', digest {})", .ask.entry, .ask.digest)]
    ApprovalRequired {
        /// The tool.
        tool: String,
        /// What the approver sees and gives back.
        ask: Box<crate::Ask>,
        /// The decision that holds the call (reasons, policy, metadata).
        decision: Box<crate::GuardrailDecision>,
    },
    /// The tool handler itself failed.
    #[error("tool handler failed: {0}")]
    Handler(Box<dyn Error + Send + Sync>),
}

/// What a wrapped tool call returns.
pub type ToolResult = Result<ToolMessage, ToolCallError>;

/// The next step of a synchronous chain: another layer or the tool itself.
pub type SyncHandler<'a> = &'a dyn Fn(ToolCallRequest) -> ToolResult;

/// The next step of an asynchronous chain.
pub type AsyncHandler = Arc<dyn Fn(ToolCallRequest) -> BoxFuture<'static, ToolResult> + Send + Sync>;

/// Makes an [`AsyncHandler`] from an async closure.
pub fn async_handler<F, Fut>(f: F) -> AsyncHandler
where
    F: Fn(ToolCallRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ToolResult> + Send + 'static,
{
    Arc::new(move |request| Box::pin(f(request)))
}

/// A layer around tool calls, sync and async (LangChain's
/// `wrap_tool_call` / `awrap_tool_call`).
pub trait ToolCallMiddleware: Send + Sync {
    /// Wraps one synchronous tool call; call `handler` to run what is inside.
    fn wrap_tool_call(&self, request: ToolCallRequest, handler: SyncHandler<'_>) -> ToolResult;

    /// Wraps one asynchronous tool call.
    fn awrap_tool_call<'a>(
        &'a self,
        request: ToolCallRequest,
        handler: AsyncHandler,
    ) -> BoxFuture<'a, ToolResult>;
}

/// Middleware in order: the first added is the outermost.
#[derive(Clone, Default)]
pub struct MiddlewareChain {
    layers: Vec<Arc<dyn ToolCallMiddleware>>,
}

impl std::fmt::Debug for MiddlewareChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiddlewareChain").field("layers", &self.layers.len()).finish()
    }
}

impl MiddlewareChain {
    /// An empty chain (calls go straight to the handler).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a layer inside the ones already added.
    pub fn with(mut self, layer: impl ToolCallMiddleware + 'static) -> Self {
        self.layers.push(Arc::new(layer));
        self
    }

    /// Adds a shared layer inside the ones already added.
    pub fn with_shared(mut self, layer: Arc<dyn ToolCallMiddleware>) -> Self {
        self.layers.push(layer);
        self
    }

    /// Runs a synchronous tool call through every layer, then `handler`.
    pub fn call(&self, request: ToolCallRequest, handler: SyncHandler<'_>) -> ToolResult {
        fn step(
            layers: &[Arc<dyn ToolCallMiddleware>],
            request: ToolCallRequest,
            handler: SyncHandler<'_>,
        ) -> ToolResult {
            match layers.split_first() {
                None => handler(request),
                Some((first, rest)) => first.wrap_tool_call(request, &|r| step(rest, r, handler)),
            }
        }
        step(&self.layers, request, handler)
    }

    /// Runs an asynchronous tool call through every layer, then `handler`.
    pub fn acall(&self, request: ToolCallRequest, handler: AsyncHandler) -> BoxFuture<'static, ToolResult> {
        let mut next = handler;
        for layer in self.layers.iter().rev() {
            let layer = Arc::clone(layer);
            let inner = next;
            next = Arc::new(move |request| {
                let layer = Arc::clone(&layer);
                let inner = Arc::clone(&inner);
                Box::pin(async move { layer.awrap_tool_call(request, inner).await })
            });
        }
        next(request)
    }
}
