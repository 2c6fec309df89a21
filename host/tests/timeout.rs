//! `provider.timeout_ms`: a provider that does not answer in time is a
//! provider error, on the sync and the async path, and hung calls never
//! make the host start more threads than its small pool.

use guardhost_test_support as support;

use std::path::Path;
use std::time::{Duration, Instant};

use guardhost::timeout::TimeoutProvider;
#[cfg(target_os = "linux")]
use guardhost::timeout::WORKERS;
use guardhost::{
    install, ConfigOrigin, GuardrailProvider, GuardrailRequest, LoadedConfig, ProviderFailure,
    ToolCallRequest, ToolStatus,
};
use serde_json::Map;
use support::{load, use_of};

/// The zoo member that never answers for `web_fetch`.
fn hangs() -> std::sync::Arc<dyn GuardrailProvider> {
    load(&use_of("guardhost_zoo", "Hangs"), Map::new()).provider
}

fn request(tool: &str) -> GuardrailRequest {
    GuardrailRequest::from_tool_call(&ToolCallRequest::new(tool, Map::new()), None).unwrap()
}

/// The evaluation threads of this process (their names start so).
#[cfg(target_os = "linux")]
fn eval_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("guardhost-eval"))
        .count()
}

/// One test at a time: they count threads.
fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn message(failure: ProviderFailure) -> String {
    match failure {
        ProviderFailure::Error { message, .. } => message,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_hung_call_times_out_on_both_paths_and_answers_still_come_back() {
    let _one = exclusive();
    let provider = TimeoutProvider::new(hangs(), Duration::from_millis(150)).unwrap();
    let started = Instant::now();
    let error = message(provider.evaluate(&request("web_fetch")).unwrap_err());
    let waited = started.elapsed();
    assert_eq!(error, "provider 'zoo-hangs' did not answer within 150 ms (provider.timeout_ms)");
    assert!(waited >= Duration::from_millis(150) && waited < Duration::from_secs(5), "{waited:?}");
    // Calls that answer still get their answers, decided by the provider.
    assert!(provider.evaluate(&request("read_file")).unwrap().allow);
    assert!(!provider.evaluate(&request("bash")).unwrap().allow);

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let error = message(provider.aevaluate(&request("web_fetch")).await.unwrap_err());
        assert!(error.ends_with("did not answer within 150 ms (provider.timeout_ms)"), "{error}");
        assert!(provider.aevaluate(&request("read_file")).await.unwrap().allow);
    });
}

#[cfg(target_os = "linux")]
#[test]
fn once_every_worker_is_stuck_calls_fail_at_once_and_the_threads_never_grow() {
    let _one = exclusive();
    let before = eval_threads();
    let provider = TimeoutProvider::new(hangs(), Duration::from_millis(5)).unwrap();
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

fn guardrail(yaml_provider: &str, fail_closed: bool) -> guardhost::Guardrail {
    let yaml =
        format!("guardrails:\n  enabled: true\n  fail_closed: {fail_closed}\n  provider:\n{yaml_provider}");
    let config =
        LoadedConfig::from_yaml(&yaml, Path::new("/").into(), ConfigOrigin::Embedded, |_| None).unwrap();
    install(&config).unwrap().unwrap()
}

#[test]
fn timeout_ms_in_yaml_makes_a_hang_a_provider_error_for_fail_closed() {
    let _one = exclusive();
    let provider = format!("    use: '{}'\n    timeout_ms: 100\n", use_of("guardhost_zoo", "Hangs"));
    let closed = guardrail(&provider, true);
    assert_eq!(closed.info.timeout_ms, Some(100));
    let call = ToolCallRequest::new("web_fetch", Map::new()).with_id("c");
    let message = closed.middleware.wrap_tool_call(call.clone(), &|_| unreachable!("fail-closed")).unwrap();
    assert_eq!(message.status, ToolStatus::Error);
    assert!(message.content.contains("(oap.evaluator_error)"), "{}", message.content);

    let open = guardrail(&provider, false);
    let ran = open
        .middleware
        .wrap_tool_call(call, &|call| {
            Ok(guardhost::ToolMessage {
                content: "ran".into(),
                tool_call_id: call.tool_call.id.unwrap_or_default(),
                name: call.tool_call.name,
                status: ToolStatus::Success,
            })
        })
        .unwrap();
    assert_eq!(ran.content, "ran");
}
