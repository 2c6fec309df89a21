//! A call's way: waiting for a running process, sending the call (in a
//! slot of the shared region, or over the pipe), and waiting for its
//! answer within the provider's limit; sync and async alike.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use guardhost::reply::Reply;
use guardhost::wait::{wait_until, wait_until_async};
use guardhost::{BoxFuture, Evaluation, GuardrailProvider, ProviderFailure, Ruled, Ruling};
use guardhost::{CallView, GuardrailRequest};

use super::state::{assert_unlocked, Connection, Phase};
use super::ProcessProvider;
use crate::protocol;

/// How a call was sent.
enum Sent {
    /// Over the pipe: the reader fills the reply.
    Pipe(Reply),
    /// Posted in a slot of the shared region. The reply is filled by the
    /// collector for an async call, by the pipe's reader if the answer
    /// went over the pipe, and with the error if the process died; a sync
    /// caller reads an answer in the slot itself.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Slot { slot: usize, id: u64, reply: Reply },
}

impl GuardrailProvider for ProcessProvider {
    fn name(&self) -> &str {
        &self.shared.name
    }

    fn evaluate(&self, request: &GuardrailRequest) -> Evaluation {
        self.decide(&request.view())
    }

    fn aevaluate<'a>(&'a self, request: &'a GuardrailRequest) -> BoxFuture<'a, Evaluation> {
        Box::pin(async move { self.adecide(&request.view()).await })
    }

    fn rule_view(&self, call: &CallView<'_>) -> Option<Ruled> {
        Some(self.decide(call).map(Ruling::Decision))
    }

    fn aevaluate_view<'a>(&'a self, call: &'a CallView<'a>) -> Option<BoxFuture<'a, Evaluation>> {
        Some(Box::pin(self.adecide(call)))
    }
}

impl ProcessProvider {
    fn decide(&self, call: &CallView<'_>) -> Evaluation {
        let deadline = Instant::now() + self.shared.limit;
        loop {
            let connection = match wait_until(deadline, |cx| self.poll_connection(cx)) {
                Some(connection) => connection?,
                None => return Err(self.timed_out(None)),
            };
            let Some(sent) = self.send(&connection, call, false, deadline) else { continue };
            return match sent? {
                Sent::Pipe(reply) => {
                    reply.wait(deadline).unwrap_or_else(|| Err(self.timed_out(Some(&connection))))
                }
                #[cfg(target_os = "linux")]
                Sent::Slot { slot, id, reply } => self.wait_slot(&connection, slot, id, reply, deadline),
                #[cfg(not(target_os = "linux"))]
                Sent::Slot { .. } => unreachable!("no shared memory here"),
            };
        }
    }

    async fn adecide(&self, call: &CallView<'_>) -> Evaluation {
        let deadline = Instant::now() + self.shared.limit;
        loop {
            let connection = match wait_until_async(deadline, |cx| self.poll_connection(cx)).await {
                Some(connection) => connection?,
                None => return Err(self.timed_out(None)),
            };
            return match self.send(&connection, call, true, deadline) {
                None => continue,
                Some(Err(failure)) => Err(failure),
                Some(Ok(Sent::Pipe(reply))) => {
                    let answer = reply.wait_async(deadline).await;
                    answer.unwrap_or_else(|| Err(self.timed_out(Some(&connection))))
                }
                Some(Ok(Sent::Slot { reply, .. })) => {
                    // Answers that have come meanwhile go to their tasks
                    // from here, without a hand-over to the collector; and
                    // a call alone in flight waits a moment for its own.
                    #[cfg(target_os = "linux")]
                    connection.sweep_for(&self.shared.name, &reply);
                    // The collector fails the call at its deadline.
                    reply.answered().await
                }
            };
        }
    }

    fn call_failed(&self, what: impl std::fmt::Display) -> ProviderFailure {
        ProviderFailure::error(format!("provider '{}' (isolation: process): {what}", self.shared.name))
    }

    fn timed_out(&self, connection: Option<&Connection>) -> ProviderFailure {
        match connection {
            Some(connection) => connection.timed_out(&self.shared.name, self.shared.limit),
            None => self.call_failed(format_args!(
                "its process did not start within {} ms (provider.timeout_ms)",
                self.shared.limit.as_millis()
            )),
        }
    }

