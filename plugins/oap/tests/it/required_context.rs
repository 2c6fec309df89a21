//! A pack of our own with a `required_context` JSON Schema: the tool's
//! arguments checked against it, and a schema that does not compile
//! refused at construction.

use std::path::Path;
use std::sync::Arc;

use guardhost::GuardrailProvider;
use serde_json::{json, Value};

use crate::setup::{code, decide, example_passport, own_passport, provider, try_provider};

/// A pack of our own in APort's shape (`<pack>/policy.json`), with a rule
/// and a `required_context` schema that requires more than its
/// `required_fields`.
const TICKET_PACK: &str = r#"{
  "id": "demo.ticket.create.v1",
  "name": "Ticket creation",
  "requires_capabilities": ["demo.ticket.create"],
  "min_assurance": "L0",
  "required_fields": ["title"],
  "required_context": {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "required": ["title", "priority"],
    "properties": {
      "title": {"type": "string", "minLength": 1, "maxLength": 200},
      "priority": {"type": "integer", "minimum": 1, "maximum": 5},
      "severity": {"type": "string", "enum": ["low", "medium", "high"]},
      "labels": {"type": "array", "items": {"type": "string"}},
      "project": {"type": "string", "pattern": "^[A-Z]{2,5}$"}
    }
  },
  "evaluation_rules": [
    {"name": "priority_cap", "type": "expression", "condition": "priority <= limits.max_priority",
     "deny_code": "oap.limit_exceeded", "description": "Priority must not exceed the passport's cap."}
  ]
}"#;

fn ticket_provider(dir: &Path) -> Arc<dyn GuardrailProvider> {
    let packs = dir.join("packs");
    std::fs::create_dir_all(packs.join("demo.ticket.create.v1")).unwrap();
    std::fs::write(packs.join("demo.ticket.create.v1/policy.json"), TICKET_PACK).unwrap();
    let passport = own_passport(
        dir,
        "tickets",
        &["demo.ticket.create"],
        json!({"demo.ticket.create": {"max_priority": 3}}),
    );
    provider(json!({
        "passport_path": passport,
        "policies_dir": packs,
        "tool_mapping": {"create_ticket": "demo.ticket.create.v1"},
    }))
}

#[test]
fn a_packs_required_context_schema_checks_the_tool_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let p = ticket_provider(dir.path());
    let ok = json!({"title": "Disk full on build-3", "priority": 2, "severity": "high", "labels": ["ops"],
                    "project": "OPS", "extra": "kept: the schema allows other properties"});
    assert_eq!(code(&*p, "create_ticket", ok), "allow");
    assert_eq!(code(&*p, "create_ticket", json!({"title": "t", "priority": 1})), "allow");

    let cases: &[(Value, &str, &str)] = &[
        // A property the schema requires but `required_fields` does not list.
        (json!({"title": "t"}), "oap.invalid_context", "Missing required fields: priority"),
        (json!({}), "oap.invalid_context", "Missing required fields: title, priority"),
        // Wrong types, an enum, bounds, a pattern, an array's items.
        (
            json!({"title": "t", "priority": "2"}),
            "oap.invalid_context",
            r#"Invalid context field priority: "2" is not of type "integer""#,
        ),
        (
            json!({"title": "t", "priority": 1.5}),
            "oap.invalid_context",
            r#"Invalid context field priority: 1.5 is not of type "integer""#,
        ),
        (
            json!({"title": 7, "priority": 1}),
            "oap.invalid_context",
            r#"Invalid context field title: 7 is not of type "string""#,
        ),
        (
            json!({"title": "t", "priority": 1, "severity": "urgent"}),
            "oap.invalid_context",
            r#"Invalid context field severity: "urgent" is not one of "low", "medium" or "high""#,
        ),
        (
            json!({"title": "t", "priority": 9}),
            "oap.invalid_context",
            "Invalid context field priority: 9 is greater than the maximum of 5",
        ),
        (
            json!({"title": "t", "priority": 1, "project": "ops"}),
            "oap.invalid_context",
            r#"Invalid context field project: "ops" does not match "^[A-Z]{2,5}$""#,
        ),
        (
            json!({"title": "t", "priority": 1, "labels": ["ops", 3]}),
            "oap.invalid_context",
            r#"Invalid context field labels.1: 3 is not of type "string""#,
        ),
        // A valid value the rule refuses; a rule comes before a missing field.
        (json!({"title": "t", "priority": 4}), "oap.limit_exceeded", "Priority 4 exceeds the limit of 3"),
        (json!({"priority": 4}), "oap.limit_exceeded", "Priority 4 exceeds the limit of 3"),
    ];
    for (args, code, message) in cases {
        let d = decide(&*p, "create_ticket", args.clone());
        assert!(!d.allow, "{args} was allowed");
        assert_eq!((d.reasons[0].code.as_ref(), d.reasons[0].message.as_ref()), (*code, *message), "{args}");
        assert_eq!(d.policy_id.as_deref(), Some("demo.ticket.create.v1"), "{args}");
    }
}

#[test]
fn a_required_context_that_is_no_schema_fails_construction_naming_the_pack() {
    let dir = tempfile::tempdir().unwrap();
    let packs = dir.path().join("packs");
    std::fs::create_dir_all(packs.join("demo.bad.v1")).unwrap();
    let pack = TICKET_PACK
        .replace("demo.ticket.create.v1", "demo.bad.v1")
        .replace(r#""type": "integer", "minimum": 1"#, r#""type": "int", "minimum": 1"#);
    std::fs::write(packs.join("demo.bad.v1/policy.json"), pack).unwrap();
    let error = try_provider(json!({"passport_path": example_passport(), "policies_dir": packs}))
        .err()
        .expect("a pack whose schema does not compile was accepted");
    assert!(
        error.contains("policy pack `demo.bad.v1`: `required_context` is not a valid JSON Schema"),
        "{error}"
    );
    assert!(error.contains("demo.bad.v1/policy.json"), "{error}");
}
