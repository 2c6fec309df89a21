//! `ask` and `rewrite`: the approvals provider (built in, and its library
//! loaded with `dlopen`) and scripted
//! providers, from YAML, through the middleware's sync, async and
//! borrowed-view paths.

use std::path::Path;
use std::sync::{Arc, Mutex};

use guardhost::{
    install, Ask, AuditAction, ConfigOrigin, Guardrail, GuardrailDecision, LoadedConfig, MemoryAuditSink,
    ToolCallError, ToolCallRequest, ToolMessage, ToolStatus,
};
use guardhost_test_support::{library, object, tool_call};
use serde_json::{json, Map, Value};

fn approvals_use(how: &str) -> String {
    match how {
        "builtin" => "builtin:ApprovalGuardrailProvider".to_owned(),
        _ => format!("{}:ApprovalGuardrailProvider", library("guardhost_approvals").display()),
    }
}

fn test_providers() -> String {
    library("guardhost_test_providers").display().to_string()
}

fn guardrail(yaml: &str) -> Guardrail {
    guardhost_builtins::register();
    let config =
        LoadedConfig::from_yaml(yaml, Path::new("/").into(), ConfigOrigin::Embedded, |_| None).unwrap();
    install(&config).unwrap().expect("a guardrail")
}

/// The approvals provider alone, loaded `how` (`builtin` or `library`;
/// the command's tests run it in a provider process too).
fn approvals(how: &str, mode: &str) -> Guardrail {
    guardrail(&format!(
        "guardrails:
  enabled: true
  mode: {mode}
  provider:
    use: {}
    config:
      ask: [bash]
      approvers: [admin, ops]
      timeout_s: 120
      set: {{web_fetch: {{max_bytes: 1000}}}}
",
        approvals_use(how)
    ))
}

/// Runs `call` through the sync and async wrappers; the tool "runs" by
/// recording the arguments it got.
fn run(guardrail: &Guardrail, call: &ToolCallRequest) -> (Result<ToolMessage, ToolCallError>, Vec<Value>) {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let sync_ran = Arc::clone(&ran);
    let handler = move |call: ToolCallRequest| {
        sync_ran.lock().unwrap().push(Value::Object(call.tool_call.args.clone()));
        Ok(ToolMessage {
            content: "ran".into(),
            tool_call_id: "call-1".into(),
            name: call.tool_call.name.clone(),
            status: ToolStatus::Success,
        })
    };
    let sync = guardrail.middleware.wrap_tool_call(call.clone(), &handler);
    let async_ran = Arc::clone(&ran);
    let asynchronous = guardhost::block_on(guardrail.middleware.awrap_tool_call(
        call.clone(),
        guardhost::async_handler(move |call: ToolCallRequest| {
            let ran = Arc::clone(&async_ran);
            async move {
                ran.lock().unwrap().push(Value::Object(call.tool_call.args.clone()));
                Ok(ToolMessage {
                    content: "ran".into(),
                    tool_call_id: "call-1".into(),
                    name: call.tool_call.name.clone(),
                    status: ToolStatus::Success,
                })
            }
        }),
    ));
    assert_eq!(
        format!("{:?}", sync.as_ref().map(|m| &m.content).map_err(|e| e.to_string())),
        format!("{:?}", asynchronous.as_ref().map(|m| &m.content).map_err(|e| e.to_string()))
            .replace(&digest_of(&asynchronous), &digest_of(&sync)),
        "sync and async agree"
    );
    let ran = ran.lock().unwrap().clone();
    (sync, ran)
}

fn digest_of(result: &Result<ToolMessage, ToolCallError>) -> String {
    match result {
        Err(ToolCallError::ApprovalRequired { ask, .. }) => ask.digest.clone(),
        _ => "-".to_owned(),
    }
}

fn held(result: Result<ToolMessage, ToolCallError>) -> Ask {
    match result {
        Err(ToolCallError::ApprovalRequired { tool, ask, decision }) => {
            assert!(!decision.allow);
            assert_eq!(decision.reasons[0].code, "approvals.ask");
            assert_eq!(tool, "bash");
            *ask
        }
        other => panic!("expected the call held for approval, got {other:?}"),
    }
}

fn with_approval(call: &ToolCallRequest, approval: Value) -> ToolCallRequest {
    let mut call = call.clone();
    call.context.get_or_insert_with(Map::new).insert("approval".into(), approval);
    call
}

fn approval_of(ask: &Ask, by: &str) -> Value {
    json!({"approved": true, "entry": ask.entry, "digest": ask.digest, "deadline": ask.deadline, "approved_by": by})
}

