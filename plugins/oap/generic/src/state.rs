//! Counters and sets behind the stateful names: [`GenericState`], in this
//! process or in Redis.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::redis::RedisState;

/// Expired entries are dropped when a map grows past its threshold, which
/// then becomes twice the surviving size (at least this), so pruning costs
/// amortised O(1) per update.
const PRUNE_AT_LEAST: usize = 256;

#[derive(Debug, Clone, Copy)]
struct Counter {
    window_secs: u64,
    window: u64,
    value: f64,
}

#[derive(Debug, Default)]
struct Set {
    ttl_secs: f64,
    members: HashMap<String, f64>,
    prune_above: usize,
}

/// Counters that rules such as `daily_total` and `recent_keys` read;
/// thread-safe. In this process by default, or in Redis.
#[derive(Debug, Default)]
pub struct GenericState {
    inner: Mutex<StateInner>,
    /// The server keeping the state, when it is kept in Redis.
    pub(crate) shared: Option<Arc<RedisState>>,
}

impl GenericState {
    /// An empty state, in this process.
    pub fn new() -> Self {
        Self::default()
    }

    /// State kept in `redis`, shared by every process that uses the same
    /// server.
    pub fn shared(redis: Arc<RedisState>) -> Self {
        GenericState { inner: Mutex::default(), shared: Some(redis) }
    }

    /// Forgets every counter and set kept in this process (not those kept
    /// in Redis).
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// The state kept in this process.
    pub(crate) fn lock(&self) -> MutexGuard<'_, StateInner> {
        // Evaluation does not panic under the lock, and every update is a
        // plain map insert, so even a poisoned lock guards consistent maps.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The data behind [`GenericState`], in this process.
#[derive(Debug, Default)]
pub(super) struct StateInner {
    counters: HashMap<String, Counter>,
    sets: HashMap<String, Set>,
    counters_prune_above: usize,
    sets_prune_above: usize,
}

fn next_threshold(len: usize) -> usize {
    len.saturating_mul(2).max(PRUNE_AT_LEAST)
}

/// The fixed UTC window `now` falls in.
pub(super) fn window_of(now: f64, window_secs: u64) -> u64 {
    // `as` saturates: negative or NaN times land in window 0.
    (now / window_secs.max(1) as f64) as u64
}

fn fresh(inserted: f64, now: f64, ttl: f64) -> bool {
    now - inserted < ttl
}

/// A change computed while evaluating, applied once the call is allowed.
#[derive(Debug)]
pub(super) enum Pending {
    Add { key: String, window_secs: u64, amount: f64 },
    Insert { key: String, ttl_secs: u64, member: String },
}

/// What an evaluation reads of the state: this process's
/// ([`StateInner`]) or a Redis server's (`crate::shared`).
pub(super) trait StateView {
    /// The counter's value in the current window of `window_secs` (0 when
    /// unset).
    fn counter(&self, key: &str, window_secs: u64, now: f64) -> f64;
    /// Whether `member` was inserted into the set less than `ttl_secs` ago.
    fn contains(&self, key: &str, member: &str, ttl_secs: u64, now: f64) -> bool;
    /// The set's members inserted less than `ttl_secs` ago.
    fn members(&self, key: &str, ttl_secs: u64, now: f64) -> Vec<String>;
}

impl StateView for StateInner {
    fn counter(&self, key: &str, window_secs: u64, now: f64) -> f64 {
        match self.counters.get(key) {
            Some(c) if c.window == window_of(now, window_secs) => c.value,
            _ => 0.0,
        }
    }

    fn contains(&self, key: &str, member: &str, ttl_secs: u64, now: f64) -> bool {
        self.sets
            .get(key)
            .and_then(|s| s.members.get(member).map(|&at| fresh(at, now, ttl_secs as f64)))
            .unwrap_or(false)
    }

    fn members(&self, key: &str, ttl_secs: u64, now: f64) -> Vec<String> {
        self.sets.get(key).map_or_else(Vec::new, |s| {
            s.members
                .iter()
                .filter(|(_, &at)| fresh(at, now, ttl_secs as f64))
                .map(|(m, _)| m.clone())
                .collect()
        })
    }
}

impl StateInner {
    /// Applies the updates of an allowed call.
    pub(super) fn apply(&mut self, pending: Vec<Pending>, now: f64) {
        for p in pending {
            match p {
                Pending::Add { key, window_secs, amount } => {
                    if self.counters.len() >= self.counters_prune_above.max(PRUNE_AT_LEAST) {
                        self.counters.retain(|_, c| c.window == window_of(now, c.window_secs));
                        self.counters_prune_above = next_threshold(self.counters.len());
                    }
                    let window = window_of(now, window_secs);
                    let c = self.counters.entry(key).or_insert(Counter { window_secs, window, value: 0.0 });
                    if c.window != window {
                        *c = Counter { window_secs, window, value: 0.0 };
                    }
                    let sum = c.value + amount;
                    if sum.is_finite() {
                        c.value = sum;
                    }
                }
                Pending::Insert { key, ttl_secs, member } => {
                    if self.sets.len() >= self.sets_prune_above.max(PRUNE_AT_LEAST) {
                        self.sets.retain(|_, s| {
                            s.members.retain(|_, &mut at| fresh(at, now, s.ttl_secs));
                            !s.members.is_empty()
                        });
                        self.sets_prune_above = next_threshold(self.sets.len());
                    }
                    let set = self.sets.entry(key).or_default();
                    set.ttl_secs = ttl_secs as f64;
                    if set.members.len() >= set.prune_above.max(PRUNE_AT_LEAST) {
                        let ttl = set.ttl_secs;
                        set.members.retain(|_, &mut at| fresh(at, now, ttl));
                        set.prune_above = next_threshold(set.members.len());
                    }
                    set.members.insert(member, now);
                }
            }
        }
    }

    /// Forgets everything.
    #[allow(dead_code)] // Used by `GenericState::clear`.
    pub(super) fn clear(&mut self) {
        self.counters.clear();
        self.sets.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::{Pending, StateInner, StateView};

    #[test]
    fn expired_members_and_windows_are_pruned() {
        let mut s = StateInner::default();
        for i in 0..5000u32 {
            let now = f64::from(i) * 60.0; // one insert a minute, kept 1 hour
            let member = format!("m{i}");
            s.apply(vec![Pending::Insert { key: "k".into(), ttl_secs: 3600, member }], now);
            let key = format!("c{i}");
            s.apply(vec![Pending::Add { key, window_secs: 60, amount: 1.0 }], now);
        }
        let now = 4999.0 * 60.0;
        assert!(s.sets["k"].members.len() <= 2 * 256, "{}", s.sets["k"].members.len());
        assert!(s.counters.len() <= 2 * 256, "{}", s.counters.len());
        assert!(s.contains("k", "m4999", 3600, now) && !s.contains("k", "m4900", 3600, now));
        assert_eq!(s.counter("c4999", 60, now), 1.0);
        assert_eq!(s.counter("c4998", 60, now), 0.0);
    }
}
