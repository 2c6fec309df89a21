//! `guardhost check`, `eval` and `run` on a config with DeerFlow's
//! `authorization:` section and a `guardrails.providers` chain.

use crate::support::cli::guardhost;
use crate::support::{library, write};

fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let yaml = format!(
        "authorization:
  enabled: true
  infrastructure_tools: [tool_search]
  provider:
    use: deerflow.authz.rbac:RbacAuthorizationProvider
    config:
      roles:
        user: {{tools: {{allow: '*', deny: [update_agent]}}}}
        guest: {{tools: {{allow: [web_search, read_file]}}}}
guardrails:
  enabled: true
  providers:
    - use: builtin:AllowlistProvider
      config: {{denied_tools: [bash]}}
    - use: {}:DenyAllProvider
      name: no-writes
      tools: ['write_*']
      fail_closed: false
",
        library("guardhost_test_providers").display()
    );
    write(dir, "config.yaml", &yaml)
}

#[test]
fn check_lists_every_entry_and_probes_each() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path());
    let out = guardhost(&["check", "--config", path.to_str().unwrap()], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("guardrail:        installed: 3 guards, asked in order; the first denial wins"),
        "{text}"
    );
    assert!(
        text.contains(
            "authorization:    asked first; default_role user, fail_closed true, lets through tool_search"
        ),
        "{text}"
    );
    // Each guard by its one name and the place the config writes it, with
    // its own provider's facts, never the first entry's.
    assert!(text.contains("\nguard 'authorization' (authorization.provider)\n  provider:         rbac\n  source:           built-in (RbacAuthorizationProvider)\n"), "{text}");
    assert!(
        text.contains("\nguard 'allowlist' (guardrails.providers[0])\n  provider:         allowlist\n"),
        "{text}"
    );
    assert!(text.contains("\nguard 'no-writes' (guardrails.providers[1])\n  provider:         deny-all\n  source:           library "), "{text}");
    assert!(text.contains("  sees:             tools write_*\n  fail_closed:      false\n  mode:             enforce (denials block calls)\n  entry digest:     sha256:"), "{text}");
    assert!(!text.contains("\nprovider:  "), "no chain-wide provider line: {text}");
    assert_eq!(text.matches("  probe:            tool 'guardhost_check'").count(), 3, "{text}");
}

#[test]
fn run_answers_each_call_with_the_entry_that_decided() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path());
    let calls = [
        r#"{"name": "update_agent", "args": {}, "id": "1"}"#,
        r#"{"name": "bash", "args": {"command": "ls"}, "id": "2", "context": {"user_role": "guest"}}"#,
        r#"{"name": "bash", "args": {"command": "ls"}, "id": "3"}"#,
        r#"{"name": "write_file", "args": {"path": "x"}, "id": "4"}"#,
        r#"{"name": "tool_search", "args": {}, "id": "5", "context": {"user_role": "guest"}}"#,
        r#"{"name": "read_file", "args": {"path": "x"}, "id": "6", "context": {"user_role": "guest"}}"#,
    ];
    let out = guardhost(
        &["run", "--output", "decisions", "--config", path.to_str().unwrap()],
        Some((calls.join("\n") + "\n").as_bytes()),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let answers: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let got: Vec<(String, String, String)> = answers
        .iter()
        .map(|a| {
            (
                a["outcome"].as_str().unwrap().to_owned(),
                a["reasons"][0]["code"].as_str().unwrap().to_owned(),
                a["metadata"]["decided_by"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let expected = [
        ("deny", "authz.denied", "authorization"),
        ("deny", "authz.denied", "authorization"),
        ("deny", "oap.tool_not_allowed", "allowlist"),
        ("deny", "test.denied", "no-writes"),
        ("allow", "oap.allowed", "allowlist"),
        ("allow", "oap.allowed", "allowlist"),
    ];
    let expected: Vec<(String, String, String)> =
        expected.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())).collect();
    assert_eq!(got, expected, "{text}");
}
