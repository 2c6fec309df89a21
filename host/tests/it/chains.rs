//! `guardrails.providers`: a chain of real providers (the built-in
//! allowlist, scripted provider libraries loaded with `dlopen`), from
//! YAML, through the middleware's sync, async and borrowed-view paths.

use std::path::Path;
use std::sync::Arc;

use guardhost::{
    install, ConfigOrigin, Guardrail, GuardrailDecision, LoadedConfig, MemoryAuditSink, Mode, ToolCallError,
    ToolCallRequest, ToolStatus,
};
use guardhost_test_support::{library, ran_handler, tool_call};
use serde_json::{json, Value};

fn lib() -> String {
    library("guardhost_test_providers").display().to_string()
}

fn config(yaml: &str) -> Result<LoadedConfig, guardhost::ConfigError> {
    guardhost_builtins::register();
    LoadedConfig::from_yaml(yaml, Path::new("/").into(), ConfigOrigin::Embedded, |_| None)
}

fn guardrail(yaml: &str) -> Guardrail {
    install(&config(yaml).unwrap()).unwrap().expect("a guardrail")
}

/// A chain: the allowlist for every tool, a deny-all for writes only.
fn chain(extra: &str) -> String {
    format!(
        "guardrails:
  enabled: true
  providers:
    - use: builtin:AllowlistProvider
      config: {{denied_tools: [bash]}}
    - use: {lib}:DenyAllProvider
      name: no-writes
      tools: ['write_*', edit_file]
      except_tools: [write_todos]
{extra}",
        lib = lib()
    )
}

fn decided(guardrail: &Guardrail, tool: &str) -> (GuardrailDecision, bool) {
    let call = tool_call(tool, json!({"path": "/tmp/x"}));
    let sync = guardrail.middleware.decide(&call).unwrap();
    let asynchronous = guardhost::block_on(guardrail.middleware.adecide(&call)).unwrap();
    let checked = guardrail.middleware.check(&call).unwrap();
    assert_eq!((sync.0.allow, &sync.0.reasons), (asynchronous.0.allow, &asynchronous.0.reasons), "{tool}");
    assert_eq!(
        (sync.0.allow, &sync.0.reasons),
        (checked.decision.allow, &checked.decision.reasons),
        "{tool}"
    );
    sync
}

fn decided_by(decision: &GuardrailDecision) -> Option<&str> {
    decision.metadata.get("decided_by").and_then(Value::as_str)
}

#[test]
fn the_first_denial_wins_and_names_its_entry() {
    let guardrail = guardrail(&chain(""));
    assert_eq!(guardrail.middleware.guards().len(), 2);
    let (bash, _) = decided(&guardrail, "bash");
    assert!(!bash.allow);
    assert_eq!(bash.reasons[0].code, "oap.tool_not_allowed");
    assert_eq!(decided_by(&bash), Some("allowlist"));
    let (write, _) = decided(&guardrail, "write_file");
    assert!(!write.allow);
    assert_eq!(decided_by(&write), Some("no-writes"));
    for tool in ["write_todos", "read_file"] {
        let (allowed, error) = decided(&guardrail, tool);
        assert!(allowed.allow && !error, "{tool}");
        assert_eq!(decided_by(&allowed), Some("allowlist"), "{tool}: the last entry asked");
    }
}

#[test]
fn a_denied_call_never_reaches_later_entries() {
    // The second entry fails every call it sees; fail_closed would deny
    // with `oap.evaluator_error`.
    let yaml = format!(
        "guardrails:
  enabled: true
  providers:
    - use: builtin:AllowlistProvider
      config: {{denied_tools: [bash]}}
    - use: {}:ErroringProvider
",
        lib()
    );
    let guardrail = guardrail(&yaml);
    let (bash, error) = decided(&guardrail, "bash");
    assert_eq!((bash.reasons[0].code.as_ref(), error), ("oap.tool_not_allowed", false));
    let (read, error) = decided(&guardrail, "read_file");
    assert_eq!((read.allow, read.reasons[0].code.as_ref(), error), (false, "oap.evaluator_error", true));
    assert_eq!(decided_by(&read), Some("erroring"));
}

