//! End-to-end tests of the `guardhost` binary: `check`, `eval` and `run`,
//! with real YAML files and real provider libraries.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::cli::{guardhost, json_lines, stderr, stdout};
use crate::support::{library, use_of, write};
use serde_json::{json, Value};

/// A config file in a fresh directory; `provider` is the YAML of `provider:`.
fn config(dir: &Path, provider: &str, extra: &str) -> PathBuf {
    write(dir, "config.yaml", &format!("guardrails:\n  enabled: true\n{extra}  provider:\n{provider}"))
}

fn so_allowlist(dir: &Path) -> PathBuf {
    config(
        dir,
        &format!(
            "    use: {}\n    config:\n      denied_tools: [bash]\n",
            use_of("guardhost_allowlist", "AllowlistProvider")
        ),
        "",
    )
}

fn test_provider(dir: &Path, symbol: &str) -> PathBuf {
    config(dir, &format!("    use: {}\n", use_of("guardhost_test_providers", symbol)), "")
}

#[test]
fn check_describes_the_embedded_default() {
    let out = guardhost(&["check"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for line in [
        "config:           embedded default config",
        "guardrail:        installed",
        "provider:         allowlist",
        "source:           built-in (AllowlistProvider)",
        "abi:              1.4",
        "accepted keys:    allowed_tools, denied_tools",
        "framework:        not injected",
        "not read:         tool_input, authz_attributes, attribution (declared; not prepared for it)",
        "blocks:           never (declared; decided where nothing may wait)",
        "fail_closed:      true",
        "passport:         (none)",
    ] {
        assert!(text.contains(line), "missing `{line}` in:\n{text}");
    }
}

#[test]
fn check_describes_a_library_provider() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(
        dir.path(),
        &format!(
            "    use: {}\n    config: {{blocked_prefixes: [bash]}}\n",
            use_of("blocked_prefixes", "MyGuardrailProvider")
        ),
        "  fail_closed: false\n  passport: ./passport.json\n",
    );
    let out = guardhost(&["check", "--config", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lib = library("blocked_prefixes").canonicalize().unwrap();
    for line in [
        "provider:         my-policy".to_owned(),
        format!("source:           library {} (symbol MyGuardrailProvider)", lib.display()),
        "accepted keys:    blocked_prefixes, framework (and any other key)".to_owned(),
        "framework:        injected (\"deerflow\")".to_owned(),
        "fail_closed:      false".to_owned(),
        format!("passport:         {}", dir.path().join("passport.json").display()),
        format!("sha256:           {}", sha256_of(&lib)),
        "probe:            tool 'guardhost_check' with no arguments: allowed (custom.allowed); the provider decides".to_owned(),
    ] {
        assert!(text.contains(&line), "missing `{line}` in:\n{text}");
    }
}

fn sha256_of(path: &Path) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).unwrap()).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn check_proves_the_provider_can_decide() {
    let dir = tempfile::tempdir().unwrap();
    let oap = use_of("guardhost_oap", "OAPGuardrailProvider");
    let check = |yaml: &str| {
        let path = write(dir.path(), "c.yaml", yaml);
        // No default passport under this HOME.
        Command::new(env!("CARGO_BIN_EXE_guardhost"))
            .args(["check", "--config", path.to_str().unwrap()])
            .env("HOME", dir.path())
            .output()
            .unwrap()
    };
    // A policy that simply denies the probe is a working setup.
    let out = check("guardrails:\n  enabled: true\n  provider:\n    use: builtin:AllowlistProvider\n    config: {allowed_tools: []}\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("probe:            tool 'guardhost_check' with no arguments: denied (oap.tool_not_allowed: tool 'guardhost_check' not in allowlist); the provider decides"), "{}", stdout(&out));

    // An OAP config without a passport loads, but cannot decide.
    let out = check(&format!("guardrails:\n  enabled: true\n  provider:\n    use: {oap}\n"));
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("its setup is broken") && err.contains("oap.passport_not_found"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one paragraph: {err}");

    // The example passport, relative to the config file, decides.
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/oap");
    std::fs::copy(examples.join("passport.json"), dir.path().join("passport.json")).unwrap();
    let out = check(&format!(
        "guardrails:\n  enabled: true\n  provider:\n    use: {oap}\n    config: {{passport_path: passport.json}}\n"
    ));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("the provider decides"), "{text}");
    assert!(text.contains(&format!("(relative to {})", dir.path().display())), "{text}");

    // A provider that fails on every call fails the check, saying why.
    let out = check(&format!(
        "guardrails:\n  enabled: true\n  provider: {{use: {}}}\n",
        use_of("guardhost_test_providers", "ErroringProvider")
    ));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("failed on a harmless call"), "{err}");
}

#[test]
fn check_says_plainly_when_no_guardrail_is_installed() {
    let dir = tempfile::tempdir().unwrap();
    for (yaml, why) in [
        (
            "guardrails:\n  enabled: false\n  provider: {use: builtin:AllowlistProvider}\n",
            "`enabled` is false",
        ),
        ("guardrails:\n  enabled: true\n", "no `provider` is set"),
        ("models: []\n", "the file has no `guardrails:` section"),
    ] {
        let path = write(dir.path(), "c.yaml", yaml);
        let out = guardhost(&["check", "--config", path.to_str().unwrap()], None);
        assert_eq!(out.status.code(), Some(0));
        assert!(
            stdout(&out)
                .contains(&format!("guardrail:        none installed ({why}); tool calls run unchecked")),
            "{}",
            stdout(&out)
        );
    }
}

#[test]
fn check_fails_with_one_readable_paragraph() {
    let dir = tempfile::tempdir().unwrap();
    for (yaml, expected) in [
        ("guardrails:\n  enabeld: true\n".to_owned(), "unknown field `enabeld`"),
        ("guardrails:\n  enabled: true\n  provider: {use: libnope.so:X}\n".to_owned(), "no such file; tried"),
        (
            format!(
                "guardrails:\n  enabled: true\n  provider: {{use: {}}}\n",
                use_of("guardhost_bad_descriptors", "WrongMajor")
            ),
            "built for guardhost provider ABI 99.3",
        ),
        (
            "guardrails:\n  enabled: true\n  provider: {use: x.so:Y, config: {k: $GUARDHOST_SURELY_UNSET}}\n"
                .to_owned(),
            "`guardrails.provider.config.k`: Environment variable GUARDHOST_SURELY_UNSET not found for config value",
        ),
    ] {
        let path = write(dir.path(), "c.yaml", &yaml);
        let out = guardhost(&["check", "--config", path.to_str().unwrap()], None);
        assert_eq!(out.status.code(), Some(2), "{yaml}");
        let err = stderr(&out);
        assert!(err.starts_with("guardhost: error: ") && err.contains(expected), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one paragraph: {err}");
        assert!(stdout(&out).is_empty());
    }
    let out = guardhost(&["check", "--config", "/no/such/config.yaml"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read config file /no/such/config.yaml"));
}

#[test]
fn eval_against_the_library_allowlist_denies_bash_with_the_contract_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = so_allowlist(dir.path());
    for extra in [&[][..], &["--async"][..]] {
        let mut args = vec![
            "eval",
            "--config",
            path.to_str().unwrap(),
            "--tool",
            "bash",
            "--args",
            r#"{"command":"ls"}"#,
            "--id",
            "call-1",
        ];
        args.extend_from_slice(extra);
        let out = guardhost(&args, None);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let value: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
        assert_eq!(
            value,
            json!({
                "allow": false,
                "decision": {"allow": false, "reasons": [{"code": "oap.tool_not_allowed", "message": "tool 'bash' is denied"}], "policy_id": null, "metadata": {}},
                "message": {
                    "type": "tool",
                    "content": "Guardrail denied: tool 'bash' was blocked (oap.tool_not_allowed). Reason: tool 'bash' is denied. Choose an alternative approach.",
                    "tool_call_id": "call-1", "name": "bash", "status": "error"
                }
            }),
            "{extra:?}"
        );
        assert!(stderr(&out).contains("Guardrail denied: tool=bash policy=None code=oap.tool_not_allowed"));
    }
}

#[test]
fn a_deerflow_config_works_unchanged() {
    // What DeerFlow accepts: a whole application config, PyYAML booleans,
    // `$VAR` outside `provider.config`, its package export of the allowlist.
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "config.yaml",
        "models: [{name: gpt}]\nguardrails:\n  enabled: yes\n  fail_closed: 'true'\n  passport: $GH_TEST_PASSPORT\n  provider:\n    use: $GH_TEST_USE\n    config: {denied_tools: [$GH_TEST_TOOL]}\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_guardhost"))
        .args(["eval", "--config", path.to_str().unwrap(), "--tool", "bash", "--id", "c1"])
        .env("GH_TEST_PASSPORT", "agent-42")
        .env("GH_TEST_USE", "deerflow.guardrails:AllowlistProvider")
        .env("GH_TEST_TOOL", "bash")
        .env("GUARDHOST_LOG", "warn")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "denied: {}", stderr(&out));
    let answer: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(answer["decision"]["reasons"][0]["message"], json!("tool 'bash' is denied"));
    let err = stderr(&out);
    assert!(err.contains("`guardrails.enabled` is a string, read as true"), "{err}");
    assert!(err.contains("`guardrails.fail_closed` is a string, read as true"), "{err}");
    assert!(!err.contains("agent-42"), "no configured value in the log: {err}");
}

