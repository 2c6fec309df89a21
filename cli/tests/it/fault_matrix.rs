//! The fault matrix: every member of the fault zoo
//! (`tests/fixtures/test-providers/src/faults.rs`: the correct policy plus
//! one fault, striking on every N-th call) run through the real `guardhost
//! run --output decisions`, in every isolation mode (in process; in process
//! with `timeout_ms`; `isolation: process`, over shared memory and over
//! pipes), on the sync and the async path. Each cell asserts:
//! - one answer per line, in order, up to where the fault may end the
//!   process, and nothing else on stdout;
//! - no call allowed that the correct policy denies;
//! - every call the fault did not touch decided as the correct policy
//!   decides it, and every call it touched answered as the mode promises
//!   (failed closed, an interrupt), or the process ended as promised;
//! - the exit status.
//!
//! The quick matrix (300 calls a cell, a strike every 100) runs with the
//! tests, one test per cell; the long one (10,000 calls a cell, a strike
//! every 1,000, as the fault pass that found the bugs ran it) is ignored by
//! default: `cargo test -p guardhost-cli --test it -- --ignored fault_matrix::`.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::{use_of, write};
use serde_json::{json, Value};

/// The tools the calls cycle through, and what the correct policy does.
const TOOLS: [&str; 7] = ["bash", "ls", "write_file", "read_file", "str_replace", "web_search", "ls"];
const DENIED: [&str; 3] = ["bash", "write_file", "str_replace"];

/// How long an isolated or pooled call may take before it fails.
const TIMEOUT_MS: u64 = 300;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// In the host's process, called on the caller's thread.
    InProcess,
    /// In the host's process, on the `timeout_ms` evaluation threads.
    InProcessWithTimeout,
    /// `isolation: process` (over shared memory, the default).
    Process,
    /// `isolation: process` with `transport: pipes`.
    ProcessOverPipes,
}

const MODES: [Mode; 4] = [Mode::InProcess, Mode::InProcessWithTimeout, Mode::Process, Mode::ProcessOverPipes];

/// The zoo's members.
const FAULTS: [&str; 15] = [
    "FaultErrors",
    "FaultPanics",
    "FaultPanicsInFuture",
    "FaultInterrupts",
    "FaultHangs",
    "FaultAborts",
    "FaultSegfaults",
    "FaultExits",
    "FaultSlow",
    "FaultHugeReason",
    "FaultNoReasons",
    "FaultPrints",
    "FaultReadsStdin",
    "FaultGarbage",
    // The control: the same library, no fault at all (a strike never comes).
    "FaultSlowNever",
];

/// How a process that ends early ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Killed by a signal (abort, SIGSEGV).
    Signal,
    /// Exit status 5: an in-process provider called `exit`.
    Exit5,
    /// Still running, stuck in the provider, when the test gives up on it.
    Stuck,
}

/// What a fault does to the answers in a mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    /// Nothing: every answer is the correct one (exit 0).
    None,
    /// Each struck call fails closed (exit 4).
    Fails,
    /// Each struck call fails closed or is answered as the correct policy
    /// answers it (exit 4 or 0): a provider process that writes garbage on
    /// its pipe, then answers over shared memory, may have its answer in
    /// place before the host reads the garbage and kills it.
    MayFail,
    /// Each struck call is an interrupt (exit 3).
    Interrupts,
    /// From the first strike on, every call fails closed (exit 4).
    FailsFromThenOn,
    /// The process ends at the first strike: every line before it answered.
    Ends(End),
    /// Not run: no host can contain it in its own process.
    NotContainable,
}

