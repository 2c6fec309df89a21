//! The provider server: `guardhost provider-server`, the child process of an
//! isolated provider. It loads the provider the host names and answers
//! evaluations on stdin/stdout until stdin closes.

use std::io::{self, BufRead, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use super::protocol::{
    self, FrameError, FrameWriter, FromServer, Outcome, SharedMemory, SharedMemoryOffer, ToServer,
    PROTOCOL_VERSION,
};
use guardhost::Isolation;
use guardhost::{evaluate_here, GuardrailProvider};
use guardhost::{instantiate_with, BuildError, Instantiation};
use guardhost::{LoadError, LoadErrorKind};

pub use crate::protocol::MAX_SERVER_THREADS;

/// Why the server stopped before its input ended.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The host spoke out of turn or not in this protocol.
    #[error("the host {0}")]
    Protocol(String),
    /// The provider could not be built (the host was told why).
    #[error("{0}")]
    Build(String),
    /// Writing to the host failed.
    #[error("cannot write to the host: {0}")]
    Io(#[from] io::Error),
}

/// Serves one provider over `input` and `output` until `input` ends
/// (`Ok`): the body of `guardhost provider-server`.
pub fn serve(
    mut input: impl BufRead + Send + 'static,
    mut output: impl Write + Send + 'static,
) -> Result<(), ServeError> {
    protocol::write_message(
        &mut output,
        &FromServer::Hello { protocol: PROTOCOL_VERSION, version: env!("CARGO_PKG_VERSION").into() },
    )?;
    let (mut spec, base_dir, pinned, offer) = match protocol::read_message::<ToServer>(&mut input) {
        Ok(ToServer::Init { protocol, spec, base_dir, pinned_sha256, shared_memory, .. })
            if protocol == PROTOCOL_VERSION =>
        {
            (spec, base_dir, pinned_sha256, shared_memory)
        }
        Ok(ToServer::Init { protocol, .. }) => {
            let error = format!(
                "the host speaks provider protocol {protocol}, this server {PROTOCOL_VERSION}: \
                 run the host and the server from the same guardhost build"
            );
            protocol::write_message(
                &mut output,
                &FromServer::Failed { error: error.clone(), panicked: false },
            )?;
            return Err(ServeError::Protocol(error));
        }
        Ok(other) => return Err(ServeError::Protocol(format!("sent {other:?} before init"))),
        Err(FrameError::Closed) => return Ok(()),
        Err(error) => return Err(ServeError::Protocol(error.to_string())),
    };
    // Here the provider runs in process; the host keeps time.
    spec.isolation = Isolation::InProcess;
    spec.timeout_ms = None;
    let pinned_here = spec.sha256.is_none() && pinned.is_some();
    if pinned_here {
        spec.sha256 = pinned;
    }
    let how = Instantiation { content_addressed: true, ..Instantiation::default() };
    let loaded = match instantiate_with(&spec, &base_dir, &how) {
        Ok(loaded) => loaded,
        Err(error) => {
            let panicked = matches!(error, BuildError::Constructor { panicked: true, .. });
            let error = match error {
                BuildError::Load(LoadError {
                    path,
                    kind: LoadErrorKind::DigestMismatch { expected, found },
                    ..
                }) if pinned_here => format!(
                    "{} changed since this provider's process first loaded it (SHA-256 {expected}, now \
                     {found}), so it is not loaded again; put the original back, or reload the config to \
                     build a provider from the new file",
                    path.display()
                ),
                error => error.to_string(),
            };
            protocol::write_message(&mut output, &FromServer::Failed { error: error.clone(), panicked })?;
            return Err(ServeError::Build(error));
        }
    };
    let info = serde_json::to_value(&loaded.info).expect("provider info serialises");
    #[cfg_attr(not(target_os = "linux"), allow(unused_variables))] // no region elsewhere
    let (region, shared_memory) = map_region(offer);
    protocol::write_message(&mut output, &FromServer::Ready { info, shared_memory })?;
    tracing::debug!(provider = %loaded.provider.name(), "provider server ready");

    let answers = Arc::new(FrameWriter::new(io::BufWriter::with_capacity(64 << 10, output)));
    #[cfg(target_os = "linux")]
    if let Some(region) = region {
        super::shm::server::ServerLink::start(region, loaded.provider.clone(), answers.clone())?;
    }
    let (done, outcome) = mpsc::channel();
    let workers = Arc::new(Workers {
        input: Mutex::new(input),
        answers,
        provider: loaded.provider,
        reading: AtomicUsize::new(0),
        threads: AtomicUsize::new(0),
        done,
    });
    workers.spawn()?;
    workers.spawn()?;
    // The first worker to stop (its input ended or broke) ends the server,
    // even while others are stuck in the provider.
    outcome.recv().unwrap_or(Ok(()))
}

/// Maps the shared-memory region the host offered, if it did.
#[cfg(target_os = "linux")]
fn map_region(offer: Option<SharedMemoryOffer>) -> (Option<super::shm::region::Region>, SharedMemory) {
    let Some(offer) = offer else { return (None, SharedMemory::NotOffered) };
    match super::shm::region::Region::open(offer.fd) {
        Ok(region) => (Some(region), SharedMemory::Mapped),
        Err(reason) => (None, SharedMemory::Refused { reason }),
    }
}

#[cfg(not(target_os = "linux"))]
fn map_region(offer: Option<SharedMemoryOffer>) -> (Option<()>, SharedMemory) {
    let refused = || SharedMemory::Refused { reason: "shared memory is only used on Linux".into() };
    (None, offer.map_or(SharedMemory::NotOffered, |_| refused()))
}

/// What the evaluation threads share. Each takes a turn at reading the
/// next call, then evaluates it while another thread reads: a call goes
/// from the pipe to the provider without a hand-over between threads. When
/// the last thread free to read starts evaluating, it starts another, so
/// calls are evaluated as concurrently as they arrive, up to
/// [`MAX_SERVER_THREADS`].
struct Workers<R, W: Write> {
    input: Mutex<R>,
    answers: Arc<FrameWriter<W>>,
    provider: Arc<dyn GuardrailProvider>,
    /// Threads reading or waiting to read (not evaluating).
    reading: AtomicUsize,
    threads: AtomicUsize,
    done: mpsc::Sender<Result<(), ServeError>>,
}

impl<R: BufRead + Send + 'static, W: Write + Send + 'static> Workers<R, W> {
    /// Starts one more worker thread.
    fn spawn(self: &Arc<Self>) -> io::Result<()> {
        let n = self.threads.fetch_add(1, Ordering::SeqCst);
        self.reading.fetch_add(1, Ordering::SeqCst);
        let workers = self.clone();
        let spawned = std::thread::Builder::new().name(format!("guardhost-server-{n}")).spawn(move || {
            let _ = workers.done.send(workers.work());
        });
        if spawned.is_err() {
            self.threads.fetch_sub(1, Ordering::SeqCst);
            self.reading.fetch_sub(1, Ordering::SeqCst);
        }
        spawned.map(drop)
    }

    /// Reads and answers calls until the input ends (`Ok`) or breaks.
    fn work(self: &Arc<Self>) -> Result<(), ServeError> {
        loop {
            let message = protocol::read_message::<ToServer>(
                &mut *self.input.lock().unwrap_or_else(|e| e.into_inner()),
            );
            let (id, asynchronous, request) = match message {
                Ok(ToServer::Evaluate { id, asynchronous, request }) => (id, asynchronous, request),
                Ok(ToServer::Init { .. }) => return Err(ServeError::Protocol("sent init twice".into())),
                Err(FrameError::Closed) => return Ok(()),
                Err(error) => return Err(ServeError::Protocol(error.to_string())),
            };
            // This thread evaluates now; someone must go on reading.
            if self.reading.fetch_sub(1, Ordering::SeqCst) == 1
                && self.threads.load(Ordering::SeqCst) < MAX_SERVER_THREADS
            {
                if let Err(error) = self.spawn() {
                    tracing::warn!("cannot start another evaluation thread: {error}");
                }
            }
            let evaluation = evaluate_here(&*self.provider, &request, asynchronous);
            let frame = protocol::encode(&FromServer::Answer { id, outcome: Outcome::from(evaluation) });
            // A broken output means the host is gone; its input ends too.
            self.answers.send(frame)?;
            self.reading.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_region_the_server_cannot_map_is_refused_saying_why_and_calls_take_the_pipes() {
        assert_eq!(map_region(None).1, SharedMemory::NotOffered);
        let (region, answer) = map_region(Some(SharedMemoryOffer { fd: -1 }));
        assert!(region.is_none());
        match answer {
            SharedMemory::Refused { reason } => assert!(reason.contains("not a file descriptor"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }
}
