//! The provider process's side of the shared-memory transport: a pool of
//! threads that take posted requests, evaluate them and write the answers
//! back.
//!
//! At most one thread spins, waiting for the next post; the others sleep on
//! the server's bell. The host wakes a sleeper only when no thread spins or
//! evaluates: a thread that evaluates takes the next request itself when it
//! is done, so a fast provider under load keeps one thread busy and wakes
//! no one. A thread that answers becomes the spinner if no one else is,
//! before its answer is visible, so the caller's next post finds it
//! spinning.
//!
//! A slow evaluation must not hold up the requests behind it: a watcher
//! thread, armed when a request is posted to a pool whose threads are busy
//! and none spins (by the host), or left waiting by a thread that takes
//! another (by that thread), looks every [`STALL`] whether requests wait
//! and none was taken since it last looked; if so, it wakes a sleeper, or
//! starts one more thread when every thread is busy (up to
//! [`MAX_SERVER_THREADS`](crate::protocol::MAX_SERVER_THREADS)).
//! It goes back to sleep once no request waits. Calls one at a time never
//! arm it: a spinner takes each.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::message;
use super::region::{self, Region};
use super::spin::Spin;
use super::state::{ANSWERED, ASYNC, PIPED, WAITING};
use crate::protocol::MAX_SERVER_THREADS;
use crate::protocol::{self, FrameWriter, FromServer, Outcome};
use guardhost::{evaluate_here, GuardrailProvider, ProviderFailure};

/// How long requests may wait with none taken before the watcher brings
/// another thread to them.
pub const STALL: Duration = Duration::from_millis(1);

/// The server's end of the region, and the pool that serves it.
pub(crate) struct ServerLink<W: Write> {
    region: Region,
    provider: Arc<dyn GuardrailProvider>,
    /// Where answers too large for a slot go.
    pipe: Arc<FrameWriter<W>>,
    spin: Spin,
    threads: AtomicUsize,
    /// Requests taken so far.
    taken: AtomicU64,
}

