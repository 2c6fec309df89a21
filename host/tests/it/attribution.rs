//! Request attribution: what the provider sees, read back from a real
//! capturing provider library on both paths.

use guardhost_test_support as support;

use guardhost::{GuardrailDecision, ToolCallError, ToolCallRequest};
use serde_json::{json, Map, Value};
use support::{middleware, object};

fn seen_both(call: &ToolCallRequest) -> Map<String, Value> {
    let mw = middleware("CapturingProvider");
    let sync = mw.check(call).unwrap().decision;
    let asynchronous = tokio::runtime::Runtime::new().unwrap().block_on(mw.acheck(call)).unwrap().decision;
    let strip = |d: GuardrailDecision| {
        let mut m = d.metadata;
        m.remove("path");
        m.remove("timestamp");
        m
    };
    let (sync, asynchronous) = (strip(sync), strip(asynchronous));
    assert_eq!(sync, asynchronous, "the sync and async paths must see the same request");
    sync
}

const NULL_ATTRIBUTION: [&str; 9] = [
    "thread_id",
    "user_id",
    "user_role",
    "oauth_provider",
    "oauth_id",
    "run_id",
    "channel_user_id",
    "agent_id",
    "tool_call_id",
];

#[test]
fn no_context_gives_null_false_and_empty_attribution() {
    let seen = seen_both(&ToolCallRequest::new("bash", Map::new()));
    for field in NULL_ATTRIBUTION {
        assert_eq!(seen[field], Value::Null, "{field}");
    }
    assert_eq!(seen["is_subagent"], json!(false));
    assert_eq!(seen["is_internal"], json!(false));
    assert_eq!(seen["authz_attributes"], json!({}));
    assert_eq!(seen["tool_name"], json!("bash"));
}

#[test]
fn an_empty_context_is_the_same_as_none() {
    let none = seen_both(&ToolCallRequest::new("bash", Map::new()));
    let empty = seen_both(&ToolCallRequest::new("bash", Map::new()).with_context(Map::new()));
    assert_eq!(none, empty);
}

#[test]
fn each_field_alone() {
    for field in
        ["thread_id", "user_id", "user_role", "oauth_provider", "oauth_id", "run_id", "channel_user_id"]
    {
        let call = ToolCallRequest::new("bash", Map::new()).with_context(object(json!({ field: "v-1" })));
        let seen = seen_both(&call);
        for other in NULL_ATTRIBUTION {
            let expected = if other == field { json!("v-1") } else { Value::Null };
            assert_eq!(seen[other], expected, "{field} alone: {other}");
        }
    }
}

#[test]
fn all_fields_together() {
    let call = ToolCallRequest::new("write_file", object(json!({"path": "/tmp/x", "content": "héllo ✓"})))
        .with_id("call_42")
        .with_context(object(json!({
            "thread_id": "t-1", "user_id": "user_abc", "user_role": "admin", "oauth_provider": "github",
            "oauth_id": "gh_123", "run_id": "run_xyz", "channel_user_id": "channel_123",
            "is_subagent": true, "is_internal": true, "authz_attributes": {"department": "engineering"},
            "unrelated": "ignored"
        })));
    let seen = seen_both(&call);
    assert_eq!(
        Value::Object(seen),
        json!({
            "tool_name": "write_file", "tool_input": {"path": "/tmp/x", "content": "héllo ✓"},
            "agent_id": null, "thread_id": "t-1", "is_subagent": true, "user_id": "user_abc",
            "user_role": "admin", "oauth_provider": "github", "oauth_id": "gh_123", "run_id": "run_xyz",
            "tool_call_id": "call_42", "channel_user_id": "channel_123", "is_internal": true,
            "authz_attributes": {"department": "engineering"}
        })
    );
}

#[test]
fn tool_call_id_comes_from_the_call() {
    let call = ToolCallRequest::new("web_search", object(json!({"query": "test"}))).with_id("call_42");
    let seen = seen_both(&call);
    assert_eq!(seen["tool_call_id"], json!("call_42"));
    assert_eq!(seen["user_id"], Value::Null);
}

