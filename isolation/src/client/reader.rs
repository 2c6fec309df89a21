//! The thread that reads a child's output: the handshake, then every
//! answer, until the output ends or breaks the protocol; then the calls in
//! flight fail and the supervisor hears of it (an [`Event`]).

use std::io::BufReader;
use std::process::ChildStdout;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use guardhost::ProviderFailure;
use guardhost::ProviderInfo;

use super::child::{ChildKind, SERVER_ENV};
use super::state::{assert_unlocked, Connection, Link};
use crate::protocol::{self, FrameError, FromServer, PROTOCOL_VERSION};

/// Why a start failed.
pub(super) enum Launch {
    /// The server could not build the provider: its message, and whether
    /// the constructor panicked.
    Build(String, bool),
    /// Anything else.
    Other(String),
}

/// What the supervisor hears of.
pub(super) enum Event {
    /// The process of connection `process` (its serial number) ended;
    /// `answered`: it had answered calls.
    Died { process: u64, answered: bool, reason: String },
    /// The provider was dropped.
    Shutdown,
}

/// What the thread that reads a new child's answers starts it with.
pub(super) struct Start {
    pub(super) child: ChildKind,
    /// The init frame.
    pub(super) init: Vec<u8>,
    /// The shared region offered in it, if any.
    pub(super) link: Option<Link>,
    /// The per-call limit (the collector enforces it for async calls).
    pub(super) limit: Duration,
}

/// The reader's thread: sends `ready` the handshake's outcome, then
/// delivers answers until the child's output ends.
pub(super) fn read_answers(
    connection: Arc<Connection>,
    start: Start,
    mut input: BufReader<ChildStdout>,
    ready: mpsc::Sender<Result<ProviderInfo, Launch>>,
    events: mpsc::Sender<Event>,
) {
    let handshake = handshake(&connection, start, &mut input);
    let name = match &handshake {
        Ok(info) => info.name.clone(),
        Err(_) => String::new(),
    };
    let started = handshake.is_ok();
    // The starter may have given up waiting: then this process is not used.
    if ready.send(handshake).is_err() || !started {
        connection.kill("failed to start".into());
        connection.reap();
        // The collector, if the region was taken into use, ends too.
        connection.abandon_region();
        return;
    }
    let reason = loop {
        match protocol::read_message::<FromServer>(&mut input) {
            Ok(FromServer::Answer { id, outcome }) => {
                connection.answered.store(true, Ordering::Relaxed);
                if let Some(reply) = connection.take(id) {
                    assert_unlocked();
                    reply.fill(outcome.into());
                }
            }
            Ok(other) => break connection.ended(FrameError::NotAFrame(format!("{other:?}"))),
            Err(error) => break connection.ended(error),
        }
    };
    let in_flight = connection.take_all();
    // Logged before the calls in flight are answered, so the log reads in
    // the order things happened (and `run`'s summary stays last).
    let closing = connection.closing.load(Ordering::SeqCst);
    if closing {
        tracing::debug!(pid = connection.pid, provider = %name, "provider process ended");
    } else {
        tracing::error!(
            pid = connection.pid,
            provider = %name,
            calls_in_flight = in_flight.len(),
            "provider process {reason}; it restarts"
        );
    }
    assert_unlocked();
    for reply in &in_flight {
        reply.fill(Err(ProviderFailure::error(format!(
            "provider '{name}' (isolation: process): its process {reason} while this call was in flight; it restarts"
        ))));
    }
    // The callers waiting on a slot stop waiting and read their reply,
    // filled just now; the collector ends.
    connection.abandon_region();
    if closing {
        return;
    }
    let answered = connection.answered.load(Ordering::Relaxed);
    let _ = events.send(Event::Died { process: connection.serial, answered, reason });
}

/// Sends the child its init frame and reads its hello and ready messages.
fn handshake(
    connection: &Arc<Connection>,
    start: Start,
    input: &mut BufReader<ChildStdout>,
) -> Result<ProviderInfo, Launch> {
    let Start { child, init, link, limit } = start;
    // On this thread, so the start's time limit holds even when the
    // server does not read (the pipe holds 64 KiB).
    if let Err(error) = connection.frames.send(init) {
        return Err(Launch::Other(format!("cannot send the provider process its spec: {error}")));
    }
    match protocol::read_message::<FromServer>(input) {
        Ok(FromServer::Hello { protocol, .. }) if protocol == PROTOCOL_VERSION => {}
        Ok(FromServer::Hello { protocol, version }) => {
            return Err(Launch::Other(match &child {
                ChildKind::Server { .. } => format!(
                    "the provider process (guardhost {version}) speaks provider protocol {protocol}, this \
                     host {PROTOCOL_VERSION}; point {SERVER_ENV} at the same guardhost build"
                ),
                ChildKind::Program { .. } => format!(
                    "the provider program {child} (version {version:?}) speaks provider protocol \
                     {protocol}, this host {PROTOCOL_VERSION}; its hello must say \
                     \"protocol\": {PROTOCOL_VERSION} (docs/provider-protocol.md)"
                ),
            }))
        }
        Ok(other) => return Err(Launch::Other(format!("the provider process sent {other:?} before hello"))),
        Err(error) => return Err(Launch::Other(format!("the provider process {}", connection.ended(error)))),
    }
    match protocol::read_message::<FromServer>(input) {
        Ok(FromServer::Ready { info, shared_memory }) => {
            let mut info = child.info(info).map_err(Launch::Other)?;
            connection.attach(link, shared_memory, &info.name, limit);
            info.transport = Some(connection.transport());
            Ok(info)
        }
        Ok(FromServer::Failed { error, panicked }) => Err(Launch::Build(error, panicked)),
        Ok(other) => Err(Launch::Other(format!("the provider process sent {other:?} instead of ready"))),
        Err(error) => Err(Launch::Other(format!("the provider process {}", connection.ended(error)))),
    }
}