impl<W: Write + Send + 'static> ServerLink<W> {
    /// Starts serving `region` with two threads and the watcher.
    pub(crate) fn start(
        region: Region,
        provider: Arc<dyn GuardrailProvider>,
        pipe: Arc<FrameWriter<W>>,
    ) -> io::Result<()> {
        let link = Arc::new(ServerLink {
            region,
            provider,
            pipe,
            spin: Spin::default(),
            threads: AtomicUsize::new(0),
            taken: AtomicU64::new(0),
        });
        {
            let link = link.clone();
            std::thread::Builder::new().name("guardhost-shm-watch".into()).spawn(move || link.watch())?;
        }
        link.spawn()?;
        link.spawn()
    }

    fn spawn(self: &Arc<Self>) -> io::Result<()> {
        let n = self.threads.fetch_add(1, Ordering::SeqCst);
        let link = self.clone();
        let spawned =
            std::thread::Builder::new().name(format!("guardhost-shm-{n}")).spawn(move || link.work());
        if spawned.is_err() {
            self.threads.fetch_sub(1, Ordering::SeqCst);
        }
        spawned.map(drop)
    }

    /// Serves requests for the life of the process (it ends when its input
    /// from the host does).
    fn work(self: Arc<Self>) {
        let mut request = Vec::new();
        let mut answer = Vec::new();
        let mut spinner = false;
        loop {
            let slot = self.next(spinner);
            spinner = self.answer(slot, &mut request, &mut answer);
            self.region.control().server.busy.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Takes a posted request: spinning if `spinner` or no one else spins,
    /// else sleeping.
    fn next(&self, mut spinner: bool) -> usize {
        let bell = &self.region.control().server;
        loop {
            if let Some(slot) = self.take() {
                if spinner {
                    bell.spinning.store(0, Ordering::SeqCst);
                }
                return slot;
            }
            if !spinner {
                spinner = bell.spinning.compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst).is_ok();
            }
            let found = if spinner {
                self.spin.wait(None, || self.take(), |_| self.sleep(&mut spinner))
            } else {
                self.sleep(&mut spinner)
            };
            if let Some(slot) = found {
                if spinner {
                    bell.spinning.store(0, Ordering::SeqCst);
                }
                return slot;
            }
        }
    }

    /// Sleeps on the server's bell (no longer spinning), unless a request
    /// is posted meanwhile; takes one if there is one when it wakes.
    fn sleep(&self, spinner: &mut bool) -> Option<usize> {
        let bell = &self.region.control().server;
        let seen = bell.rings.load(Ordering::SeqCst);
        bell.sleepers.fetch_add(1, Ordering::SeqCst);
        if std::mem::take(spinner) {
            bell.spinning.store(0, Ordering::SeqCst);
        }
        let found = self.take();
        if found.is_none() {
            region::wait(&bell.rings, seen, None);
        }
        bell.sleepers.fetch_sub(1, Ordering::SeqCst);
        found.or_else(|| self.take())
    }

    /// Claims one posted request: clears its bit (the claim), counts this
    /// thread busy (before it stops spinning or sleeping, so the host never
    /// sees the pool idle while a request is being taken), has the watcher
    /// watch the requests it leaves waiting, and returns its slot.
    fn take(&self) -> Option<usize> {
        let control = self.region.control();
        for (w, word) in control.posted.iter().enumerate() {
            let mut bits = word.load(Ordering::Relaxed);
            while bits != 0 {
                let bit = bits & bits.wrapping_neg();
                // SeqCst: ordered against an answer's look at the waiting
                // requests (see `nudge_collector`).
                let before = word.fetch_and(!bit, Ordering::SeqCst);
                if before & bit != 0 {
                    control.server.busy.fetch_add(1, Ordering::SeqCst);
                    self.taken.fetch_add(1, Ordering::Relaxed);
                    // Others left waiting behind this one, posted while a
                    // thread spun (so the host armed nothing): watch them.
                    if before & !bit != 0 || self.waiting() {
                        control.watch.arm();
                    } else {
                        self.nudge_collector();
                    }
                    return Some(w * 64 + bit.trailing_zeros() as usize);
                }
                bits = before & !bit;
            }
        }
        None
    }

    /// Whether a request is posted and not taken.
    fn waiting(&self) -> bool {
        self.region.control().posted.iter().any(|word| word.load(Ordering::SeqCst) != 0)
    }

    /// Wakes the host's collector if it sleeps while answers to async calls
    /// wait for it: those whose wake [`Self::answer`] held back because
    /// requests were waiting. Called once no request waits (by the thread
    /// that took the last), and by the watcher while some wait for long.
    ///
    /// An answer sets its bit, then looks whether requests wait; a taker
    /// clears the last request's bit, then looks for answers (all SeqCst):
    /// one of the two sees the other, so no answer is left unwoken.
    fn nudge_collector(&self) {
        let control = self.region.control();
        let host = &control.host;
        if host.sleepers.load(Ordering::SeqCst) != 0
            && control.answered.iter().any(|word| word.load(Ordering::SeqCst) != 0)
            && host.sleepers.swap(0, Ordering::SeqCst) != 0
        {
            region::wake(&host.rings, 1);
        }
    }

    /// The watcher: while requests wait, looks every [`STALL`] whether
    /// any was taken meanwhile; if none was, brings a thread to them.
    fn watch(self: Arc<Self>) {
        let control = self.region.control();
        let watch = &control.watch;
        let bell = &control.server;
        loop {
            let seen = watch.rings.load(Ordering::SeqCst);
            if watch.watching.load(Ordering::SeqCst) == 0 {
                region::wait(&watch.rings, seen, None);
                continue;
            }
            let before = self.taken.load(Ordering::Relaxed);
            std::thread::sleep(STALL);
            self.nudge_collector();
            if !self.waiting() {
                watch.watching.store(0, Ordering::SeqCst);
                // A post that found the watcher armed did not arm it again:
                // look once more.
                if self.waiting() {
                    watch.watching.store(1, Ordering::SeqCst);
                }
                continue;
            }
            if self.taken.load(Ordering::Relaxed) != before {
                continue;
            }
            let threads = self.threads.load(Ordering::SeqCst);
            if bell.sleepers.load(Ordering::SeqCst) > 0 {
                region::wake(&bell.rings, 1);
            } else if bell.busy.load(Ordering::SeqCst) as usize >= threads && threads < MAX_SERVER_THREADS {
                // Every thread is evaluating (none merely waits for a CPU
                // while spinning or waking up): one more.
                if let Err(error) = self.spawn() {
                    tracing::warn!("cannot start another shared-memory thread: {error}");
                }
            }
        }
    }

    /// Evaluates the request in `slot` and answers it; whether this thread
    /// became the spinner.
    fn answer(&self, slot: usize, request: &mut Vec<u8>, answer: &mut Vec<u8>) -> bool {
        let control = self.region.control();
        let length = control.lengths[slot].load(Ordering::Acquire) as usize;
        request.clear();
        let decoded = if self.region.read(slot, length, request) {
            message::decode_request(request)
        } else {
            Err(format!("a request of {length} bytes, more than a slot holds"))
        };
        let (id, evaluation) = match decoded {
            Ok((id, asynchronous, request)) => (id, evaluate_here(&*self.provider, &request, asynchronous)),
            // The host never posts such a thing; its call fails rather than
            // the server.
            Err(error) => (
                u64::MAX,
                Err(ProviderFailure::error(format!(
                    "the provider process could not read the request in shared memory: {error}"
                ))),
            ),
        };
        message::encode_answer(answer, &evaluation);
        let phase = if self.region.write(slot, answer) {
            control.lengths[slot].store(answer.len() as u32, Ordering::Relaxed);
            ANSWERED
        } else {
            let frame = protocol::encode(&FromServer::Answer { id, outcome: Outcome::from(evaluation) });
            if let Err(error) = self.pipe.send(frame) {
                // The host is gone; this process ends with its input.
                tracing::debug!("cannot send an answer over the pipe: {error}");
            }
            PIPED
        };
        let bell = &control.server;
        let spinner = bell.spinning.compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst).is_ok();
        let word = &control.states[slot];
        let before = word.swap(phase, Ordering::SeqCst);
        if before & WAITING != 0 {
            region::wake(word, 1);
        }
        if before & ASYNC != 0 {
            control.answered[slot / 64].fetch_or(1 << (slot % 64), Ordering::SeqCst);
            let host = &control.host;
            host.rings.fetch_add(1, Ordering::SeqCst);
            // The collector, if asleep, is woken once for all the answers
            // that come before it looks, and only once no request waits:
            // while the host posts, its async callers sweep the answers
            // themselves. The thread that takes the last waiting request
            // wakes it then (`nudge_collector`), and the watcher while
            // requests wait long.
            if !self.waiting() && host.sleepers.swap(0, Ordering::SeqCst) != 0 {
                region::wake(&host.rings, 1);
            }
        }
        spinner
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::IntoRawFd;
    use std::time::Instant;

    use serde_json::Map;

    use super::*;
    use crate::shm::host::HostLink;
    use guardhost::{BoxFuture, Evaluation};
    use guardhost::{CallView, GuardrailDecision, GuardrailRequest, ToolCallRequest};

    struct AllowAll;
    impl GuardrailProvider for AllowAll {
        fn name(&self) -> &str {
            "allow-all"
        }
        fn evaluate(&self, _: &GuardrailRequest) -> Evaluation {
            Ok(GuardrailDecision { allow: true, reasons: Vec::new(), policy_id: None, metadata: Map::new() })
        }
        fn aevaluate<'a>(&'a self, request: &'a GuardrailRequest) -> BoxFuture<'a, Evaluation> {
            Box::pin(async move { self.evaluate(request) })
        }
    }

    fn request(id: u64, asynchronous: bool) -> Vec<u8> {
        let call = ToolCallRequest::new("read_file", Map::new());
        let view = CallView::new(&call, &call.tool_call.args, None, "2026-12-02T00:00:00+00:00").unwrap();
        let mut bytes = Vec::new();
        message::encode_request(&mut bytes, id, asynchronous, &view);
        bytes
    }

    /// An answer to an async call that comes while another request waits
    /// does not wake the host's collector (the caller that posts sweeps);
    /// the thread that takes that last request does, even when it is a
    /// sync call whose answer wakes only its caller.
    #[test]
    fn taking_the_last_waiting_request_wakes_the_collector_an_answer_left_asleep() {
        let host = Arc::new(HostLink::new().unwrap());
        let fd = host.fd().try_clone_to_owned().unwrap().into_raw_fd();
        let server = ServerLink {
            region: Region::open(fd).unwrap(),
            provider: Arc::new(AllowAll),
            pipe: Arc::new(FrameWriter::new(io::sink())),
            spin: Spin::default(),
            threads: AtomicUsize::new(0),
            taken: AtomicU64::new(0),
        };
        let (collector, seen) = crate::shm::host::tests::collector(&host);
        let asynchronous = host.post(&request(5, true), Some((5, Instant::now() + Duration::from_secs(60))));
        let sync = host.post(&request(6, false), None);
        // The collector is asleep until the deadline a minute away.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(server.take(), asynchronous);
        let (mut scratch, mut answer) = (Vec::new(), Vec::new());
        server.answer(asynchronous.unwrap(), &mut scratch, &mut answer);
        assert_eq!(server.region.control().host.sleepers.load(Ordering::SeqCst), 1, "still asleep");
        assert_eq!(server.take(), sync);
        let delivered = seen.recv_timeout(Duration::from_secs(10)).expect("the collector was woken");
        assert!(delivered.contains("id: 5") && delivered.contains("answer:"), "{delivered}");
        host.abandon();
        collector.join().unwrap();
    }
}
