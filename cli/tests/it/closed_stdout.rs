//! A closed standard output (its reader went away, as `| head` does) ends
//! every command that writes to it quietly, with status 141: no panic, no
//! backtrace, no error paragraph. Each command runs as the real binary with
//! stdout a real pipe whose read end is closed before it starts.
#![cfg(unix)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

const GUARDHOST: &str = env!("CARGO_BIN_EXE_guardhost");

/// The status a closed stdout ends a command with.
const CLOSED_STDOUT: i32 = 141;

/// Runs `guardhost args` with stdout a pipe nobody reads (closed before the
/// start, so even the first write finds it closed) and `input` on stdin.
fn with_closed_stdout(args: &[&str], input: Option<Vec<u8>>) -> Output {
    let (reader, writer) = rustix::pipe::pipe().unwrap();
    drop(reader);
    let mut child = Command::new(GUARDHOST)
        .args(args)
        .env("GUARDHOST_LOG", "error")
        .env("RUST_BACKTRACE", "1")
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let feeder = input.map(|input| {
        let mut stdin = child.stdin.take().unwrap();
        // The command stops reading once its stdout is gone: a write
        // error here is expected.
        std::thread::spawn(move || drop(stdin.write_all(&input)))
    });
    let output = child.wait_with_output().unwrap();
    if let Some(feeder) = feeder {
        feeder.join().unwrap();
    }
    output
}

fn assert_quiet_141(what: &str, output: &Output) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "{what}: {stderr}");
    assert_eq!(output.status.code(), Some(CLOSED_STDOUT), "{what}: {stderr}");
    assert_eq!(stderr, "", "{what} ends without a word");
}

#[test]
fn eval_and_check_end_quietly_with_141() {
    // Denied (would be 1) and allowed (would be 0) alike.
    let output = with_closed_stdout(&["eval", "--tool", "bash"], None);
    assert_quiet_141("eval (denied)", &output);
    let output = with_closed_stdout(&["eval", "--tool", "read_file", "--async"], None);
    assert_quiet_141("eval --async (allowed)", &output);
    let output = with_closed_stdout(&["check"], None);
    assert_quiet_141("check", &output);
}

#[test]
fn run_with_more_answers_than_any_buffer_ends_quietly_with_141() {
    let input: String = (0..20_000)
        .map(|n| format!("{{\"name\": \"bash\", \"args\": {{\"n\": {n}}}, \"id\": \"c{n}\"}}\n"))
        .collect();
    for output in ["messages", "decisions"] {
        let result = with_closed_stdout(&["run", "--output", output], Some(input.clone().into_bytes()));
        assert_quiet_141(&format!("run --output {output}"), &result);
    }
    // What was decided is still audited and logged, in whole lines.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "guardrails:\n  enabled: true\n  decision_log: {path: decisions.jsonl}\n  provider:\n    use: builtin:AllowlistProvider\n    config: {denied_tools: [bash]}\n",
    )
    .unwrap();
    let audit = dir.path().join("audit.jsonl");
    let args = ["run", "--config", config.to_str().unwrap(), "--audit", audit.to_str().unwrap()];
    assert_quiet_141("run --audit", &with_closed_stdout(&args, Some(input.into_bytes())));
    for file in [audit, dir.path().join("decisions.jsonl")] {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert!(!lines.is_empty() && lines.len() < 20_000, "{}: {} lines", file.display(), lines.len());
    }
}

#[test]
fn bench_ends_quietly_with_141() {
    let output = with_closed_stdout(&["bench", "--calls", "200", "--json"], None);
    assert_quiet_141("bench --json", &output);
    let output = with_closed_stdout(&["bench", "--calls", "200"], None);
    assert_quiet_141("bench", &output);
    let output = with_closed_stdout(&["bench", "--print-mix"], None);
    assert_quiet_141("bench --print-mix", &output);
}

#[test]
fn conformance_ends_quietly_with_141() {
    let args = ["conformance", "builtin:AllowlistProvider", "--fuzz-seconds", "0", "--iterations", "10"];
    let output = with_closed_stdout(&args, None);
    assert_quiet_141("conformance", &output);
}
