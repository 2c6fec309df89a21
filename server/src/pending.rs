//! Calls held for a human's approval (a guard answered `ask`): kept, by an
//! id the response gives, until they are resumed (`POST /v1/pending/{id}`)
//! or their deadline passes. The store is this process's memory: a
//! restarted server, or another replica, does not know the id (the call
//! is then decided again, and asked again).

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use guardhost::{Ask, ToolCallRequest};

/// The most calls held at once; past it, a new ask gets no id (its
/// decision still says `ask`, and the caller may decide the call again
/// with an approval in its context).
pub const MAX_PENDING: usize = 10_000;

/// The held calls.
#[derive(Debug)]
pub struct Pending {
    calls: Mutex<HashMap<String, Held>>,
    ids: RandomState,
    counter: AtomicU64,
}

#[derive(Debug)]
struct Held {
    call: ToolCallRequest,
    ask: Ask,
}

impl Default for Pending {
    fn default() -> Self {
        Pending { calls: Mutex::new(HashMap::new()), ids: RandomState::new(), counter: AtomicU64::new(0) }
    }
}

impl Pending {
    /// Holds `call`, which `ask` is about; its id, or `None` when
    /// [`MAX_PENDING`] calls are already held and none has expired.
    pub fn hold(&self, call: ToolCallRequest, ask: Ask) -> Option<String> {
        let now = guardhost::outcome::unix_now();
        let mut calls = self.calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if calls.len() >= MAX_PENDING {
            calls.retain(|_, held| held.ask.deadline >= now);
            if calls.len() >= MAX_PENDING {
                return None;
            }
        }
        let id = self.new_id();
        calls.insert(id.clone(), Held { call, ask });
        Some(id)
    }

    /// Takes the call held under `id` and its ask: `None` when no call is
    /// (resumed already, expired, or never held here).
    pub fn take(&self, id: &str) -> Option<(ToolCallRequest, Ask)> {
        let held = self.calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(id)?;
        (held.ask.deadline >= guardhost::outcome::unix_now()).then_some((held.call, held.ask))
    }

    /// How many calls are held.
    pub fn len(&self) -> usize {
        self.calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).len()
    }

    /// Whether no call is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// 128 bits from two keyed hashes (keys drawn from the OS at start) of
    /// a counter: unique, and not guessable from the ids seen before.
    fn new_id(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let half = |salt: u64| {
            let mut hasher = self.ids.build_hasher();
            hasher.write_u64(n);
            hasher.write_u64(salt);
            hasher.finish()
        };
        format!("p-{:016x}{:016x}", half(0), half(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(deadline: u64) -> Ask {
        Ask { entry: "e".into(), digest: "sha256:00".into(), deadline, approvers: vec![] }
    }

    #[test]
    fn a_held_call_is_taken_once_and_an_expired_one_never() {
        let pending = Pending::default();
        let now = guardhost::outcome::unix_now();
        let id = pending.hold(ToolCallRequest::new("bash", Default::default()), ask(now + 60)).unwrap();
        assert!(id.starts_with("p-") && id.len() == 34, "{id}");
        let (call, _) = pending.take(&id).unwrap();
        assert_eq!(call.tool_call.name.as_deref(), Some("bash"));
        assert!(pending.take(&id).is_none(), "resumed once");
        let old = pending.hold(ToolCallRequest::new("bash", Default::default()), ask(now - 1)).unwrap();
        assert!(pending.take(&old).is_none(), "past its deadline");
        let other = pending.hold(ToolCallRequest::new("x", Default::default()), ask(now + 60)).unwrap();
        assert_ne!(other, id);
        assert_eq!(pending.len(), 1);
    }
}
