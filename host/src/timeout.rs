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

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::provider::{evaluate_here, BoxFuture, Evaluation, GuardrailProvider, ProviderFailure};
use crate::reply::Reply;
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

struct Job {
    request: GuardrailRequest,
    path: Path,
    reply: Reply,
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
                    if job.reply.is_abandoned() {
                        continue; // its caller has given up already
                    }
                    busy.fetch_add(1, Ordering::SeqCst);
                    let answer = evaluate_here(&*inner, &job.request, matches!(job.path, Path::Async));
                    busy.fetch_sub(1, Ordering::SeqCst);
                    job.reply.fill(answer);
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
    fn submit(&self, request: &GuardrailRequest, path: Path) -> Result<Reply, ProviderFailure> {
        let reply = Reply::default();
        let job = Job { request: request.clone(), path, reply: reply.clone() };
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
        let deadline = Instant::now() + self.limit;
        let reply = self.submit(request, Path::Sync)?;
        reply.wait(deadline).unwrap_or_else(|| Err(self.timed_out()))
    }

    fn aevaluate<'a>(&'a self, request: &'a GuardrailRequest) -> BoxFuture<'a, Evaluation> {
        Box::pin(async move {
            let deadline = Instant::now() + self.limit;
            let reply = self.submit(request, Path::Async)?;
            reply.wait_async(deadline).await.unwrap_or_else(|| Err(self.timed_out()))
        })
    }
}
