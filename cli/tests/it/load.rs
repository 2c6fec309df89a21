//! Load tests of `guardhost run`, in process and with `isolation: process`:
//! every tool call is answered exactly once and in order, none lost, none
//! duplicated, none given another call's answer (the library's async path
//! under load is tested in `isolation/tests/it/load.rs`).
//!
//! The test suite sends 20,000 calls per case. For the figures in
//! BENCHMARKS.md, send a million and print throughput and peak memory:
//!
//! ```text
//! GUARDHOST_LOAD_CALLS=1000000 cargo test --release -p guardhost-cli --test load -- --nocapture --test-threads 1
//! ```

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{children_of, peak_rss_kib, use_of, write};
use guardhost::Isolation;
use serde_json::{json, Value};

fn calls() -> usize {
    std::env::var("GUARDHOST_LOAD_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000)
}

/// The tools of the stream, and whether the allowlist below allows each.
const TOOLS: [(&str, bool); 6] = [
    ("read_file", true),
    ("bash", false),
    ("web_search", true),
    ("write_file", false),
    ("ls", true),
    ("task", true),
];

fn allowlist_config(dir: &Path, isolation: Isolation) -> std::path::PathBuf {
    write(
        dir,
        "config.yaml",
        &format!(
            "guardrails:\n  enabled: true\n  provider:\n    use: {}\n    isolation: {isolation}\n    config:\n      denied_tools: [bash, write_file]\n",
            use_of("guardhost_allowlist", "AllowlistProvider")
        ),
    )
}

fn run_stream(isolation: Isolation) {
    let n = calls();
    let dir = tempfile::tempdir().unwrap();
    let config = allowlist_config(dir.path(), isolation);
    let input = dir.path().join("calls.jsonl");
    {
        let mut out = BufWriter::new(std::fs::File::create(&input).unwrap());
        for i in 0..n {
            let (tool, _) = TOOLS[i % TOOLS.len()];
            let line = json!({"name": tool, "args": {"path": format!("/srv/{i}"), "n": i}, "id": format!("call-{i}")});
            writeln!(out, "{line}").unwrap();
        }
    }
    let started = Instant::now();
    let mut run = Command::new(env!("CARGO_BIN_EXE_guardhost"))
        .args(["run", "--config", config.to_str().unwrap(), "--input", input.to_str().unwrap()])
        .env("GUARDHOST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = run.id();
    let stdout = run.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut seen = 0usize;
        for line in BufReader::with_capacity(1 << 16, stdout).lines() {
            let line = line.unwrap();
            let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            // In order, exactly once, and decided as the provider decides.
            assert_eq!(message["tool_call_id"], json!(format!("call-{seen}")), "line {seen}: {line}");
            let (tool, allowed) = TOOLS[seen % TOOLS.len()];
            assert_eq!(message["name"], json!(tool));
            let expected = if allowed { "success" } else { "error" };
            assert_eq!(message["status"], json!(expected), "line {seen}: {line}");
            seen += 1;
        }
        seen
    });
    // Peak memory: sampled until the process exits (VmHWM only grows).
    let (mut host_kib, mut server_kib) = (0, 0);
    while run.try_wait().unwrap().is_none() {
        host_kib = host_kib.max(peak_rss_kib(pid));
        for child in children_of(pid) {
            server_kib = server_kib.max(peak_rss_kib(child));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let seen = reader.join().unwrap();
    let wall = started.elapsed();
    let output = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(seen, n, "every line answered");
    let denied = (0..n).filter(|i| !TOOLS[i % TOOLS.len()].1).count();
    assert!(
        stderr.contains(&format!("{n} lines: {} allowed, {denied} denied, 0 errors", n - denied)),
        "{stderr}"
    );
    if isolation == Isolation::Process && cfg!(target_os = "linux") {
        assert!(server_kib > 0, "the provider ran in a child process");
    }
    println!(
        "guardhost run, isolation {isolation}: {n} calls in {:.2} s ({:.0} calls/s); peak RSS: host {} KiB, provider process {} KiB",
        wall.as_secs_f64(),
        n as f64 / wall.as_secs_f64(),
        host_kib,
        server_kib
    );
}

#[test]
fn guardhost_run_answers_every_call_once_in_order_in_process() {
    run_stream(Isolation::InProcess);
}

#[test]
fn guardhost_run_answers_every_call_once_in_order_with_process_isolation() {
    run_stream(Isolation::Process);
}
