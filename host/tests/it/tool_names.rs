//! Tool names the host refuses (`guardhost.tool_name_invalid`): a name
//! with an invisible character or white space at an end is denied before
//! any provider is asked, on every path into the decision, under real
//! configs (DeerFlow's RBAC `deny`, the approvals provider's `ask`, built
//! in and loaded as libraries), and the tool filter never lists it.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use guardhost::tool_name::INVALID_CODE;
use guardhost::StepAnswer;
use guardhost::{
    install, AuditAction, ConfigOrigin, Guardrail, GuardrailDecision, LoadedConfig, MemoryAuditSink,
    ToolCallError, ToolCallRequest,
};
use guardhost_test_support::{library, object, tool_call};
use serde_json::{json, Value};

/// The names an attacker sends for `bash`, and the code point each
/// denial must name instead of showing it.
const DISGUISED: [(&str, &str); 4] =
    [("bash\u{200B}", "U+200B"), ("bash\u{0}", "U+0000"), ("bash ", "U+0020"), (" bash", "U+0020")];

fn guardrail(yaml: &str) -> Guardrail {
    guardhost_builtins::register();
    let config =
        LoadedConfig::from_yaml(yaml, Path::new("/").into(), ConfigOrigin::Embedded, |_| None).unwrap();
    install(&config).unwrap().expect("a guardrail")
}

/// DeerFlow's RBAC in the `authorization:` section, `bash` denied to
/// every role and every other tool allowed, with a guardrail behind it
/// that denies every call of a name holding `bash` it is asked about (so a
/// decision that is neither `authz.*` nor `test.denied` was made before
/// either was asked): RBAC loaded `how` (`builtin` or `library`).
fn rbac_deny(how: &str) -> Guardrail {
    let rbac = match how {
        "builtin" => "deerflow.authz.rbac:RbacAuthorizationProvider".to_owned(),
        _ => format!("{}:RbacAuthorizationProvider", library("guardhost_rbac").display()),
    };
    guardrail(&format!(
        "authorization:
  enabled: true
  default_role: user
  provider:
    use: {rbac}
    config:
      roles:
        user: {{tools: {{allow: '*', deny: [bash]}}}}
guardrails:
  enabled: true
  providers:
    - use: {}:DenyAllProvider
      name: deny-all
      tools: ['*bash*']
",
        library("guardhost_test_providers").display()
    ))
}

/// The approvals provider holding every `bash` call for approval, loaded
/// `how`.
fn approvals_ask(how: &str) -> Guardrail {
    let approvals = match how {
        "builtin" => "builtin:ApprovalGuardrailProvider".to_owned(),
        _ => format!("{}:ApprovalGuardrailProvider", library("guardhost_approvals").display()),
    };
    guardrail(&format!(
        "guardrails:
  enabled: true
  provider:
    use: {approvals}
    config:
      ask: [bash]
      approvers: [admin]
"
    ))
}

fn configs() -> Vec<(String, Guardrail)> {
    ["builtin", "library"]
        .into_iter()
        .flat_map(|how| {
            [
                (format!("rbac deny ({how})"), rbac_deny(how)),
                (format!("approvals ask ({how})"), approvals_ask(how)),
            ]
        })
        .collect()
}

fn call(tool: &str) -> ToolCallRequest {
    tool_call(tool, json!({"command": "id"}))
        .with_id("call-1")
        .with_context(object(json!({"thread_id": "t-1", "user_id": "u-1"})))
}

