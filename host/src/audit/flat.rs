//! The queue's encoding: each event a tag byte, then either the fields of
//! an [`AuditRecord`] (lengths and bytes, copied from the call) or a JSON
//! line serialised by the caller.
use std::io::Write;

use super::{AuditAction, AuditChanges, AuditError, AuditEvent, AuditProvider, AuditRecord};

const RECORD: u8 = 0;
const JSON: u8 = 1;
const NONE: u64 = u64::MAX;

fn put_len(bytes: &mut Vec<u8>, len: usize) {
    bytes.extend_from_slice(&(len as u64).to_le_bytes());
}

fn put_str(bytes: &mut Vec<u8>, text: &str) {
    put_len(bytes, text.len());
    bytes.extend_from_slice(text.as_bytes());
}

fn put_opt(bytes: &mut Vec<u8>, text: Option<&str>) {
    match text {
        Some(text) => put_str(bytes, text),
        None => bytes.extend_from_slice(&NONE.to_le_bytes()),
    }
}

fn put_all<'a>(bytes: &mut Vec<u8>, texts: impl Iterator<Item = &'a str> + Clone) {
    put_len(bytes, texts.clone().count());
    texts.for_each(|text| put_str(bytes, text));
}

pub(super) fn put_json(bytes: &mut Vec<u8>, line: &[u8]) {
    bytes.push(JSON);
    put_len(bytes, line.len());
    bytes.extend_from_slice(line);
}

pub(super) fn put_record(bytes: &mut Vec<u8>, record: &AuditRecord<'_>, number: u64) {
    let (request, decision) = (record.request, record.decision);
    let action = match record.action {
        AuditAction::DenyToolCall => 0,
        AuditAction::AllowToolCallAfterProviderError => 1,
        AuditAction::WouldDenyToolCall => 2,
        AuditAction::AskToolCall => 3,
        AuditAction::ApprovedToolCall => 4,
        AuditAction::RewriteToolCall => 5,
    };
    let flags = u8::from(request.is_subagent)
        | u8::from(decision.allow) << 1
        | u8::from(record.fail_closed) << 2
        | u8::from(record.provider_error) << 3;
    bytes.extend_from_slice(&[RECORD, action, flags]);
    bytes.extend_from_slice(&number.to_le_bytes());
    put_str(bytes, &request.tool_name);
    put_opt(bytes, request.tool_call_id.as_deref());
    put_opt(bytes, request.agent_id.as_deref());
    put_opt(bytes, request.user_role.as_deref());
    put_opt(bytes, decision.policy_id.as_deref());
    put_all(bytes, record.reason_codes());
    put_all(bytes, record.reason_messages());
    put_str(bytes, &request.timestamp);
    put_opt(bytes, request.run_id.as_deref());
    put_opt(bytes, request.thread_id.as_deref());
    put_str(bytes, &record.provider.name);
    put_opt(bytes, record.provider.sha256.as_deref());
}

/// Reads back what the put functions wrote (the queue holds nothing
/// else, so a short or bad read is a bug, reported as an error).
struct Reader<'b, 'a>(&'b mut &'a [u8]);

impl<'a> Reader<'_, 'a> {
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], AuditError> {
        if self.0.len() < n {
            return Err("audit queue damaged".into());
        }
        let (head, rest) = self.0.split_at(n);
        *self.0 = rest;
        Ok(head)
    }

    fn u64(&mut self) -> Result<u64, AuditError> {
        let mut word = [0; 8];
        word.copy_from_slice(self.bytes(8)?);
        Ok(u64::from_le_bytes(word))
    }

    fn text(&mut self, len: u64) -> Result<String, AuditError> {
        let len = usize::try_from(len).map_err(|_| "audit queue damaged")?;
        Ok(std::str::from_utf8(self.bytes(len)?)?.to_owned())
    }

    fn string(&mut self) -> Result<String, AuditError> {
        let len = self.u64()?;
        self.text(len)
    }

    fn opt(&mut self) -> Result<Option<String>, AuditError> {
        match self.u64()? {
            NONE => Ok(None),
            len => self.text(len).map(Some),
        }
    }

    fn all(&mut self) -> Result<Vec<String>, AuditError> {
        (0..self.u64()?).map(|_| self.string()).collect()
    }
}

/// Writes the first event of `batch` as a JSON line to `out` and
/// advances `batch` past it.
pub(super) fn write_json_line(batch: &mut &[u8], out: &mut impl Write) -> Result<(), AuditError> {
    let mut read = Reader(batch);
    let head = read.bytes(1)?[0];
    if head == JSON {
        let len = usize::try_from(read.u64()?).map_err(|_| "audit queue damaged")?;
        out.write_all(read.bytes(len)?)?;
        out.write_all(b"\n")?;
        return Ok(());
    }
    let [action, flags] = read.bytes(2)? else { unreachable!("two bytes were read") };
    let number = read.u64()?;
    let tool_name = read.string()?;
    let tool_call_id = read.opt()?;
    let changes = AuditChanges {
        tool_name,
        tool_call_id: tool_call_id.clone(),
        agent_id: read.opt()?,
        is_subagent: flags & 1 != 0,
        user_role: read.opt()?,
        allow: flags & 2 != 0,
        policy_id: read.opt()?,
        reason_codes: read.all()?,
        reason_messages: read.all()?,
        fail_closed: flags & 4 != 0,
        provider_error: flags & 8 != 0,
    };
    let event = AuditEvent {
        tag: "guardrail".to_owned(),
        name: "GuardrailMiddleware".to_owned(),
        hook: "wrap_tool_call".to_owned(),
        action: match *action {
            0 => AuditAction::DenyToolCall,
            1 => AuditAction::AllowToolCallAfterProviderError,
            2 => AuditAction::WouldDenyToolCall,
            3 => AuditAction::AskToolCall,
            4 => AuditAction::ApprovedToolCall,
            _ => AuditAction::RewriteToolCall,
        },
        changes,
        time: read.string()?,
        decision_id: super::format_decision_id(number),
        run_id: read.opt()?,
        thread_id: read.opt()?,
        tool_call_id,
        provider: AuditProvider { name: read.string()?, sha256: read.opt()? },
    };
    serde_json::to_writer(&mut *out, &event)?;
    out.write_all(b"\n")?;
    Ok(())
}
