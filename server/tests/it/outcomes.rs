//! The server with a chain whose entries answer `ask` and `rewrite` (the
//! approvals provider's library): an ask is held under a `pending` id and
//! resumed with the approver's answer; a rewrite is answered with the
//! arguments to run. Every response is checked against the OpenAPI
//! document.

use crate::support;

use crate::support::{openapi, use_of, Server};
use serde_json::{json, Value};

fn server(dir: &std::path::Path) -> Server {
    let path = dir.join("config.yaml");
    let yaml = format!(
        "guardrails:
  enabled: true
  providers:
    - use: {approvals}
      name: caps
      config: {{set: {{web_fetch: {{max_bytes: 1000}}}}}}
    - use: {approvals}
      name: humans
      config: {{ask: [bash], approvers: [admin]}}
",
        approvals = use_of("guardhost_approvals", "ApprovalGuardrailProvider"),
    );
    std::fs::write(&path, yaml).unwrap();
    Server::start_with_env(
        &["--config", path.to_str().unwrap(), "--approver", "admin=ADMIN", "--approver", "mallory=MALLORY"],
        &[("ADMIN", "t-admin"), ("MALLORY", "t-mallory")],
    )
}

fn bash(command: &str) -> Value {
    json!({"name": "bash", "args": {"command": command}, "id": "c1", "context": {"thread_id": "t-1"}})
}

fn decided(server: &Server, call: &Value) -> Value {
    let response = server.decide(call);
    assert_eq!(response.status, 200, "{}", response.text());
    openapi::check("POST", "/v1/decide", &response);
    response.json()
}

fn resume(server: &Server, resume: &str, answer: Value) -> support::Response {
    // The approver is who authenticates: the body's `approved_by` picks the token.
    let token = match answer["approved_by"].as_str() {
        Some("mallory") => "Bearer t-mallory",
        _ => "Bearer t-admin",
    };
    let response = server.call("POST", resume, &[("authorization", token)], answer.to_string().as_bytes());
    openapi::check("POST", "/v1/pending/{id}", &response);
    response
}

#[test]
fn an_ask_is_held_under_a_pending_id_and_resumed_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let held = decided(&server, &bash("make deploy"));
    assert_eq!(held["outcome"], "ask", "{held}");
    assert_eq!(held["metadata"]["guardhost.outcome"]["ask"]["approvers"], json!(["admin"]));
    let id = held["pending"]["id"].as_str().unwrap().to_owned();
    let path = held["pending"]["resume"].as_str().unwrap().to_owned();
    assert_eq!(path, format!("/v1/pending/{id}"));

    // The wrong approver: refused, and the held call stays for the right one.
    let wrong = resume(&server, &path, json!({"approved": true, "approved_by": "mallory"}));
    assert_eq!(wrong.status, 403, "{}", wrong.text());
    assert_eq!(wrong.json()["error"]["kind"], "approver_not_allowed");

    // Approved by an approver: allowed, once.
    let approved = resume(&server, &path, json!({"approved": true, "approved_by": "admin"}));
    assert_eq!(approved.status, 200, "{}", approved.text());
    let approved = approved.json();
    assert_eq!(approved["outcome"], "allow", "{approved}");
    assert_eq!(approved["reasons"][0]["code"], "guardhost.approved");
    assert_eq!(approved["metadata"]["decided_by"], "humans");
    assert!(approved.get("pending").is_none());
    let again = resume(&server, &path, json!({"approved": true, "approved_by": "admin"}));
    assert_eq!(again.status, 409, "{}", again.text());
    assert_eq!(again.json()["error"]["kind"], "already_answered");

    // Refused: denied.
    let held = decided(&server, &bash("make deploy"));
    let refused = resume(&server, held["pending"]["resume"].as_str().unwrap(), json!({"approved": false}));
    assert_eq!(refused.json()["reasons"][0]["code"], "guardhost.approval_refused");

    // An approval that is not one, an id never held.
    let bad = resume(&server, &path, json!({"approved": "yes"}));
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["error"]["kind"], "bad_approval");
    let unknown = resume(&server, "/v1/pending/p-0", json!({"approved": true}));
    assert_eq!(unknown.status, 404);
    let metrics = server.call("GET", "/metrics", &[], b"").text();
    assert!(metrics.contains("route=\"/v1/pending\",status=\"404\"} 1"), "{metrics}");
}

#[test]
fn a_rewrite_answers_with_the_arguments_to_run() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let answer =
        decided(&server, &json!({"name": "web_fetch", "args": {"url": "u", "max_bytes": 7}, "id": "c2"}));
    assert_eq!(answer["outcome"], "rewrite", "{answer}");
    assert_eq!(
        answer["metadata"]["guardhost.outcome"]["rewrite"]["tool_input"],
        json!({"url": "u", "max_bytes": 1000})
    );
    assert_eq!(answer["metadata"]["decided_by"], "caps");
    let batch = server.call(
        "POST",
        "/v1/decide/batch",
        &[],
        json!({"calls": [bash("ls"), {"name": "read_file", "args": {}}]}).to_string().as_bytes(),
    );
    openapi::check("POST", "/v1/decide/batch", &batch);
    let decisions = batch.json()["decisions"].clone();
    assert_eq!(decisions[0]["outcome"], "ask");
    assert!(decisions[0]["pending"]["id"].is_string(), "a batch's asks are held too");
    assert_eq!(decisions[1]["outcome"], "allow");
}
