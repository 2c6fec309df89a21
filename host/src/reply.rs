//! One answer handed from the thread that computes it to a caller that waits
//! for it with a deadline: blocking (the sync path) or as a future (the async
//! path, on any executor). Used by per-call timeouts and by isolated
//! providers.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use crate::provider::Evaluation;

/// A waker that unparks a thread.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker for the current thread, for [`std::thread::park`].
pub(crate) fn thread_waker() -> Waker {
    Waker::from(Arc::new(Unpark(std::thread::current())))
}

/// Polls `poll` on this thread until it is ready or `deadline` passes
/// (`None`), parking in between.
pub(crate) fn wait_until<T>(
    deadline: Instant,
    mut poll: impl FnMut(&mut Context<'_>) -> Poll<T>,
) -> Option<T> {
    let waker = thread_waker();
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(value) = poll(&mut cx) {
            return Some(value);
        }
        let now = Instant::now();
        if now >= deadline {
            // An answer that came while the time ran out still counts.
            return match poll(&mut cx) {
                Poll::Ready(value) => Some(value),
                Poll::Pending => None,
            };
        }
        std::thread::park_timeout(deadline - now);
    }
}

/// [`wait_until`] as a future: ready with `None` when `deadline` passes
/// first. Needs no particular executor. The timer is set only when the
/// first poll finds nothing (setting one wakes the timer's thread).
pub(crate) fn wait_until_async<T>(
    deadline: Instant,
    mut poll: impl FnMut(&mut Context<'_>) -> Poll<T>,
) -> impl Future<Output = Option<T>> {
    let mut timer: Option<futures_timer::Delay> = None;
    std::future::poll_fn(move |cx| {
        if let Poll::Ready(value) = poll(cx) {
            return Poll::Ready(Some(value));
        }
        let timer = timer.get_or_insert_with(|| {
            futures_timer::Delay::new(deadline.saturating_duration_since(Instant::now()))
        });
        match std::pin::Pin::new(timer).poll(cx) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
}

#[derive(Default)]
struct Slot {
    answer: Option<Evaluation>,
    waker: Option<Waker>,
}

/// Where one evaluation's answer goes. Clones share the slot.
#[derive(Clone, Default)]
pub(crate) struct Reply(Arc<Mutex<Slot>>);

impl Reply {
    /// Whether the caller gave up (only this end is left).
    pub(crate) fn is_abandoned(&self) -> bool {
        Arc::strong_count(&self.0) == 1
    }

    /// Whether the answer is in (and not yet taken).
    pub(crate) fn is_filled(&self) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).answer.is_some()
    }

    /// Stores the answer and wakes the caller. The first answer wins.
    pub(crate) fn fill(&self, answer: Evaluation) {
        let waker = {
            let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if slot.answer.is_some() {
                return;
            }
            slot.answer = Some(answer);
            slot.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn poll(&self, cx: &mut Context<'_>) -> Poll<Evaluation> {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match slot.answer.take() {
            Some(answer) => Poll::Ready(answer),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    /// Blocks until the answer comes or `deadline` passes (`None`).
    pub(crate) fn wait(&self, deadline: Instant) -> Option<Evaluation> {
        wait_until(deadline, |cx| self.poll(cx))
    }

    /// Waits for the answer as a future, with no deadline of its own: for a
    /// caller whose answer is sure to come (someone else keeps the time).
    pub(crate) async fn answered(&self) -> Evaluation {
        std::future::poll_fn(|cx| self.poll(cx)).await
    }

    /// [`Reply::wait`] as a future.
    pub(crate) async fn wait_async(&self, deadline: Instant) -> Option<Evaluation> {
        wait_until_async(deadline, |cx| self.poll(cx)).await
    }
}
