//! End-to-end tests of `guardhost run --output decisions` and `run --async`:
//! the real binary, real YAML files, real provider libraries (the scripted
//! providers of `tests/fixtures/test-providers`), as a program driving
//! guardhost as a co-process would use them (docs/protocol.md).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::support::cli::{guardhost, json_lines, stderr, stdout, summary, test_provider_config};
use crate::support::{use_of, write};
use serde_json::{json, Value};

/// `guardhost run --config CONFIG --output decisions [extra...]` on `input`.
fn decisions(config: &Path, extra: &[&str], input: &str) -> Output {
    let mut args = vec!["run", "--config", config.to_str().unwrap(), "--output", "decisions"];
    args.extend_from_slice(extra);
    guardhost(&args, Some(input.as_bytes()))
}

/// A line for the echo-decision provider: it returns the decision the
/// call's args describe.
fn echo_call(id: &str, name: &str, spec: Value) -> String {
    json!({"name": name, "id": id, "args": spec}).to_string()
}

fn dry_run_message(id: &str, name: &str, args: &Value) -> Value {
    json!({"type": "tool", "content": format!("dry run: tool '{name}' allowed; would run with args {args}"),
           "tool_call_id": id, "name": name, "status": "success"})
}

#[test]
fn an_allowed_call_is_answered_with_its_decision_and_the_dry_run_message() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_provider_config(dir.path(), "EchoDecisionProvider", "");
    let spec = json!({"allow": true, "reasons": [["corp.ok", "read-only tool"]], "policy_id": "corp-1"});
    for extra in [&[][..], &["--async"][..]] {
        let out = decisions(&config, extra, &format!("{}\n", echo_call("c1", "read_file", spec.clone())));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.starts_with(r#"{"line":1,"outcome":"allow","#), "line and outcome come first: {text}");
        assert_eq!(
            json_lines(&out),
            [json!({
                "line": 1, "outcome": "allow", "tool_call_id": "c1", "name": "read_file",
                "guardrail": true, "allow": true,
                "reasons": [{"code": "corp.ok", "message": "read-only tool"}],
                "policy_id": "corp-1", "metadata": {}, "provider_error": false,
                "message": dry_run_message("c1", "read_file", &spec),
            })],
            "{extra:?}"
        );
        assert_eq!(summary(&out), "guardhost run: 1 lines: 1 allowed, 0 denied, 0 errors, 0 provider errors");
    }
}

#[test]
fn a_denial_keeps_every_reason_the_policy_id_and_the_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_provider_config(dir.path(), "EchoDecisionProvider", "");
    let spec = json!({
        "allow": false,
        "reasons": [["corp.path_denied", "path outside the workspace"], ["corp.size", "file too large"]],
        "policy_id": "corp-7",
        "metadata": {"rule": 12, "tags": ["fs", "write"], "nested": {"risk": 0.75}},
    });
    let audit = dir.path().join("audit.jsonl");
    for extra in [&[][..], &["--async"][..]] {
        let mut args = vec!["--audit", audit.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = decisions(&config, &args, &format!("{}\n", echo_call("c2", "write_file", spec.clone())));
        assert_eq!(out.status.code(), Some(0), "a denial is an answer, not an error: {}", stderr(&out));
        assert_eq!(
            json_lines(&out),
            [json!({
                "line": 1, "outcome": "deny", "tool_call_id": "c2", "name": "write_file",
                "guardrail": true, "allow": false,
                "reasons": [
                    {"code": "corp.path_denied", "message": "path outside the workspace"},
                    {"code": "corp.size", "message": "file too large"},
                ],
                "policy_id": "corp-7",
                "metadata": {"rule": 12, "tags": ["fs", "write"], "nested": {"risk": 0.75}},
                "provider_error": false,
                "message": {
                    "type": "tool",
                    "content": "Guardrail denied: tool 'write_file' was blocked (corp.path_denied). Reason: path outside the workspace. Choose an alternative approach.",
                    "tool_call_id": "c2", "name": "write_file", "status": "error",
                },
            })],
            "{extra:?}"
        );
        assert!(
            stderr(&out).contains("Guardrail denied: tool=write_file policy=corp-7 code=corp.path_denied")
        );
        assert_eq!(summary(&out), "guardhost run: 1 lines: 0 allowed, 1 denied, 0 errors, 0 provider errors");
    }
    // --audit works with --output decisions, on both paths: one event each.
    let events: Vec<Value> =
        std::fs::read_to_string(&audit).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(events.len(), 2);
    for event in events {
        assert_eq!(event["action"], json!("deny_tool_call"));
        assert_eq!(event["changes"]["reason_codes"], json!(["corp.path_denied", "corp.size"]));
        assert_eq!(event["changes"]["policy_id"], json!("corp-7"));
    }
}

