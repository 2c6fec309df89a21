//! Running the real `guardhost` binary and reading what it printed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// Runs `guardhost ARGS` with `stdin` as its whole input (none: an empty
/// one), logging at `warn`.
pub fn guardhost(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_guardhost"))
        .args(args)
        .env("GUARDHOST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("guardhost starts");
    let mut input = child.stdin.take().unwrap();
    if let Some(bytes) = stdin {
        input.write_all(bytes).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

/// What it printed on stdout.
pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// What it printed on stderr.
pub fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// Its stdout, one JSON value a line.
pub fn json_lines(output: &Output) -> Vec<Value> {
    stdout(output).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

/// The last line of stderr: `run`'s summary.
pub fn summary(output: &Output) -> String {
    stderr(output).lines().last().unwrap_or_default().to_owned()
}

/// A config file installing `symbol` of the scripted test-provider
/// library; `extra` is more of the section (e.g. `"  fail_closed: false\n"`).
pub fn test_provider_config(dir: &Path, symbol: &str, extra: &str) -> PathBuf {
    super::write(
        dir,
        "config.yaml",
        &format!(
            "guardrails:\n  enabled: true\n{extra}  provider:\n    use: {}\n",
            super::use_of("guardhost_test_providers", symbol)
        ),
    )
}
