//! The middleware behaviour tests of the contract, each on the sync and the
//! async path, with providers loaded from a real cdylib.

use guardhost_test_support as support;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use guardhost::UNRECORDED_MESSAGE;
use guardhost::{
    async_handler, AuditAction, AuditEvent, GuardrailMiddleware, JsonlAuditSink, MemoryAuditSink,
    MiddlewareChain, SyncHandler, ToolCall, ToolCallError, ToolCallMiddleware, ToolCallRequest, ToolMessage,
    ToolResult, ToolStatus,
};
use serde_json::{json, Value};
use support::{middleware, object, tool_call};

#[derive(Debug, Clone, Copy)]
enum Path {
    Sync,
    Async,
}

const PATHS: [Path; 2] = [Path::Sync, Path::Async];

fn handler_message(call: &ToolCallRequest) -> ToolMessage {
    ToolMessage {
        content: format!("ran {}", call.tool_call.name.as_deref().unwrap_or("?")),
        tool_call_id: call.tool_call.id.clone().unwrap_or_default(),
        name: call.tool_call.name.clone(),
        status: ToolStatus::Success,
    }
}

/// Runs one call through `mw` on `path`; returns the result and how many
/// times the handler ran.
fn run(mw: &GuardrailMiddleware, call: ToolCallRequest, path: Path) -> (ToolResult, usize) {
    let calls = Arc::new(AtomicUsize::new(0));
    let result = match path {
        Path::Sync => {
            let calls = Arc::clone(&calls);
            mw.wrap_tool_call(call, &move |c| {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(handler_message(&c))
            })
        }
        Path::Async => {
            let runtime =
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            let counter = Arc::clone(&calls);
            let handler = async_handler(move |c: ToolCallRequest| {
                let counter = Arc::clone(&counter);
                async move {
                    tokio::task::yield_now().await;
                    counter.fetch_add(1, Ordering::SeqCst);
                    Ok(handler_message(&c))
                }
            });
            runtime.block_on(mw.awrap_tool_call(call, handler))
        }
    };
    let count = calls.load(Ordering::SeqCst);
    (result, count)
}

fn bash_call() -> ToolCallRequest {
    ToolCallRequest::new("bash", object(json!({"command": "rm -rf /"}))).with_id("call-1")
}

#[test]
fn allow_passes_the_handler_result_through_untouched_once() {
    for path in PATHS {
        let call = bash_call();
        let (result, calls) = run(&middleware("AllowAllProvider"), call.clone(), path);
        assert_eq!(result.unwrap(), handler_message(&call), "{path:?}");
        assert_eq!(calls, 1, "{path:?}");
    }
}

#[test]
fn deny_never_calls_the_handler_and_explains() {
    for path in PATHS {
        let (result, calls) = run(&middleware("DenyAllProvider"), bash_call(), path);
        let message = result.unwrap();
        assert_eq!(calls, 0, "{path:?}");
        assert_eq!(message.status, ToolStatus::Error);
        assert_eq!(message.name.as_deref(), Some("bash"));
        assert_eq!(message.tool_call_id, "call-1");
        assert_eq!(
            message.content,
            "Guardrail denied: tool 'bash' was blocked (test.denied). Reason: denied by test provider. Choose an alternative approach."
        );
    }
}

#[test]
fn provider_error_fails_closed_by_default() {
    for symbol in ["ErroringProvider", "PanickingProvider", "BadMetadataProvider"] {
        for path in PATHS {
            let (result, calls) = run(&middleware(symbol), bash_call(), path);
            let message = result.unwrap();
            assert_eq!(calls, 0, "{symbol} {path:?}");
            assert_eq!(message.status, ToolStatus::Error);
            assert_eq!(
                message.content,
                "Guardrail denied: tool 'bash' was blocked (oap.evaluator_error). Reason: guardrail provider error (fail-closed). Choose an alternative approach.",
                "{symbol} {path:?}"
            );
        }
    }
}

#[test]
fn provider_error_fails_open_when_configured() {
    for symbol in ["ErroringProvider", "PanickingProvider"] {
        for path in PATHS {
            let mw = middleware(symbol).with_fail_closed(false);
            let call = bash_call();
            let (result, calls) = run(&mw, call.clone(), path);
            assert_eq!(result.unwrap(), handler_message(&call), "{symbol} {path:?}");
            assert_eq!(calls, 1);
        }
    }
}