#[test]
fn a_denial_without_reasons_gets_the_fallback_message_and_an_empty_reason_list() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_provider_config(dir.path(), "EmptyReasonsProvider", "");
    let out = decisions(&config, &[], "{\"name\":\"ls\"}\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line = &json_lines(&out)[0];
    assert_eq!(line["outcome"], json!("deny"));
    assert_eq!(line["reasons"], json!([]));
    assert_eq!(line["policy_id"], Value::Null);
    assert_eq!(line["tool_call_id"], Value::Null, "the call had no id");
    assert_eq!(line["message"]["tool_call_id"], json!("missing_id"), "the tool message's own fallback");
    assert_eq!(
        line["message"]["content"],
        json!("Guardrail denied: tool 'ls' was blocked (oap.denied). Reason: blocked by guardrail policy. Choose an alternative approach.")
    );
}

#[test]
fn a_provider_error_fails_closed_or_open_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    for (fail_closed, outcome, reason, how) in [
        (true, "deny", "guardrail provider error (fail-closed)", "failed closed"),
        (false, "allow", "guardrail provider error (fail-open)", "failed open"),
    ] {
        let config =
            test_provider_config(dir.path(), "ErroringProvider", &format!("  fail_closed: {fail_closed}\n"));
        let audit = dir.path().join(format!("audit-{fail_closed}.jsonl"));
        for extra in [&[][..], &["--async"][..]] {
            let mut args = vec!["--audit", audit.to_str().unwrap()];
            args.extend_from_slice(extra);
            let out = decisions(
                &config,
                &args,
                "{\"name\":\"bash\",\"id\":\"e1\",\"args\":{\"command\":\"ls\"}}\n",
            );
            // A provider error is counted apart from the policy's
            // decisions, and has an exit code of its own, failed closed or open.
            assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
            assert_eq!(
                summary(&out),
                format!("guardhost run: 1 lines: 0 allowed, 0 denied, 0 errors, 1 provider errors (1 {how})")
            );
            let line = &json_lines(&out)[0];
            assert_eq!(line["outcome"], json!(outcome), "fail_closed {fail_closed} {extra:?}");
            assert_eq!(line["guardrail"], json!(true));
            assert_eq!(line["allow"], json!(!fail_closed));
            assert_eq!(line["provider_error"], json!(true));
            assert_eq!(line["reasons"], json!([{"code": "oap.evaluator_error", "message": reason}]));
            let status = if fail_closed { "error" } else { "success" };
            assert_eq!(line["message"]["status"], json!(status));
            // The middleware names the path it took: --async goes through aevaluate.
            let path = if extra.is_empty() { "sync" } else { "async" };
            let logged = format!("Guardrail provider error ({path}): provider exploded");
            assert!(stderr(&out).contains(&logged), "{}", stderr(&out));
        }
        let events = std::fs::read_to_string(&audit).unwrap();
        assert_eq!(events.lines().count(), 2, "one audit event per provider error: {events}");
        assert!(events.contains("\"provider_error\":true"));
    }
}

