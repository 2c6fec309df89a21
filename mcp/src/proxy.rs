//! The proxy: one client on one side, one MCP server on the other, every
//! message relayed, the guard points decided on the way.
//!
//! One task owns all the state and handles events in order: lines
//! from either side (read by a task each), decisions (made on tasks of
//! their own, so a slow provider holds up only its call) and deadlines.
//! Ids are remapped both ways: every request the proxy forwards gets an id
//! of the proxy's own on the receiving side, and its answer goes back under
//! the sender's id, so the proxy's own requests (an approval asked through
//! `elicitation/create`) never collide with the peers'.

use std::collections::{HashMap, HashSet};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use guardhost::{Ask, ToolCallRequest};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::config::{McpConfig, Target};
use crate::framing::{spawn_reader, spawn_writer, Line};
use crate::gate::{subject, Gate, Ruling};
use crate::http;
use crate::message::{self, raw, Kind, Message, INVALID_PARAMS, SERVER_GONE};
use crate::pending::Standing;
use crate::pins::{Pinned, Pins};
use crate::state;
use crate::McpError;

/// The JSON-RPC error code of a `resources/read` or `prompts/get` the
/// guardrail denied (a `tools/call` is answered with a result whose
/// `isError` is true instead, for the model to read).
pub const DENIED: i64 = -32001;

/// The reason code of a call to a tool withheld because its definition
/// changed since it was pinned.
pub const TOOL_CHANGED: &str = "guardhost.mcp.tool_changed";

/// How long the server is given to exit after the client closed its side.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Messages queued towards one side before the proxy waits for it.
const QUEUE: usize = 1024;

/// Something the proxy handles.
enum Event {
    /// A line from the client; `None` at its end.
    Client(Option<std::io::Result<Line>>),
    /// A line from the server started `generation`-th; `None` at its end.
    Server(u32, Option<std::io::Result<Line>>),
    /// A guarded request decided.
    Decided {
        message: Message,
        call: Box<ToolCallRequest>,
        ruling: Result<Ruling, String>,
        approved: bool,
        started: Instant,
    },
    /// A `tools/list` answer, with the tools to hide.
    Listed { message: Message, hidden: HashSet<String> },
    /// An approval's deadline passed (the proxy's id of its elicitation).
    AskExpired(u64),
    /// The grace period after the server's input closed ended.
    Grace,
}

/// A request the proxy sent to the server.
struct ToServer {
    /// The client's id.
    id: Box<RawValue>,
    /// Its method.
    method: String,
    /// The client's `initialize` sent again to a restarted server: its
    /// answer is the proxy's, not the client's.
    replay: bool,
    /// A call approved in the 2026-07-28 form: the approval, should the
    /// server answer with an `InputRequiredResult` of its own.
    approval: Option<Box<Approved>>,
}

/// An approval given in the 2026-07-28 form, for the server's own rounds
/// of the call it approved.
#[derive(Clone)]
struct Approved {
    /// The call's method, tool and arguments ([`approval_key`]).
    key: String,
    ask: Ask,
    /// The id of the request that was asked about.
    first_id: String,
}

/// A request the proxy sent to the client.
enum ToClient {
    /// The server's request, relayed: the server's id.
    Relayed(Box<RawValue>),
    /// An approval asked for a held call.
    Approval { message: Message, call: Box<ToolCallRequest>, ask: Box<Ask> },
}

/// How a proxy run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The client closed its side.
    ClientClosed,
    /// The server exited first (how, as text).
    ServerExited(String),
}

