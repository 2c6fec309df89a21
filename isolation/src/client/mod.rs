//! The host's side: [`ProcessProvider`], a provider that lives in a child
//! process.
//!
//! Each module leans only on those listed after it:
//!
//! - `call`: a call's way, from waiting for a running process to its
//!   answer;
//! - this file: [`ProcessProvider`], its start and its end;
//! - `supervisor`: restarts after a death, with [`backoff`];
//! - `launch`: what a provider keeps to start a child, and starting one;
//! - `reader`: the thread that reads a child's handshake and answers;
//! - `connection`: a child's end, a call's timeout, its shared region;
//! - `state`: what the provider knows of its processes, one struct behind
//!   one lock, what may be done under it, and a process's connection;
//! - `child`: what runs as the child, and what its `ready` message says.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use guardhost::{BuildError, ProviderInfo};
use guardhost::{Isolation, ProviderSpec, Transport};

mod call;
mod child;
mod connection;
mod launch;
mod reader;
mod state;
mod supervisor;

use child::ChildKind;
use launch::Shared;
use reader::{Event, Launch};
use state::{ClientLock, Phase};
use supervisor::supervise;

pub use child::SERVER_ENV;
pub use connection::ASYNC_SPIN;
pub use launch::START_TIMEOUT;
pub use supervisor::{backoff, restarts, MAX_BACKOFF};

/// The per-call limit when `provider.timeout_ms` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(5000);

/// A provider in a child process (`provider.isolation: process`).
///
/// Calls from any number of threads and tasks are multiplexed over the
/// child's stdin/stdout, each with an id. When the child crashes, exits,
/// writes something that is not a frame, or leaves a call unanswered past
/// the limit (it is then killed), every call in flight fails with a provider
/// error (so `fail_closed` decides it) and the child is restarted: at once
/// after a child that had answered calls, then after a backoff growing from
/// 100 ms to [`MAX_BACKOFF`] while starts keep failing. A call made while a
/// child is starting waits for it within its own limit; a call made during
/// a backoff fails at once.
pub struct ProcessProvider {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ProcessProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessProvider")
            .field("provider", &self.shared.name)
            .field("limit", &self.shared.limit)
            .finish_non_exhaustive()
    }
}

impl ProcessProvider {
    /// Starts the provider of `spec` in a child process running `program`
    /// (see [`server_program`](crate::launcher::server_program)) and waits until it is constructed; a
    /// construction error is the same error as in process. A spec with a
    /// `command` runs that program instead (see [`Self::start_program`]).
    pub fn start(
        spec: &ProviderSpec,
        base_dir: &Path,
        program: PathBuf,
    ) -> Result<(Self, ProviderInfo), BuildError> {
        if spec.command.is_some() {
            return Self::start_program(spec, base_dir);
        }
        Self::start_child(spec, base_dir, ChildKind::Server { program })
    }

    /// Starts the provider program of `spec.command` (see
    /// [`ProviderSpec::command`]) in the directory `base_dir` and waits
    /// until it says it is ready; its `failed` message is the error.
    pub fn start_program(spec: &ProviderSpec, base_dir: &Path) -> Result<(Self, ProviderInfo), BuildError> {
        let argv = spec.command.clone().unwrap_or_default();
        let Some(program) = argv.first() else {
            return Err(BuildError::Isolation { message: "`provider.command` names no program".into() });
        };
        // A path with a directory in it is the config directory's, as the
        // arguments are (the child runs there); a bare name is looked up
        // on PATH.
        let program = if Path::new(program).components().count() > 1 {
            guardhost::paths::join_relative(base_dir, Path::new(program))
        } else {
            PathBuf::from(program)
        };
        let child = ChildKind::Program { program, dir: base_dir.to_path_buf(), argv };
        Self::start_child(spec, base_dir, child)
    }

    fn start_child(
        spec: &ProviderSpec,
        base_dir: &Path,
        child: ChildKind,
    ) -> Result<(Self, ProviderInfo), BuildError> {
        spec.validate().map_err(|message| BuildError::Spec { message })?;
        let limit = spec.call_limit().unwrap_or(DEFAULT_TIMEOUT);
        let mut child_spec = spec.clone();
        child_spec.isolation = Isolation::InProcess;
        child_spec.timeout_ms = None;
        child_spec.transport = None;
        let transport = match (&child, spec.transport) {
            (ChildKind::Server { .. }, None | Some(Transport::SharedMemory)) if cfg!(target_os = "linux") => {
                Transport::SharedMemory
            }
            _ => Transport::Pipes,
        };
        let (events, receiver) = mpsc::channel();
        let mut shared = Shared {
            name: String::new(),
            child,
            spec: child_spec,
            pinned_sha256: None,
            base_dir: base_dir.to_path_buf(),
            limit,
            transport,
            next_id: AtomicU64::new(0),
            client: ClientLock::new(Phase::Starting),
            supervisor: events.clone(),
        };
        let (connection, mut info) = shared.launch(&events).map_err(|error| match error {
            Launch::Build(message, panicked) => match &shared.child {
                ChildKind::Server { .. } => BuildError::InProviderProcess { message, panicked },
                ChildKind::Program { argv, .. } => {
                    BuildError::ProgramRefused { program: argv.join(" "), message }
                }
            },
            Launch::Other(message) => BuildError::Isolation { message },
        })?;
        // Restarts load exactly these bytes.
        shared.pinned_sha256 = info.sha256.clone();
        shared.name = info.name.clone();
        shared.client.lock().phase = Phase::Running(connection.clone());
        let shared = Arc::new(shared);
        let weak = Arc::downgrade(&shared);
        let supervisor = std::thread::Builder::new()
            .name("guardhost-supervisor".into())
            .spawn(move || supervise(weak, receiver, events));
        if let Err(e) = supervisor {
            shared.client.lock().phase = Phase::Closed;
            connection.close();
            return Err(BuildError::Isolation {
                message: format!("cannot start the supervisor thread: {e}"),
            });
        }
        info.isolation = Isolation::Process;
        info.timeout_ms = Some(limit.as_millis() as u64);
        Ok((ProcessProvider { shared }, info))
    }

    /// The per-call limit.
    pub fn limit(&self) -> Duration {
        self.shared.limit
    }

    /// The child's process id, while one is running.
    pub fn pid(&self) -> Option<u32> {
        self.shared.client.running().map(|connection| connection.pid)
    }

    /// Waits up to `timeout` until a child is running; whether one is.
    pub fn wait_running(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.pid().is_some() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// How calls reach the running process (`None` while none runs).
    pub fn transport(&self) -> Option<Transport> {
        self.shared.client.running().map(|connection| connection.transport())
    }
}

impl Drop for ProcessProvider {
    fn drop(&mut self) {
        let previous = std::mem::replace(&mut self.shared.client.lock().phase, Phase::Closed);
        let _ = self.shared.supervisor.send(Event::Shutdown);
        if let Phase::Running(connection) = previous {
            connection.close();
        }
    }
}