#[test]
fn each_entry_has_its_own_fail_closed() {
    let yaml = format!(
        "guardrails:
  enabled: true
  fail_closed: true
  providers:
    - use: {}:ErroringProvider
      fail_closed: false
    - use: builtin:AllowlistProvider
      config: {{denied_tools: [bash]}}
",
        lib()
    );
    let guardrail = guardrail(&yaml);
    // The failing entry lets the call go on; the allowlist still decides.
    let (bash, error) = decided(&guardrail, "bash");
    assert_eq!((bash.allow, bash.reasons[0].code.as_ref(), error), (false, "oap.tool_not_allowed", false));
    // Allowed: the fail-open error is what is reported.
    let (read, error) = decided(&guardrail, "read_file");
    assert!(read.allow && error);
    assert_eq!(read.reasons[0].message, "guardrail provider error (fail-open)");
    assert_eq!(decided_by(&read), Some("erroring"));
}

#[test]
fn a_call_no_entry_selects_runs_and_says_so() {
    let yaml = format!(
        "guardrails:
  enabled: true
  providers:
    - use: {}:DenyAllProvider
      tools: [bash]
",
        lib()
    );
    let guardrail = guardrail(&yaml);
    assert!(!decided(&guardrail, "bash").0.allow);
    let (read, _) = decided(&guardrail, "read_file");
    assert!(read.allow);
    assert_eq!(read.reasons[0].code, "guardhost.not_selected");
    assert_eq!(decided_by(&read), None);
}

#[test]
fn the_one_provider_form_is_unchanged() {
    let guardrail = guardrail(
        "guardrails:\n  enabled: true\n  provider:\n    use: builtin:AllowlistProvider\n    config: {denied_tools: [bash]}\n",
    );
    assert!(!guardrail.middleware.is_chain());
    let (bash, _) = decided(&guardrail, "bash");
    assert!(bash.metadata.is_empty(), "no decided_by: {:?}", bash.metadata);
    // `tools:` on the one provider makes it a chain of one.
    let selecting = guardrail_with_tools();
    assert!(selecting.middleware.is_chain());
    assert!(decided(&selecting, "read_file").0.allow);
}

fn guardrail_with_tools() -> Guardrail {
    guardrail(&format!(
        "guardrails:\n  enabled: true\n  provider:\n    use: {}:DenyAllProvider\n    tools: [bash]\n",
        lib()
    ))
}

#[test]
fn wrapped_calls_run_or_are_denied_by_the_chain() {
    let guardrail = guardrail(&chain(""));
    let middleware = &guardrail.middleware;
    let run = |tool: &str| {
        let call = tool_call(tool, json!({"content": "x"})).with_id("c1");
        let sync = middleware.wrap_tool_call(call.clone(), &|c| ran_handler_sync(c)).unwrap();
        let asynchronous = guardhost::block_on(middleware.awrap_tool_call(call, ran_handler())).unwrap();
        assert_eq!(sync.status, asynchronous.status);
        sync
    };
    let denied = run("write_file");
    assert_eq!(denied.status, ToolStatus::Error);
    assert!(
        denied.content.starts_with("Guardrail denied: tool 'write_file' was blocked"),
        "{}",
        denied.content
    );
    assert_eq!(run("read_file").status, ToolStatus::Success);
}

fn ran_handler_sync(call: ToolCallRequest) -> guardhost::ToolResult {
    Ok(guardhost::ToolMessage {
        content: "ran".into(),
        tool_call_id: call.tool_call.id.unwrap_or_default(),
        name: call.tool_call.name,
        status: ToolStatus::Success,
    })
}

#[test]
fn warn_mode_shadows_each_entry_and_asks_the_next() {
    let guardrail = guardrail(&chain("  mode: warn\n"));
    // The allowlist would deny bash; the call runs, the next entry is
    // not one that selects bash.
    let (bash, _) = decided(&guardrail, "bash");
    assert!(bash.allow && bash.metadata.contains_key("would_deny"));
    assert_eq!(decided_by(&bash), Some("allowlist"));
    let (write, _) = decided(&guardrail, "write_file");
    assert!(write.allow);
    assert_eq!(decided_by(&write), Some("no-writes"));
}

