//! Calls held for a human's approval (a guard answered `ask`): kept, by an
//! id the response gives, until an approver answers (`POST
//! /v1/pending/{id}`) or their deadline passes; an answered call is kept
//! [`ANSWER_KEPT_S`] more seconds with its answer, so that the runtime
//! that asked can learn it (`GET /v1/pending/{id}`).
//!
//! The store is this process's memory by default, or a Redis server that
//! several replicas share (`--pending-store redis://...`): a call held by
//! one replica is then listed, shown and answered by any of them. Taking
//! a held call to answer it is atomic in both: of two answers at once,
//! exactly one wins ([`Claim`]).

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use guardhost::{Ask, ToolCallRequest};
use guardhost_resp::{command, expect_ok, RedisState, Reply};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The most calls held at once; past it, a new ask gets no id (its
/// decision still says `ask`, and the caller may decide the call again
/// with an approval in its context).
pub const MAX_PENDING: usize = 10_000;

/// How long an answered call is kept with its answer, in seconds.
pub const ANSWER_KEPT_S: u64 = 600;

/// A call held for approval, and its answer once given.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Held {
    /// The call, as it was decided.
    pub call: ToolCallRequest,
    /// Whether its id was written as `null` (see `ToolCall::null_id`).
    #[serde(default)]
    pub null_id: bool,
    /// What the guard asked.
    pub ask: Ask,
    /// When it was held: Unix seconds.
    pub held_at: u64,
    /// When it was held, in nanoseconds: the list's order.
    #[serde(default)]
    pub held_at_ns: u128,
    /// The approver's answer, once given.
    #[serde(default)]
    pub answer: Option<Answer>,
}

impl Held {
    /// Whether it still waits for an answer at `now`.
    pub fn waiting(&self, now: u64) -> bool {
        self.answer.is_none() && self.ask.deadline >= now
    }
}

/// An approver's answer to a held call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answer {
    /// Approved (`true`) or refused.
    pub approved: bool,
    /// Who answered.
    pub approved_by: Option<String>,
    /// When: Unix seconds.
    pub answered_at: u64,
    /// The decision the call got with the answer (`None` while it is
    /// being decided).
    #[serde(default)]
    pub decision: Option<Value>,
}

/// What taking a held call to answer it came to.
#[derive(Debug, Default)]
pub enum Claim {
    /// This answer won: the call is this caller's to decide.
    Won,
    /// Another answer was given first.
    Answered,
    /// No such call (never held, expired).
    #[default]
    Unknown,
}

/// The store failed (Redis unreachable ...): the message names the server,
/// never its password.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(String);

/// The held calls.
#[derive(Debug)]
pub struct Pending {
    store: Store,
    ids: RandomState,
    counter: AtomicU64,
}

#[derive(Debug)]
enum Store {
    Memory(Mutex<HashMap<String, Held>>),
    Redis(Arc<RedisState>),
}

impl Default for Pending {
    fn default() -> Self {
        Pending::with(Store::Memory(Mutex::new(HashMap::new())))
    }
}

/// The keys in Redis: the calls waiting, by deadline (a sorted set whose
/// membership is "not answered yet": removing an id from it is the atomic
/// claim), and each call's record.
const INDEX_KEY: &str = "guardhost:pending";
const RECORD_PREFIX: &str = "guardhost:pending:";

impl Pending {
    fn with(store: Store) -> Self {
        Pending { store, ids: RandomState::new(), counter: AtomicU64::new(0) }
    }

    /// Held calls kept in the Redis server at `url`
    /// (`redis://[:password@]host[:port][/db]`), shared with every
    /// process that uses the same server and database.
    pub fn redis(url: &str) -> Result<Self, StoreError> {
        let state = RedisState::named(url, "--pending-store", "pending store").map_err(StoreError)?;
        Ok(Pending::with(Store::Redis(Arc::new(state))))
    }

    /// The Redis server, as messages name it (`None` in memory).
    pub fn server(&self) -> Option<&str> {
        match &self.store {
            Store::Memory(_) => None,
            Store::Redis(redis) => Some(redis.server()),
        }
    }

    /// Whether the store answers (Redis: `PING`).
    pub async fn check(&self) -> Result<(), StoreError> {
        self.blocking(|redis| redis.with_connection(|c| expect_ok(command(c, &[b"PING"])?))).await.map(|_| ())
    }

