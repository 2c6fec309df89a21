//! `guardhost run` on a chain whose entries answer `ask` and `rewrite`
//! (the approvals provider built in, and its library in a provider
//! process): the `ask` and `rewrite` outcomes, a resumed call, a forged
//! approval, and the summary.

use crate::support::cli::{guardhost, json_lines, stderr};
use crate::support::{library, write};
use serde_json::{json, Value};

fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let yaml = format!(
        "guardrails:
  enabled: true
  providers:
    - use: builtin:ApprovalGuardrailProvider
      name: caps
      config: {{set: {{web_fetch: {{max_bytes: 1000}}}}}}
    - use: {}:ApprovalGuardrailProvider
      name: humans
      isolation: process
      config: {{ask: [bash], approvers: [admin]}}
",
        library("guardhost_approvals").display()
    );
    write(dir, "config.yaml", &yaml)
}

fn run(config: &std::path::Path, output: &str, lines: &[Value]) -> (Vec<Value>, String) {
    let stdin: String = lines.iter().map(|line| format!("{line}\n")).collect();
    let out =
        guardhost(&["run", "--config", config.to_str().unwrap(), "--output", output], Some(stdin.as_bytes()));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (json_lines(&out), stderr(&out))
}

fn bash(command: &str, approval: Option<Value>) -> Value {
    let mut context = json!({"thread_id": "t-1", "user_id": "u-1"});
    if let Some(approval) = approval {
        context["approval"] = approval;
    }
    json!({"name": "bash", "args": {"command": command}, "id": "call-1", "context": context})
}

#[test]
fn run_answers_ask_and_rewrite_and_takes_the_approval_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path());
    let fetch = json!({"name": "web_fetch", "args": {"url": "https://example.com", "max_bytes": 9_000_000}, "id": "call-2"});
    let (answers, stderr) = run(&path, "decisions", &[bash("make deploy", None), fetch]);
    let held = &answers[0];
    assert_eq!(held["outcome"], "ask", "{held}");
    assert_eq!(held["allow"], false);
    assert_eq!(held["metadata"]["decided_by"], "humans");
    assert_eq!(held["reasons"][0]["code"], "approvals.ask");
    let ask = held["metadata"]["guardhost.outcome"]["ask"].clone();
    assert_eq!(ask["entry"], "humans");
    assert_eq!(ask["approvers"], json!(["admin"]));
    assert!(ask["digest"].as_str().unwrap().starts_with("sha256:"));

    let rewritten = &answers[1];
    assert_eq!(rewritten["outcome"], "rewrite", "{rewritten}");
    assert_eq!(rewritten["allow"], true);
    let args = json!({"url": "https://example.com", "max_bytes": 1000});
    assert_eq!(rewritten["metadata"]["guardhost.outcome"]["rewrite"]["tool_input"], args);
    assert_eq!(
        rewritten["message"]["content"],
        format!("dry run: tool 'web_fetch' allowed; would run with args {args}")
    );
    assert!(
        stderr.contains(
            "2 lines: 1 allowed, 0 denied, 0 errors, 0 provider errors, 1 held for approval, 1 rewritten"
        ),
        "{stderr}"
    );

    // The approval, given back with the call: it runs. The same approval on
    // another command is refused.
    let approval = json!({"approved": true, "entry": ask["entry"], "digest": ask["digest"], "deadline": ask["deadline"], "approved_by": "admin"});
    let (answers, _) = run(
        &path,
        "decisions",
        &[bash("make deploy", Some(approval.clone())), bash("make destroy", Some(approval))],
    );
    assert_eq!(answers[0]["outcome"], "allow", "{}", answers[0]);
    assert_eq!(answers[0]["reasons"][0]["code"], "guardhost.approved");
    assert_eq!(answers[0]["metadata"]["approved_by"], "admin");
    assert_eq!(answers[1]["outcome"], "deny", "{}", answers[1]);
    assert_eq!(answers[1]["reasons"][0]["code"], "guardhost.approval_mismatch");
}

#[test]
fn the_messages_format_writes_an_ask_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path());
    let (answers, _) = run(&path, "messages", &[bash("ls", None)]);
    let line = &answers[0];
    assert_eq!(line["type"], "ask", "{line}");
    assert_eq!(line["line"], 1);
    assert_eq!(line["tool_call_id"], "call-1");
    assert_eq!(line["name"], "bash");
    assert_eq!(line["reasons"][0]["message"], "tool 'bash' needs a human's approval");
    assert_eq!(line["ask"]["entry"], "humans");
}

#[test]
fn eval_prints_the_ask_and_exits_1_and_runs_a_rewrite_with_the_new_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path());
    let config = path.to_str().unwrap();
    let out =
        guardhost(&["eval", "--config", config, "--tool", "bash", "--args", r#"{"command": "ls"}"#], None);
    let stderr = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["allow"], false);
    assert_eq!(printed["ask"]["entry"], "humans");
    assert_eq!(printed["decision"]["reasons"][0]["code"], "approvals.ask");
    assert!(stderr.contains("entry 'humans' holds the call for a human's approval"), "{stderr}");

    let ask = &printed["ask"];
    let approval = json!({"approval": {"approved": true, "approved_by": "admin", "entry": ask["entry"], "digest": ask["digest"], "deadline": ask["deadline"]}});
    let context = approval.to_string();
    let out = guardhost(
        &[
            "eval",
            "--config",
            config,
            "--tool",
            "bash",
            "--args",
            r#"{"command": "ls"}"#,
            "--context",
            &context,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    let out = guardhost(
        &["eval", "--config", config, "--tool", "web_fetch", "--args", r#"{"max_bytes": 5}"#, "--async"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        printed["message"]["content"],
        r#"dry run: tool 'web_fetch' allowed; would run with args {"max_bytes":1000}"#
    );
}
