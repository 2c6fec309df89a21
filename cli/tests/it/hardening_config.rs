//! Hostile and secret-bearing configs through the real `guardhost` binary:
//! a bad file is refused promptly with a message that names the limit, and
//! no configured value ever appears in what it prints.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{use_of, write};
use guardhost::{ConfigError, ConfigOrigin, LoadedConfig};

/// The secret put into wrongly typed keys through `$GH_TEST_SECRET`.
const SENTINEL: &str = "GH_SENTINEL_S3cr3t";

/// A hang guard only, not a speed assertion: a refused file takes
/// milliseconds, an unbounded parse minutes or the machine's memory.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Runs `guardhost ARGS` with `$GH_TEST_SECRET` set, killing it past the
/// hang guard.
fn guardhost(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_guardhost"))
        .args(args)
        .env("GH_TEST_SECRET", SENTINEL)
        .env("GUARDHOST_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("guardhost starts");
    let mut input = child.stdin.take().unwrap();
    // A refused config ends guardhost before it reads its input: a broken
    // pipe here is that, not a failure (what it printed is checked).
    if let Err(error) = input.write_all(stdin) {
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
    }
    drop(input);
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > HANG_GUARD {
            child.kill().unwrap();
            panic!("guardhost {args:?} did not finish within {HANG_GUARD:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// ~400 KB expanding to 10^10 values through two levels of aliases.
fn alias_bomb() -> String {
    let a = vec!["x"; 100_000].join(", ");
    let b = vec!["*a"; 1000].join(", ");
    let c = vec!["*b"; 100].join(", ");
    format!("a: &a [{a}]\nb: &b [{b}]\nguardrails:\n  enabled: true\n  c: [{c}]\n")
}

fn hostile_files() -> Vec<(&'static str, String, &'static str)> {
    vec![
        ("alias bomb", alias_bomb(), "more than 100000 values once its `*alias` references are expanded"),
        ("1 MiB of [", "[".repeat(1 << 20), "nested more than 64 deep"),
        ("1 MiB of {", "{".repeat(1 << 20), "nested more than 64 deep"),
        (
            "deep block nesting",
            (0..200).map(|i| format!("{}k:\n", " ".repeat(i))).collect(),
            "nested more than 64 deep",
        ),
        ("deep sequences", format!("{}x\n", "- ".repeat(100_000)), "nested more than 64 deep"),
        (
            "over 1 MiB",
            format!("guardrails: {{}}\n{}", "# padding\n".repeat(120_000)),
            "over the limit of 1048576 bytes",
        ),
    ]
}

fn from_yaml(text: &str) -> Result<LoadedConfig, ConfigError> {
    LoadedConfig::from_yaml(
        text,
        PathBuf::from("/cfg"),
        ConfigOrigin::File("/cfg/config.yaml".into()),
        |_| None,
    )
}

#[test]
fn hostile_yaml_is_refused_by_the_library_with_the_limit_named() {
    for (name, yaml, expected) in hostile_files() {
        let err = from_yaml(&yaml).expect_err(name).to_string();
        assert!(err.contains(expected), "{name}: {err}");
        assert!(err.len() < 1000, "{name}: the message is one paragraph: {err}");
    }
}

#[test]
fn hostile_yaml_makes_check_fail_promptly_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    for (name, yaml, expected) in hostile_files() {
        let path = write(dir.path(), "config.yaml", &yaml);
        let out = guardhost(&["check", "--config", path.to_str().unwrap()], b"");
        assert_eq!(out.status.code(), Some(2), "{name}: {}", text(&out));
        assert!(text(&out).contains(expected), "{name}: {}", text(&out));
    }
}

/// A config whose `provider:` is `provider`, in a fresh file.
fn config(dir: &Path, name: &str, section: &str) -> PathBuf {
    write(dir, name, &format!("guardrails:\n  enabled: true\n{section}"))
}

/// (what, config section, what the message must say).
fn secret_configs() -> Vec<(&'static str, String, &'static str)> {
    let oap = use_of("guardhost_oap", "OAPGuardrailProvider");
    let allowlist = use_of("guardhost_allowlist", "AllowlistProvider");
    let framework = use_of("guardhost_test_providers", "FrameworkAwareProvider");
    vec![
        (
            "built-in allowlist",
            "  provider:\n    use: builtin:AllowlistProvider\n    config:\n      denied_tools: $GH_TEST_SECRET\n".into(),
            "`denied_tools`: invalid type: a string, expected a sequence",
        ),
        (
            "library allowlist",
            format!("  provider:\n    use: {allowlist}\n    config:\n      allowed_tools: [ls, {{x: $GH_TEST_SECRET}}]\n"),
            "`allowed_tools[1]`: invalid type: a map, expected a string",
        ),
        (
            "OAP mode",
            format!("  provider:\n    use: {oap}\n    config:\n      mode: $GH_TEST_SECRET\n"),
            "`mode`: unknown variant (a string of 18 characters), expected one of `enforce`, `warn`, `observe`",
        ),
        (
            "OAP passport_path",
            format!("  provider:\n    use: {oap}\n    config:\n      passport_path: [$GH_TEST_SECRET]\n"),
            "`passport_path`: invalid type: a sequence, expected a string",
        ),
        (
            "test provider",
            format!("  provider:\n    use: {framework}\n    config:\n      limit: $GH_TEST_SECRET\n"),
            "`limit`: invalid type: a string, expected u32",
        ),
        (
            "host section",
            "  provider:\n    use: builtin:AllowlistProvider\n    timeout_ms: $GH_TEST_SECRET\n".into(),
            "`provider.timeout_ms`: invalid type: a string, expected u64",
        ),
        (
            "host isolation",
            "  provider:\n    use: builtin:AllowlistProvider\n    isolation: $GH_TEST_SECRET\n".into(),
            "`provider.isolation`: unknown variant (a string of 18 characters)",
        ),
    ]
}

#[test]
fn no_configured_value_appears_in_check_eval_or_run() {
    let dir = tempfile::tempdir().unwrap();
    for (what, section, expected) in secret_configs() {
        let path = config(dir.path(), "config.yaml", &section);
        let path = path.to_str().unwrap();
        let runs = [
            ("check", guardhost(&["check", "--config", path], b"")),
            ("eval", guardhost(&["eval", "--config", path, "--tool", "bash", "--id", "c1"], b"")),
            ("run", guardhost(&["run", "--config", path], b"{\"name\":\"bash\",\"id\":\"1\"}\n")),
        ];
        for (command, out) in runs {
            let printed = text(&out);
            assert_ne!(out.status.code(), Some(0), "{what}, {command}: {printed}");
            assert!(!printed.contains(SENTINEL), "{what}, {command} printed the secret: {printed}");
            assert!(!printed.contains("S3cr3t"), "{what}, {command} printed part of the secret: {printed}");
            assert!(printed.contains(expected), "{what}, {command}: {printed}");
        }
    }
}

#[test]
fn no_configured_value_appears_in_a_conformance_report() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            use_of("guardhost_allowlist", "AllowlistProvider"),
            "denied_tools: $GH_TEST_SECRET\n",
            "`denied_tools`",
        ),
        (
            use_of("guardhost_oap", "OAPGuardrailProvider"),
            "mode: $GH_TEST_SECRET\n",
            "`mode`: unknown variant",
        ),
        (
            use_of("guardhost_test_providers", "FrameworkAwareProvider"),
            "limit: $GH_TEST_SECRET\n",
            "`limit`: invalid type: a string, expected u32",
        ),
    ];
    for (use_, provider_config, expected) in cases {
        let file = write(dir.path(), "provider.yaml", provider_config);
        for format in ["text", "json"] {
            let out = guardhost(
                &[
                    "conformance",
                    &use_,
                    "--config-file",
                    file.to_str().unwrap(),
                    "--format",
                    format,
                    "--iterations",
                    "200",
                    "--latency-budget-us",
                    "50000",
                ],
                b"",
            );
            let printed = text(&out);
            assert!(!printed.contains(SENTINEL), "{use_} ({format}) printed the secret: {printed}");
            assert!(printed.contains(expected), "{use_} ({format}): {printed}");
        }
    }
}