    /// Holds `call`, which `ask` is about; its id, or `None` when
    /// [`MAX_PENDING`] calls are already held and none has expired.
    pub async fn hold(&self, call: ToolCallRequest, ask: Ask) -> Result<Option<String>, StoreError> {
        let now = guardhost::unix_now();
        let id = self.new_id();
        let null_id = call.tool_call.null_id;
        let held_at_ns =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let held = Held { call, null_id, ask, held_at: now, held_at_ns, answer: None };
        match &self.store {
            Store::Memory(calls) => {
                let mut calls = lock(calls);
                if calls.len() >= MAX_PENDING {
                    calls.retain(|_, held| kept(held, now));
                    if calls.len() >= MAX_PENDING {
                        return Ok(None);
                    }
                }
                calls.insert(id.clone(), held);
                Ok(Some(id))
            }
            Store::Redis(_) => {
                let record = serde_json::to_vec(&held).map_err(|e| StoreError(e.to_string()))?;
                let ttl = (held.ask.deadline.saturating_sub(now) + ANSWER_KEPT_S).to_string();
                let deadline = held.ask.deadline.to_string();
                self.blocking(move |redis| {
                    redis.with_connection(|c| {
                        forget_expired(c, now)?;
                        if integer(command(c, &[b"ZCARD", INDEX_KEY.as_bytes()])?)? >= MAX_PENDING as i64 {
                            return Ok(None);
                        }
                        let key = format!("{RECORD_PREFIX}{id}");
                        expect_ok(command(c, &[b"SET", key.as_bytes(), &record, b"EX", ttl.as_bytes()])?)?;
                        integer(command(
                            c,
                            &[b"ZADD", INDEX_KEY.as_bytes(), deadline.as_bytes(), id.as_bytes()],
                        )?)?;
                        Ok(Some(id))
                    })
                })
                .await
            }
        }
    }

    /// The call held under `id`, answered or not: `None` when none is (never
    /// held, expired, or answered more than [`ANSWER_KEPT_S`] ago).
    pub async fn get(&self, id: &str) -> Result<Option<Held>, StoreError> {
        let now = guardhost::unix_now();
        match &self.store {
            Store::Memory(calls) => Ok(lock(calls).get(id).filter(|held| kept(held, now)).cloned()),
            Store::Redis(_) => {
                let key = format!("{RECORD_PREFIX}{id}");
                let held = self
                    .blocking(move |redis| {
                        redis.with_connection(|c| bulk(command(c, &[b"GET", key.as_bytes()])?))
                    })
                    .await?;
                Ok(held
                    .and_then(|bytes| serde_json::from_slice::<Held>(&bytes).ok())
                    .filter(|h| kept(h, now)))
            }
        }
    }

    /// The calls waiting for an answer, with their ids, oldest first.
    pub async fn list(&self) -> Result<Vec<(String, Held)>, StoreError> {
        let now = guardhost::unix_now();
        let mut listed = match &self.store {
            Store::Memory(calls) => lock(calls)
                .iter()
                .filter(|(_, held)| held.waiting(now))
                .map(|(id, held)| (id.clone(), held.clone()))
                .collect::<Vec<_>>(),
            Store::Redis(_) => {
                let records = self
                    .blocking(move |redis| {
                        redis.with_connection(|c| {
                            forget_expired(c, now)?;
                            let ids = match command(c, &[b"ZRANGE", INDEX_KEY.as_bytes(), b"0", b"-1"])? {
                                Reply::Array(ids) => {
                                    ids.into_iter().filter_map(|id| bulk(id).ok().flatten()).collect()
                                }
                                Reply::Error(e) => return Err(e),
                                _ => Vec::new(),
                            };
                            if ids.is_empty() {
                                return Ok(Vec::new());
                            }
                            let keys: Vec<Vec<u8>> = ids
                                .iter()
                                .map(|id| [RECORD_PREFIX.as_bytes(), id.as_slice()].concat())
                                .collect();
                            let mut args: Vec<&[u8]> = vec![b"MGET"];
                            args.extend(keys.iter().map(Vec::as_slice));
                            let records = match command(c, &args)? {
                                Reply::Array(records) => records,
                                Reply::Error(e) => return Err(e),
                                other => return Err(format!("answered {other:?}")),
                            };
                            Ok(ids.into_iter().zip(records).collect::<Vec<_>>())
                        })
                    })
                    .await?;
                records
                    .into_iter()
                    .filter_map(|(id, record)| {
                        let held = serde_json::from_slice::<Held>(&bulk(record).ok()??).ok()?;
                        Some((String::from_utf8(id).ok()?, held))
                    })
                    .filter(|(_, held)| held.waiting(now))
                    .collect()
            }
        };
        listed.sort_by(|a, b| (a.1.held_at_ns, &a.0).cmp(&(b.1.held_at_ns, &b.0)));
        Ok(listed)
    }

