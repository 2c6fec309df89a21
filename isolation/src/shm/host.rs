//! The host's side of the shared-memory transport: posting a call into a
//! slot, waiting for its answer (sync callers), collecting the answers to
//! async calls, and abandoning every call when the provider process is
//! gone.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::region::{self, Region, SLOTS, SLOT_BYTES};
use super::spin::Spin;
use super::state::{ABANDONED, ANSWERED, ASYNC, FREE, PHASE, PIPED, POSTED, WAITING};

/// How a sync caller's wait for its slot ended.
#[derive(Debug)]
pub(crate) enum Waited {
    /// The answer's bytes (not yet validated).
    Answer(Vec<u8>),
    /// The answer comes over the pipe.
    Piped,
    /// The provider process is gone.
    Abandoned,
    /// The process wrote something no answer looks like.
    Violation(String),
    /// The deadline passed first.
    TimedOut,
}

/// What the collector (or a sweeping caller) found.
#[derive(Debug)]
pub(crate) enum Collected {
    /// The answer to async call `id`: its bytes, not yet validated.
    Answer { id: u64, answer: Vec<u8> },
    /// The process broke the protocol (about call `id`, if one).
    Broken { id: Option<u64>, why: String },
}

/// The host's end of one provider process's region.
pub(crate) struct HostLink {
    region: Region,
    /// The region's file, which each child of this link inherits (kept
    /// open while the link lives; the mapping does not need it).
    fd: OwnedFd,
    /// Free slots, the most recently freed last (its memory is warm).
    free: Mutex<Vec<u16>>,
    /// For each async slot in flight: its call's id plus one (0: none).
    owners: Box<[AtomicU64]>,
    /// For each async slot in flight: its deadline, in nanoseconds since
    /// `epoch`. The collector enforces them, so async calls need no timer
    /// of their own.
    deadlines: Box<[AtomicU64]>,
    epoch: Instant,
    /// When the collector will look at the deadlines next (nanoseconds
    /// since `epoch`; `u64::MAX`: only when woken).
    collector_looks_at: AtomicU64,
    /// Async calls posted and not yet collected or expired.
    async_in_flight: AtomicUsize,
    /// Set when the process is gone: no answer will come.
    closed: AtomicBool,
    /// The spin budget of sync callers.
    callers: Spin,
}

impl std::fmt::Debug for HostLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostLink").field("closed", &self.closed).finish_non_exhaustive()
    }
}

impl HostLink {
    /// A new region, every slot free.
    pub(crate) fn new() -> io::Result<HostLink> {
        let (region, fd) = Region::create()?;
        Ok(HostLink {
            region,
            fd,
            free: Mutex::new((0..SLOTS as u16).rev().collect()),
            owners: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            deadlines: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            epoch: Instant::now(),
            collector_looks_at: AtomicU64::new(u64::MAX),
            async_in_flight: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            callers: Spin::default(),
        })
    }

    /// The region's file, for the child to inherit.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Posts `body` in a free slot and rings the server's bell; for an
    /// async call, `owner` is its id and deadline (its answer is then
    /// collected, and the collector gives up on it at the deadline). `None`
    /// when no slot is free or `body` is larger than a slot: the call goes
    /// over the pipe.
    pub(crate) fn post(&self, body: &[u8], owner: Option<(u64, Instant)>) -> Option<usize> {
        if body.len() > SLOT_BYTES {
            return None;
        }
        let slot = usize::from(self.free.lock().unwrap_or_else(|e| e.into_inner()).pop()?);
        let control = self.region.control();
        self.region.write(slot, body);
        control.lengths[slot].store(body.len() as u32, Ordering::Relaxed);
        let (flags, deadline) = match owner {
            Some((id, deadline)) => {
                let deadline = self.nanos(deadline).max(1);
                self.async_in_flight.fetch_add(1, Ordering::Relaxed);
                self.owners[slot].store(id + 1, Ordering::Relaxed);
                self.deadlines[slot].store(deadline, Ordering::SeqCst);
                (ASYNC, Some(deadline))
            }
            None => (0, None),
        };
        control.states[slot].store(POSTED | flags, Ordering::SeqCst);
        control.posted[slot / 64].fetch_or(1 << (slot % 64), Ordering::SeqCst);
        let server = &control.server;
        server.rings.fetch_add(1, Ordering::SeqCst);
        // A spinning server thread sees the post. An evaluating one looks
        // for it when it is done, and the server's watcher brings another
        // thread if that takes long. Otherwise wake a sleeper.
        if server.spinning.load(Ordering::SeqCst) == 0 {
            if server.busy.load(Ordering::SeqCst) > 0 {
                control.watch.arm();
            } else if server.sleepers.load(Ordering::SeqCst) > 0 {
                region::wake(&server.rings, 1);
            }
        }
        // The collector must look at this deadline in time: it does unless
        // it sleeps past it (no async call was in flight when it slept).
        if deadline.is_some_and(|deadline| self.collector_looks_at.load(Ordering::SeqCst) > deadline) {
            control.host.rings.fetch_add(1, Ordering::SeqCst);
            region::wake(&control.host.rings, 1);
        }
        Some(slot)
    }

