//! `guardhost run` does not hide a failing provider, and does not hold back
//! answers it has decided: the real binary, real YAML files, the real
//! scripted providers of `tests/fixtures/test-providers`, in process.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::cli::{guardhost, json_lines, stderr, summary, test_provider_config};
use crate::support::write;
use serde_json::{json, Value};

fn calls(tools: &[&str]) -> String {
    tools
        .iter()
        .enumerate()
        .map(|(i, tool)| format!("{}\n", json!({"name": tool, "id": format!("c{i}")})))
        .collect()
}

fn run(config: &Path, extra: &[&str], input: &str) -> Output {
    let mut args = vec!["run", "--config", config.to_str().unwrap()];
    args.extend_from_slice(extra);
    guardhost(&args, Some(input.as_bytes()))
}

// ------------------------------------------------------ provider errors

#[test]
fn every_call_failing_closed_is_counted_as_a_provider_error_with_exit_4() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_provider_config(dir.path(), "ErroringProvider", "");
    let input = calls(&["bash"; 10]);
    for extra in [&[][..], &["--async"][..], &["--output", "decisions"][..]] {
        let out = run(&config, extra, &input);
        assert_eq!(out.status.code(), Some(4), "{extra:?}: {}", stderr(&out));
        assert_eq!(
            summary(&out),
            "guardhost run: 10 lines: 0 allowed, 0 denied, 0 errors, 10 provider errors (10 failed closed)",
            "{extra:?}"
        );
        assert_eq!(json_lines(&out).len(), 10);
    }
}

#[test]
fn every_call_failing_open_is_counted_as_a_provider_error_with_exit_4() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_provider_config(dir.path(), "ErroringProvider", "  fail_closed: false\n");
    let out = run(&config, &["--output", "decisions"], &calls(&["bash"; 10]));
    assert_eq!(out.status.code(), Some(4), "a total fail-open is not a clean run: {}", stderr(&out));
    assert_eq!(
        summary(&out),
        "guardhost run: 10 lines: 0 allowed, 0 denied, 0 errors, 10 provider errors (10 failed open)"
    );
    // The answers themselves are unchanged: allowed, marked provider_error.
    for line in json_lines(&out) {
        assert_eq!((&line["outcome"], &line["provider_error"]), (&json!("allow"), &json!(true)), "{line}");
    }
}

