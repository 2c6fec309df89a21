//! Calling into a provider that may hang: every call runs on a thread of its
//! own and is abandoned when it does not answer in time.
//!
//! An abandoned thread cannot be stopped (nothing can stop a thread stuck
//! in foreign code); it stays blocked until the process exits. The kit
//! remembers which requests hung and does not send them again.

use std::future::Future;
use std::pin::pin;
use std::sync::mpsc;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

/// A call that did not return in time, or whose thread could not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NoAnswer {
    /// No answer within the limit.
    Hung(Duration),
    /// The thread could not be started, or died without answering.
    Lost(String),
}

impl std::fmt::Display for NoAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoAnswer::Hung(limit) => write!(f, "no answer within {} ms", limit.as_millis()),
            NoAnswer::Lost(why) => write!(f, "{why}"),
        }
    }
}

/// Runs `f` on a new thread and waits at most `limit` for its result.
pub(crate) fn with_deadline<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, NoAnswer> {
    let (sender, receiver) = mpsc::sync_channel(1);
    thread::Builder::new()
        .name("guardhost-conformance".into())
        .spawn(move || {
            // The receiver is gone only when the call was abandoned.
            let _ = sender.send(f());
        })
        .map_err(|e| NoAnswer::Lost(format!("cannot start a thread for the call: {e}")))?;
    match receiver.recv_timeout(limit) {
        Ok(value) => Ok(value),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(NoAnswer::Hung(limit)),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Err(NoAnswer::Lost("the call's thread ended without an answer".into()))
        }
    }
}

/// Wakes a parked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` to completion on this thread, parking between polls. A
/// provider's future must not need the host's runtime (the ABI's rule), so
/// this is all the executor the kit needs.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_in_time_is_returned() {
        assert_eq!(with_deadline(Duration::from_secs(5), || 7), Ok(7));
    }

    #[test]
    fn a_hung_call_is_abandoned() {
        let result = with_deadline(Duration::from_millis(20), || thread::sleep(Duration::from_secs(3600)));
        assert_eq!(result, Err(NoAnswer::Hung(Duration::from_millis(20))));
    }

    #[test]
    fn block_on_drives_a_future_woken_from_another_thread() {
        let (sender, receiver) = std::sync::mpsc::channel::<Waker>();
        let woken = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = woken.clone();
        let waker_thread = thread::spawn(move || {
            let waker = receiver.recv().unwrap();
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            waker.wake();
        });
        let value = block_on(std::future::poll_fn(|cx| {
            if woken.load(std::sync::atomic::Ordering::SeqCst) {
                Poll::Ready(42)
            } else {
                let _ = sender.send(cx.waker().clone());
                Poll::Pending
            }
        }));
        assert_eq!(value, 42);
        waker_thread.join().unwrap();
    }
}
