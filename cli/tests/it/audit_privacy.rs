//! Audit events and the decision log never carry a call's argument values,
//! not even quoted in a provider's reason message: the real OAP provider
//! (whose messages quote the command and the path) and the built-in
//! allowlist, through the real sinks (memory and JSONL), the real decision
//! log and the real `guardhost run --audit`. The agent's tool message keeps
//! the provider's full reason.

use crate::support;

use std::path::Path;
use std::sync::Arc;

use crate::support::{load, use_of};
use guardhost::decision_log::{DecisionLog, DecisionLogConfig, WhenFull};
use guardhost::UNRECORDED_MESSAGE;
use guardhost::{AuditSink, GuardrailMiddleware, JsonlAuditSink, MemoryAuditSink, ToolCallRequest};
use serde_json::{json, Value};

/// Argument values the OAP provider quotes in its messages: none may reach
/// an audit event or the decision log.
const COMMAND: &str = "cat /srv/hush-command-7.txt";
const PATH: &str = "/home/ann/hush-path-7.txt";
const VALUES: [&str; 2] = [COMMAND, PATH];
/// Parts of them, in case a value is cut or escaped.
const FRAGMENTS: [&str; 2] = ["hush-command-7", "hush-path-7"];

/// A passport that allows `ls` only, and reading under `/mnt/user-data/`.
fn passport(dir: &Path) -> std::path::PathBuf {
    support::write(
        dir,
        "passport.json",
        &json!({
            "passport_id": "audit-privacy", "kind": "template", "spec_version": "oap/1.0",
            "owner_id": "org_example", "owner_type": "org", "status": "active", "assurance_level": "L1",
            "capabilities": [{"id": "system.command.execute"}, {"id": "data.file.read"}],
            "limits": {
                "system.command.execute": {"allowed_commands": ["ls"]},
                "data.file.read": {"allowed_paths": ["/mnt/user-data/"]}
            },
            "regions": ["US"], "created_at": "2026-11-01T00:00:00Z", "updated_at": "2026-11-01T00:00:00Z",
            "version": "1.0.0"
        })
        .to_string(),
    )
}

fn calls() -> [ToolCallRequest; 2] {
    [
        ToolCallRequest::new("bash", support::object(json!({"command": COMMAND}))).with_id("c-bash"),
        ToolCallRequest::new("read_file", support::object(json!({"path": PATH}))).with_id("c-read"),
    ]
}

fn assert_no_argument_value(what: &str, text: &str) {
    for value in VALUES.iter().chain(FRAGMENTS.iter()) {
        assert!(!text.contains(value), "{what} holds the argument value {value}: {text}");
    }
}

fn decision_log(dir: &Path) -> (Arc<DecisionLog>, std::path::PathBuf) {
    let path = dir.join("decisions.jsonl");
    let config = DecisionLogConfig {
        path: path.clone(),
        args: false,
        mask: vec![],
        when_full: WhenFull::Wait,
        buffer: 16,
        max_bytes: 1 << 20,
        keep: 1,
    };
    (Arc::new(DecisionLog::open(&config, dir).unwrap()), path)
}

/// The two OAP denials through a middleware with `sink` and a decision
/// log; returns the decision log's text. The agent's messages quote the
/// provider's reasons whole.
fn deny_both(dir: &Path, sink: Arc<dyn AuditSink>) -> String {
    let oap = load(
        &use_of("guardhost_oap", "OAPGuardrailProvider"),
        support::object(json!({"passport_path": passport(dir).to_str().unwrap()})),
    );
    let (log, log_path) = decision_log(dir);
    let middleware =
        GuardrailMiddleware::new(oap.provider).with_audit_sink(sink).with_decision_log(Some(log.clone()));
    let [bash, read] = calls();
    let (verdict, message) = middleware.call_with_verdict(bash, &|_| unreachable!("denied")).unwrap();
    assert_eq!(verdict.decision.reasons[0].code, "oap.command_not_allowed");
    assert!(
        message.content.contains(&format!("Reason: Command '{COMMAND}' is not in allowed list")),
        "the agent reads the whole reason: {}",
        message.content
    );
    let (verdict, message) = middleware.call_with_verdict(read, &|_| unreachable!("denied")).unwrap();
    assert_eq!(verdict.decision.reasons[0].code, "oap.path_not_allowed");
    assert!(message.content.contains(PATH), "the agent reads the whole reason: {}", message.content);
    log.flush();
    std::fs::read_to_string(log_path).unwrap()
}

