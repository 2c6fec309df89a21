//! What a provider knows of its processes, in one struct behind one lock,
//! and [`Connection`], one process as the calls and threads share it.
//!
//! Everything about a [`ProcessProvider`](super::ProcessProvider)'s
//! processes that changes after its start sits in [`Client`], behind one
//! mutex ([`ClientLock`]): which process runs (or why none does), the calls
//! waiting for one to start, every call in flight and each live process's
//! handle. The provider, each connection and the threads that serve it share
//! that one lock, so there is no order between locks of the client to keep.
//!
//! The rule is what may be done while it is held: read or change
//! [`Client`], and kill a process (a signal), nothing else. No reply is
//! filled, no waker woken, no frame sent, no shared region touched and no
//! sleep taken under it: each of those takes a lock of its own (a reply's,
//! the frame writer's, the region's free-slot list) or may wait, so the
//! code takes what it needs out of [`Client`], lets go, then acts. The lock
//! is thus a leaf: nothing is locked under it, and it is never taken twice
//! by one thread. Debug builds check this where it could go wrong: each
//! taking of the lock, and each place that fills a reply or sends a call,
//! asks [`assert_unlocked`], so the tests check the rule as they run.
//!
//! A connection's flags (`dead`, `closing`, `answered`) and what is set
//! once (why it was killed, its shared region) are atomics and
//! [`OnceLock`](std::sync::OnceLock)s, read without the lock.

use std::collections::HashMap;
use std::io::BufWriter;
use std::process::{Child, ChildStdin};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::Waker;
use std::time::Instant;

use guardhost::reply::Reply;

use crate::protocol::FrameWriter;

/// The client's state: see the [module](self) for the rule of its lock.
pub(super) struct Client {
    /// Whether a process runs, and which.
    pub(super) phase: Phase,
    /// Calls waiting for a starting process.
    pub(super) waiting: Vec<Waker>,
    /// Every call in flight, by id.
    pub(super) calls: HashMap<u64, InFlight>,
    /// The handle of each process started and not yet reaped, by its
    /// connection's serial number.
    pub(super) processes: HashMap<u64, Child>,
}

/// Whether a process runs, and which.
pub(super) enum Phase {
    Running(Arc<Connection>),
    Starting,
    Down { until: Instant, reason: String },
    Closed,
}

/// A call in flight: the process it was sent to (its connection's serial
/// number) and where its answer goes.
pub(super) struct InFlight {
    pub(super) process: u64,
    pub(super) reply: Reply,
}

/// The one lock over [`Client`], shared by a provider and its connections.
pub(super) struct ClientLock(Mutex<Client>);

impl ClientLock {
    /// A client in `phase`, with nothing in flight.
    pub(super) fn new(phase: Phase) -> Arc<ClientLock> {
        Arc::new(ClientLock(Mutex::new(Client {
            phase,
            waiting: Vec::new(),
            calls: HashMap::new(),
            processes: HashMap::new(),
        })))
    }

