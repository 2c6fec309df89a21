//! Audit events: one per denial and per provider error, never for a plain
//! allow.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::request::{GuardrailDecision, GuardrailRequest};

mod flat;
mod jsonl;

pub use jsonl::JsonlAuditSink;

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
    /// `mode: warn` or `observe`: the call was denied (by the provider, or
    /// fail-closed) and ran anyway.
    WouldDenyToolCall,
    /// A provider asked for approval: the call waits for a human.
    AskToolCall,
    /// The call ran on a human's approval of exactly it.
    ApprovedToolCall,
    /// A provider rewrote the call's arguments.
    RewriteToolCall,
}

/// The `changes` of an audit event: exactly these fields. Tool arguments,
/// `user_id` and the OAuth identity are deliberately absent, and so are
/// the providers' reason messages (see `reason_messages`).
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
    /// For every reason with a message, a fixed text chosen by its code
    /// (`audited_message`), never the provider's own words, which can
    /// quote the call's arguments.
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
    /// This decision's id, unique across processes (see `decision_id`).
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

/// The per-process part of every decision id (see `decision_id`).
fn decision_id_prefix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::OnceLock;
    static PREFIX: OnceLock<u64> = OnceLock::new();
    *PREFIX.get_or_init(|| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        hasher.write_u128(since_epoch.map(|d| d.as_nanos()).unwrap_or_default());
        hasher.finish()
    })
}

/// The next decision's number in this process.
fn next_decision_number() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// The decision id of decision number `n` of this process.
fn format_decision_id(n: u64) -> String {
    // `format!("{prefix:016x}-{n:012x}")`, written digit by digit: the
    // formatting machinery cost the audit writer a tenth of its time.
    let mut id = String::with_capacity(29);
    push_hex(&mut id, decision_id_prefix(), 16);
    id.push('-');
    let needed = (u64::BITS - n.leading_zeros()).div_ceil(4);
    push_hex(&mut id, n, needed.max(12));
    id
}

/// Appends the lowest `digits` hex digits of `value`, lowercase, most
/// significant first.
fn push_hex(out: &mut String, value: u64, digits: u32) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend((0..digits).rev().map(|i| HEX[(value >> (4 * i) & 0xf) as usize] as char));
}

/// A new decision id: 16 hex digits fixed for this process (from the
/// standard library's per-process random hash keys, the process id and
/// the start time), a dash, and a 12-digit counter. Two events never share
/// one within a process, and two processes share a prefix with negligible
/// chance.
pub fn decision_id() -> String {
    format_decision_id(next_decision_number())
}

/// The event for one decided call, borrowed from the call's request and
/// decision: what the middleware hands a sink. [`AuditRecord::to_event`]
/// makes the owned [`AuditEvent`].
#[derive(Debug, Clone, Copy)]
pub struct AuditRecord<'a> {
    /// What the middleware did.
    pub action: AuditAction,
    /// The call's request. An event never holds the arguments, and on the
    /// middleware's wrapping paths (which decide from a borrowed view of
    /// the call) `tool_input` is empty here; nor does an event hold
    /// `user_id` or the OAuth identity, which are here.
    pub request: &'a GuardrailRequest,
    /// The decision taken.
    pub decision: &'a GuardrailDecision,
    /// The middleware's `fail_closed`.
    pub fail_closed: bool,
    /// Whether the provider failed.
    pub provider_error: bool,
    /// The provider that decided.
    pub provider: &'a AuditProvider,
    /// Whether `reason_messages` holds the provider's messages as written
    /// (each cut to 500 characters, as DeerFlow does) rather than a fixed
    /// text per code (`audited_message`): for a provider that declares
    /// its messages never quote a call's input, or by the operator's
    /// choice (`guardrails.audit_messages`).
    pub verbatim: bool,
}

/// The most characters of one message `reason_messages` keeps, as
/// DeerFlow cuts them.
pub const MESSAGE_CHARS: usize = 500;

/// `message` cut to [`MESSAGE_CHARS`] characters.
fn cut(message: &str) -> &str {
    message.char_indices().nth(MESSAGE_CHARS).map_or(message, |(at, _)| &message[..at])
}

/// The messages the middleware writes itself (a provider error, a denial
/// without a reason): fixed texts, kept as they are.
const OWN_MESSAGES: [&str; 3] = [
    "guardrail provider error (fail-closed)",
    "guardrail provider error (fail-open)",
    "blocked by guardrail policy",
];

