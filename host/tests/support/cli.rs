//! Running the real `guardhost` binary and reading what it printed.

use std::io::Write;
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
