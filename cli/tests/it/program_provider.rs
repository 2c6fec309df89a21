//! Provider programs (`provider.command`), run for real: the Python
//! reference provider under `examples/` and a scripted Python fixture,
//! through every host feature that applies to them.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{load, object, write};
use guardhost::{
    instantiate, AbiKind, GuardrailMiddleware, GuardrailRequest, Isolation, LoadedConfig, LoadedProvider,
    ProviderFailure, ProviderSource, ProviderSpec, Reloader, ToolCallError, ToolCallRequest,
};
use guardhost_kit::{CaseId, Status};
use serde_json::{json, Value};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn example() -> String {
    workspace().join("examples/python-provider/allowlist_provider.py").display().to_string()
}

fn scripted_path() -> String {
    workspace().join("tests/fixtures/programs/scripted_provider.py").display().to_string()
}

/// `python3`, or `None` after printing why the test is skipped.
fn python() -> Option<&'static str> {
    let found = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if !found {
        assert!(
            std::env::var_os("GUARDHOST_REQUIRE_PYTHON").is_none(),
            "GUARDHOST_REQUIRE_PYTHON is set, but there is no `python3` on PATH"
        );
        eprintln!("SKIPPED: no `python3` on PATH; the provider-program tests need it");
    }
    found.then_some("python3")
}

fn spec(command: &[&str], config: Value) -> ProviderSpec {
    ProviderSpec::program(command.iter().map(|s| s.to_string()).collect(), object(config))
}

fn try_start(command: &[&str], config: Value) -> Result<LoadedProvider, guardhost::BuildError> {
    instantiate(&spec(command, config), &workspace())
}

fn start(command: &[&str], config: Value) -> LoadedProvider {
    try_start(command, config).unwrap_or_else(|e| panic!("{command:?}: {e}"))
}

fn call(tool: &str) -> ToolCallRequest {
    ToolCallRequest::new(tool, object(json!({"path": "/tmp"}))).with_id("call-1")
}

fn request(tool: &str) -> GuardrailRequest {
    GuardrailRequest::from_tool_call(&call(tool), None).unwrap()
}

#[test]
fn the_python_example_decides_like_the_built_in_allowlist() {
    guardhost_isolation::install();
    let Some(python) = python() else { return };
    let config = json!({"allowed_tools": ["ls", "bash", " read_file", "write_file", "a\u{200b}b"], "denied_tools": ["bash", " write_file "]});
    let program = start(&[python, &example()], config.clone());
    assert_eq!(program.info.name, "py-allowlist");
    assert_eq!(program.info.abi_kind, AbiKind::Protocol);
    assert_eq!(program.info.abi_version, (1, 0));
    assert_eq!(program.info.isolation, Isolation::Process);
    assert_eq!(program.info.timeout_ms, Some(5000));
    assert_eq!(program.info.source, ProviderSource::Program { command: vec![python.into(), example()] });
    assert_eq!(program.info.source.to_string(), format!("program `python3 {}`", example()));
    let rust = load("builtin:AllowlistProvider", object(config));
    let program = GuardrailMiddleware::new(program.provider);
    let rust = GuardrailMiddleware::new(rust.provider);
    let tools = [
        "ls",
        "bash",
        "write_file",
        " read_file",
        "read_file",
        "",
        "lş",
        "a\"b\\c",
        "unlisted",
        "a\u{200b}b",
    ];
    for tool in tools.into_iter().chain(["a\u{7}b", "tab\there", "nl\n", "\u{feff}ls", "x\u{85}"]) {
        let (from_program, from_rust) =
            (program.check(&call(tool)).unwrap(), rust.check(&call(tool)).unwrap());
        assert_eq!(from_program.decision, from_rust.decision, "tool {tool:?}");
    }
}