/// What an audit event's `reason_messages` holds for a reason with code
/// `code` and message `message`: never the message a provider wrote, which
/// can quote the call's arguments (a command, a path, a URL), but a fixed
/// text chosen by the code. The middleware's own messages are fixed texts
/// already and are kept. An empty message gives nothing, as in DeerFlow.
/// The agent's tool message still carries the provider's full message.
pub fn audited_message(code: &str, message: &str) -> Option<&'static str> {
    if message.is_empty() {
        return None;
    }
    if let Some(own) = OWN_MESSAGES.iter().find(|own| **own == message) {
        return Some(own);
    }
    Some(match code {
        "oap.allowed" => "tool call authorized",
        "oap.tool_not_allowed" => "tool not in allowlist or denied",
        "oap.command_not_allowed" => "command not in allowed_commands",
        "oap.blocked_pattern" => "command matches a blocked pattern",
        "oap.limit_exceeded" => "operation exceeds a limit",
        "oap.passport_suspended" => "passport status is suspended or revoked",
        "oap.evaluator_error" => "provider failed",
        "oap.denied" => "blocked by guardrail policy",
        crate::tool_name::INVALID_CODE => {
            "tool name empty, padded with white space, or with an invisible character"
        }
        _ => UNRECORDED_MESSAGE,
    })
}

/// `reason_messages`' text for a reason whose code has no fixed text.
pub const UNRECORDED_MESSAGE: &str =
    "message not recorded (it can quote the call's arguments); see reason_codes";

impl AuditRecord<'_> {
    fn reason_codes(&self) -> impl Iterator<Item = &str> + Clone {
        self.decision.reasons.iter().map(|r| &*r.code).filter(|code| !code.is_empty())
    }

    fn reason_messages(&self) -> impl Iterator<Item = &str> + Clone {
        let verbatim = self.verbatim;
        self.decision.reasons.iter().filter_map(move |r| match verbatim {
            true => (!r.message.is_empty()).then(|| cut(&r.message)),
            false => audited_message(&r.code, &r.message),
        })
    }

    /// The owned event, with a new `decision_id`.
    pub fn to_event(&self) -> AuditEvent {
        self.event_numbered(next_decision_number())
    }

    fn event_numbered(&self, number: u64) -> AuditEvent {
        let request = self.request;
        AuditEvent {
            tag: "guardrail".to_owned(),
            name: "GuardrailMiddleware".to_owned(),
            hook: "wrap_tool_call".to_owned(),
            action: self.action,
            changes: AuditChanges {
                tool_name: request.tool_name.clone(),
                tool_call_id: request.tool_call_id.clone(),
                agent_id: request.agent_id.clone(),
                is_subagent: request.is_subagent,
                user_role: request.user_role.clone(),
                allow: self.decision.allow,
                policy_id: self.decision.policy_id.clone(),
                reason_codes: self.reason_codes().map(str::to_owned).collect(),
                reason_messages: self.reason_messages().map(str::to_owned).collect(),
                fail_closed: self.fail_closed,
                provider_error: self.provider_error,
            },
            time: request.timestamp.clone(),
            decision_id: format_decision_id(number),
            run_id: request.run_id.clone(),
            thread_id: request.thread_id.clone(),
            tool_call_id: request.tool_call_id.clone(),
            provider: self.provider.clone(),
        }
    }
}

/// Where audit events go. A failing sink never changes a decision: the
/// middleware logs a warning and goes on.
pub trait AuditSink: Send + Sync {
    /// Records one event.
    fn record(&self, event: &AuditEvent) -> Result<(), AuditError>;

    /// Records the event of one decided call; the middleware calls this
    /// one. By default, [`AuditSink::record`] of [`AuditRecord::to_event`];
    /// a sink that can keep the borrowed fields more cheaply overrides it
    /// ([`JsonlAuditSink`] copies them into its queue).
    fn record_call(&self, record: &AuditRecord<'_>) -> Result<(), AuditError> {
        self.record(&record.to_event())
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

    fn record_call(&self, record: &AuditRecord<'_>) -> Result<(), AuditError> {
        let event = record.to_event();
        self.events.lock().unwrap_or_else(|e| e.into_inner()).push(event);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{decision_id, decision_id_prefix, format_decision_id};

    #[test]
    fn a_decision_id_is_the_prefix_and_the_number_in_hex() {
        let prefix = decision_id_prefix();
        for n in [0, 1, 0xabc, 0xffff_ffff_ffff, 0x1_0000_0000_0000, u64::MAX] {
            assert_eq!(format_decision_id(n), format!("{prefix:016x}-{n:012x}"), "{n}");
        }
    }

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
