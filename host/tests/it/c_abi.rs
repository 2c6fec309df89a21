//! Providers behind the C ABI (`guardhost.h`), loaded for real: the C
//! allowlist example and the scripted C fixture, through every host
//! feature, and C descriptors that are wrong on purpose.

use guardhost_test_support as support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use guardhost::{
    instantiate, AbiKind, BuildError, GuardrailMiddleware, LoadErrorKind, ProviderFailure, ProviderSpec,
    Reloader, ToolCallError, ToolCallRequest, ToolStatus,
};
use serde_json::{json, Map, Value};
use support::{library, load, object, try_load, use_of, write};

const FIXTURE: &str = "guardhost_c_descriptors";

fn c_allowlist(config: Value) -> guardhost::LoadedProvider {
    load(&use_of("c_allowlist", "CAllowlistProvider"), object(config))
}

fn scripted() -> Arc<dyn guardhost::GuardrailProvider> {
    load(&use_of(FIXTURE, "CScripted"), Map::new()).provider
}

fn call(tool: &str) -> ToolCallRequest {
    ToolCallRequest::new(tool, object(json!({"path": "/tmp"}))).with_id("call-1")
}

fn load_error(symbol: &str) -> LoadErrorKind {
    match try_load(&use_of(FIXTURE, symbol), Map::new()) {
        Err(BuildError::Load(error)) => error.kind,
        other => panic!("{symbol}: expected a load error, got {other:?}"),
    }
}

#[test]
fn the_c_allowlist_decides_like_the_built_in_one() {
    let config = json!({"allowed_tools": ["ls", "bash", " read_file", "write_file"], "denied_tools": ["bash", " write_file "]});
    let c = c_allowlist(config.clone());
    assert_eq!(c.info.abi_kind, AbiKind::C);
    assert_eq!(c.info.abi_version, (1, 0));
    assert_eq!(c.info.name, "c-allowlist");
    assert_eq!(c.info.accepted_keys, ["allowed_tools", "denied_tools"]);
    assert!(!c.info.accepts_extra_keys && !c.info.framework_injected);
    let rust = load("builtin:AllowlistProvider", object(config));
    let c = GuardrailMiddleware::new(c.provider);
    let rust = GuardrailMiddleware::new(rust.provider);
    for tool in ["ls", "bash", "write_file", " read_file", "read_file", "", "lş", "a\"b\\c", "unlisted"] {
        let (from_c, from_rust) = (c.check(&call(tool)).unwrap(), rust.check(&call(tool)).unwrap());
        assert_eq!(from_c.decision, from_rust.decision, "tool {tool:?}");
    }
    // Control characters: the host refuses the name before any provider
    // sees it; asked directly, the C example denies it with the built-in's
    // code (the message is its own).
    let control = call("a\u{7}b");
    assert_eq!(c.check(&control).unwrap().decision.reasons[0].code, "guardhost.tool_name_invalid");
    let request =
        guardhost::CallView::new(&control, &control.tool_call.args, None, "now").unwrap().to_request();
    let decision = c.provider().evaluate(&request).unwrap();
    assert!(!decision.allow);
    assert_eq!(decision.reasons[0].code, "oap.invalid_tool_name");
    assert_eq!(decision.reasons[0].message, "tool name 'a\u{7}b' contains a control character (U+0007)");
}

#[test]
fn the_host_checks_c_config_keys_and_the_library_names_the_wrong_value() {
    let error =
        try_load(&use_of("c_allowlist", "CAllowlistProvider"), object(json!({"deny_tools": ["bash"]})))
            .unwrap_err()
            .to_string();
    assert_eq!(
        error,
        "provider 'c-allowlist' does not accept config key `deny_tools`; it accepts: allowed_tools, denied_tools"
    );
    let error =
        try_load(&use_of("c_allowlist", "CAllowlistProvider"), object(json!({"denied_tools": ["bash", 3]})))
            .unwrap_err();
    assert_eq!(
        error.to_string(),
        "provider 'c-allowlist' rejected its config: `denied_tools[1]` must be a string (a tool name), found a number"
    );
    assert!(matches!(error, BuildError::Constructor { panicked: false, .. }));
}