#[test]
fn a_fail_open_verdict_records_the_evaluator_error_reason() {
    let verdict = middleware("ErroringProvider").with_fail_closed(false).check(&bash_call()).unwrap();
    assert!(verdict.allowed() && verdict.provider_error);
    assert_eq!(verdict.decision.reasons[0].code, "oap.evaluator_error");
    assert_eq!(verdict.decision.reasons[0].message, "guardrail provider error (fail-open)");
}

#[test]
fn passport_becomes_agent_id() {
    for path in PATHS {
        let mw = middleware("CapturingProvider").with_passport(Some("./passport.json".into()));
        let verdict = match path {
            Path::Sync => mw.check(&bash_call()).unwrap(),
            Path::Async => tokio::runtime::Runtime::new().unwrap().block_on(mw.acheck(&bash_call())).unwrap(),
        };
        assert_eq!(verdict.decision.metadata["agent_id"], json!("./passport.json"), "{path:?}");
        assert_eq!(
            verdict.decision.metadata["path"],
            json!(if matches!(path, Path::Sync) { "sync" } else { "async" })
        );
    }
}

#[test]
fn empty_reasons_use_the_fallback_text() {
    for path in PATHS {
        let (result, _) = run(&middleware("EmptyReasonsProvider"), bash_call(), path);
        assert_eq!(
            result.unwrap().content,
            "Guardrail denied: tool 'bash' was blocked (oap.denied). Reason: blocked by guardrail policy. Choose an alternative approach."
        );
    }
}

#[test]
fn empty_and_missing_tool_names_and_ids_are_handled() {
    for path in PATHS {
        let empty = ToolCallRequest::new("", Default::default());
        let (result, calls) = run(&middleware("DenyAllProvider"), empty, path);
        let message = result.unwrap();
        assert_eq!(calls, 0);
        assert!(message.content.starts_with("Guardrail denied: tool '' was blocked"), "{}", message.content);
        assert_eq!(message.name.as_deref(), Some(""));
        assert_eq!(message.tool_call_id, "missing_id");

        let nameless = ToolCallRequest { tool_call: ToolCall::default(), context: None };
        let (result, _) = run(&middleware("DenyAllProvider"), nameless, path);
        let message = result.unwrap();
        assert!(message.content.starts_with("Guardrail denied: tool 'unknown_tool' was blocked"));
        assert_eq!(message.name.as_deref(), Some("unknown_tool"));
    }
}

#[test]
fn a_denial_given_the_call_says_what_one_given_a_borrowed_call_says() {
    let decision = guardhost::GuardrailDecision::with_reason(false, "c", "m");
    let named = ToolCallRequest::new("bash", Default::default()).tool_call;
    let with_id = ToolCallRequest::new("bash", Default::default()).with_id("call-1").tool_call;
    let null_id = ToolCall { null_id: true, ..named.clone() };
    for call in [named, with_id, null_id, ToolCall::default()] {
        let lent = guardhost::denied_message(&call, &decision);
        let given = guardhost::into_denied_message(call.clone(), &decision);
        assert_eq!(given, lent, "{call:?}");
    }
}

/// `rule_view` stands for `evaluate`: a library's plain allow in
/// brief (ABI 1.4 `decide`) is `Ruling::Allow`, anything else the decision
/// itself; a library without `decide` always answers with its decision.
#[test]
fn a_library_s_ruling_stands_for_its_decision() {
    use guardhost::Ruling;
    let allowlist = support::load(
        &support::use_of("guardhost_allowlist", "AllowlistProvider"),
        object(json!({"denied_tools": ["bash"]})),
    );
    let echo = support::test_provider("EchoDecisionProvider");
    let plain = json!({"allow": true, "reasons": [["c", "m"]]});
    let with_metadata = json!({"allow": true, "reasons": [["c", "m"]], "metadata": {"k": 1}});
    let cases: [(&dyn guardhost::GuardrailProvider, &str, Value, bool); 5] = [
        (&*allowlist.provider, "web_search", json!({}), true),
        (&*allowlist.provider, "bash", json!({}), false),
        (&*echo, "tool", plain, false),
        (&*echo, "tool", with_metadata, false),
        (&*echo, "tool", json!({"allow": false}), false),
    ];
    for (provider, tool, args, in_brief) in cases {
        let call = support::tool_call(tool, args);
        let view = guardhost::CallView::new(&call, &call.tool_call.args, None, "now").unwrap();
        let ruling = provider.rule_view(&view).expect("a library takes the view").unwrap();
        assert_eq!(matches!(ruling, Ruling::Allow(_)), in_brief, "{call:?}: {ruling:?}");
        let decision = provider.evaluate(&view.to_request()).unwrap();
        assert_eq!(ruling.into_decision(), decision, "{call:?}");
    }
}

