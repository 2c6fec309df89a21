//! Waiting for the other process: spin briefly, then sleep on a futex.
//!
//! Waking a sleeping thread of another process costs a system call on one
//! side and, on a VM whose other vCPU is idle, tens of microseconds before
//! the woken thread runs. A waiter that spins sees the other side's store
//! within a fraction of a microsecond instead, but burns its CPU while it
//! does. So each waiter spins only while spinning has been paying: the
//! budget rises to twice any wait shorter than [`MAX_SPIN`] (at most
//! [`MAX_SPIN`]), loses an eighth after each longer wait, and never drops
//! below [`MIN_SPIN`]. A waiter that finds it was descheduled while
//! spinning (the machine is busy) stops spinning at once and sleeps, and
//! counts that as a long wait.
//!
//! A wait's length includes the waiter's own wake-up when it slept, so two
//! sides that both slept (each waiting on the other's wake-up) still see
//! waits shorter than [`MAX_SPIN`] and start spinning again; a budget that
//! halved instead of wearing down by an eighth could not climb out of that.
//!
//! CPU spent spinning: none while no calls come; at most [`MAX_SPIN`] per
//! wait while calls come closer together than that; once they come further
//! apart, the budget wears down to [`MIN_SPIN`] per wait within about 30
//! waits (about 0.8 ms spent spinning on the way).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The longest a waiter spins before it sleeps.
pub const MAX_SPIN: Duration = Duration::from_micros(100);

/// The shortest spin: what a waiter spends before sleeping once calls have
/// become rare.
pub const MIN_SPIN: Duration = Duration::from_micros(2);

/// A gap this long between two looks at the clock while spinning means the
/// thread was descheduled.
const PREEMPTED: Duration = Duration::from_micros(20);

/// Looks at the condition between two looks at the clock.
const LOOKS_PER_CLOCK: u32 = 16;

/// One adaptive spin budget, shared by the waiters of one kind.
#[derive(Debug)]
pub(crate) struct Spin {
    budget_ns: AtomicU32,
}

impl Default for Spin {
    fn default() -> Self {
        Spin { budget_ns: AtomicU32::new(MAX_SPIN.as_nanos() as u32) }
    }
}

impl Spin {
    /// The current budget.
    pub(crate) fn budget(&self) -> Duration {
        Duration::from_nanos(u64::from(self.budget_ns.load(Ordering::Relaxed)))
    }

    /// Waits until `ready` gives a value or `deadline` passes (`None`):
    /// spins within the budget, then calls `sleep` with the time left
    /// (`None`: no deadline) again and again. `sleep` must announce the
    /// sleeper, look at the condition once more, and only then block (the
    /// futex protocol), returning the value when it found one.
    pub(crate) fn wait<T>(
        &self,
        deadline: Option<Instant>,
        mut ready: impl FnMut() -> Option<T>,
        mut sleep: impl FnMut(Option<Duration>) -> Option<T>,
    ) -> Option<T> {
        let start = Instant::now();
        let budget = self.budget();
        let mut last = start;
        let mut preempted = false;
        'spin: loop {
            for _ in 0..LOOKS_PER_CLOCK {
                if let Some(value) = ready() {
                    self.waited(start.elapsed());
                    return Some(value);
                }
                std::hint::spin_loop();
            }
            let now = Instant::now();
            if now - last > PREEMPTED {
                preempted = true;
                break 'spin;
            }
            if now - start >= budget || deadline.is_some_and(|d| now >= d) {
                break 'spin;
            }
            last = now;
        }
        if preempted {
            self.waited(MAX_SPIN);
        }
        loop {
            let left = match deadline {
                Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return ready(),
                },
                None => None,
            };
            if let Some(value) = sleep(left) {
                if !preempted {
                    self.waited(start.elapsed());
                }
                return Some(value);
            }
        }
    }

    /// Adapts the budget to a wait that took `took`.
    fn waited(&self, took: Duration) {
        let budget = self.budget();
        let next = if took < MAX_SPIN {
            budget.max(took * 2).min(MAX_SPIN)
        } else {
            (budget - budget / 8).max(MIN_SPIN)
        };
        if next != budget {
            self.budget_ns.store(next.as_nanos() as u32, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_waits_wear_the_budget_down_to_the_floor_and_short_ones_raise_it() {
        let spin = Spin::default();
        assert_eq!(spin.budget(), MAX_SPIN);
        spin.waited(Duration::from_millis(1));
        assert_eq!(spin.budget(), MAX_SPIN - MAX_SPIN / 8);
        for _ in 0..100 {
            spin.waited(Duration::from_millis(1));
        }
        assert_eq!(spin.budget(), MIN_SPIN);
        spin.waited(Duration::from_micros(10));
        assert_eq!(spin.budget(), Duration::from_micros(20));
        // A shorter wait does not lower it.
        spin.waited(Duration::from_micros(3));
        assert_eq!(spin.budget(), Duration::from_micros(20));
        spin.waited(Duration::from_micros(60));
        assert_eq!(spin.budget(), MAX_SPIN);
    }

    #[test]
    fn a_value_found_while_spinning_never_sleeps() {
        let spin = Spin::default();
        let mut looks = 0;
        let value = spin.wait(
            None,
            || {
                looks += 1;
                (looks == 5).then_some(7)
            },
            |_| panic!("slept"),
        );
        assert_eq!(value, Some(7));
    }

    #[test]
    fn after_the_budget_it_sleeps_until_the_value_comes_and_gives_up_at_the_deadline() {
        let spin = Spin::default();
        let mut sleeps = 0;
        let value = spin.wait(
            None,
            || None,
            |left| {
                assert_eq!(left, None);
                sleeps += 1;
                (sleeps == 3).then_some("woken")
            },
        );
        assert_eq!((value, sleeps), (Some("woken"), 3));

        let deadline = Instant::now() + Duration::from_millis(5);
        let value: Option<()> = spin.wait(
            Some(deadline),
            || None,
            |left| {
                std::thread::sleep(left.expect("a deadline"));
                None
            },
        );
        assert_eq!(value, None);
        assert!(Instant::now() >= deadline);
    }
}