    /// Takes the call held under `id` to answer it with `answer` (its
    /// `decision` still `None`): atomic, so of several answers at once
    /// exactly one is [`Claim::Won`].
    pub async fn claim(&self, id: &str, answer: Answer) -> Result<Claim, StoreError> {
        let now = guardhost::unix_now();
        match &self.store {
            Store::Memory(calls) => {
                let mut calls = lock(calls);
                Ok(match calls.get_mut(id).filter(|held| kept(held, now)) {
                    None => Claim::Unknown,
                    Some(held) if held.answer.is_some() => Claim::Answered,
                    Some(held) if held.ask.deadline < now => Claim::Unknown,
                    Some(held) => {
                        held.answer = Some(answer);
                        Claim::Won
                    }
                })
            }
            Store::Redis(_) => {
                let id = id.to_owned();
                self.blocking(move |redis| {
                    redis.with_connection(|c| {
                        // Removing the id from the index is the claim: one
                        // caller removes it.
                        if integer(command(c, &[b"ZREM", INDEX_KEY.as_bytes(), id.as_bytes()])?)? == 1 {
                            let key = format!("{RECORD_PREFIX}{id}");
                            update(c, &key, |held| held.answer = Some(answer))?;
                            return Ok(Claim::Won);
                        }
                        let key = format!("{RECORD_PREFIX}{id}");
                        let held = bulk(command(c, &[b"GET", key.as_bytes()])?)?
                            .and_then(|bytes| serde_json::from_slice::<Held>(&bytes).ok());
                        Ok(match held {
                            Some(held) if held.answer.is_some() => Claim::Answered,
                            _ => Claim::Unknown,
                        })
                    })
                })
                .await
            }
        }
    }

    /// Records the decision the call under `id` got with its answer.
    pub async fn decided(&self, id: &str, decision: Value) -> Result<(), StoreError> {
        let now = guardhost::unix_now();
        match &self.store {
            Store::Memory(calls) => {
                if let Some(answer) = lock(calls).get_mut(id).and_then(|held| held.answer.as_mut()) {
                    answer.answered_at = now;
                    answer.decision = Some(decision);
                }
                Ok(())
            }
            Store::Redis(_) => {
                let key = format!("{RECORD_PREFIX}{id}");
                self.blocking(move |redis| {
                    redis.with_connection(|c| {
                        update(c, &key, |held| {
                            if let Some(answer) = held.answer.as_mut() {
                                answer.answered_at = now;
                                answer.decision = Some(decision);
                            }
                        })
                    })
                })
                .await
            }
        }
    }

    /// How many calls wait for an answer (in Redis: across every process
    /// sharing it).
    pub async fn waiting(&self) -> Result<usize, StoreError> {
        let now = guardhost::unix_now();
        match &self.store {
            Store::Memory(calls) => Ok(lock(calls).values().filter(|held| held.waiting(now)).count()),
            Store::Redis(_) => {
                self.blocking(move |redis| {
                    redis.with_connection(|c| {
                        forget_expired(c, now)?;
                        Ok(integer(command(c, &[b"ZCARD", INDEX_KEY.as_bytes()])?)?.max(0) as usize)
                    })
                })
                .await
            }
        }
    }