#[test]
fn oap_denials_quoting_a_command_and_a_path_reach_no_memory_audit_event_nor_the_decision_log() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Arc::new(MemoryAuditSink::new());
    let log = deny_both(dir.path(), sink.clone());
    let events = sink.events();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].changes.reason_codes, ["oap.command_not_allowed"]);
    assert_eq!(events[0].changes.reason_messages, ["command not in allowed_commands"]);
    assert_eq!(events[1].changes.reason_codes, ["oap.path_not_allowed"]);
    assert_eq!(events[1].changes.reason_messages, [UNRECORDED_MESSAGE]);
    assert_no_argument_value("a memory audit event", &serde_json::to_string(&events).unwrap());
    assert_eq!(log.lines().count(), 2, "{log}");
    assert_no_argument_value("the decision log", &log);
}

#[test]
fn oap_denials_quoting_a_command_and_a_path_reach_no_jsonl_audit_line_nor_the_decision_log() {
    let dir = tempfile::tempdir().unwrap();
    let audit_path = dir.path().join("audit.jsonl");
    let sink = Arc::new(JsonlAuditSink::open(&audit_path).unwrap());
    let log = deny_both(dir.path(), sink.clone());
    sink.flush();
    let audit = std::fs::read_to_string(&audit_path).unwrap();
    let events: Vec<Value> = audit.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(events.len(), 2, "{audit}");
    assert_eq!(events[0]["changes"]["reason_messages"], json!(["command not in allowed_commands"]));
    assert_eq!(events[1]["changes"]["reason_messages"], json!([UNRECORDED_MESSAGE]));
    assert_no_argument_value("the JSONL audit log", &audit);
    assert_no_argument_value("the decision log", &log);
}

/// `guardhost run --audit` with `config`, the two OAP calls and an
/// allowlist denial as input; returns (stdout, audit file, decision log).
fn run(dir: &Path, config: &Path, lines: &[Value]) -> (String, String, String) {
    let audit = dir.join("audit.jsonl");
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let args = ["run", "--config", config.to_str().unwrap(), "--audit", audit.to_str().unwrap()];
    let output = support::cli::guardhost(&args, Some(input.as_bytes()));
    assert!(output.status.success(), "{}", support::cli::stderr(&output));
    let read = |path: &Path| std::fs::read_to_string(path).unwrap();
    (support::cli::stdout(&output), read(&audit), read(&dir.join("decisions.jsonl")))
}

#[test]
fn guardhost_run_audits_and_logs_oap_and_allowlist_denials_without_their_argument_values() {
    let dir = tempfile::tempdir().unwrap();
    passport(dir.path());
    let oap = support::write(
        dir.path(),
        "oap.yaml",
        &format!(
            "guardrails:\n  enabled: true\n  decision_log: {{path: decisions.jsonl}}\n  provider:\n    use: {}\n    config: {{passport_path: passport.json}}\n",
            use_of("guardhost_oap", "OAPGuardrailProvider")
        ),
    );
    let lines = [
        json!({"name": "bash", "args": {"command": COMMAND}, "id": "c-bash"}),
        json!({"name": "read_file", "args": {"path": PATH}, "id": "c-read"}),
    ];
    let (answers, audit, log) = run(dir.path(), &oap, &lines);
    assert!(
        answers.contains(COMMAND) && answers.contains(PATH),
        "the agent reads the whole reasons: {answers}"
    );
    assert_eq!((audit.lines().count(), log.lines().count()), (2, 2), "{audit}\n{log}");
    assert_no_argument_value("the audit file", &audit);
    assert_no_argument_value("the decision log", &log);

    let dir = tempfile::tempdir().unwrap();
    let allowlist = support::write(
        dir.path(),
        "allowlist.yaml",
        "guardrails:\n  enabled: true\n  decision_log: {path: decisions.jsonl}\n  provider:\n    use: builtin:AllowlistProvider\n    config: {allowed_tools: [ls]}\n",
    );
    let line = json!({"name": "bash", "args": {"command": COMMAND}, "id": "c-bash"});
    let (answers, audit, log) = run(dir.path(), &allowlist, &[line]);
    assert!(answers.contains("Reason: tool 'bash' not in allowlist."), "{answers}");
    let event: Value = serde_json::from_str(audit.trim()).unwrap();
    assert_eq!(event["changes"]["reason_codes"], json!(["oap.tool_not_allowed"]));
    // The allowlist declares its messages quote the tool's name only: as
    // written, as DeerFlow audits them.
    assert_eq!(event["changes"]["reason_messages"], json!(["tool 'bash' not in allowlist"]));
    assert_no_argument_value("the audit file", &audit);
    assert_no_argument_value("the decision log", &log);
}