    fn nanos(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_nanos().min(u128::from(u64::MAX - 1)) as u64
    }

    /// Waits for the answer in `slot`, posted by a sync caller, until
    /// `deadline`. The slot stays the caller's: it frees it with
    /// [`Self::release`] once the answer is read or piped, and never when
    /// the wait timed out (the process is then killed, and the region with
    /// it).
    pub(crate) fn wait(&self, slot: usize, deadline: Instant) -> Waited {
        let word = &self.region.control().states[slot];
        let done = |state: u32| match state & PHASE {
            ANSWERED | PIPED | ABANDONED => Some(state),
            _ if self.closed.load(Ordering::SeqCst) => Some(ABANDONED),
            _ => None,
        };
        let state = self.callers.wait(
            Some(deadline),
            || done(word.load(Ordering::Acquire)),
            |left| {
                // Announce the sleeper, then look once more: the server
                // wakes the word only if it sees the flag.
                let state = word.fetch_or(WAITING, Ordering::SeqCst);
                if let Some(state) = done(state) {
                    return Some(state);
                }
                region::wait(word, state | WAITING, left);
                done(word.load(Ordering::Acquire))
            },
        );
        match state.map(|state| state & PHASE) {
            None => Waited::TimedOut,
            Some(ANSWERED) => match self.take_answer(slot) {
                Ok(answer) => Waited::Answer(answer),
                Err(violation) => Waited::Violation(violation),
            },
            Some(PIPED) => Waited::Piped,
            Some(_) => Waited::Abandoned,
        }
    }

    /// Copies the answer out of `slot`.
    fn take_answer(&self, slot: usize) -> Result<Vec<u8>, String> {
        let length = self.region.control().lengths[slot].load(Ordering::Acquire) as usize;
        let mut answer = Vec::new();
        if !self.region.read(slot, length, &mut answer) {
            return Err(format!(
                "announced an answer of {length} bytes in shared memory, more than the {SLOT_BYTES} a slot holds"
            ));
        }
        Ok(answer)
    }

    /// Frees `slot` once its answer is read (or went over the pipe).
    pub(crate) fn release(&self, slot: usize) {
        self.region.control().states[slot].store(FREE, Ordering::Relaxed);
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(slot as u16);
    }

