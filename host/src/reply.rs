//! One answer handed from the thread that computes it to a caller that waits
//! for it with a deadline: blocking (the sync path) or as a future (the async
//! path, on any executor). Used by per-call timeouts and by isolated
//! providers.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::provider::Evaluation;
use crate::wait::{wait_until, wait_until_async};

#[derive(Default)]
struct Slot {
    answer: Option<Evaluation>,
    waker: Option<Waker>,
}

/// Where one evaluation's answer goes. Clones share the slot.
#[derive(Clone, Default)]
pub struct Reply(Arc<Mutex<Slot>>);

impl Reply {
    /// Whether the caller gave up (only this end is left).
    pub fn is_abandoned(&self) -> bool {
        Arc::strong_count(&self.0) == 1
    }

    /// Whether the answer is in (and not yet taken).
    pub fn is_filled(&self) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).answer.is_some()
    }

    /// Stores the answer and wakes the caller. The first answer wins.
    pub fn fill(&self, answer: Evaluation) {
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
    pub fn wait(&self, deadline: Instant) -> Option<Evaluation> {
        wait_until(deadline, |cx| self.poll(cx))
    }

    /// Waits for the answer as a future, with no deadline of its own: for a
    /// caller whose answer is sure to come (someone else keeps the time).
    pub async fn answered(&self) -> Evaluation {
        std::future::poll_fn(|cx| self.poll(cx)).await
    }

    /// [`Reply::wait`] as a future.
    pub async fn wait_async(&self, deadline: Instant) -> Option<Evaluation> {
        wait_until_async(deadline, |cx| self.poll(cx)).await
    }
}