#[test]
fn framework_is_injected_and_the_request_arrives_as_documented() {
    let loaded = load(&use_of(FIXTURE, "CScripted"), object(json!({"anything": [1, 2]})));
    assert!(loaded.info.framework_injected && loaded.info.accepts_extra_keys);
    assert_eq!(loaded.info.accepted_keys, ["framework"]);
    let middleware = GuardrailMiddleware::new(loaded.provider).with_passport(Some("agent-7".into()));
    let verdict = middleware.check(&call("ls")).unwrap();
    assert!(verdict.allowed());
    let metadata = &verdict.decision.metadata;
    assert_eq!(metadata["config"], json!({"anything": [1, 2], "framework": "deerflow"}));
    let request = metadata["request"].as_object().expect("the request is a JSON object");
    let mut keys: Vec<&str> = request.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "agent_id",
            "authz_attributes",
            "channel_user_id",
            "is_internal",
            "is_subagent",
            "oauth_id",
            "oauth_provider",
            "run_id",
            "thread_id",
            "timestamp",
            "tool_call_id",
            "tool_input",
            "tool_name",
            "user_id",
            "user_role"
        ]
    );
    assert_eq!(request["tool_name"], "ls");
    assert_eq!(request["tool_input"], json!({"path": "/tmp"}));
    assert_eq!(request["agent_id"], "agent-7");
    assert_eq!(request["tool_call_id"], "call-1");
}

#[test]
fn errors_interrupts_and_malformed_answers_are_handled_like_rust_ones() {
    let provider = scripted();
    let closed = GuardrailMiddleware::new(provider.clone());
    let open = GuardrailMiddleware::new(provider.clone()).with_fail_closed(false);
    let request = |tool: &str| guardhost::GuardrailRequest::from_tool_call(&call(tool), None).unwrap();
    for (tool, expected) in [
        ("error", "scripted failure"),
        ("error-silent", "provider 'c-scripted' failed without a message"),
        ("status-7", "provider 'c-scripted' returned status 7, which guardhost.h does not define (GUARDHOST_OK 0, GUARDHOST_ERROR 1, GUARDHOST_INTERRUPT 2)"),
        ("no-output", "provider 'c-scripted' returned GUARDHOST_OK without a decision"),
    ] {
        match provider.evaluate(&request(tool)) {
            Err(ProviderFailure::Error { message, panicked: false }) => assert_eq!(message, expected, "{tool}"),
            other => panic!("{tool}: {other:?}"),
        }
        let verdict = closed.check(&call(tool)).unwrap();
        assert!(!verdict.allowed() && verdict.provider_error, "{tool}: fail closed");
        assert!(open.check(&call(tool)).unwrap().allowed(), "{tool}: fail open");
    }
    let Err(ProviderFailure::Error { message, .. }) = provider.evaluate(&request("bad-json")) else {
        panic!("bad-json is an error")
    };
    assert!(
        message.starts_with(
            "provider 'c-scripted' returned a decision that is not the JSON guardhost.h describes"
        ),
        "{message}"
    );
    assert!(message.contains("missing field `allow`"), "{message}");

    match open.wrap_tool_call(call("interrupt"), &|_| unreachable!("an interrupt never runs the tool")) {
        Err(ToolCallError::Interrupt(interrupt)) => {
            assert_eq!(interrupt.message, "needs approval");
            assert_eq!(interrupt.payload, json!({"ticket": 7}));
        }
        other => panic!("expected an interrupt, got {other:?}"),
    }
    match provider.evaluate(&request("interrupt-text")) {
        Err(ProviderFailure::Interrupt(interrupt)) => {
            assert_eq!((interrupt.message.as_str(), &interrupt.payload), ("plain pause", &Value::Null))
        }
        other => panic!("{other:?}"),
    }

    let verdict = closed.check(&call("deny")).unwrap();
    assert_eq!(verdict.decision.policy_id.as_deref(), Some("c-policy"));
    assert_eq!(verdict.decision.metadata, object(json!({"rule": 3})));
    let message = closed.wrap_tool_call(call("deny"), &|_| unreachable!()).unwrap();
    assert_eq!(message.status, ToolStatus::Error);
    assert_eq!(
        message.content,
        "Guardrail denied: tool 'deny' was blocked (c.denied). Reason: scripted denial. Choose an alternative approach."
    );
}