/// Starts (or reaches) the server `target` and proxies between
/// `client_in` / `client_out` and it until either side ends.
pub async fn run<R, W>(
    gate: Gate,
    config: McpConfig,
    target: &Target,
    client_in: R,
    client_out: W,
) -> Result<Ended, McpError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    if matches!(target, Target::Command(command) if command.is_empty()) {
        return Err(McpError::NoServer);
    }
    let pins = if config.pinning { Some(Pins::open(config.pins.clone())?) } else { None };

    let (events_tx, mut events) = mpsc::channel(QUEUE);
    let limit = config.max_message_bytes;
    let (mut upstream, server_input) = Upstream::start(target, 1, &config, &events_tx)?;
    spawn_reader(client_in, limit, events_tx.clone(), Event::Client);
    let (client_tx, client_writer) = spawn_writer(client_out, QUEUE);
    let mut restarts_left = config.restarts;

    let mut proxy = Proxy {
        gate: Arc::new(gate),
        pins,
        events: events_tx,
        client: client_tx,
        server: Some(server_input),
        limit,
        next_server_id: 0,
        next_client_id: 0,
        to_server: HashMap::new(),
        to_client: HashMap::new(),
        deciding: HashMap::new(),
        client_name: None,
        elicitation: false,
        hidden: HashSet::new(),
        withheld: HashMap::new(),
        initialize: None,
        initialized: false,
        approved_in_state: HashMap::new(),
    };
    // Once the client closed its side: the server's input is closed as soon
    // as no call waits for a decision (closing it is how stdio asks a
    // server to exit), and what the server still answers is relayed until
    // it exits or the grace period ends.
    let mut client_closed = false;
    let ended = loop {
        if client_closed && proxy.server.is_some() && proxy.deciding.is_empty() {
            proxy.server = None;
            let events = proxy.events.clone();
            tokio::spawn(async move {
                tokio::time::sleep(SHUTDOWN_GRACE).await;
                let _ = events.send(Event::Grace).await;
            });
        }
        let Some(event) = events.recv().await else { break Ended::ClientClosed };
        match event {
            Event::Client(Some(Ok(line))) => proxy.client_line(line).await,
            Event::Client(end) => {
                if let Some(Err(error)) = end {
                    tracing::error!("reading the client's messages failed: {error}");
                }
                client_closed = true;
                proxy.client_closed().await;
            }
            Event::Server(generation, _) if generation != upstream.generation => {}
            Event::Server(_, Some(Ok(line))) => proxy.server_line(line).await,
            Event::Server(_, end) => {
                if let Some(Err(error)) = end {
                    tracing::error!(server = %proxy.gate.server(), "reading the server's messages failed: {error}");
                }
                let how = upstream.exit_status().await;
                if client_closed {
                    break Ended::ClientClosed;
                }
                if restarts_left == 0 || upstream.child.is_none() {
                    break Ended::ServerExited(how);
                }
                restarts_left -= 1;
                tracing::error!(server = %proxy.gate.server(), "the MCP server exited ({how}): starting it again ({restarts_left} more restarts allowed)");
                proxy.requests_lost(&how).await;
                let input;
                (upstream, input) =
                    match Upstream::start(target, upstream.generation + 1, &config, &proxy.events) {
                        Ok(started) => started,
                        Err(error) => {
                            tracing::error!(server = %proxy.gate.server(), "{error}");
                            break Ended::ServerExited(how);
                        }
                    };
                proxy.server = Some(input);
                proxy.restarted().await;
            }
            Event::Decided { message, call, ruling, approved, started } => {
                proxy.decided(message, *call, ruling, approved, started).await
            }
            Event::Listed { message, hidden } => proxy.listed(message, hidden).await,
            Event::AskExpired(id) => proxy.ask_expired(id).await,
            Event::Grace => {
                tracing::warn!(server = %proxy.gate.server(), "the MCP server did not exit within {SHUTDOWN_GRACE:?} of its input closing: killed");
                if let Some(child) = &mut upstream.child {
                    let _ = child.kill().await;
                }
                break Ended::ClientClosed;
            }
        }
    };
    if let Ended::ServerExited(how) = &ended {
        tracing::error!(server = %proxy.gate.server(), "the MCP server exited ({how})");
        proxy.server_gone(how).await;
    }
    drop(proxy);
    let _ = upstream.writer.await;
    let _ = client_writer.await;
    Ok(ended)
}

/// The server's process and the ends of its pipes, or the HTTP transport
/// to it.
///
/// The sender of messages to the server is handed to the proxy when it
/// starts (and nothing else holds one), so that the proxy dropping it closes
/// the server's input (or the HTTP session).
struct Upstream {
    /// `None` over HTTP.
    child: Option<Child>,
    writer: tokio::task::JoinHandle<()>,
    /// Which start this is (1, then 2 after a restart ...): lines from an
    /// earlier one are ignored.
    generation: u32,
}

impl Upstream {
    fn start(
        target: &Target,
        generation: u32,
        config: &McpConfig,
        events: &mpsc::Sender<Event>,
    ) -> Result<(Upstream, mpsc::Sender<Vec<u8>>), McpError> {
        let limit = config.max_message_bytes;
        let command = match target {
            Target::Command(command) => command,
            Target::Http(endpoint) => {
                let transport = http::start(endpoint.clone(), limit, config.ca_file.as_deref())?;
                let events = events.clone();
                let mut output = transport.output;
                tokio::spawn(async move {
                    while let Some(line) = output.recv().await {
                        if events.send(Event::Server(generation, Some(Ok(line)))).await.is_err() {
                            return;
                        }
                    }
                    let _ = events.send(Event::Server(generation, None)).await;
                });
                return Ok((Upstream { child: None, writer: transport.task, generation }, transport.input));
            }
        };
        let (program, args) = command.split_first().ok_or(McpError::NoServer)?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| McpError::Spawn { program: program.to_string_lossy().into_owned(), source })?;
        let output = child.stdout.take().expect("stdout is piped");
        spawn_reader(output, limit, events.clone(), move |line| Event::Server(generation, line));
        let (input, writer) = spawn_writer(child.stdin.take().expect("stdin is piped"), QUEUE);
        Ok((Upstream { child: Some(child), writer, generation }, input))
    }

    /// How the server ended, once it has (given a moment after its output
    /// closed).
    async fn exit_status(&mut self) -> String {
        let Some(child) = &mut self.child else {
            return "the HTTP session ended".to_owned();
        };
        match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
            Ok(Ok(status)) => status.to_string(),
            Ok(Err(error)) => format!("its status is unknown: {error}"),
            Err(_) => "it closed its output and is still running".to_owned(),
        }
    }
}

/// Approvals in the 2026-07-28 form remembered for the server's own
/// rounds of their calls, at most.
const MAX_APPROVED_IN_STATE: usize = 1024;

/// What a call approved in the 2026-07-28 form is known by: its method,
/// tool and arguments.
fn approval_key(method: &str, tool: &str, arguments: &serde_json::Map<String, Value>) -> String {
    format!("{method}\u{0}{tool}\u{0}{}", Value::Object(arguments.clone()))
}

