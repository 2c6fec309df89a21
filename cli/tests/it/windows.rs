//! The `guardhost` command on Windows, with real `.dll` providers: `check`,
//! `eval`, `run`, `conformance` and `bench`, with the permission rule read
//! from access-control lists (nothing accepted); a cut-short `.dll`; the shared-memory
//! transport refused; `isolation: process` over pipes, containing a crash
//! and a hang; an in-process provider's `exit` ending the command with
//! status 5. Built and run only for Windows (`scripts/test-windows` runs
//! them under wine); on other systems this file is empty.
#![cfg(windows)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support::cli::{json_lines, stderr, stdout};
use crate::support::{library, use_of, write};
use serde_json::Value;

/// Runs `guardhost ARGS` with `stdin`; nothing accepts insecure files.
fn guardhost_with(args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_guardhost"))
        .args(args)
        .env("GUARDHOST_LOG", "warn")
        .env_remove("GUARDHOST_ALLOW_INSECURE_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("guardhost.exe starts");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn guardhost(args: &[&str]) -> Output {
    guardhost_with(args, b"")
}

/// A config file in `dir` whose provider is `use_` with the YAML lines
/// `extra` (indented under `provider:`).
fn config(dir: &Path, use_: &str, extra: &str) -> PathBuf {
    write(
        dir,
        "config.yaml",
        &format!("guardrails:\n  enabled: true\n  provider:\n    use: '{use_}'\n{extra}"),
    )
}

fn allowlist_config(dir: &Path) -> PathBuf {
    config(
        dir,
        &use_of("guardhost_allowlist", "AllowlistProvider"),
        "    config:\n      denied_tools: [bash]\n",
    )
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn check_eval_and_run_decide_with_a_dll_provider() {
    let dir = tempfile::tempdir().unwrap();
    let path = allowlist_config(dir.path());
    let dll = library("guardhost_allowlist");
    assert!(dll.to_string_lossy().ends_with("guardhost_allowlist.dll"), "{}", dll.display());

    let out = guardhost(&["check", "--config", text(&path)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let described = stdout(&out);
    assert!(described.contains("guardhost_allowlist.dll"), "{described}");
    assert!(described.contains("AllowlistProvider"), "{described}");

    for extra in [&[][..], &["--async"][..]] {
        let mut args =
            vec!["eval", "--config", text(&path), "--tool", "bash", "--args", r#"{"command":"ls"}"#];
        args.extend_from_slice(extra);
        let out = guardhost(&args);
        assert_eq!(out.status.code(), Some(1), "denied: {}", stderr(&out));
        let value: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
        assert_eq!(value["decision"]["reasons"][0]["code"], "oap.tool_not_allowed");
        let mut args = vec!["eval", "--config", text(&path), "--tool", "read_file"];
        args.extend_from_slice(extra);
        let out = guardhost(&args);
        assert_eq!(out.status.code(), Some(0), "allowed: {}", stderr(&out));
    }

    let calls = b"{\"name\":\"bash\",\"args\":{\"command\":\"ls\"}}\n{\"name\":\"read_file\"}\nnot json\n";
    let out = guardhost_with(&["run", "--config", text(&path), "--output", "decisions"], calls);
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 3, "every line answered, the bad one too: {}", stdout(&out));
    assert_eq!((lines[0]["outcome"].as_str(), lines[1]["outcome"].as_str()), (Some("deny"), Some("allow")));
    assert_eq!(lines[2]["outcome"], "error", "{}", lines[2]);
}

/// Every shipped provider, built as a `.dll` (Rust, C, C++, the OAP
/// provider with its passport, the template), passes the kit; then `bench`.
#[test]
fn every_shipped_provider_dll_conforms_and_bench_runs() {
    let passport = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/oap/passport.json");
    let passport = format!(r#"{{"passport_path": {:?}}}"#, passport.to_str().unwrap());
    let providers = [
        (use_of("guardhost_allowlist", "AllowlistProvider"), r#"{"denied_tools": ["bash"]}"#.to_owned()),
        (use_of("blocked_prefixes", "MyGuardrailProvider"), r#"{"blocked_prefixes": ["bash"]}"#.to_owned()),
        (use_of("c_allowlist", "CAllowlistProvider"), r#"{"denied_tools": ["bash"]}"#.to_owned()),
        (
            use_of("cpp_blocked_prefixes", "CppBlockedPrefixes"),
            r#"{"blocked_prefixes": ["bash"]}"#.to_owned(),
        ),
        (use_of("guardhost_oap", "OAPGuardrailProvider"), passport),
        (
            use_of("guardhost_provider_template", "TemplateProvider"),
            r#"{"denied_tools": ["write_file"], "blocked_patterns": ["rm -rf"]}"#.to_owned(),
        ),
    ];
    let kit = |use_: &str, config: &str, isolation: &str| {
        let out = guardhost(&[
            "conformance",
            use_,
            "--config",
            config,
            "--isolation",
            isolation,
            "--iterations",
            "500",
            "--latency-budget-us",
            "50000",
            "--fuzz-seconds",
            "0.2",
        ]);
        assert_eq!(out.status.code(), Some(0), "{use_}: {}\n{}", stdout(&out), stderr(&out));
        stdout(&out)
    };
    for (use_, config) in &providers {
        assert!(use_.contains(".dll:"), "{use_}");
        let report = kit(use_, config, "in_process");
        assert!(report.contains(" pass, 0 warn, 0 fail, 0 skip"), "{use_}: {report}");
    }
    // In a provider process (the default under CI=true), every case passes
    // but the memory one, which reads a child's memory from /proc (Linux),
    // and the checks of what the allowlist declares it does not read and of
    // its `decide`, which need a second instance in the kit's own process.
    let (use_, config) = &providers[0];
    let report = kit(use_, config, "process");
    assert!(report.contains(" pass, 0 warn, 0 fail, 3 skip"), "{report}");
    assert!(report.contains("SKIP  memory") && report.contains("SKIP  declarations.inputs"), "{report}");
    assert!(report.contains("SKIP  agreement.decide"), "{report}");

    let dir = tempfile::tempdir().unwrap();
    let path = allowlist_config(dir.path());
    let out = guardhost(&["bench", "--config", text(&path), "--calls", "2000"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stdout(&out).trim().is_empty(), "bench prints its figures");
}

#[test]
fn a_cut_short_dll_is_refused_before_it_is_mapped() {
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read(library("guardhost_allowlist")).unwrap();
    let cut = dir.path().join("cut.dll");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let path = config(dir.path(), &format!("{}:AllowlistProvider", cut.display()), "");
    let out = guardhost(&["check", "--config", text(&path)]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let message = stderr(&out);
    assert!(message.contains("the library is truncated or still being written (section"), "{message}");
}

#[test]
fn shared_memory_is_refused_and_pipes_decide_in_a_provider_process() {
    let dir = tempfile::tempdir().unwrap();
    let allowlist = use_of("guardhost_allowlist", "AllowlistProvider");
    let path = config(
        dir.path(),
        &allowlist,
        "    isolation: process\n    transport: shared_memory\n    config:\n      denied_tools: [bash]\n",
    );
    let out = guardhost(&["check", "--config", text(&path)]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stderr(&out).contains("`provider.transport: shared_memory` is Linux only"), "{}", stderr(&out));

    let path =
        config(dir.path(), &allowlist, "    isolation: process\n    config:\n      denied_tools: [bash]\n");
    let out = guardhost(&["check", "--config", text(&path)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("transport:        pipes"), "{}", stdout(&out));
    let out = guardhost(&["eval", "--config", text(&path), "--tool", "bash"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let out = guardhost(&["eval", "--config", text(&path), "--tool", "read_file"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_provider_process_that_crashes_or_hangs_is_contained() {
    let dir = tempfile::tempdir().unwrap();
    let faulty = use_of("guardhost_test_providers", "FaultyProvider");
    let path = config(dir.path(), &faulty, "    isolation: process\n    timeout_ms: 2000\n");
    let tools = ["read_file", "abort", "ls", "segfault", "bash", "exit", "task", "hang", "ls"];
    let calls: String = tools.iter().map(|tool| format!("{{\"name\":\"{tool}\"}}\n")).collect();
    let out = guardhost_with(&["run", "--config", text(&path), "--output", "decisions"], calls.as_bytes());
    let lines = json_lines(&out);
    assert_eq!(lines.len(), tools.len(), "every call answered: {}\n{}", stdout(&out), stderr(&out));
    for (line, tool) in lines.iter().zip(tools) {
        let faulty = ["abort", "segfault", "exit", "hang"].contains(&tool);
        assert_eq!(line["allow"], !faulty, "{tool}: {line}");
        assert_eq!(line["provider_error"], faulty, "{tool}: {line}");
        if faulty {
            assert_eq!(line["reasons"][0]["code"], "oap.evaluator_error", "{tool}: {line}");
        }
    }
    assert!(stderr(&out).contains("unanswered for 2000 ms"), "the hang is named: {}", stderr(&out));
}

/// A provider in the host's process that calls `exit` (`ExitProcess` on
/// Windows) ends the command with status 5 and says what was left, as on
/// Linux: the exit sentinel DLL sees the process end.
#[test]
fn a_provider_that_calls_exit_in_process_ends_the_command_with_status_5() {
    let dir = tempfile::tempdir().unwrap();
    let faulty = use_of("guardhost_test_providers", "FaultyProvider");
    let path = config(dir.path(), &faulty, "");
    let out = guardhost(&["eval", "--config", text(&path), "--tool", "exit"]);
    assert_eq!(out.status.code(), Some(5), "exit 0 would read as allowed: {}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("guardhost eval: the provider ended the process (it called exit) before deciding"),
        "{}",
        stderr(&out)
    );
    // A normal end is untouched.
    let out = guardhost(&["eval", "--config", text(&path), "--tool", "ls"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let calls =
        b"{\"name\":\"ls\",\"id\":\"a\"}\n{\"name\":\"exit\",\"id\":\"b\"}\n{\"name\":\"ls\",\"id\":\"c\"}\n";
    let out = guardhost_with(&["run", "--config", text(&path), "--output", "decisions"], calls);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("while deciding line 2; every line before it was answered"),
        "{}",
        stderr(&out)
    );
    assert_eq!(json_lines(&out).len(), 1, "the answer before the exit is not lost: {}", stdout(&out));
}

/// `run --watch` loads a private copy of the library, so the `.dll` it
/// names is not locked: an operator overwrites it in place while the host
/// serves, and the next config change loads the new version.
#[test]
fn run_watch_lets_a_dll_in_use_be_replaced_and_loads_its_new_version() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let dll = dir.path().join("policy.dll");
    std::fs::copy(library("guardhost_allowlist"), &dll).unwrap();
    let yaml = |symbol: &str, config: &str| {
        format!(
            "guardrails:\n  enabled: true\n  provider:\n    use: '{}:{symbol}'\n    config: {config}\n",
            dll.display()
        )
    };
    let path = write(dir.path(), "config.yaml", &yaml("AllowlistProvider", "{denied_tools: [bash]}"));
    let mut host = support::cli::Watched::start(&path, Stdio::null());
    assert_eq!(host.ask("bash").status, guardhost::ToolStatus::Error);

    // Overwritten in place while it is in use: Windows would refuse this
    // for a mapped file.
    std::fs::write(&dll, std::fs::read(library("blocked_prefixes")).unwrap())
        .expect("the .dll is not locked");
    assert_eq!(host.ask("bash").status, guardhost::ToolStatus::Error, "the loaded copy still answers");

    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&path, yaml("MyGuardrailProvider", "{blocked_prefixes: [web_]}")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while host.ask("bash").status == guardhost::ToolStatus::Error {
        assert!(Instant::now() < deadline, "the new library was never loaded");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(host.ask("web_search").status, guardhost::ToolStatus::Error);
    host.stop();
}