#[test]
fn an_interrupt_is_answered_as_such_and_processing_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_provider_config(dir.path(), "InterruptingProvider", "");
    for extra in [&[][..], &["--async"][..]] {
        let out =
            decisions(&config, extra, "{\"name\":\"bash\",\"id\":\"x\"}\nnot json\n{\"name\":\"ls\"}\n");
        assert_eq!(out.status.code(), Some(3), "an interrupt wins the exit code: {}", stderr(&out));
        let lines = json_lines(&out);
        assert_eq!(
            lines,
            [
                json!({"line": 1, "outcome": "interrupt", "tool_call_id": "x", "name": "bash",
                       "interrupt": {"message": "human approval required", "payload": {"tool": "bash"}}}),
                lines[1].clone(),
                json!({"line": 3, "outcome": "interrupt", "tool_call_id": null, "name": "ls",
                       "interrupt": {"message": "human approval required", "payload": {"tool": "ls"}}}),
            ],
            "{extra:?}"
        );
        assert_eq!(lines[1]["outcome"], json!("error"));
        assert!(stderr(&out).contains("line 1: the provider raised an interrupt: human approval required"));
        assert_eq!(
            summary(&out),
            "guardhost run: 3 lines: 0 allowed, 0 denied, 1 errors, 0 provider errors, 2 interrupts"
        );
    }
}

/// Lines of every kind, each with what its answer must say.
fn mixed_input() -> (String, Vec<(&'static str, Option<&'static str>)>) {
    let lines = [
        echo_call("1", "read_file", json!({"allow": true, "reasons": [["corp.ok", ""]]})),
        "not json".to_owned(),
        echo_call(
            "3",
            "bash",
            json!({"allow": false, "reasons": [["corp.no", "no shell"]], "policy_id": "p"}),
        ),
        String::new(),
        "[1, 2]".to_owned(),
        r#"{"name": "ls", "id": "6", "args": "oops"}"#.to_owned(),
        r#"{"name": "ls", "id": "7", "context": {"authz_attributes": [1]}}"#.to_owned(),
        r#"{"name": ["x"], "id": 8}"#.to_owned(),
        echo_call("9", "web_search", json!({"allow": true, "metadata": {"k": "v"}})),
    ];
    let expected = vec![
        ("allow", None),
        ("error", Some("malformed_line")),
        ("deny", None),
        ("error", Some("malformed_line")),
        ("error", Some("malformed_line")),
        ("error", Some("malformed_line")),
        ("error", Some("invalid_request")),
        ("error", Some("malformed_line")),
        ("allow", None),
    ];
    (lines.join("\n") + "\n", expected)
}

