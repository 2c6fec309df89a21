//! Tool names the host refuses (`guardhost.tool_name_invalid`), over HTTP:
//! `/v1/decide` and `/v1/decide/batch` deny a name with an invisible
//! character or white space at an end before DeerFlow's RBAC or the
//! approvals provider is asked, and `/v1/filter` never lists one, guarded
//! or not.

use crate::support::{use_of, Server};
use serde_json::{json, Value};

/// The names an attacker sends for `bash` and `curl`.
const DISGUISED: [&str; 6] = ["bash\u{200B}", "bash\u{0}", "bash ", " bash", "curl\u{FEFF}", "\u{2066}curl"];

/// RBAC denies `bash` (every other tool allowed); the approvals provider
/// holds every call of a name holding `curl` or `bash` for approval.
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
        user: {{tools: {{allow: '*', deny: [bash]}}}}
guardrails:
  enabled: true
  provider:
    use: {approvals}
    config:
      ask: ['*curl*', '*bash*']
      approvers: [admin]
",
        rbac = use_of("guardhost_rbac", "RbacAuthorizationProvider"),
        approvals = use_of("guardhost_approvals", "ApprovalGuardrailProvider"),
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

fn decided(server: &Server, tool: &str) -> Value {
    let response = server.decide(&json!({"name": tool, "args": {"url": "x"}, "id": "c1"}));
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()
}

#[test]
fn decide_refuses_disguised_names_before_any_provider() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path());
    let server = Server::start(&["--config", path.to_str().unwrap()]);
    // The real names get what the policy says of them.
    let bash = decided(&server, "bash");
    assert_eq!((&bash["outcome"], &bash["reasons"][0]["code"]), (&json!("deny"), &json!("authz.denied")));
    let curl = decided(&server, "curl");
    assert_eq!((&curl["outcome"], &curl["reasons"][0]["code"]), (&json!("ask"), &json!("approvals.ask")));
    assert!(curl.get("pending").is_some(), "{curl}");
    for name in DISGUISED {
        let answer = decided(&server, name);
        assert_eq!(answer["outcome"], "deny", "{name:?}: {answer}");
        assert_eq!(answer["reasons"][0]["code"], "guardhost.tool_name_invalid", "{name:?}: {answer}");
        assert_eq!(answer["name"], name, "the answer names the call it answers");
        assert!(answer.get("pending").is_none(), "{name:?}: {answer}");
        assert!(answer["metadata"].get("decided_by").is_none(), "{name:?}: {answer}");
        let message = answer["reasons"][0]["message"].as_str().unwrap();
        assert!(message.contains("U+") && message.contains("call the tool by its name"), "{message}");
        assert!(!message.contains(['\u{200B}', '\0', '\u{FEFF}', '\u{2066}']), "{message:?}");
    }
    let calls: Vec<Value> = DISGUISED.iter().map(|name| json!({"name": name, "args": {}})).collect();
    let batch =
        server.call("POST", "/v1/decide/batch", &[], json!({ "calls": calls }).to_string().as_bytes());
    assert_eq!(batch.status, 200, "{}", batch.text());
    let codes: Vec<Value> = batch.json()["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["reasons"][0]["code"].clone())
        .collect();
    assert_eq!(codes, vec![json!("guardhost.tool_name_invalid"); DISGUISED.len()]);
}

fn filtered(server: &Server, tools: &[&str]) -> Value {
    let response = server.call("POST", "/v1/filter", &[], json!({ "tools": tools }).to_string().as_bytes());
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()
}

#[test]
fn the_filter_never_lists_a_disguised_name() {
    let mut tools = vec!["read_file", "bash", "curl", "web.search", "résumé"];
    tools.extend(DISGUISED);
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path());
    let server = Server::start(&["--config", path.to_str().unwrap()]);
    assert_eq!(filtered(&server, &tools), json!({"tools": ["read_file", "curl", "web.search", "résumé"]}));
    drop(server);
    // Unguarded, every tool is listed but these.
    std::fs::write(&path, "guardrails:\n  enabled: false\n").unwrap();
    let server = Server::start(&["--config", path.to_str().unwrap(), "--allow-unguarded"]);
    assert_eq!(
        filtered(&server, &tools),
        json!({"tools": ["read_file", "bash", "curl", "web.search", "résumé"]})
    );
}