    /// The collector's loop, on a thread of its own: waits for answers to
    /// async calls and hands each to `deliver` ([`Self::sweep`]), and hands
    /// the id of each async call still unanswered at its deadline to
    /// `expire`, which says whether the call timed out (rather than being
    /// answered over the pipe); returns once the process is gone
    /// ([`Self::abandon`]). Between looks it sleeps until the provider
    /// process wakes it for an answer, or until the next deadline.
    pub(crate) fn collect(&self, mut deliver: impl FnMut(Collected), mut expire: impl FnMut(u64) -> bool) {
        let control = self.region.control();
        let bell = &control.host;
        let answered = || self.answered();
        loop {
            // No spinning here: callers sweep answers as they post, so this
            // thread is only the backstop, and a spinning thread would take
            // a CPU from them. Armed, the next answer wakes it (once,
            // whoever disarms it).
            let seen = bell.rings.load(Ordering::SeqCst);
            // Answers first: a call answered by its deadline is not failed.
            self.sweep(&mut deliver);
            let next = self.expire(&mut expire);
            if !self.closed.load(Ordering::SeqCst) && !answered() {
                bell.sleepers.store(1, Ordering::SeqCst);
                if !answered() && !self.closed.load(Ordering::SeqCst) {
                    let timeout = next.map(|next| next.saturating_duration_since(Instant::now()));
                    region::wait(&bell.rings, seen, timeout);
                }
                bell.sleepers.store(0, Ordering::SeqCst);
            }
            if self.closed.load(Ordering::SeqCst) {
                return;
            }
        }
    }

    /// Hands every async call past its deadline to `expire` (which fails it
    /// unless its answer came over the pipe) and frees its slot; returns
    /// the next deadline to look at (and publishes it for [`Self::post`]).
    fn expire(&self, expire: &mut impl FnMut(u64) -> bool) -> Option<Instant> {
        // First say "only when woken", then look: a post that the look
        // misses sees this and wakes the collector.
        self.collector_looks_at.store(u64::MAX, Ordering::SeqCst);
        let now = self.nanos(Instant::now());
        let mut next = u64::MAX;
        for (slot, deadline) in self.deadlines.iter().enumerate() {
            match deadline.load(Ordering::SeqCst) {
                0 => {}
                due if due <= now => {
                    // A sweep that took the answer meanwhile cleared the
                    // deadline, and the slot may already serve another
                    // call: only this deadline, unchanged, is this call's.
                    if deadline.compare_exchange(due, 0, Ordering::SeqCst, Ordering::SeqCst).is_err() {
                        continue;
                    }
                    // Whoever clears the owner owns the slot: here, or the
                    // sweep that took its answer.
                    let owner = self.owners[slot].swap(0, Ordering::Relaxed);
                    if owner != 0 {
                        self.async_in_flight.fetch_sub(1, Ordering::Relaxed);
                        // A call that timed out gets its process killed,
                        // which may still answer into the slot: the slot is
                        // never used again (the region goes with the
                        // process). One answered over the pipe is free.
                        if !expire(owner - 1) {
                            self.release(slot);
                        }
                    }
                }
                due => next = next.min(due),
            }
        }
        self.collector_looks_at.store(next, Ordering::SeqCst);
        (next != u64::MAX).then(|| self.epoch + Duration::from_nanos(next))
    }

    /// Hands every answer to an async call that has come to `deliver`,
    /// with its call's id (or what the process did wrong instead); an
    /// async call answered over the pipe is delivered by the pipe's reader
    /// instead (its slot stays taken until its deadline, in case that
    /// answer never comes). Any thread may sweep, the collector or a caller
    /// that has just posted: each answer goes to one of them.
    pub(crate) fn sweep(&self, mut deliver: impl FnMut(Collected)) {
        let control = self.region.control();
        for (w, word) in control.answered.iter().enumerate() {
            if word.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut bits = word.swap(0, Ordering::AcqRel);
            while bits != 0 {
                let slot = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let phase = control.states[slot].load(Ordering::Acquire) & PHASE;
                if phase == PIPED {
                    // The owner and the deadline stay: the collector frees
                    // the slot at the deadline (and fails the call then if
                    // its answer has not come).
                    continue;
                }
                // A bit without an owner is no async call in flight (the
                // only honest one is a late answer to a call that expired,
                // whose process is being killed anyway).
                let id = match self.owners[slot].swap(0, Ordering::Relaxed) {
                    0 => {
                        deliver(Collected::Broken {
                            id: None,
                            why: format!("announced an answer in slot {slot} for no async call"),
                        });
                        continue;
                    }
                    plus_one => plus_one - 1,
                };
                self.async_in_flight.fetch_sub(1, Ordering::Relaxed);
                self.deadlines[slot].store(0, Ordering::SeqCst);
                if phase != ANSWERED {
                    let why = format!("announced an answer in slot {slot} without writing it");
                    deliver(Collected::Broken { id: Some(id), why });
                    continue;
                }
                match self.take_answer(slot) {
                    Ok(answer) => {
                        self.release(slot);
                        deliver(Collected::Answer { id, answer });
                    }
                    Err(why) => deliver(Collected::Broken { id: Some(id), why }),
                }
            }
        }
    }