impl Approved {
    /// The approval `call` carries (one [`Gate::approved`] made).
    fn of(method: &str, call: &ToolCallRequest) -> Option<Approved> {
        let approval = call.context.as_ref()?.get("approval")?;
        let approval: guardhost::Approval = serde_json::from_value(approval.clone()).ok()?;
        let tool = call.tool_call.name.as_deref()?;
        Some(Approved {
            key: approval_key(method, tool, &call.tool_call.args),
            ask: Ask {
                entry: approval.entry,
                digest: approval.digest,
                deadline: approval.deadline,
                approvers: Vec::new(),
            },
            first_id: call.tool_call.id.clone()?,
        })
    }
}

/// Gives a guarded request's `params` the arguments a guard rewrote its
/// call to (see [`crate::gate`] for how each method's parameters are the
/// call's arguments).
fn rewrite(method: &str, params: &mut Value, mut arguments: serde_json::Map<String, Value>) {
    match method {
        "tools/call" => params["arguments"] = Value::Object(arguments),
        // `{uri}` and `{name, arguments}` are the parameters themselves.
        _ => {
            for key in ["uri", "name", "arguments"] {
                if let Some(value) = arguments.remove(key) {
                    params[key] = value;
                }
            }
        }
    }
}

struct Proxy {
    gate: Arc<Gate>,
    pins: Option<Pins>,
    events: mpsc::Sender<Event>,
    client: mpsc::Sender<Vec<u8>>,
    /// `None` once the client closed its side.
    server: Option<mpsc::Sender<Vec<u8>>>,
    limit: usize,
    next_server_id: u64,
    next_client_id: u64,
    to_server: HashMap<u64, ToServer>,
    to_client: HashMap<u64, ToClient>,
    /// Guarded requests being decided, by the client's id (its JSON text):
    /// whether the client cancelled it meanwhile.
    deciding: HashMap<String, bool>,
    client_name: Option<String>,
    elicitation: bool,
    /// The client's `initialize` request, as it came.
    initialize: Option<Vec<u8>>,
    /// Whether the client said `notifications/initialized`.
    initialized: bool,
    /// Tools the last lists hid.
    hidden: HashSet<String>,
    /// Tools withheld as changed since pinned: (pinned, offered).
    withheld: HashMap<String, (String, String)>,
    /// Calls approved in the 2026-07-28 form that the server answered with
    /// an `InputRequiredResult` of its own, by the `requestState` it gave:
    /// the call sent again with that state keeps its approval, once.
    approved_in_state: HashMap<String, Approved>,
}

impl Proxy {
    async fn to_client(&self, message: &Message) {
        let _ = self.client.send(message.to_line()).await;
    }

    async fn reply_error(&self, id: Option<Box<RawValue>>, code: i64, text: &str) {
        self.to_client(&Message::error(id, code, text)).await;
    }

    async fn client_line(&mut self, line: Line) {
        let message = match line {
            Line::Message(bytes) => Message::parse(&bytes),
            Line::TooLong(length) => {
                let text = format!(
                    "the message is {length} bytes, over this proxy's limit of {} (mcp.max_message_bytes)",
                    self.limit
                );
                tracing::warn!("a client message was refused: {text}");
                return self.reply_error(None, message::INVALID_REQUEST, &text).await;
            }
        };
        let mut message = match message {
            Ok(message) => message,
            Err(problem) => {
                tracing::warn!("a client line was refused: {problem}");
                return self.reply_error(None, problem.code(), &problem.to_string()).await;
            }
        };
        match message.kind().expect("parsed messages have a kind") {
            Kind::Request => {
                let method = message.method().unwrap_or_default();
                if method == "initialize" {
                    self.initializing(&message);
                }
                match method.as_str() {
                    "tools/call" | "resources/read" | "prompts/get" => self.guard(message, method).await,
                    _ => self.forward_request(message, method).await,
                }
            }
            Kind::Notification => {
                let method = message.method();
                if method.as_deref() == Some("notifications/cancelled")
                    && !self.client_cancelled(&mut message).await
                {
                    return;
                }
                if method.as_deref() == Some("notifications/initialized") {
                    self.initialized = true;
                }
                self.to_server(message).await
            }
            Kind::Response => self.client_answered(message).await,
        }
    }

    /// Remembers what the client said of itself, and its `initialize` to
    /// send again to a restarted server.
    fn initializing(&mut self, message: &Message) {
        self.initialize = Some(message.to_line());
        let params = message.value("params").unwrap_or_default();
        self.client_name = params.pointer("/clientInfo/name").and_then(Value::as_str).map(str::to_owned);
        self.elicitation = params.pointer("/capabilities/elicitation").is_some_and(Value::is_object);
    }

    async fn to_server(&self, message: Message) {
        match &self.server {
            Some(server) => {
                let _ = server.send(message.to_line()).await;
            }
            None => tracing::debug!("a message after the client closed its side was not relayed"),
        }
    }

    async fn forward_request(&mut self, mut message: Message, method: String) {
        let id = message.take("id").expect("a request has an id");
        if self.server.is_none() {
            return self.reply_error(Some(id), SERVER_GONE, "the MCP server is gone").await;
        }
        self.next_server_id += 1;
        let proxy_id = self.next_server_id;
        message.set("id", raw(&Value::from(proxy_id)));
        self.to_server.insert(proxy_id, ToServer { id, method, replay: false, approval: None });
        self.to_server(message).await
    }