fn bash(command: &str) -> ToolCallRequest {
    let mut call = tool_call("bash", json!({"command": command}));
    call.context = Some(object(json!({"thread_id": "t-1", "user_id": "u-1"})));
    call
}

#[test]
fn an_ask_holds_the_call_until_an_approval_of_exactly_it_resumes_it() {
    for how in ["builtin", "library"] {
        let guardrail = approvals(how, "enforce");
        let call = bash("rm -rf build");
        let (result, ran) = run(&guardrail, &call);
        let ask = held(result);
        assert!(ran.is_empty(), "{how}: a held call does not run");
        assert_eq!(ask.approvers, ["admin", "ops"]);
        assert_eq!(ask.entry, "approvals");
        assert!(ask.digest.starts_with("sha256:"));
        let (decision, _) = guardrail.middleware.decide(&call).unwrap();
        assert_eq!(guardhost::outcome_of(&decision), "ask");
        assert_eq!(Ask::of(&decision).unwrap().approvers, ask.approvers);

        // Resumed with the approval: the tool runs, once per wrapper.
        let approved = with_approval(&call, approval_of(&ask, "admin"));
        let (result, ran) = run(&guardrail, &approved);
        assert_eq!(result.unwrap().content, "ran", "{how}");
        assert_eq!(ran, [json!({"command": "rm -rf build"}), json!({"command": "rm -rf build"})]);
        let verdict = guardrail.middleware.check(&approved).unwrap();
        assert!(verdict.allowed());
        assert_eq!(verdict.decision.reasons[0].code, "guardhost.approved");
        assert_eq!(verdict.decision.reasons[0].message, "approved by 'admin'");
        assert_eq!(verdict.decision.metadata["approved_by"], json!("admin"));

        // The same approval on another call (other arguments) is refused.
        let forged = with_approval(&bash("rm -rf /"), approval_of(&ask, "admin"));
        let (result, ran) = run(&guardrail, &forged);
        let message = result.unwrap();
        assert!(ran.is_empty());
        assert_eq!(message.status, ToolStatus::Error);
        assert!(message.content.contains("(guardhost.approval_mismatch)"), "{}", message.content);
        // So is it on the same arguments in another thread.
        let mut elsewhere = approved.clone();
        elsewhere.context.as_mut().unwrap().insert("thread_id".into(), json!("t-2"));
        let (decision, _) = guardrail.middleware.decide(&elsewhere).unwrap();
        assert_eq!(decision.reasons[0].code, "guardhost.approval_mismatch");
    }
}

#[test]
fn approvals_from_the_wrong_person_late_or_refused_deny() {
    let guardrail = approvals("builtin", "enforce");
    let call = bash("make deploy");
    let ask = held(run(&guardrail, &call).0);
    let code = |approval: Value| {
        let (decision, _) = guardrail.middleware.decide(&with_approval(&call, approval)).unwrap();
        assert!(!decision.allow);
        decision.reasons[0].code.clone()
    };
    assert_eq!(code(approval_of(&ask, "mallory")), "guardhost.approver_not_allowed");
    let mut refused = approval_of(&ask, "admin");
    refused["approved"] = json!(false);
    assert_eq!(code(refused), "guardhost.approval_refused");
    // A deadline moved later changes the digest: refused as another call's.
    let mut moved = approval_of(&ask, "admin");
    moved["deadline"] = json!(ask.deadline + 3600);
    assert_eq!(code(moved), "guardhost.approval_mismatch");
    assert_eq!(code(json!({"approved": "yes"})), "guardhost.bad_approval");
    assert_eq!(code(json!([approval_of(&ask, "ops"), 7])), "guardhost.bad_approval");
}

#[test]
fn a_rewrite_runs_the_tool_with_the_new_arguments_and_tells_the_caller() {
    for how in ["builtin", "library"] {
        let guardrail = approvals(how, "enforce");
        let call = tool_call("web_fetch", json!({"url": "https://example.com", "max_bytes": 50_000_000}));
        let (result, ran) = run(&guardrail, &call);
        assert_eq!(result.unwrap().content, "ran");
        let expected = json!({"url": "https://example.com", "max_bytes": 1000});
        assert_eq!(ran, [expected.clone(), expected.clone()], "{how}");
        let (decision, _) = guardrail.middleware.decide(&call).unwrap();
        assert!(decision.allow);
        assert_eq!(guardhost::outcome_of(&decision), "rewrite");
        assert_eq!(Value::Object(guardhost::rewritten_args(&decision).unwrap().clone()), expected);
        assert_eq!(decision.reasons[0].code, "approvals.set");
        let verdict = guardrail.middleware.check(&call).unwrap();
        assert_eq!(Value::Object(verdict.request.tool_input), expected);
    }
}