#[test]
fn the_python_example_names_the_config_key_at_fault() {
    guardhost_isolation::install();
    let Some(python) = python() else { return };
    let refused = |config: Value| try_start(&[python, &example()], config).unwrap_err().to_string();
    let prefix = format!("the provider program `python3 {}` refused to start: ", example());
    assert_eq!(
        refused(json!({"denied_tools": ["bash", 3]})),
        format!("{prefix}`denied_tools[1]` must be a string (a tool name), found a number")
    );
    assert_eq!(
        refused(json!({"deny_tools": ["bash"]})),
        format!(
            "{prefix}unknown config key `deny_tools`; this provider accepts: allowed_tools, denied_tools"
        )
    );
    // The value (perhaps a secret from the environment) is never repeated.
    let message = refused(json!({"allowed_tools": "s3cret-token"}));
    assert!(message.ends_with("`allowed_tools` must be a list of tool names, found a string"), "{message}");
    assert!(!message.contains("s3cret"), "{message}");
}

#[test]
fn the_request_the_framework_and_the_directory_arrive_as_documented() {
    guardhost_isolation::install();
    let Some(python) = python() else { return };
    let program = start(&[python, &scripted_path()], json!({"note": "kept"}));
    assert_eq!(program.info.name, "scripted-program");
    let tool_call =
        ToolCallRequest::new("read_file", object(json!({"path": "/etc/hosts"}))).with_id("call-7");
    let asked = GuardrailRequest::from_tool_call(&tool_call, None).unwrap();
    let decision = program.provider.evaluate(&asked).unwrap();
    let metadata = Value::Object(decision.metadata);
    assert_eq!(metadata["framework"], "deerflow");
    assert_eq!(metadata["config"], json!({"note": "kept"}));
    assert_eq!(metadata["asynchronous"], false);
    assert_eq!(metadata["request"], serde_json::to_value(&asked).unwrap());
    assert_eq!(metadata["request"]["tool_input"], json!({"path": "/etc/hosts"}));
    assert_eq!(metadata["request"]["tool_call_id"], "call-7");
    let cwd = PathBuf::from(metadata["cwd"].as_str().unwrap());
    assert_eq!(cwd.canonicalize().unwrap(), workspace().canonicalize().unwrap());
}

