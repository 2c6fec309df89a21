//! `provider.isolation: process`: the provider runs in a `guardhost
//! provider-server` child. Its abort, segfault, `exit(0)`, garbage output or
//! hang fails the calls in flight (fail-closed) and the child restarts; the
//! host survives each, and the next call works. Decisions are the same as
//! in process, and concurrent calls are multiplexed. The fault tests run
//! over both transports, shared memory (the default) and pipes;
//! `shared_memory.rs` has what only the shared region can do wrong.

use guardhost_test_support as support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use guardhost::{
    install, instantiate, AbiKind, GuardrailMiddleware, GuardrailProvider, GuardrailRequest, Isolation,
    LoadedConfig, ProviderFailure, ProviderSpec, ToolCallRequest, ToolStatus, Transport,
};
use guardhost_isolation::client::backoff;
use guardhost_isolation::ProcessProvider;
use guardhost_kit::corpus::corpus;
use serde_json::{json, Map, Value};
use support::{library, object, use_of};

/// The provider process's program, as this crate builds it.
const SERVER: &str = env!("CARGO_BIN_EXE_guardhost-provider-server");

fn spec(use_: &str, config: Map<String, Value>, timeout_ms: Option<u64>) -> ProviderSpec {
    let mut spec = ProviderSpec::new(use_, config);
    spec.isolation = Isolation::Process;
    spec.timeout_ms = timeout_ms;
    spec
}

const TRANSPORTS: [Transport; 2] = [Transport::SharedMemory, Transport::Pipes];

fn faulty(timeout_ms: u64) -> ProcessProvider {
    faulty_over(timeout_ms, Transport::SharedMemory)
}

fn faulty_over(timeout_ms: u64, transport: Transport) -> ProcessProvider {
    let mut spec = spec(&use_of("guardhost_test_providers", "FaultyProvider"), Map::new(), Some(timeout_ms));
    spec.transport = Some(transport);
    let (provider, info) = ProcessProvider::start(&spec, Path::new("/"), SERVER.into()).unwrap();
    assert_eq!(info.transport, Some(transport));
    provider
}

