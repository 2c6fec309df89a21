//! `guardhost diff`: the embedded default's allowlist against the example
//! Cedar policies over the example calls (changes, exit 1), a config
//! against itself (exit 0), both formats, a decision log as input, lines
//! that are not calls (exit 2), and what is never printed.

use std::path::Path;

use serde_json::Value;

use crate::support::cli::{guardhost, stderr, stdout};
use crate::support::write;

fn shipped(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path).display().to_string()
}

fn default_config() -> String {
    shipped("host/src/default-config.yaml")
}

fn cedar_config() -> String {
    shipped("examples/cedar/config.yaml")
}

fn calls() -> String {
    shipped("examples/calls.jsonl")
}

#[test]
fn the_allowlist_against_the_example_cedar_policies_changes_decisions() {
    let (old, new, input) = (default_config(), cedar_config(), calls());
    let out = guardhost(&["diff", "--config", &old, "--config", &new, "--input", &input], None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    // bash is denied by name before, by the policies after.
    assert!(text.contains("line 2 (bash call-2): deny (oap.tool_not_allowed) -> deny (cedar."), "{text}");
    // Tools the allowlist lets through that no policy permits, or that the
    // policies' schema cannot type (the entry fails closed).
    assert!(
        text.contains(
            "line 5 (ls call-5): allow (oap.allowed) -> deny (cedar.no_permit)   [outcome, code]\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("line 6 (mcp__github__create_issue call-6): allow (oap.allowed) -> error ("),
        "{text}"
    );
    let summary = text.lines().last().unwrap();
    assert!(summary.starts_with("6 calls: "), "{text}");
    assert!(summary.ends_with(", 0 unusable lines"), "{text}");
    // Never an argument value.
    assert!(!text.contains("example.com") && !text.contains("/etc/passwd"), "{text}");

    let out =
        guardhost(&["diff", "--config", &old, "--config", &new, "--input", &input, "--format", "json"], None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["calls"], 6);
    let changed = json["calls_changed"].as_array().unwrap();
    assert_eq!(json["changed"].as_u64(), Some(changed.len() as u64));
    let bash = changed.iter().find(|c| c["line"] == 2).unwrap();
    assert_eq!(bash["tool"], "bash");
    assert_eq!(bash["old"]["outcome"], "deny");
    assert_eq!(bash["old"]["code"], "oap.tool_not_allowed");
    assert!(bash["changed"].as_array().unwrap().contains(&Value::from("code")), "{bash}");
    assert_eq!(json["changes"]["code"].as_u64().map(|n| n >= 2), Some(true), "{json}");
}

#[test]
fn identical_configs_change_nothing() {
    let (config, input) = (cedar_config(), calls());
    let out = guardhost(&["diff", "--config", &config, "--config", &config, "--input", &input], None);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stdout(&out),
        "6 calls: 0 changed (outcome 0, code 0, policy 0, decided_by 0), 0 unusable lines\n"
    );
}

#[test]
fn a_decision_log_with_arguments_is_decided_again_and_one_without_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let logged = r#"{"decision_id":"d-1","time":"2026-01-01T00:00:00Z","run_id":null,"thread_id":"t-1","tool_call_id":"call-9","tool":"bash","outcome":"deny","mode":"enforce","would_deny":false,"reason_codes":["oap.tool_not_allowed"],"policy_id":null,"provider_error":false,"provider":"allowlist","provider_sha256":null,"latency_us":1.0,"args":{"command":"ls"}}"#;
    let input = write(dir.path(), "log.jsonl", &format!("{logged}\n"));
    let (old, new) = (default_config(), cedar_config());
    let out =
        guardhost(&["diff", "--config", &old, "--config", &new, "--input", input.to_str().unwrap()], None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert!(text.starts_with("line 1 (bash call-9): deny (oap.tool_not_allowed) -> "), "{text}");

    let without = logged.replace(r#","args":{"command":"ls"}"#, "");
    let input = write(dir.path(), "bare.jsonl", &format!("{without}\n"));
    let out =
        guardhost(&["diff", "--config", &old, "--config", &new, "--input", input.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stdout(&out)
        .contains("line 1: not a call: a decision log entry of tool 'bash' without its arguments"));
}

#[test]
fn lines_that_are_not_calls_are_reported_and_end_with_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(
        dir.path(),
        "calls.jsonl",
        "{\"name\": \"bash\", \"args\": {\"command\": \"ls\"}, \"id\": \"c1\"}\n{not json\n{\"name\": \"ls\", \"args\": []}\n",
    );
    let config = default_config();
    let out = guardhost(
        &["diff", "--config", &config, "--config", &config, "--input", input.to_str().unwrap()],
        None,
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("line 2: not a call: invalid JSON"), "{text}");
    assert!(text.contains("line 3: not a call: "), "{text}");
    assert!(
        text.ends_with("1 calls: 0 changed (outcome 0, code 0, policy 0, decided_by 0), 2 unusable lines\n"),
        "{text}"
    );
    let err = stderr(&out);
    assert!(err.contains("2 line(s) of ") && err.contains("(line 2, 3)"), "{err}");

    let out = guardhost(
        &[
            "diff",
            "--config",
            &config,
            "--config",
            &config,
            "--input",
            input.to_str().unwrap(),
            "--format",
            "json",
        ],
        None,
    );
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["errors"], 2);
    assert_eq!(json["line_errors"][0]["line"], 2);
}

#[test]
fn a_config_that_cannot_be_used_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        dir.path(),
        "bad.yaml",
        "guardrails:\n  enabled: true\n  provider:\n    uses: builtin:AllowlistProvider\n",
    );
    let (good, input) = (default_config(), calls());
    let out =
        guardhost(&["diff", "--config", &good, "--config", bad.to_str().unwrap(), "--input", &input], None);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("cannot use the new config (new --config, ") && err.contains("bad.yaml"), "{err}");
    assert!(err.contains("uses"), "{err}");

    let out = guardhost(&["diff", "--config", &good, "--input", &input], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("diff compares two configs"), "{}", stderr(&out));
}

/// The OAP example passport against the example Cedar policies over the
/// OAP example calls: the two sets agree on every outcome (what a coding
/// agent does runs, the attacks do not), and every call changes its code
/// and policy, so the diff exits 1 and says which kind of change it is.
#[test]
fn the_example_passport_against_the_example_policies_agrees_on_every_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let oap = write(
        dir.path(),
        "oap.yaml",
        &format!(
            "guardrails:\n  enabled: true\n  provider:\n    use: {}\n    config: {{passport_path: {}}}\n",
            crate::support::use_of("guardhost_oap", "OAPGuardrailProvider"),
            shipped("examples/oap/passport.json")
        ),
    );
    let input = shipped("examples/oap/calls.jsonl");
    let out = guardhost(
        &["diff", "--config", &cedar_config(), "--config", oap.to_str().unwrap(), "--input", &input],
        None,
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert!(
        text.ends_with(
            "12 calls: 12 changed (outcome 0, code 12, policy 12, decided_by 0), 0 unusable lines\n"
        ),
        "{text}"
    );
    assert!(text.contains("line 6 (bash oap-6): deny (cedar.forbid, policy no-dangerous-operations) -> deny (oap.dangerous_operation, policy system.command.execute.v1)"), "{text}");
    // Against the embedded default's allowlist, outcomes change too.
    let out = guardhost(
        &["diff", "--config", &default_config(), "--config", oap.to_str().unwrap(), "--input", &input],
        None,
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("line 1 (bash oap-1): deny (oap.tool_not_allowed) -> allow (oap.allowed"),
        "{text}"
    );
}