    /// Runs `work` with the Redis server off the I/O threads (its client
    /// blocks); in memory, `T::default()`.
    async fn blocking<T: Send + Default + 'static>(
        &self,
        work: impl FnOnce(&RedisState) -> Result<T, String> + Send + 'static,
    ) -> Result<T, StoreError> {
        let Store::Redis(redis) = &self.store else { return Ok(T::default()) };
        let redis = Arc::clone(redis);
        tokio::task::spawn_blocking(move || work(&redis))
            .await
            .map_err(|e| StoreError(format!("the pending store's thread failed: {e}")))?
            .map_err(StoreError)
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

/// Whether `held` is still kept at `now`: waiting until its deadline, or
/// answered less than [`ANSWER_KEPT_S`] ago.
fn kept(held: &Held, now: u64) -> bool {
    match &held.answer {
        None => held.ask.deadline >= now,
        Some(answer) => answer.answered_at.saturating_add(ANSWER_KEPT_S) >= now,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Drops from the index the ids whose deadline is before `now` (their
/// records expire by themselves).
fn forget_expired(c: &mut guardhost_resp::Connection, now: u64) -> Result<(), String> {
    let expired = format!("({now}");
    command(c, &[b"ZREMRANGEBYSCORE", INDEX_KEY.as_bytes(), b"-inf", expired.as_bytes()])?;
    Ok(())
}

fn integer(reply: Reply) -> Result<i64, String> {
    match reply {
        Reply::Integer(n) => Ok(n),
        Reply::Error(e) => Err(e),
        other => Err(format!("answered {other:?}")),
    }
}

fn bulk(reply: Reply) -> Result<Option<Vec<u8>>, String> {
    match reply {
        Reply::Bulk(bytes) => Ok(bytes),
        Reply::Error(e) => Err(e),
        other => Err(format!("answered {other:?}")),
    }
}

/// Rewrites the record at `key` with `change`, keeping its time to live
/// (the record is this caller's alone once claimed).
fn update(
    c: &mut guardhost_resp::Connection,
    key: &str,
    change: impl FnOnce(&mut Held),
) -> Result<(), String> {
    let Some(bytes) = bulk(command(c, &[b"GET", key.as_bytes()])?)? else { return Ok(()) };
    let mut held: Held = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    change(&mut held);
    let record = serde_json::to_vec(&held).map_err(|e| e.to_string())?;
    // At least as long as an answer is kept.
    let ttl = ANSWER_KEPT_S.to_string();
    expect_ok(command(c, &[b"SET", key.as_bytes(), &record, b"EX", ttl.as_bytes()])?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(deadline: u64) -> Ask {
        Ask { entry: "e".into(), digest: "sha256:00".into(), deadline, approvers: vec![] }
    }

    fn answer() -> Answer {
        Answer {
            approved: true,
            approved_by: Some("a".into()),
            answered_at: guardhost::unix_now(),
            decision: None,
        }
    }

    #[tokio::test]
    async fn a_held_call_is_claimed_once_and_an_expired_one_never() {
        let pending = Pending::default();
        let now = guardhost::unix_now();
        let id = pending
            .hold(ToolCallRequest::new("bash", Default::default()), ask(now + 60))
            .await
            .unwrap()
            .unwrap();
        assert!(id.starts_with("p-") && id.len() == 34, "{id}");
        assert_eq!(pending.waiting().await.unwrap(), 1);
        assert_eq!(pending.list().await.unwrap().len(), 1);
        assert!(matches!(pending.claim(&id, answer()).await.unwrap(), Claim::Won));
        assert!(matches!(pending.claim(&id, answer()).await.unwrap(), Claim::Answered), "answered once");
        assert_eq!(pending.waiting().await.unwrap(), 0);
        assert!(pending.list().await.unwrap().is_empty());
        pending.decided(&id, serde_json::json!({"outcome": "allow"})).await.unwrap();
        let held = pending.get(&id).await.unwrap().unwrap();
        assert_eq!(held.call.tool_call.name.as_deref(), Some("bash"));
        assert_eq!(held.answer.unwrap().decision.unwrap()["outcome"], "allow");
        let old = pending
            .hold(ToolCallRequest::new("bash", Default::default()), ask(now - 1))
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(pending.claim(&old, answer()).await.unwrap(), Claim::Unknown), "past its deadline");
        assert!(pending.get(&old).await.unwrap().is_none());
        assert!(matches!(pending.claim("p-0", answer()).await.unwrap(), Claim::Unknown));
    }
}