#[test]
fn malformed_lines_are_answered_in_place_and_order_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_provider_config(dir.path(), "EchoDecisionProvider", "");
    let (input, expected) = mixed_input();
    let out = decisions(&config, &[], &input);
    assert_eq!(out.status.code(), Some(1), "malformed lines make exit 1: {}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), expected.len(), "one answer per input line");
    for (index, (line, (outcome, kind))) in lines.iter().zip(&expected).enumerate() {
        assert_eq!(line["line"], json!(index + 1), "{line}");
        assert_eq!(line["outcome"], json!(outcome), "{line}");
        assert_eq!(line["error"]["kind"].as_str(), *kind, "{line}");
        if kind.is_some() {
            // An error line carries the error tool message `--output messages` gives.
            assert_eq!(line["message"]["status"], json!("error"), "{line}");
            let content = line["message"]["content"].as_str().unwrap();
            assert_eq!(
                content,
                format!("guardhost: line {}: {}", index + 1, line["error"]["message"].as_str().unwrap())
            );
            assert!(line.get("allow").is_none() && line.get("guardrail").is_none(), "no decision: {line}");
        }
    }
    let error = |i: usize| lines[i]["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        error(1).starts_with(
            "invalid JSON (expected ident at line 1 column 2); expected one JSON object per line"
        ),
        "{}",
        error(1)
    );
    assert!(error(3).starts_with("empty line"), "{}", error(3));
    assert!(error(4).starts_with("not a JSON object"), "{}", error(4));
    assert!(
        error(5).starts_with("invalid tool call: `args` must be a mapping, found a string"),
        "{}",
        error(5)
    );
    assert!(
        error(6)
            .starts_with("cannot build the guardrail request: authz_attributes must be a Mapping, got list"),
        "{}",
        error(6)
    );
    // What could be read of the call is kept: strings only, null otherwise.
    assert_eq!((&lines[1]["tool_call_id"], &lines[1]["name"]), (&Value::Null, &Value::Null));
    assert_eq!((&lines[5]["tool_call_id"], &lines[5]["name"]), (&json!("6"), &json!("ls")));
    assert_eq!((&lines[6]["tool_call_id"], &lines[6]["name"]), (&json!("7"), &json!("ls")));
    assert_eq!((&lines[7]["tool_call_id"], &lines[7]["name"]), (&Value::Null, &Value::Null));
    assert_eq!(lines[8]["metadata"], json!({"k": "v"}));
    assert_eq!(summary(&out), "guardhost run: 9 lines: 2 allowed, 1 denied, 6 errors, 0 provider errors");
}

#[test]
fn invalid_utf8_and_a_last_line_without_newline_are_answered() {
    let out = guardhost(&["run", "--output", "decisions"], Some(b"\xff\xfe\n{\"name\":\"ls\",\"id\":\"2\"}"));
    assert_eq!(out.status.code(), Some(1));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["error"]["kind"], json!("malformed_line"));
    assert!(lines[0]["error"]["message"].as_str().unwrap().starts_with("not valid UTF-8"));
    // The embedded default allows ls.
    assert_eq!(lines[1]["outcome"], json!("allow"));
    assert_eq!(lines[1]["reasons"], json!([{"code": "oap.allowed", "message": ""}]));
}

#[test]
fn without_a_guardrail_the_answer_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "off.yaml", "guardrails:\n  enabled: false\n");
    for extra in [&[][..], &["--async"][..]] {
        let out =
            decisions(&config, extra, "{\"name\":\"bash\",\"id\":\"n1\",\"args\":{\"command\":\"ls\"}}\n");
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(
            json_lines(&out),
            [json!({
                "line": 1, "outcome": "allow", "tool_call_id": "n1", "name": "bash",
                "guardrail": false, "allow": true, "reasons": [], "policy_id": null, "metadata": {},
                "provider_error": false,
                "message": dry_run_message("n1", "bash", &json!({"command": "ls"})),
            })],
            "{extra:?}"
        );
    }
}

#[test]
fn async_answers_exactly_as_sync_in_both_formats() {
    let dir = tempfile::tempdir().unwrap();
    let (mixed, _) = mixed_input();
    for (symbol, extra) in [
        ("EchoDecisionProvider", ""),
        ("ErroringProvider", ""),
        ("ErroringProvider", "  fail_closed: false\n"),
        ("InterruptingProvider", ""),
        ("AllowAllProvider", ""),
        ("DenyAllProvider", ""),
    ] {
        let config = test_provider_config(dir.path(), symbol, extra);
        for format in ["messages", "decisions"] {
            let run = |more: &[&str]| {
                let mut args = vec!["run", "--config", config.to_str().unwrap(), "--output", format];
                args.extend_from_slice(more);
                guardhost(&args, Some(mixed.as_bytes()))
            };
            let (sync, asynchronous) = (run(&[]), run(&["--async"]));
            assert!(!stdout(&sync).is_empty());
            assert_eq!(stdout(&sync), stdout(&asynchronous), "{symbol} {extra} {format}");
            assert_eq!(sync.status.code(), asynchronous.status.code(), "{symbol} {format}");
            assert_eq!(summary(&sync), summary(&asynchronous), "{symbol} {format}");
        }
    }
}

