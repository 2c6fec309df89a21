//! `guardrails.decision_log` through the real `guardhost run`: every
//! decided call, allowed ones too, one JSON line each, with its ids, the
//! provider, the latency, and the arguments masked as configured; shadow
//! mode's would-be denials say so; a log that cannot be opened stops the
//! start, naming the key.

use crate::support;

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

const GUARDHOST: &str = env!("CARGO_BIN_EXE_guardhost");

fn run(config: &std::path::Path, lines: &[Value]) -> (Vec<Value>, i32) {
    let mut child = Command::new(GUARDHOST)
        .args(["run", "--output", "decisions", "--config", config.to_str().unwrap()])
        .env("GUARDHOST_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let answers =
        String::from_utf8(output.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (answers, output.status.code().unwrap_or(-1))
}

fn entries(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn config(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    support::write(
        dir,
        "config.yaml",
        &format!(
            "guardrails:\n  enabled: true\n{extra}  decision_log:\n    path: decisions.jsonl\n    args: true\n    mask: [command, env.*]\n  provider:\n    use: builtin:AllowlistProvider\n    config: {{denied_tools: [bash]}}\n"
        ),
    )
}

#[test]
fn every_decided_call_is_logged_once_with_its_ids_and_masked_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), "");
    let context = json!({"run_id": "run-1", "thread_id": "t-1", "user_id": "u-secret"});
    let lines = [
        json!({"name": "bash", "args": {"command": "cat /etc/shadow", "env": {"TOKEN": "x"}}, "id": "c1", "context": context}),
        json!({"name": "read_file", "args": {"path": "/a"}, "id": "c2", "context": context}),
        json!("not a call"),
        json!({"name": "ls", "id": "c3"}),
    ];
    let (answers, status) = run(&path, &lines);
    assert_eq!((answers.len(), status), (4, 1), "{answers:?}");
    let logged = entries(&dir.path().join("decisions.jsonl"));
    assert_eq!(logged.len(), 3, "the malformed line is no decision: {logged:?}");
    let ids: std::collections::HashSet<_> =
        logged.iter().map(|e| e["decision_id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ids.len(), 3);
    let bash = &logged[0];
    assert_eq!(bash["tool"], "bash");
    assert_eq!(bash["tool_call_id"], "c1");
    assert_eq!((bash["run_id"].clone(), bash["thread_id"].clone()), (json!("run-1"), json!("t-1")));
    assert_eq!(bash["outcome"], "deny");
    assert_eq!(bash["reason_codes"], json!(["oap.tool_not_allowed"]));
    assert_eq!(bash["args"], json!({"command": "***", "env": {"TOKEN": "***"}}));
    assert_eq!((bash["provider"].clone(), bash["mode"].clone()), (json!("allowlist"), json!("enforce")));
    assert!(bash["latency_us"].as_f64().unwrap() > 0.0);
    assert!(!bash.to_string().contains("u-secret") && !bash.to_string().contains("shadow\""));
    assert_eq!(
        (logged[1]["outcome"].clone(), logged[1]["args"].clone()),
        (json!("allow"), json!({"path": "/a"}))
    );
    assert_eq!((logged[2]["tool"].clone(), logged[2]["run_id"].clone()), (json!("ls"), Value::Null));
    // The same decisions run answered.
    for (entry, answer) in logged.iter().zip([&answers[0], &answers[1], &answers[3]]) {
        assert_eq!(entry["outcome"], answer["outcome"]);
        assert_eq!(entry["tool_call_id"], answer["tool_call_id"]);
    }
}

#[test]
fn shadow_mode_logs_the_would_be_denials_as_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), "  mode: warn\n");
    let (answers, status) =
        run(&path, &[json!({"name": "bash", "id": "c1"}), json!({"name": "ls", "id": "c2"})]);
    assert_eq!(status, 0, "{answers:?}");
    assert_eq!(answers[0]["outcome"], "allow");
    let logged = entries(&dir.path().join("decisions.jsonl"));
    assert_eq!((logged[0]["would_deny"].clone(), logged[0]["mode"].clone()), (json!(true), json!("warn")));
    assert_eq!(logged[0]["reason_codes"], json!(["oap.tool_not_allowed"]), "the would-be denial's codes");
    assert_eq!(logged[1]["would_deny"], json!(false));
}

