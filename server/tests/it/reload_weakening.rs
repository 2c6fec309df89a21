//! A reload that would switch a guard off, on a server with an
//! `authorization:` section left in place: with `--require-guardrail` it is
//! refused (the chain keeps deciding, `/readyz` shows nothing weakened,
//! `/metrics` counts the refusal); without, it is applied and shows on
//! `/readyz` (`weakened`), in `/metrics` and as an error in the log.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::Server;

const AUTHORIZATION: &str = "authorization:
  enabled: true
  default_role: admin
  provider:
    use: builtin:RbacAuthorizationProvider
    config:
      roles:
        admin:
          tools: {allow: \"*\"}
";

fn guarded(enabled: bool) -> String {
    format!(
        "{AUTHORIZATION}guardrails:\n  enabled: {enabled}\n  provider:\n    use: builtin:AllowlistProvider\n    config: {{denied_tools: [bash]}}\n"
    )
}

/// Starts a watching server on the guarded config, then switches its
/// guardrails section off and reloads (SIGHUP).
fn switched_off(extra: &[&str]) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, guarded(true)).unwrap();
    let server = Server::start(&[&["--config", path.to_str().unwrap(), "--watch"][..], extra].concat());
    let ready = server.call("GET", "/readyz", &[], b"").json();
    assert_eq!(ready["weakened"], json!([]), "{ready}");
    assert!(ready["config_digest"].as_str().unwrap().starts_with("sha256:"), "{ready}");
    assert_eq!(server.decide(&json!({"name": "bash"})).json()["outcome"], "deny");
    std::fs::write(&path, guarded(false)).unwrap();
    server.signal("HUP");
    (server, dir)
}

/// Waits until `/metrics` holds `line`.
fn wait_for_metric(server: &Server, line: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let metrics = server.call("GET", "/metrics", &[], b"").text();
        if metrics.lines().any(|l| l == line) {
            return metrics;
        }
        assert!(Instant::now() < deadline, "no {line:?} in {metrics}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn under_require_guardrail_a_reload_that_switches_a_guard_off_is_refused() {
    let (server, _dir) = switched_off(&["--require-guardrail"]);
    let metrics = wait_for_metric(&server, "guardhost_reloads_total{result=\"refused\"} 1");
    assert!(metrics.contains("guardhost_reloads_total{result=\"applied\"} 0\n"), "{metrics}");
    assert!(metrics.contains(",weakened=\"false\"} 1\n"), "{metrics}");
    assert_eq!(server.decide(&json!({"name": "bash"})).json()["outcome"], "deny", "the chain still decides");
    let ready = server.call("GET", "/readyz", &[], b"");
    assert_eq!((ready.status, ready.json()["weakened"].clone()), (200, json!([])));
    let logged = server.logged().join("\n");
    assert!(logged.contains("entry 'allowlist' removed") && logged.contains("refused"), "{logged}");
}

#[test]
fn without_it_the_weaker_guardrail_is_installed_and_shown_everywhere() {
    let (server, _dir) = switched_off(&[]);
    let metrics = wait_for_metric(&server, "guardhost_reloads_total{result=\"weakening\"} 1");
    assert!(metrics.contains("guardhost_reloads_total{result=\"applied\"} 1\n"), "{metrics}");
    assert!(metrics.contains(",weakened=\"true\"} 1\n"), "{metrics}");
    assert_eq!(
        server.decide(&json!({"name": "bash"})).json()["outcome"],
        "allow",
        "only authorization is left"
    );
    let ready = server.call("GET", "/readyz", &[], b"");
    assert_eq!(ready.status, 200);
    assert_eq!(ready.json()["weakened"], json!(["entry 'allowlist' removed"]), "{}", ready.text());
    let logged = server.logged().join("\n");
    assert!(logged.contains("ERROR") && logged.contains("weakens the guardrail"), "{logged}");
}
