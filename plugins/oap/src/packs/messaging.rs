//! `messaging.message.send.v1` when `policies_dir` does not hold its
//! `policy.json`: APort's local check. The limits are
//! `limits["messaging.message.send"]` or, as APort's generator writes them,
//! the flat keys `msgs_per_min`, `msgs_per_day`, `allowed_recipients`,
//! `approval_required` (see [`crate::passport::FLAT_LIMITS`]).
//!
//! The recipient (`recipient`, else `to`), when the call names one, must be
//! in a non-empty `allowed_recipients` (exactly, or `*` allows any):
//! `oap.recipient_not_allowed`. `msgs_per_min` is applied by the caller as a
//! per-minute rate (`oap.rate_limit_exceeded`); `msgs_per_day` and
//! `approval_required` are, as in APort's local evaluator, not enforced
//! here (the pack's `policy.json` in `policies_dir` enforces its rules).

use serde_json::{Map, Value};

use super::{deny, Checked, Limits};

/// The recipient as APort reads it: `recipient`, else `to` (null and
/// `false` count as absent); numbers as their text.
fn recipient(args: &Map<String, Value>) -> Option<String> {
    let value = ["recipient", "to"]
        .iter()
        .filter_map(|k| args.get(*k))
        .find(|v| !matches!(v, Value::Null | Value::Bool(false)))?;
    match value {
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// Checks a message call.
pub fn check(args: &Map<String, Value>, limits: Limits<'_>) -> Checked {
    let Some(recipient) = recipient(args).filter(|r| !r.is_empty()) else { return Ok(()) };
    let allowed = limits.strings("allowed_recipients").unwrap_or_default();
    if !allowed.is_empty() && !allowed.iter().any(|a| *a == "*" || *a == recipient) {
        return Err(deny(
            "oap.recipient_not_allowed",
            format!("Recipient '{recipient}' is not in allowed list"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(args: Value, limits: Value) -> Result<(), String> {
        check(args.as_object().unwrap(), Limits(limits.as_object()))
            .map_err(|d| format!("{}: {}", d.code, d.message))
    }

    #[test]
    fn recipients_are_checked_against_a_non_empty_allowlist() {
        let limits = json!({"allowed_recipients": ["+15550100", "ops"], "msgs_per_min": 5});
        assert_eq!(run(json!({"recipient": "ops", "text": "hi"}), limits.clone()), Ok(()));
        assert_eq!(run(json!({"to": "+15550100"}), limits.clone()), Ok(()));
        assert_eq!(
            run(json!({"to": "eve"}), limits.clone()),
            Err("oap.recipient_not_allowed: Recipient 'eve' is not in allowed list".into())
        );
        assert_eq!(
            run(json!({"recipient": "eve", "to": "ops"}), limits.clone()),
            Err("oap.recipient_not_allowed: Recipient 'eve' is not in allowed list".into())
        );
        assert_eq!(run(json!({"recipient": null, "to": "ops"}), limits.clone()), Ok(()));
        assert_eq!(
            run(json!({"question": "which?"}), limits.clone()),
            Ok(()),
            "no recipient: nothing to check"
        );
        assert_eq!(run(json!({"to": "anyone"}), json!({"allowed_recipients": ["*"]})), Ok(()));
        assert_eq!(run(json!({"to": "anyone"}), json!({"allowed_recipients": []})), Ok(()));
        assert_eq!(run(json!({"to": "anyone"}), json!({})), Ok(()));
    }
}