#[test]
fn is_subagent_is_truthy_and_is_internal_is_exactly_true() {
    for (value, subagent, internal) in [
        (json!(true), true, true),
        (json!(1), true, false),
        (json!("true"), true, false),
        (json!("yes"), true, false),
        (json!(false), false, false),
        (json!(0), false, false),
        (json!(""), false, false),
        (json!(null), false, false),
    ] {
        let call = ToolCallRequest::new("bash", Map::new())
            .with_context(object(json!({"is_subagent": value, "is_internal": value})));
        let seen = seen_both(&call);
        assert_eq!(seen["is_subagent"], json!(subagent), "is_subagent {value}");
        assert_eq!(seen["is_internal"], json!(internal), "is_internal {value}");
    }
}

#[test]
fn a_null_authz_attributes_is_empty() {
    let call =
        ToolCallRequest::new("bash", Map::new()).with_context(object(json!({"authz_attributes": null})));
    assert_eq!(seen_both(&call)["authz_attributes"], json!({}));
}

#[test]
fn a_non_mapping_authz_attributes_is_an_error() {
    for bad in [json!(["not", "a", "mapping"]), json!("text"), json!(42), json!([1, 2, 3])] {
        let call =
            ToolCallRequest::new("bash", Map::new()).with_context(object(json!({"authz_attributes": bad})));
        let error = middleware("CapturingProvider").check(&call).unwrap_err();
        assert!(matches!(error, ToolCallError::InvalidRequest(_)));
        assert!(error.to_string().contains("authz_attributes must be a Mapping"), "{error}");
    }
}

#[test]
fn the_request_holds_its_own_copy_of_authz_attributes() {
    let mut context = object(json!({"authz_attributes": {"department": "engineering"}}));
    let call = ToolCallRequest::new("bash", Map::new()).with_context(context.clone());
    let verdict = middleware("CapturingProvider").check(&call).unwrap();
    // Changing the context afterwards changes nothing in the request.
    context["authz_attributes"]["department"] = json!("changed");
    assert_eq!(verdict.request.authz_attributes, object(json!({"department": "engineering"})));
    assert_eq!(verdict.decision.metadata["authz_attributes"], json!({"department": "engineering"}));
}

#[test]
fn non_string_attribution_values_reach_the_provider_as_json_text() {
    // DeerFlow passes such values through; across the ABI they are strings,
    // so a non-string one arrives as its JSON text, on both paths.
    let call = ToolCallRequest::new("bash", Map::new()).with_context(object(json!({
        "user_id": 42, "thread_id": {"n": 1}, "run_id": false, "user_role": 2.5, "oauth_id": null,
    })));
    let seen = seen_both(&call);
    assert_eq!(seen["user_id"], json!("42"));
    assert_eq!(seen["thread_id"], json!(r#"{"n":1}"#));
    assert_eq!(seen["run_id"], json!("false"));
    assert_eq!(seen["user_role"], json!("2.5"));
    assert_eq!(seen["oauth_id"], json!(null));
}

#[test]
fn the_timestamp_is_now_in_utc() {
    let before = chrono::Utc::now();
    let verdict = middleware("CapturingProvider").check(&ToolCallRequest::new("bash", Map::new())).unwrap();
    let after = chrono::Utc::now();
    let seen = verdict.decision.metadata["timestamp"].as_str().unwrap().to_owned();
    assert!(seen.ends_with("+00:00"), "{seen}");
    let at = chrono::DateTime::parse_from_rfc3339(&seen).unwrap();
    assert!(before <= at && at <= after, "{seen}");
}

#[test]
fn large_unicode_and_deep_arguments_cross_intact() {
    let mut nested = json!("leaf ✓");
    for i in 0..64 {
        nested = json!({ format!("level{i}"): nested });
    }
    let big = "ß".repeat(512 * 1024);
    let call = ToolCallRequest::new("工具", object(json!({"big": big, "nested": nested})));
    let seen = seen_both(&call);
    assert_eq!(seen["tool_name"], json!("工具"));
    assert_eq!(seen["tool_input"]["big"].as_str().unwrap().len(), 1024 * 1024);
    assert_eq!(seen["tool_input"]["nested"], nested);
}
