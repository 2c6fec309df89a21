//! What a denied call comes to: the tool message the agent reads (DeerFlow's
//! text), or, for a call held for approval, the error that carries the ask.

use crate::middleware::{ToolCallError, ToolResult};
use crate::outcome::Ask;
use crate::request::{GuardrailDecision, ToolCall, ToolCallRequest, ToolMessage, ToolStatus};
use crate::tool_name;

/// What a call that may not run comes to: the denial's tool message, or,
/// when a guard holds it for approval, [`ToolCallError::ApprovalRequired`].
pub(super) fn not_run(call: ToolCallRequest, decision: GuardrailDecision) -> ToolResult {
    match Ask::of(&decision) {
        Some(ask) => Err(ToolCallError::ApprovalRequired {
            tool: call.tool_call.name.unwrap_or_default(),
            ask: Box::new(ask),
            decision: Box::new(decision),
        }),
        None => Ok(into_denied_message(call.tool_call, &decision)),
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
pub(super) const UNKNOWN_TOOL: &str = "unknown_tool";

/// The id a denial gives `call`: its own, else DeerFlow's stand-in.
pub(super) fn call_id_of(call: &ToolCall) -> &str {
    match (&call.id, call.null_id) {
        (Some(id), _) => id.as_str(),
        (None, true) => "None",
        (None, false) => "missing_id",
    }
}

/// DeerFlow's text of a denial; joined rather than formatted, which costs
/// a fifth as much. A call held for approval is not a denial: its text
/// says so ([`held_text`]).
pub(super) fn denial_text(name: &str, decision: &GuardrailDecision) -> String {
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
pub(super) fn held_text(name: &str, code: &str, message: &str, ask: &Ask) -> String {
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