#[test]
fn an_entry_runs_in_its_own_mode_beside_enforcing_ones() {
    // The allowlist in shadow, the deny-all for writes enforcing.
    let yaml = chain("").replace(
        "      config: {denied_tools: [bash]}\n",
        "      config: {denied_tools: [bash]}\n      mode: observe\n",
    );
    let guardrail = guardrail(&yaml);
    let modes: Vec<_> = guardrail.middleware.guards().iter().map(|g| g.mode()).collect();
    assert_eq!(modes, [Mode::Observe, Mode::Enforce]);
    let (bash, _) = decided(&guardrail, "bash");
    assert!(bash.allow && bash.metadata.contains_key("would_deny"), "{bash:?}");
    assert_eq!(decided_by(&bash), Some("allowlist"));
    let (write, _) = decided(&guardrail, "write_file");
    assert!(!write.allow, "the enforcing entry still blocks");
    assert_eq!(decided_by(&write), Some("no-writes"));
    // An entry's own mode wins over the section's, either way.
    let yaml = chain("  mode: warn\n")
        .replace("      name: no-writes\n", "      name: no-writes\n      mode: enforce\n");
    let modes: Vec<_> = guardrail_modes(&yaml);
    assert_eq!(modes, [Mode::Warn, Mode::Enforce]);
    // The authorization provider has no mode of its own.
    let yaml = "authorization:\n  enabled: true\n  provider:\n    use: builtin:RbacAuthorizationProvider\n    mode: warn\n    config: {roles: {user: {tools: {allow: '*'}}}}\n";
    let error = config(yaml).unwrap_err().to_string();
    assert!(error.contains("`provider.mode` is a key of a `guardrails:` chain entry"), "{error}");
}

fn guardrail_modes(yaml: &str) -> Vec<Mode> {
    guardrail(yaml).middleware.guards().iter().map(|g| g.mode()).collect()
}

#[test]
fn an_entry_is_named_at_one_place_in_every_message() {
    // Read, built and described: `guardrails.providers[N]`, counting from 0.
    let unread = "guardrails:\n  enabled: true\n  providers:\n    - use: builtin:AllowlistProvider\n    - use: builtin:AllowlistProvider\n      timeout_ms: soon\n";
    let error = config(unread).unwrap_err().to_string();
    assert!(error.contains("`providers[1].timeout_ms`"), "{error}");
    let invalid = "guardrails:\n  enabled: true\n  providers:\n    - use: builtin:AllowlistProvider\n    - use: builtin:AllowlistProvider\n      name: second\n      tools: ['']\n";
    let error = config(invalid).unwrap_err().to_string();
    assert!(
        error.contains("`guardrails.providers[1]` ('second'): `provider.tools` holds an empty pattern"),
        "{error}"
    );
    let guardrail = guardrail(&chain(""));
    let places: Vec<_> =
        guardrail.described().map(|d| (d.name.to_owned(), d.written.place.clone())).collect();
    assert_eq!(
        places,
        [
            ("allowlist".to_owned(), "guardrails.providers[0]".to_owned()),
            ("no-writes".to_owned(), "guardrails.providers[1]".to_owned())
        ]
    );
    assert_eq!(guardrail.described().nth(1).unwrap().label(), "'no-writes' (guardrails.providers[1])");
}

#[test]
fn an_interrupt_from_any_entry_is_handed_on() {
    let yaml = format!(
        "guardrails:\n  enabled: true\n  providers:\n    - use: builtin:AllowlistProvider\n    - use: {}:InterruptingProvider\n",
        lib()
    );
    let guardrail = guardrail(&yaml);
    let error = guardrail.middleware.decide(&tool_call("read_file", json!({}))).unwrap_err();
    assert!(matches!(error, ToolCallError::Interrupt(_)), "{error:?}");
}

#[test]
fn audit_events_name_the_entry_that_denied() {
    let guardrail = guardrail(&chain(""));
    let sink = Arc::new(MemoryAuditSink::new());
    let middleware = guardrail.middleware.clone().with_audit_sink(sink.clone());
    middleware.decide(&tool_call("write_file", json!({}))).unwrap();
    middleware.decide(&tool_call("bash", json!({}))).unwrap();
    let providers: Vec<String> = sink.events().into_iter().map(|e| e.provider.name).collect();
    assert_eq!(providers, ["deny-all", "allowlist"]);
}

#[test]
fn the_decision_log_shows_every_entry_asked() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("decisions.jsonl");
    let guardrail = guardrail(&chain(&format!("  decision_log: {{path: {}}}\n", log.display())));
    guardrail.middleware.decide(&tool_call("write_file", json!({}))).unwrap();
    guardrail.middleware.decision_log().unwrap().flush();
    let text = std::fs::read_to_string(&log).unwrap();
    let entry: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(entry["decided_by"], "no-writes");
    assert_eq!(entry["provider"], "deny-all");
    assert_eq!(
        entry["chain"],
        json!([
            {"entry": "allowlist", "outcome": "allow", "code": "oap.allowed"},
            {"entry": "no-writes", "outcome": "deny", "code": "test.denied"}
        ])
    );
}