    /// A guarded request: decided on a task of its own.
    async fn guard(&mut self, mut message: Message, method: String) {
        let id = message.get("id").expect("a request has an id").to_owned();
        let mut params = message.value("params").unwrap_or_default();
        // The proxy's own state and answer (a retry of an ask in the
        // 2026-07-28 form) are its, not the server's.
        let answered = params.as_object_mut().and_then(state::take);
        if answered.is_some() {
            message.set("params", raw(&params));
        }
        let Some((tool, arguments)) = subject(&method, &params) else {
            let needs = match method.as_str() {
                "tools/call" => "params.name (a string)",
                "resources/read" => "params.uri",
                _ => "params.name",
            };
            return self.reply_error(Some(id), INVALID_PARAMS, &format!("{method} needs {needs}")).await;
        };
        if method == "tools/call" {
            if let Some((pinned, offered)) = self.withheld.get(&tool) {
                let text = format!(
                    "Guardrail denied: tool '{tool}' was blocked ({TOOL_CHANGED}). Reason: its description or input \
                     schema changed since it was pinned ({pinned}, now {offered}); an operator must accept the new \
                     version (guardhost mcp pins accept {}/{tool}). Choose an alternative approach.",
                    self.gate.server()
                );
                tracing::warn!(server = %self.gate.server(), tool = %tool, code = TOOL_CHANGED, "call refused");
                self.gate.metrics().decided(self.gate.server(), &method, "withheld", None);
                return self.deny(id, &method, &text, TOOL_CHANGED).await;
            }
            if self.hidden.contains(&tool) {
                return self.reply_error(Some(id), INVALID_PARAMS, &format!("Unknown tool: {tool}")).await;
            }
        }
        // The client as it named itself: at `initialize`, or in each
        // request's `_meta` in the 2026-07-28 form.
        let client = self.client_name.clone().or_else(|| state::client_name(&params));
        if let Some((issued, action)) = answered {
            return self.answered_in_state(message, (method, tool, arguments), client, &issued, action).await;
        }
        // The server's own round of a call approved in this form: sent
        // again with the state the server gave, the same call keeps its
        // approval (until the ask's deadline).
        let servers_state = params.get("requestState").and_then(Value::as_str);
        if let Some(approved) = servers_state.and_then(|state| self.approved_in_state.remove(state)) {
            let same = approved.key == approval_key(&method, &tool, &arguments);
            if same && approved.ask.deadline >= guardhost::unix_now() {
                let first = self.gate.call(&method, tool, arguments, &approved.first_id, client.as_deref());
                return self.decide(message, Gate::approved(&first, &approved.ask, client.as_deref()), true);
            }
        }
        let call = self.gate.call(&method, tool, arguments, id.get(), client.as_deref());
        self.decide(message, call, false);
    }

    /// A request sent again with the answer to the proxy's ask (the
    /// 2026-07-28 form): decided again with the approval, or refused.
    async fn answered_in_state(
        &mut self,
        message: Message,
        (method, tool, arguments): (String, String, serde_json::Map<String, Value>),
        client: Option<String>,
        state: &str,
        action: Option<String>,
    ) {
        let id = message.get("id").expect("a request has an id").to_owned();
        let issued = match state::verify(state, self.gate.server()) {
            Ok(issued) => issued,
            Err(bad) => {
                tracing::warn!(server = %self.gate.server(), tool = %tool, "an approval's state was refused: {bad}");
                let text = format!(
                    "Guardrail denied: tool '{tool}' was not approved (guardhost.approval_refused). Reason: {bad}; \
                     make the call again without it to be asked. Choose an alternative approach."
                );
                return self.deny(id, &method, &text, "guardhost.approval_refused").await;
            }
        };
        let first = self.gate.call(&method, tool, arguments, &issued.first_id, client.as_deref());
        let ask = issued.ask;
        let why = match action.as_deref() {
            _ if ask.deadline < guardhost::unix_now() => "no answer came before its deadline",
            Some("accept") => {
                tracing::info!(server = %self.gate.server(), entry = %ask.entry, digest = %ask.digest, "approved through the 2026-07-28 form's input request");
                let approved = Gate::approved(&first, &ask, client.as_deref());
                return self.decide(message, approved, true);
            }
            Some("decline") => "the user declined it",
            Some("cancel") => "the user dismissed the question",
            _ => "the request came back without an answer to it",
        };
        self.refuse_unapproved(message, &first, &ask, why).await
    }