#[test]
fn a_huge_file_is_refused_without_being_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    // Sparse: 8 GiB that take no disk, and would take 8 GiB of memory.
    std::fs::File::create(&path).unwrap().set_len(8 << 30).unwrap();
    let err = LoadedConfig::from_path(&path).unwrap_err().to_string();
    assert!(err.contains("over the limit of 1048576 bytes"), "{err}");
    let out = guardhost(&["check", "--config", path.to_str().unwrap()], b"");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("over the limit of 1048576 bytes"), "{}", text(&out));
    let provider = use_of("guardhost_allowlist", "AllowlistProvider");
    let out = guardhost(&["conformance", &provider, "--config-file", path.to_str().unwrap()], b"");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("over the limit of 1048576 bytes"), "{}", text(&out));
}

#[test]
fn a_reload_error_names_the_key_never_the_value() {
    // Only this test reads the variable.
    std::env::set_var("GH_TEST_SECRET_RELOAD", SENTINEL);
    let dir = tempfile::tempdir().unwrap();
    let good = "  provider:\n    use: builtin:AllowlistProvider\n    config:\n      denied_tools: [bash]\n";
    let path = config(dir.path(), "config.yaml", good);
    guardhost_builtins::register();
    let reloader = guardhost::Reloader::open(&path).unwrap();
    for bad in [
        "  provider:\n    use: builtin:AllowlistProvider\n    config:\n      denied_tools: $GH_TEST_SECRET_RELOAD\n",
        "  provider:\n    use: builtin:AllowlistProvider\n    timeout_ms: $GH_TEST_SECRET_RELOAD\n",
    ] {
        config(dir.path(), "config.yaml", bad);
        let err = reloader.reload().unwrap_err().to_string();
        assert!(!err.contains(SENTINEL), "{err}");
        assert!(err.contains("invalid type: a string"), "{err}");
        assert!(reloader.current().is_some(), "the old guardrail keeps answering");
    }
    for (name, yaml, expected) in hostile_files() {
        std::fs::write(&path, yaml).unwrap();
        let err = reloader.reload().unwrap_err().to_string();
        assert!(err.contains(expected), "{name}: {err}");
        assert!(reloader.current().is_some());
    }
}