#[test]
fn a_refusing_create_is_a_constructor_error_with_its_message() {
    let error = try_load(&use_of(FIXTURE, "CScripted"), object(json!({"mode": "refuse"}))).unwrap_err();
    assert_eq!(error.to_string(), "provider 'c-scripted' rejected its config: the config says refuse");
}

#[test]
// Reads the fixture's counter of live providers through its C symbol.
#[allow(unsafe_code)]
fn every_provider_made_is_destroyed_once() {
    // The same file, opened again, is the library the host mapped.
    // SAFETY: (test) opening a workspace library whose initialisers are
    // plain C; the function has the signature the fixture declares.
    let live = unsafe {
        let library = libloading::Library::new(library(FIXTURE)).unwrap();
        let live: libloading::Symbol<unsafe extern "C" fn() -> i32> =
            library.get(b"c_descriptors_live").unwrap();
        let live = *live;
        std::mem::forget(library);
        live
    };
    // SAFETY: (test) a plain C function reading an atomic counter.
    let count = || unsafe { live() };
    let before = count();
    let providers: Vec<_> = (0..5).map(|_| scripted()).collect();
    // Other tests may drop theirs meanwhile: only these five are sure to
    // be alive.
    assert!(count() >= 5, "the five providers made are counted alive: {}", count());
    drop(providers);
    // Other tests in this binary make and drop providers too: wait for
    // the count to come back rather than compare at one instant.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while count() > before && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(count() <= before, "providers left alive: {}", count() - before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_concurrent_async_calls_on_one_c_provider() {
    let middleware = GuardrailMiddleware::new(c_allowlist(json!({"denied_tools": ["bash"]})).provider);
    support::bash_denied_under_async_load(middleware, 64, 50).await;
}

#[test]
fn wrong_c_descriptors_are_refused_with_what_to_fix() {
    assert_eq!(
        load_error("CWrongMajor").to_string(),
        "the provider was built with guardhost.h for C ABI 2.1, but this host speaks C ABI 1.x; rebuild it with a guardhost.h of C ABI 1.x"
    );
    assert_eq!(
        load_error("CTooSmall").to_string(),
        "the C descriptor says it is 40 bytes, but C ABI 1.0 needs at least 72; set `size` with GUARDHOST_DESCRIPTOR_INIT from guardhost.h"
    );
    assert_eq!(
        load_error("CNullEvaluate").to_string(),
        "the C descriptor's `evaluate` is NULL; every provider needs it"
    );
    assert_eq!(
        load_error("CEmptyName").to_string(),
        "the C descriptor's `name` is empty; give the provider a name"
    );
    assert_eq!(
        load_error("CBadUtf8Key").to_string(),
        "the C descriptor's `accepted_keys[1]` is not valid UTF-8"
    );
    assert!(matches!(load_error("CNotADescriptor"), LoadErrorKind::NotADescriptor { .. }));
}

fn spec(symbol: &str, lib: &str, config: Value) -> ProviderSpec {
    ProviderSpec::new(use_of(lib, symbol), object(config))
}