#[test]
fn the_empty_tool_name_never_reaches_the_provider() {
    // The capturing provider allows, echoing the request in the metadata.
    let named = middleware("CapturingProvider").check(&tool_call("bash", json!({}))).unwrap();
    assert_eq!(named.decision.metadata["tool_name"], json!("bash"));
    for call in [ToolCallRequest::default(), tool_call("", json!({}))] {
        let verdict = middleware("CapturingProvider").check(&call).unwrap();
        assert!(!verdict.allowed());
        assert_eq!(verdict.decision.reasons[0].code, "guardhost.tool_name_invalid");
        assert!(verdict.decision.metadata.is_empty(), "{:?}", verdict.decision);
        assert_eq!(verdict.request.tool_name, "");
    }
}

#[test]
fn control_flow_signal_propagates_unchanged() {
    for path in PATHS {
        let audit = Arc::new(MemoryAuditSink::new());
        let mw = middleware("InterruptingProvider").with_audit_sink(audit.clone());
        let (result, calls) = run(&mw, bash_call(), path);
        match result {
            Err(ToolCallError::Interrupt(interrupt)) => {
                assert_eq!(interrupt.message, "human approval required");
                assert_eq!(interrupt.payload, json!({"tool": "bash"}));
            }
            other => panic!("{path:?}: expected an interrupt, got {other:?}"),
        }
        assert_eq!(calls, 0);
        assert!(audit.events().is_empty(), "an interrupt is not a decision and is not audited");
        // Even fail-open does not swallow it.
        let (result, calls) = run(&mw.clone().with_fail_closed(false), bash_call(), path);
        assert!(matches!(result, Err(ToolCallError::Interrupt(_))));
        assert_eq!(calls, 0);
    }
}

/// The events of one call, recorded in memory; the same call through the
/// JSON-lines sink (its writer thread, its file) must give the same events,
/// but for their decision ids and times.
fn audited(symbol: &str, fail_closed: bool, call: ToolCallRequest, path: Path) -> Vec<AuditEvent> {
    let mw = middleware(symbol).with_fail_closed(fail_closed).with_passport(Some("agent-7".into()));
    let memory = Arc::new(MemoryAuditSink::new());
    let _ = run(&mw.clone().with_audit_sink(memory.clone()), call.clone(), path);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let jsonl = Arc::new(JsonlAuditSink::open(&file).unwrap());
    let _ = run(&mw.with_audit_sink(jsonl.clone()), call, path);
    jsonl.flush();
    let mut written: Vec<AuditEvent> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let events = memory.events();
    assert_eq!(written.len(), events.len(), "{path:?}");
    for (written, event) in written.iter_mut().zip(&events) {
        assert_ne!(written.decision_id, event.decision_id);
        written.decision_id.clone_from(&event.decision_id);
        written.time.clone_from(&event.time);
        assert_eq!(written, event, "{path:?}");
    }
    events
}

fn attributed_call() -> ToolCallRequest {
    bash_call().with_context(object(json!({
        "user_id": "user-1", "user_role": "admin", "oauth_provider": "github", "oauth_id": "gh-1",
        "is_subagent": true, "thread_id": "t-1", "run_id": "run-1"
    })))
}

