//! Property tests: any request crosses the ABI into a real provider library
//! unchanged, on both paths, and any decision crosses back unchanged; and so
//! through a provider process (`isolation: process`), whose protocol carries
//! them both ways, over shared memory and over pipes.

use guardhost_test_support as support;

use std::sync::{Arc, OnceLock};

use guardhost::{
    CallView, GuardrailDecision, GuardrailProvider, GuardrailReason, GuardrailRequest, ToolCall,
    ToolCallRequest,
};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use support::test_provider;

fn capturing() -> &'static Arc<dyn GuardrailProvider> {
    static PROVIDER: OnceLock<Arc<dyn GuardrailProvider>> = OnceLock::new();
    PROVIDER.get_or_init(|| test_provider("CapturingProvider"))
}

fn echo_decision() -> &'static Arc<dyn GuardrailProvider> {
    static PROVIDER: OnceLock<Arc<dyn GuardrailProvider>> = OnceLock::new();
    PROVIDER.get_or_init(|| test_provider("EchoDecisionProvider"))
}

/// A scripted provider in a provider process of its own.
fn isolated(symbol: &str) -> Arc<dyn GuardrailProvider> {
    let mut spec =
        guardhost::ProviderSpec::new(support::use_of("guardhost_test_providers", symbol), Map::new());
    spec.isolation = guardhost::Isolation::Process;
    guardhost::instantiate(&spec, std::path::Path::new("/")).unwrap().provider
}

fn capturing_isolated() -> &'static Arc<dyn GuardrailProvider> {
    static PROVIDER: OnceLock<Arc<dyn GuardrailProvider>> = OnceLock::new();
    PROVIDER.get_or_init(|| isolated("CapturingProvider"))
}

/// The capturing provider in a provider process reached over its pipes
/// only (the default above is shared memory, on Linux).
fn capturing_over_pipes() -> &'static Arc<dyn GuardrailProvider> {
    static PROVIDER: OnceLock<Arc<dyn GuardrailProvider>> = OnceLock::new();
    PROVIDER.get_or_init(|| {
        let mut spec = guardhost::ProviderSpec::new(
            support::use_of("guardhost_test_providers", "CapturingProvider"),
            Map::new(),
        );
        spec.isolation = guardhost::Isolation::Process;
        spec.transport = Some(guardhost::Transport::Pipes);
        guardhost::instantiate(&spec, std::path::Path::new("/")).unwrap().provider
    })
}

fn echo_decision_isolated() -> &'static Arc<dyn GuardrailProvider> {
    static PROVIDER: OnceLock<Arc<dyn GuardrailProvider>> = OnceLock::new();
    PROVIDER.get_or_init(|| isolated("EchoDecisionProvider"))
}

/// The request that makes `EchoDecisionProvider` answer `expected`.
fn asking_for(expected: &GuardrailDecision) -> GuardrailRequest {
    let spec = json!({
        "allow": expected.allow,
        "reasons": expected.reasons.iter().map(|r| json!([r.code, r.message])).collect::<Vec<_>>(),
        "policy_id": expected.policy_id,
        "metadata": expected.metadata,
    });
    let mut request = GuardrailRequest::from_tool_call(&Default::default(), None).unwrap();
    request.tool_input = spec.as_object().unwrap().clone();
    request
}

/// Any text: every Unicode scalar, NUL and control characters included.
fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<char>(), 0..24).prop_map(String::from_iter)
}

/// Any JSON value, a few levels deep (finite numbers: JSON has no NaN).
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn json_map() -> impl Strategy<Value = Map<String, Value>> {
    proptest::collection::btree_map(text(), json_value(), 0..5).prop_map(|m| m.into_iter().collect())
}

prop_compose! {
    fn request()(
        tool_name in text(),
        tool_input in json_map(),
        ids in proptest::collection::vec(proptest::option::of(text()), 9),
        is_subagent in any::<bool>(),
        is_internal in any::<bool>(),
        timestamp in text(),
        authz_attributes in json_map(),
    ) -> GuardrailRequest {
        GuardrailRequest {
            tool_name,
            tool_input,
            agent_id: ids[0].clone(),
            thread_id: ids[1].clone(),
            is_subagent,
            timestamp,
            user_id: ids[2].clone(),
            user_role: ids[3].clone(),
            oauth_provider: ids[4].clone(),
            oauth_id: ids[5].clone(),
            run_id: ids[6].clone(),
            tool_call_id: ids[7].clone(),
            channel_user_id: ids[8].clone(),
            is_internal,
            authz_attributes,
        }
    }
}

prop_compose! {
    fn decision()(
        allow in any::<bool>(),
        reasons in proptest::collection::vec((text(), text()), 0..4),
        policy_id in proptest::option::of(text()),
        metadata in json_map(),
    ) -> GuardrailDecision {
        GuardrailDecision {
            allow,
            reasons: reasons.into_iter().map(|(code, message)| GuardrailReason::new(code, message)).collect(),
            policy_id,
            metadata,
        }
    }
}

prop_compose! {
    /// A tool call with a runtime context that sets any of the keys a
    /// request reads, to any JSON value, among other keys.
    fn tool_call()(
        name in proptest::option::of(text()),
        id in proptest::option::of(text()),
        args in json_map(),
        known in proptest::collection::btree_map(
            prop_oneof![
                Just("thread_id"), Just("user_id"), Just("user_role"), Just("oauth_provider"),
                Just("oauth_id"), Just("run_id"), Just("channel_user_id"), Just("is_subagent"),
                Just("is_internal"), Just("authz_attributes"),
            ],
            json_value(),
            0..8,
        ),
        other in json_map(),
        with_context in any::<bool>(),
    ) -> ToolCallRequest {
        let mut context = other;
        context.extend(known.into_iter().map(|(k, v)| (k.to_owned(), v)));
        ToolCallRequest {
            tool_call: ToolCall { name, args, id, null_id: false },
            context: with_context.then_some(context),
        }
    }
}

