//! Load time and per-call cost of the core path, built-in vs. library.
//!
//! `cargo bench -p guardhost --bench core` prints, for each case, the median
//! time per operation over many batches, with the 10th and 90th percentile
//! of the batch medians to show the noise. Numbers are for comparison on one
//! machine, not assertions.

#[path = "../tests/support/mod.rs"]
mod support;

use std::hint::black_box;
use std::time::Instant;

use guardhost::{
    async_handler, GuardrailMiddleware, GuardrailRequest, ProviderSpec, ToolCallRequest, ToolMessage,
    ToolStatus,
};
use serde_json::{json, Map};
use support::{load, object, use_of};

/// Runs `op` in `batches` batches of `per_batch` and prints ns per op.
fn bench(name: &str, batches: usize, per_batch: usize, mut op: impl FnMut()) {
    for _ in 0..per_batch.min(1000) {
        op(); // warm-up
    }
    let mut samples: Vec<f64> = (0..batches)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..per_batch {
                op();
            }
            start.elapsed().as_nanos() as f64 / per_batch as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    let pick = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    println!("{name:<52} {:>12} {:>12} {:>12}", fmt(pick(0.5)), fmt(pick(0.1)), fmt(pick(0.9)));
}

fn fmt(ns: f64) -> String {
    if ns >= 1_000_000.0 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1_000.0 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn passthrough(call: ToolCallRequest) -> Result<ToolMessage, guardhost::ToolCallError> {
    Ok(ToolMessage {
        content: String::new(),
        tool_call_id: call.tool_call.id.unwrap_or_default(),
        name: call.tool_call.name,
        status: ToolStatus::Success,
    })
}

fn main() {
    println!("{:<52} {:>12} {:>12} {:>12}", "case (per operation)", "median", "p10", "p90");
    let config = object(json!({"denied_tools": ["bash", "write_file", "str_replace"]}));

    // Load: every sample is a fresh dlopen of a distinct copy of the library,
    // plus the header and layout checks, the key check and construction.
    let dir = tempfile::tempdir().unwrap();
    let original = support::library("guardhost_allowlist");
    let mut samples = Vec::new();
    for i in 0..40 {
        let copy = dir.path().join(format!("libcopy{i}.so"));
        std::fs::copy(&original, &copy).unwrap();
        let spec =
            ProviderSpec { use_: format!("{}:AllowlistProvider", copy.display()), config: config.clone() };
        let start = Instant::now();
        let loaded = guardhost::instantiate(&spec, dir.path()).unwrap();
        samples.push(start.elapsed());
        black_box(loaded);
    }
    samples.sort();
    println!(
        "{:<52} {:>12} {:>12} {:>12}",
        "load + check + construct (.so, fresh dlopen)",
        fmt(samples[samples.len() / 2].as_nanos() as f64),
        fmt(samples[samples.len() / 10].as_nanos() as f64),
        fmt(samples[samples.len() * 9 / 10].as_nanos() as f64)
    );
    bench("construct (built-in)", 50, 200, || {
        black_box(load("builtin:AllowlistProvider", config.clone()));
    });

    let builtin = load("builtin:AllowlistProvider", config.clone()).provider;
    let library = load(&use_of("guardhost_allowlist", "AllowlistProvider"), config.clone()).provider;
    let allowed = ToolCallRequest::new("read_file", object(json!({"path": "README.md"}))).with_id("call-1");
    let denied = ToolCallRequest::new("bash", object(json!({"command": "ls -la"}))).with_id("call-2");
    let allowed_request = GuardrailRequest::from_tool_call(&allowed, None).unwrap();
    let denied_request = GuardrailRequest::from_tool_call(&denied, None).unwrap();

    for (label, provider) in [("built-in", &builtin), (".so", &library)] {
        bench(&format!("evaluate allow ({label})"), 100, 20_000, || {
            black_box(provider.evaluate(black_box(&allowed_request)).unwrap());
        });
        bench(&format!("evaluate deny ({label})"), 100, 20_000, || {
            black_box(provider.evaluate(black_box(&denied_request)).unwrap());
        });
    }
    bench("build request (all attribution fields)", 100, 20_000, || {
        black_box(GuardrailRequest::from_tool_call(black_box(&attributed()), Some("agent")).unwrap());
    });

    for (label, provider) in [("built-in", &builtin), (".so", &library)] {
        let mw = GuardrailMiddleware::new(provider.clone());
        bench(&format!("wrap_tool_call allow ({label})"), 100, 10_000, || {
            black_box(mw.wrap_tool_call(allowed.clone(), &passthrough).unwrap());
        });
        bench(&format!("wrap_tool_call deny, message built ({label})"), 100, 10_000, || {
            black_box(mw.wrap_tool_call(denied.clone(), &passthrough).unwrap());
        });
    }

    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let handler = async_handler(|call: ToolCallRequest| async move { passthrough(call) });
    for (label, provider) in [("built-in", &builtin), (".so", &library)] {
        let mw = GuardrailMiddleware::new(provider.clone());
        for (kind, call) in [("allow", &allowed), ("deny", &denied)] {
            bench(&format!("awrap_tool_call {kind} ({label})"), 100, 1, || {
                runtime.block_on(async {
                    for _ in 0..10_000 {
                        black_box(mw.awrap_tool_call(call.clone(), handler.clone()).await.unwrap());
                    }
                })
            });
        }
    }
    println!("(awrap_tool_call rows are per 10,000 calls in one block_on)");
}

fn attributed() -> ToolCallRequest {
    ToolCallRequest::new("bash", Map::new()).with_id("c").with_context(object(json!({
        "thread_id": "t", "user_id": "u", "user_role": "r", "oauth_provider": "p", "oauth_id": "o",
        "run_id": "run", "channel_user_id": "ch", "is_subagent": true, "is_internal": true,
        "authz_attributes": {"team": "infra"}
    })))
}