/// The decision on every way into the engine (`decide`, `adecide`,
/// `check`, `acheck`, `explain`, `adecide_with`), which must agree; and
/// how many evaluations `adecide_with` handed out.
fn decided_every_way(guardrail: &Guardrail, call: &ToolCallRequest) -> (GuardrailDecision, usize) {
    let middleware = &guardrail.middleware;
    let sync = middleware.decide(call).unwrap().0;
    let asynchronous = guardhost::block_on(middleware.adecide(call)).unwrap().0;
    let checked = middleware.check(call).unwrap().decision;
    let achecked = guardhost::block_on(middleware.acheck(call)).unwrap().decision;
    let explained = middleware.explain(call).unwrap().decision;
    let handed = AtomicUsize::new(0);
    let with = guardhost::block_on(middleware.adecide_with(call, |evaluation| {
        handed.fetch_add(1, Ordering::SeqCst);
        std::future::ready(evaluation.run())
    }))
    .unwrap()
    .0;
    for other in [&asynchronous, &checked, &achecked, &explained, &with] {
        assert_eq!(other.allow, sync.allow);
        assert_eq!(other.reasons[0].code, sync.reasons[0].code);
    }
    (sync, handed.into_inner())
}

#[test]
fn disguised_names_are_refused_before_any_provider_on_every_path() {
    for (config, guardrail) in configs() {
        // The real name is what the policy says of it: denied, or held.
        let (plain, handed) = decided_every_way(&guardrail, &call("bash"));
        assert!(!plain.allow, "{config}");
        assert!(["authz.denied", "approvals.ask"].contains(&&*plain.reasons[0].code), "{config}: {plain:?}");
        assert!(handed >= 1, "{config}");
        for (name, code_point) in DISGUISED {
            let (decision, handed) = decided_every_way(&guardrail, &call(name));
            assert!(!decision.allow, "{config} {name:?}");
            assert_eq!(decision.reasons.len(), 1);
            assert_eq!(decision.reasons[0].code, INVALID_CODE, "{config} {name:?}: {decision:?}");
            assert_eq!(handed, 0, "{config} {name:?}: a provider was handed the call");
            assert!(decision.metadata.get("decided_by").is_none());
            let message = &decision.reasons[0].message;
            assert!(message.contains(code_point), "{message}");
            assert!(message.contains("call the tool by its name"), "{message}");
            assert!(!message.contains(['\u{200B}', '\0']), "{message:?}");
        }
    }
}

#[test]
fn the_wrapping_paths_answer_a_disguised_name_with_a_denial_the_agent_can_read() {
    for (config, guardrail) in configs() {
        for (name, code_point) in DISGUISED {
            let never = |_: ToolCallRequest| -> guardhost::ToolResult { panic!("{config}: {name:?} ran") };
            let sync = guardrail.middleware.wrap_tool_call(call(name), &never).unwrap();
            let asynchronous = guardhost::block_on(guardrail.middleware.awrap_tool_call(
                call(name),
                guardhost::async_handler(|_| async { panic!("a disguised name ran") }),
            ))
            .unwrap();
            assert_eq!(sync, asynchronous, "{config}");
            assert_eq!(sync.status, guardhost::ToolStatus::Error);
            assert_eq!(sync.name.as_deref(), Some(name), "the message answers the call it was");
            assert!(
                sync.content.contains("was blocked (guardhost.tool_name_invalid). Reason: tool name '"),
                "{}",
                sync.content
            );
            assert!(sync.content.contains(code_point), "{}", sync.content);
            assert!(!sync.content.contains(['\u{200B}', '\0']), "{:?}", sync.content);
        }
        // Not held for approval, as `bash` itself would be.
        let never = |_: ToolCallRequest| -> guardhost::ToolResult { panic!("bash ran") };
        match guardrail.middleware.wrap_tool_call(call("bash"), &never) {
            Ok(message) => assert!(message.content.contains("(authz.denied)"), "{config}"),
            Err(ToolCallError::ApprovalRequired { .. }) => assert!(config.starts_with("approvals")),
            Err(other) => panic!("{config}: {other}"),
        }
    }
    let message = guardrail_message("bash\u{200B}");
    assert_eq!(
        message,
        "Guardrail denied: tool 'bash<U+200B>' was blocked (guardhost.tool_name_invalid). Reason: tool \
         name 'bash<U+200B>' is invalid: the tool name has U+200B (an invisible format character) at \
         character 5 of 5; a tool name must not be empty, start or end with white space, or hold \
         control, format or other invisible characters; call the tool by its name without U+200B. \
         Choose an alternative approach."
    );
}

