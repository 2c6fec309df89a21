//! Waiting for something another thread makes ready, with a deadline:
//! blocking this thread (the sync path) or as a future (the async path, on
//! any executor).

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

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
pub fn thread_waker() -> Waker {
    with_thread_waker(Waker::clone)
}

thread_local! {
    /// This thread's waker, made once (a call on the async path would
    /// otherwise allocate one).
    static WAKER: Waker = Waker::from(Arc::new(Unpark(std::thread::current())));
}

/// Calls `f` with the waker of the current thread.
pub fn with_thread_waker<R>(f: impl FnOnce(&Waker) -> R) -> R {
    WAKER.with(f)
}

/// Polls `poll` on this thread until it is ready or `deadline` passes
/// (`None`), parking in between.
pub fn wait_until<T>(deadline: Instant, mut poll: impl FnMut(&mut Context<'_>) -> Poll<T>) -> Option<T> {
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
pub fn wait_until_async<T>(
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
