//! A broken config never removes the guardrail: through the real
//! `guardhost` binary, every shape of config that used to be read as "no
//! guardrail" (`guardrails:` with nothing under it, a list, a scalar, an
//! empty file, `provider: null`, a misspelled section, keys not indented
//! under `guardrails:`) is refused by `check`, `run` and `eval` with exit 2
//! and a message naming what was wrong, before any call is answered; and
//! `--require-guardrail` (or `GUARDHOST_REQUIRE_GUARDRAIL=1`) refuses a
//! config that installs no guardrail on purpose. Ordinary configs (the
//! example, the embedded default, a whole DeerFlow config, the YAML in the
//! guides) still load.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support::write;
use guardhost::{ConfigError, ConfigOrigin, LoadedConfig};

/// A call that must never be allowed by a guardrail that silently went away.
const CALL: &str = r#"{"name": "bash", "args": {"command": "rm -rf /"}, "id": "c1"}"#;

/// Runs `guardhost ARGS` with `CALL` on stdin and `env` set (the require
/// variable unset unless `env` sets it).
fn guardhost(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_guardhost"));
    command
        .args(args)
        .env_remove(guardhost::REQUIRE_GUARDRAIL_VAR)
        .env("GUARDHOST_LOG", "warn")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("guardhost starts");
    let mut input = child.stdin.take().unwrap();
    // A refused config ends guardhost before it reads its input.
    if let Err(error) = std::io::Write::write_all(&mut input, format!("{CALL}\n").as_bytes()) {
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `check`, `run` and `eval` (of `CALL`) on the config at `path`, with
/// `extra` arguments.
fn commands<'a>(path: &'a str, extra: &[&'a str]) -> Vec<Vec<&'a str>> {
    let mut all = vec![
        vec!["check", "--config", path],
        vec!["run", "--config", path],
        vec!["run", "--watch", "--config", path],
        vec!["eval", "--config", path, "--tool", "bash", "--args", r#"{"command": "rm -rf /"}"#],
    ];
    for command in &mut all {
        command.extend_from_slice(extra);
    }
    all
}

/// Asserts that `output` is a refusal: exit 2, one `guardhost: error:`
/// paragraph containing `expected`, and no answer on stdout.
fn refused(output: &Output, expected: &str, what: &str) {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(2), "{what}: {err}\n{}", stdout(output));
    assert!(err.starts_with("guardhost: error: ") && err.contains(expected), "{what}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: one paragraph: {err}");
    assert_eq!(stdout(output), "", "{what}: nothing answered");
}

/// The broken shapes and what the refusal says about each.
const BROKEN: [(&str, &str, &str); 14] = [
    ("nothing under guardrails", "guardrails:\n", "`guardrails` must be a mapping of the section's keys"),
    ("guardrails: null", "models: []\nguardrails: null\n", "found nothing under it (null)"),
    ("guardrails: []", "guardrails: []\n", "found a list"),
    ("a list of keys", "guardrails:\n  - enabled: true\n", "found a list"),
    ("a scalar", "guardrails: enabled\n", "found a string"),
    ("an empty file", "", "the config is empty (no YAML in it, or only comments)"),
    ("only comments", "# guardrails:\n#   enabled: true\n", "the config is empty"),
    ("provider: null", "guardrails:\n  enabled: true\n  provider: null\n", "`provider` is empty (null)"),
    ("provider with nothing under it", "guardrails:\n  enabled: true\n  provider:\n", "`provider` is empty"),
    ("guardrail:", "models: []\nguardrail:\n  enabled: true\n  provider: {use: builtin:AllowlistProvider}\n", "a top-level key `guardrail`: did you mean `guardrails`?"),
    ("gaurdrails:", "gaurdrails:\n  enabled: true\n", "a top-level key `gaurdrails`: did you mean `guardrails`?"),
    ("Guardrails:", "Guardrails:\n  enabled: true\n", "a top-level key `Guardrails`: did you mean `guardrails`?"),
    (
        "keys not indented",
        "guardrails:\nenabled: true\nprovider:\n  use: builtin:AllowlistProvider\n",
        "`enabled`, `provider` belong in the `guardrails:` section but are at the top level of the file, next to `guardrails:` (which has nothing under it)",
    ),
    (
        "provider not indented",
        "guardrails:\n  enabled: true\nprovider:\n  use: builtin:AllowlistProvider\n  config: {denied_tools: [bash]}\n",
        "`provider` belong in the `guardrails:` section",
    ),
];

#[test]
fn every_broken_shape_is_refused_by_check_run_and_eval() {
    let dir = tempfile::tempdir().unwrap();
    for (what, yaml, expected) in BROKEN {
        let path = write(dir.path(), "config.yaml", yaml);
        let path = path.to_str().unwrap();
        for args in commands(path, &[]) {
            refused(&guardhost(&args, &[]), expected, &format!("{what}: {args:?}"));
        }
    }
}

/// Configs that install no guardrail on purpose, and why each says so.
const UNGUARDED: [(&str, &str); 4] = [
    ("models: []\nsandbox: {use: x}\n", "the file has no `guardrails:` section"),
    ("guardrails: {}\n", "`enabled` is false"),
    ("guardrails:\n  enabled: false\n  provider: {use: builtin:AllowlistProvider}\n", "`enabled` is false"),
    ("guardrails:\n  enabled: true\n", "no `provider` is set"),
];

#[test]
fn require_guardrail_refuses_a_config_that_installs_none() {
    let dir = tempfile::tempdir().unwrap();
    for (yaml, why) in UNGUARDED {
        let path = write(dir.path(), "config.yaml", yaml);
        let path = path.to_str().unwrap();
        let expected = format!("installs no guardrail ({why}), and a guardrail is required");
        for args in commands(path, &["--require-guardrail"]) {
            refused(&guardhost(&args, &[]), &expected, &format!("{yaml:?} {args:?}"));
        }
        for value in ["1", "true", "TRUE"] {
            for args in commands(path, &[]) {
                let env = [(guardhost::REQUIRE_GUARDRAIL_VAR, value)];
                refused(&guardhost(&args, &env), &expected, &format!("{yaml:?} {args:?} {value}"));
            }
        }
        // Not required: allowed as before, but not without a word.
        let run = guardhost(&["run", "--config", path], &[]);
        assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
        assert!(stdout(&run).contains("\"status\":\"success\""), "{}", stdout(&run));
        let warning = format!("no guardrail is installed ({why}): every tool call is allowed unchecked");
        assert!(stderr(&run).contains(&warning), "{}", stderr(&run));
        let eval = guardhost(&["eval", "--config", path, "--tool", "bash"], &[]);
        assert_eq!(eval.status.code(), Some(0), "{}", stderr(&eval));
        assert!(stderr(&eval).contains(&warning), "{}", stderr(&eval));
        let check = guardhost(&["check", "--config", path], &[]);
        assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
        assert!(stdout(&check).contains(&format!("none installed ({why})")), "{}", stdout(&check));
    }
}

#[test]
fn the_require_variable_takes_one_zero_true_or_false() {
    let dir = tempfile::tempdir().unwrap();
    let unguarded = write(dir.path(), "config.yaml", "guardrails:\n  enabled: false\n");
    let unguarded = unguarded.to_str().unwrap();
    for value in ["yes", "", "2", "on", "enabled"] {
        for args in commands(unguarded, &[]) {
            refused(
                &guardhost(&args, &[(guardhost::REQUIRE_GUARDRAIL_VAR, value)]),
                "the environment variable GUARDHOST_REQUIRE_GUARDRAIL must be 1 or true (require a guardrail) or 0 or false (do not)",
                &format!("{value:?}: {args:?}"),
            );
        }
        // The embedded default is guarded, and the value is still wrong.
        refused(
            &guardhost(&["check"], &[(guardhost::REQUIRE_GUARDRAIL_VAR, value)]),
            "GUARDHOST_REQUIRE_GUARDRAIL must be",
            value,
        );
    }
    for value in ["0", "false", "FALSE"] {
        let out = guardhost(&["check", "--config", unguarded], &[(guardhost::REQUIRE_GUARDRAIL_VAR, value)]);
        assert_eq!(out.status.code(), Some(0), "{value}: {}", stderr(&out));
        // The flag requires one whatever the variable says.
        let out = guardhost(
            &["check", "--config", unguarded, "--require-guardrail"],
            &[(guardhost::REQUIRE_GUARDRAIL_VAR, value)],
        );
        refused(&out, "installs no guardrail (`enabled` is false)", value);
    }
}

/// A whole DeerFlow `config.yaml`: many other sections, the guardrail's
/// among them.
const DEERFLOW_CONFIG: &str = "\
config_version: 34
log_level: info
logging:
  enhance:
    enabled: false
token_usage:
  enabled: true
models:
  - name: gpt-4
    use: langchain_openai:ChatOpenAI
    model: gpt-4
    api_key: $OPENAI_API_KEY
tools:
  - name: bash
    group: bash
    use: deerflow.sandbox.tools:bash_tool
sandbox:
  use: deerflow.sandbox.local:LocalSandboxProvider
memory:
  enabled: true
guardrails:
  enabled: true
  fail_closed: true
  passport: null
  provider:
    use: deerflow.guardrails.builtin:AllowlistProvider
    config:
      denied_tools: [\"bash\", \"write_file\"]
";

#[test]
fn ordinary_configs_still_load_and_meet_the_requirement() {
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config.example.yaml");
    let deerflow = write(dir.path(), "deerflow.yaml", DEERFLOW_CONFIG);
    let section = write(
        dir.path(),
        "section.yaml",
        "enabled: true\nmode: enforce\nprovider:\n  use: builtin:AllowlistProvider\n  config: {denied_tools: [bash]}\n",
    );
    let configs: [Option<PathBuf>; 4] = [None, Some(example), Some(deerflow), Some(section)];
    for config in &configs {
        let mut base: Vec<&str> = Vec::new();
        if let Some(path) = config {
            base.extend(["--config", path.to_str().unwrap()]);
        }
        for (command, extra) in [
            ("check", &[][..]),
            ("run", &[][..]),
            ("eval", &["--tool", "bash", "--args", r#"{"command": "rm -rf /"}"#][..]),
        ] {
            let args: Vec<&str> =
                [command].into_iter().chain(base.iter().copied()).chain(extra.iter().copied()).collect();
            let args: Vec<&str> = args.into_iter().chain(["--require-guardrail"]).collect();
            let out = guardhost(&args, &[(guardhost::REQUIRE_GUARDRAIL_VAR, "1")]);
            let expected = if command == "eval" { 1 } else { 0 };
            assert_eq!(out.status.code(), Some(expected), "{args:?}: {}", stderr(&out));
            assert!(!stderr(&out).contains("no guardrail"), "{args:?}: {}", stderr(&out));
            if command == "run" {
                assert!(stdout(&out).contains("Guardrail denied: tool 'bash'"), "{args:?}: {}", stdout(&out));
            }
        }
    }
    // `guardhost serve` passes the option on to the server: its own tests
    // cover it (server/tests/it/http.rs).
}

/// The YAML blocks of the guides and the README that hold a section.
fn documented_configs() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // The guides and, a folder down, the providers' pages.
    let mut files: Vec<PathBuf> = Vec::new();
    let mut folders = vec![root.join("docs")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.push(root.join("README.md"));
    files.push(root.join("examples/python-provider/allowlist_provider.py"));
    let mut blocks = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        // A fenced block, or the indented block of the Python example's
        // docstring.
        let mut current: Option<(&str, Vec<String>)> = None;
        for line in text.lines() {
            match &mut current {
                None if line.trim_start() == "```yaml" => current = Some(("", Vec::new())),
                None if line == "    guardrails:" => current = Some(("    ", vec!["guardrails:".to_owned()])),
                Some((indent, block))
                    if line.trim_start() == "```" || (!indent.is_empty() && line.is_empty()) =>
                {
                    blocks.push((name.clone(), block.join("\n")));
                    current = None;
                }
                Some((indent, block)) => block.push(line.strip_prefix(*indent).unwrap_or(line).to_owned()),
                None => {}
            }
        }
    }
    blocks.retain(|(_, b)| b.contains("guardrails:") || b.contains("enabled:"));
    blocks
}

#[test]
fn the_configs_in_the_guides_are_not_refused_as_broken() {
    let blocks = documented_configs();
    assert!(blocks.len() >= 4, "{blocks:?}");
    // The providers' pages, a folder down, are read too.
    assert!(blocks.iter().any(|(file, _)| file == "cedar.md"), "{blocks:?}");
    for (file, block) in blocks {
        let loaded =
            LoadedConfig::from_yaml(&block, "/cfg".into(), ConfigOrigin::File("/cfg/c.yaml".into()), |_| {
                Some("value".into())
            });
        match loaded {
            Ok(config) => assert!(config.guardrails.is_active(), "{file}: {block}"),
            Err(
                error @ (ConfigError::Empty { .. }
                | ConfigError::SectionNotAMapping { .. }
                | ConfigError::MisplacedKeys { .. }
                | ConfigError::MisspelledSection { .. }),
            ) => panic!("{file}: {error}\n{block}"),
            // Other errors (a key a guide shows on its own) are not this
            // test's business, but none may be the null provider.
            Err(error) => assert!(!error.to_string().contains("`provider` is empty"), "{file}: {error}"),
        }
    }
}
