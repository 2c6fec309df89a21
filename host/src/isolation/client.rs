//! The host's side: [`ProcessProvider`], a provider that lives in a child
//! process.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::protocol::{self, FrameError, FrameWriter, FromServer, ToServer, PROTOCOL_VERSION};
use crate::config::{Isolation, ProviderSpec};
use crate::instantiate::{BuildError, ProviderInfo};
use crate::provider::{BoxFuture, Evaluation, GuardrailProvider, ProviderFailure};
use crate::reply::{wait_until, wait_until_async, Reply};
use crate::request::GuardrailRequest;

/// The per-call limit when `provider.timeout_ms` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(5000);

/// How long a provider process may take to start (load and construct).
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest wait between restarts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The environment variable that names the `guardhost` executable to run
/// providers in, for programs that embed the host library.
pub const SERVER_ENV: &str = "GUARDHOST_BIN";

/// The wait before restart attempt `failures` (1 for the first failure in a
/// row): none for the first, then 100 ms doubling up to [`MAX_BACKOFF`].
pub fn backoff(failures: u32) -> Duration {
    match failures {
        0 | 1 => Duration::ZERO,
        n => Duration::from_millis(100u64.saturating_mul(1 << (n - 2).min(16))).min(MAX_BACKOFF),
    }
}

/// Finds the `guardhost` executable: `$GUARDHOST_BIN`, else this program
/// when it is `guardhost`, else a `guardhost` beside this program or one
/// directory up (where cargo puts it for tests and benchmarks).
pub fn server_program() -> Result<PathBuf, BuildError> {
    if let Some(path) = std::env::var_os(SERVER_ENV) {
        return Ok(PathBuf::from(path));
    }
    let exe_name = format!("guardhost{}", std::env::consts::EXE_SUFFIX);
    let current = std::env::current_exe().map_err(|e| BuildError::Isolation {
        message: format!("cannot find this program to run the provider process with: {e}; set {SERVER_ENV}"),
    })?;
    if current.file_name().is_some_and(|name| name == exe_name.as_str()) {
        return Ok(current);
    }
    let candidates: Vec<PathBuf> =
        current.ancestors().skip(1).take(2).map(|dir| dir.join(&exe_name)).collect();
    candidates.iter().find(|path| path.is_file()).cloned().ok_or_else(|| BuildError::Isolation {
        message: format!(
            "`isolation: process` runs the provider in a `guardhost provider-server` process, but this program \
             is not guardhost and none was found at {}; set {SERVER_ENV} to the guardhost executable",
            crate::loader::list_paths(&candidates)
        ),
    })
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
}

#[derive(Default)]
struct Pending {
    calls: HashMap<u64, Reply>,
    /// Set once the process is gone: no call may wait on it any more.
    gone: Option<String>,
}

