//! Runs one of guardhost's key paths N times, for `scripts/instructions`.
//!
//! `guardhost-instructions PATH N`: prepares what PATH needs (loads the
//! provider, builds the call), then runs the path N times and exits. Run
//! under `valgrind --tool=callgrind` at two values of N, the difference of
//! the two totals divided by the difference of the Ns is the instructions
//! one call costs, with start-up, `dlopen` and warm-up cancelled out.
//! `guardhost-instructions --list` prints the paths.
//!
//! Only the host's public API is used (and the Cedar provider's
//! descriptor, to register it). The provider libraries are loaded
//! from beside this executable (`target/release/`), where
//! `cargo build --release -p guardhost-allowlist -p guardhost-oap` puts
//! them; the Cedar provider is built in, as the `guardhost` command links
//! it (`builtin:CedarGuardrailProvider`), with the example set
//! (`examples/cedar`). Every result is checked (allowed or denied as
//! expected), so a path that starts deciding differently fails rather than
//! getting cheaper.
//!
//! The `wrap-*` and `awrap-*` paths clone the prepared call each time (the
//! middleware takes the call by value), so their counts include that clone.
//! The path names are the baseline's keys: keep them stable.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use guardhost::{
    async_handler, instantiate, CallView, GuardrailMiddleware, GuardrailProvider, GuardrailRequest,
    JsonlAuditSink, ProviderSpec, ToolCallError, ToolCallRequest, ToolMessage, ToolStatus,
};
use serde_json::{json, Map, Value};

/// The paths, each with what it measures (`--list` prints them).
const PATHS: &[(&str, &str)] = &[
    ("allowlist-direct", "the allowlist's Rust code called directly with a prepared request (allow)"),
    ("allowlist-so", "the same decision through libguardhost_allowlist.so: provider.evaluate (allow)"),
    ("wrap-allow", "wrap_tool_call through the allowlist .so, allowed, no audit sink"),
    ("wrap-deny", "wrap_tool_call through the allowlist .so, denied (bash), no audit sink"),
    ("wrap-deny-audit", "wrap_tool_call denied, with a JSONL audit sink writing to /dev/null"),
    ("awrap-allow", "awrap_tool_call through the allowlist .so, allowed, on a current-thread tokio runtime"),
    ("oap-so", "libguardhost_oap.so's decision for bash {\"command\": \"ls\"}, the example passport (allow)"),
    ("oap-so-text", "the same decision, the provider handed the arguments' JSON text the call arrived in"),
    ("request-attribution", "GuardrailRequest::from_tool_call with every attribution field"),
    (
        "cedar-mix",
        "wrap_tool_call of guardhost bench's 13 calls in turn, the built-in Cedar provider, examples/cedar",
    ),
    ("cedar-bash", "the built-in Cedar provider's decision of bench's bash call, examples/cedar (deny)"),
    (
        "cedar-file",
        "the built-in Cedar provider's decision of bench's read_file call, examples/cedar (allow)",
    ),
];