#[test]
fn deny_is_audited_with_exactly_the_listed_fields() {
    for path in PATHS {
        let events = audited("DenyAllProvider", true, attributed_call(), path);
        assert_eq!(events.len(), 1, "{path:?}");
        let mut event = serde_json::to_value(&events[0]).unwrap();
        // What identifies the call: checked, then set aside for the exact
        // comparison of DeerFlow's fields below.
        let object = event.as_object_mut().unwrap();
        let time = object.remove("time").unwrap();
        chrono::DateTime::parse_from_rfc3339(time.as_str().unwrap()).unwrap();
        let decision_id = object.remove("decision_id").unwrap();
        assert_eq!(decision_id.as_str().unwrap().len(), 29, "{decision_id}");
        assert_eq!(object.remove("thread_id"), Some(json!("t-1")));
        assert_eq!(object.remove("run_id"), Some(json!("run-1")));
        assert_eq!(object.remove("tool_call_id"), Some(json!("call-1")));
        assert_eq!(object.remove("provider"), Some(json!({"name": "deny-all", "sha256": null})));
        assert_eq!(
            event,
            json!({
                "tag": "guardrail", "name": "GuardrailMiddleware", "hook": "wrap_tool_call",
                "action": "deny_tool_call",
                "changes": {
                    "tool_name": "bash", "tool_call_id": "call-1", "agent_id": "agent-7", "is_subagent": true,
                    "user_role": "admin", "allow": false, "policy_id": "test-policy",
                    "reason_codes": ["test.denied", "test.second"],
                    "reason_messages": [UNRECORDED_MESSAGE, UNRECORDED_MESSAGE],
                    "fail_closed": true, "provider_error": false
                }
            })
        );
        let text = event.to_string();
        for forbidden in [
            "rm -rf",
            "tool_input",
            "args",
            "user-1",
            "user_id",
            "github",
            "oauth",
            "gh-1",
            "denied by test provider",
        ] {
            assert!(!text.contains(forbidden), "audit event leaks {forbidden}: {text}");
        }
    }
}

#[test]
fn provider_errors_are_audited_fail_closed_and_fail_open() {
    for path in PATHS {
        let closed = audited("ErroringProvider", true, bash_call(), path);
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].action, AuditAction::DenyToolCall);
        let c = &closed[0].changes;
        assert!(!c.allow && c.fail_closed && c.provider_error);
        assert_eq!(c.reason_codes, ["oap.evaluator_error"]);
        assert_eq!(c.reason_messages, ["guardrail provider error (fail-closed)"]);

        let open = audited("PanickingProvider", false, bash_call(), path);
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].action, AuditAction::AllowToolCallAfterProviderError);
        let c = &open[0].changes;
        assert!(c.allow && !c.fail_closed && c.provider_error);
        assert_eq!(c.reason_codes, ["oap.evaluator_error"]);
        assert_eq!(c.reason_messages, ["guardrail provider error (fail-open)"]);
    }
}

#[test]
fn a_plain_allow_is_not_audited() {
    for path in PATHS {
        assert!(audited("AllowAllProvider", true, attributed_call(), path).is_empty());
    }
}

#[test]
fn audited_reason_messages_are_fixed_texts_and_empty_ones_dropped() {
    for path in PATHS {
        let events = audited("LongReasonProvider", true, bash_call(), path);
        let c = &events[0].changes;
        assert_eq!(c.reason_codes, ["test.long"], "empty codes are left out");
        assert_eq!(c.reason_messages, [UNRECORDED_MESSAGE], "never the provider's words");
    }
}

#[test]
fn an_empty_reason_list_is_audited_with_empty_lists() {
    let events = audited("EmptyReasonsProvider", true, bash_call(), Path::Sync);
    assert!(events[0].changes.reason_codes.is_empty() && events[0].changes.reason_messages.is_empty());
}

#[test]
fn a_panic_before_the_async_future_exists_fails_closed() {
    let (result, calls) = run(&middleware("PanicBeforeFutureProvider"), bash_call(), Path::Async);
    assert!(result.unwrap().content.contains("(oap.evaluator_error)"));
    assert_eq!(calls, 0);
}

