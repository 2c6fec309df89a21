//! Calls held for an approver over HTTP (`--listen`), for clients that
//! cannot be asked through elicitation.
//!
//! When a guard answers `ask` and the client declared no elicitation
//! capability, the call is held here under an id its denial gives; an
//! approver lists the held calls (`GET /v1/pending`) and answers one
//! (`POST /v1/pending/{id}`). When the client makes the same call again
//! (the same server, tool and arguments) before the ask's deadline, an
//! approval decides it again with that approval (bound to the ask's digest,
//! as through elicitation) and it runs; a refusal refuses it. Either answer
//! is used once. The store is this process's memory.

use std::collections::HashMap;
use std::sync::Mutex;

use guardhost::{Ask, ToolCallRequest};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::pins::sha256_of;

/// The most calls held at once; expired ones make room first, and past it
/// a new ask is refused without an id.
pub const MAX_HELD: usize = 10_000;

/// The held calls.
#[derive(Debug, Default)]
pub struct Pending {
    held: Mutex<HashMap<String, Held>>,
}

/// One held call, as `GET /v1/pending` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct Held {
    /// Its id.
    pub id: String,
    /// The server it is for.
    pub server: String,
    /// The tool (or `resources/read`, `prompts/get`).
    pub tool: String,
    /// Its arguments, for the approver to read.
    pub arguments: Map<String, Value>,
    /// The entry that asked, its digest of the call, its deadline and who
    /// may approve.
    pub ask: Ask,
    /// The approver's answer, once given.
    pub answer: Option<Answer>,
    /// The call's server, tool and arguments, hashed: the same call made
    /// again has the same key.
    #[serde(skip)]
    key: String,
    /// The call as it was asked about (its id included, which the ask's
    /// digest covers): the one an approval is given to.
    #[serde(skip)]
    call: ToolCallRequest,
}

/// An approver's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Answer {
    /// Whether the call may run.
    pub approved: bool,
    /// Who answered, as the approver said.
    pub approved_by: Option<String>,
}

/// What to do with a call a guard asks about.
#[derive(Debug)]
pub enum Standing {
    /// Held (now or before) under this id, not answered yet.
    Waiting(String),
    /// Answered (the answer is used up): its id, the answer, and the call
    /// and ask it answered.
    Answered(String, Answer, Box<(ToolCallRequest, Ask)>),
    /// Not held: too many calls are.
    Full,
}

/// Why an answer was not recorded.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// No call is held under the id (never, answered and used, or expired).
    #[error(
        "no call is held under this id (it was never held here, its answer was used, or its deadline passed)"
    )]
    Unknown,
    /// The call was answered already.
    #[error("the call was answered already")]
    Answered,
}

impl Pending {
    /// The standing of `call` (for `server`), which `ask` is about: an
    /// answered hold is taken; otherwise the call is held (again under its
    /// earlier id when it is held already).
    pub fn stand(&self, server: &str, call: &ToolCallRequest, ask: &Ask) -> Standing {
        let now = guardhost::unix_now();
        let tool = call.tool_call.name.clone().unwrap_or_default();
        let key = sha256_of(&serde_json::json!([server, tool, call.tool_call.args]));
        let mut held = self.held.lock().expect("not poisoned");
        held.retain(|_, h| h.ask.deadline >= now);
        if let Some(found) = held.values().find(|h| h.key == key && h.ask.entry == ask.entry) {
            let id = found.id.clone();
            return match found.answer.clone() {
                Some(answer) => {
                    let taken = held.remove(&id).expect("found above");
                    Standing::Answered(id, answer, Box::new((taken.call, taken.ask)))
                }
                None => Standing::Waiting(id),
            };
        }
        if held.len() >= MAX_HELD {
            return Standing::Full;
        }
        let id = new_id();
        held.insert(
            id.clone(),
            Held {
                id: id.clone(),
                server: server.to_owned(),
                tool,
                arguments: call.tool_call.args.clone(),
                ask: ask.clone(),
                answer: None,
                key,
                call: call.clone(),
            },
        );
        Standing::Waiting(id)
    }

    /// Records an approver's answer to the call held under `id`.
    pub fn answer(&self, id: &str, answer: Answer) -> Result<Held, AnswerError> {
        let now = guardhost::unix_now();
        let mut held = self.held.lock().expect("not poisoned");
        held.retain(|_, h| h.ask.deadline >= now);
        let found = held.get_mut(id).ok_or(AnswerError::Unknown)?;
        if found.answer.is_some() {
            return Err(AnswerError::Answered);
        }
        found.answer = Some(answer);
        Ok(found.clone())
    }

    /// The calls held now, oldest deadline first.
    pub fn list(&self) -> Vec<Held> {
        let now = guardhost::unix_now();
        let mut held = self.held.lock().expect("not poisoned");
        held.retain(|_, h| h.ask.deadline >= now);
        let mut list: Vec<Held> = held.values().cloned().collect();
        list.sort_by(|a, b| a.ask.deadline.cmp(&b.ask.deadline).then_with(|| a.id.cmp(&b.id)));
        list
    }
}

/// 96 random bits, in hex: an id another client cannot guess.
fn new_id() -> String {
    let mut bytes = [0u8; 12];
    getrandom::fill(&mut bytes).expect("the operating system's random source works");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(deadline: u64) -> Ask {
        Ask { entry: "approve".into(), digest: "sha256:d".into(), deadline, approvers: Vec::new() }
    }

    fn call(text: &str) -> ToolCallRequest {
        let mut args = Map::new();
        args.insert("text".into(), Value::from(text));
        ToolCallRequest::new("echo", args)
    }

    #[test]
    fn a_call_is_held_once_answered_once_and_its_answer_used_once() {
        let pending = Pending::default();
        let later = guardhost::unix_now() + 60;
        let Standing::Waiting(id) = pending.stand("s", &call("x"), &ask(later)) else { panic!() };
        let waiting = |standing| matches!(standing, Standing::Waiting(found) if found == id);
        assert!(waiting(pending.stand("s", &call("x"), &ask(later))));
        // Another call, or the same on another server, is held apart.
        assert!(!waiting(pending.stand("s", &call("y"), &ask(later))));
        assert!(!waiting(pending.stand("t", &call("x"), &ask(later))));
        assert_eq!(pending.list().len(), 3);
        let answer = Answer { approved: true, approved_by: Some("ops".into()) };
        assert_eq!(pending.answer(&id, answer.clone()).unwrap().tool, "echo");
        assert_eq!(pending.answer(&id, answer.clone()).unwrap_err(), AnswerError::Answered);
        match pending.stand("s", &call("x"), &ask(later)) {
            Standing::Answered(found, given, _) => assert_eq!((found, given), (id.clone(), answer)),
            other => panic!("{other:?}"),
        }
        // Used: the same call is held anew.
        assert!(matches!(pending.stand("s", &call("x"), &ask(later)), Standing::Waiting(new) if new != id));
        assert_eq!(
            pending.answer("nope", Answer { approved: false, approved_by: None }).unwrap_err(),
            AnswerError::Unknown
        );
    }

    #[test]
    fn an_expired_hold_is_forgotten() {
        let pending = Pending::default();
        let Standing::Waiting(id) = pending.stand("s", &call("x"), &ask(1)) else { panic!() };
        assert!(pending.list().is_empty());
        assert_eq!(
            pending.answer(&id, Answer { approved: true, approved_by: None }).unwrap_err(),
            AnswerError::Unknown
        );
    }
}
