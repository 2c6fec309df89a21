//! Starting a child: what a provider keeps to start one ([`Shared`]),
//! spawning it (with a shared region to inherit when shared memory is
//! asked for), starting its reader, and waiting for its handshake.

use std::io::BufReader;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicU64;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use guardhost::ProviderInfo;
use guardhost::{ProviderSpec, Transport};

use super::child::ChildKind;
use super::reader::{read_answers, Event, Launch, Start};
use super::state::{ClientLock, Connection, Link};
use crate::protocol::{self, ToServer, PROTOCOL_VERSION};

/// How long a provider process may take to start (load and construct).
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// What a provider's calls, its supervisor and its connections share: how
/// to start its child, fixed at the first start, and the client's state
/// behind its one lock.
pub(super) struct Shared {
    pub(super) name: String,
    /// What runs as the child.
    pub(super) child: ChildKind,
    /// What the server is asked to build.
    pub(super) spec: ProviderSpec,
    /// The digest of the library bytes the first process loaded: restarts
    /// load exactly these.
    pub(super) pinned_sha256: Option<String>,
    pub(super) base_dir: PathBuf,
    pub(super) limit: Duration,
    /// The transport asked for: shared memory is tried at each start.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) transport: Transport,
    pub(super) next_id: AtomicU64,
    /// Everything that changes: see `state`.
    pub(super) client: Arc<ClientLock>,
    pub(super) supervisor: mpsc::Sender<Event>,
}

impl Shared {
    /// Starts a child and waits for it to be ready.
    pub(super) fn launch(
        &self,
        events: &mpsc::Sender<Event>,
    ) -> Result<(Arc<Connection>, ProviderInfo), Launch> {
        let mut command = self.child.command();
        let link = self.offer(&mut command);
        let mut process =
            command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().map_err(
                |e| Launch::Other(format!("cannot start the provider process {}: {e}", self.child)),
            )?;
        let (Some(stdin), Some(stdout)) = (process.stdin.take(), process.stdout.take()) else {
            let _ = process.kill();
            return Err(Launch::Other("the provider process has no pipes".into()));
        };
        let pid = process.id();
        let connection = Connection::new(self.client.clone(), process, stdin);
        let init = protocol::encode(&ToServer::Init {
            protocol: PROTOCOL_VERSION,
            spec: self.spec.clone(),
            base_dir: self.base_dir.clone(),
            pinned_sha256: self.pinned_sha256.clone(),
            framework: match self.child {
                ChildKind::Server { .. } => None,
                ChildKind::Program { .. } => Some(guardhost::FRAMEWORK_VALUE.to_owned()),
            },
            shared_memory: link.as_ref().map(offer_of),
        });
        let (child, limit) = (self.child.clone(), self.limit);
        let (ready, handshake) = mpsc::channel();
        let spawned = {
            let (connection, events) = (connection.clone(), events.clone());
            let stdout = BufReader::with_capacity(64 << 10, stdout);
            std::thread::Builder::new().name(format!("guardhost-reader-{pid}")).spawn(move || {
                read_answers(connection, Start { child, init, link, limit }, stdout, ready, events)
            })
        };
        if let Err(e) = spawned {
            connection.kill("could not be served".into());
            connection.reap();
            return Err(Launch::Other(format!(
                "cannot start the threads that talk to the provider process: {e}"
            )));
        }
        match handshake.recv_timeout(START_TIMEOUT) {
            Ok(Ok(info)) => {
                tracing::debug!(pid, provider = %info.name, "provider process ready");
                Ok((connection, info))
            }
            Ok(Err(error)) => Err(error),
            Err(_) => {
                let reason = format!("did not start within {} s", START_TIMEOUT.as_secs());
                connection.kill(reason.clone());
                Err(Launch::Other(format!(
                    "the provider process {reason} (loading and constructing the provider)"
                )))
            }
        }
    }

    /// A shared region for the child `command` starts, when shared memory
    /// is asked for and can be set up here; the child inherits its file.
    #[cfg(target_os = "linux")]
    fn offer(&self, command: &mut Command) -> Option<Link> {
        if self.transport != Transport::SharedMemory {
            return None;
        }
        match Link::new() {
            Ok(link) => {
                crate::shm::region::inherit(command, link.fd());
                Some(link)
            }
            Err(error) => {
                tracing::warn!(
                    provider = %self.name,
                    "cannot set up shared memory for the provider process ({error}); calls go over its pipes"
                );
                None
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn offer(&self, _: &mut Command) -> Option<Link> {
        None
    }
}

#[cfg(target_os = "linux")]
fn offer_of(link: &Link) -> protocol::SharedMemoryOffer {
    use std::os::fd::AsRawFd;
    protocol::SharedMemoryOffer { fd: link.fd().as_raw_fd() }
}

#[cfg(not(target_os = "linux"))]
fn offer_of(link: &Link) -> protocol::SharedMemoryOffer {
    match *link {}
}
