//! The OAP provider's per-minute rate windows in Redis (`state:
//! redis://...`), so that several processes (replicas of `guardhost
//! serve`, agents on several machines) enforce one passport's rate limits
//! together. The same server keeps the running totals, counters and key
//! sets of policy packs (`daily_total`, `recent_keys` ...), through the
//! generic engine's [`RedisState`], whose connections the windows share.
//!
//! Each rate window is a sorted set of admitted calls, scored by the Redis
//! server's own clock (no clock skew between replicas), trimmed, counted
//! and added to by one Lua script: atomic, whatever the number of callers.
//! An unreachable or failing server is an error, never a decision: the
//! host's `fail_closed` decides the call, and the message says which
//! server and why.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use guardhost_oap_generic::redis::{command, Connection, Reply};
pub use guardhost_oap_generic::redis::{RedisState, TIMEOUT};

/// Trims the window to the last minute, counts it, and admits the call if
/// the count is under the limit (`ARGV[1]`), under a unique member
/// (`ARGV[2]`): 1 admitted, 0 not.
const SCRIPT: &str = "\
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 60000000)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now, ARGV[2])
  redis.call('PEXPIRE', KEYS[1], 61000)
  return 1
end
return 0";

/// Per-minute rate windows kept in a Redis server.
#[derive(Debug)]
pub struct RedisRates {
    redis: Arc<RedisState>,
    script: OnceLock<String>,
    /// Makes members unique: this process's random part, and a counter.
    member_prefix: u64,
    members: AtomicU64,
}

impl RedisRates {
    /// Windows kept in `redis` (whose connections they share).
    pub fn new(redis: Arc<RedisState>) -> RedisRates {
        let random = std::collections::hash_map::RandomState::new();
        let member_prefix = std::hash::BuildHasher::hash_one(&random, std::process::id());
        RedisRates { redis, script: OnceLock::new(), member_prefix, members: AtomicU64::new(0) }
    }

    /// Counts one call under `key` if fewer than `per_minute` happened in
    /// the last minute, across every process using this server; whether it
    /// was admitted.
    pub fn admit(&self, key: &str, per_minute: f64) -> Result<bool, String> {
        let limit = if per_minute.is_finite() { per_minute.max(0.0).ceil() as i64 } else { i64::MAX };
        let member = format!("{:016x}-{}", self.member_prefix, self.members.fetch_add(1, Ordering::Relaxed));
        let key = format!("guardhost:oap:rate:{key}");
        let limit = limit.to_string();
        self.redis.with_connection(|connection| self.admit_on(connection, &key, &limit, &member))
    }

    fn admit_on(
        &self,
        connection: &mut Connection,
        key: &str,
        limit: &str,
        member: &str,
    ) -> Result<bool, String> {
        let sha = match self.script.get() {
            Some(sha) => sha.clone(),
            None => {
                let sha = match command(connection, &[b"SCRIPT", b"LOAD", SCRIPT.as_bytes()])? {
                    Reply::Bulk(Some(sha)) => String::from_utf8_lossy(&sha).into_owned(),
                    other => return Err(format!("SCRIPT LOAD answered {other:?}")),
                };
                self.script.get_or_init(|| sha).clone()
            }
        };
        let args: [&[u8]; 6] =
            [b"EVALSHA", sha.as_bytes(), b"1", key.as_bytes(), limit.as_bytes(), member.as_bytes()];
        let reply = match command(connection, &args)? {
            // The server restarted and forgot the script: send it whole.
            Reply::Error(e) if e.starts_with("NOSCRIPT") => command(
                connection,
                &[b"EVAL", SCRIPT.as_bytes(), b"1", key.as_bytes(), limit.as_bytes(), member.as_bytes()],
            )?,
            reply => reply,
        };
        match reply {
            Reply::Integer(admitted) => Ok(admitted == 1),
            Reply::Error(e) => Err(e),
            other => Err(format!("the script answered {other:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_server_is_an_error_naming_it() {
        // Port 1 on loopback: nothing listens there.
        let rates = RedisRates::new(Arc::new(RedisState::new("redis://127.0.0.1:1").unwrap()));
        let error = rates.admit("k", 5.0).unwrap_err();
        assert!(error.contains("redis://127.0.0.1:1/0") && error.contains("cannot reach"), "{error}");
    }
}
