//! `explain`: what each guard made of a call.

use std::ops::ControlFlow;

use super::engine::{Args, Call, Deciding, Reached};
use super::GuardrailMiddleware;
use crate::middleware::guard::GuardKind;
use crate::middleware::ToolCallError;
use crate::request::{GuardrailDecision, GuardrailRequest, Timestamp, ToolCallRequest};
use crate::tool_name;

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

/// One guard's answer, as it was asked.
struct Answer {
    index: usize,
    decision: GuardrailDecision,
    provider_error: bool,
    request: GuardrailRequest,
}

impl GuardrailMiddleware {
    /// Decides `call` as [`Self::decide`] does, and says what each guard
    /// made of it: not selected (its `tools:` leave the call out), asked
    /// (its decision, and the request it saw: after the rewrites of the
    /// guards before it), or not asked (a guard before it denied the call,
    /// or holds it for approval).
    pub fn explain(&self, call: &ToolCallRequest) -> Result<Explained, ToolCallError> {
        let now = Timestamp::now();
        let mut answers = Vec::new();
        let args = Args::Borrowed(&call.tool_call.args);
        // Not `alone`: each answer is recorded, a plain allow too.
        let mut this = Call::new(call, now.as_str(), None)?;
        let decided = match Deciding::new(self, &mut this, args, self.started(), false) {
            Ok(deciding) => ask_each(deciding, &mut answers)?,
            Err(refused) => refused,
        };
        let (decision, provider_error, _) = decided.into_concluded();
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
}

/// Asks each guard of `deciding` in turn, each answer and the request it
/// saw pushed to `answers`, until one decides the call.
fn ask_each(mut deciding: Deciding<'_, '_, '_>, answers: &mut Vec<Answer>) -> Result<Reached, ToolCallError> {
    for (index, guard) in deciding.guards() {
        let concluded = match deciding.ask(index, guard) {
            ControlFlow::Continue(concluded) => concluded,
            // Not alone, a plain allow is concluded like any answer;
            // were it not, it would be the allow it stands for.
            ControlFlow::Break(reached) => {
                let (decision, provider_error, _) = reached.into_concluded();
                Ok((decision, provider_error))
            }
        };
        if let Ok((decision, provider_error)) = &concluded {
            let request = deciding.view(guard).to_request();
            answers.push(Answer {
                index,
                decision: decision.clone(),
                provider_error: *provider_error,
                request,
            });
        }
        if !deciding.take(index, guard, concluded)? {
            break;
        }
    }
    Ok(Reached::Concluded(deciding.finish()))
}
