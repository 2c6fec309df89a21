//! Audit events: one per denial and per provider error, never for a plain
//! allow.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// What a sink failure looks like.
pub type AuditError = Box<dyn std::error::Error + Send + Sync>;

/// What the middleware did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditAction {
    /// The call was blocked (by the provider, or fail-closed).
    DenyToolCall,
    /// The provider failed and `fail_closed` is false: the call ran anyway.
    AllowToolCallAfterProviderError,
}

/// The `changes` of an audit event: exactly these fields. Tool arguments,
/// `user_id` and the OAuth identity are deliberately absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditChanges {
    /// The tool.
    pub tool_name: String,
    /// The call's id.
    pub tool_call_id: Option<String>,
    /// The passport.
    pub agent_id: Option<String>,
    /// Whether a sub-agent made the call.
    pub is_subagent: bool,
    /// The user's role.
    pub user_role: Option<String>,
    /// The decision.
    pub allow: bool,
    /// The deciding policy.
    pub policy_id: Option<String>,
    /// Every non-empty reason code.
    pub reason_codes: Vec<String>,
    /// Every non-empty reason message, each cut to 500 characters.
    pub reason_messages: Vec<String>,
    /// The middleware's `fail_closed`.
    pub fail_closed: bool,
    /// Whether the provider failed.
    pub provider_error: bool,
}

/// One audit event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEvent {
    /// Always `guardrail`.
    pub tag: String,
    /// Always `GuardrailMiddleware`.
    pub name: String,
    /// Always `wrap_tool_call` (the async path too, as in DeerFlow).
    pub hook: String,
    /// What happened.
    pub action: AuditAction,
    /// The details.
    pub changes: AuditChanges,
}

/// Where audit events go. A failing sink never changes a decision: the
/// middleware logs a warning and goes on.
pub trait AuditSink: Send + Sync {
    /// Records one event.
    fn record(&self, event: &AuditEvent) -> Result<(), AuditError>;
}

/// Appends events to a file, one JSON object per line.
#[derive(Debug)]
pub struct JsonlAuditSink {
    file: Mutex<File>,
}

impl JsonlAuditSink {
    /// Opens `path` for appending, creating it if needed.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(JsonlAuditSink { file: Mutex::new(file) })
    }
}

impl AuditSink for JsonlAuditSink {
    fn record(&self, event: &AuditEvent) -> Result<(), AuditError> {
        let mut line = serde_json::to_vec(event)?;
        line.push(b'\n');
        let mut file = self.file.lock().map_err(|_| "audit file lock poisoned")?;
        file.write_all(&line)?;
        Ok(())
    }
}

/// Keeps events in memory (for embedders that forward them elsewhere, and
/// for tests).
#[derive(Debug, Default)]
pub struct MemoryAuditSink {
    events: Mutex<Vec<AuditEvent>>,
}

impl MemoryAuditSink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// The events recorded so far.
    pub fn events(&self) -> Vec<AuditEvent> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl AuditSink for MemoryAuditSink {
    fn record(&self, event: &AuditEvent) -> Result<(), AuditError> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).push(event.clone());
        Ok(())
    }
}