#[test]
fn panics_in_drop_are_contained() {
    for path in PATHS {
        // The future (async path) panics when dropped after completing.
        let (result, calls) = run(&middleware("DropPanickingProvider"), bash_call(), path);
        assert_eq!(result.unwrap().status, ToolStatus::Success, "{path:?}");
        assert_eq!(calls, 1);
    }
    // A future dropped before it completes (a cancelled call).
    let mw = middleware("DropPanickingProvider");
    let call = bash_call();
    let mut future = Box::pin(mw.acheck(&call));
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    assert!(future.as_mut().poll(&mut cx).is_pending());
    drop(future);
    // The provider itself panics when dropped.
    drop(mw);
    assert!(middleware("AllowAllProvider").check(&bash_call()).unwrap().allowed(), "the host still works");
}

#[test]
fn a_non_mapping_authz_attributes_is_an_error_not_a_decision() {
    for path in PATHS {
        let call = bash_call().with_context(object(json!({"authz_attributes": ["not", "a", "mapping"]})));
        let (result, calls) = run(&middleware("AllowAllProvider"), call, path);
        let error = result.unwrap_err();
        assert!(matches!(error, ToolCallError::InvalidRequest(_)));
        assert!(error.to_string().contains("authz_attributes must be a Mapping"), "{error}");
        assert_eq!(calls, 0);
    }
}

/// A layer that records when it is entered and left.
struct Recorder(&'static str, Arc<Mutex<Vec<String>>>);
impl ToolCallMiddleware for Recorder {
    fn wrap_tool_call(&self, request: ToolCallRequest, handler: SyncHandler<'_>) -> ToolResult {
        self.1.lock().unwrap().push(format!("enter {}", self.0));
        let result = handler(request);
        self.1.lock().unwrap().push(format!("leave {}", self.0));
        result
    }
    fn awrap_tool_call<'a>(
        &'a self,
        request: ToolCallRequest,
        handler: guardhost::AsyncHandler,
    ) -> guardhost::BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            self.1.lock().unwrap().push(format!("enter {}", self.0));
            let result = handler(request).await;
            self.1.lock().unwrap().push(format!("leave {}", self.0));
            result
        })
    }
}