#[test]
fn errors_interrupts_and_faults_are_provider_errors_and_the_program_restarts() {
    guardhost_isolation::install();
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let starts = dir.path().join("starts");
    let mut spec = spec(&[python, &scripted_path()], json!({"starts_file": starts}));
    spec.timeout_ms = Some(1000);
    let program = instantiate(&spec, &workspace()).unwrap();
    let provider = program.provider;
    let closed = GuardrailMiddleware::new(provider.clone());
    let open = GuardrailMiddleware::new(provider.clone()).with_fail_closed(false);
    match provider.evaluate(&request("error")) {
        Err(ProviderFailure::Error { message, panicked: false }) => {
            assert_eq!(message, "policy store unreachable")
        }
        other => panic!("{other:?}"),
    }
    let verdict = closed.check(&call("error")).unwrap();
    assert!(!verdict.allowed() && verdict.provider_error);
    assert!(open.check(&call("error")).unwrap().allowed());
    match open.wrap_tool_call(call("interrupt"), &|_| unreachable!("an interrupt never runs the tool")) {
        Err(ToolCallError::Interrupt(interrupt)) => {
            assert_eq!(interrupt.message, "needs approval");
            assert_eq!(interrupt.payload, json!({"ask": "human"}));
        }
        other => panic!("expected an interrupt, got {other:?}"),
    }
    let verdict = closed.check(&call("deny")).unwrap();
    assert_eq!(verdict.decision.reasons[0].code, "custom.denied");

    let started = || std::fs::read_to_string(&starts).unwrap().lines().count();
    assert_eq!(started(), 1);
    for (tool, expected) in [
        ("exit", "its process exited with status 3 while this call was in flight; it restarts".to_owned()),
        ("garbage", r#"wrote something that is not a protocol frame: "debug: about to answer\n""#.to_owned()),
        (
            "hang",
            "did not answer within 1000 ms (provider.timeout_ms); its process was killed and restarts"
                .to_owned(),
        ),
    ] {
        let before = started();
        let Err(ProviderFailure::Error { message, .. }) = provider.evaluate(&request(tool)) else {
            panic!("{tool}: expected a provider error")
        };
        assert!(
            message.starts_with("provider 'scripted-program' (isolation: process): "),
            "{tool}: {message}"
        );
        assert!(message.contains(&expected), "{tool}: {message}");
        // The next call is answered by a new process.
        assert!(closed.check(&call("ls")).unwrap().allowed(), "{tool}: after the restart");
        assert_eq!(started(), before + 1, "{tool}: one restart");
    }
}

#[test]
fn bad_programs_are_refused_with_what_to_fix() {
    guardhost_isolation::install();
    let Some(python) = python() else { return };
    let error = try_start(&["guardhost-no-such-program"], json!({})).unwrap_err().to_string();
    assert!(
        error.starts_with(&format!(
            "cannot start the provider process `guardhost-no-such-program` (in {}): ",
            workspace().display()
        )),
        "{error}"
    );
    let error = try_start(&[python, &scripted_path(), "--protocol", "9"], json!({})).unwrap_err().to_string();
    assert!(
        error.ends_with(r#"(version "scripted") speaks provider protocol 9, this host 1; its hello must say "protocol": 1 (docs/provider-protocol.md)"#),
        "{error}"
    );
    let error = try_start(&[python, &scripted_path()], json!({"ready_info": {}})).unwrap_err().to_string();
    assert!(error.contains("sent a ready message whose `info` is not"), "{error}");
    assert!(error.contains("missing field `name`"), "{error}");
    let error =
        try_start(&[python, &scripted_path()], json!({"ready_info": {"name": " "}})).unwrap_err().to_string();
    assert!(error.contains("sent a ready message with an empty `info.name`"), "{error}");
    let error = try_start(&[python, &scripted_path()], json!({"refuse": true})).unwrap_err().to_string();
    assert!(error.ends_with("refused to start: `refuse` is set, so this provider will not start"), "{error}");
}

#[test]
fn a_command_needs_process_isolation_and_excludes_use_and_sha256() {
    let parse = |provider: &str| {
        let text = format!("guardrails:\n  enabled: true\n  provider:\n{provider}");
        LoadedConfig::from_yaml(&text, workspace(), guardhost::ConfigOrigin::Embedded, |_| None)
            .map(drop)
            .unwrap_err()
            .to_string()
    };
    let error = parse("    command: [python3, p.py]\n");
    assert!(error.ends_with("`provider.command` runs the provider as a program of its own, which only `isolation: process` does; add `isolation: process`"), "{error}");
    let error =
        parse("    command: [python3, p.py]\n    isolation: process\n    use: builtin:AllowlistProvider\n");
    assert!(
        error.ends_with(
            "give either `use:` (a provider library) or `command:` (a provider program), not both"
        ),
        "{error}"
    );
    let error = parse("    command: []\n    isolation: process\n");
    assert!(error.ends_with("`provider.command` must name a program and its arguments, e.g. `command: [python3, my_provider.py]`"), "{error}");
    let error = parse("    command: [python3, p.py]\n    isolation: process\n    sha256: abc\n");
    assert!(error.contains("`provider.sha256` pins a provider library's bytes"), "{error}");
    let error = parse("    command: python3 p.py\n    isolation: process\n");
    assert!(error.contains("`provider.command`: invalid type: a string, expected a sequence"), "{error}");
    let error = parse("    isolation: process\n");
    assert!(error.contains("missing field `use`"), "{error}");
}

#[test]
fn a_config_file_runs_the_program_from_its_own_directory_and_reloads() {
    guardhost_isolation::install();
    let Some(_) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(example(), dir.path().join("allowlist_provider.py")).unwrap();
    let yaml = |tool: &str| {
        format!(
            "guardrails:\n  enabled: true\n  provider:\n    command: [python3, allowlist_provider.py]\n    isolation: process\n    timeout_ms: 2000\n    config: {{denied_tools: [{tool}]}}\n"
        )
    };
    let path = write(dir.path(), "config.yaml", &yaml("bash"));
    let reloader = Reloader::open(&path).unwrap();
    let allowed = |tool: &str| reloader.current().unwrap().middleware.check(&call(tool)).unwrap().allowed();
    assert!(!allowed("bash") && allowed("ls"));
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&path, yaml("ls")).unwrap();
    reloader.reload().unwrap();
    assert!(allowed("bash") && !allowed("ls"));
    assert_eq!(reloader.current().unwrap().info.timeout_ms, Some(2000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_concurrent_async_calls_on_one_program() {
    guardhost_isolation::install();
    let Some(python) = python() else { return };
    let middleware =
        GuardrailMiddleware::new(start(&[python, &example()], json!({"denied_tools": ["bash"]})).provider);
    support::bash_denied_under_async_load(middleware, 64, 20).await;
}

#[test]
fn the_check_command_describes_a_program_provider() {
    let Some(_) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(example(), dir.path().join("allowlist_provider.py")).unwrap();
    let path = write(
        dir.path(),
        "config.yaml",
        "guardrails:\n  enabled: true\n  provider:\n    command: [python3, allowlist_provider.py]\n    isolation: process\n",
    );
    let output = support::cli::guardhost(&["check", "--config", path.to_str().unwrap()], None);
    let text = support::cli::stdout(&output);
    assert!(output.status.success(), "{text}{}", support::cli::stderr(&output));
    assert!(text.contains("provider:         py-allowlist"), "{text}");
    assert!(text.contains("source:           program `python3 allowlist_provider.py`"), "{text}");
    assert!(text.contains("protocol:         1 (provider protocol)"), "{text}");
    assert!(
        text.contains("isolation:        process (the program itself, restarted when it dies)"),
        "{text}"
    );
}

#[test]
fn the_python_example_passes_the_conformance_kit() {
    let Some(python) = python() else { return };
    let command = [python.to_owned(), example()];
    let report = guardhost_kit::run_program(
        &command,
        &object(json!({"denied_tools": ["bash"]})),
        &guardhost_kit::Options::quick(),
    );
    assert!(report.passed(), "{}", report.to_text());
    assert_eq!(report.provider.as_deref(), Some("py-allowlist"));
    let unknown = report.case(CaseId::ConstructionUnknownKey).unwrap();
    assert_eq!(unknown.status, Status::Pass, "{}", unknown.reason);
    let memory = report.case(CaseId::Memory).unwrap();
    assert_ne!(memory.status, Status::Fail, "{}", memory.reason);
}

#[test]
fn the_kit_fails_a_program_that_crashes_on_a_bad_config_value_and_warns_on_ignored_keys() {
    let Some(python) = python() else { return };
    let command = [python.to_owned(), scripted_path()];
    let report = guardhost_kit::run_program(
        &command,
        &object(json!({"strict": true})),
        &guardhost_kit::Options::quick(),
    );
    assert!(!report.passed());
    let errors = report.case(CaseId::ConstructionErrors).unwrap();
    assert_eq!(errors.status, Status::Fail, "{}", errors.reason);
    assert!(
        errors.reason.starts_with("3 of 3 wrongly typed values made the provider panic, crash, hang"),
        "{}",
        errors.reason
    );
    assert!(errors.details[0].starts_with("strict = "), "{:?}", errors.details);
    assert!(errors.details[0].ends_with("the provider process exited with status 4"), "{:?}", errors.details);
    let unknown = report.case(CaseId::ConstructionUnknownKey).unwrap();
    assert_eq!(unknown.status, Status::Warn, "{}", unknown.reason);
    assert!(unknown.reason.contains("silently ignores the unknown key"), "{}", unknown.reason);
}

#[test]
fn the_conformance_command_runs_a_program_after_a_double_dash() {
    let Some(_) = python() else { return };
    let dir = workspace().join("examples/python-provider");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_guardhost"))
        .current_dir(&dir)
        .args(["conformance", "--config", r#"{"denied_tools": ["bash"]}"#, "--iterations", "500"])
        .args(["--latency-budget-us", "50000", "--", "python3", "allowlist_provider.py"])
        .output()
        .unwrap();
    let text = support::cli::stdout(&output);
    assert!(output.status.success(), "{text}{}", support::cli::stderr(&output));
    assert!(
        text.starts_with(
            "guardhost conformance: command: python3 allowlist_provider.py (provider 'py-allowlist'"
        ),
        "{text}"
    );
    let both =
        support::cli::guardhost(&["conformance", "builtin:AllowlistProvider", "--", "python3", "x.py"], None);
    assert!(!both.status.success());
    assert!(support::cli::stderr(&both).contains("cannot be used with"), "{}", support::cli::stderr(&both));
}
