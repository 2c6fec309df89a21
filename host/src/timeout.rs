//! Per-call timeouts (`provider.timeout_ms`): a provider that does not
//! answer in time is a provider error, so `fail_closed` decides the call.
//!
//! An evaluation that may hang has to run on a thread the caller can stop
//! waiting for: [`TimeoutProvider`] hands each call (a copy of its request)
//! to a small, fixed pool of worker threads and waits at most the limit, on
//! the sync path with a blocking receive, on the async path with a timer
//! future (any executor). Nothing can stop a thread stuck in foreign code,
//! so a hung call keeps its worker; when every worker is stuck, new calls
//! fail at once ("no free evaluation thread") instead of queueing or
//! starting threads: the number of threads never grows past the pool.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::provider::{block_on, BoxFuture, Evaluation, GuardrailProvider, ProviderFailure};
use crate::request::GuardrailRequest;

/// Worker threads per provider with a timeout.
pub const WORKERS: usize = 4;

/// Calls that may wait for a free worker; beyond this, a call fails at
/// once. Time spent waiting counts against the limit.
pub const QUEUE: usize = 64;

/// Which provider method a job calls.
#[derive(Debug, Clone, Copy)]
enum Path {
    Sync,
    Async,
}

/// Where a worker puts its answer, and who to wake.
#[derive(Default)]
struct Slot {
    answer: Option<Evaluation>,
    waker: Option<Waker>,
}

type Reply = Arc<Mutex<Slot>>;

struct Job {
    request: GuardrailRequest,
    path: Path,
    reply: Reply,
    /// A blocking receiver for the sync path.
    done: Option<SyncSender<()>>,
}

/// A provider whose calls give up after a limit.
pub struct TimeoutProvider {
    inner: Arc<dyn GuardrailProvider>,
    limit: Duration,
    jobs: SyncSender<Job>,
    busy: Arc<AtomicUsize>,
}

impl std::fmt::Debug for TimeoutProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimeoutProvider")
            .field("provider", &self.inner.name())
            .field("limit", &self.limit)
            .finish()
    }
}

impl TimeoutProvider {
    /// Wraps `inner`: each call gives up after `limit`. Fails when the
    /// evaluation threads cannot be started.
    pub fn new(inner: Arc<dyn GuardrailProvider>, limit: Duration) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::sync_channel::<Job>(QUEUE);
        let queue = Arc::new(Mutex::new(queue));
        let busy = Arc::new(AtomicUsize::new(0));
        for i in 0..WORKERS {
            let (queue, inner, busy) = (queue.clone(), inner.clone(), busy.clone());
            let spawned =
                std::thread::Builder::new().name(format!("guardhost-eval-{i}")).spawn(move || loop {
                    let job = match queue.lock().unwrap_or_else(|e| e.into_inner()).recv() {
                        Ok(job) => job,
                        Err(_) => return, // the provider was dropped
                    };
                    if Arc::strong_count(&job.reply) == 1 {
                        continue; // its caller has given up already
                    }
                    busy.fetch_add(1, Ordering::SeqCst);
                    // A panic (a provider written in Rust against the host's trait)
                    // answers this call with an error; the worker goes on.
                    let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match job.path {
                        Path::Sync => inner.evaluate(&job.request),
                        Path::Async => block_on(inner.aevaluate(&job.request)),
                    }))
                    .unwrap_or_else(|_| {
                        Err(ProviderFailure::Error {
                            message: format!("provider '{}' panicked", inner.name()),
                            panicked: true,
                        })
                    });
                    busy.fetch_sub(1, Ordering::SeqCst);
                    let waker = {
                        let mut slot = job.reply.lock().unwrap_or_else(|e| e.into_inner());
                        slot.answer = Some(answer);
                        slot.waker.take()
                    };
                    if let Some(waker) = waker {
                        waker.wake();
                    }
                    if let Some(done) = job.done {
                        let _ = done.try_send(());
                    }
                });
            spawned?;
        }
        Ok(TimeoutProvider { inner, limit, jobs, busy })
    }

    /// The limit.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    fn timed_out(&self) -> ProviderFailure {
        ProviderFailure::error(format!(
            "provider '{}' did not answer within {} ms (provider.timeout_ms)",
            self.inner.name(),
            self.limit.as_millis()
        ))
    }

    /// Hands a job to a free worker, or fails at once when there is none.
    fn submit(
        &self,
        request: &GuardrailRequest,
        path: Path,
        done: Option<SyncSender<()>>,
    ) -> Result<Reply, ProviderFailure> {
        let reply = Reply::default();
        let job = Job { request: request.clone(), path, reply: reply.clone(), done };
        match self.jobs.try_send(job) {
            Ok(()) => Ok(reply),
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                let stuck = self.busy.load(Ordering::SeqCst);
                tracing::error!(
                    provider = %self.inner.name(),
                    "no free evaluation thread: {stuck} of {WORKERS} are in calls and {QUEUE} calls wait"
                );
                Err(ProviderFailure::error(format!(
                    "provider '{}' has no free evaluation thread: {stuck} of {WORKERS} are in calls (stuck ones \
                     never come back) and {QUEUE} more calls wait (provider.timeout_ms {} ms)",
                    self.inner.name(),
                    self.limit.as_millis()
                )))
            }
        }
    }
}

impl GuardrailProvider for TimeoutProvider {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn evaluate(&self, request: &GuardrailRequest) -> Evaluation {
        let (done, wait) = mpsc::sync_channel(1);
        let reply = self.submit(request, Path::Sync, Some(done))?;
        match wait.recv_timeout(self.limit) {
            Ok(()) => reply
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .answer
                .take()
                .unwrap_or_else(|| Err(self.timed_out())),
            Err(_) => Err(self.timed_out()),
        }
    }

    fn aevaluate<'a>(&'a self, request: &'a GuardrailRequest) -> BoxFuture<'a, Evaluation> {
        Box::pin(async move {
            let reply = self.submit(request, Path::Async, None)?;
            let answer = Answer { reply, timer: futures_timer::Delay::new(self.limit) }.await;
            answer.unwrap_or_else(|| Err(self.timed_out()))
        })
    }
}

/// The worker's answer, or `None` when the timer fires first.
struct Answer {
    reply: Reply,
    timer: futures_timer::Delay,
}

impl Future for Answer {
    type Output = Option<Evaluation>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        {
            let mut slot = self.reply.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(answer) = slot.answer.take() {
                return Poll::Ready(Some(answer));
            }
            slot.waker = Some(cx.waker().clone());
        }
        match Pin::new(&mut self.timer).poll(cx) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}