/// What the capturing provider must have seen of `request`.
fn seen(request: &GuardrailRequest, path: &str) -> Value {
    json!({
        "path": path,
        "tool_name": request.tool_name,
        "tool_input": request.tool_input,
        "agent_id": request.agent_id,
        "thread_id": request.thread_id,
        "is_subagent": request.is_subagent,
        "timestamp": request.timestamp,
        "user_id": request.user_id,
        "user_role": request.user_role,
        "oauth_provider": request.oauth_provider,
        "oauth_id": request.oauth_id,
        "run_id": request.run_id,
        "tool_call_id": request.tool_call_id,
        "channel_user_id": request.channel_user_id,
        "is_internal": request.is_internal,
        "authz_attributes": request.authz_attributes,
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_request_reaches_the_provider_unchanged(request in request()) {
        let decision = capturing().evaluate(&request).unwrap();
        prop_assert_eq!(Value::Object(decision.metadata), seen(&request, "sync"));
    }

    #[test]
    fn any_request_reaches_the_provider_unchanged_on_the_async_path(request in request()) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let decision = runtime.block_on(capturing().aevaluate(&request)).unwrap();
        prop_assert_eq!(Value::Object(decision.metadata), seen(&request, "async"));
    }

    /// The middleware's wrapping paths hand a provider the borrowed view of
    /// a call; what crosses the ABI must be exactly what the owned request
    /// made from the same call carries.
    #[test]
    fn the_borrowed_view_of_any_call_crosses_as_its_owned_request(call in tool_call()) {
        let timestamp = "2026-12-02T05:00:00.000001+00:00";
        let view = match CallView::new(&call, &call.tool_call.args, Some("agent-1"), timestamp) {
            Ok(view) => view,
            Err(error) => {
                // The owned path refuses the same call the same way.
                let owned = GuardrailRequest::from_tool_call(&call, Some("agent-1")).unwrap_err();
                prop_assert_eq!(owned, error);
                return Ok(());
            }
        };
        let request = view.to_request();
        let ruled = capturing().rule_view(&view).expect("a library provider takes the view");
        let borrowed = ruled.unwrap().into_decision();
        prop_assert_eq!(Value::Object(borrowed.metadata), seen(&request, "sync"));
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let future = capturing().aevaluate_view(&view).expect("a library provider takes the view");
        let borrowed = runtime.block_on(future).unwrap();
        prop_assert_eq!(Value::Object(borrowed.metadata), seen(&request, "async"));
    }

    /// A view serialises as its owned request: what the provider process
    /// reads is the same either way.
    #[test]
    fn a_view_serialises_exactly_as_its_owned_request(call in tool_call()) {
        let timestamp = "2026-12-02T05:00:00.000001+00:00";
        if let Ok(view) = CallView::new(&call, &call.tool_call.args, Some("agent-1"), timestamp) {
            let text = serde_json::to_string(&view).unwrap();
            prop_assert_eq!(text, serde_json::to_string(&view.to_request()).unwrap());
        }
    }

    /// Through a provider process, over both transports, on both paths,
    /// from the view the wrapping paths hand over.
    #[test]
    fn the_borrowed_view_of_any_call_reaches_an_isolated_provider_as_its_owned_request(call in tool_call()) {
        guardhost_isolation::install();
        let timestamp = "2026-12-02T05:00:00.000001+00:00";
        let Ok(view) = CallView::new(&call, &call.tool_call.args, Some("agent-1"), timestamp) else {
            return Ok(());
        };
        let request = view.to_request();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        for provider in [capturing_isolated(), capturing_over_pipes()] {
            let ruled = provider.rule_view(&view).expect("an isolated provider takes the view");
            let decision = ruled.unwrap().into_decision();
            prop_assert_eq!(Value::Object(decision.metadata), seen(&request, "sync"));
            let future = provider.aevaluate_view(&view).expect("an isolated provider takes the view");
            let decision = runtime.block_on(future).unwrap();
            prop_assert_eq!(Value::Object(decision.metadata), seen(&request, "async"));
        }
    }

    #[test]
    fn any_request_reaches_an_isolated_provider_unchanged_over_pipes_and_on_the_async_path(request in request()) {
        guardhost_isolation::install();
        let decision = capturing_over_pipes().evaluate(&request).unwrap();
        prop_assert_eq!(Value::Object(decision.metadata), seen(&request, "sync"));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        for provider in [capturing_isolated(), capturing_over_pipes()] {
            let decision = runtime.block_on(provider.aevaluate(&request)).unwrap();
            prop_assert_eq!(Value::Object(decision.metadata), seen(&request, "async"));
        }
    }

    #[test]
    fn any_decision_comes_back_unchanged(expected in decision()) {
        let decision = echo_decision().evaluate(&asking_for(&expected)).unwrap();
        prop_assert_eq!(decision, expected);
    }

    #[test]
    fn any_request_reaches_an_isolated_provider_unchanged(request in request()) {
        guardhost_isolation::install();
        let decision = capturing_isolated().evaluate(&request).unwrap();
        prop_assert_eq!(Value::Object(decision.metadata), seen(&request, "sync"));
    }

    #[test]
    fn any_decision_comes_back_from_an_isolated_provider_unchanged(expected in decision()) {
        guardhost_isolation::install();
        let decision = echo_decision_isolated().evaluate(&asking_for(&expected)).unwrap();
        prop_assert_eq!(decision, expected);
    }
}