    /// Whether an async call's answer may be waiting to be swept.
    pub(crate) fn answered(&self) -> bool {
        self.region.control().answered.iter().any(|word| word.load(Ordering::SeqCst) != 0)
    }

    /// Async calls posted and not yet collected or expired.
    pub(crate) fn async_in_flight(&self) -> usize {
        self.async_in_flight.load(Ordering::Relaxed)
    }

    /// The process is gone: every call waiting on a slot stops waiting
    /// (each then reads its error from its reply), and the collector
    /// returns.
    pub(crate) fn abandon(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let control = self.region.control();
        for word in control.states.iter() {
            if word.load(Ordering::SeqCst) & PHASE != FREE {
                word.store(ABANDONED, Ordering::SeqCst);
                region::wake(word, u32::MAX);
            }
        }
        control.host.rings.fetch_add(1, Ordering::SeqCst);
        region::wake(&control.host.rings, u32::MAX);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_post_takes_a_free_slot_until_none_is_left_and_refuses_what_does_not_fit() {
        let link = HostLink::new().unwrap();
        let body = b"a request";
        let slots: Vec<usize> = (0..SLOTS).map(|_| link.post(body, None).expect("a free slot")).collect();
        let mut distinct = slots.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), SLOTS, "each post has a slot of its own");
        assert_eq!(link.post(body, None), None, "no slot left: the call goes over the pipe");
        link.release(slots[7]);
        assert_eq!(link.post(body, None), Some(slots[7]));
        let control = link.region.control();
        assert_eq!(control.states[slots[7]].load(Ordering::SeqCst), POSTED);
        assert_eq!(control.lengths[slots[7]].load(Ordering::SeqCst) as usize, body.len());
        // Posted bits are the server's to take: all of them are set.
        assert!(control.posted.iter().all(|word| word.load(Ordering::SeqCst) == u64::MAX));