#[test]
fn provider_errors_win_over_malformed_lines_and_a_clean_run_says_zero() {
    let dir = tempfile::tempdir().unwrap();
    let erroring = test_provider_config(dir.path(), "ErroringProvider", "");
    let out = run(&erroring, &[], &format!("{}not json\n", calls(&["bash", "ls"])));
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert_eq!(
        summary(&out),
        "guardhost run: 3 lines: 0 allowed, 0 denied, 1 errors, 2 provider errors (2 failed closed)"
    );
    // Policy decisions are not provider errors, and say so.
    let deny_all = test_provider_config(dir.path(), "DenyAllProvider", "");
    let out = run(&deny_all, &[], &calls(&["bash", "ls"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(summary(&out), "guardhost run: 2 lines: 0 allowed, 2 denied, 0 errors, 0 provider errors");
}

// ------------------------------------------- decided answers are written

/// Starts `guardhost run --config CONFIG --input FILE [extra]` on `tools`
/// (FaultyProvider), collects stdout lines as they come, and returns them
/// once `expect` lines arrived or `patience` passed, with the process's
/// exit (None: still running, then killed).
fn run_faulty(
    tools: &[&str],
    extra: &[&str],
    expect: usize,
    patience: Duration,
) -> (Vec<Value>, Option<i32>) {
    let dir = tempfile::tempdir().unwrap();
    let config = test_provider_config(dir.path(), "FaultyProvider", "");
    let input = write(dir.path(), "calls.jsonl", &calls(tools));
    let mut child = Command::new(env!("CARGO_BIN_EXE_guardhost"))
        .args(["run", "--config", config.to_str().unwrap(), "--input", input.to_str().unwrap()])
        .args(extra)
        .env("GUARDHOST_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("guardhost starts");
    let stdout = child.stdout.take().unwrap();
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + patience;
    let mut lines = Vec::new();
    while lines.len() < expect {
        let left = deadline.saturating_duration_since(Instant::now());
        match receive.recv_timeout(left) {
            Ok(line) => lines.push(serde_json::from_str::<Value>(&line).unwrap()),
            Err(_) => break,
        }
    }
    // Give a wrong extra line the chance to show up.
    while let Ok(line) = receive.recv_timeout(Duration::from_millis(200)) {
        lines.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    let waited = Instant::now();
    let mut exited = child.try_wait().unwrap();
    while exited.is_none() && waited.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(20));
        exited = child.try_wait().unwrap();
    }
    let status = match exited {
        Some(status) => status.code(),
        None => {
            child.kill().unwrap();
            child.wait().unwrap();
            None
        }
    };
    (lines, status)
}

/// `n` ordinary calls, which FaultyProvider allows; their ids show which
/// lines were written.
fn ordinary(n: usize) -> Vec<&'static str> {
    (0..n).map(|i| ["read_file", "ls", "write_file"][i % 3]).collect()
}

#[test]
fn answers_decided_before_a_provider_hangs_are_written_under_input_file() {
    for extra in [&[][..], &["--output", "decisions"][..], &["--async"][..]] {
        let mut tools = ordinary(40);
        tools.extend(["hang", "ls"]);
        let (lines, status) = run_faulty(&tools, extra, 40, Duration::from_secs(20));
        assert_eq!(status, None, "{extra:?}: still hanging");
        assert_eq!(lines.len(), 40, "{extra:?}: every decided answer was written");
        for (i, line) in lines.iter().enumerate() {
            assert_eq!(line["tool_call_id"], json!(format!("c{i}")), "{extra:?}");
        }
    }
}

#[test]
fn answers_decided_before_a_provider_aborts_are_written() {
    let mut tools = ordinary(25);
    tools.extend(["abort", "ls"]);
    let (lines, status) = run_faulty(&tools, &[], 25, Duration::from_secs(20));
    assert_ne!(status, Some(0), "the abort took the process down");
    assert_eq!(lines.len(), 25);
    assert_eq!(lines[24]["tool_call_id"], json!("c24"));
}

#[test]
fn a_provider_that_calls_exit_ends_run_with_status_5_and_says_what_was_left() {
    // exit(0) inside the provider cannot be stopped in process
    // (`isolation: process` contains it), but it no longer passes for a
    // clean end, and no decided answer is lost.
    let mut tools = ordinary(30);
    tools.extend(["exit", "ls"]);
    let (lines, status) = run_faulty(&tools, &["--output", "decisions"], 30, Duration::from_secs(20));
    assert_eq!(status, Some(5));
    assert_eq!(lines.len(), 30);
    assert_eq!(lines[29]["line"], json!(30));

    let dir = tempfile::tempdir().unwrap();
    let config = test_provider_config(dir.path(), "FaultyProvider", "");
    let out = run(&config, &[], &calls(&["ls", "exit", "ls"]));
    assert_eq!(out.status.code(), Some(5));
    let err = stderr(&out);
    assert!(
        err.contains("guardhost run: the provider ended the process (it called exit) while deciding line 2; every line before it was answered"),
        "{err}"
    );
    assert_eq!(json_lines(&out).len(), 1);
}

#[test]
fn eval_and_check_do_not_read_a_provider_exit_as_success() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_provider_config(dir.path(), "FaultyProvider", "");
    let out = guardhost(&["eval", "--config", config.to_str().unwrap(), "--tool", "exit"], None);
    assert_eq!(out.status.code(), Some(5), "exit 0 would read as allowed: {}", stderr(&out));
    assert!(stderr(&out)
        .contains("guardhost eval: the provider ended the process (it called exit) before deciding"));
    let out = guardhost(&["eval", "--config", config.to_str().unwrap(), "--tool", "ls"], None);
    assert_eq!(out.status.code(), Some(0), "a normal end is untouched: {}", stderr(&out));
}

#[test]
fn what_an_in_process_provider_prints_never_lands_between_the_answers() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_provider_config(dir.path(), "FaultyProvider", "");
    for extra in [&[][..], &["--output", "decisions"][..], &["--async"][..]] {
        let out = run(&config, extra, &calls(&["print", "ls", "print"]));
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {}", stderr(&out));
        let lines = json_lines(&out);
        assert_eq!(lines.len(), 3, "{extra:?}: one answer per line and nothing else");
        let printed = stderr(&out).lines().filter(|l| *l == "debug: evaluating a call").count();
        assert_eq!(printed, 2, "{extra:?}: what it printed went to stderr: {}", stderr(&out));
    }
}

// ------------------------------------------------------------ input lines