#[test]
fn a_log_that_cannot_be_opened_stops_the_start_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = support::write(
        dir.path(),
        "config.yaml",
        "guardrails:\n  enabled: true\n  decision_log: {path: no/such/dir/decisions.jsonl}\n  provider: {use: builtin:AllowlistProvider}\n",
    );
    let output =
        Command::new(GUARDHOST).args(["check", "--config", path.to_str().unwrap()]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("`decision_log`: cannot open") && stderr.contains("no/such/dir/decisions.jsonl"),
        "{stderr}"
    );
    let bad = support::write(
        dir.path(),
        "bad.yaml",
        "guardrails:\n  enabled: true\n  decision_log: {path: d.jsonl, when_full: later}\n  provider: {use: builtin:AllowlistProvider}\n",
    );
    let output = Command::new(GUARDHOST).args(["check", "--config", bad.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("`decision_log.when_full`: unknown variant")
            && stderr.contains("expected `drop` or `wait`"),
        "{stderr}"
    );
}

#[test]
fn masked_values_never_reach_the_log_whatever_their_case_depth_array_or_type() {
    let dir = tempfile::tempdir().unwrap();
    let path = support::write(
        dir.path(),
        "config.yaml",
        "guardrails:\n  enabled: true\n  decision_log:\n    path: decisions.jsonl\n    args: true\n    mask:\n      - password\n      - headers.authorization\n      - list[0].secret\n      - rows.token\n      - items[*].key\n      - $.env.*\n  provider:\n    use: builtin:AllowlistProvider\n    config: {denied_tools: [bash]}\n",
    );
    // Each value to hide is a distinct word, so a leak names its shape.
    let args = json!({
        "Password": "leak-case",
        "auth": {"password": "leak-nested", "deeper": [{"PASSWORD": "leak-in-array"}]},
        "headers": {"Authorization": "leak-header"},
        "request": {"headers": {"authorization": "leak-deep-header"}},
        "list": [{"secret": "leak-index-0"}, {"secret": "kept-index-1"}],
        "rows": [{"token": "leak-row-0"}, {"token": "leak-row-1"}],
        "items": [{"key": "leak-item-0"}, {"key": "leak-item-1"}],
        "env": {"HOME": "leak-env", "PATH": {"dirs": ["leak-env-object"]}},
        "password": {"object": "leak-object", "list": ["leak-object-list"]},
        "db": {"password": ["leak-array"], "Password2": "kept-other-key"},
        "more": {"password": 31337, "pAssword": null},
        "note": "kept-note"
    });
    let (answers, status) = run(&path, &[json!({"name": "read_file", "args": args, "id": "c1"})]);
    assert_eq!((answers.len(), status), (1, 0), "{answers:?}");
    let text = std::fs::read_to_string(dir.path().join("decisions.jsonl")).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    for leak in ["leak-", "31337"] {
        assert!(!text.contains(leak), "{leak} reached the log: {text}");
    }
    for kept in ["kept-index-1", "kept-other-key", "kept-note"] {
        assert!(text.contains(kept), "{kept} was masked too: {text}");
    }
    let logged: Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(
        logged["args"]["more"],
        json!({"password": "***", "pAssword": "***"}),
        "a number and null, whole"
    );
    assert_eq!(logged["args"]["password"], json!("***"), "an object, whole");
}

#[test]
fn a_mask_pattern_that_cannot_be_read_stops_the_start_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let path = support::write(
        dir.path(),
        "config.yaml",
        "guardrails:\n  enabled: true\n  decision_log: {path: d.jsonl, args: true, mask: [password, 'list[first].hush']}\n  provider: {use: builtin:AllowlistProvider}\n",
    );
    let output =
        Command::new(GUARDHOST).args(["check", "--config", path.to_str().unwrap()]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("`decision_log.mask`: pattern 2 (counting from 1): step 1 has an index that is neither a number nor `*`"),
        "{stderr}"
    );
    assert!(!stderr.contains("hush"), "the pattern itself is not quoted: {stderr}");
}