#[test]
fn the_chain_runs_first_outermost_and_a_denial_stops_the_inner_layers() {
    for (symbol, expected) in [
        ("AllowAllProvider", vec!["enter outer", "enter inner", "handler", "leave inner", "leave outer"]),
        ("DenyAllProvider", vec!["enter outer", "leave outer"]),
    ] {
        for path in PATHS {
            let log = Arc::new(Mutex::new(Vec::new()));
            let chain = MiddlewareChain::new()
                .with(Recorder("outer", log.clone()))
                .with(middleware(symbol))
                .with(Recorder("inner", log.clone()));
            let result = match path {
                Path::Sync => {
                    let log = log.clone();
                    chain.call(bash_call(), &move |c| {
                        log.lock().unwrap().push("handler".into());
                        Ok(handler_message(&c))
                    })
                }
                Path::Async => {
                    let handler_log = log.clone();
                    let handler = async_handler(move |c: ToolCallRequest| {
                        let log = handler_log.clone();
                        async move {
                            log.lock().unwrap().push("handler".into());
                            Ok(handler_message(&c))
                        }
                    });
                    tokio::runtime::Runtime::new().unwrap().block_on(chain.acall(bash_call(), handler))
                }
            };
            let status = result.unwrap().status;
            assert_eq!(status == ToolStatus::Success, symbol == "AllowAllProvider");
            assert_eq!(*log.lock().unwrap(), expected, "{symbol} {path:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_async_calls_through_a_library_provider() {
    let mw = Arc::new(middleware("CapturingProvider"));
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let mw = Arc::clone(&mw);
            tokio::spawn(async move {
                let call = ToolCallRequest::new(format!("tool_{i}"), object(json!({"i": i})))
                    .with_id(format!("id-{i}"));
                let verdict = mw.acheck(&call).await.unwrap();
                assert_eq!(verdict.decision.metadata["tool_input"], json!({"i": i}));
                assert_eq!(verdict.decision.metadata["tool_call_id"], Value::from(format!("id-{i}")));
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

/// A tool service that counts its calls.
#[derive(Clone, Default)]
struct CountingTool(Arc<AtomicUsize>);
impl tower_service::Service<ToolCallRequest> for CountingTool {
    type Response = ToolMessage;
    type Error = ToolCallError;
    type Future = std::future::Ready<ToolResult>;
    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), ToolCallError>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn call(&mut self, request: ToolCallRequest) -> Self::Future {
        self.0.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(handler_message(&request)))
    }
}

#[tokio::test]
async fn the_tower_layer_guards_a_service() {
    use tower_layer::Layer;
    use tower_service::Service;
    for (symbol, runs) in [("AllowAllProvider", 1), ("DenyAllProvider", 0)] {
        let tool = CountingTool::default();
        let mut service = guardhost::GuardrailLayer::new(middleware(symbol)).layer(tool.clone());
        std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
        let message = service.call(bash_call()).await.unwrap();
        assert_eq!(tool.0.load(Ordering::SeqCst), runs, "{symbol}");
        assert_eq!(message.status == ToolStatus::Success, runs == 1);
    }
}

/// A provider written directly in Rust, with no library: the middleware only
/// needs the `GuardrailProvider` trait (as an out-of-process provider will),
/// and of it only a name and `evaluate` (the async paths take the default
/// `aevaluate`, the wrapping paths build the owned request).
struct NativeProvider;
impl guardhost::GuardrailProvider for NativeProvider {
    fn name(&self) -> &str {
        "native"
    }
    fn evaluate(&self, request: &guardhost::GuardrailRequest) -> guardhost::Evaluation {
        let allow = request.user_role.as_deref() == Some("admin");
        Ok(guardhost::GuardrailDecision::with_reason(allow, "native.role", "admins only"))
    }
}

#[test]
fn a_native_rust_provider_plugs_into_the_same_middleware() {
    let mw = GuardrailMiddleware::new(Arc::new(NativeProvider));
    for path in PATHS {
        let admin = bash_call().with_context(object(json!({"user_role": "admin"})));
        assert_eq!(run(&mw, admin, path).0.unwrap().status, ToolStatus::Success);
        let (result, calls) = run(&mw, bash_call(), path);
        assert!(result.unwrap().content.contains("(native.role). Reason: admins only."));
        assert_eq!(calls, 0);
    }
}

#[test]
fn warn_and_observe_let_a_denied_call_run_and_record_what_would_have_been_denied() {
    for mode in [guardhost::Mode::Warn, guardhost::Mode::Observe] {
        for path in PATHS {
            let audit = Arc::new(MemoryAuditSink::new());
            let mw = middleware("DenyAllProvider").with_mode(mode).with_audit_sink(audit.clone());
            let call = bash_call();
            let (result, calls) = run(&mw, call.clone(), path);
            assert_eq!(result.unwrap(), handler_message(&call), "{mode} {path:?}");
            assert_eq!(calls, 1, "{mode} {path:?}: the handler ran");
            let events = audit.events();
            assert_eq!(events.len(), 1);
            assert_eq!(events[0].action, AuditAction::WouldDenyToolCall);
            assert_eq!(events[0].changes.reason_codes, ["test.denied", "test.second"]);
        }
        // What the decision says.
        let (decision, provider_error) =
            middleware("DenyAllProvider").with_mode(mode).decide(&bash_call()).unwrap();
        assert!(decision.allow && !provider_error);
        assert_eq!(decision.reasons[0].code, "guardhost.shadow");
        assert_eq!(
            decision.reasons[0].message,
            format!("{mode} mode: would have denied (test.denied): denied by test provider")
        );
        assert_eq!(decision.metadata["mode"], json!(mode.as_str()));
        assert_eq!(decision.metadata["would_deny"]["code"], json!("test.denied"));
        assert_eq!(
            decision.metadata["would_deny"]["reasons"][0]["message"],
            json!("denied by test provider")
        );
        // A provider error, failing closed, is let through too, and said so.
        let (decision, provider_error) =
            middleware("ErroringProvider").with_mode(mode).decide(&bash_call()).unwrap();
        assert!(decision.allow && provider_error);
        assert_eq!(decision.metadata["would_deny"]["code"], json!("oap.evaluator_error"));
        // An allow is unchanged; an interrupt is no denial.
        let (decision, _) = middleware("AllowAllProvider").with_mode(mode).decide(&bash_call()).unwrap();
        assert_eq!(decision.reasons[0].code, "test.allowed");
        assert!(!decision.metadata.contains_key("would_deny"));
        assert!(matches!(
            middleware("InterruptingProvider").with_mode(mode).decide(&bash_call()),
            Err(ToolCallError::Interrupt(_))
        ));
    }
    // Enforce, the default, denies.
    let (result, calls) =
        run(&middleware("DenyAllProvider").with_mode(guardhost::Mode::Enforce), bash_call(), Path::Sync);
    assert_eq!((result.unwrap().status, calls), (ToolStatus::Error, 0));
}

/// What a config's guardrail audits for `tool`, with `context`.
fn config_audited(yaml: &str, tool: &str, context: Value) -> Vec<AuditEvent> {
    guardhost_builtins::register();
    let config = guardhost::LoadedConfig::from_yaml(
        yaml,
        std::path::Path::new("/").into(),
        guardhost::ConfigOrigin::Embedded,
        |_| None,
    )
    .unwrap();
    let guardrail = guardhost::install(&config).unwrap().unwrap();
    let memory = Arc::new(MemoryAuditSink::new());
    let middleware = guardrail.middleware.with_audit_sink(memory.clone());
    let mut call = tool_call(tool, json!({"command": "rm -rf /srv/secret"}));
    call.context = context.as_object().cloned();
    let _ = middleware.decide(&call).unwrap();
    memory.events()
}

/// Messages of providers that declare they quote no input (the built-in
/// allowlist and RBAC providers) are audited as written, as DeerFlow
/// audits them; any other provider's get a fixed text; the operator's
/// `audit_messages` forces either way.
#[test]
fn audited_messages_are_as_written_where_the_provider_declares_them_safe() {
    let allowlist = "guardrails:\n  enabled: true\n  provider: {use: builtin:AllowlistProvider, config: {denied_tools: [bash]}}\n";
    let events = config_audited(allowlist, "bash", json!({}));
    assert_eq!(events[0].changes.reason_messages, ["tool 'bash' is denied"]);

    let rbac = "authorization:\n  enabled: true\n  provider:\n    use: builtin:RbacAuthorizationProvider\n    config: {roles: {user: {tools: {allow: '*', deny: [update_agent]}}}}\n";
    let events = config_audited(rbac, "update_agent", json!({}));
    assert_eq!(
        events[0].changes.reason_messages,
        ["role 'user' is denied 'update_agent' on resource 'tool'"]
    );

    // A provider that declares nothing: a fixed text, never its words.
    let library = support::library("guardhost_test_providers").display().to_string();
    let other = format!("guardrails:\n  enabled: true\n  provider: {{use: '{library}:DenyAllProvider'}}\n");
    let events = config_audited(&other, "bash", json!({}));
    assert_eq!(events[0].changes.reason_messages, [UNRECORDED_MESSAGE, UNRECORDED_MESSAGE]);

    // The operator's switch, both ways.
    let fixed = allowlist.replace("  enabled: true\n", "  enabled: true\n  audit_messages: fixed\n");
    let events = config_audited(&fixed, "bash", json!({}));
    assert_eq!(events[0].changes.reason_messages, ["tool not in allowlist or denied"]);
    let written = other.replace("  enabled: true\n", "  enabled: true\n  audit_messages: as_written\n");
    let events = config_audited(&written, "bash", json!({}));
    assert_eq!(events[0].changes.reason_messages, ["denied by test provider", "a second reason"]);

    // As written, a message is cut to 500 characters, as DeerFlow does.
    let long = format!("guardrails:\n  enabled: true\n  audit_messages: as_written\n  provider: {{use: '{library}:LongReasonProvider'}}\n");
    let events = config_audited(&long, "bash", json!({}));
    assert_eq!(events[0].changes.reason_messages[0].chars().count(), 500);
    let bad = allowlist.replace("  enabled: true\n", "  enabled: true\n  audit_messages: sometimes\n");
    let error =
        guardhost::LoadedConfig::from_yaml(&bad, "/".into(), guardhost::ConfigOrigin::Embedded, |_| None)
            .unwrap_err()
            .to_string();
    assert!(error.contains("`audit_messages`: unknown variant"), "{error}");
}
