//! What guardhost's own tests share: find the workspace's real provider
//! libraries, build providers and middleware from them, write real YAML
//! files. Each crate's integration tests use it as `support`; the
//! command-line helpers (which need the `guardhost` binary) are in
//! `cli/tests/support/`.
//!
//! # Map
//!
//! - this file: finding a workspace library ([`library`], [`use_of`]),
//!   building providers and middleware from it ([`load`], [`middleware`]),
//!   tool calls and config objects, files, and a process's memory and
//!   children;
//! - [`kit`]: what the conformance kit's tests share.
//!
//! ```
//! use guardhost_test_support::{object, write};
//! use serde_json::json;
//!
//! let dir = std::env::temp_dir().join(format!("guardhost-support-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = write(&dir, "config.yaml", "guardrails:\n  enabled: false\n");
//! assert_eq!(std::fs::read_to_string(&path).unwrap(), "guardrails:\n  enabled: false\n");
//! assert_eq!(object(json!({"denied_tools": ["bash"]}))["denied_tools"], json!(["bash"]));
//! std::fs::remove_dir_all(&dir).unwrap();
//! ```

pub mod kit;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use guardhost::{instantiate, GuardrailMiddleware, GuardrailProvider, LoadedProvider, ProviderSpec};
use serde_json::{Map, Value};

/// The library file of a workspace cdylib (by its lib name, e.g.
/// `guardhost_test_providers`). Cargo builds the host's dev-dependencies,
/// cdylib included, next to the test executable before running tests.
pub fn library(lib_name: &str) -> PathBuf {
    guardhost_kit::cdylib(lib_name)
}

/// `use:` value for a symbol of a workspace cdylib.
pub fn use_of(lib_name: &str, symbol: &str) -> String {
    format!("{}:{symbol}", library(lib_name).display())
}

/// A provider from the scripted test-provider library.
pub fn test_provider(symbol: &str) -> Arc<dyn GuardrailProvider> {
    load(&use_of("guardhost_test_providers", symbol), Map::new()).provider
}

/// Constructs whatever `use_` names, with `config`.
pub fn load(use_: &str, config: Map<String, Value>) -> LoadedProvider {
    try_load(use_, config).unwrap_or_else(|e| panic!("cannot load {use_}: {e}"))
}

/// Like [`load`], returning the error.
pub fn try_load(use_: &str, config: Map<String, Value>) -> Result<LoadedProvider, guardhost::BuildError> {
    guardhost_builtins::register();
    instantiate(&ProviderSpec::new(use_, config), Path::new("/"))
}

/// A middleware around a scripted test provider.
pub fn middleware(symbol: &str) -> GuardrailMiddleware {
    GuardrailMiddleware::new(test_provider(symbol))
}

/// An async handler that "runs" the tool: a success message for the call.
pub fn ran_handler() -> guardhost::AsyncHandler {
    guardhost::async_handler(|call: guardhost::ToolCallRequest| async move {
        Ok(guardhost::ToolMessage {
            content: "ran".into(),
            tool_call_id: call.tool_call.id.clone().unwrap_or_default(),
            name: call.tool_call.name.clone(),
            status: guardhost::ToolStatus::Success,
        })
    })
}

/// `tasks` tokio tasks each send `calls` calls through `middleware`'s
/// async path, every third one to `bash`, which it must deny (the others it
/// must allow). Panics on the first wrong answer.
pub async fn bash_denied_under_async_load(middleware: GuardrailMiddleware, tasks: usize, calls: usize) {
    let spawned: Vec<_> = (0..tasks)
        .map(|i| {
            let middleware = middleware.clone();
            tokio::spawn(async move {
                for j in 0..calls {
                    let tool = if (i + j) % 3 == 0 { "bash".to_owned() } else { format!("tool-{i}-{j}") };
                    let call = guardhost::ToolCallRequest::new(&tool, Map::new()).with_id("call-1");
                    let message = middleware.awrap_tool_call(call, ran_handler()).await.unwrap();
                    let expected = if tool == "bash" {
                        guardhost::ToolStatus::Error
                    } else {
                        guardhost::ToolStatus::Success
                    };
                    assert_eq!(message.status, expected, "{tool}");
                }
            })
        })
        .collect();
    for task in spawned {
        task.await.unwrap();
    }
}

/// A handler that "runs" the tool: a success message for the call, with
/// nothing in it (for benchmarks: it costs next to nothing).
pub fn passthrough(
    call: guardhost::ToolCallRequest,
) -> Result<guardhost::ToolMessage, guardhost::ToolCallError> {
    Ok(guardhost::ToolMessage {
        content: String::new(),
        tool_call_id: call.tool_call.id.unwrap_or_default(),
        name: call.tool_call.name,
        status: guardhost::ToolStatus::Success,
    })
}

/// A call of `tool` with `args` (a `json!` object) and the id `call-1`.
pub fn tool_call(tool: &str, args: Value) -> guardhost::ToolCallRequest {
    guardhost::ToolCallRequest::new(tool, object(args)).with_id("call-1")
}

/// A JSON object from a `json!` value.
pub fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// Writes `text` to `name` inside `dir` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A process's peak resident memory in KiB (Linux), 0 elsewhere.
pub fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap_or("");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// The child processes of `pid` (Linux), by scanning /proc.
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|candidate| {
            let stat = std::fs::read_to_string(format!("/proc/{candidate}/stat")).unwrap_or_default();
            // The fields after the command name: state, then the parent's pid.
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            after.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) == Some(pid)
        })
        .collect()
}
