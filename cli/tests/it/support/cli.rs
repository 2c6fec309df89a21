//! Running the real `guardhost` binary and reading what it printed.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::Duration;

use guardhost::ToolMessage;

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

/// A live `guardhost run --watch --config CONFIG`, asked one call at a time.
/// Killed after 60 s whatever happens, so a stuck child never hangs the run.
pub struct Watched {
    /// The process.
    pub child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Watched {
    /// Starts it, its stderr going to `stderr`, logging at `error`.
    pub fn start(config: &Path, stderr: Stdio) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_guardhost"))
            .args(["run", "--watch", "--config", config.to_str().unwrap()])
            .env("GUARDHOST_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let pid = child.id();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(60));
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        });
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        Watched { child, input, output }
    }

    /// Sends a call of `tool` and reads its answer.
    pub fn ask(&mut self, tool: &str) -> ToolMessage {
        writeln!(self.input, r#"{{"name": "{tool}", "id": "c"}}"#).unwrap();
        self.input.flush().unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?} (the host died?)"))
    }

    /// Kills it and waits for it.
    pub fn stop(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}
