//! The host's side: [`ProcessProvider`], a provider that lives in a child
//! process.

use std::collections::HashMap;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::protocol::{self, FrameError, FrameWriter, FromServer, ToServer, PROTOCOL_VERSION};
use guardhost::config::{Isolation, ProviderSpec, Transport};
use guardhost::instantiate::{BuildError, ProviderInfo};
use guardhost::provider::{BoxFuture, Evaluation, GuardrailProvider, ProviderFailure};
use guardhost::reply::Reply;
use guardhost::request::{CallView, GuardrailRequest};
use guardhost::wait::{wait_until, wait_until_async};

/// The per-call limit when `provider.timeout_ms` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(5000);

/// How long a provider process may take to start (load and construct).
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest wait between restarts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// How long an async call alone in flight over shared memory waits for its
/// answer on its task's thread before it yields.
pub const ASYNC_SPIN: Duration = Duration::from_micros(20);

/// The environment variable that names the program to run providers in
/// (`guardhost`, or `guardhost-provider-server`), for programs that embed
/// the host library.
pub const SERVER_ENV: &str = "GUARDHOST_BIN";

/// Provider processes restarted by this process so far.
static RESTARTS: AtomicU64 = AtomicU64::new(0);

/// How many provider processes this process has restarted (after a crash,
/// an exit, a kill for a timeout or garbage), all providers together: for
/// metrics.
pub fn restarts() -> u64 {
    RESTARTS.load(Ordering::Relaxed)
}

/// The wait before restart attempt `failures` (1 for the first failure in a
/// row): none for the first, then 100 ms doubling up to [`MAX_BACKOFF`].
pub fn backoff(failures: u32) -> Duration {
    match failures {
        0 | 1 => Duration::ZERO,
        n => Duration::from_millis(100u64.saturating_mul(1 << (n - 2).min(16))).min(MAX_BACKOFF),
    }
}

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

struct Shared {
    name: String,
    /// What runs as the child.
    child: ChildKind,
    /// What the server is asked to build.
    spec: ProviderSpec,
    /// The digest of the library bytes the first process loaded: restarts
    /// load exactly these.
    pinned_sha256: Option<String>,
    base_dir: PathBuf,
    limit: Duration,
    /// The transport asked for: shared memory is tried at each start.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    transport: Transport,
    next_id: AtomicU64,
    lifecycle: Mutex<Lifecycle>,
    supervisor: mpsc::Sender<Event>,
}

struct Lifecycle {
    state: State,
    /// Calls waiting for a starting process.
    waiting: Vec<Waker>,
}

enum State {
    Running(Arc<Connection>),
    Starting,
    Down { until: Instant, reason: String },
    Closed,
}

enum Event {
    /// The process `pid` ended; `answered`: it had answered calls.
    Died {
        pid: u32,
        answered: bool,
        reason: String,
    },
    Shutdown,
}

/// One child process and the calls in flight on it.
struct Connection {
    process: Mutex<Child>,
    pid: u32,
    frames: FrameWriter<BufWriter<ChildStdin>>,
    pending: Mutex<Pending>,
    answered: AtomicBool,
    /// Set when the process is gone (with `Pending::gone`) or being killed.
    dead: AtomicBool,
    /// Set when its provider is dropped: its end is no failure.
    closing: AtomicBool,
    /// Why the host killed it, when it did.
    killed_because: Mutex<Option<String>>,
    /// The shared region, once the process has mapped it.
    shm: std::sync::OnceLock<Link>,
}

/// The host's end of a shared region (none off Linux).
#[cfg(target_os = "linux")]
type Link = super::shm::host::HostLink;
#[cfg(not(target_os = "linux"))]
type Link = std::convert::Infallible;