impl ProcessProvider {
    /// Starts the provider of `spec` in a child process running `program`
    /// (see [`server_program`]) and waits until it is constructed; a
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
            crate::config::join_relative(base_dir, Path::new(program))
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
        let limit = crate::instantiate::call_limit(spec)?.unwrap_or(DEFAULT_TIMEOUT);
        let mut child_spec = spec.clone();
        child_spec.isolation = Isolation::InProcess;
        child_spec.timeout_ms = None;
        let (events, receiver) = mpsc::channel();
        let mut shared = Shared {
            name: String::new(),
            child,
            spec: child_spec,
            pinned_sha256: None,
            base_dir: base_dir.to_path_buf(),
            limit,
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
        let limit = self.shared.limit.as_millis();
        match connection {
            Some(connection) => {
                connection.kill(format!("left a call unanswered for {limit} ms (provider.timeout_ms)"));
                self.call_failed(format_args!(
                    "did not answer within {limit} ms (provider.timeout_ms); its process was killed and restarts"
                ))
            }
            None => self.call_failed(format_args!(
                "its process did not start within {limit} ms (provider.timeout_ms)"
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

    /// Registers a call and sends it; `None` when the process has died
    /// since it was picked (the caller waits for its successor).
    fn send(
        &self,
        connection: &Connection,
        request: &GuardrailRequest,
        asynchronous: bool,
    ) -> Option<Result<Reply, ProviderFailure>> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let frame =
            protocol::encode(&ToServer::Evaluate { id, asynchronous, request: Cow::Borrowed(request) });
        if frame.len() - protocol::HEADER > protocol::MAX_FRAME as usize {
            return Some(Err(self.call_failed(format_args!(
                "the request is {} bytes as JSON, more than the {} a call to a provider process may carry",
                frame.len() - protocol::HEADER,
                protocol::MAX_FRAME
            ))));
        }
        let reply = Reply::default();
        {
            let mut pending = connection.pending.lock().unwrap_or_else(|e| e.into_inner());
            if pending.gone.is_some() || connection.dead.load(Ordering::SeqCst) {
                return None;
            }
            pending.calls.insert(id, reply.clone());
        }
        if let Err(error) = connection.frames.send(frame) {
            connection.forget(id);
            return Some(Err(self.call_failed(format_args!("cannot send it the call: {error}"))));
        }
        Some(Ok(reply))
    }
}

impl GuardrailProvider for ProcessProvider {
    fn name(&self) -> &str {
        &self.shared.name
    }

    fn evaluate(&self, request: &GuardrailRequest) -> Evaluation {
        let deadline = Instant::now() + self.shared.limit;
        loop {
            let connection = match wait_until(deadline, |cx| self.poll_connection(cx)) {
                Some(connection) => connection?,
                None => return Err(self.timed_out(None)),
            };
            let Some(reply) = self.send(&connection, request, false) else { continue };
            return reply?.wait(deadline).unwrap_or_else(|| Err(self.timed_out(Some(&connection))));
        }
    }

    fn aevaluate<'a>(&'a self, request: &'a GuardrailRequest) -> BoxFuture<'a, Evaluation> {
        Box::pin(async move {
            let deadline = Instant::now() + self.shared.limit;
            loop {
                let connection = match wait_until_async(deadline, |cx| self.poll_connection(cx)).await {
                    Some(connection) => connection?,
                    None => return Err(self.timed_out(None)),
                };
                let Some(reply) = self.send(&connection, request, true) else { continue };
                let answer = reply?.wait_async(deadline).await;
                return answer.unwrap_or_else(|| Err(self.timed_out(Some(&connection))));
            }
        })
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
                    source: crate::instantiate::ProviderSource::Program { command: argv.clone() },
                    abi_version: (PROTOCOL_VERSION as u16, 0),
                    abi_kind: crate::instantiate::AbiKind::Protocol,
                    accepted_keys: Vec::new(),
                    accepts_extra_keys: true,
                    framework_injected: false,
                    volatile_metadata_keys: ready.volatile_metadata_keys,
                    path_keys: Vec::new(),
                    timeout_ms: None,
                    isolation: crate::config::Isolation::Process,
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
        });
        let init = protocol::encode(&ToServer::Init {
            protocol: PROTOCOL_VERSION,
            spec: self.spec.clone(),
            base_dir: self.base_dir.clone(),
            pinned_sha256: self.pinned_sha256.clone(),
            framework: match self.child {
                ChildKind::Server { .. } => None,
                ChildKind::Program { .. } => Some(crate::instantiate::FRAMEWORK_VALUE.to_owned()),
            },
        });
        let child = self.child.clone();
        let (ready, handshake) = mpsc::channel();
        let spawned = {
            let (connection, events) = (connection.clone(), events.clone());
            let stdout = BufReader::with_capacity(64 << 10, stdout);
            std::thread::Builder::new()
                .name(format!("guardhost-reader-{pid}"))
                .spawn(move || read_answers(connection, child, init, stdout, ready, events))
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

/// The handshake, then every answer, until the child's output ends or
/// breaks the protocol; then the calls in flight fail and the supervisor
/// hears of it.
fn read_answers(
    connection: Arc<Connection>,
    child: ChildKind,
    init: Vec<u8>,
    mut input: BufReader<std::process::ChildStdout>,
    ready: mpsc::Sender<Result<ProviderInfo, Launch>>,
    events: mpsc::Sender<Event>,
) {
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
            Ok(FromServer::Ready { info }) => child.info(info).map_err(Launch::Other),
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