    fn decide(&mut self, message: Message, call: ToolCallRequest, approved: bool) {
        let key = message.get("id").map(|id| id.get().to_owned()).unwrap_or_default();
        self.deciding.insert(key, false);
        let gate = Arc::clone(&self.gate);
        let events = self.events.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let ruling = gate.decide(&call).await.map_err(|e| e.to_string());
            let _ = events
                .send(Event::Decided { message, call: Box::new(call), ruling, approved, started })
                .await;
        });
    }

    async fn decided(
        &mut self,
        mut message: Message,
        call: ToolCallRequest,
        ruling: Result<Ruling, String>,
        approved: bool,
        started: Instant,
    ) {
        let id = message.get("id").expect("a request has an id").to_owned();
        let method = message.method().unwrap_or_default();
        if self.deciding.remove(id.get()) == Some(true) {
            tracing::info!(server = %self.gate.server(), tool = call.tool_call.name.as_deref().unwrap_or_default(), "decided after the client cancelled it: dropped");
            return;
        }
        let tool = call.tool_call.name.clone().unwrap_or_default();
        let took = started.elapsed();
        let micros = took.as_micros() as u64;
        let outcome = match &ruling {
            Ok(Ruling::Allow { outcome, .. }) => *outcome,
            Ok(Ruling::Deny { .. }) => "deny",
            Ok(Ruling::Ask(_)) => "ask",
            Err(_) => "error",
        };
        self.gate.metrics().decided(self.gate.server(), &method, outcome, Some(took));
        // The arguments' digest names the call in the log without showing
        // a value (made only when the log takes it).
        let args = match tracing::enabled!(tracing::Level::INFO) {
            true => crate::pins::sha256_of(&Value::Object(call.tool_call.args.clone())),
            false => String::new(),
        };
        match ruling {
            Ok(Ruling::Allow { rewritten, outcome, entry }) => {
                let entry = entry.unwrap_or_else(|| "-".to_owned());
                tracing::info!(server = %self.gate.server(), method = %method, tool = %tool, args = %args, outcome, entry = %entry, micros, "decided");
                if let Some(arguments) = rewritten {
                    let mut params = message.value("params").unwrap_or_else(|| json!({}));
                    rewrite(&method, &mut params, arguments);
                    message.set("params", raw(&params));
                }
                let approval = if approved { Approved::of(&method, &call) } else { None };
                self.forward_request(message, method).await;
                if let Some(forwarded) = self.to_server.get_mut(&self.next_server_id) {
                    forwarded.approval = approval.map(Box::new);
                }
            }
            Ok(Ruling::Deny { text, code, entry }) => {
                let entry = entry.unwrap_or_else(|| "-".to_owned());
                tracing::info!(server = %self.gate.server(), method = %method, tool = %tool, args = %args, code = %code, entry = %entry, micros, "denied");
                self.deny(id, &method, &text, &code).await
            }
            Ok(Ruling::Ask(ask))
                if !approved && state::can_elicit(&message.value("params").unwrap_or_default()) =>
            {
                tracing::info!(server = %self.gate.server(), tool = %tool, entry = %ask.entry, digest = %ask.digest, "held for approval: asking the client in its answer (2026-07-28)");
                let question = self.question(&call, &ask);
                let issued = state::Issued {
                    ask: *ask,
                    server: self.gate.server().to_owned(),
                    first_id: id.get().to_owned(),
                };
                let result = state::input_required(&question, state::issue(&issued));
                self.to_client(&Message::result(id, raw(&result))).await
            }
            Ok(Ruling::Ask(ask)) if self.elicitation && !approved => {
                tracing::info!(server = %self.gate.server(), tool = %tool, entry = %ask.entry, digest = %ask.digest, "held for approval: asking the client");
                self.ask(message, call, ask).await
            }
            Ok(Ruling::Ask(ask)) if !approved && self.gate.pending().is_some() => {
                self.hold(message, call, ask).await
            }
            Ok(Ruling::Ask(ask)) => {
                let why = if approved {
                    "it was approved, and a guard asked again".to_owned()
                } else {
                    "this client cannot be asked (it declared no elicitation capability at initialize)"
                        .to_owned()
                };
                let text = format!(
                    "Guardrail denied: tool '{tool}' was held for approval (guardhost.approval_required). Reason: it \
                     needs a human's approval (entry '{}', digest {}, until {}), and {why}. Choose an alternative \
                     approach.",
                    ask.entry, ask.digest, ask.deadline
                );
                tracing::warn!(server = %self.gate.server(), tool = %tool, entry = %ask.entry, "an ask could not be put to a human: denied");
                self.deny(id, &method, &text, "guardhost.approval_required").await
            }
            Err(error) => {
                tracing::error!(server = %self.gate.server(), tool = %tool, "the guardrail failed: {error}");
                let text = format!(
                    "Guardrail denied: tool '{tool}' was blocked (guardhost.guardrail_error). Reason: the guardrail \
                     could not decide: {error}. Choose an alternative approach."
                );
                self.deny(id, &method, &text, "guardhost.guardrail_error").await
            }
        }
    }

    /// Answers a guarded request the guardrail denied: a tool result the
    /// model reads for `tools/call`, a JSON-RPC error otherwise.
    async fn deny(&self, id: Box<RawValue>, method: &str, text: &str, code: &str) {
        if method == "tools/call" {
            let mut result = json!({"content": [{"type": "text", "text": text}], "isError": true});
            if self.initialize.is_none() {
                // The 2026-07-28 form (no `initialize`) tags every result.
                result["resultType"] = Value::from("complete");
            }
            self.to_client(&Message::result(id, raw(&result))).await
        } else {
            let error = json!({"code": DENIED, "message": text, "data": {"code": code}});
            let message = Message::from_members(vec![
                ("jsonrpc".into(), raw(&Value::from("2.0"))),
                ("id".into(), id),
                ("error".into(), raw(&error)),
            ]);
            self.to_client(&message).await
        }
    }

    /// An ask a client cannot be asked through elicitation, over `--listen`:
    /// the call is held for an approver (`/v1/pending`), or, when it was
    /// answered, decided again with the approval or refused.
    async fn hold(&mut self, message: Message, call: ToolCallRequest, ask: Box<Ask>) {
        let pending = Arc::clone(self.gate.pending().expect("checked by the caller"));
        let tool = call.tool_call.name.clone().unwrap_or_default();
        let id = message.get("id").expect("a request has an id").to_owned();
        let method = message.method().unwrap_or_default();
        match pending.stand(self.gate.server(), &call, &ask) {
            Standing::Answered(held, answer, asked) if answer.approved => {
                // The approval is of the call as it was asked about (its
                // digest covers the first request's id): that call is
                // decided again, and this request runs on its verdict.
                let (first, asked) = *asked;
                tracing::info!(server = %self.gate.server(), tool = %tool, entry = %asked.entry, pending = %held, approved_by = answer.approved_by.as_deref().unwrap_or("-"), "approved over /v1/pending: decided again");
                let approved = Gate::approved(&first, &asked, answer.approved_by.as_deref());
                self.decide(message, approved, true)
            }
            Standing::Answered(held, _, asked) => {
                let why = format!("an approver refused it (pending id {held})");
                self.refuse_unapproved(message, &call, &asked.1, &why).await
            }
            Standing::Waiting(held) => {
                tracing::info!(server = %self.gate.server(), tool = %tool, entry = %ask.entry, pending = %held, "held for an approver over /v1/pending");
                let text = format!(
                    "Guardrail denied: tool '{tool}' was held for approval (guardhost.approval_required). Reason: it \
                     needs a human's approval (entry '{}', until {}), and this client cannot be asked (it declared \
                     no elicitation capability). It waits as pending id {held}: once an approver has answered it \
                     (POST /v1/pending/{held} on this proxy), the same call made again runs, or is refused. Wait \
                     for the approval, or choose an alternative approach.",
                    ask.entry, ask.deadline
                );
                self.deny(id, &method, &text, "guardhost.approval_required").await
            }
            Standing::Full => {
                tracing::warn!(server = %self.gate.server(), tool = %tool, "an ask could not be held: too many calls wait for approval");
                let text = format!(
                    "Guardrail denied: tool '{tool}' was held for approval (guardhost.approval_required). Reason: it \
                     needs a human's approval, and too many calls wait for one already. Choose an alternative \
                     approach."
                );
                self.deny(id, &method, &text, "guardhost.approval_required").await
            }
        }
    }

    /// What the client's user is asked about a held call.
    fn question(&self, call: &ToolCallRequest, ask: &Ask) -> String {
        let tool = call.tool_call.name.as_deref().unwrap_or_default();
        let arguments = serde_json::to_string_pretty(&call.tool_call.args).unwrap_or_default();
        let wait = ask.deadline.saturating_sub(guardhost::unix_now());
        format!(
            "Approve the call of tool '{tool}' on MCP server '{}'?\n\nArguments:\n{arguments}\n\nAsked by guardrail \
             entry '{}' (call digest {}). Accept to run it, decline to refuse it; after {wait} s it is refused.",
            self.gate.server(),
            ask.entry,
            ask.digest
        )
    }

    /// Puts a held call to the client's user through `elicitation/create`.
    async fn ask(&mut self, message: Message, call: ToolCallRequest, ask: Box<Ask>) {
        self.next_client_id += 1;
        let proxy_id = self.next_client_id;
        let wait = ask.deadline.saturating_sub(guardhost::unix_now());
        let text = self.question(&call, &ask);
        let params = json!({"message": text, "requestedSchema": {"type": "object", "properties": {}}});
        self.to_client(&Message::request(proxy_id, "elicitation/create", &params)).await;
        self.to_client.insert(proxy_id, ToClient::Approval { message, call: Box::new(call), ask });
        let events = self.events.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(wait)).await;
            let _ = events.send(Event::AskExpired(proxy_id)).await;
        });
    }

    async fn ask_expired(&mut self, proxy_id: u64) {
        let Some(ToClient::Approval { message, call, ask }) = self.to_client.remove(&proxy_id) else {
            return;
        };
        let cancel = json!({"requestId": proxy_id, "reason": "the approval's deadline passed"});
        self.to_client(&Message::notification("notifications/cancelled", &cancel)).await;
        self.refuse_unapproved(message, &call, &ask, "no answer came before its deadline").await
    }

    async fn refuse_unapproved(&self, message: Message, call: &ToolCallRequest, ask: &Ask, why: &str) {
        let tool = call.tool_call.name.as_deref().unwrap_or_default();
        let id = message.get("id").expect("a request has an id").to_owned();
        let method = message.method().unwrap_or_default();
        tracing::warn!(server = %self.gate.server(), tool, entry = %ask.entry, digest = %ask.digest, "not approved: {why}");
        let text = format!(
            "Guardrail denied: tool '{tool}' was not approved (guardhost.approval_refused). Reason: it needed a \
             human's approval and {why}. Choose an alternative approach."
        );
        self.deny(id, &method, &text, "guardhost.approval_refused").await
    }

    /// The client closed its side: held calls cannot be approved any more.
    async fn client_closed(&mut self) {
        let held: Vec<u64> = self
            .to_client
            .iter()
            .filter(|(_, pending)| matches!(pending, ToClient::Approval { .. }))
            .map(|(id, _)| *id)
            .collect();
        for id in held {
            if let Some(ToClient::Approval { message, call, ask }) = self.to_client.remove(&id) {
                self.refuse_unapproved(message, &call, &ask, "the client closed its side before answering")
                    .await;
            }
        }
    }

    /// A client's cancellation: of a call being decided (it is dropped
    /// when decided), of a held call (its elicitation is cancelled), or of
    /// a request the server has (its id remapped). Whether to relay it.
    async fn client_cancelled(&mut self, message: &mut Message) -> bool {
        let mut params = message.value("params").unwrap_or_default();
        let Some(target) = params.get("requestId").map(Value::to_string) else { return true };
        if let Some(cancelled) = self.deciding.get_mut(&target) {
            *cancelled = true;
            return false;
        }
        let held = self.to_client.iter().find_map(|(proxy_id, pending)| match pending {
            ToClient::Approval { message, .. }
                if message.get("id").map(RawValue::get) == Some(target.as_str()) =>
            {
                Some(*proxy_id)
            }
            _ => None,
        });
        if let Some(proxy_id) = held {
            self.to_client.remove(&proxy_id);
            let cancel = json!({"requestId": proxy_id, "reason": "the call was cancelled"});
            self.to_client(&Message::notification("notifications/cancelled", &cancel)).await;
            return false;
        }
        let forwarded =
            self.to_server.iter().find(|(_, pending)| pending.id.get() == target).map(|(id, _)| *id);
        if let Some(proxy_id) = forwarded {
            params["requestId"] = Value::from(proxy_id);
            message.set("params", raw(&params));
        }
        true
    }

    /// The client's answer to a request of the server's or of the proxy's.
    async fn client_answered(&mut self, mut message: Message) {
        let pending = message.numeric_id().and_then(|id| self.to_client.remove(&id));
        match pending {
            Some(ToClient::Relayed(id)) => {
                message.set("id", id);
                self.to_server(message).await
            }
            Some(ToClient::Approval { message: held, call, ask }) => {
                let action = message.value("result").and_then(|r| r.get("action").cloned());
                match action.as_ref().and_then(Value::as_str) {
                    Some("accept") => {
                        tracing::info!(server = %self.gate.server(), entry = %ask.entry, digest = %ask.digest, "approved through elicitation");
                        let approved = Gate::approved(&call, &ask, self.client_name.as_deref());
                        self.decide(held, approved, true)
                    }
                    Some("decline") => {
                        self.refuse_unapproved(held, &call, &ask, "the user declined it").await
                    }
                    Some("cancel") => {
                        self.refuse_unapproved(held, &call, &ask, "the user dismissed the question").await
                    }
                    _ => {
                        self.refuse_unapproved(
                            held,
                            &call,
                            &ask,
                            "the client answered the question with an error",
                        )
                        .await
                    }
                }
            }
            None => tracing::warn!(
                "a client response to no request the proxy sent was dropped (id {})",
                message.get("id").map(RawValue::get).unwrap_or("none")
            ),
        }
    }

    async fn server_line(&mut self, line: Line) {
        let message = match line {
            Line::Message(bytes) => Message::parse(&bytes),
            Line::TooLong(length) => {
                tracing::error!(server = %self.gate.server(), "a server message of {length} bytes, over the limit (mcp.max_message_bytes), was dropped");
                return;
            }
        };
        let mut message = match message {
            Ok(message) => message,
            Err(problem) => {
                tracing::error!(server = %self.gate.server(), "a server line was dropped: {problem}");
                return;
            }
        };
        match message.kind().expect("parsed messages have a kind") {
            Kind::Request => {
                // Sampling, elicitation, roots, ping: relayed under an id of the proxy's.
                let id = message.take("id").expect("a request has an id");
                self.next_client_id += 1;
                let proxy_id = self.next_client_id;
                message.set("id", raw(&Value::from(proxy_id)));
                self.to_client.insert(proxy_id, ToClient::Relayed(id));
                self.to_client(&message).await
            }
            Kind::Notification => {
                if message.method().as_deref() == Some("notifications/cancelled") {
                    self.server_cancelled(&mut message);
                }
                self.to_client(&message).await
            }
            Kind::Response => {
                let Some(pending) = message.numeric_id().and_then(|id| self.to_server.remove(&id)) else {
                    tracing::warn!(server = %self.gate.server(), "a server response to no request the proxy sent was dropped");
                    return;
                };
                if pending.replay {
                    if let Some(error) = message.get("error") {
                        tracing::error!(server = %self.gate.server(), "the restarted server refused the client's initialize: {}", error.get());
                    }
                    return;
                }
                message.set("id", pending.id);
                if let Some(approval) = pending.approval {
                    self.server_asks_too(&message, *approval);
                }
                if pending.method == "tools/list" && message.get("result").is_some() {
                    return self.listing(message).await;
                }
                self.to_client(&message).await
            }
        }
    }

    /// An approved call the server answered with an `InputRequiredResult`
    /// of its own (the 2026-07-28 form): its approval is kept for the round
    /// that comes back with the server's state.
    fn server_asks_too(&mut self, answer: &Message, approval: Approved) {
        let result = answer.value("result").unwrap_or_default();
        if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
            return;
        }
        let Some(state) = result.get("requestState").and_then(Value::as_str) else { return };
        if self.approved_in_state.len() >= MAX_APPROVED_IN_STATE {
            let now = guardhost::unix_now();
            self.approved_in_state.retain(|_, kept| kept.ask.deadline >= now);
        }
        if self.approved_in_state.len() < MAX_APPROVED_IN_STATE {
            self.approved_in_state.insert(state.to_owned(), approval);
        }
    }

    /// The server's cancellation of a request it sent: the id the client knows.
    fn server_cancelled(&self, message: &mut Message) {
        let mut params = message.value("params").unwrap_or_default();
        let Some(target) = params.get("requestId").map(Value::to_string) else { return };
        let relayed = self.to_client.iter().find_map(|(proxy_id, pending)| match pending {
            ToClient::Relayed(id) if id.get() == target => Some(*proxy_id),
            _ => None,
        });
        if let Some(proxy_id) = relayed {
            params["requestId"] = Value::from(proxy_id);
            message.set("params", raw(&params));
        }
    }

    /// A `tools/list` answer: pins checked here, the filter asked on a task.
    async fn listing(&mut self, message: Message) {
        let tools: Vec<Value> = message
            .value("result")
            .and_then(|r| r.get("tools").cloned())
            .and_then(|t| serde_json::from_value(t).ok())
            .unwrap_or_default();
        let names: Vec<String> = tools
            .iter()
            .map(|t| t.get("name").and_then(Value::as_str).unwrap_or_default().to_owned())
            .collect();
        if let Some(pins) = &mut self.pins {
            match pins.check(self.gate.server(), &tools) {
                Ok(states) => {
                    for (name, state) in names.iter().zip(states) {
                        match state {
                            Pinned::Changed { pinned, offered } => {
                                tracing::warn!(server = %self.gate.server(), tool = %name, pinned = %pinned, offered = %offered, "the tool's definition changed since it was pinned: withheld until accepted (guardhost mcp pins accept)");
                                self.withheld.insert(name.clone(), (pinned, offered));
                            }
                            Pinned::New | Pinned::Same => {
                                self.withheld.remove(name);
                            }
                        }
                    }
                }
                Err(error) => {
                    // Fail closed: an unreadable pins file withholds every tool.
                    tracing::error!(server = %self.gate.server(), "the pins could not be checked ({error}): every listed tool is withheld");
                    for name in &names {
                        self.withheld.insert(name.clone(), ("unreadable".into(), "unknown".into()));
                    }
                }
            }
        }
        let gate = Arc::clone(&self.gate);
        let client = self.client_name.clone();
        let events = self.events.clone();
        tokio::spawn(async move {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let hidden = gate.hidden(&refs, client.as_deref()).await;
            let _ = events.send(Event::Listed { message, hidden }).await;
        });
    }

    async fn listed(&mut self, mut message: Message, hidden: HashSet<String>) {
        for name in &hidden {
            tracing::info!(server = %self.gate.server(), tool = %name, "not listed: the configuration denies every call of it");
        }
        self.hidden.extend(hidden);
        let result = message.get("result").expect("a listing has a result");
        if let Some(mut members) = message::object(result) {
            if let Some((_, tools)) = members.iter_mut().find(|(k, _)| k == "tools") {
                if let Ok(list) = serde_json::from_str::<Vec<Box<RawValue>>>(tools.get()) {
                    let kept: Vec<Box<RawValue>> = list
                        .into_iter()
                        .filter(|tool| {
                            let name = serde_json::from_str::<Value>(tool.get())
                                .ok()
                                .and_then(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
                                .unwrap_or_default();
                            !self.hidden.contains(&name) && !self.withheld.contains_key(&name)
                        })
                        .collect();
                    *tools =
                        RawValue::from_string(serde_json::to_string(&kept).expect("raw values serialise"))
                            .expect("a list of JSON values is JSON");
                }
            }
            message.set("result", message::to_object(&members));
        }
        self.to_client(&message).await
    }

    /// The server exited and is started again: the requests it had are
    /// answered with an error (it cannot answer them any more), and its own
    /// requests to the client are forgotten. Calls being decided or asked
    /// about go to the new server.
    async fn requests_lost(&mut self, how: &str) {
        let text = format!(
            "the MCP server '{}' exited ({how}) before answering; it was started again",
            self.gate.server()
        );
        let mut pending: Vec<(u64, ToServer)> = self.to_server.drain().collect();
        pending.sort_by_key(|(id, _)| *id);
        for (_, request) in pending.into_iter().filter(|(_, r)| !r.replay) {
            self.reply_error(Some(request.id), SERVER_GONE, &text).await;
        }
        self.to_client.retain(|_, pending| matches!(pending, ToClient::Approval { .. }));
    }

    /// A new server process: the client's handshake is replayed to it
    /// (its answer is the proxy's), and the client is told to list the
    /// tools again, which checks their pins.
    async fn restarted(&mut self) {
        let Some(line) = self.initialize.clone() else { return };
        let Ok(mut message) = Message::parse(&line) else { return };
        self.next_server_id += 1;
        let proxy_id = self.next_server_id;
        message.set("id", raw(&Value::from(proxy_id)));
        let id = raw(&Value::Null);
        let initialize = ToServer { id, method: "initialize".into(), replay: true, approval: None };
        self.to_server.insert(proxy_id, initialize);
        self.to_server(message).await;
        if self.initialized {
            self.to_server(Message::notification("notifications/initialized", &json!({}))).await;
        }
        self.to_client(&Message::notification("notifications/tools/list_changed", &json!({}))).await;
    }

    /// The server is gone: every request it had, or that waits for a
    /// decision, is answered with an error.
    async fn server_gone(&mut self, how: &str) {
        let text = format!("the MCP server '{}' exited ({how}) before answering", self.gate.server());
        let mut pending: Vec<(u64, ToServer)> = self.to_server.drain().collect();
        pending.sort_by_key(|(id, _)| *id);
        for (_, request) in pending.into_iter().filter(|(_, r)| !r.replay) {
            self.reply_error(Some(request.id), SERVER_GONE, &text).await;
        }
        for key in self.deciding.keys() {
            if let Ok(id) = RawValue::from_string(key.clone()) {
                self.reply_error(Some(id), SERVER_GONE, &text).await;
            }
        }
        let held: Vec<ToClient> = self.to_client.drain().map(|(_, pending)| pending).collect();
        for pending in held {
            if let ToClient::Approval { message, .. } = pending {
                let id = message.get("id").expect("a request has an id").to_owned();
                self.reply_error(Some(id), SERVER_GONE, &text).await;
            }
        }
    }
}