const DENIED_TOOLS: [&str; 3] = ["bash", "write_file", "str_replace"];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--list") {
        for (name, what) in PATHS {
            println!("{name}\t{what}");
        }
        return ExitCode::SUCCESS;
    }
    let (Some(path), Some(Ok(n)), 2) = (args.first(), args.get(1).map(|n| n.parse::<u64>()), args.len())
    else {
        eprintln!("usage: guardhost-instructions PATH N   (or --list for the paths)");
        return ExitCode::from(2);
    };
    match path.as_str() {
        "allowlist-direct" => allowlist_direct(n),
        "allowlist-so" => allowlist_so(n),
        "wrap-allow" => wrap(n, &read_call(), None, ToolStatus::Success),
        "wrap-deny" => wrap(n, &bash_call(), None, ToolStatus::Error),
        "wrap-deny-audit" => wrap(n, &bash_call(), Some(Path::new("/dev/null")), ToolStatus::Error),
        "awrap-allow" => awrap_allow(n),
        "oap-so" => oap_so(n, false),
        "oap-so-text" => oap_so(n, true),
        "request-attribution" => request_attribution(n),
        "cedar-mix" => cedar_mix(n),
        "cedar-bash" => cedar_one(n, "bash", false),
        "cedar-file" => cedar_one(n, "read_file", true),
        other => {
            eprintln!("unknown path {other:?}; --list prints the paths");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}

fn allowlist_direct(n: u64) {
    use guardhost_abi::Provider;
    let config = guardhost_allowlist::AllowlistConfig {
        denied_tools: Some(DENIED_TOOLS.iter().map(|t| t.to_string()).collect()),
        ..Default::default()
    };
    let provider = guardhost_allowlist::AllowlistProvider::new(config).unwrap();
    let request = guardhost_abi::Request::for_tool("read_file")
        .with_tool_input_json(r#"{"path":"/mnt/user-data/workspace/README.md"}"#);
    for _ in 0..n {
        let decision = provider.evaluate(black_box(&request)).unwrap();
        assert!(black_box(decision).allow);
    }
}

fn allowlist_so(n: u64) {
    let provider = allowlist();
    let request = GuardrailRequest::from_tool_call(&read_call(), None).unwrap();
    for _ in 0..n {
        let decision = provider.evaluate(black_box(&request)).unwrap();
        assert!(black_box(decision).allow);
    }
}

fn wrap(n: u64, call: &ToolCallRequest, audit: Option<&Path>, expected: ToolStatus) {
    let mut middleware = GuardrailMiddleware::new(allowlist());
    if let Some(path) = audit {
        middleware = middleware.with_audit_sink(Arc::new(JsonlAuditSink::open(path).unwrap()));
    }
    for _ in 0..n {
        let message = middleware.wrap_tool_call(black_box(call).clone(), &passthrough).unwrap();
        assert_eq!(black_box(message).status, expected);
    }
}

fn awrap_allow(n: u64) {
    let middleware = GuardrailMiddleware::new(allowlist());
    let handler = async_handler(|call: ToolCallRequest| async move { passthrough(call) });
    let call = read_call();
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        for _ in 0..n {
            let message =
                middleware.awrap_tool_call(black_box(&call).clone(), handler.clone()).await.unwrap();
            assert_eq!(black_box(message).status, ToolStatus::Success);
        }
    });
}