    /// Takes the lock (a poisoned lock is taken as it is: every change
    /// under it is a whole map operation or assignment).
    pub(super) fn lock(&self) -> Locked<'_> {
        assert_unlocked();
        let guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        held::set(true);
        Locked(guard)
    }

    /// Registers call `id` on the connection `process`; false when that
    /// process is gone or being killed (the call waits for its successor).
    pub(super) fn register(&self, connection: &Connection, id: u64, reply: Reply) -> bool {
        let mut client = self.lock();
        // `dead` is set under this lock before the calls of a process that
        // ended are failed, so no call is left behind on it.
        if connection.is_dead() {
            return false;
        }
        client.calls.insert(id, InFlight { process: connection.serial, reply });
        true
    }

    /// Takes call `id` out of flight if it went to the process `process`:
    /// its reply, for the answer.
    pub(super) fn take(&self, process: u64, id: u64) -> Option<Reply> {
        let mut client = self.lock();
        match client.calls.get(&id) {
            Some(call) if call.process == process => client.calls.remove(&id).map(|call| call.reply),
            _ => None,
        }
    }

    /// Takes every call in flight on the process `process` out of flight.
    pub(super) fn take_all(&self, process: u64) -> Vec<Reply> {
        let mut client = self.lock();
        let mut taken = Vec::new();
        client.calls.retain(|_, call| {
            let on_it = call.process == process;
            if on_it {
                taken.push(call.reply.clone());
            }
            !on_it
        });
        taken
    }

    /// Moves to `phase` and wakes the calls waiting for a start; false
    /// when the provider was shut down meanwhile.
    pub(super) fn set_phase(&self, phase: Phase) -> bool {
        let waiting = {
            let mut client = self.lock();
            if matches!(client.phase, Phase::Closed) {
                return false;
            }
            client.phase = phase;
            std::mem::take(&mut client.waiting)
        };
        waiting.into_iter().for_each(Waker::wake);
        true
    }

    /// The running connection, if any (whether or not it is dying).
    pub(super) fn running(&self) -> Option<Arc<Connection>> {
        match &self.lock().phase {
            Phase::Running(connection) => Some(connection.clone()),
            _ => None,
        }
    }
}

/// The host's end of a shared region (none off Linux).
#[cfg(target_os = "linux")]
pub(super) type Link = crate::shm::host::HostLink;
/// The host's end of a shared region (none off Linux).
#[cfg(not(target_os = "linux"))]
pub(super) type Link = std::convert::Infallible;

/// Connections made by this process so far: each one's serial number.
static SERIALS: AtomicU64 = AtomicU64::new(0);

/// One child process. The calls in flight on it, and its handle, are in
/// the client's state ([`ClientLock`]), under its serial number.
pub(super) struct Connection {
    pub(super) pid: u32,
    /// Tells it from every other connection of this process (a pid may be
    /// reused once a process is reaped).
    pub(super) serial: u64,
    pub(super) client: Arc<ClientLock>,
    pub(super) frames: FrameWriter<BufWriter<ChildStdin>>,
    pub(super) answered: AtomicBool,
    /// Set when the process is gone or being killed.
    dead: AtomicBool,
    /// Set when its provider is dropped: its end is no failure.
    pub(super) closing: AtomicBool,
    /// Why the host killed it, when it did.
    pub(super) killed_because: OnceLock<String>,
    /// The shared region, once the process has mapped it.
    pub(super) shm: OnceLock<Link>,
}

impl Connection {
    /// The connection to the process whose handle `process` the client
    /// now holds (see [`ClientLock`]), under a new serial number.
    pub(super) fn new(
        client: Arc<ClientLock>,
        process: std::process::Child,
        stdin: ChildStdin,
    ) -> Arc<Connection> {
        let serial = SERIALS.fetch_add(1, Ordering::Relaxed);
        let pid = process.id();
        client.lock().processes.insert(serial, process);
        Arc::new(Connection {
            pid,
            serial,
            client,
            frames: FrameWriter::new(BufWriter::with_capacity(64 << 10, stdin)),
            answered: AtomicBool::new(false),
            dead: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            killed_because: OnceLock::new(),
            shm: OnceLock::new(),
        })
    }

    /// Whether the process is gone or being killed: no new call goes to it.
    pub(super) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// Takes call `id` out of flight: its reply, unless it was answered
    /// (or failed) already.
    pub(super) fn take(&self, id: u64) -> Option<guardhost::reply::Reply> {
        self.client.take(self.serial, id)
    }

    /// Marks the process gone and takes every call in flight on it: no
    /// call may wait on it any more.
    pub(super) fn take_all(&self) -> Vec<guardhost::reply::Reply> {
        {
            // Under the lock, so a call registering now either sees the
            // mark or is taken here.
            let _client = self.client.lock();
            self.dead.store(true, Ordering::SeqCst);
        }
        self.client.take_all(self.serial)
    }

