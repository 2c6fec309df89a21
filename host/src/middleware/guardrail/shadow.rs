//! Shadow mode: what a denial becomes in `warn` or `observe` mode.

use std::borrow::Cow;

use serde_json::Value;

use crate::config::Mode;
use crate::outcome::{self, OUTCOME_KEY};
use crate::request::GuardrailDecision;

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