#[test]
fn messages_stay_the_default_and_both_formats_agree() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_provider_config(dir.path(), "EchoDecisionProvider", "");
    let (input, _) = mixed_input();
    let default = guardhost(&["run", "--config", config.to_str().unwrap()], Some(input.as_bytes()));
    let messages = guardhost(
        &["run", "--config", config.to_str().unwrap(), "--output", "messages"],
        Some(input.as_bytes()),
    );
    let decided = decisions(&config, &[], &input);
    assert_eq!(stdout(&default), stdout(&messages));
    assert_eq!(default.status.code(), decided.status.code());
    assert_eq!(summary(&default), summary(&decided));
    // Each decision line carries the very tool message the messages format writes.
    let messages = json_lines(&messages);
    let decided = json_lines(&decided);
    assert_eq!(messages.len(), decided.len());
    for (message, decision) in messages.iter().zip(&decided) {
        assert_eq!(&decision["message"], message, "{decision}");
    }
}

#[test]
fn an_unknown_output_format_is_a_usage_error() {
    let out = guardhost(&["run", "--output", "xml"], None);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("invalid value 'xml' for '--output <FORMAT>'") && err.contains("messages, decisions"),
        "{err}"
    );
    assert!(stdout(&out).is_empty());
}

/// A running `guardhost run` whose answers are read one at a time.
struct CoProcess {
    child: Child,
    stdin: ChildStdin,
    answers: mpsc::Receiver<String>,
}

impl CoProcess {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_guardhost"))
            .args(args)
            .env("GUARDHOST_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("guardhost starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                if send.send(line.unwrap()).is_err() {
                    break;
                }
            }
        });
        CoProcess { child, stdin, answers }
    }

    /// Writes one line (stdin stays open) and waits for its answer.
    fn ask(&mut self, line: &str) -> Value {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        let answer = self.answers.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| {
            panic!("no answer to {line} while stdin is still open: answers are not flushed per line")
        });
        serde_json::from_str(&answer).unwrap()
    }

    /// Closes stdin and waits for the exit; returns the code and stderr.
    fn finish(self) -> (Option<i32>, String) {
        let CoProcess { child, stdin, answers } = self;
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(answers.recv_timeout(Duration::from_secs(5)).is_err(), "no answer after the last line");
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    }
}

#[test]
fn a_co_process_gets_each_answer_before_it_writes_the_next_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_provider_config(dir.path(), "EchoDecisionProvider", "");
    for extra in [&[][..], &["--async"][..]] {
        let mut args = vec!["run", "--config", config.to_str().unwrap(), "--output", "decisions"];
        args.extend_from_slice(extra);
        let mut guard = CoProcess::start(&args);
        let first = guard.ask(&echo_call("a", "ls", json!({"allow": true})));
        assert_eq!((first["line"].clone(), first["outcome"].clone()), (json!(1), json!("allow")));
        let second = guard.ask("{oops");
        assert_eq!((second["line"].clone(), second["outcome"].clone()), (json!(2), json!("error")));
        // The next call depends on the previous answer, as a caller's would.
        let third = guard.ask(&echo_call(
            "c",
            "bash",
            json!({"allow": false, "reasons": [["corp.after", second["error"]["kind"].as_str().unwrap()]]}),
        ));
        assert_eq!(third["line"], json!(3));
        assert_eq!(third["reasons"], json!([{"code": "corp.after", "message": "malformed_line"}]));
        let (code, err) = guard.finish();
        assert_eq!(code, Some(1), "{err}");
        assert_eq!(
            err.lines().last().unwrap(),
            "guardhost run: 3 lines: 1 allowed, 1 denied, 1 errors, 0 provider errors"
        );
    }
}

