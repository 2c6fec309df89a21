//! `provider.isolation: process` through the `guardhost` command: `run`
//! answers every line through every fault of the provider process, `check`
//! says where the provider runs, and the provider process ends with its
//! host. The library-level tests are in `isolation/tests/it/isolation.rs`.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::use_of;
use serde_json::{json, Value};

const GUARDHOST: &str = env!("CARGO_BIN_EXE_guardhost");

/// A config file with `isolation: process` for `use_`, plus `extra` YAML
/// lines under `provider:`.
fn isolated_config(dir: &Path, use_: &str, extra: &str) -> PathBuf {
    support::write(
        dir,
        "config.yaml",
        &format!(
            "guardrails:\n  enabled: true\n  provider:\n    use: {use_}\n    isolation: process\n{extra}"
        ),
    )
}

/// Runs `guardhost run` on `lines` with `config`; returns (stdout lines, stderr, exit code).
fn run_lines(config: &Path, lines: &[Value]) -> (Vec<Value>, String, i32) {
    use std::io::Write;
    let mut child = std::process::Command::new(GUARDHOST)
        .args(["run", "--config", config.to_str().unwrap()])
        .env("GUARDHOST_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    for line in lines {
        writeln!(input, "{line}").unwrap();
    }
    drop(input);
    let output = child.wait_with_output().unwrap();
    let answers = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    (answers, String::from_utf8(output.stderr).unwrap(), output.status.code().unwrap_or(-1))
}

#[test]
fn guardhost_run_answers_every_line_through_every_fault_and_keeps_going() {
    let dir = tempfile::tempdir().unwrap();
    // Over the pipes, where the garbage a provider writes always comes
    // before its answer, so every fault fails its own line and no other
    // (over shared memory the garbage's line may be answered, and the next
    // one fail: the fault matrix checks `run` that way, in every mode).
    let config = isolated_config(
        dir.path(),
        &use_of("guardhost_test_providers", "FaultyProvider"),
        "    timeout_ms: 2000\n    transport: pipes\n",
    );
    // Each fault hits a child that has answered a call, so it is restarted
    // at once and the next line waits for it (a child that dies before
    // answering anything is restarted after a backoff, and lines during the
    // backoff are denied without waiting).
    let tools = [
        "read_file",
        "abort",
        "ls",
        "segfault",
        "web_search",
        "exit",
        "bash",
        "garbage",
        "task",
        "hang",
        "print",
        "ls",
    ];
    let lines: Vec<Value> =
        tools.iter().enumerate().map(|(i, tool)| json!({"name": tool, "id": format!("call-{i}")})).collect();
    let (answers, stderr, code) = run_lines(&config, &lines);
    assert_eq!(code, 4, "provider errors make exit 4: {stderr}");
    assert_eq!(answers.len(), tools.len(), "{stderr}");
    for (i, (answer, tool)) in answers.iter().zip(tools).enumerate() {
        assert_eq!(answer["tool_call_id"], json!(format!("call-{i}")));
        let faulty = ["abort", "segfault", "exit", "garbage", "hang"].contains(&tool);
        let expected = if faulty { "error" } else { "success" };
        assert_eq!(answer["status"], json!(expected), "{tool}: {answer}");
        if faulty {
            assert!(answer["content"].as_str().unwrap().contains("(oap.evaluator_error)"), "{answer}");
        }
    }
    // Each fault is logged with what happened to the process.
    for said in
        ["SIGABRT", "SIGSEGV", "exited with status 0", "not a protocol frame", "unanswered for 2000 ms"]
    {
        assert!(stderr.contains(said), "{said}: {stderr}");
    }
    // What the provider printed went to stderr, not into the answers.
    assert!(stderr.contains("debug: evaluating a call"), "{stderr}");
    assert!(
        stderr.contains("12 lines: 7 allowed, 0 denied, 0 errors, 5 provider errors (5 failed closed)"),
        "{stderr}"
    );
}

#[test]
fn check_says_where_the_provider_runs() {
    let dir = tempfile::tempdir().unwrap();
    let config = isolated_config(dir.path(), &use_of("guardhost_allowlist", "AllowlistProvider"), "");
    let output = std::process::Command::new(GUARDHOST)
        .args(["check", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("isolation:        process"), "{stdout}");
    assert!(stdout.contains("timeout:          5000 ms per call"), "{stdout}");

    let bad = support::write(
        dir.path(),
        "bad.yaml",
        "guardrails:\n  enabled: true\n  provider:\n    use: builtin:AllowlistProvider\n    isolation: sandbox\n",
    );
    let output = std::process::Command::new(GUARDHOST)
        .args(["check", "--config", bad.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr.contains("isolation") && stderr.contains("in_process") && stderr.contains("process"),
        "{stderr}"
    );
}

/// Kills a `guardhost run` host once its provider process exists, and
/// checks that the provider process ends too.
#[cfg(target_os = "linux")]
fn host_killed_provider_process_ends(mut host: std::process::Child) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let server = loop {
        if let Some(pid) = support::children_of(host.id()).first() {
            break *pid;
        }
        assert!(Instant::now() < deadline, "no provider process");
        std::thread::sleep(Duration::from_millis(10));
    };
    std::thread::sleep(Duration::from_millis(300));
    host.kill().unwrap();
    host.wait().unwrap();
    while Path::new(&format!("/proc/{server}")).exists()
        && !std::fs::read_to_string(format!("/proc/{server}/stat")).unwrap_or_default().contains(") Z ")
    {
        assert!(Instant::now() < deadline, "provider process {server} outlived its host");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(target_os = "linux")]
#[test]
fn the_provider_process_ends_when_its_host_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let config = isolated_config(dir.path(), &use_of("guardhost_test_providers", "FaultyProvider"), "");
    // A host whose provider process is inside a call that never ends.
    let mut host = std::process::Command::new(GUARDHOST)
        .args(["run", "--config", config.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    writeln!(host.stdin.as_mut().unwrap(), r#"{{"name": "hang"}}"#).unwrap();
    host_killed_provider_process_ends(host);
}

#[cfg(target_os = "linux")]
#[test]
fn the_provider_process_ends_when_its_host_is_killed_during_construction() {
    let dir = tempfile::tempdir().unwrap();
    let config = isolated_config(dir.path(), &use_of("guardhost_zoo", "HangsInConstructor"), "");
    // No thread of the provider process reads its input: it is constructing.
    let host = std::process::Command::new(GUARDHOST)
        .args(["run", "--config", config.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    host_killed_provider_process_ends(host);
}

fn check_transport(dir: &Path, extra: &str) -> String {
    let config = support::write(
        dir,
        "config.yaml",
        &format!(
            "guardrails:\n  enabled: true\n  provider:\n    use: {}\n    isolation: process\n{extra}",
            use_of("guardhost_allowlist", "AllowlistProvider")
        ),
    );
    let output = std::process::Command::new(GUARDHOST)
        .args(["check", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    stdout
}

#[test]
fn check_says_which_transport_carries_the_calls() {
    let dir = tempfile::tempdir().unwrap();
    let default = check_transport(dir.path(), "");
    assert!(
        default.contains("transport:        shared memory (1024 slots of 16 KiB; pipes for larger messages)"),
        "{default}"
    );
    let pipes = check_transport(dir.path(), "    transport: pipes\n");
    assert!(pipes.contains("transport:        pipes\n"), "{pipes}");
}