fn effect(fault: &str, mode: Mode) -> Effect {
    use Mode::*;
    match (fault, mode) {
        ("FaultErrors" | "FaultPanics" | "FaultPanicsInFuture", _) => Effect::Fails,
        ("FaultInterrupts", _) => Effect::Interrupts,
        ("FaultHangs", InProcess) => Effect::Ends(End::Stuck),
        // The stuck evaluation threads stay stuck; once all are, every call
        // fails at once.
        ("FaultHangs", InProcessWithTimeout) => Effect::FailsFromThenOn,
        // The process is killed and restarted, and counts from 1 again.
        ("FaultHangs", Process | ProcessOverPipes) => Effect::Fails,
        ("FaultAborts" | "FaultSegfaults", InProcess | InProcessWithTimeout) => Effect::Ends(End::Signal),
        ("FaultExits", InProcess | InProcessWithTimeout) => Effect::Ends(End::Exit5),
        ("FaultAborts" | "FaultSegfaults" | "FaultExits", Process | ProcessOverPipes) => Effect::Fails,
        ("FaultGarbage", ProcessOverPipes) => Effect::Fails,
        ("FaultGarbage", Process) => Effect::MayFail,
        // Code in the host's process can write to any of its descriptors.
        ("FaultGarbage", InProcess | InProcessWithTimeout) => Effect::NotContainable,
        (
            "FaultSlow" | "FaultHugeReason" | "FaultNoReasons" | "FaultPrints" | "FaultReadsStdin"
            | "FaultSlowNever",
            _,
        ) => Effect::None,
        (other, _) => panic!("no expectation for {other}"),
    }
}

/// One cell's outcome.
struct Observed {
    answers: Vec<Value>,
    /// `Some(code)`, `None` for a signal; `Err(())` while still running.
    status: Result<Option<i32>, ()>,
    stderr: String,
}

/// Runs one cell: `calls` calls through `guardhost run --output decisions`,
/// fed on stdin by a thread of its own.
fn run_cell(fault: &str, mode: Mode, use_async: bool, calls: usize, every: usize) -> Observed {
    let dir = tempfile::tempdir().unwrap();
    let (symbol, every) = match fault {
        "FaultSlowNever" => ("FaultSlow", usize::MAX / 2),
        other => (other, every),
    };
    let placement = match mode {
        Mode::InProcess => String::new(),
        Mode::InProcessWithTimeout => format!("    timeout_ms: {TIMEOUT_MS}\n"),
        Mode::Process => format!("    isolation: process\n    timeout_ms: {TIMEOUT_MS}\n"),
        Mode::ProcessOverPipes => {
            format!("    isolation: process\n    transport: pipes\n    timeout_ms: {TIMEOUT_MS}\n")
        }
    };
    let config = write(
        dir.path(),
        "config.yaml",
        &format!(
            "guardrails:\n  enabled: true\n  fail_closed: true\n  provider:\n    use: {}\n{placement}    config: {{every: {every}}}\n",
            use_of("guardhost_test_providers", symbol)
        ),
    );
    let mut command = Command::new(env!("CARGO_BIN_EXE_guardhost"));
    command.args(["run", "--output", "decisions", "--config", config.to_str().unwrap()]);
    if use_async {
        command.arg("--async");
    }
    let mut child = command
        .env("GUARDHOST_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("guardhost starts");

    let mut stdin = child.stdin.take().unwrap();
    std::thread::spawn(move || {
        let mut input = String::new();
        for i in 0..calls {
            input.push_str(&json!({"name": TOOLS[i % TOOLS.len()], "id": format!("c{i}")}).to_string());
            input.push('\n');
        }
        // A process that ended or is stuck stops reading: that is fine.
        let _ = stdin.write_all(input.as_bytes());
    });
    let (send, receive) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    let mut stderr_pipe = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr_pipe.read_to_end(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    });

    // A stuck cell is given up on once it has said nothing for a while
    // (long enough for a machine busy with other work not to pass for one).
    let quiet = Duration::from_secs(10);
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut answers = Vec::new();
    let mut last = Instant::now();
    let status = loop {
        match receive.recv_timeout(Duration::from_millis(50)) {
            Ok(line) => {
                let answer = serde_json::from_str::<Value>(&line)
                    .unwrap_or_else(|e| panic!("{fault}/{mode:?}: not an answer ({e}): {:.200}", line));
                answers.push(answer);
                last = Instant::now();
                continue;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Ok(child.wait().unwrap().code());
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            // Drain what is left in the pipe.
            while let Ok(line) = receive.recv_timeout(Duration::from_secs(5)) {
                answers.push(serde_json::from_str::<Value>(&line).unwrap());
            }
            break Ok(status.code());
        }
        if last.elapsed() > quiet || Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            break Err(());
        }
    };
    Observed { answers, status, stderr: stderr.join().unwrap() }
}

