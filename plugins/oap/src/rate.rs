//! Per-minute rate limits (`max_requests_per_min` or `max_requests_per_minute`,
//! `max_calls_per_minute`, `msgs_per_min`), counted in memory per passport and pack over a
//! sliding window of 60 seconds. A call counts only when it is allowed.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(60);

/// Sliding-window counters; safe to share between threads.
#[derive(Debug, Default)]
pub struct RateLimiter {
    windows: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl RateLimiter {
    /// Counts one call under `key` if fewer than `per_minute` happened in
    /// the last minute; returns whether it was admitted.
    pub fn admit(&self, key: &str, per_minute: f64) -> bool {
        self.admit_at(key, per_minute, Instant::now())
    }

    fn admit_at(&self, key: &str, per_minute: f64, now: Instant) -> bool {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let window = windows.entry(key.to_owned()).or_default();
        while window.front().is_some_and(|t| now.duration_since(*t) >= WINDOW) {
            window.pop_front();
        }
        if (window.len() as f64) < per_minute {
            window.push_back(now);
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_admits_its_limit_then_slides() {
        let limiter = RateLimiter::default();
        let start = Instant::now();
        assert!(limiter.admit_at("k", 2.0, start));
        assert!(limiter.admit_at("k", 2.0, start + Duration::from_secs(1)));
        assert!(!limiter.admit_at("k", 2.0, start + Duration::from_secs(2)));
        assert!(limiter.admit_at("other", 2.0, start + Duration::from_secs(2)));
        assert!(limiter.admit_at("k", 2.0, start + Duration::from_secs(61)));
        assert!(!limiter.admit_at("k", 0.0, start));
    }
}