fn oap_so(n: u64, args_text: bool) {
    let passport = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/oap/passport.json");
    let config = object(json!({ "passport_path": passport }));
    let provider = load("guardhost_oap", "OAPGuardrailProvider", config);
    let call = ToolCallRequest::new("bash", object(json!({"command": "ls"}))).with_id("call-1");
    let request = GuardrailRequest::from_tool_call(&call, None).unwrap();
    let view = CallView { tool_input_json: args_text.then_some(r#"{"command": "ls"}"#), ..request.view() };
    for _ in 0..n {
        let decision = guardhost::evaluate_call(&*provider, black_box(&view)).unwrap();
        assert!(black_box(decision).allow);
    }
}

fn request_attribution(n: u64) {
    let context = object(json!({
        "thread_id": "t", "user_id": "u", "user_role": "r", "oauth_provider": "p", "oauth_id": "o",
        "run_id": "run", "channel_user_id": "ch", "is_subagent": true, "is_internal": true,
        "authz_attributes": {"team": "infra"}
    }));
    let call =
        ToolCallRequest::new("bash", object(json!({"command": "ls -la"}))).with_id("c").with_context(context);
    for _ in 0..n {
        let request = GuardrailRequest::from_tool_call(black_box(&call), Some("agent")).unwrap();
        assert!(black_box(request).is_internal);
    }
}

/// The Cedar provider built into the host (as the `guardhost` command
/// links it) with the example set: `examples/cedar/config.yaml`'s config.
fn cedar() -> Arc<dyn GuardrailProvider> {
    guardhost_builtins::register();
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/cedar"));
    let config = object(json!({
        "policies": "policies/",
        "schema": "deerflow.cedarschema",
        "entities": "entities.json",
        "derive": ["command", "url", "path"],
    }));
    let spec = ProviderSpec::new("builtin:CedarGuardrailProvider", config);
    instantiate(&spec, dir).unwrap_or_else(|e| panic!("cannot build the Cedar provider: {e}")).provider
}

/// Which of `guardhost bench`'s mix (`guardhost_kit::corpus::
/// everyday_tool_calls`) the example Cedar set allows: the reads and
/// writes and the image inside the user's data, the web, the agent's
/// tools; not `bash` (the bench's caller is a `member`), nor the tools no
/// policy permits.
const CEDAR_ALLOWED: [(&str, bool); 13] = [
    ("bash", false),
    ("write_file", true),
    ("str_replace", true),
    ("read_file", true),
    ("ls", true),
    ("web_search", true),
    ("web_fetch", true),
    ("image_search", false),
    ("present_files", true),
    ("view_image", true),
    ("ask_clarification", true),
    ("task", true),
    ("mcp__x__y", false),
];

/// One call of the mix per iteration, in turn: N1 and N2 need not be
/// multiples of 13, the counts are an average over the mix all the same
/// (300 and 1,800 leave 5 calls of the mix over 115 whole turns).
fn cedar_mix(n: u64) {
    let middleware = GuardrailMiddleware::new(cedar());
    let calls = guardhost_kit::corpus::everyday_tool_calls();
    assert_eq!(calls.len(), CEDAR_ALLOWED.len());
    for (call, (tool, allowed)) in calls.iter().zip(CEDAR_ALLOWED).cycle().take(n as usize) {
        assert_eq!(call.tool_call.name.as_deref(), Some(tool));
        let message = middleware.wrap_tool_call(black_box(call).clone(), &passthrough).unwrap();
        let expected = if allowed { ToolStatus::Success } else { ToolStatus::Error };
        assert_eq!(black_box(message).status, expected, "{tool}");
    }
}

fn cedar_one(n: u64, tool: &str, allowed: bool) {
    let provider = cedar();
    let calls = guardhost_kit::corpus::everyday_tool_calls();
    let call = calls.iter().find(|c| c.tool_call.name.as_deref() == Some(tool)).unwrap();
    let request = GuardrailRequest::from_tool_call(call, None).unwrap();
    for _ in 0..n {
        let decision = provider.evaluate(black_box(&request)).unwrap();
        assert_eq!(black_box(decision).allow, allowed);
    }
}

/// The allowlist `.so`, denying `bash`, `write_file` and `str_replace`.
fn allowlist() -> Arc<dyn GuardrailProvider> {
    load("guardhost_allowlist", "AllowlistProvider", object(json!({ "denied_tools": DENIED_TOOLS })))
}

/// Constructs `symbol` of the workspace library `lib_name`, found beside
/// this executable.
fn load(lib_name: &str, symbol: &str, config: Map<String, Value>) -> Arc<dyn GuardrailProvider> {
    let file = format!("{}{lib_name}{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    let exe = std::env::current_exe().expect("the path of this executable");
    let library: PathBuf = exe.with_file_name(&file);
    assert!(
        library.is_file(),
        "{} is missing: build it with `cargo build --release -p guardhost-allowlist -p guardhost-oap`",
        library.display()
    );
    let spec = ProviderSpec::new(format!("{}:{symbol}", library.display()), config);
    instantiate(&spec, Path::new("/")).unwrap_or_else(|e| panic!("cannot load {}: {e}", spec.use_)).provider
}

fn read_call() -> ToolCallRequest {
    ToolCallRequest::new("read_file", object(json!({"path": "/mnt/user-data/workspace/README.md"})))
        .with_id("call-1")
}

fn bash_call() -> ToolCallRequest {
    ToolCallRequest::new("bash", object(json!({"command": "ls -la"}))).with_id("call-1")
}

/// The tool handler: runs nothing, answers success.
fn passthrough(call: ToolCallRequest) -> Result<ToolMessage, ToolCallError> {
    Ok(ToolMessage {
        content: String::new(),
        tool_call_id: call.tool_call.id.unwrap_or_default(),
        name: call.tool_call.name,
        status: ToolStatus::Success,
    })
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}
