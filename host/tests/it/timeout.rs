//! `provider.timeout_ms`: a provider that does not answer in time is a
//! provider error, on the sync and the async path (that hung calls never
//! make the host start more threads than its small pool is
//! `timeout_threads.rs`, a test program of its own).

use guardhost_test_support as support;

use std::path::Path;
use std::time::{Duration, Instant};

use guardhost::timeout::TimeoutProvider;
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

fn message(failure: ProviderFailure) -> String {
    match failure {
        ProviderFailure::Error { message, .. } => message,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_hung_call_times_out_on_both_paths_and_answers_still_come_back() {
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

/// A provider that says what the wrapper must pass on.
struct Declares;

impl GuardrailProvider for Declares {
    fn name(&self) -> &str {
        "declares"
    }

    fn evaluate(&self, _: &GuardrailRequest) -> guardhost::Evaluation {
        Ok(guardhost::GuardrailDecision::with_reason(true, "oap.allowed", "allowed"))
    }

    fn never_blocks(&self) -> bool {
        true
    }

    fn messages_quote_input(&self) -> bool {
        false
    }
}

#[test]
fn the_wrapper_keeps_what_its_provider_says_of_its_messages_but_not_that_it_never_blocks() {
    let provider = TimeoutProvider::new(std::sync::Arc::new(Declares), Duration::from_millis(150)).unwrap();
    // Audit events keep the messages of a provider that quotes no input.
    assert!(!provider.messages_quote_input());
    // Asked without the wrapper, it would escape the limit.
    assert!(!provider.never_blocks());
    assert!(provider.evaluate(&request("read_file")).unwrap().allow);
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