#[test]
fn eval_allows_and_runs_the_dry_run_handler() {
    let dir = tempfile::tempdir().unwrap();
    let path = so_allowlist(dir.path());
    let out = guardhost(
        &["eval", "--config", path.to_str().unwrap(), "--tool", "read_file", "--args", r#"{"path":"a.txt"}"#],
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    let value: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(value["allow"], json!(true));
    assert_eq!(value["decision"]["reasons"], json!([{"code": "oap.allowed", "message": ""}]));
    assert_eq!(value["message"]["status"], json!("success"));
    assert_eq!(value["message"]["tool_call_id"], json!("missing_id"));
    assert_eq!(
        value["message"]["content"],
        json!(r#"dry run: tool 'read_file' allowed; would run with args {"path":"a.txt"}"#)
    );
}

#[test]
fn eval_with_a_panicking_provider_fails_closed_and_survives() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_provider(dir.path(), "PanickingProvider");
    for extra in [&[][..], &["--async"][..]] {
        let mut args = vec!["eval", "--config", path.to_str().unwrap(), "--tool", "bash"];
        args.extend_from_slice(extra);
        let out = guardhost(&args, None);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let value: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
        assert_eq!(value["decision"]["reasons"][0]["code"], json!("oap.evaluator_error"));
        assert_eq!(value["message"]["status"], json!("error"));
        assert!(stderr(&out).contains("Guardrail provider error"), "{}", stderr(&out));
    }
}

#[test]
fn eval_propagates_an_interrupt_with_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_provider(dir.path(), "InterruptingProvider");
    for extra in [&[][..], &["--async"][..]] {
        let mut args = vec!["eval", "--config", path.to_str().unwrap(), "--tool", "bash"];
        args.extend_from_slice(extra);
        let out = guardhost(&args, None);
        assert_eq!(out.status.code(), Some(3));
        assert!(stdout(&out).is_empty());
        let err = stderr(&out);
        assert!(
            err.contains("interrupt")
                && err.contains("human approval required")
                && err.contains(r#"{"tool":"bash"}"#),
            "{err}"
        );
    }
}

#[test]
fn eval_passes_the_context_to_the_provider() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_provider(dir.path(), "CapturingProvider");
    let out = guardhost(
        &[
            "eval",
            "--config",
            path.to_str().unwrap(),
            "--tool",
            "bash",
            "--context",
            r#"{"user_role":"admin","is_subagent":true}"#,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    let value: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(value["decision"]["metadata"]["user_role"], json!("admin"));
    assert_eq!(value["decision"]["metadata"]["is_subagent"], json!(true));
}

#[test]
fn eval_without_a_guardrail_has_no_decision() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.yaml", "guardrails:\n  enabled: false\n");
    let out = guardhost(&["eval", "--config", path.to_str().unwrap(), "--tool", "bash"], None);
    assert_eq!(out.status.code(), Some(0));
    let value: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(value["allow"], json!(true));
    assert_eq!(value["decision"], Value::Null);
}

#[test]
fn eval_rejects_bad_json_arguments_with_exit_2() {
    for (flag, value, expected) in [
        ("--args", "{not json", "--args is not valid JSON"),
        ("--args", "[1]", "--args must be a JSON object"),
        ("--context", "3", "--context must be a JSON object"),
    ] {
        let out = guardhost(&["eval", "--tool", "bash", flag, value], None);
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains(expected), "{}", stderr(&out));
    }
    let out = guardhost(&["eval"], None);
    assert_eq!(out.status.code(), Some(2), "a missing --tool is a usage error");
}

#[test]
fn run_answers_every_line_in_order_including_malformed_ones() {
    let input = [
        r#"{"name":"bash","args":{"command":"ls"},"id":"1"}"#,
        r#"{"name":"read_file","args":{"path":"a"},"id":"2","type":"tool_call"}"#,
        "not json",
        "",
        "[1,2]",
        r#"{"name":"ls","args":"oops","id":"6"}"#,
        r#"{"name":"ls","id":"7","context":{"authz_attributes":[1]}}"#,
        r#"{"name":"web_search","args":{"query":"q"},"id":"8","context":{"user_role":"admin"}}"#,
    ]
    .join("\n");
    let mut bytes = input.into_bytes();
    bytes.extend_from_slice(b"\n\xff\xfe\n{\"name\":\"ls\",\"id\":\"10\"}");
    let out = guardhost(&["run"], Some(&bytes));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 10, "one answer per input line");
    let status: Vec<&str> = lines.iter().map(|l| l["status"].as_str().unwrap()).collect();
    assert_eq!(
        status,
        ["error", "success", "error", "error", "error", "error", "error", "success", "error", "success"]
    );
    assert!(lines[0]["content"].as_str().unwrap().starts_with("Guardrail denied: tool 'bash' was blocked"));
    assert_eq!(lines[1]["tool_call_id"], json!("2"));
    for (index, expected) in [
        (2, "line 3: invalid JSON"),
        (3, "line 4: empty line"),
        (4, "line 5: not a JSON object"),
        (5, "line 6: invalid tool call: `args` must be a mapping, found a string"),
        (6, "line 7: cannot build the guardrail request: authz_attributes must be a Mapping, got list"),
        (8, "line 9: not valid UTF-8"),
    ] {
        let content = lines[index]["content"].as_str().unwrap();
        assert!(content.starts_with(&format!("guardhost: {expected}")), "{index}: {content}");
    }
    assert_eq!(lines[5]["tool_call_id"], json!("6"), "the id of a malformed call is kept when readable");
    assert_eq!(lines[6]["name"], json!("ls"));
    assert_eq!(
        stderr(&out).lines().last().unwrap(),
        "guardhost run: 10 lines: 3 allowed, 1 denied, 6 errors, 0 provider errors"
    );
}

