//! The shared-memory transport of `isolation: process` (Linux), with a real
//! `guardhost provider-server` child: what `check` says; messages too large
//! for a slot crossing over the pipe; a provider process that writes
//! garbage all over the region (the host survives, no call waits past its
//! limit, the process restarts); an async call that hangs failing at its
//! limit; the region's file not left open in the provider process; and no
//! CPU spent while no call comes. The fault tests of `isolation.rs` and
//! `fault_matrix.rs` run over both transports.
#![cfg(target_os = "linux")]

use guardhost_test_support as support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use guardhost::{
    GuardrailProvider, GuardrailRequest, Isolation, ProviderFailure, ProviderSpec, ToolCallRequest, Transport,
};
use guardhost_isolation::ProcessProvider;
use serde_json::{json, Map, Value};
use support::{object, use_of};

/// The provider process's program, as this crate builds it.
const SERVER: &str = env!("CARGO_BIN_EXE_guardhost-provider-server");

fn faulty(timeout_ms: u64) -> ProcessProvider {
    let mut spec = ProviderSpec::new(use_of("guardhost_test_providers", "FaultyProvider"), Map::new());
    spec.isolation = Isolation::Process;
    spec.timeout_ms = Some(timeout_ms);
    let (provider, info) = ProcessProvider::start(&spec, Path::new("/"), SERVER.into()).unwrap();
    assert_eq!(info.transport, Some(Transport::SharedMemory));
    assert_eq!(provider.transport(), Some(Transport::SharedMemory));
    provider
}

fn request(tool: &str, args: Value) -> GuardrailRequest {
    let call = ToolCallRequest::new(tool, object(args)).with_id("call-1");
    GuardrailRequest::from_tool_call(&call, None).unwrap()
}

#[test]
fn answers_and_requests_too_large_for_a_slot_cross_over_the_pipe() {
    let provider = faulty(10_000);
    let pid = provider.pid();
    for bytes in [100, 20_000, 1 << 20] {
        let decision = provider.evaluate(&request("big_answer", json!({"bytes": bytes}))).unwrap();
        assert_eq!(decision.metadata["pad"].as_str().map(str::len), Some(bytes));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let decision =
            runtime.block_on(provider.aevaluate(&request("big_answer", json!({"bytes": bytes})))).unwrap();
        assert_eq!(decision.metadata["pad"].as_str().map(str::len), Some(bytes));
    }
    let big = request("write_file", json!({"content": "x".repeat(100_000)}));
    assert!(provider.evaluate(&big).unwrap().allow);
    assert_eq!(provider.pid(), pid, "no restart");
}

#[test]
fn a_provider_that_writes_garbage_over_the_region_is_killed_and_no_call_waits_past_its_limit() {
    let limit = Duration::from_millis(1_000);
    let provider = Arc::new(faulty(limit.as_millis() as u64));
    let before = provider.pid().unwrap();
    // Its answer may be read before the garbage lands, or be garbage.
    let _ = provider.evaluate(&request("scribble", json!({})));
    // Sync and async callers at once, while the garbage keeps coming: each
    // is answered within its limit (by the provider, or with an error), and
    // the process is replaced.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let started = Instant::now();
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let provider = provider.clone();
            std::thread::spawn(move || {
                let call = request(&format!("tool-{i}"), json!({"n": i}));
                let started = Instant::now();
                let result = provider.evaluate(&call);
                (started.elapsed(), result)
            })
        })
        .collect();
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let provider = provider.clone();
            runtime.spawn(async move {
                let call = request(&format!("task-{i}"), json!({"n": i}));
                let started = Instant::now();
                let result = provider.aevaluate(&call).await;
                (started.elapsed(), result)
            })
        })
        .collect();
    let mut results: Vec<(Duration, Result<_, ProviderFailure>)> =
        threads.into_iter().map(|thread| thread.join().unwrap()).collect();
    results.extend(runtime.block_on(async {
        let mut done = Vec::new();
        for task in tasks {
            done.push(task.await.unwrap());
        }
        done
    }));
    for (took, result) in &results {
        // The limit, and the wait for a restart it may include.
        assert!(*took < limit * 3 + Duration::from_secs(1), "{took:?}: {result:?}");
        if let Err(failure) = result {
            let message = failure.to_string();
            // The host's word on the process, or, when the process read a
            // slot after the scribbling and before it was killed, the
            // process's own word that it could not read the request.
            assert!(
                message.starts_with("provider 'faulty' (isolation: process): ")
                    || message
                        .starts_with("the provider process could not read the request in shared memory: "),
                "{message}"
            );
        }
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    // A later process, not written over, decides normally.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if provider.pid().is_some_and(|pid| pid != before) {
            if let Ok(decision) = provider.evaluate(&request("read_file", json!({}))) {
                assert!(decision.allow);
                break;
            }
        }
        assert!(Instant::now() < deadline, "the provider process was not replaced");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_call_that_hangs_fails_at_its_limit_and_the_process_restarts() {
    let provider = faulty(300);
    let before = provider.pid().unwrap();
    let started = Instant::now();
    let message = provider.aevaluate(&request("hang", json!({}))).await.unwrap_err().to_string();
    let took = started.elapsed();
    assert!(
        message.contains(
            "did not answer within 300 ms (provider.timeout_ms); its process was killed and restarts"
        ),
        "{message}"
    );
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(3), "{took:?}");
    assert!(provider.aevaluate(&request("read_file", json!({}))).await.unwrap().allow);
    assert_ne!(provider.pid(), Some(before));
}

#[test]
fn the_provider_process_keeps_no_descriptor_of_the_region() {
    let provider = faulty(5_000);
    let decision = provider.evaluate(&request("fds", json!({}))).unwrap();
    let targets: Vec<&str> = decision.metadata.values().filter_map(Value::as_str).collect();
    assert!(!targets.is_empty(), "{decision:?}");
    assert!(
        targets.iter().all(|target| !target.contains("memfd:guardhost-provider")),
        "a process the provider starts would inherit it: {targets:?}"
    );
}

/// CPU time (user + system) of process `pid` so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn an_idle_provider_process_spends_no_cpu_spinning() {
    let provider = faulty(5_000);
    let pid = provider.pid().unwrap();
    for i in 0..2_000 {
        assert!(provider.evaluate(&request(&format!("tool-{i}"), json!({}))).unwrap().allow);
    }
    // The spinning stops within its budget (100 µs); then a second with no
    // call must cost next to nothing (one spinning thread would cost a
    // whole second: 100 ticks).
    std::thread::sleep(Duration::from_millis(100));
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(1));
    let spent = cpu_ticks(pid) - before;
    assert!(spent <= 5, "the idle provider process spent {spent} ticks in a second");
}