    /// The running connection, or a reason to fail now; `Pending` while a
    /// process is starting, or has just died and its supervisor has not yet
    /// taken over.
    fn poll_connection(&self, cx: &mut Context<'_>) -> Poll<Result<Arc<Connection>, ProviderFailure>> {
        let mut client = self.shared.client.lock();
        match &client.phase {
            Phase::Running(connection) if !connection.is_dead() => Poll::Ready(Ok(connection.clone())),
            Phase::Running(_) | Phase::Starting => {
                client.waiting.push(cx.waker().clone());
                Poll::Pending
            }
            Phase::Down { until, reason } => {
                let wait = until.saturating_duration_since(Instant::now()).as_millis();
                let why = format!("its process is down ({reason}); the next start is in {wait} ms");
                drop(client);
                Poll::Ready(Err(self.call_failed(why)))
            }
            Phase::Closed => {
                drop(client);
                Poll::Ready(Err(self.call_failed("the provider was shut down")))
            }
        }
    }

    /// Registers a call and sends it: posted in a free slot of the shared
    /// region when there is one and the request fits, else over the pipe.
    /// `None` when the process has died since it was picked (the caller
    /// waits for its successor).
    #[cfg_attr(not(target_os = "linux"), allow(unused_variables))] // `deadline`: shared memory's
    fn send(
        &self,
        connection: &Connection,
        call: &CallView<'_>,
        asynchronous: bool,
        deadline: Instant,
    ) -> Option<Result<Sent, ProviderFailure>> {
        thread_local! {
            static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let reply = Reply::default();
        if !self.shared.client.register(connection, id, reply.clone()) {
            return None;
        }
        assert_unlocked();
        #[cfg(target_os = "linux")]
        if let Some(link) = connection.shm.get() {
            use crate::shm::message;
            let posted = BUFFER.with_borrow_mut(|buffer| {
                message::encode_request(buffer, id, asynchronous, call);
                // An async caller's answer is collected for it.
                let posted = link.post(buffer, asynchronous.then_some((id, deadline)));
                // A large request is not kept for the next call.
                if buffer.capacity() > 64 << 10 {
                    *buffer = Vec::new();
                }
                posted
            });
            if let Some(slot) = posted {
                return Some(Ok(Sent::Slot { slot, id, reply }));
            }
        }
        let frame = protocol::encode(&protocol::EvaluateRef { id, asynchronous, request: call });
        let body = frame.len() - protocol::HEADER;
        if body > protocol::MAX_FRAME as usize {
            connection.forget(id);
            return Some(Err(self.call_failed(format_args!(
                "the request is {body} bytes as JSON, more than the {} a call to a provider process may carry",
                protocol::MAX_FRAME
            ))));
        }
        if let Err(error) = connection.frames.send(frame) {
            connection.forget(id);
            return Some(Err(self.call_failed(format_args!("cannot send it the call: {error}"))));
        }
        Some(Ok(Sent::Pipe(reply)))
    }

    /// Waits for the answer to a sync call posted in `slot`.
    #[cfg(target_os = "linux")]
    fn wait_slot(
        &self,
        connection: &Connection,
        slot: usize,
        id: u64,
        reply: Reply,
        deadline: Instant,
    ) -> Evaluation {
        use crate::shm::host::Waited;
        let link = connection.shm.get().expect("the call was posted in the region");
        let from_reply =
            |reply: Reply| reply.wait(deadline).unwrap_or_else(|| Err(self.timed_out(Some(connection))));
        match link.wait(slot, deadline) {
            Waited::Answer(answer) => {
                link.release(slot);
                connection.forget(id);
                connection.answered.store(true, Ordering::Relaxed);
                crate::shm::message::decode_answer(&answer)
                    .unwrap_or_else(|violation| Err(self.violated(connection, violation)))
            }
            Waited::Piped => {
                link.release(slot);
                from_reply(reply)
            }
            // The process is gone; the reply holds why.
            Waited::Abandoned => from_reply(reply),
            Waited::Violation(violation) => Err(self.violated(connection, violation)),
            Waited::TimedOut => Err(self.timed_out(Some(connection))),
        }
    }

    /// The process broke the protocol in shared memory: it is killed (and
    /// restarts) and the call fails.
    #[cfg(target_os = "linux")]
    fn violated(&self, connection: &Connection, violation: String) -> ProviderFailure {
        connection.kill(violation.clone());
        self.call_failed(format_args!("its process {violation}; it was killed and restarts"))
    }
}
