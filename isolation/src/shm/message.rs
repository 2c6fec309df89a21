//! What a slot holds: a request, then its answer, in a form cheaper to
//! read than the pipe's tagged frames (the slot already says which call it
//! is and what kind of message belongs there).
//!
//! - A request: the call's id (8 bytes, little-endian), whether the
//!   provider's async path is asked (1 byte), 7 bytes of padding, then the
//!   request as JSON (a [`GuardrailRequest`]).
//! - An answer: its kind (`D` a decision, `E` a provider error, `I` an
//!   interrupt), 7 bytes of padding, then the decision, the error
//!   (`{"message", "panicked"}`) or the interrupt (`{"message",
//!   "payload"}`) as JSON.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use guardhost::{CallView, GuardrailDecision, GuardrailRequest};
use guardhost::{Evaluation, Interrupt, ProviderFailure};

/// The bytes before a message's JSON.
pub(crate) const PREFIX: usize = 16;

const DECISION: u8 = b'D';
const ERROR: u8 = b'E';
const INTERRUPT: u8 = b'I';

#[derive(Serialize, Deserialize)]
struct Failure<'a> {
    message: Cow<'a, str>,
    panicked: bool,
}

#[derive(Serialize, Deserialize)]
struct Signal<'a> {
    message: Cow<'a, str>,
    payload: Cow<'a, Value>,
}

/// Writes the request for call `id` into `out` (replacing what it held).
pub(crate) fn encode_request(out: &mut Vec<u8>, id: u64, asynchronous: bool, call: &CallView<'_>) {
    out.clear();
    out.extend_from_slice(&id.to_le_bytes());
    out.push(u8::from(asynchronous));
    out.resize(PREFIX, 0);
    // A view serialises without error (strings and JSON values).
    serde_json::to_writer(&mut *out, call).expect("a request serialises");
}

/// The call's id, whether the async path is asked, and the request.
pub(crate) fn decode_request(bytes: &[u8]) -> Result<(u64, bool, GuardrailRequest), String> {
    let Some((prefix, json)) = bytes.split_at_checked(PREFIX) else {
        return Err(format!("a request of {} bytes, shorter than its prefix", bytes.len()));
    };
    let id = u64::from_le_bytes(prefix[..8].try_into().expect("8 bytes"));
    let request = serde_json::from_slice(json).map_err(|e| format!("the request is not valid: {e}"))?;
    Ok((id, prefix[8] != 0, request))
}

/// Writes the answer `evaluation` into `out` (replacing what it held).
pub(crate) fn encode_answer(out: &mut Vec<u8>, evaluation: &Evaluation) {
    out.clear();
    let kind = match evaluation {
        Ok(_) => DECISION,
        Err(ProviderFailure::Error { .. }) => ERROR,
        Err(ProviderFailure::Interrupt(_)) => INTERRUPT,
        // A failure of a kind this build does not know crosses as an error.
        Err(_) => ERROR,
    };
    out.push(kind);
    out.resize(PREFIX, 0);
    // Decisions, strings and JSON values serialise without error.
    match evaluation {
        Ok(decision) => serde_json::to_writer(&mut *out, decision),
        Err(ProviderFailure::Error { message, panicked }) => serde_json::to_writer(
            &mut *out,
            &Failure { message: Cow::Borrowed(message), panicked: *panicked },
        ),
        Err(ProviderFailure::Interrupt(Interrupt { message, payload })) => serde_json::to_writer(
            &mut *out,
            &Signal { message: Cow::Borrowed(message), payload: Cow::Borrowed(payload) },
        ),
        Err(other) => serde_json::to_writer(
            &mut *out,
            &Failure { message: Cow::Owned(other.to_string()), panicked: false },
        ),
    }
    .expect("an answer serialises");
}

/// The evaluation an answer carries; what is wrong with it otherwise.
pub(crate) fn decode_answer(bytes: &[u8]) -> Result<Evaluation, String> {
    let parsed = match bytes.split_at_checked(PREFIX) {
        Some(([DECISION, ..], json)) => serde_json::from_slice::<GuardrailDecision>(json).map(Ok),
        Some(([ERROR, ..], json)) => serde_json::from_slice::<Failure<'_>>(json).map(|failure| {
            Err(ProviderFailure::Error { message: failure.message.into_owned(), panicked: failure.panicked })
        }),
        Some(([INTERRUPT, ..], json)) => serde_json::from_slice::<Signal<'_>>(json).map(|signal| {
            Err(ProviderFailure::Interrupt(Interrupt {
                message: signal.message.into_owned(),
                payload: signal.payload.into_owned(),
            }))
        }),
        _ => {
            return Err(format!(
                "wrote an answer in shared memory that is not one ({})",
                crate::protocol::preview(bytes)
            ))
        }
    };
    parsed.map_err(|e| format!("wrote an answer in shared memory that is not valid: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use guardhost::{GuardrailReason, ToolCallRequest};
    use serde_json::json;

    #[test]
    fn a_request_crosses_with_its_id_and_path() {
        let call = ToolCallRequest::new("bash", json!({"command": "ls"}).as_object().unwrap().clone())
            .with_id("call-7");
        let view =
            CallView::new(&call, &call.tool_call.args, Some("agent"), "2026-12-02T00:00:00+00:00").unwrap();
        let mut bytes = Vec::new();
        encode_request(&mut bytes, 42, true, &view);
        let (id, asynchronous, request) = decode_request(&bytes).unwrap();
        assert_eq!((id, asynchronous, request), (42, true, view.to_request()));
        assert!(decode_request(&bytes[..PREFIX - 1]).unwrap_err().contains("shorter than its prefix"));
    }

    #[test]
    fn every_kind_of_answer_crosses() {
        let answers: [Evaluation; 3] = [
            Ok(GuardrailDecision {
                allow: false,
                reasons: vec![GuardrailReason::new("oap.denied", "no \"bash\"\n")],
                policy_id: Some("p".into()),
                metadata: json!({"k": [1, 2.5, null]}).as_object().unwrap().clone(),
            }),
            Err(ProviderFailure::Error { message: "boom".into(), panicked: true }),
            Err(ProviderFailure::Interrupt(Interrupt { message: "ask".into(), payload: json!({"q": 1}) })),
        ];
        let mut bytes = Vec::new();
        for answer in answers {
            encode_answer(&mut bytes, &answer);
            assert_eq!(decode_answer(&bytes).unwrap(), answer);
        }
    }

    #[test]
    fn anything_else_is_refused_and_said_what() {
        assert!(decode_answer(b"D").unwrap_err().contains("not one"));
        assert!(decode_answer(b"X\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0{}").unwrap_err().contains("not one"));
        let mut bad = vec![b'D'];
        bad.resize(PREFIX, 0);
        bad.extend_from_slice(b"{\"allow\": 3}");
        assert!(decode_answer(&bad).unwrap_err().contains("not valid"));
    }
}
