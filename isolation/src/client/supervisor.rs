//! Supervision: the thread that restarts a provider's child after it dies,
//! at once after a child that had answered calls, then with a growing
//! backoff while starts keep failing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Weak};
use std::time::{Duration, Instant};

use super::launch::Shared;
use super::reader::{Event, Launch};
use super::state::Phase;

/// The longest wait between restarts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Provider processes restarted by this process so far.
static RESTARTS: AtomicU64 = AtomicU64::new(0);

/// How many provider processes this process has restarted (after a crash,
/// an exit, a kill for a timeout or garbage), all providers together: for
/// metrics.
pub fn restarts() -> u64 {
    RESTARTS.load(Ordering::Relaxed)
}

/// The wait before restart attempt `failures` (1 for the first failure in a
/// row): none for the first, then 100 ms doubling up to [`MAX_BACKOFF`].
pub fn backoff(failures: u32) -> Duration {
    match failures {
        0 | 1 => Duration::ZERO,
        n => Duration::from_millis(100u64.saturating_mul(1 << (n - 2).min(16))).min(MAX_BACKOFF),
    }
}

/// Restarts the child after it dies, with backoff, until the provider is
/// dropped.
pub(super) fn supervise(shared: Weak<Shared>, events: mpsc::Receiver<Event>, sender: mpsc::Sender<Event>) {
    let mut failures: u32 = 0;
    while let Ok(Event::Died { process, answered, reason }) = events.recv() {
        // Only the running process's end calls for a restart (a process
        // whose start was given up on may report its end late).
        let current = shared.upgrade().is_some_and(|shared| {
            shared.client.running().is_some_and(|connection| connection.serial == process)
        });
        if !current {
            continue;
        }
        if answered {
            failures = 0;
        }
        let mut reason = reason;
        loop {
            failures = failures.saturating_add(1);
            let delay = backoff(failures);
            {
                let Some(shared) = shared.upgrade() else { return };
                let name = &shared.name;
                // A restart at once was announced with the death; a backoff
                // is news.
                if !delay.is_zero() {
                    tracing::warn!(provider = %name, "restarting the provider process in {} ms", delay.as_millis());
                }
                let phase = if delay.is_zero() {
                    Phase::Starting
                } else {
                    Phase::Down { until: Instant::now() + delay, reason: reason.clone() }
                };
                if !shared.client.set_phase(phase) {
                    return;
                }
            }
            // A shutdown during the wait ends the supervisor; a late report
            // of an earlier process's end changes nothing.
            let until = Instant::now() + delay;
            loop {
                match events.recv_timeout(until.saturating_duration_since(Instant::now())) {
                    Err(mpsc::RecvTimeoutError::Timeout) => break,
                    Ok(Event::Died { .. }) => continue,
                    Ok(Event::Shutdown) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
            let Some(shared) = shared.upgrade() else { return };
            if !shared.client.set_phase(Phase::Starting) {
                return;
            }
            match shared.launch(&sender) {
                Ok((connection, _)) => {
                    RESTARTS.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(provider = %shared.name, pid = connection.pid, "provider process restarted");
                    if !shared.client.set_phase(Phase::Running(connection.clone())) {
                        connection.close();
                        return;
                    }
                    break;
                }
                Err(Launch::Build(error, _) | Launch::Other(error)) => {
                    tracing::error!(provider = %shared.name, "cannot restart the provider process: {error}");
                    reason = format!("its restart failed: {error}");
                }
            }
        }
    }
}