fn guardrail_message(name: &str) -> String {
    let never = |_: ToolCallRequest| -> guardhost::ToolResult { panic!("ran") };
    rbac_deny("builtin").middleware.wrap_tool_call(call(name), &never).unwrap().content
}

#[test]
fn explain_shows_no_entry_asked() {
    let guardrail = rbac_deny("builtin");
    let explained = guardrail.middleware.explain(&call("bash\u{200B}")).unwrap();
    assert_eq!(explained.decision.reasons[0].code, INVALID_CODE);
    assert_eq!(explained.steps.len(), 2);
    assert!(explained.steps.iter().all(|s| matches!(s.answer, StepAnswer::NotAsked)), "{explained:?}");
    let plain = guardrail.middleware.explain(&call("bash")).unwrap();
    assert!(matches!(plain.steps[0].answer, StepAnswer::Asked { .. }), "{plain:?}");
}

#[test]
fn a_refusal_is_audited_and_logged_as_the_host_s() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("decisions.jsonl");
    let guardrail = guardrail(&format!(
        "guardrails:
  enabled: true
  mode: warn
  provider:
    use: builtin:ApprovalGuardrailProvider
    config: {{ask: [bash]}}
  decision_log: {{path: {}}}
",
        log.display()
    ));
    let sink = Arc::new(MemoryAuditSink::new());
    let middleware = guardrail.middleware.clone().with_audit_sink(sink.clone());
    // `warn` mode lets a provider's denial run; it never lets this one.
    let (decision, _) = middleware.decide(&call("bash\u{0}")).unwrap();
    assert!(!decision.allow);
    assert_eq!(decision.reasons[0].code, INVALID_CODE);
    let events = sink.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].action, AuditAction::DenyToolCall);
    assert_eq!(events[0].provider.name, "none");
    assert_eq!(events[0].changes.reason_codes, [INVALID_CODE]);
    assert_eq!(events[0].tool_call_id.as_deref(), Some("call-1"));
    middleware.decision_log().unwrap().flush();
    let text = std::fs::read_to_string(&log).unwrap();
    let entry: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(entry["provider"], "none", "{entry}");
    assert_eq!(entry["outcome"], "deny", "{entry}");
    assert_eq!(entry["reason_codes"], json!([INVALID_CODE]), "{entry}");
}

#[test]
fn the_filter_never_lists_a_disguised_name() {
    let tools = ["bash\u{200B}", "read_file", "bash ", "web.search", " bash", "bash\u{0}", "résumé"];
    let rbac = rbac_deny("library");
    assert_eq!(rbac.filter_tools(None, &tools).unwrap(), ["read_file", "web.search", "résumé"]);
    // Failing open on a provider error lists every tool: every valid one.
    let open = guardrail(
        "authorization:
  enabled: true
  fail_closed: false
  default_role: user
  provider:
    use: deerflow.authz.rbac:RbacAuthorizationProvider
    config: {roles: {user: {tools: {allow: '*'}}}}
",
    );
    let editor = object(json!({"user_role": "editor"}));
    assert_eq!(open.filter_tools(Some(&editor), &tools).unwrap(), ["read_file", "web.search", "résumé"]);
    // Without an authorization section every tool may be used but these.
    let plain = approvals_ask("builtin");
    assert_eq!(plain.filter_tools(None, &tools).unwrap(), ["read_file", "web.search", "résumé"]);
    // An empty name is still an error of the list, as in DeerFlow.
    let error = plain.filter_tools(None, &["bash\u{200B}", ""]).unwrap_err().to_string();
    assert_eq!(error, "candidates[1] must be a non-empty string, got ''");
}