#[test]
fn run_exits_0_when_every_line_is_well_formed_and_writes_the_audit_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(
        dir.path(),
        "calls.jsonl",
        "{\"name\":\"bash\",\"args\":{\"command\":\"rm -rf /\"},\"id\":\"a\",\"context\":{\"user_id\":\"u-1\",\"user_role\":\"dev\"}}\r\n{\"name\":\"ls\",\"id\":\"b\"}\n",
    );
    let audit = dir.path().join("audit.jsonl");
    let config = so_allowlist(dir.path());
    let out = guardhost(
        &[
            "run",
            "--config",
            config.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
            "--audit",
            audit.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_lines(&out).len(), 2);
    let events: Vec<Value> =
        std::fs::read_to_string(&audit).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(events.len(), 1, "only the denial is audited");
    assert_eq!(events[0]["action"], json!("deny_tool_call"));
    assert_eq!(events[0]["changes"]["tool_call_id"], json!("a"));
    assert_eq!(events[0]["changes"]["user_role"], json!("dev"));
    // The event names the provider and the exact library bytes that decided.
    let library = std::fs::read(support::library("guardhost_allowlist")).unwrap();
    let digest: String = {
        use sha2::Digest;
        sha2::Sha256::digest(&library).iter().map(|b| format!("{b:02x}")).collect()
    };
    assert_eq!(events[0]["provider"], json!({"name": "allowlist", "sha256": digest}));
    assert_eq!(events[0]["tool_call_id"], json!("a"));
    let text = events[0].to_string();
    assert!(!text.contains("rm -rf") && !text.contains("u-1"), "{text}");
    assert!(stderr(&out).contains("2 lines: 1 allowed, 1 denied, 0 errors"));
}