#[derive(Default)]
struct Pending {
    calls: HashMap<u64, Reply>,
    /// Set once the process is gone: no call may wait on it any more.
    gone: Option<String>,
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
        let limit = guardhost::instantiate::call_limit(spec)?.unwrap_or(DEFAULT_TIMEOUT);
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
            lifecycle: Mutex::new(Lifecycle { state: State::Starting, waiting: Vec::new() }),
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
        shared.lifecycle.get_mut().unwrap_or_else(|e| e.into_inner()).state = State::Running(connection);
        let shared = Arc::new(shared);
        let weak = Arc::downgrade(&shared);
        let supervisor = std::thread::Builder::new()
            .name("guardhost-supervisor".into())
            .spawn(move || supervise(weak, receiver, events));
        if let Err(e) = supervisor {
            if let State::Running(connection) =
                &shared.lifecycle.lock().unwrap_or_else(|e| e.into_inner()).state
            {
                connection.close();
            }
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
        match &self.shared.lifecycle.lock().unwrap_or_else(|e| e.into_inner()).state {
            State::Running(connection) => Some(connection.pid),
            _ => None,
        }
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
        let mut lifecycle = self.shared.lifecycle.lock().unwrap_or_else(|e| e.into_inner());
        match &lifecycle.state {
            State::Running(connection) if !connection.dead.load(Ordering::SeqCst) => {
                Poll::Ready(Ok(connection.clone()))
            }
            State::Running(_) | State::Starting => {
                lifecycle.waiting.push(cx.waker().clone());
                Poll::Pending
            }
            State::Down { until, reason } => {
                let wait = until.saturating_duration_since(Instant::now()).as_millis();
                Poll::Ready(Err(self.call_failed(format_args!(
                    "its process is down ({reason}); the next start is in {wait} ms"
                ))))
            }
            State::Closed => Poll::Ready(Err(self.call_failed("the provider was shut down"))),
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
        {
            let mut pending = connection.pending.lock().unwrap_or_else(|e| e.into_inner());
            if pending.gone.is_some() || connection.dead.load(Ordering::SeqCst) {
                return None;
            }
            pending.calls.insert(id, reply.clone());
        }
        #[cfg(target_os = "linux")]
        if let Some(link) = connection.shm.get() {
            use super::shm::message;
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
        use super::shm::host::Waited;
        let link = connection.shm.get().expect("the call was posted in the region");
        let from_reply =
            |reply: Reply| reply.wait(deadline).unwrap_or_else(|| Err(self.timed_out(Some(connection))));
        match link.wait(slot, deadline) {
            Waited::Answer(answer) => {
                link.release(slot);
                connection.forget(id);
                connection.answered.store(true, Ordering::Relaxed);
                super::shm::message::decode_answer(&answer)
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

    /// How calls reach the running process (`None` while none runs).
    pub fn transport(&self) -> Option<Transport> {
        match &self.shared.lifecycle.lock().unwrap_or_else(|e| e.into_inner()).state {
            State::Running(connection) => Some(connection.transport()),
            _ => None,
        }
    }
}

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

    fn evaluate_view(&self, call: &CallView<'_>) -> Option<Evaluation> {
        Some(self.decide(call))
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
}

impl Drop for ProcessProvider {
    fn drop(&mut self) {
        let previous = {
            let mut lifecycle = self.shared.lifecycle.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::replace(&mut lifecycle.state, State::Closed)
        };
        let _ = self.shared.supervisor.send(Event::Shutdown);
        if let State::Running(connection) = previous {
            connection.close();
        }
    }
}

/// What runs as the child process.
#[derive(Debug, Clone)]
enum ChildKind {
    /// `guardhost provider-server`, which loads the provider library.
    Server {
        /// The `guardhost` executable.
        program: PathBuf,
    },
    /// The author's own program (`provider.command`).
    Program {
        /// The program (`argv[0]`), resolved.
        program: PathBuf,
        /// Where it runs: the config file's directory.
        dir: PathBuf,
        /// `provider.command` as written: the program and its arguments.
        argv: Vec<String>,
    },
}

impl std::fmt::Display for ChildKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChildKind::Server { program } => write!(f, "{}", program.display()),
            ChildKind::Program { argv, dir, .. } => write!(f, "`{}` (in {})", argv.join(" "), dir.display()),
        }
    }
}

impl ChildKind {
    fn command(&self) -> Command {
        match self {
            ChildKind::Server { program } => {
                let mut command = Command::new(program);
                command.arg("provider-server");
                command
            }
            ChildKind::Program { program, dir, argv } => {
                let mut command = Command::new(program);
                command.args(&argv[1..]).current_dir(dir);
                command
            }
        }
    }

    /// The provider's info from a `ready` message's `info`: the server
    /// sends the whole [`ProviderInfo`]; a program sends its name (and may
    /// declare volatile metadata keys), and the host knows the rest.
    fn info(&self, info: serde_json::Value) -> Result<ProviderInfo, String> {
        match self {
            ChildKind::Server { .. } => serde_json::from_value(info)
                .map_err(|e| format!("the provider process sent a ready message this host cannot read: {e}")),
            ChildKind::Program { argv, .. } => {
                let ready: ProgramInfo = serde_json::from_value(info).map_err(|e| {
                    format!(
                        "the provider program {self} sent a ready message whose `info` is not \
                         {{\"name\": string, \"volatile_metadata_keys\": [string, ...]}}: {e} \
                         (docs/provider-protocol.md)"
                    )
                })?;
                if ready.name.trim().is_empty() {
                    return Err(format!(
                        "the provider program {self} sent a ready message with an empty `info.name`; name \
                         the provider: operators see the name in logs and audit events"
                    ));
                }
                Ok(ProviderInfo {
                    name: ready.name,
                    source: guardhost::instantiate::ProviderSource::Program { command: argv.clone() },
                    abi_version: (PROTOCOL_VERSION as u16, 0),
                    abi_kind: guardhost::instantiate::AbiKind::Protocol,
                    accepted_keys: Vec::new(),
                    accepts_extra_keys: true,
                    framework_injected: false,
                    volatile_metadata_keys: ready.volatile_metadata_keys,
                    path_keys: Vec::new(),
                    unread_inputs: Vec::new(),
                    never_blocks: false,
                    timeout_ms: None,
                    isolation: guardhost::config::Isolation::Process,
                    transport: Some(Transport::Pipes),
                    sha256: None,
                })
            }
        }
    }
}

/// What a provider program's `ready` message says about it.
#[derive(Debug, serde::Deserialize)]
struct ProgramInfo {
    name: String,
    #[serde(default)]
    volatile_metadata_keys: Vec<String>,
}

/// Why a start failed.
enum Launch {
    /// The server could not build the provider: its message, and whether
    /// the constructor panicked.
    Build(String, bool),
    /// Anything else.
    Other(String),
}

impl Shared {
    /// Starts a child and waits for it to be ready.
    fn launch(&self, events: &mpsc::Sender<Event>) -> Result<(Arc<Connection>, ProviderInfo), Launch> {
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
        let connection = Arc::new(Connection {
            process: Mutex::new(process),
            pid,
            frames: FrameWriter::new(BufWriter::with_capacity(64 << 10, stdin)),
            pending: Mutex::default(),
            answered: AtomicBool::new(false),
            dead: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            killed_because: Mutex::new(None),
            shm: std::sync::OnceLock::new(),
        });
        let init = protocol::encode(&ToServer::Init {
            protocol: PROTOCOL_VERSION,
            spec: self.spec.clone(),
            base_dir: self.base_dir.clone(),
            pinned_sha256: self.pinned_sha256.clone(),
            framework: match self.child {
                ChildKind::Server { .. } => None,
                ChildKind::Program { .. } => Some(guardhost::instantiate::FRAMEWORK_VALUE.to_owned()),
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
}

impl Shared {
    /// A shared region for the child `command` starts, when shared memory
    /// is asked for and can be set up here; the child inherits its file.
    #[cfg(target_os = "linux")]
    fn offer(&self, command: &mut Command) -> Option<Link> {
        if self.transport != Transport::SharedMemory {
            return None;
        }
        match Link::new() {
            Ok(link) => {
                super::shm::region::inherit(command, link.fd());
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

impl Connection {
    /// A call to provider `name` went unanswered for `limit`: the process
    /// is killed (and restarts), and this is the call's failure.
    fn timed_out(&self, name: &str, limit: Duration) -> ProviderFailure {
        let limit = limit.as_millis();
        self.kill(format!("left a call unanswered for {limit} ms (provider.timeout_ms)"));
        ProviderFailure::error(format!(
            "provider '{name}' (isolation: process): did not answer within {limit} ms (provider.timeout_ms); \
             its process was killed and restarts"
        ))
    }

    /// How calls reach this process.
    fn transport(&self) -> Transport {
        if self.shm.get().is_some() {
            Transport::SharedMemory
        } else {
            Transport::Pipes
        }
    }

    /// Takes the region into use once the process has mapped it (`Mapped`),
    /// and starts the thread that collects answers to async calls; says
    /// why not otherwise (calls then go over the pipes).
    #[cfg_attr(not(target_os = "linux"), allow(unused_variables))] // `limit`: shared memory's
    fn attach(
        self: &Arc<Self>,
        link: Option<Link>,
        answer: protocol::SharedMemory,
        name: &str,
        limit: Duration,
    ) {
        let Some(link) = link else { return };
        match answer {
            protocol::SharedMemory::Mapped => {}
            protocol::SharedMemory::Refused { reason } => {
                tracing::warn!(
                    provider = %name,
                    "the provider process cannot use shared memory ({reason}); calls go over its pipes"
                );
                return;
            }
            protocol::SharedMemory::NotOffered => return,
        }
        #[cfg(target_os = "linux")]
        {
            if self.shm.set(link).is_err() {
                return;
            }
            let (connection, name) = (self.clone(), name.to_owned());
            let collector = std::thread::Builder::new()
                .name(format!("guardhost-collector-{}", self.pid))
                .spawn(move || connection.collect(&name, limit));
            if let Err(error) = collector {
                // Without a collector async calls would wait in vain.
                self.kill(format!("could not be served (cannot start a thread: {error})"));
            }
        }
        #[cfg(not(target_os = "linux"))]
        match link {}
    }

    /// The collector's thread: delivers the answers to async calls posted
    /// in the region until the process is gone.
    #[cfg(target_os = "linux")]
    fn collect(&self, name: &str, limit: Duration) {
        let link = self.shm.get().expect("attached");
        link.collect(
            |collected| self.deliver(collected, name),
            |id| {
                let reply = self.pending.lock().unwrap_or_else(|e| e.into_inner()).calls.remove(&id);
                // Unless its answer came over the pipe meanwhile.
                match reply {
                    Some(reply) => {
                        reply.fill(Err(self.timed_out(name, limit)));
                        true
                    }
                    None => false,
                }
            },
        );
    }

    /// Delivers the answers to async calls that have come, on this thread,
    /// right after posting the call of `reply`. When that call is the only
    /// async one in flight, its task has nothing else to wait for here:
    /// it spins up to [`ASYNC_SPIN`] for its own answer before it yields
    /// to the executor (the collector's wake-up of the task would cost a
    /// thread wake-up or two).
    #[cfg(target_os = "linux")]
    fn sweep_for(&self, name: &str, reply: &Reply) {
        let Some(link) = self.shm.get() else { return };
        let sweep = || link.sweep(|collected| self.deliver(collected, name));
        sweep();
        if link.async_in_flight() != 1 {
            return;
        }
        let started = Instant::now();
        while !reply.is_filled() && started.elapsed() < ASYNC_SPIN {
            for _ in 0..16 {
                if link.answered() {
                    sweep();
                    break;
                }
                std::hint::spin_loop();
            }
        }
    }

    /// Fills the reply of an async call with its answer from the region;
    /// kills the process when what it wrote there breaks the protocol.
    #[cfg(target_os = "linux")]
    fn deliver(&self, collected: super::shm::host::Collected, name: &str) {
        use super::shm::host::Collected;
        let (id, evaluation) = match collected {
            Collected::Answer { id, answer } => (id, super::shm::message::decode_answer(&answer)),
            Collected::Broken { id, why } => match id {
                Some(id) => (id, Err(why)),
                None => {
                    self.kill(why);
                    return;
                }
            },
        };
        let evaluation = match evaluation {
            Ok(evaluation) => {
                self.answered.store(true, Ordering::Relaxed);
                evaluation
            }
            Err(violation) => {
                self.kill(violation.clone());
                Err(ProviderFailure::error(format!(
                    "provider '{name}' (isolation: process): its process {violation}; it was killed and restarts"
                )))
            }
        };
        let reply = self.pending.lock().unwrap_or_else(|e| e.into_inner()).calls.remove(&id);
        if let Some(reply) = reply {
            reply.fill(evaluation);
        }
    }
}

/// What the thread that reads a new child's answers starts it with.
struct Start {
    child: ChildKind,
    /// The init frame.
    init: Vec<u8>,
    /// The shared region offered in it, if any.
    link: Option<Link>,
    /// The per-call limit (the collector enforces it for async calls).
    limit: Duration,
}

/// The handshake, then every answer, until the child's output ends or
/// breaks the protocol; then the calls in flight fail and the supervisor
/// hears of it.
fn read_answers(
    connection: Arc<Connection>,
    start: Start,
    mut input: BufReader<std::process::ChildStdout>,
    ready: mpsc::Sender<Result<ProviderInfo, Launch>>,
    events: mpsc::Sender<Event>,
) {
    let Start { child, init, link, limit } = start;
    let handshake = (|| {
        // On this thread, so the start's time limit holds even when the
        // server does not read (the pipe holds 64 KiB).
        if let Err(error) = connection.frames.send(init) {
            return Err(Launch::Other(format!("cannot send the provider process its spec: {error}")));
        }
        match protocol::read_message::<FromServer>(&mut input) {
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
            Ok(other) => {
                return Err(Launch::Other(format!("the provider process sent {other:?} before hello")))
            }
            Err(error) => {
                return Err(Launch::Other(format!("the provider process {}", connection.ended(error))))
            }
        }
        match protocol::read_message::<FromServer>(&mut input) {
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
    })();
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
        #[cfg(target_os = "linux")]
        if let Some(link) = connection.shm.get() {
            link.abandon();
        }
        return;
    }
    let reason = loop {
        match protocol::read_message::<FromServer>(&mut input) {
            Ok(FromServer::Answer { id, outcome }) => {
                connection.answered.store(true, Ordering::Relaxed);
                let reply = connection.pending.lock().unwrap_or_else(|e| e.into_inner()).calls.remove(&id);
                if let Some(reply) = reply {
                    reply.fill(outcome.into());
                }
            }
            Ok(other) => break connection.ended(FrameError::NotAFrame(format!("{other:?}"))),
            Err(error) => break connection.ended(error),
        }
    };
    let in_flight = {
        let mut pending = connection.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.gone = Some(reason.clone());
        connection.dead.store(true, Ordering::SeqCst);
        std::mem::take(&mut pending.calls)
    };
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
    for reply in in_flight.values() {
        reply.fill(Err(ProviderFailure::error(format!(
            "provider '{name}' (isolation: process): its process {reason} while this call was in flight; it restarts"
        ))));
    }
    // The callers waiting on a slot stop waiting and read their reply,
    // filled just now; the collector ends.
    #[cfg(target_os = "linux")]
    if let Some(link) = connection.shm.get() {
        link.abandon();
    }
    if closing {
        return;
    }
    let answered = connection.answered.load(Ordering::Relaxed);
    let _ = events.send(Event::Died { pid: connection.pid, answered, reason });
}

impl Connection {
    /// Ends the process because its provider is gone.
    fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        self.kill("was shut down with its provider".into());
    }

    /// Kills the process (once), saying why.
    fn kill(&self, reason: String) {
        {
            let mut killed = self.killed_because.lock().unwrap_or_else(|e| e.into_inner());
            if killed.is_some() {
                return;
            }
            *killed = Some(reason);
        }
        // No new call goes to it from now on.
        self.dead.store(true, Ordering::SeqCst);
        let _ = self.process.lock().unwrap_or_else(|e| e.into_inner()).kill();
    }

    fn forget(&self, id: u64) {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).calls.remove(&id);
    }

    /// Waits for the process to end (killing it if it lingers) and returns
    /// its exit status.
    fn reap(&self) -> Option<ExitStatus> {
        let mut process = self.process.lock().unwrap_or_else(|e| e.into_inner());
        let deadline = Instant::now() + Duration::from_millis(500);
        loop {
            match process.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
                Ok(None) => {
                    let _ = process.kill();
                    return process.wait().ok();
                }
                Err(_) => return None,
            }
        }
    }

    /// What happened to the process, now that `error` ended its output.
    fn ended(&self, error: FrameError) -> String {
        let garbage = !matches!(error, FrameError::Closed | FrameError::Io(_));
        if garbage {
            self.kill(error.to_string());
        }
        let status = self.reap();
        if let Some(reason) = self.killed_because.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return format!("was killed: it {reason}");
        }
        match status {
            Some(status) => describe_exit(status),
            None => format!("{error}"),
        }
    }
}

/// "exited with status 0", "was killed by signal 11 (SIGSEGV)".
fn describe_exit(status: ExitStatus) -> String {
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        let name = match signal {
            4 => " (SIGILL)",
            6 => " (SIGABRT)",
            7 => " (SIGBUS)",
            8 => " (SIGFPE)",
            9 => " (SIGKILL)",
            11 => " (SIGSEGV)",
            15 => " (SIGTERM)",
            _ => "",
        };
        return format!("was killed by signal {signal}{name}");
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => format!("ended ({status})"),
    }
}

/// Restarts the child after it dies, with backoff, until the provider is
/// dropped.
fn supervise(shared: Weak<Shared>, events: mpsc::Receiver<Event>, sender: mpsc::Sender<Event>) {
    let mut failures: u32 = 0;
    while let Ok(Event::Died { pid, answered, reason }) = events.recv() {
        // Only the running process's end calls for a restart (a process
        // whose start was given up on may report its end late).
        let current = shared.upgrade().is_some_and(|shared| {
            matches!(&shared.lifecycle.lock().unwrap_or_else(|e| e.into_inner()).state,
                State::Running(connection) if connection.pid == pid)
        });
        if !current {
            continue;
        }
        if answered {
            failures = 0;
        }
        let mut reason = reason;
        loop {
            failures = failures.saturating_add(1);
            let delay = backoff(failures);
            {
                let Some(shared) = shared.upgrade() else { return };
                let name = &shared.name;
                // A restart at once was announced with the death; a backoff
                // is news.
                if !delay.is_zero() {
                    tracing::warn!(provider = %name, "restarting the provider process in {} ms", delay.as_millis());
                }
                let state = if delay.is_zero() {
                    State::Starting
                } else {
                    State::Down { until: Instant::now() + delay, reason: reason.clone() }
                };
                if !shared.set_state(state) {
                    return;
                }
            }
            // A shutdown during the wait ends the supervisor; a late report
            // of an earlier process's end changes nothing.
            let until = Instant::now() + delay;
            loop {
                match events.recv_timeout(until.saturating_duration_since(Instant::now())) {
                    Err(mpsc::RecvTimeoutError::Timeout) => break,
                    Ok(Event::Died { .. }) => continue,
                    Ok(Event::Shutdown) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
            let Some(shared) = shared.upgrade() else { return };
            if !shared.set_state(State::Starting) {
                return;
            }
            match shared.launch(&sender) {
                Ok((connection, _)) => {
                    RESTARTS.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(provider = %shared.name, pid = connection.pid, "provider process restarted");
                    if !shared.set_state(State::Running(connection.clone())) {
                        connection.close();
                        return;
                    }
                    break;
                }
                Err(Launch::Build(error, _) | Launch::Other(error)) => {
                    tracing::error!(provider = %shared.name, "cannot restart the provider process: {error}");
                    reason = format!("its restart failed: {error}");
                }
            }
        }
    }
}

impl Shared {
    /// Moves to `state` and wakes the calls waiting for a start; false when
    /// the provider was shut down meanwhile.
    fn set_state(&self, state: State) -> bool {
        let waiting = {
            let mut lifecycle = self.lifecycle.lock().unwrap_or_else(|e| e.into_inner());
            if matches!(lifecycle.state, State::Closed) {
                return false;
            }
            lifecycle.state = state;
            std::mem::take(&mut lifecycle.waiting)
        };
        waiting.into_iter().for_each(Waker::wake);
        true
    }
}