/// Runs the cell and checks everything the module docs promise.
fn check_cell(fault: &str, mode: Mode, use_async: bool, calls: usize, every: usize) {
    let effect = effect(fault, mode);
    if effect == Effect::NotContainable {
        return;
    }
    let cell = format!("{fault} / {mode:?} / {}", if use_async { "async" } else { "sync" });
    let started = Instant::now();
    let observed = run_cell(fault, mode, use_async, calls, every);
    let tail: String =
        observed.stderr.chars().rev().take(600).collect::<Vec<_>>().into_iter().rev().collect();

    // Where the first strike falls, and how many lines are answered.
    let expected_lines = match effect {
        Effect::Ends(_) => every - 1,
        _ => calls,
    };
    assert_eq!(observed.answers.len(), expected_lines, "{cell}: answers; stderr ends: {tail}");
    let mut failed = 0;
    // A call that failed closed without being struck never reached the
    // provider (it was sent while the dead process was being replaced): the
    // new process counts one call fewer, and its strikes fall later.
    let mut strikes_shifted = false;
    for (i, answer) in observed.answers.iter().enumerate() {
        let number = i + 1;
        let tool = TOOLS[i % TOOLS.len()];
        assert_eq!(answer["line"], json!(number), "{cell}: in order");
        assert_eq!(answer["tool_call_id"], json!(format!("c{i}")), "{cell}: line {number}");
        let denied = DENIED.contains(&tool);
        let outcome = answer["outcome"].as_str().unwrap_or_default();
        assert!(
            !(denied && outcome == "allow"),
            "{cell}: line {number} ({tool}) was allowed, though the correct policy denies it: {answer}"
        );
        let correct = if denied { "deny" } else { "allow" };
        let struck = number % every == 0;
        let failed_closed = outcome == "deny" && answer["provider_error"] == json!(true);
        failed += usize::from(failed_closed);
        let as_promised = match effect {
            Effect::None | Effect::Ends(_) => outcome == correct && answer["provider_error"] == json!(false),
            // Under process isolation, a call sent while the dead process
            // was being replaced may fail too: closed, never open.
            Effect::Fails if matches!(mode, Mode::Process | Mode::ProcessOverPipes) => {
                (outcome == correct && (!struck || strikes_shifted)) || failed_closed
            }
            Effect::MayFail => outcome == correct || failed_closed,
            Effect::Fails => {
                if struck {
                    failed_closed
                } else {
                    outcome == correct
                }
            }
            Effect::Interrupts => {
                if struck {
                    outcome == "interrupt"
                } else {
                    outcome == correct
                }
            }
            Effect::FailsFromThenOn => {
                if number >= every {
                    failed_closed
                } else {
                    outcome == correct
                }
            }
            Effect::NotContainable => unreachable!(),
        };
        assert!(
            as_promised,
            "{cell}: line {number} ({tool}), effect {effect:?}: {:.300}",
            answer.to_string()
        );
        strikes_shifted |= failed_closed && !struck;
    }
    if matches!(effect, Effect::Fails | Effect::FailsFromThenOn) {
        assert!(failed >= calls / every, "{cell}: {failed} calls failed closed, fewer than the strikes");
    }

    let expected_status = match effect {
        Effect::None => Ok(Some(0)),
        Effect::MayFail => Ok(Some(if failed > 0 { 4 } else { 0 })),
        Effect::Fails | Effect::FailsFromThenOn => Ok(Some(4)),
        Effect::Interrupts => Ok(Some(3)),
        Effect::Ends(End::Signal) => Ok(None),
        Effect::Ends(End::Exit5) => Ok(Some(5)),
        Effect::Ends(End::Stuck) => Err(()),
        Effect::NotContainable => unreachable!(),
    };
    assert_eq!(observed.status, expected_status, "{cell}: exit status; stderr ends: {tail}");
    match effect {
        Effect::Ends(End::Exit5) => assert!(
            observed.stderr.contains(&format!(
                "the provider ended the process (it called exit) while deciding line {every}"
            )),
            "{cell}: {tail}"
        ),
        Effect::Ends(_) => {}
        // The summary is the last line but for what a provider process's
        // watchdog may still log as it kills a hung process (its own thread,
        // which can run after the summary on a busy machine).
        _ => assert!(
            observed
                .stderr
                .trim_end()
                .lines()
                .rev()
                .find(|line| !line.contains("provider process was killed"))
                .unwrap_or_default()
                .starts_with(&format!("guardhost run: {calls} lines: ")),
            "{cell}: a summary: {tail}"
        ),
    }
    if fault == "FaultPrints" {
        let printed = observed.stderr.lines().filter(|l| l.starts_with("fault-prints: deciding")).count();
        assert_eq!(printed, calls / every, "{cell}: what the provider printed went to stderr");
    }
    eprintln!("{cell}: {} answers in {:?}", observed.answers.len(), started.elapsed());
}

