//! What a provider in a process of its own costs per tool call, measured
//! with criterion: `cargo bench -p guardhost-isolation --bench isolation`.
//!
//! The allowlist `.so` with `isolation: process`, one call at a time (a
//! round trip to the provider process), over shared memory and over pipes,
//! and starting that process (spawn, handshake, load, construct). The calls
//! are cloned outside the timed part (`iter_batched`).

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use guardhost::{async_handler, GuardrailMiddleware, ProviderSpec, ToolCallRequest};
use guardhost_isolation::ProcessProvider;
use guardhost_test_support::{object, passthrough, tool_call as call, use_of};
use serde_json::{json, Map, Value};

fn allowlist_config() -> Map<String, Value> {
    object(json!({"denied_tools": ["bash", "write_file", "str_replace"]}))
}

fn isolation(c: &mut Criterion) {
    let mut group = c.benchmark_group("isolation");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let handler = async_handler(|call: ToolCallRequest| async move { passthrough(call) });
    let mut spec = ProviderSpec::new(use_of("guardhost_allowlist", "AllowlistProvider"), allowlist_config());
    spec.isolation = guardhost::Isolation::Process;
    let program = std::path::PathBuf::from(env!("CARGO_BIN_EXE_guardhost-provider-server"));
    let read = call("read_file", json!({"path": "/mnt/user-data/workspace/README.md"}));
    let bash = call("bash", json!({"command": "ls -la"}));
    for (transport, label) in
        [(guardhost::Transport::SharedMemory, "shared memory"), (guardhost::Transport::Pipes, "pipes")]
    {
        spec.transport = Some(transport);
        let (provider, _) = ProcessProvider::start(&spec, Path::new("/"), program.clone()).unwrap();
        let mw = GuardrailMiddleware::new(Arc::new(provider));
        for (kind, call) in [("allow", &read), ("deny", &bash)] {
            group.bench_function(format!("wrap_tool_call/allowlist .so, process, {label}/{kind}"), |b| {
                b.iter_batched(
                    || call.clone(),
                    |call| black_box(mw.wrap_tool_call(call, &passthrough).unwrap()),
                    BatchSize::SmallInput,
                )
            });
        }
        group.bench_function(format!("awrap_tool_call/allowlist .so, process, {label}/allow"), |b| {
            b.to_async(&runtime).iter_batched(
                || read.clone(),
                |call| async { black_box(mw.awrap_tool_call(call, handler.clone()).await.unwrap()) },
                BatchSize::SmallInput,
            )
        });
    }
    spec.transport = None;
    group.sample_size(10).measurement_time(Duration::from_secs(3));
    group.bench_function("start the provider process", |b| {
        b.iter(|| black_box(ProcessProvider::start(&spec, Path::new("/"), program.clone()).unwrap()))
    });
    group.finish();
}

/// The group (a private module: `criterion_group!` makes an undocumented
/// public function).
mod groups {
    use super::*;
    criterion_group!(benches, isolation);
}
criterion_main!(groups::benches);
