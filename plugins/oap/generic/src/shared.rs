//! The stateful names of policy packs in Redis (`state: redis://...`), so
//! that replicas keep one `daily_total`, one `recent_keys` ... per passport
//! and pack instead of one each.
//!
//! An evaluation reads what it needs through a [`RedisView`], which watches
//! (`WATCH`) each key before reading it; an allowed call's changes go in one
//! `MULTI` ... `EXEC` transaction, which Redis refuses when a watched key
//! changed in between: the call is then evaluated again on the new values.
//! So two replicas never both spend the last of a daily cap, and a key is
//! never accepted twice. Counters live in fixed UTC windows numbered from
//! the deciding process's clock (replicas whose clocks are a second apart
//! see a day end a second apart); sets are sorted sets scored by the time
//! of each insertion.

use std::cell::RefCell;
use std::collections::HashSet;

use crate::redis::{command, expect_ok, Connection, Reply};
use crate::state::{window_of, Pending, StateView};

/// How many times a call is evaluated again while concurrent calls keep
/// changing what it read, before it fails (a provider error).
pub(super) const ATTEMPTS: usize = 64;

/// A key is kept this long past its window or retention.
const GRACE_SECS: u64 = 60;

/// A counter's key in its current window.
fn counter_key(key: &str, window_secs: u64, now: f64) -> String {
    format!("guardhost:oap:total:{key}{window_secs}:{}", window_of(now, window_secs))
}

fn set_key(key: &str) -> String {
    format!("guardhost:oap:set:{key}")
}

fn number(bytes: &[u8]) -> Result<f64, String> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .ok_or_else(|| format!("not a number where one was kept: {:?}", String::from_utf8_lossy(bytes)))
}

/// Reads the state on one connection, watching every key it reads; the
/// first failure is kept (later reads answer nothing) for the caller to
/// report once the evaluation ends.
pub(super) struct RedisView<'c> {
    connection: RefCell<&'c mut Connection>,
    watched: RefCell<HashSet<String>>,
    error: RefCell<Option<String>>,
}

impl<'c> RedisView<'c> {
    pub(super) fn new(connection: &'c mut Connection) -> Self {
        RedisView {
            connection: RefCell::new(connection),
            watched: RefCell::default(),
            error: RefCell::default(),
        }
    }

    /// Watches `key` (once), then sends `args`; `None` after a failure.
    fn ask(&self, key: &str, args: &[&[u8]]) -> Option<Reply> {
        if self.error.borrow().is_some() {
            return None;
        }
        let mut connection = self.connection.borrow_mut();
        let mut asked = || {
            if self.watched.borrow_mut().insert(key.to_owned()) {
                expect_ok(command(&mut connection, &[b"WATCH", key.as_bytes()])?)?;
            }
            match command(&mut connection, args)? {
                Reply::Error(e) => Err(e),
                reply => Ok(reply),
            }
        };
        asked().map_err(|e| *self.error.borrow_mut() = Some(e)).ok()
    }

    fn fail(&self, why: String) {
        self.error.borrow_mut().get_or_insert(why);
    }

    /// The first failure of a read, if any.
    pub(super) fn failure(&self) -> Option<String> {
        self.error.borrow().clone()
    }

    /// Ends the reading with no change.
    pub(super) fn release(self) -> Result<(), String> {
        let connection = self.connection.into_inner();
        if self.watched.borrow().is_empty() {
            return Ok(());
        }
        expect_ok(command(connection, &[b"UNWATCH"])?)
    }

    /// Makes an allowed call's changes unless a key read for it changed
    /// meanwhile: `Ok(false)` then, and the call must be evaluated again.
    pub(super) fn commit(self, pending: Vec<Pending>, now: f64) -> Result<bool, String> {
        let mut commands: Vec<Vec<String>> = Vec::new();
        for change in pending {
            match change {
                Pending::Add { key, window_secs, amount } => {
                    if !amount.is_finite() {
                        continue;
                    }
                    let key = counter_key(&key, window_secs, now);
                    let keep = ((window_secs + GRACE_SECS) * 1000).to_string();
                    commands.push(vec!["INCRBYFLOAT".into(), key.clone(), amount.to_string()]);
                    commands.push(vec!["PEXPIRE".into(), key, keep]);
                }
                Pending::Insert { key, ttl_secs, member } => {
                    let key = set_key(&key);
                    let stale = (now - ttl_secs as f64).to_string();
                    let keep = ((ttl_secs + GRACE_SECS) * 1000).to_string();
                    commands.push(vec!["ZADD".into(), key.clone(), now.to_string(), member]);
                    commands.push(vec!["ZREMRANGEBYSCORE".into(), key.clone(), "-inf".into(), stale]);
                    commands.push(vec!["PEXPIRE".into(), key, keep]);
                }
            }
        }
        if commands.is_empty() {
            return self.release().map(|()| true);
        }
        let connection = self.connection.into_inner();
        expect_ok(command(connection, &[b"MULTI"])?)?;
        for args in &commands {
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            expect_ok(command(connection, &args)?)?;
        }
        match command(connection, &[b"EXEC"])? {
            Reply::Bulk(None) => Ok(false),
            Reply::Array(replies) => match replies.into_iter().find_map(|r| match r {
                Reply::Error(e) => Some(e),
                _ => None,
            }) {
                Some(e) => Err(e),
                None => Ok(true),
            },
            other => Err(format!("EXEC answered {other:?}")),
        }
    }
}

impl StateView for RedisView<'_> {
    fn counter(&self, key: &str, window_secs: u64, now: f64) -> f64 {
        let key = counter_key(key, window_secs, now);
        match self.ask(&key, &[b"GET", key.as_bytes()]) {
            Some(Reply::Bulk(Some(value))) => number(&value).unwrap_or_else(|e| {
                self.fail(e);
                0.0
            }),
            Some(Reply::Bulk(None)) | None => 0.0,
            Some(other) => {
                self.fail(format!("GET answered {other:?}"));
                0.0
            }
        }
    }

    fn contains(&self, key: &str, member: &str, ttl_secs: u64, now: f64) -> bool {
        let key = set_key(key);
        match self.ask(&key, &[b"ZSCORE", key.as_bytes(), member.as_bytes()]) {
            Some(Reply::Bulk(Some(at))) => match number(&at) {
                Ok(at) => now - at < ttl_secs as f64,
                Err(e) => {
                    self.fail(e);
                    false
                }
            },
            Some(Reply::Bulk(None)) | None => false,
            Some(other) => {
                self.fail(format!("ZSCORE answered {other:?}"));
                false
            }
        }
    }

    fn members(&self, key: &str, ttl_secs: u64, now: f64) -> Vec<String> {
        let key = set_key(key);
        // Fresh: inserted less than `ttl_secs` ago (an open interval).
        let since = format!("({}", now - ttl_secs as f64);
        match self.ask(&key, &[b"ZRANGEBYSCORE", key.as_bytes(), since.as_bytes(), b"+inf"]) {
            Some(Reply::Array(items)) => items
                .into_iter()
                .filter_map(|item| match item {
                    Reply::Bulk(Some(member)) => Some(String::from_utf8_lossy(&member).into_owned()),
                    _ => None,
                })
                .collect(),
            None => Vec::new(),
            Some(other) => {
                self.fail(format!("ZRANGEBYSCORE answered {other:?}"));
                Vec::new()
            }
        }
    }
}