#[test]
fn run_answers_an_interrupt_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_provider(dir.path(), "InterruptingProvider");
    let out = guardhost(
        &["run", "--config", config.to_str().unwrap()],
        Some(b"{\"name\":\"bash\",\"id\":\"x\"}\n{\"name\":\"ls\"}\n"),
    );
    assert_eq!(out.status.code(), Some(3));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2, "processing goes on after an interrupt");
    assert_eq!(
        lines[0],
        json!({"type": "interrupt", "line": 1, "tool_call_id": "x", "name": "bash",
               "message": "human approval required", "payload": {"tool": "bash"}})
    );
    assert_eq!(lines[1]["type"], json!("interrupt"));
    assert!(stderr(&out).contains("line 1: the provider raised an interrupt: human approval required"));
    assert!(
        stderr(&out).contains("2 lines: 0 allowed, 0 denied, 0 errors, 0 provider errors, 2 interrupts"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn run_without_input_lines_says_so() {
    let out = guardhost(&["run"], Some(b""));
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).is_empty());
    assert!(stderr(&out).contains("guardhost run: 0 lines"));
}

#[test]
fn run_with_a_missing_input_file_exits_2() {
    let out = guardhost(&["run", "--input", "/no/such/calls.jsonl"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot open input /no/such/calls.jsonl"));
}

#[test]
fn the_shipped_example_config_and_calls_work() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = guardhost(&["run", "--input", root.join("examples/calls.jsonl").to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status: Vec<Value> = json_lines(&out).iter().map(|l| l["status"].clone()).collect();
    // The embedded default denies bash and write_file, and allows the rest.
    assert_eq!(status, ["success", "error", "success", "error", "success", "success"]);
    assert!(stderr(&out).contains("6 lines: 4 allowed, 2 denied, 0 errors"));
}

#[test]
fn help_states_the_embedded_default_policy() {
    // Compare with white space folded: clap wraps help to the terminal.
    let help =
        |args: &[&str]| stdout(&guardhost(args, None)).split_whitespace().collect::<Vec<_>>().join(" ");
    let top = help(&["--help"]);
    assert!(top.contains("denying the tools `bash`, `write_file` and `str_replace`"), "{top}");
    for command in ["check", "eval", "run"] {
        let text = help(&[command, "--help"]);
        assert!(text.contains("denying bash, write_file and str_replace"), "{command}: {text}");
    }
}

#[test]
fn the_first_line_of_help_names_every_command() {
    let text = stdout(&guardhost(&["--help"], None));
    let first = text.lines().next().unwrap();
    let commands: Vec<&str> = text
        .split("Commands:\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 9, "{commands:?}");
    for command in commands {
        // The provider process is `provider-server`, named in words.
        let named = if command == "provider-server" { "the provider process" } else { command };
        assert!(first.contains(named), "`{command}` is not in the first line: {first}");
    }
}

#[test]
fn bench_measures_every_call_and_reports_json() {
    let out = Command::new(env!("CARGO_BIN_EXE_guardhost"))
        .args(["bench", "--calls", "2000", "--concurrency", "2", "--json"])
        .env_remove("GUARDHOST_LOG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["provider"], "allowlist");
    assert_eq!(report["path"], "sync");
    assert_eq!(report["calls"], 2000);
    assert_eq!(report["allowed"].as_u64().unwrap() + report["denied"].as_u64().unwrap(), 2000);
    assert!(report["denied"].as_u64().unwrap() > 0);
    assert!(report["p50_ns"].as_u64().unwrap() <= report["p99_ns"].as_u64().unwrap());
    // No warning per denial: a benchmark logs errors only by default.
    assert!(!stderr(&out).contains("Guardrail denied"), "{}", stderr(&out));

    let text = guardhost(&["bench", "--calls", "500", "--async"], None);
    assert_eq!(text.status.code(), Some(0));
    assert!(
        stdout(&text).contains("provider:         allowlist (async path, 1 caller(s))"),
        "{}",
        stdout(&text)
    );
}

#[test]
fn bench_refuses_a_config_without_a_guardrail() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "off.yaml", "guardrails:\n  enabled: false\n");
    let out = guardhost(&["bench", "--config", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("installs no guardrail"), "{}", stderr(&out));
}

#[test]
fn a_library_is_never_taken_from_the_loaders_search_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "config.yaml",
        "guardrails:\n  enabled: true\n  provider:\n    use: libguardhost_allowlist.so:AllowlistProvider\n",
    );
    let built = library("guardhost_allowlist");
    let out = Command::new(env!("CARGO_BIN_EXE_guardhost"))
        .args(["check", "--config", path.to_str().unwrap()])
        .env("LD_LIBRARY_PATH", built.parent().unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let error = String::from_utf8(out.stderr).unwrap();
    assert!(
        error.contains(&format!(
            "no such file; tried {}",
            dir.path().join("libguardhost_allowlist.so").display()
        )),
        "{error}"
    );
}

#[test]
fn run_hands_a_provider_that_reads_arguments_the_text_of_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_provider(dir.path(), "ArgsTextProvider");
    let text = r#"{"command":  "ls",  "n": 1.50}"#;
    let input = format!(
        "{{\"name\": \"bash\", \"args\": {text}, \"id\": \"c1\"}}\n{{\"name\": 7, \"args\": {{\"a\": 1}}}}\n"
    );
    for path in [&["run"][..], &["run", "--async"]] {
        let mut argv = path.to_vec();
        argv.extend(["--config", config.to_str().unwrap(), "--output", "decisions"]);
        let out = guardhost(&argv, Some(input.as_bytes()));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let lines = json_lines(&out);
        assert_eq!(lines[0]["reasons"][0]["message"], json!(text), "{path:?}");
        // A line only the general parser reads: its arguments serialised.
        assert_eq!(lines[1]["reasons"][0]["message"], json!(r#"{"a":1}"#), "{path:?}");
    }
}