#[test]
fn in_a_chain_a_rewrite_reaches_the_next_entry_and_an_approval_covers_the_rewritten_call() {
    let guardrail = guardrail(&format!(
        "guardrails:
  enabled: true
  providers:
    - use: {approvals}
      name: caps
      config: {{set: {{bash: {{timeout: 30}}}}}}
    - use: {approvals}
      name: humans
      config: {{ask: [bash]}}
",
        approvals = approvals_use("library"),
    ));
    let call = bash("make");
    let ask = held_by(run(&guardrail, &call).0, "humans");
    let approved = with_approval(
        &call,
        json!({"approved": true, "entry": ask.entry, "digest": ask.digest, "deadline": ask.deadline}),
    );
    let (result, ran) = run(&guardrail, &approved);
    assert_eq!(result.unwrap().content, "ran");
    assert_eq!(ran[0], json!({"command": "make", "timeout": 30}), "the tool runs the rewritten call");
    let (decision, _) = guardrail.middleware.decide(&approved).unwrap();
    assert_eq!(decision.metadata["decided_by"], json!("caps"), "the first entry worth telling reports");
    assert_eq!(
        Value::Object(guardhost::rewritten_args(&decision).unwrap().clone()),
        json!({"command": "make", "timeout": 30})
    );
    let verdict = guardrail.middleware.check(&approved).unwrap();
    assert_eq!(Value::Object(verdict.request.tool_input.clone()), json!({"command": "make", "timeout": 30}));

    // An approval of the call as it came in (before the rewrite) does not
    // match the call the humans' entry decides.
    let original = guardhost::call_digest("humans", &call, ask.deadline).unwrap();
    let stale = with_approval(
        &call,
        json!({"approved": true, "entry": "humans", "digest": original, "deadline": ask.deadline}),
    );
    let (decision, _) = guardrail.middleware.decide(&stale).unwrap();
    assert_eq!(decision.reasons[0].code, "guardhost.approval_mismatch");
}