        let fresh = HostLink::new().unwrap();
        assert_eq!(fresh.post(&vec![0; SLOT_BYTES + 1], None), None, "larger than a slot");
        assert!(fresh.post(&vec![0; SLOT_BYTES], None).is_some(), "exactly a slot");
    }

    #[test]
    fn a_sync_caller_reads_its_answer_and_a_bad_length_is_a_violation() {
        let link = HostLink::new().unwrap();
        let slot = link.post(b"question", None).unwrap();
        let control = link.region.control();
        // The server's part, by hand.
        assert!(link.region.write(slot, b"answer"));
        control.lengths[slot].store(6, Ordering::SeqCst);
        control.states[slot].store(ANSWERED, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(1);
        assert!(matches!(link.wait(slot, deadline), Waited::Answer(answer) if answer == b"answer"));
        link.release(slot);

        let slot = link.post(b"question", None).unwrap();
        control.lengths[slot].store(u32::MAX, Ordering::SeqCst);
        control.states[slot].store(ANSWERED, Ordering::SeqCst);
        match link.wait(slot, deadline) {
            Waited::Violation(why) => assert!(why.contains("more than the 16384 a slot holds"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_unanswered_sync_call_times_out_and_abandon_ends_every_wait() {
        let link = std::sync::Arc::new(HostLink::new().unwrap());
        let slot = link.post(b"question", None).unwrap();
        let started = Instant::now();
        assert!(matches!(link.wait(slot, started + Duration::from_millis(50)), Waited::TimedOut));
        assert!(started.elapsed() >= Duration::from_millis(50));

        let waiter = {
            let link = link.clone();
            std::thread::spawn(move || link.wait(slot, Instant::now() + Duration::from_secs(30)))
        };
        std::thread::sleep(Duration::from_millis(50));
        link.abandon();
        assert!(matches!(waiter.join().unwrap(), Waited::Abandoned));
        // A post after the end finds it at once.
        let late = link.post(b"question", None).unwrap();
        assert!(matches!(link.wait(late, Instant::now() + Duration::from_secs(30)), Waited::Abandoned));
    }

    #[test]
    fn answers_to_async_calls_are_collected_once_and_a_lie_is_reported() {
        let link = HostLink::new().unwrap();
        let control = link.region.control();
        let deadline = Instant::now() + Duration::from_secs(30);
        let slot = link.post(b"question", Some((41, deadline))).unwrap();
        assert_eq!(control.states[slot].load(Ordering::SeqCst), POSTED | ASYNC);
        answer_silently(&link, slot);
        // A bit for a slot where no async call waits.
        let other = (slot + 1) % SLOTS;
        control.answered[other / 64].fetch_or(1 << (other % 64), Ordering::SeqCst);
        let mut collected = Vec::new();
        link.sweep(|c| collected.push(format!("{c:?}")));
        link.sweep(|c| collected.push(format!("{c:?}")));
        assert_eq!(collected.len(), 2, "{collected:?}");
        assert!(
            collected.iter().any(|c| c.contains("id: 41") && c.contains("answer: [97, 110")),
            "{collected:?}"
        );
        assert!(
            collected.iter().any(|c| c.contains("in slot") && c.contains("for no async call")),
            "{collected:?}"
        );
    }

    #[test]
    fn the_collector_fails_an_async_call_at_its_deadline() {
        let link = std::sync::Arc::new(HostLink::new().unwrap());
        let (expired, seen) = std::sync::mpsc::channel();
        let collector = {
            let link = link.clone();
            std::thread::spawn(move || {
                link.collect(
                    |_| {},
                    |id| {
                        expired.send((id, Instant::now())).unwrap();
                        true
                    },
                )
            })
        };
        // The collector sleeps with no deadline in view; a post wakes it.
        std::thread::sleep(Duration::from_millis(20));
        let deadline = Instant::now() + Duration::from_millis(100);
        link.post(b"question", Some((7, deadline))).unwrap();
        let (id, at) = seen.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(id, 7);
        assert!(at >= deadline);
        link.abandon();
        collector.join().unwrap();
    }

    /// The server's part of answering async call `slot`, by hand: the
    /// answer and its bit, but no ring and no wake.
    fn answer_silently(link: &HostLink, slot: usize) {
        let control = link.region.control();
        assert!(link.region.write(slot, b"answer"));
        control.lengths[slot].store(6, Ordering::SeqCst);
        control.states[slot].store(ANSWERED, Ordering::SeqCst);
        control.answered[slot / 64].fetch_or(1 << (slot % 64), Ordering::SeqCst);
    }

    /// A collector on its own thread that reports, as text, each call it
    /// delivers (`Collected` debug-printed) and each it fails (`expired id`).
    pub(crate) fn collector(
        link: &std::sync::Arc<HostLink>,
    ) -> (std::thread::JoinHandle<()>, std::sync::mpsc::Receiver<String>) {
        let (sent, seen) = std::sync::mpsc::channel();
        let link = link.clone();
        let thread = std::thread::spawn(move || {
            let expired = sent.clone();
            link.collect(
                |c| sent.send(format!("{c:?}")).unwrap(),
                |id| {
                    expired.send(format!("expired {id}")).unwrap();
                    true
                },
            )
        });
        (thread, seen)
    }

    #[test]
    fn an_answer_that_came_unannounced_by_its_deadline_is_delivered_not_failed() {
        let link = std::sync::Arc::new(HostLink::new().unwrap());
        let (collector, seen) = collector(&link);
        let slot = link.post(b"question", Some((9, Instant::now() + Duration::from_millis(150)))).unwrap();
        // The collector sleeps until the deadline; the answer comes without
        // waking it.
        std::thread::sleep(Duration::from_millis(30));
        answer_silently(&link, slot);
        let first = seen.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(first.contains("id: 9") && first.contains("answer:"), "{first}");
        link.abandon();
        collector.join().unwrap();
        assert_eq!(seen.try_recv().ok(), None, "nothing expired");
    }
}
