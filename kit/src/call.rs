//! Calling into a provider that may hang: every call runs on a thread of its
//! own and is abandoned when it does not answer in time.
//!
//! An abandoned thread cannot be stopped (nothing can stop a thread stuck
//! in foreign code); it stays blocked until the process exits. The kit
//! remembers which requests hung and does not send them again.

use std::sync::mpsc;
use std::thread;
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
}
