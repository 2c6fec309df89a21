//! Per-call timeouts (`provider.timeout_ms`): a provider that does not
//! answer in time is a provider error, so `fail_closed` decides the call.
//!
//! An evaluation that may hang has to run on a thread the caller can stop
//! waiting for: [`TimeoutProvider`] hands each call (a copy of its request)
//! to a small, fixed pool of worker threads and waits at most the limit, on
//! the sync path with a blocking receive, on the async path with a timer
//! future (any executor). Nothing can stop a thread stuck in foreign code,
//! so a hung call keeps its worker. A worker whose call has outlived the
//! limit (its caller gave up on it) counts as stuck: when every worker is,
//! a new call fails at once ("no free evaluation thread") instead of
//! waiting out its own limit in the queue behind them, and when the queue is
//! full, too; the number of threads never grows past the pool.

use std::sync::atomic::{AtomicU64, Ordering};
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
    workers: Arc<Workers>,
}

/// When each worker's current call started, in nanoseconds after `epoch`,
/// plus one (`0`: idle).
struct Workers {
    epoch: Instant,
    since: [AtomicU64; WORKERS],
}

impl Workers {
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX - 1) + 1
    }

    /// (in a call, in a call for longer than `limit`)
    fn busy_and_stuck(&self, limit: Duration) -> (usize, usize) {
        let now = self.now();
        let limit = u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX);
        self.since
            .iter()
            .map(|s| s.load(Ordering::SeqCst))
            .filter(|&s| s != 0)
            .fold((0, 0), |(busy, stuck), s| (busy + 1, stuck + usize::from(now.saturating_sub(s) > limit)))
    }
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
        let workers =
            Arc::new(Workers { epoch: Instant::now(), since: std::array::from_fn(|_| AtomicU64::new(0)) });
        for i in 0..WORKERS {
            let (queue, inner, workers) = (queue.clone(), inner.clone(), workers.clone());
            let spawned =
                std::thread::Builder::new().name(format!("guardhost-eval-{i}")).spawn(move || loop {
                    let job = match queue.lock().unwrap_or_else(|e| e.into_inner()).recv() {
                        Ok(job) => job,
                        Err(_) => return, // the provider was dropped
                    };
                    if job.reply.is_abandoned() {
                        continue; // its caller has given up already
                    }
                    workers.since[i].store(workers.now(), Ordering::SeqCst);
                    let answer = evaluate_here(&*inner, &job.request, matches!(job.path, Path::Async));
                    workers.since[i].store(0, Ordering::SeqCst);
                    job.reply.fill(answer);
                });
            spawned?;
        }
        Ok(TimeoutProvider { inner, limit, jobs, workers })
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

    /// Hands a job to a free worker, or fails at once when there is none:
    /// every worker stuck past the limit, or the queue full.
    fn submit(&self, request: &GuardrailRequest, path: Path) -> Result<Reply, ProviderFailure> {
        let (busy, stuck) = self.workers.busy_and_stuck(self.limit);
        let queued = if stuck == WORKERS {
            None
        } else {
            let reply = Reply::default();
            let job = Job { request: request.clone(), path, reply: reply.clone() };
            match self.jobs.try_send(job) {
                Ok(()) => return Ok(reply),
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => Some(QUEUE),
            }
        };
        let why = match queued {
            None => format!("all {WORKERS} are stuck in calls that outlived the limit (stuck ones never come back)"),
            Some(waiting) => format!(
                "{busy} of {WORKERS} are in calls ({stuck} stuck past the limit, and stuck ones never come back) and {waiting} more calls wait"
            ),
        };
        tracing::error!(provider = %self.inner.name(), "no free evaluation thread: {why}");
        Err(ProviderFailure::error(format!(
            "provider '{}' has no free evaluation thread: {why} (provider.timeout_ms {} ms)",
            self.inner.name(),
            self.limit.as_millis()
        )))
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

    fn reads_tool_input(&self) -> bool {
        self.inner.reads_tool_input()
    }

    fn reads_attribution(&self) -> bool {
        self.inner.reads_attribution()
    }

    // The messages are the inner provider's (the timeout's own failure
    // names the provider and the limit only). `never_blocks` is not
    // forwarded: asked directly, the inner provider would escape the limit.
    fn messages_quote_input(&self) -> bool {
        self.inner.messages_quote_input()
    }
}
