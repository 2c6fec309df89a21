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

/// One audit event: DeerFlow's five fields (`tag`, `name`, `hook`,
/// `action`, `changes`), and what identifies the call among all others.
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
    /// The details, exactly DeerFlow's.
    pub changes: AuditChanges,
    /// When the call was decided: the request's timestamp (UTC, RFC 3339).
    #[serde(default)]
    pub time: String,
    /// This decision's id, unique across processes (see [`decision_id`]).
    #[serde(default)]
    pub decision_id: String,
    /// The agent run, from the runtime context.
    #[serde(default)]
    pub run_id: Option<String>,
    /// The conversation thread, from the runtime context.
    #[serde(default)]
    pub thread_id: Option<String>,
    /// The tool call's id.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// The provider that decided.
    #[serde(default)]
    pub provider: AuditProvider,
}

/// Which provider decided: its name and the SHA-256 of its library.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditProvider {
    /// The provider's name.
    pub name: String,
    /// The library's SHA-256 (lower-case hex); `None` for a built-in
    /// provider or one wrapped directly in Rust.
    pub sha256: Option<String>,
}

/// A new decision id: 16 hex digits fixed for this process (from the
/// standard library's per-process random hash keys, the process id and
/// the start time), a dash, and a 12-digit counter. Two events never share
/// one within a process, and two processes share a prefix with negligible
/// chance.
pub fn decision_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static PREFIX: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let prefix = *PREFIX.get_or_init(|| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        hasher.write_u128(since_epoch.map(|d| d.as_nanos()).unwrap_or_default());
        hasher.finish()
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix:016x}-{n:012x}")
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

#[cfg(test)]
mod tests {
    use super::decision_id;

    #[test]
    fn decision_ids_are_distinct_and_share_the_process_prefix() {
        let ids: Vec<String> = (0..1000).map(|_| decision_id()).collect();
        let unique: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
        let prefix = &ids[0][..16];
        assert!(ids.iter().all(|id| id.len() == 29 && id.starts_with(prefix) && id.as_bytes()[16] == b'-'));
        assert!(ids[0].chars().all(|c| c.is_ascii_hexdigit() || c == '-'), "{}", ids[0]);
    }
}