    /// Ends the process because its provider is gone.
    pub(super) fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        self.kill("was shut down with its provider".into());
    }

    /// Kills the process (once), saying why.
    pub(super) fn kill(&self, reason: String) {
        if self.killed_because.set(reason).is_err() {
            return;
        }
        // No new call goes to it from now on.
        self.dead.store(true, Ordering::SeqCst);
        if let Some(process) = self.client.lock().processes.get_mut(&self.serial) {
            let _ = process.kill();
        }
    }

    /// Forgets call `id` (it could not be sent).
    pub(super) fn forget(&self, id: u64) {
        self.take(id);
    }
}

/// [`Client`], locked; lets go when dropped.
pub(super) struct Locked<'a>(MutexGuard<'a, Client>);

impl std::ops::Deref for Locked<'_> {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.0
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.0
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        held::set(false);
    }
}

/// Checks (in debug builds) that this thread does not hold a client's
/// lock: called before anything that takes another lock or may wait.
pub(super) fn assert_unlocked() {
    debug_assert!(
        !held::get(),
        "a provider process client's lock is held here: nothing that locks or waits may run under it"
    );
}

/// Whether this thread holds a client's lock (tracked in debug builds).
mod held {
    #[cfg(debug_assertions)]
    thread_local! {
        static HELD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    #[cfg(debug_assertions)]
    pub(super) fn set(held: bool) {
        HELD.with(|cell| cell.set(held));
    }

    #[cfg(debug_assertions)]
    pub(super) fn get() -> bool {
        HELD.with(|cell| cell.get())
    }

    #[cfg(not(debug_assertions))]
    pub(super) fn set(_: bool) {}

    #[cfg(not(debug_assertions))]
    pub(super) fn get() -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_is_tracked_while_held_and_released_on_drop() {
        let lock = ClientLock::new(Phase::Starting);
        assert_unlocked();
        {
            let client = lock.lock();
            assert!(matches!(client.phase, Phase::Starting));
            assert!(held::get() || !cfg!(debug_assertions));
        }
        assert!(!held::get());
        assert_unlocked();
    }

    #[test]
    #[cfg(debug_assertions)]
    fn work_under_the_lock_that_may_lock_or_wait_is_caught() {
        let lock = ClientLock::new(Phase::Starting);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _client = lock.lock();
            assert_unlocked();
        }));
        assert!(caught.is_err(), "a check under the lock must fail");
        // The guard let go as the panic unwound.
        assert!(!held::get());
        drop(lock.lock());
    }

    #[test]
    #[cfg(debug_assertions)]
    fn taking_the_lock_twice_on_one_thread_is_caught_not_deadlocked() {
        let (a, b) = (ClientLock::new(Phase::Starting), ClientLock::new(Phase::Closed));
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _a = a.lock();
            let _b = b.lock();
        }));
        assert!(caught.is_err(), "a second client lock under the first must fail");
        assert!(!held::get());
    }

    #[test]
    fn a_call_is_taken_only_for_the_process_it_went_to() {
        let lock = ClientLock::new(Phase::Starting);
        lock.lock().calls.insert(7, InFlight { process: 1, reply: Reply::default() });
        lock.lock().calls.insert(8, InFlight { process: 2, reply: Reply::default() });
        assert!(lock.take(2, 7).is_none(), "an answer from another process takes nothing");
        assert!(lock.take(1, 7).is_some());
        assert!(lock.take(1, 7).is_none(), "a call is answered once");
        assert_eq!(lock.take_all(1).len(), 0);
        assert_eq!(lock.take_all(2).len(), 1);
        assert!(lock.lock().calls.is_empty());
    }

    #[test]
    fn a_closed_client_stays_closed() {
        let lock = ClientLock::new(Phase::Closed);
        assert!(!lock.set_phase(Phase::Starting));
        assert!(matches!(lock.lock().phase, Phase::Closed));
        let lock = ClientLock::new(Phase::Starting);
        assert!(lock.set_phase(Phase::Down { until: Instant::now(), reason: "test".into() }));
        assert!(matches!(lock.lock().phase, Phase::Down { .. }));
    }
}
