//! What the middleware logs. One global subscriber collects every log line
//! of this test binary; the tests take turns, so each sees only its own.

use guardhost_test_support as support;

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use guardhost::{async_handler, AuditError, AuditEvent, AuditSink, ToolCallRequest, ToolMessage, ToolStatus};
use serde_json::json;
use support::{middleware, object};

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `f` alone and returns what it logged.
fn capture(f: impl FnOnce()) -> String {
    static BUFFER: OnceLock<Buffer> = OnceLock::new();
    static TURN: Mutex<()> = Mutex::new(());
    let buffer = BUFFER.get_or_init(|| {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber =
            tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        buffer
    });
    let _turn: MutexGuard<'_, ()> = TURN.lock().unwrap_or_else(|e| e.into_inner());
    buffer.0.lock().unwrap().clear();
    f();
    let bytes = std::mem::take(&mut *buffer.0.lock().unwrap());
    String::from_utf8(bytes).unwrap()
}

fn bash_call() -> ToolCallRequest {
    ToolCallRequest::new("bash", object(json!({"command": "ls"}))).with_id("call-1")
}

fn ok(call: ToolCallRequest) -> Result<ToolMessage, guardhost::ToolCallError> {
    Ok(ToolMessage {
        content: String::new(),
        tool_call_id: String::new(),
        name: call.tool_call.name,
        status: ToolStatus::Success,
    })
}

struct FailingSink;
impl AuditSink for FailingSink {
    fn record(&self, _: &AuditEvent) -> Result<(), AuditError> {
        Err("journal is down".into())
    }
}

#[test]
fn a_denial_logs_a_warning_with_tool_policy_and_code_on_both_paths() {
    let sync = capture(|| {
        middleware("DenyAllProvider").wrap_tool_call(bash_call(), &ok).unwrap();
    });
    let asynchronous = capture(|| {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime
            .block_on(
                middleware("DenyAllProvider")
                    .awrap_tool_call(bash_call(), async_handler(|c| async move { ok(c) })),
            )
            .unwrap();
    });
    for logs in [sync, asynchronous] {
        assert!(logs.contains("WARN"), "{logs}");
        assert!(logs.contains("Guardrail denied: tool=bash policy=test-policy code=test.denied"), "{logs}");
    }
}

#[test]
fn an_allowed_call_logs_nothing() {
    let logs = capture(|| {
        middleware("AllowAllProvider").wrap_tool_call(bash_call(), &ok).unwrap();
    });
    assert_eq!(logs, "");
}

#[test]
fn a_failing_audit_sink_leaves_the_denial_intact_and_warns() {
    let reference = middleware("DenyAllProvider").wrap_tool_call(bash_call(), &ok).unwrap();
    let mut message = None;
    let logs = capture(|| {
        let mw = middleware("DenyAllProvider").with_audit_sink(Arc::new(FailingSink));
        message = Some(mw.wrap_tool_call(bash_call(), &|_| unreachable!("denied")).unwrap());
    });
    assert_eq!(message.unwrap(), reference);
    assert!(logs.contains("WARN") && logs.contains("Failed to record middleware:guardrail event"), "{logs}");
    assert!(logs.contains("journal is down"), "{logs}");
}

#[test]
fn a_provider_error_is_logged_with_its_message_on_both_paths() {
    let sync = capture(|| {
        middleware("PanickingProvider").check(&bash_call()).unwrap();
    });
    assert!(sync.contains("ERROR") && sync.contains("Guardrail provider error (sync)"), "{sync}");
    assert!(sync.contains("provider panicked: evaluate: boom on bash"), "{sync}");
    let asynchronous = capture(|| {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(middleware("ErroringProvider").acheck(&bash_call())).unwrap();
    });
    assert!(asynchronous.contains("Guardrail provider error (async): provider exploded"), "{asynchronous}");
}