#[test]
fn a_line_over_max_line_bytes_is_answered_in_place_without_being_held_or_echoed() {
    let dir = tempfile::tempdir().unwrap();
    let config = support::write(
        dir.path(),
        "config.yaml",
        "guardrails:\n  enabled: true\n  provider:\n    use: builtin:AllowlistProvider\n    config: {denied_tools: [bash]}\n",
    );
    // 50 MB of arguments in one line, between ordinary ones.
    let secret = "GH_SENTINEL_payload";
    let long = format!(
        r#"{{"id":"big","name":"write_file","args":{{"content":"{secret}{}"}}}}"#,
        "x".repeat(50 << 20)
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_guardhost"))
        .args(["run", "--output", "decisions", "--config", config.to_str().unwrap()])
        .env("GUARDHOST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(b"{\"id\":\"a\",\"name\":\"ls\"}\n").unwrap();
        stdin.write_all(long.as_bytes()).unwrap();
        stdin.write_all(b"\n{\"id\":\"b\",\"name\":\"bash\"}\n{\"id\":\"c\",\"name\":\"ls\"}\n").unwrap();
        stdin
    });
    let mut answers = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut read = Vec::new();
    for _ in 0..4 {
        read.push(answers.next().unwrap().unwrap());
    }
    // Every line is answered, in order, while the process still runs.
    let peak_kib = support::peak_rss_kib(child.id());
    let stdin = writer.join().unwrap();
    drop(stdin);
    let rest: Vec<String> = answers.map(Result::unwrap).collect();
    let output = child.wait_with_output().unwrap();
    assert!(rest.is_empty(), "{rest:?}");
    let decisions: Vec<Value> = read.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let outcomes: Vec<_> =
        decisions.iter().map(|d| (d["tool_call_id"].clone(), d["outcome"].clone())).collect();
    assert_eq!(
        outcomes,
        [
            (json!("a"), json!("allow")),
            (json!("big"), json!("error")),
            (json!("b"), json!("deny")),
            (json!("c"), json!("allow"))
        ]
    );
    let error = decisions[1]["error"]["message"].as_str().unwrap();
    assert!(
        error.starts_with(&format!("the line is {} bytes, more than the 4194304 bytes", long_len())),
        "{error}"
    );
    assert!(error.contains("--max-line-bytes"), "{error}");
    assert!(read.iter().all(|l| l.len() < 2000 && !l.contains(secret)), "nothing of it is echoed");
    assert!(peak_kib < 40_000, "peak RSS {peak_kib} KiB for a 50 MB line");
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));

    // A smaller limit, on the messages output.
    // Its id comes before the limit: it is kept. (One that comes later is
    // not read: `missing_id`.)
    let input = format!(
        "{{\"id\":\"x\",\"name\":\"ls\",\"args\":{{\"a\":\"{}\"}}}}\n{}\n",
        "y".repeat(200),
        json!({"args": {"a": "y".repeat(200)}, "id": "w"}),
    ) + &json!({"id": "z", "name": "ls"}).to_string();
    let out = run(&config, &["--max-line-bytes", "100"], &input);
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 3);
    assert_eq!((lines[0]["tool_call_id"].clone(), lines[0]["status"].clone()), (json!("x"), json!("error")));
    assert!(
        lines[0]["content"].as_str().unwrap().starts_with("guardhost: line 1: the line is 238 bytes"),
        "{}",
        lines[0]
    );
    assert_eq!(
        (lines[1]["tool_call_id"].clone(), lines[1]["status"].clone()),
        (json!("missing_id"), json!("error"))
    );
    assert_eq!(
        (lines[2]["tool_call_id"].clone(), lines[2]["status"].clone()),
        (json!("z"), json!("success"))
    );
    let out = guardhost(&["run", "--max-line-bytes", "0"], None);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--max-line-bytes"), "{}", stderr(&out));
}

fn long_len() -> usize {
    r#"{"id":"big","name":"write_file","args":{"content":"GH_SENTINEL_payload"}}"#.len() + (50 << 20)
}

#[test]
fn a_key_twice_in_a_line_is_answered_in_place_naming_it_and_nothing_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let config = support::write(
        dir.path(),
        "config.yaml",
        "guardrails:\n  enabled: true\n  provider:\n    use: builtin:AllowlistProvider\n    config: {denied_tools: [bash]}\n",
    );
    let input = [
        r#"{"id":"1","name":"read_file","name":"bash"}"#,
        r#"{"id":"2","name":"bash","args":{"command":"sudo rm -rf /","command":"ls"}}"#,
        r#"{"id":"3","name":"ls","args":{"opts":[{"k":1,"k":2}]}}"#,
        r#"{"id":"4","name":"ls"}"#,
    ]
    .join("\n");
    for output in ["decisions", "messages"] {
        let out = run(&config, &["--output", output], &input);
        let lines = json_lines(&out);
        assert_eq!(lines.len(), 4, "{output}");
        for (line, path) in lines.iter().zip(["name", "args.command", "args.opts[0].k"]) {
            let text = if output == "decisions" {
                line["error"]["message"].as_str().unwrap().to_owned()
            } else {
                line["content"].as_str().unwrap().to_owned()
            };
            assert!(text.contains(&format!("duplicate key `{path}`")), "{output}: {line}");
        }
        assert_eq!(lines[1]["tool_call_id"], "2");
        assert_eq!(lines[3]["tool_call_id"], "4");
        if output == "decisions" {
            assert_eq!(lines[0]["outcome"], "error");
            assert_eq!(lines[3]["outcome"], "allow");
        }
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    }
}