/// The entry after a rewrite decides on the rewritten arguments: an echo
/// provider (which answers with the decision its arguments describe)
/// allows the call as it comes, and denies it as rewritten.
#[test]
fn the_next_entry_decides_on_the_rewritten_arguments() {
    let guardrail = guardrail(&format!(
        "guardrails:
  enabled: true
  providers:
    - use: {approvals}
      config: {{set: {{echo: {{allow: false, reasons: [[test.saw_rewrite, the rewritten call]]}}}}}}
    - use: {lib}:EchoDecisionProvider
      name: echo
",
        approvals = approvals_use("library"),
        lib = test_providers()
    ));
    let call = tool_call("echo", json!({"allow": true}));
    let (decision, _) = guardrail.middleware.decide(&call).unwrap();
    assert!(!decision.allow);
    assert_eq!(decision.reasons[0].code, "test.saw_rewrite");
    // The text the arguments arrived in is not handed on past a rewrite:
    // it no longer says what they are.
    let (decision, _) =
        guardrail.middleware.decide_with_args_text(&call, Some(r#"{"allow": true}"#)).unwrap();
    assert_eq!(decision.reasons[0].code, "test.saw_rewrite");
    assert_eq!(decision.metadata["decided_by"], json!("echo"));
    let (result, ran) = run(&guardrail, &call);
    assert!(result.unwrap().content.contains("(test.saw_rewrite)"));
    assert!(ran.is_empty());
}

fn held_by(result: Result<ToolMessage, ToolCallError>, entry: &str) -> Ask {
    match result {
        Err(ToolCallError::ApprovalRequired { ask, decision, .. }) => {
            assert_eq!(ask.entry, entry);
            assert_eq!(decision.metadata["decided_by"], json!(entry));
            *ask
        }
        other => panic!("expected the call held by {entry}, got {other:?}"),
    }
}

#[test]
fn shadow_mode_runs_the_call_unchanged_and_says_what_would_have_happened() {
    let guardrail = approvals("library", "warn");
    let (result, ran) = run(&guardrail, &bash("ls"));
    assert_eq!(result.unwrap().content, "ran");
    assert_eq!(ran[0], json!({"command": "ls"}));
    let (decision, _) = guardrail.middleware.decide(&bash("ls")).unwrap();
    assert!(decision.allow);
    assert_eq!(decision.reasons[0].code, "guardhost.shadow");
    assert_eq!(
        decision.reasons[0].message,
        "warn mode: would have asked for approval (approvals.ask): tool 'bash' needs a human's approval"
    );
    assert_eq!(decision.metadata["would_ask"]["ask"]["approvers"], json!(["admin", "ops"]));
    assert_eq!(guardhost::outcome_of(&decision), "allow");

    let fetch = tool_call("web_fetch", json!({"url": "u", "max_bytes": 5}));
    let (result, ran) = run(&guardrail, &fetch);
    assert_eq!(result.unwrap().content, "ran");
    assert_eq!(ran[0], json!({"url": "u", "max_bytes": 5}), "shadow mode does not rewrite");
    let (decision, _) = guardrail.middleware.decide(&fetch).unwrap();
    assert_eq!(decision.metadata["would_rewrite"]["code"], json!("approvals.set"));
    assert!(guardhost::rewritten_args(&decision).is_none());
}

#[test]
fn ask_approval_and_rewrite_are_audited() {
    let sink = Arc::new(MemoryAuditSink::new());
    let mut guardrail = approvals("library", "enforce");
    guardrail.middleware = guardrail.middleware.clone().with_audit_sink(sink.clone());
    let ask = held(run(&guardrail, &bash("ls")).0);
    run(&guardrail, &with_approval(&bash("ls"), approval_of(&ask, "ops"))).0.unwrap();
    run(&guardrail, &tool_call("web_fetch", json!({}))).0.unwrap();
    let actions: Vec<AuditAction> = sink.events().iter().map(|e| e.action).collect();
    use AuditAction::*;
    assert_eq!(
        actions,
        [AskToolCall, AskToolCall, ApprovedToolCall, ApprovedToolCall, RewriteToolCall, RewriteToolCall]
    );
    for event in sink.events() {
        let text = serde_json::to_string(&event).unwrap();
        assert!(
            !text.contains("max_bytes") && !text.contains("\"ls\""),
            "no arguments in audit events: {text}"
        );
    }
}

/// A provider's outcome this host cannot read is a provider error:
/// `fail_closed` decides, never a silent allow.
#[test]
fn an_unknown_or_malformed_outcome_is_a_provider_error() {
    for fail_closed in [true, false] {
        let guardrail = guardrail(&format!(
            "guardrails:\n  enabled: true\n  fail_closed: {fail_closed}\n  provider: {{use: {}:EchoDecisionProvider}}\n",
            test_providers()
        ));
        for outcome in [
            json!({"escalate": {"to": "security"}}),
            json!({"ask": {"timeout_s": 0}}),
            json!({"rewrite": {"tool_input": "rm -rf /"}}),
            json!("ask"),
        ] {
            let call = tool_call("echo", json!({"allow": false, "metadata": {"guardhost.outcome": outcome}}));
            let (decision, provider_error) = guardrail.middleware.decide(&call).unwrap();
            assert!(provider_error, "{outcome}");
            assert_eq!(decision.allow, !fail_closed, "{outcome}");
            assert_eq!(decision.reasons[0].code, "oap.evaluator_error");
        }
    }
}

/// A provider that knows nothing of outcomes decides as before; its
/// metadata passes untouched.
#[test]
fn providers_that_know_no_outcomes_are_unaffected() {
    let guardrail = guardrail(&format!(
        "guardrails:\n  enabled: true\n  provider: {{use: {}:EchoDecisionProvider}}\n",
        test_providers()
    ));
    let call = tool_call("echo", json!({"allow": false, "reasons": [["x.no", "no"]], "metadata": {"k": 1}}));
    let (decision, _): (GuardrailDecision, bool) = guardrail.middleware.decide(&call).unwrap();
    assert_eq!(guardhost::outcome_of(&decision), "deny");
    assert_eq!(decision.metadata, object(json!({"k": 1})));
    let message = run(&guardrail, &call).0.unwrap();
    assert!(message.content.starts_with("Guardrail denied: tool 'echo' was blocked (x.no)"));
}

/// A provider library that reads arguments is handed the text they arrived
/// in, when the caller has it, on both paths; without it, their
/// serialisation.
#[test]
fn the_arguments_text_a_call_arrived_with_is_handed_on() {
    let guardrail = guardrail(&format!(
        "guardrails:\n  enabled: true\n  provider:\n    use: {}:ArgsTextProvider\n",
        test_providers()
    ));
    let middleware = &guardrail.middleware;
    assert!(middleware.reads_tool_input());
    let call = tool_call("bash", json!({"command": "ls", "n": 1.5}));
    let text = r#"{ "command" : "ls",   "n": 1.50 }"#;
    let message = |decision: GuardrailDecision| decision.reasons[0].message.to_string();
    assert_eq!(message(middleware.decide_with_args_text(&call, Some(text)).unwrap().0), text);
    let asynchronous = guardhost::block_on(middleware.adecide_with_args_text(&call, Some(text))).unwrap().0;
    assert_eq!(message(asynchronous), text);
    assert_eq!(message(middleware.decide(&call).unwrap().0), r#"{"command":"ls","n":1.5}"#);
}
