//! DeerFlow's `authorization:` section: the RBAC provider (built in, under
//! DeerFlow's class path, and as a library loaded with `dlopen`), the
//! adapter's request mapping, the order (authorization, then guardrails),
//! `infrastructure_tools`, and the tool filter. The cases restate
//! DeerFlow's tests of the adapter and of the layer-1 filter.

use std::path::Path;

use guardhost::{install, ConfigOrigin, GuardKind, Guardrail, LoadedConfig, ToolCallRequest};
use guardhost_test_support::{library, object, tool_call};
use serde_json::{json, Value};

/// DeerFlow's `config.example.yaml` authorization block, enabled.
const DEERFLOW_EXAMPLE: &str = "
authorization:
  enabled: true
  fail_closed: true            # block on provider error / unresolved identity
  default_role: user           # applied when user_role is None; built-in RBAC requires this role below
  provider:
    use: deerflow.authz.rbac:RbacAuthorizationProvider
    config:
      roles:
        admin:
          tools: {allow: \"*\"}
          routes: {allow: \"*\"}
          models: {allow: \"*\"}
        user:
          tools: {allow: \"*\", deny: [\"update_agent\"]}
          routes: {allow: \"*\"}
          models: {allow: \"*\"}
        guest:
          tools: {allow: [\"web_search\", \"read_file\"]}
          routes: {allow: [\"threads:read\", \"runs:read\"]}
          models: {allow: [\"gpt-4o-mini\"]}
";

fn config(yaml: &str) -> Result<LoadedConfig, guardhost::ConfigError> {
    guardhost_builtins::register();
    LoadedConfig::from_yaml(yaml, Path::new("/").into(), ConfigOrigin::Embedded, |_| None)
}

fn guardrail(yaml: &str) -> Guardrail {
    install(&config(yaml).unwrap()).unwrap().expect("a guardrail")
}

fn lib(name: &str) -> String {
    library(name).display().to_string()
}

fn call(tool: &str, context: Value) -> ToolCallRequest {
    tool_call(tool, json!({})).with_context(object(context))
}

fn decide(guardrail: &Guardrail, tool: &str, context: Value) -> guardhost::GuardrailDecision {
    let call = call(tool, context);
    let sync = guardrail.middleware.decide(&call).unwrap().0;
    let asynchronous = guardhost::block_on(guardrail.middleware.adecide(&call)).unwrap().0;
    assert_eq!(sync.reasons, asynchronous.reasons, "{tool}");
    sync
}

fn code(decision: &guardhost::GuardrailDecision) -> &str {
    &decision.reasons[0].code
}

#[test]
fn deerflows_example_loads_and_decides_alone() {
    let guardrail = guardrail(DEERFLOW_EXAMPLE);
    let guards = guardrail.middleware.guards();
    assert_eq!(
        (guards.len(), guards[0].kind(), guards[0].name()),
        (1, GuardKind::Authorization, "authorization")
    );
    assert_eq!(guardrail.info.name, "rbac");
    // No `user_role`: the default role, `user`, may not update agents.
    let denied = decide(&guardrail, "update_agent", json!({}));
    assert!(!denied.allow);
    assert_eq!(code(&denied), "authz.denied");
    assert_eq!(denied.reasons[0].message, "role 'user' is denied 'update_agent' on resource 'tool'");
    assert_eq!(denied.policy_id.as_deref(), Some("rbac:deny"));
    let message = guardhost::denied_message(&call("update_agent", json!({})).tool_call, &denied);
    assert_eq!(
        message.content,
        "Guardrail denied: tool 'update_agent' was blocked (authz.denied). Reason: role 'user' is denied \
         'update_agent' on resource 'tool'. Choose an alternative approach."
    );
    assert!(decide(&guardrail, "bash", json!({})).allow);
    // An empty role is no role.
    assert!(!decide(&guardrail, "update_agent", json!({"user_role": ""})).allow);
    let guest = json!({"user_role": "guest"});
    assert!(!decide(&guardrail, "bash", guest.clone()).allow);
    let allowed = decide(&guardrail, "web_search", guest);
    assert_eq!(
        (allowed.allow, code(&allowed), allowed.policy_id.as_deref()),
        (true, "authz.allowed", Some("rbac:allow"))
    );
    assert!(decide(&guardrail, "update_agent", json!({"user_role": "admin"})).allow);
}

#[test]
fn an_unknown_role_is_an_error_that_fail_closed_decides() {
    let closed = guardrail(DEERFLOW_EXAMPLE);
    let call = call("web_search", json!({"user_role": "editor"}));
    let (decision, provider_error) = closed.middleware.decide(&call).unwrap();
    assert!(!decision.allow && provider_error);
    assert_eq!(code(&decision), "oap.evaluator_error");
    let open = guardrail(&DEERFLOW_EXAMPLE.replace("fail_closed: true ", "fail_closed: false"));
    let (decision, provider_error) = open.middleware.decide(&call).unwrap();
    assert!(decision.allow && provider_error);
}

#[test]
fn authorization_is_asked_first_and_a_denial_stops_there() {
    // The guardrail fails every call it sees, failing closed: a call the
    // authorization layer denies is answered with its own reason, so the
    // guardrail was never asked.
    let yaml = format!(
        "{DEERFLOW_EXAMPLE}\nguardrails:\n  enabled: true\n  provider:\n    use: {}:ErroringProvider\n",
        lib("guardhost_test_providers")
    );
    let guardrail = guardrail(&yaml);
    let kinds: Vec<GuardKind> = guardrail.middleware.guards().iter().map(|g| g.kind()).collect();
    assert_eq!(kinds, [GuardKind::Authorization, GuardKind::Guardrail]);
    assert_eq!(guardrail.info.name, "erroring", "the guardrail section's provider");
    let denied = decide(&guardrail, "update_agent", json!({}));
    assert_eq!(
        (code(&denied), denied.metadata["decided_by"].as_str()),
        ("authz.denied", Some("authorization"))
    );
    let next = decide(&guardrail, "bash", json!({}));
    assert_eq!(
        (code(&next), next.metadata["decided_by"].as_str()),
        ("oap.evaluator_error", Some("erroring"))
    );
}

#[test]
fn both_sections_behave_as_deerflows_two_middlewares() {
    let yaml = format!(
        "{DEERFLOW_EXAMPLE}\nguardrails:\n  enabled: true\n  provider:\n    use: builtin:AllowlistProvider\n    config: {{denied_tools: [bash]}}\n"
    );
    let guardrail = guardrail(&yaml);
    let guest = json!({"user_role": "guest"});
    assert_eq!(code(&decide(&guardrail, "bash", guest.clone())), "authz.denied");
    assert_eq!(code(&decide(&guardrail, "bash", json!({"user_role": "admin"}))), "oap.tool_not_allowed");
    assert!(decide(&guardrail, "read_file", guest).allow);
    // The guardrails' warn mode does not soften the authorization layer.
    let warn = guardrail_with_mode(&yaml, "warn");
    assert!(!decide(&warn, "update_agent", json!({})).allow);
    assert!(decide(&warn, "bash", json!({"user_role": "admin"})).allow);
}

fn guardrail_with_mode(yaml: &str, mode: &str) -> Guardrail {
    guardrail(&yaml.replace(
        "guardrails:\n  enabled: true\n",
        &format!("guardrails:\n  enabled: true\n  mode: {mode}\n"),
    ))
}

#[test]
fn the_adapter_asks_with_the_callers_role_and_no_passport() {
    let yaml = format!(
        "authorization:\n  enabled: true\n  default_role: member\n  provider:\n    use: {lib}:CapturingProvider\n\
         guardrails:\n  enabled: true\n  passport: agent-7\n  provider:\n    use: {lib}:CapturingProvider\n",
        lib = lib("guardhost_test_providers")
    );
    let guardrail = guardrail(&yaml);
    let context =
        json!({"user_id": "u1", "thread_id": "t1", "authz_attributes": {"team": "a"}, "is_internal": true});
    let call = call("web_search", context);
    let verdict_of = |index: usize| {
        let guard = &guardrail.middleware.guards()[index];
        let view_call = call.clone();
        let view =
            guardhost::CallView::new(&view_call, &view_call.tool_call.args, guard.passport(), "now").unwrap();
        guard.provider().evaluate(&view.to_request()).unwrap().metadata
    };
    let authorization = verdict_of(0);
    assert_eq!(authorization["user_role"], "member", "the default role");
    assert_eq!(authorization["agent_id"], Value::Null, "DeerFlow's authorization middleware has no passport");
    assert_eq!(
        (authorization["user_id"].as_str(), authorization["is_internal"].as_bool()),
        (Some("u1"), Some(true))
    );
    assert_eq!(authorization["authz_attributes"], json!({"team": "a"}));
    let guardrails = verdict_of(1);
    assert_eq!(
        (guardrails["user_role"].clone(), guardrails["agent_id"].as_str()),
        (Value::Null, Some("agent-7"))
    );
    // An unknown role is kept, not replaced.
    let own = guardhost::CallView::new(&call, &call.tool_call.args, None, "now").unwrap();
    let mut with_role = call.clone();
    with_role.context.as_mut().unwrap().insert("user_role".into(), json!("editor"));
    let view = guardhost::CallView::new(&with_role, &with_role.tool_call.args, None, "now").unwrap();
    let provider = guardrail.middleware.guards()[0].provider();
    assert_eq!(provider.evaluate(&view.to_request()).unwrap().metadata["user_role"], "editor");
    assert_eq!(guardhost::evaluate_call(&**provider, &own).unwrap().metadata["user_role"], "member");
}

#[test]
fn infrastructure_tools_pass_unasked() {
    let yaml = format!(
        "authorization:\n  enabled: true\n  infrastructure_tools: [tool_search]\n  provider:\n    use: {}:DenyAllProvider\n",
        lib("guardhost_test_providers")
    );
    let guardrail = guardrail(&yaml);
    let search = decide(&guardrail, "tool_search", json!({}));
    assert_eq!((search.allow, code(&search)), (true, "authz.infrastructure_tool"));
    assert_eq!(search.policy_id.as_deref(), Some("authz:infrastructure"));
    assert!(!decide(&guardrail, "tool_searcher", json!({})).allow, "exact names only");
}

#[test]
fn the_rbac_library_decides_as_the_builtin_does() {
    let yaml = DEERFLOW_EXAMPLE.replace(
        "deerflow.authz.rbac:RbacAuthorizationProvider",
        &format!("{}:RbacAuthorizationProvider", lib("guardhost_rbac")),
    );
    let library = guardrail(&yaml);
    let builtin = guardrail(&DEERFLOW_EXAMPLE.replace("deerflow.authz.rbac:", "builtin:"));
    assert!(matches!(library.info.source, guardhost::ProviderSource::Library { .. }));
    for (tool, role) in
        [("update_agent", "user"), ("bash", "guest"), ("read_file", "guest"), ("bash", "admin")]
    {
        let context = json!({"user_role": role});
        assert_eq!(
            decide(&library, tool, context.clone()),
            decide(&builtin, tool, context),
            "{tool} as {role}"
        );
    }
}

#[test]
fn sections_that_cannot_work_are_refused_in_deerflows_words() {
    let no_provider = config("authorization:\n  enabled: true\n").unwrap_err().to_string();
    assert!(
        no_provider.contains(
            "authorization.enabled is true but no provider is configured; set authorization.provider.use"
        ),
        "{no_provider}"
    );
    let bad_default =
        install(&config(&DEERFLOW_EXAMPLE.replace("default_role: user", "default_role: visitor")).unwrap())
            .unwrap_err()
            .to_string();
    assert_eq!(
        bad_default,
        "Invalid authorization default_role for provider 'deerflow.authz.rbac:RbacAuthorizationProvider': \
         authorization.default_role 'visitor' is not defined; known roles: ['admin', 'guest', 'user']"
    );
    let typo = install(
        &config(&DEERFLOW_EXAMPLE.replace("deny: [\"update_agent\"]", "denny: [\"update_agent\"]")).unwrap(),
    )
    .unwrap_err()
    .to_string();
    assert!(typo.starts_with("`authorization.provider`: provider 'rbac' rejected its config: role 'user' resource 'tools': unknown policy keys ['denny']"), "{typo}");
    let chain_key =
        config("authorization:\n  provider: {use: builtin:RbacAuthorizationProvider, tools: [bash]}\n")
            .unwrap_err()
            .to_string();
    assert!(chain_key.contains("`provider.tools` is a key of a `guardrails:` chain entry"), "{chain_key}");
    let unknown = config("authorization:\n  enabled: true\n  defualt_role: x\n").unwrap_err().to_string();
    assert!(unknown.contains("unknown field `defualt_role`"), "{unknown}");
}

#[test]
fn disabled_or_absent_authorization_installs_nothing_of_its_own() {
    let off = config(&DEERFLOW_EXAMPLE.replace("enabled: true", "enabled: false")).unwrap();
    assert!(install(&off).unwrap().is_none());
    assert!(off.require_guardrail().is_err());
    let on = config(DEERFLOW_EXAMPLE).unwrap();
    assert!(on.require_guardrail().is_ok(), "an authorization guard guards");
}

#[test]
fn the_filter_hides_what_a_caller_may_never_use() {
    let guardrail = guardrail(DEERFLOW_EXAMPLE);
    let tools = ["bash", "web_search", "write_file", "read_file", "read_file"];
    let guest = object(json!({"user_role": "guest"}));
    assert_eq!(
        guardrail.filter_tools(Some(&guest), &tools).unwrap(),
        ["web_search", "read_file", "read_file"]
    );
    let user = guardrail.filter_tools(None, &["bash", "update_agent", "read_file"]).unwrap();
    assert_eq!(user, ["bash", "read_file"], "the default role");
    // A provider error (an unknown role) hides everything, failing closed.
    let editor = object(json!({"user_role": "editor"}));
    assert!(guardrail.filter_tools(Some(&editor), &tools).unwrap().is_empty());
    let open = guardrail_open();
    assert_eq!(open.filter_tools(Some(&editor), &tools).unwrap(), tools);
    let error = guardrail.filter_tools(None, &["bash", ""]).unwrap_err().to_string();
    assert_eq!(error, "candidates[1] must be a non-empty string, got ''");
    // Without an authorization section every tool is seen.
    let plain = self::guardrail("guardrails:\n  enabled: true\n  provider: {use: builtin:AllowlistProvider, config: {denied_tools: [bash]}}\n");
    assert_eq!(plain.filter_tools(None, &["bash", "read_file"]).unwrap(), ["bash", "read_file"]);
}

fn guardrail_open() -> Guardrail {
    guardrail(&DEERFLOW_EXAMPLE.replace("fail_closed: true ", "fail_closed: false"))
}
