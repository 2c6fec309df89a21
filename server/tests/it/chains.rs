//! The server with a DeerFlow `authorization:` section and a
//! `guardrails.providers` chain of real libraries: decisions name the
//! entry that decided, and `/v1/filter` hides the tools a caller may never
//! use.

use crate::support::{openapi, use_of, Server};
use serde_json::{json, Value};

fn write_config(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("config.yaml");
    let yaml = format!(
        "authorization:
  enabled: true
  default_role: user
  provider:
    use: {rbac}
    config:
      roles:
        user: {{tools: {{allow: '*', deny: [update_agent]}}}}
        guest: {{tools: {{allow: [web_search, read_file]}}}}
guardrails:
  enabled: true
  providers:
    - use: {allowlist}
      config: {{denied_tools: [bash]}}
    - use: {deny_all}
      name: no-writes
      tools: ['write_*']
",
        rbac = use_of("guardhost_rbac", "RbacAuthorizationProvider"),
        allowlist = use_of("guardhost_allowlist", "AllowlistProvider"),
        deny_all = use_of("guardhost_test_providers", "DenyAllProvider"),
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

fn decided(server: &Server, tool: &str, context: Value) -> Value {
    let response = server.decide(&json!({"name": tool, "args": {}, "id": "c1", "context": context}));
    assert_eq!(response.status, 200, "{}", response.text());
    openapi::check("POST", "/v1/decide", &response);
    response.json()
}

#[test]
fn decisions_name_the_entry_of_the_chain_that_decided() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path());
    let server = Server::start(&["--config", path.to_str().unwrap()]);
    let cases = [
        ("update_agent", json!({}), "deny", "authz.denied", "authorization"),
        ("bash", json!({"user_role": "guest"}), "deny", "authz.denied", "authorization"),
        ("bash", json!({}), "deny", "oap.tool_not_allowed", "allowlist"),
        ("write_file", json!({}), "deny", "test.denied", "no-writes"),
        ("read_file", json!({"user_role": "guest"}), "allow", "oap.allowed", "allowlist"),
    ];
    for (tool, context, outcome, code, by) in cases {
        let answer = decided(&server, tool, context.clone());
        assert_eq!(answer["outcome"], outcome, "{tool} {context}: {answer}");
        assert_eq!(answer["reasons"][0]["code"], code, "{tool} {context}: {answer}");
        assert_eq!(answer["metadata"]["decided_by"], by, "{tool} {context}: {answer}");
    }
}

#[test]
fn every_guard_is_shown_by_its_own_name_on_the_banner_readyz_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path());
    // The allowlist in shadow beside the enforcing entries.
    let yaml = std::fs::read_to_string(&path).unwrap();
    let yaml = yaml.replace(
        "      config: {denied_tools: [bash]}\n",
        "      config: {denied_tools: [bash]}\n      mode: warn\n",
    );
    std::fs::write(&path, yaml).unwrap();
    let server = Server::start(&["--config", path.to_str().unwrap()]);
    assert!(
        server.banner.ends_with("(chain: authorization (rbac), allowlist (allowlist), no-writes (deny-all))"),
        "{}",
        server.banner
    );
    let ready = server.call("GET", "/readyz", &[], b"").json();
    let entries: Vec<(String, String, String, String)> = ready["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let field = |k: &str| e[k].as_str().unwrap().to_owned();
            (field("name"), field("at"), field("provider"), field("mode"))
        })
        .collect();
    let entry = |a: &str, b: &str, c: &str, d: &str| (a.to_owned(), b.to_owned(), c.to_owned(), d.to_owned());
    assert_eq!(
        entries,
        [
            entry("authorization", "authorization.provider", "rbac", "enforce"),
            entry("allowlist", "guardrails.providers[0]", "allowlist", "warn"),
            entry("no-writes", "guardrails.providers[1]", "deny-all", "enforce"),
        ]
    );
    assert!(ready["entries"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["digest"].as_str().unwrap().starts_with("sha256:")));

    for (tool, context) in
        [("update_agent", json!({})), ("bash", json!({})), ("bash", json!({})), ("write_file", json!({}))]
    {
        decided(&server, tool, context);
    }
    let metrics = server.call("GET", "/metrics", &[], b"").text();
    for line in [
        "guardhost_decisions_total{entry=\"authorization\",provider=\"rbac\",outcome=\"deny\",code=\"authz.denied\"} 1",
        "guardhost_decisions_total{entry=\"allowlist\",provider=\"allowlist\",outcome=\"allow\",code=\"guardhost.shadow\"} 2",
        "guardhost_decisions_total{entry=\"no-writes\",provider=\"deny-all\",outcome=\"deny\",code=\"test.denied\"} 1",
        // The shadow entry's would-be denials, counted as its own.
        "guardhost_shadow_would_deny_total{entry=\"allowlist\",provider=\"allowlist\"} 2",
        "guardhost_decision_seconds_count{entry=\"no-writes\",provider=\"deny-all\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
}

#[test]
fn the_filter_answers_what_the_authorization_provider_allows() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path());
    let server = Server::start(&["--config", path.to_str().unwrap()]);
    let filter = |body: Value| {
        let response = server.call("POST", "/v1/filter", &[], body.to_string().as_bytes());
        openapi::check("POST", "/v1/filter", &response);
        response
    };
    let tools = json!(["bash", "web_search", "update_agent", "read_file"]);
    let guest = filter(json!({"tools": tools, "context": {"user_role": "guest"}}));
    assert_eq!(guest.status, 200, "{}", guest.text());
    assert_eq!(guest.json(), json!({"tools": ["web_search", "read_file"]}));
    let user = filter(json!({"tools": tools}));
    assert_eq!(user.json(), json!({"tools": ["bash", "web_search", "read_file"]}));
    // An unknown role is a provider error: fail_closed hides every tool.
    let editor = filter(json!({"tools": tools, "context": {"user_role": "editor"}}));
    assert_eq!(editor.json(), json!({"tools": []}));
    let bad = filter(json!({"tool": ["bash"]}));
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["error"]["kind"], "bad_filter");
    let empty = filter(json!({"tools": ["bash", ""]}));
    assert_eq!(
        (empty.status, empty.json()["error"]["message"].as_str()),
        (400, Some("candidates[1] must be a non-empty string, got ''"))
    );
}

/// A library that reads arguments is handed the text they arrived in (on a
/// decision thread, as this one is decided), and a batch's calls each their
/// own.
#[test]
fn a_provider_that_reads_arguments_is_handed_the_text_they_arrived_in() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    let provider = use_of("guardhost_test_providers", "ArgsTextProvider");
    std::fs::write(&path, format!("guardrails:\n  enabled: true\n  provider:\n    use: {provider}\n"))
        .unwrap();
    let server = Server::start(&["--config", path.to_str().unwrap()]);
    let text = r#"{ "command" :  "ls",  "n": 1.50 }"#;
    let body = format!(r#"{{"name": "bash", "args": {text}, "id": "c1"}}"#);
    let response = server.call("POST", "/v1/decide", &[], body.as_bytes());
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["reasons"][0]["message"], json!(text));
    let batch = format!(r#"{{"calls": [{body}, {{"name": "ls", "args": {{"a":[1, 2]}}}}]}}"#);
    let response = server.call("POST", "/v1/decide/batch", &[], batch.as_bytes());
    assert_eq!(response.status, 200, "{}", response.text());
    let messages: Vec<Value> = response.json()["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["reasons"][0]["message"].clone())
        .collect();
    assert_eq!(messages, [json!(text), json!(r#"{"a":[1, 2]}"#)]);
}
