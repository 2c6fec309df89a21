//! What is done with one child process beyond its calls: reaping it and
//! saying how it ended, a call's timeout, and its shared region (taking
//! it into use, and the collector of async answers).

use std::process::ExitStatus;
#[cfg(target_os = "linux")]
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use guardhost::ProviderFailure;
use guardhost::Transport;

#[cfg(target_os = "linux")]
use super::state::assert_unlocked;
use super::state::{Connection, Link};
use crate::protocol::{self, FrameError};

/// How long an async call alone in flight over shared memory waits for its
/// answer on its task's thread before it yields.
pub const ASYNC_SPIN: Duration = Duration::from_micros(20);

impl Connection {
    /// Waits for the process to end (killing it if it lingers) and returns
    /// its exit status; `None` if it was reaped already.
    pub(super) fn reap(&self) -> Option<ExitStatus> {
        let deadline = Instant::now() + Duration::from_millis(500);
        loop {
            let polled = {
                let mut client = self.client.lock();
                let process = client.processes.get_mut(&self.serial)?;
                match process.try_wait() {
                    Ok(None) if Instant::now() < deadline => None,
                    // Ended, failed, or lingering: done with the handle.
                    polled => Some((polled, client.processes.remove(&self.serial))),
                }
            };
            match polled {
                None => std::thread::sleep(Duration::from_millis(2)),
                Some((Ok(Some(status)), _)) => return Some(status),
                Some((Ok(None), Some(mut process))) => {
                    let _ = process.kill();
                    return process.wait().ok();
                }
                Some(_) => return None,
            }
        }
    }

    /// What happened to the process, now that `error` ended its output.
    pub(super) fn ended(&self, error: FrameError) -> String {
        let garbage = !matches!(error, FrameError::Closed | FrameError::Io(_));
        if garbage {
            self.kill(error.to_string());
        }
        let status = self.reap();
        if let Some(reason) = self.killed_because.get() {
            return format!("was killed: it {reason}");
        }
        match status {
            Some(status) => describe_exit(status),
            None => format!("{error}"),
        }
    }

    /// A call to provider `name` went unanswered for `limit`: the process
    /// is killed (and restarts), and this is the call's failure.
    pub(super) fn timed_out(&self, name: &str, limit: Duration) -> ProviderFailure {
        let limit = limit.as_millis();
        self.kill(format!("left a call unanswered for {limit} ms (provider.timeout_ms)"));
        ProviderFailure::error(format!(
            "provider '{name}' (isolation: process): did not answer within {limit} ms (provider.timeout_ms); \
             its process was killed and restarts"
        ))
    }

    /// How calls reach this process.
    pub(super) fn transport(&self) -> Transport {
        if self.shm.get().is_some() {
            Transport::SharedMemory
        } else {
            Transport::Pipes
        }
    }

    /// Takes the region into use once the process has mapped it (`Mapped`),
    /// and starts the thread that collects answers to async calls; says
    /// why not otherwise (calls then go over the pipes).
    #[cfg_attr(not(target_os = "linux"), allow(unused_variables))] // `limit`: shared memory's
    pub(super) fn attach(
        self: &Arc<Self>,
        link: Option<Link>,
        answer: protocol::SharedMemory,
        name: &str,
        limit: Duration,
    ) {
        let Some(link) = link else { return };
        match answer {
            protocol::SharedMemory::Mapped => {}
            protocol::SharedMemory::Refused { reason } => {
                tracing::warn!(
                    provider = %name,
                    "the provider process cannot use shared memory ({reason}); calls go over its pipes"
                );
                return;
            }
            protocol::SharedMemory::NotOffered => return,
        }
        #[cfg(target_os = "linux")]
        {
            if self.shm.set(link).is_err() {
                return;
            }
            let (connection, name) = (self.clone(), name.to_owned());
            let collector = std::thread::Builder::new()
                .name(format!("guardhost-collector-{}", self.pid))
                .spawn(move || connection.collect(&name, limit));
            if let Err(error) = collector {
                // Without a collector async calls would wait in vain.
                self.kill(format!("could not be served (cannot start a thread: {error})"));
            }
        }
        #[cfg(not(target_os = "linux"))]
        match link {}
    }

    /// The process is gone: the callers waiting on a slot stop waiting
    /// and read their reply; the collector ends.
    pub(super) fn abandon_region(&self) {
        #[cfg(target_os = "linux")]
        if let Some(link) = self.shm.get() {
            link.abandon();
        }
    }

    /// The collector's thread: delivers the answers to async calls posted
    /// in the region until the process is gone.
    #[cfg(target_os = "linux")]
    fn collect(&self, name: &str, limit: Duration) {
        let link = self.shm.get().expect("attached");
        link.collect(
            |collected| self.deliver(collected, name),
            // Unless its answer came over the pipe meanwhile.
            |id| match self.take(id) {
                Some(reply) => {
                    let failure = self.timed_out(name, limit);
                    assert_unlocked();
                    reply.fill(Err(failure));
                    true
                }
                None => false,
            },
        );
    }

    /// Delivers the answers to async calls that have come, on this thread,
    /// right after posting the call of `reply`. When that call is the only
    /// async one in flight, its task has nothing else to wait for here:
    /// it spins up to [`ASYNC_SPIN`] for its own answer
    /// before it yields to the executor (the collector's wake-up of the
    /// task would cost a thread wake-up or two).
    #[cfg(target_os = "linux")]
    pub(super) fn sweep_for(&self, name: &str, reply: &guardhost::reply::Reply) {
        let Some(link) = self.shm.get() else { return };
        let sweep = || link.sweep(|collected| self.deliver(collected, name));
        sweep();
        if link.async_in_flight() != 1 {
            return;
        }
        let started = Instant::now();
        while !reply.is_filled() && started.elapsed() < ASYNC_SPIN {
            for _ in 0..16 {
                if link.answered() {
                    sweep();
                    break;
                }
                std::hint::spin_loop();
            }
        }
    }

    /// Fills the reply of an async call with its answer from the region;
    /// kills the process when what it wrote there breaks the protocol.
    #[cfg(target_os = "linux")]
    fn deliver(&self, collected: crate::shm::host::Collected, name: &str) {
        use crate::shm::host::Collected;
        let (id, evaluation) = match collected {
            Collected::Answer { id, answer } => (id, crate::shm::message::decode_answer(&answer)),
            Collected::Broken { id, why } => match id {
                Some(id) => (id, Err(why)),
                None => {
                    self.kill(why);
                    return;
                }
            },
        };
        let evaluation = match evaluation {
            Ok(evaluation) => {
                self.answered.store(true, Ordering::Relaxed);
                evaluation
            }
            Err(violation) => {
                self.kill(violation.clone());
                Err(ProviderFailure::error(format!(
                    "provider '{name}' (isolation: process): its process {violation}; it was killed and restarts"
                )))
            }
        };
        if let Some(reply) = self.take(id) {
            assert_unlocked();
            reply.fill(evaluation);
        }
    }
}

/// "exited with status 0", "was killed by signal 11 (SIGSEGV)".
fn describe_exit(status: ExitStatus) -> String {
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        let name = match signal {
            4 => " (SIGILL)",
            6 => " (SIGABRT)",
            7 => " (SIGBUS)",
            8 => " (SIGFPE)",
            9 => " (SIGKILL)",
            11 => " (SIGSEGV)",
            15 => " (SIGTERM)",
            _ => "",
        };
        return format!("was killed by signal {signal}{name}");
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => format!("ended ({status})"),
    }
}