#[test]
fn timeout_ms_and_sha256_apply_to_c_providers() {
    let mut timed = spec("CScripted", FIXTURE, json!({}));
    timed.timeout_ms = Some(100);
    let loaded = instantiate(&timed, Path::new("/")).unwrap();
    let middleware = GuardrailMiddleware::new(loaded.provider);
    let started = std::time::Instant::now();
    let verdict = middleware.check(&call("sleep")).unwrap();
    assert!(!verdict.allowed() && verdict.provider_error);
    assert!(started.elapsed() < Duration::from_millis(1500), "the call was not waited for");
    assert!(middleware.check(&call("ls")).unwrap().allowed());

    let mut pinned = spec("CAllowlistProvider", "c_allowlist", json!({}));
    pinned.sha256 = Some("0".repeat(64));
    let error = instantiate(&pinned, Path::new("/")).unwrap_err().to_string();
    assert!(error.contains("`provider.sha256` says 0000"), "{error}");
    let digest = instantiate(&spec("CAllowlistProvider", "c_allowlist", json!({})), Path::new("/"))
        .unwrap()
        .info
        .sha256
        .unwrap();
    pinned.sha256 = Some(digest.clone());
    assert_eq!(instantiate(&pinned, Path::new("/")).unwrap().info.sha256, Some(digest));
}

#[test]
fn hot_reload_swaps_c_provider_configs() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = |tool: &str| {
        format!(
            "guardrails:\n  enabled: true\n  provider:\n    use: '{}'\n    config: {{denied_tools: [{tool}]}}\n",
            use_of("c_allowlist", "CAllowlistProvider")
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
}

#[test]
fn the_c_allowlist_passes_the_conformance_kit() {
    guardhost_kit::assert_conforms(
        &use_of("c_allowlist", "CAllowlistProvider"),
        &object(json!({"denied_tools": ["bash"]})),
    );
}

fn cpp_use() -> String {
    use_of("cpp_blocked_prefixes", "CppBlockedPrefixes")
}

#[test]
fn the_cpp_provider_takes_framework_and_blocks_prefixes() {
    let loaded = load(&cpp_use(), object(json!({"blocked_prefixes": ["bash", "write_"]})));
    assert_eq!((loaded.info.name.as_str(), loaded.info.abi_kind), ("cpp-blocked-prefixes", AbiKind::C));
    assert_eq!(loaded.info.accepted_keys, ["blocked_prefixes", "framework"]);
    assert!(loaded.info.framework_injected);
    let middleware = GuardrailMiddleware::new(loaded.provider);
    let verdict = middleware.check(&call("write_file")).unwrap();
    assert!(!verdict.allowed());
    assert_eq!(verdict.decision.reasons[0].code, "custom.blocked");
    assert_eq!(
        verdict.decision.reasons[0].message,
        "tool 'write_file' starts with the blocked prefix 'write_'"
    );
    assert_eq!(verdict.decision.metadata, object(json!({"framework": "deerflow"})));
    let verdict = middleware.check(&call("ls\u{1F600}\"")).unwrap();
    assert!(verdict.allowed());
    assert_eq!(verdict.decision.reasons[0].code, "custom.allowed");
}

#[test]
fn the_cpp_provider_turns_exceptions_into_errors_naming_the_key() {
    let error =
        try_load(&cpp_use(), object(json!({"blocked_prefixes": ["bash", ""]}))).unwrap_err().to_string();
    assert_eq!(
        error,
        "provider 'cpp-blocked-prefixes' rejected its config: `blocked_prefixes[1]` is empty, which would block every tool"
    );
    let error = try_load(&cpp_use(), object(json!({"blocked_prefixes": "bash"}))).unwrap_err().to_string();
    assert!(error.ends_with("`blocked_prefixes` must be a list of strings, found a string"), "{error}");
}

#[test]
fn the_cpp_provider_passes_the_conformance_kit() {
    guardhost_kit::assert_conforms(&cpp_use(), &object(json!({"blocked_prefixes": ["bash"]})));
}
