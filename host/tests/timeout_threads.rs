//! Hung calls never make the host start more threads than its small pool
//! (`provider.timeout_ms`). It counts this process's evaluation threads,
//! and the threads other tests leave stuck would be counted too: so it is
//! a test program of its own, with one test. Linux (`/proc/self/task`).
#![cfg(target_os = "linux")]

use guardhost_test_support as support;

use std::time::Duration;

use guardhost::timeout::{TimeoutProvider, WORKERS};
use guardhost::{GuardrailProvider, GuardrailRequest, ProviderFailure, ToolCallRequest};
use serde_json::Map;
use support::{load, use_of};

fn request(tool: &str) -> GuardrailRequest {
    GuardrailRequest::from_tool_call(&ToolCallRequest::new(tool, Map::new()), None).unwrap()
}

/// The evaluation threads of this process (their names start so).
fn eval_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("guardhost-eval"))
        .count()
}

fn message(failure: ProviderFailure) -> String {
    match failure {
        ProviderFailure::Error { message, .. } => message,
        other => panic!("{other:?}"),
    }
}

#[test]
fn once_every_worker_is_stuck_calls_fail_at_once_and_the_threads_never_grow() {
    let before = eval_threads();
    let hangs: std::sync::Arc<dyn GuardrailProvider> =
        load(&use_of("guardhost_zoo", "Hangs"), Map::new()).provider;
    let provider = TimeoutProvider::new(hangs, Duration::from_millis(5)).unwrap();
    // Each hanging call keeps its worker; once all of them are in calls that
    // outlived the limit, a call does not wait out its own limit in the
    // queue behind them.
    let mut waited = 0;
    let failed_at_once = loop {
        let error = message(provider.evaluate(&request("web_fetch")).unwrap_err());
        if error.contains("no free evaluation thread") {
            break error;
        }
        assert!(error.ends_with("did not answer within 5 ms (provider.timeout_ms)"), "{error}");
        waited += 1;
        assert!(waited <= WORKERS + 2, "{waited} calls waited out the limit behind stuck workers");
    };
    assert!(waited >= WORKERS, "only {waited} calls hung: the workers were not all stuck");
    assert_eq!(
        failed_at_once,
        format!(
            "provider 'zoo-hangs' has no free evaluation thread: all {WORKERS} are stuck in calls that outlived the limit (stuck ones never come back) (provider.timeout_ms 5 ms)"
        )
    );
    // And so does every call after it, on both paths.
    assert!(message(provider.evaluate(&request("read_file")).unwrap_err()).contains("all 4 are stuck"));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let error = runtime.block_on(provider.aevaluate(&request("read_file"))).unwrap_err();
    assert!(message(error).contains("all 4 are stuck"));
    let after = eval_threads();
    assert!(after <= before + WORKERS, "evaluation threads grew from {before} to {after}");
}
