//! Load tests of the library's async path, in process and with
//! `isolation: process`: every one of 1,000 tasks' calls is answered exactly
//! once, none lost, none duplicated, none given another call's answer
//! (`guardhost run` under load is tested in `cli/tests/it/load.rs`).
//!
//! The test suite sends 20,000 calls per case. For the figures in
//! BENCHMARKS.md, send a million and print throughput and peak memory:
//!
//! ```text
//! GUARDHOST_LOAD_CALLS=1000000 cargo test --release -p guardhost-isolation --test load -- --nocapture --test-threads 1
//! ```

use guardhost_test_support as support;

use std::path::Path;
use std::time::Instant;

use guardhost::{instantiate, GuardrailMiddleware, Isolation, ProviderSpec, ToolCallRequest};
use serde_json::{json, Map};
use support::{children_of, peak_rss_kib, use_of};

fn calls() -> usize {
    std::env::var("GUARDHOST_LOAD_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000)
}

/// 1,000 tasks share the calls; each answer carries its own call's id and
/// arguments back (the provider echoes the request).
fn async_tasks(isolation: Isolation) {
    let n = calls();
    let tasks = 1000usize;
    let mut spec = ProviderSpec::new(use_of("guardhost_test_providers", "CapturingProvider"), Map::new());
    spec.isolation = isolation;
    let loaded = instantiate(&spec, Path::new("/")).unwrap();
    let middleware = GuardrailMiddleware::new(loaded.provider);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let started = Instant::now();
    let answered: usize = runtime.block_on(async {
        let handler = support::ran_handler();
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let (middleware, handler) = (middleware.clone(), handler.clone());
                tokio::spawn(async move {
                    let mut answered = 0;
                    for i in (t..n).step_by(tasks) {
                        let args = json!({"n": i}).as_object().unwrap().clone();
                        let call = ToolCallRequest::new("read_file", args).with_id(format!("call-{i}"));
                        let (verdict, message) =
                            middleware.acall_with_verdict(call, handler.clone()).await.unwrap();
                        assert!(verdict.decision.allow, "{:?}", verdict.decision);
                        assert_eq!(verdict.decision.metadata["tool_call_id"], json!(format!("call-{i}")));
                        assert_eq!(verdict.decision.metadata["tool_input"], json!({"n": i}));
                        assert_eq!(message.tool_call_id, format!("call-{i}"));
                        answered += 1;
                    }
                    answered
                })
            })
            .collect();
        let mut total = 0;
        for handle in handles {
            total += handle.await.unwrap();
        }
        total
    });
    let wall = started.elapsed();
    assert_eq!(answered, n);
    let me = std::process::id();
    let server_kib: u64 = children_of(me).into_iter().map(peak_rss_kib).max().unwrap_or(0);
    println!(
        "async middleware, 1,000 tasks, isolation {isolation}: {n} calls in {:.2} s ({:.0} calls/s); peak RSS: this process {} KiB, provider process {} KiB",
        wall.as_secs_f64(),
        n as f64 / wall.as_secs_f64(),
        peak_rss_kib(me),
        server_kib
    );
}

#[test]
fn a_thousand_async_tasks_get_every_answer_once_in_process() {
    async_tasks(Isolation::InProcess);
}

#[test]
fn a_thousand_async_tasks_get_every_answer_once_with_process_isolation() {
    guardhost_isolation::install();
    async_tasks(Isolation::Process);
}
