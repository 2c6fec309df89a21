//! The modes: `warn` and `observe` allow with the would-be denial (`warn`
//! keeps the hard failures), and `ask` turns the refusals it names into
//! questions.

use serde_json::json;

use crate::setup::{code, decide, example_passport, passport_with, provider, try_provider, with_passport};

#[test]
fn warn_and_observe_allow_with_the_would_be_denial_and_warn_keeps_hard_failures() {
    let passport = example_passport();
    let observe = provider(json!({"passport_path": passport, "mode": "observe"}));
    let warn = provider(json!({"passport_path": passport, "mode": "warn"}));
    let soft = json!({"command": "echo reboot"});
    for p in [&observe, &warn] {
        let d = decide(&**p, "bash", soft.clone());
        assert!(d.allow, "{d:?}");
        assert_eq!(d.reasons[0].code, "oap.allowed");
        assert_eq!(d.metadata["would_deny"]["code"], "oap.blocked_pattern");
        assert_eq!(d.metadata["would_deny"]["policy_id"], "system.command.execute.v1");
        assert!(d.reasons[0].message.contains("would have denied (oap.blocked_pattern)"), "{d:?}");
    }
    let danger = json!({"command": "rm -rf /"});
    assert!(decide(&*observe, "bash", danger.clone()).allow);
    assert_eq!(code(&*warn, "bash", danger), "oap.dangerous_operation");
    let missing = provider(json!({"passport_path": passport, "mode": "warn"}));
    drop(missing);
    let enforce = provider(json!({"passport_path": passport}));
    assert_eq!(code(&*enforce, "bash", soft), "oap.blocked_pattern");
}

#[test]
fn warn_keeps_passport_failures_and_observe_softens_everything() {
    let dir = tempfile::tempdir().unwrap();
    let suspended = passport_with(dir.path(), |p| p["status"] = json!("suspended"));
    let warn = provider(json!({"passport_path": suspended, "mode": "warn"}));
    assert_eq!(code(&*warn, "bash", json!({"command": "ls"})), "oap.passport_suspended");
    let observe = provider(json!({"passport_path": suspended, "mode": "observe"}));
    let d = decide(&*observe, "bash", json!({"command": "ls"}));
    assert!(d.allow);
    assert_eq!(d.metadata["mode"], "observe");
    assert_eq!(d.metadata["would_deny"]["code"], "oap.passport_suspended");
    std::fs::remove_file(&suspended).unwrap();
    assert_eq!(code(&*warn, "bash", json!({"command": "ls"})), "oap.passport_not_found");
    let enforce = with_passport(&example_passport());
    assert!(!decide(&*enforce, "bash", json!({"command": "sudo ls"})).metadata.contains_key("mode"));
}

/// `ask:` turns the refusals of the codes it names into questions: the
/// decision holds the call for the approvers named; other denials stay
/// denials, and a code that must never be asked about is refused at
/// construction.
#[test]
fn what_the_command_model_cannot_say_can_be_asked_about() {
    let p = provider(json!({
        "passport_path": example_passport(),
        "ask": {"codes": ["oap.command_unverified", "oap.command_not_allowed"], "approvers": ["ops"], "timeout_s": 300}
    }));
    let asked = decide(&*p, "bash", json!({"command": "rm --frobnicate x"}));
    assert!(!asked.allow);
    assert_eq!(asked.reasons[0].code, "oap.command_unverified");
    let outcome = &asked.metadata[guardhost::OUTCOME_KEY]["ask"];
    assert_eq!(outcome["approvers"], json!(["ops"]), "{asked:?}");
    assert_eq!(outcome["timeout_s"], json!(300));
    let asked = decide(&*p, "bash", json!({"command": "nmap -sS host"}));
    assert!(asked.metadata.contains_key(guardhost::OUTCOME_KEY), "{asked:?}");
    // A dangerous operation is refused, never asked about.
    let refused = decide(&*p, "bash", json!({"command": "rm -rf /"}));
    assert_eq!(refused.reasons[0].code, "oap.dangerous_operation");
    assert!(!refused.metadata.contains_key(guardhost::OUTCOME_KEY), "{refused:?}");
    let bad = try_provider(json!({
        "passport_path": example_passport(),
        "ask": {"codes": ["oap.dangerous_operation"], "approvers": ["ops"]}
    }))
    .err()
    .unwrap();
    assert!(bad.contains("ask.codes") && bad.contains("oap.dangerous_operation"), "{bad}");
    let nobody = try_provider(json!({
        "passport_path": example_passport(),
        "ask": {"codes": ["oap.command_unverified"], "approvers": []}
    }))
    .err()
    .unwrap();
    assert!(nobody.contains("ask.approvers"), "{nobody}");
}