#[test]
fn with_watch_a_co_process_sees_the_new_policy_without_restarting() {
    let dir = tempfile::tempdir().unwrap();
    let allowlist = |denied: &str| {
        format!(
            "guardrails:\n  enabled: true\n  provider:\n    use: {}\n    config:\n      denied_tools: [{denied}]\n",
            use_of("guardhost_allowlist", "AllowlistProvider")
        )
    };
    let config = write(dir.path(), "config.yaml", &allowlist("bash"));
    let mut guard =
        CoProcess::start(&["run", "--config", config.to_str().unwrap(), "--watch", "--output", "decisions"]);
    assert_eq!(guard.ask(r#"{"name": "bash"}"#)["outcome"], json!("deny"));
    assert_eq!(guard.ask(r#"{"name": "ls"}"#)["outcome"], json!("allow"));
    write(dir.path(), "config.yaml", &allowlist("ls"));
    let mut answer = Value::Null;
    for _ in 0..100 {
        answer = guard.ask(r#"{"name": "ls"}"#);
        if answer["outcome"] == json!("deny") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        answer["reasons"],
        json!([{"code": "oap.tool_not_allowed", "message": "tool 'ls' is denied"}])
    );
    assert_eq!(guard.ask(r#"{"name": "bash"}"#)["outcome"], json!("allow"));
    let (code, err) = guard.finish();
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn the_python_example_of_the_protocol_doc_drives_the_real_binary() {
    // The set-up promises the system Python, so its absence is a failure.
    let python =
        Command::new("python3").arg("--version").output().expect("python3 runs the documented example");
    assert!(python.status.success());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let doc = std::fs::read_to_string(root.join("docs/protocol.md")).unwrap();
    let start = doc.find("```python\n").expect("docs/protocol.md has a Python example") + "```python\n".len();
    let example = &doc[start..start + doc[start..].find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "example.py", example);
    write(
        dir.path(),
        "config.yaml",
        "guardrails:\n  enabled: true\n  provider:\n    use: builtin:AllowlistProvider\n    config: {denied_tools: [bash]}\n",
    );
    let bin = Path::new(env!("CARGO_BIN_EXE_guardhost")).parent().unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin.to_path_buf())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();
    let out = Command::new("python3")
        .arg("example.py")
        .current_dir(dir.path())
        .env("PATH", path)
        .env("GUARDHOST_LOG", "error")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "run read_file\ndenied: ['oap.tool_not_allowed'] None\nexit 0\n");
}

#[test]
fn a_provider_process_that_dies_is_a_provider_error_and_the_next_line_is_decided() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "config.yaml",
        &format!(
            "guardrails:\n  enabled: true\n  provider:\n    use: {}\n    isolation: process\n",
            use_of("guardhost_test_providers", "FaultyProvider")
        ),
    );
    // The child answers a call first, so it is restarted at once after the
    // abort (see tests/isolation.rs).
    let input = "{\"name\":\"ls\",\"id\":\"1\"}\n{\"name\":\"abort\",\"id\":\"2\"}\n{\"name\":\"read_file\",\"id\":\"3\"}\n";
    for extra in [&[][..], &["--async"][..]] {
        let out = decisions(&config, extra, input);
        assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
        assert_eq!(
            summary(&out),
            "guardhost run: 3 lines: 2 allowed, 0 denied, 0 errors, 1 provider errors (1 failed closed)"
        );
        let lines = json_lines(&out);
        let outcomes: Vec<(&Value, &Value)> =
            lines.iter().map(|l| (&l["outcome"], &l["provider_error"])).collect();
        assert_eq!(
            outcomes,
            [
                (&json!("allow"), &json!(false)),
                (&json!("deny"), &json!(true)),
                (&json!("allow"), &json!(false))
            ],
            "{extra:?}: {}",
            stderr(&out)
        );
        assert_eq!(lines[1]["reasons"][0]["code"], json!("oap.evaluator_error"));
        assert!(stderr(&out).contains("SIGABRT"), "{}", stderr(&out));
    }
}