fn matrix(calls: usize, every: usize) {
    for fault in FAULTS {
        for mode in MODES {
            for use_async in [false, true] {
                check_cell(fault, mode, use_async, calls, every);
            }
        }
    }
}

/// The quick matrix, one test per cell (300 calls, a strike every 100), so
/// a runner spreads the cells over every core: `fault_matrix::<fault>::<mode>_<path>`.
macro_rules! quick_cells {
    ($($module:ident => $fault:literal),* $(,)?) => {$(
        mod $module {
            use super::{check_cell, Mode};

            #[test]
            fn in_process_sync() {
                check_cell($fault, Mode::InProcess, false, 300, 100);
            }

            #[test]
            fn in_process_async() {
                check_cell($fault, Mode::InProcess, true, 300, 100);
            }

            #[test]
            fn in_process_with_timeout_sync() {
                check_cell($fault, Mode::InProcessWithTimeout, false, 300, 100);
            }

            #[test]
            fn in_process_with_timeout_async() {
                check_cell($fault, Mode::InProcessWithTimeout, true, 300, 100);
            }

            #[test]
            fn process_sync() {
                check_cell($fault, Mode::Process, false, 300, 100);
            }

            #[test]
            fn process_async() {
                check_cell($fault, Mode::Process, true, 300, 100);
            }

            #[test]
            fn process_over_pipes_sync() {
                check_cell($fault, Mode::ProcessOverPipes, false, 300, 100);
            }

            #[test]
            fn process_over_pipes_async() {
                check_cell($fault, Mode::ProcessOverPipes, true, 300, 100);
            }
        }
    )*};
}

quick_cells! {
    errors => "FaultErrors",
    panics => "FaultPanics",
    panics_in_future => "FaultPanicsInFuture",
    interrupts => "FaultInterrupts",
    hangs => "FaultHangs",
    aborts => "FaultAborts",
    segfaults => "FaultSegfaults",
    exits => "FaultExits",
    slow => "FaultSlow",
    huge_reason => "FaultHugeReason",
    no_reasons => "FaultNoReasons",
    prints => "FaultPrints",
    reads_stdin => "FaultReadsStdin",
    garbage => "FaultGarbage",
    slow_never => "FaultSlowNever",
}

/// Every fault of the zoo has its cells above.
#[test]
fn the_quick_cells_cover_the_zoo() {
    let source = include_str!("fault_matrix.rs");
    for fault in FAULTS {
        assert!(source.contains(&format!("=> \"{fault}\",")), "{fault} has no quick cells");
    }
}

#[test]
#[ignore = "long: 10,000 calls a cell; run with `cargo test -p guardhost-cli --test it -- --ignored fault_matrix::`"]
fn every_fault_in_every_isolation_mode_10000_calls() {
    matrix(10_000, 1_000);
}