#[test]
fn entries_sharing_a_provider_get_numbered_names() {
    let yaml = "guardrails:\n  enabled: true\n  providers:\n    - use: builtin:AllowlistProvider\n      config: {denied_tools: [bash]}\n    - use: builtin:AllowlistProvider\n      config: {denied_tools: [curl]}\n";
    let guardrail = guardrail(yaml);
    let names: Vec<&str> = guardrail.middleware.guards().iter().map(|g| g.name()).collect();
    assert_eq!(names, ["allowlist", "allowlist#2"]);
    assert_eq!(decided_by(&decided(&guardrail, "curl").0), Some("allowlist#2"));
    let duplicate = "guardrails:\n  enabled: true\n  providers:\n    - use: builtin:AllowlistProvider\n      name: a\n    - use: builtin:AllowlistProvider\n      name: a\n";
    let error = install(&config(duplicate).unwrap()).unwrap_err().to_string();
    assert!(error.contains("two `guardrails.providers` entries are named 'a'"), "{error}");
}

#[test]
fn chain_configs_that_cannot_mean_what_they_say_are_refused() {
    let cases = [
        (
            "guardrails:\n  enabled: true\n  provider: {use: builtin:AllowlistProvider}\n  providers: [{use: builtin:AllowlistProvider}]\n",
            "give either `provider:` (one provider) or `providers:`",
        ),
        ("guardrails:\n  enabled: true\n  providers: []\n", "`providers` is an empty list"),
        (
            "guardrails:\n  enabled: true\n  providers: [{use: builtin:AllowlistProvider, tools: ['']}]\n",
            "`guardrails.providers[0]`: `provider.tools` holds an empty pattern",
        ),
        (
            "guardrails:\n  enabled: true\n  providers: [{use: builtin:AllowlistProvider, tool: [bash]}]\n",
            "unknown field `tool`",
        ),
    ];
    for (yaml, expected) in cases {
        let error = config(yaml).unwrap_err().to_string();
        assert!(error.contains(expected), "{yaml}: {error}");
    }
    // A provider that cannot be built names its entry.
    let yaml = "guardrails:\n  enabled: true\n  providers:\n    - use: builtin:AllowlistProvider\n    - use: builtin:NoSuchProvider\n";
    let error = install(&config(yaml).unwrap()).unwrap_err().to_string();
    assert!(
        error.starts_with("`guardrails.providers[1]`: `use: builtin:NoSuchProvider` names no built-in"),
        "{error}"
    );
}

#[test]
fn a_call_whose_time_no_provider_reads_is_stamped_when_recorded() {
    // The allowlist declares it does not read the attribution, of which the
    // call's time is part: no clock is read as its calls arrive, and a
    // decision-log entry or an audit event takes the time it is recorded.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("decisions.jsonl");
    let yaml = format!(
        "guardrails:\n  enabled: true\n  provider:\n    use: builtin:AllowlistProvider\n    config: {{denied_tools: [bash]}}\n  decision_log: {{path: {}}}\n",
        log.display()
    );
    let guardrail = guardrail(&yaml);
    assert!(!guardrail.middleware.provider().reads_attribution());
    let sink = Arc::new(MemoryAuditSink::new());
    let middleware = guardrail.middleware.clone().with_audit_sink(sink.clone());
    for tool in ["bash", "read_file"] {
        middleware.decide(&tool_call(tool, json!({}))).unwrap();
    }
    middleware.decision_log().unwrap().flush();
    let text = std::fs::read_to_string(&log).unwrap();
    let times: Vec<String> =
        text.lines().map(|line| serde_json::from_str::<Value>(line).unwrap()["time"].to_string()).collect();
    assert_eq!(times.len(), 2, "{text}");
    let events = sink.events();
    assert_eq!(events.len(), 1, "the denial only");
    for time in times.iter().map(|t| t.trim_matches('"')).chain([events[0].time.as_str()]) {
        chrono::DateTime::parse_from_rfc3339(time).unwrap_or_else(|e| panic!("{time:?}: {e}"));
    }
}