/// Waits until `provider` runs another process than `before`.
fn restarted(provider: &ProcessProvider, before: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if provider.pid().is_some_and(|pid| pid != before) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// A provider that writes garbage on the protocol's pipe, then answers:
/// over pipes the garbage comes before the answer on the same stream, so
/// the call fails; over shared memory its answer may be in place before
/// the host reads the garbage, and then it stands. Either way the process
/// is killed and restarted.
fn garbage_may_be_answered(transport: Transport) -> bool {
    transport == Transport::SharedMemory
}

fn request(tool: &str) -> GuardrailRequest {
    request_with(tool, Map::new())
}

fn request_with(tool: &str, args: Map<String, Value>) -> GuardrailRequest {
    GuardrailRequest::from_tool_call(&ToolCallRequest::new(tool, args).with_id("call-1"), None).unwrap()
}

fn error_message(result: Result<guardhost::GuardrailDecision, ProviderFailure>) -> String {
    match result {
        Err(ProviderFailure::Error { message, .. }) => message,
        other => panic!("expected a provider error, got {other:?}"),
    }
}

#[test]
fn the_host_survives_every_fault_and_the_next_call_works_after_a_restart() {
    for transport in TRANSPORTS {
        every_fault_over(transport);
    }
}

fn every_fault_over(transport: Transport) {
    let provider = faulty_over(1_500, transport);
    let cases = [
        ("abort", "was killed by signal 6 (SIGABRT)"),
        ("segfault", "was killed by signal 11 (SIGSEGV)"),
        ("exit", "exited with status 0"),
        (
            "garbage",
            r#"was killed: it wrote something that is not a protocol frame: "debug: evaluating a call\n""#,
        ),
        ("hang", "did not answer within 1500 ms (provider.timeout_ms); its process was killed and restarts"),
        // A process the provider started keeps nothing of the protocol open,
        // so the crash is seen at once, not when the `sleep` ends.
        ("spawn_then_abort", "was killed by signal 6 (SIGABRT)"),
    ];
    for (tool, expected) in cases {
        let before = provider.pid().expect("a running child");
        match provider.evaluate(&request(tool)) {
            Ok(decision) if tool == "garbage" && garbage_may_be_answered(transport) => {
                assert!(decision.allow, "{decision:?}");
            }
            result => {
                let message = error_message(result);
                assert!(
                    message.starts_with("provider 'faulty' (isolation: process): "),
                    "{transport}, {tool}: {message}"
                );
                assert!(message.contains(expected), "{transport}, {tool}: {message}");
            }
        }
        assert!(restarted(&provider, before), "{transport}, {tool}: the child was restarted");
        // The next call is decided by the restarted child.
        let decision = provider.evaluate(&request("read_file")).unwrap();
        assert!(decision.allow, "{transport}, {tool}: {decision:?}");
    }
}

#[test]
fn what_a_provider_prints_goes_to_stderr_and_cannot_corrupt_the_protocol() {
    let provider = faulty(5_000);
    let pid = provider.pid();
    for _ in 0..3 {
        assert!(provider.evaluate(&request("print")).unwrap().allow);
    }
    assert_eq!(provider.pid(), pid, "no restart");
}

#[test]
fn a_request_too_large_for_a_frame_fails_alone() {
    let provider = faulty(10_000);
    let pid = provider.pid();
    let huge = "x".repeat(64 << 20);
    let message =
        error_message(provider.evaluate(&request_with("read_file", object(json!({"content": huge})))));
    assert!(message.contains("more than the 67108864 a call to a provider process may carry"), "{message}");
    assert!(provider.evaluate(&request("read_file")).unwrap().allow);
    assert_eq!(provider.pid(), pid, "no restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_on_the_async_path_fail_closed_through_the_middleware_too() {
    for transport in TRANSPORTS {
        let provider = Arc::new(faulty_over(1_500, transport));
        let middleware = GuardrailMiddleware::new(provider.clone());
        let handler = support::ran_handler();
        for tool in ["abort", "segfault", "exit", "garbage", "hang"] {
            let before = provider.pid().expect("a running child");
            let call = ToolCallRequest::new(tool, Map::new()).with_id("c");
            let message = middleware.awrap_tool_call(call, handler.clone()).await.unwrap();
            if !(tool == "garbage" && garbage_may_be_answered(transport)) {
                assert_eq!(message.status, ToolStatus::Error, "{transport}, {tool}");
                assert!(message.content.contains("oap.evaluator_error"), "{tool}: {}", message.content);
            }
            let restarted = {
                let provider = provider.clone();
                tokio::task::spawn_blocking(move || restarted(&provider, before)).await.unwrap()
            };
            assert!(restarted, "{transport}, {tool}: the child was restarted");
            let next = ToolCallRequest::new("read_file", Map::new()).with_id("d");
            let message = middleware.awrap_tool_call(next, handler.clone()).await.unwrap();
            assert_eq!(message.status, ToolStatus::Success, "{transport}, {tool}: {}", message.content);
        }
    }
}

#[test]
fn every_call_in_flight_fails_when_the_child_dies_and_later_calls_are_answered() {
    for transport in TRANSPORTS {
        calls_in_flight_fail_over(transport);
    }
}

fn calls_in_flight_fail_over(transport: Transport) {
    let provider = Arc::new(faulty_over(5_000, transport));
    // Three calls wait inside the child for a fourth that never comes...
    let waiting: Vec<_> = (0..3)
        .map(|_| {
            let provider = provider.clone();
            std::thread::spawn(move || {
                provider.evaluate(&request_with("meet", object(json!({"parties": 4}))))
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1_000));
    // ...when another call kills it.
    assert!(error_message(provider.evaluate(&request("abort"))).contains("SIGABRT"));
    for thread in waiting {
        let message = error_message(thread.join().unwrap());
        assert!(
            message.contains("SIGABRT") && message.contains("while this call was in flight"),
            "{message}"
        );
    }
    assert!(provider.evaluate(&request("read_file")).unwrap().allow);
}

#[test]
fn concurrent_calls_are_multiplexed_not_serialised() {
    for transport in TRANSPORTS {
        calls_meet_over(transport);
    }
}

fn calls_meet_over(transport: Transport) {
    let provider = Arc::new(faulty_over(15_000, transport));
    // Each call waits inside the provider until all 6 are inside at once:
    // that can only happen if the host sent them all without waiting.
    let parties = 6;
    let threads: Vec<_> = (0..parties)
        .map(|_| {
            let provider = provider.clone();
            std::thread::spawn(move || {
                provider.evaluate(&request_with("meet", object(json!({"parties": parties}))))
            })
        })
        .collect();
    for thread in threads {
        let decision = thread.join().unwrap().unwrap();
        assert_eq!(decision.reasons[0].code, "test.met");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_async_tasks_each_get_their_own_answer() {
    for transport in TRANSPORTS {
        a_thousand_tasks_over(transport).await;
    }
}

async fn a_thousand_tasks_over(transport: Transport) {
    let use_ = use_of("guardhost_test_providers", "CapturingProvider");
    let mut spec = spec(&use_, Map::new(), None);
    spec.transport = Some(transport);
    let (provider, _) = ProcessProvider::start(&spec, Path::new("/"), SERVER.into()).unwrap();
    let provider = Arc::new(provider);
    let tasks: Vec<_> = (0..1000)
        .map(|i| {
            let provider = provider.clone();
            tokio::spawn(async move {
                let call = ToolCallRequest::new(format!("tool-{i}"), object(json!({"n": i})))
                    .with_id(format!("id-{i}"));
                let request = GuardrailRequest::from_tool_call(&call, None).unwrap();
                let decision = provider.aevaluate(&request).await.unwrap();
                (i, decision)
            })
        })
        .collect();
    for task in tasks {
        let (i, decision) = task.await.unwrap();
        assert_eq!(decision.metadata["tool_name"], json!(format!("tool-{i}")));
        assert_eq!(decision.metadata["tool_call_id"], json!(format!("id-{i}")));
        assert_eq!(decision.metadata["tool_input"], json!({"n": i}));
        assert_eq!(decision.metadata["path"], json!("async"));
    }
}

/// Every plugin, and the request-echoing fixture, with the config it is
/// tested with.
fn providers() -> Vec<(String, Map<String, Value>)> {
    guardhost_builtins::register();
    let oap_passport = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/oap/passport.json");
    vec![
        (
            use_of("guardhost_allowlist", "AllowlistProvider"),
            object(json!({"denied_tools": ["bash", "write_file"]})),
        ),
        ("builtin:AllowlistProvider".into(), object(json!({"allowed_tools": ["read_file", "ls"]}))),
        (use_of("blocked_prefixes", "MyGuardrailProvider"), Map::new()),
        (use_of("guardhost_provider_template", "TemplateProvider"), Map::new()),
        (
            use_of("guardhost_oap", "OAPGuardrailProvider"),
            object(json!({"passport_path": oap_passport.to_str().unwrap()})),
        ),
        (use_of("guardhost_test_providers", "CapturingProvider"), Map::new()),
        (use_of("guardhost_test_providers", "InterruptingProvider"), Map::new()),
        (use_of("guardhost_test_providers", "ErroringProvider"), Map::new()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_are_identical_to_in_process_ones_on_the_conformance_corpus() {
    guardhost_isolation::install();
    let requests: Vec<GuardrailRequest> = corpus().into_iter().map(|case| case.request).collect();
    assert!(requests.len() >= 29);
    for ((use_, config), transport) in
        providers().into_iter().flat_map(|p| TRANSPORTS.map(|t| (p.clone(), t)))
    {
        let in_process = instantiate(&ProviderSpec::new(&use_, config.clone()), Path::new("/")).unwrap();
        let mut spec = spec(&use_, config, None);
        spec.transport = Some(transport);
        let isolated = instantiate(&spec, Path::new("/")).unwrap();
        assert_eq!(isolated.info.isolation, Isolation::Process);
        assert_eq!(isolated.info.transport, Some(transport));
        assert_eq!(isolated.info.name, in_process.info.name);
        assert_eq!(isolated.info.accepted_keys, in_process.info.accepted_keys);
        assert_eq!(isolated.info.framework_injected, in_process.info.framework_injected);
        let mut compared = 0;
        for request in &requests {
            let expected = in_process.provider.evaluate(request);
            assert_eq!(
                isolated.provider.evaluate(request),
                expected,
                "{use_}, {transport}: {}",
                request.tool_name
            );
            let expected = in_process.provider.aevaluate(request).await;
            assert_eq!(
                isolated.provider.aevaluate(request).await,
                expected,
                "{use_}, {transport}, async: {}",
                request.tool_name
            );
            compared += 2;
        }
        assert_eq!(compared, requests.len() * 2);
    }
}

#[test]
fn build_errors_are_the_in_process_errors() {
    guardhost_isolation::install();
    let use_ = use_of("guardhost_allowlist", "AllowlistProvider");
    let config = object(json!({"denied_tool": ["bash"]}));
    let in_process = instantiate(&ProviderSpec::new(&use_, config.clone()), Path::new("/")).unwrap_err();
    let isolated = instantiate(&spec(&use_, config, None), Path::new("/")).unwrap_err();
    assert_eq!(isolated.to_string(), format!("{in_process} (in the provider process)"));

    let missing = spec("/nonexistent/libnothing.so:Nothing", Map::new(), None);
    let error = instantiate(&missing, Path::new("/")).unwrap_err().to_string();
    assert!(
        error.starts_with("cannot load provider `Nothing` from /nonexistent/libnothing.so: no such file"),
        "{error}"
    );

    let zero = spec(&use_, Map::new(), Some(0));
    assert_eq!(
        instantiate(&zero, Path::new("/")).unwrap_err().to_string(),
        "`provider.timeout_ms` must be at least 1"
    );
}

/// A private copy of a workspace library, in a directory of its own.
fn private_library(dir: &Path, lib_name: &str) -> PathBuf {
    let path = dir.join("libpolicy.so");
    std::fs::copy(library(lib_name), &path).unwrap();
    path
}

#[test]
fn a_restart_loads_the_same_bytes_and_calls_fail_at_once_while_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let path = private_library(dir.path(), "guardhost_test_providers");
    let spec = spec(&format!("{}:FaultyProvider", path.display()), Map::new(), Some(3_000));
    let (provider, info) = ProcessProvider::start(&spec, Path::new("/"), SERVER.into()).unwrap();
    let digest = info.sha256.clone().expect("the child reports the digest it loaded");
    assert_eq!(digest.len(), 64);

    // Another library takes the file's place; then the child dies.
    std::fs::remove_file(&path).unwrap();
    std::fs::copy(library("guardhost_allowlist"), &path).unwrap();
    assert!(error_message(provider.evaluate(&request("abort"))).contains("SIGABRT"));

    // The restart refuses the changed file, so the provider is down: calls
    // fail at once, saying why, and never wait for the 3 s limit.
    let deadline = Instant::now() + Duration::from_secs(10);
    let message = loop {
        let started = Instant::now();
        let message = error_message(provider.evaluate(&request("read_file")));
        assert!(started.elapsed() < Duration::from_millis(2_500), "{message}");
        if message.contains("is down") || Instant::now() > deadline {
            break message;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(message.contains("its restart failed"), "{message}");
    assert!(
        message.contains(&format!(
            "libpolicy.so changed since this provider's process first loaded it (SHA-256 {digest}, now "
        )),
        "{message}"
    );

    // The original bytes come back: the next restart serves again.
    std::fs::remove_file(&path).unwrap();
    std::fs::copy(library("guardhost_test_providers"), &path).unwrap();
    assert!(provider.wait_running(Duration::from_secs(10)), "restarted within the backoff");
    assert!(provider.evaluate(&request("read_file")).unwrap().allow);
}

#[test]
fn restarts_back_off_from_nothing_to_five_seconds() {
    let waits: Vec<u128> = (1..=9).map(|n| backoff(n).as_millis()).collect();
    assert_eq!(waits, [0, 100, 200, 400, 800, 1600, 3200, 5000, 5000]);
    assert_eq!(backoff(u32::MAX), Duration::from_secs(5));
}

#[cfg(target_os = "linux")]
#[test]
fn dropping_the_provider_ends_its_process() {
    let provider = faulty(1_000);
    let pid = provider.pid().unwrap();
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    drop(provider);
    let deadline = Instant::now() + Duration::from_secs(5);
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < deadline, "process {pid} still exists");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_reload_swaps_in_a_new_provider_process_while_a_call_in_flight_finishes_on_the_old_one() {
    guardhost_isolation::install();
    let dir = tempfile::tempdir().unwrap();
    let faulty = format!(
        "guardrails:\n  enabled: true\n  provider:\n    use: {}\n    isolation: process\n    timeout_ms: 20000\n",
        use_of("guardhost_test_providers", "FaultyProvider")
    );
    let path = support::write(dir.path(), "config.yaml", &faulty);
    let reloader = guardhost::Reloader::open(&path).unwrap();
    let old = reloader.current().unwrap();
    assert_eq!(old.info.isolation, Isolation::Process);
    let meet = || request_with("meet", object(json!({"parties": 2})));
    let in_flight = {
        let old = old.clone();
        std::thread::spawn(move || old.middleware.provider().evaluate(&meet()))
    };
    std::thread::sleep(Duration::from_millis(200));

    let allowlist = format!(
        "guardrails:\n  enabled: true\n  provider:\n    use: {}\n    isolation: process\n    config:\n      denied_tools: [bash]\n",
        use_of("guardhost_allowlist", "AllowlistProvider")
    );
    std::fs::write(&path, allowlist).unwrap();
    reloader.reload().unwrap();
    let new = reloader.current().unwrap();
    assert_eq!(new.info.name, "allowlist");
    assert!(!new.middleware.provider().evaluate(&request("bash")).unwrap().allow);

    // The old provider's process still serves the call it had: the second
    // party arrives through the old guardrail, and both meet there.
    assert_eq!(old.middleware.provider().evaluate(&meet()).unwrap().reasons[0].code, "test.met");
    assert_eq!(in_flight.join().unwrap().unwrap().reasons[0].code, "test.met");

    // A broken config keeps the new one serving.
    std::fs::write(
        &path,
        "guardrails:\n  enabled: true\n  provider:\n    use: /nonexistent/lib.so:X\n    isolation: process\n",
    )
    .unwrap();
    assert!(reloader.reload().is_err());
    assert_eq!(reloader.current().unwrap().info.name, "allowlist");
}

#[test]
fn a_constructor_that_hangs_fails_the_start_after_its_limit_instead_of_blocking() {
    guardhost_isolation::install();
    let spec = spec(&use_of("guardhost_zoo", "HangsInConstructor"), Map::new(), None);
    let started = Instant::now();
    let error = instantiate(&spec, Path::new("/")).unwrap_err().to_string();
    assert_eq!(
        error,
        "the provider process did not start within 10 s (loading and constructing the provider)"
    );
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
}

/// A call of `tool` with a `path` argument.
fn c_call(tool: &str) -> ToolCallRequest {
    ToolCallRequest::new(tool, object(json!({"path": "/tmp"}))).with_id("call-1")
}

#[test]
fn an_isolated_c_provider_survives_its_own_abort() {
    guardhost_isolation::install();
    let mut isolated = ProviderSpec::new(use_of("guardhost_c_descriptors", "CScripted"), Map::new());
    isolated.isolation = Isolation::Process;
    isolated.timeout_ms = Some(5000);
    let loaded = instantiate(&isolated, Path::new("/")).unwrap();
    assert_eq!(loaded.info.abi_kind, AbiKind::C);
    let middleware = GuardrailMiddleware::new(loaded.provider);
    assert!(middleware.check(&c_call("ls")).unwrap().allowed());
    let verdict = middleware.check(&c_call("abort")).unwrap();
    assert!(!verdict.allowed() && verdict.provider_error, "the crash is a provider error, fail-closed");
    assert!(middleware.check(&c_call("ls")).unwrap().allowed(), "the provider process was restarted");
    assert!(!middleware.check(&c_call("deny")).unwrap().allowed());
}

#[test]
fn declared_path_keys_are_relative_to_the_config_file_in_both_isolations() {
    guardhost_isolation::install();
    let dir = tempfile::tempdir().unwrap();
    let configs = dir.path().join("configs");
    std::fs::create_dir(&configs).unwrap();
    for isolation in ["in_process", "process"] {
        let file = support::write(
            &configs,
            "guardrails.yaml",
            &format!(
                "guardrails:\n  enabled: true\n  provider:\n    use: {}\n    isolation: {isolation}\n    config:\n      data_file: ./passports/agent.json\n      data_dir: /abs/dir\n      home: relative/not/declared\n",
                use_of("guardhost_test_providers", "EchoConfigProvider")
            ),
        );
        let guardrail = install(&LoadedConfig::from_path(&file).unwrap()).unwrap().unwrap();
        assert_eq!(guardrail.info.path_keys, ["data_file", "data_dir"], "{isolation}");
        let verdict = guardrail.middleware.check(&ToolCallRequest::new("ls", Map::new())).unwrap();
        assert_eq!(
            Value::Object(verdict.decision.metadata),
            json!({
                "data_file": configs.join("passports/agent.json").display().to_string(),
                "data_dir": "/abs/dir",
                "home": "relative/not/declared",
                "framework": "deerflow",
            }),
            "{isolation}"
        );
    }
}
