//! One client's session of the streamable HTTP transport (`--listen`): a
//! proxy run of its own (and so its own server process, or its own session
//! with the upstream), and the routing of what that proxy sends the client
//! onto the client's open streams.
//!
//! The client sends each message as a `POST`. A request's `POST` is
//! answered with an event stream that carries the request's answer and
//! what belongs to it: its progress notifications (matched by progress
//! token), and whatever else the server sends while the request is open
//! (its logging, its sampling or elicitation requests, the proxy's own
//! approval requests), which goes to the oldest request still open. What
//! the server sends while no request is open goes to the client's `GET`
//! stream, and waits for one (up to [`WAITING`] messages) while there is
//! none.
//!
//! Every event has an id (`STREAM-NUMBER`), and each stream keeps its last
//! [`KEPT`] events: a client whose connection broke asks again with
//! `GET` and `Last-Event-ID`, and is given what it missed, then the rest
//! of that stream (the stream's answer included, if it had not come yet).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::io::BufReader;
use tokio::sync::mpsc;

use crate::config::McpConfig;
use crate::config::Servers;
use crate::framing::spawn_writer;
use crate::framing::{next_line, Line};
use crate::gate::Gate;
use crate::message::{Kind, Message, SERVER_GONE};
use crate::mux;

/// Events each stream keeps for a client that resumes it.
pub const KEPT: usize = 256;

/// Messages unrelated to any request kept while the client has no `GET`
/// stream open; past this the oldest is dropped, with a warning.
pub const WAITING: usize = 1024;

/// Finished request streams kept for resumption, per session.
const FINISHED_KEPT: usize = 64;

/// How long a client is told to wait before it reconnects (`retry`, in
/// milliseconds), on the streams that say it (2025-11-25 and later).
const RETRY_MS: u64 = 1000;

/// One client's session.
pub struct Session {
    /// The `Mcp-Session-Id` the client was given.
    pub id: String,
    /// Lines to the session's proxy; taken to close the session.
    input: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    routes: Mutex<Routes>,
    last_active: Mutex<Instant>,
}

/// Why a stream cannot be opened.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The session's `GET` stream is open already (HTTP 409).
    AlreadyListening,
    /// The session ended: its proxy, or its server, is gone (HTTP 404).
    Ended,
}

/// The events of one stream, as the client reads them.
pub type Events = mpsc::UnboundedReceiver<Bytes>;

/// The request that starts a session (its `initialize`).
#[derive(Debug, Clone)]
pub struct First {
    /// Its id, as raw JSON text.
    pub id: String,
    /// Its progress token, as raw JSON text.
    pub progress_token: Option<String>,
    /// The protocol version its `MCP-Protocol-Version` named.
    pub version: Option<String>,
    /// The message itself.
    pub message: Vec<u8>,
}

impl Session {
    /// Starts a session whose proxy reaches `servers`, its `first` request
    /// registered and queued before the proxy starts (the stream of its
    /// answer is given back); `ended` runs once its proxy has ended (the
    /// client closed it, or the server exited).
    pub fn start(
        id: String,
        gate: Gate,
        config: McpConfig,
        servers: Servers,
        first: Option<First>,
        ended: impl FnOnce() + Send + 'static,
    ) -> (Arc<Session>, Option<Events>) {
        let limit = config.max_message_bytes;
        let (to_proxy, proxy_in) = tokio::io::duplex(64 * 1024);
        let (proxy_out, from_proxy) = tokio::io::duplex(64 * 1024);
        // The client's messages, a line each, into the proxy.
        let (input, _writer) = spawn_writer(to_proxy, 1024);
        let session = Arc::new(Session {
            id,
            input: Mutex::new(Some(input)),
            routes: Mutex::new(Routes::default()),
            last_active: Mutex::new(Instant::now()),
        });
        let events = first.map(|first| {
            let events = session
                .open_request(&first.id, first.progress_token, first.version.as_deref())
                .expect("a session not started yet has not ended");
            let input = session.input.lock().expect("not poisoned").clone().expect("not closed yet");
            input.try_send(first.message).expect("the queue of a new session has room");
            events
        });
        // What the proxy sends the client, onto the client's streams.
        let routing = Arc::clone(&session);
        tokio::spawn(async move {
            // The proxy writes only messages within the limit (it skipped
            // longer ones when it read them): the margin is for its own.
            let mut reader = BufReader::with_capacity(64 * 1024, from_proxy);
            while let Ok(Some(line)) = next_line(&mut reader, limit.saturating_mul(2)).await {
                if let Line::Message(bytes) = line {
                    routing.route(Bytes::from(bytes));
                }
            }
        });
        let running = Arc::clone(&session);
        tokio::spawn(async move {
            match mux::relay(gate, config, &servers, proxy_in, proxy_out).await {
                Ok(how) => tracing::debug!("an MCP session ended: {how:?}"),
                Err(error) => tracing::error!("an MCP session could not start its server: {error}"),
            }
            running.end();
            ended();
        });
        (session, events)
    }

    /// Hands a message from the client to the session's proxy; `false`
    /// when the session has ended.
    pub async fn send(&self, message: Vec<u8>) -> bool {
        self.touch();
        let input = self.input.lock().expect("not poisoned").clone();
        match input {
            Some(input) => input.send(message).await.is_ok(),
            None => false,
        }
    }

    /// Ends the session as a stdio client ends one, by closing the proxy's
    /// input: the proxy closes the server's (or the upstream session) and
    /// ends, and with it every stream.
    pub fn close(&self) {
        self.input.lock().expect("not poisoned").take();
    }

    /// Opens the stream that will carry the answer to the request `id` (its
    /// raw JSON text) and what belongs to it. `version` is the protocol
    /// version the request says it speaks (its `MCP-Protocol-Version`).
    pub fn open_request(
        &self,
        id: &str,
        progress_token: Option<String>,
        version: Option<&str>,
    ) -> Result<Events, Refused> {
        self.touch();
        let mut routes = self.routes.lock().expect("not poisoned");
        if routes.ended {
            return Err(Refused::Ended);
        }
        let (client, events) = mpsc::unbounded_channel();
        let number = routes.next_stream();
        let mut stream = Stream { client: Some(client), due: 1, ..Stream::default() };
        if primes(version) {
            stream.prime(number);
        }
        routes.streams.insert(number, stream);
        routes.answers.insert(id.to_owned(), number);
        if let Some(token) = progress_token {
            routes.progress.insert(token, number);
        }
        Ok(events)
    }

    /// Closes the stream `open_request` opened for `id`, when the request
    /// could not be handed on after all.
    pub fn abandon_request(&self, id: &str) {
        let mut routes = self.routes.lock().expect("not poisoned");
        if let Some(number) = routes.answers.remove(id) {
            routes.streams.remove(&number);
        }
    }

    /// Opens the client's `GET` stream: what the server sends while no
    /// request is open, starting with what waited for it.
    pub fn listen(&self, version: Option<&str>) -> Result<Events, Refused> {
        self.touch();
        let mut guard = self.routes.lock().expect("not poisoned");
        let routes = &mut *guard;
        if routes.ended {
            return Err(Refused::Ended);
        }
        let number = match routes.standalone {
            Some(number) => number,
            None => {
                let number = routes.next_stream();
                routes.standalone = Some(number);
                routes.streams.insert(number, Stream::default());
                number
            }
        };
        let stream = routes.streams.get_mut(&number).expect("the standalone stream is kept");
        if stream.client.as_ref().is_some_and(|client| !client.is_closed()) {
            return Err(Refused::AlreadyListening);
        }
        let (client, events) = mpsc::unbounded_channel();
        stream.client = Some(client);
        if primes(version) {
            stream.prime(number);
        }
        let waiting: Vec<Bytes> = routes.waiting.drain(..).collect();
        for message in waiting {
            routes.emit(number, &message);
        }
        Ok(events)
    }

    /// Resumes the stream an event id (`Last-Event-ID`) belongs to: the
    /// events after it that the stream kept, then the rest of the stream.
    /// `None` when the id names no stream of this session.
    pub fn resume(&self, last_event: &str) -> Option<Events> {
        self.touch();
        let (number, seen) = parse_event_id(last_event)?;
        let mut guard = self.routes.lock().expect("not poisoned");
        let routes = &mut *guard;
        let stream = routes.streams.get_mut(&number)?;
        let (client, events) = mpsc::unbounded_channel();
        if stream.kept.front().is_some_and(|(first, _)| *first > seen + 1) {
            tracing::warn!(
                "a client resumed an event stream after event {seen}, but only events from {} on were kept",
                stream.kept.front().map(|(first, _)| *first).unwrap_or_default()
            );
        }
        for (_, frame) in stream.kept.iter().filter(|(n, _)| *n > seen) {
            let _ = client.send(frame.clone());
        }
        // A finished stream ends after the replay (the sender is dropped).
        if !stream.finished && !routes.ended {
            stream.client = Some(client);
        }
        Some(events)
    }

    /// Whether the client has no stream open (and so may be idle).
    pub fn idle_since(&self) -> Option<Instant> {
        let routes = self.routes.lock().expect("not poisoned");
        let open = routes.streams.values().any(|s| s.client.as_ref().is_some_and(|c| !c.is_closed()));
        (!open).then(|| *self.last_active.lock().expect("not poisoned"))
    }

    fn touch(&self) {
        *self.last_active.lock().expect("not poisoned") = Instant::now();
    }

    /// Puts one message from the proxy on the stream it belongs to.
    fn route(&self, message: Bytes) {
        let parsed = Message::parse(&message).ok();
        let mut routes = self.routes.lock().expect("not poisoned");
        let Some(parsed) = parsed else {
            tracing::warn!("the proxy sent the client something that is not a JSON-RPC message: dropped");
            return;
        };
        match parsed.kind() {
            Ok(Kind::Response) => {
                let id = parsed.get("id").map(|id| id.get().to_owned()).unwrap_or_default();
                match routes.answers.remove(&id) {
                    Some(number) => {
                        routes.emit(number, &message);
                        routes.answered(number);
                    }
                    None => tracing::warn!(
                        "an answer to a request no stream waits for (id {id}): dropped (was the request's stream abandoned?)"
                    ),
                }
            }
            _ => {
                let token = match parsed.method().as_deref() {
                    Some("notifications/progress") => parsed
                        .value("params")
                        .and_then(|params| params.get("progressToken").map(Value::to_string)),
                    _ => None,
                };
                let number = token
                    .and_then(|token| routes.progress.get(&token).copied())
                    .filter(|number| routes.streams.get(number).is_some_and(|s| s.due > 0))
                    .or_else(|| routes.oldest_open_request())
                    .or_else(|| routes.standalone.filter(|n| routes.streams[n].client.is_some()));
                match number {
                    Some(number) => routes.emit(number, &message),
                    None => {
                        if routes.waiting.len() == WAITING {
                            routes.waiting.pop_front();
                            tracing::warn!(
                                "{WAITING} messages wait for the client's GET stream, which it does not open: the oldest was dropped"
                            );
                        }
                        routes.waiting.push_back(message);
                    }
                }
            }
        }
    }

    /// The proxy ended: a request still waiting (its server could not be
    /// started, say) is answered with an error, every stream ends (each
    /// client's reader sees its stream close), and nothing more can be
    /// opened.
    fn end(&self) {
        let mut guard = self.routes.lock().expect("not poisoned");
        let routes = &mut *guard;
        routes.ended = true;
        let waiting: Vec<(String, u64)> = routes.answers.drain().collect();
        for (id, number) in waiting {
            let Ok(id) = RawValue::from_string(id) else { continue };
            let text = "the MCP session ended before answering: its server exited or could not be started";
            routes.emit(number, &Message::error(Some(id), SERVER_GONE, text).to_line());
        }
        for stream in routes.streams.values_mut() {
            stream.client = None;
        }
    }
}

/// Where what the proxy sends goes.
#[derive(Default)]
struct Routes {
    last_stream: u64,
    /// Every stream by number: the lowest is the oldest.
    streams: BTreeMap<u64, Stream>,
    /// Open requests (their id's raw JSON text) and the stream each is
    /// answered on.
    answers: HashMap<String, u64>,
    /// Progress tokens (their raw JSON text) and their request's stream.
    progress: HashMap<String, u64>,
    /// The `GET` stream's number, once the client opened one.
    standalone: Option<u64>,
    /// Messages for the `GET` stream, while none is open.
    waiting: VecDeque<Bytes>,
    ended: bool,
}

impl Routes {
    fn next_stream(&mut self) -> u64 {
        self.last_stream += 1;
        self.last_stream
    }

    /// The oldest request stream still waiting for its answer.
    fn oldest_open_request(&self) -> Option<u64> {
        self.streams.iter().find(|(_, s)| s.due > 0).map(|(n, _)| *n)
    }

    /// Sends `message` as the next event of stream `number`.
    fn emit(&mut self, number: u64, message: &[u8]) {
        let Some(stream) = self.streams.get_mut(&number) else { return };
        stream.sent += 1;
        let mut frame = Vec::with_capacity(message.len() + 32);
        frame.extend_from_slice(format!("id: {number}-{}\ndata: ", stream.sent).as_bytes());
        frame.extend_from_slice(message);
        frame.extend_from_slice(b"\n\n");
        stream.push(Bytes::from(frame));
    }

    /// The request on stream `number` was answered: the stream ends, and
    /// is kept a while for a client that resumes it.
    fn answered(&mut self, number: u64) {
        let Some(stream) = self.streams.get_mut(&number) else { return };
        stream.due = stream.due.saturating_sub(1);
        if stream.due > 0 {
            return;
        }
        stream.finished = true;
        stream.client = None;
        self.progress.retain(|_, n| *n != number);
        let finished: Vec<u64> = self.streams.iter().filter(|(_, s)| s.finished).map(|(n, _)| *n).collect();
        for old in finished.iter().take(finished.len().saturating_sub(FINISHED_KEPT)) {
            self.streams.remove(old);
        }
    }
}

/// One event stream towards the client.
#[derive(Default)]
struct Stream {
    /// The client's reader, while it is connected.
    client: Option<mpsc::UnboundedSender<Bytes>>,
    /// Answers still due on it (1 for a request's stream, then 0; always 0
    /// for the `GET` stream).
    due: usize,
    /// Its answer was sent: it ends.
    finished: bool,
    /// Events sent so far (the last one's number).
    sent: u64,
    /// The last [`KEPT`] events, by number.
    kept: VecDeque<(u64, Bytes)>,
}

impl Stream {
    fn push(&mut self, frame: Bytes) {
        if self.kept.len() == KEPT {
            self.kept.pop_front();
        }
        self.kept.push_back((self.sent, frame.clone()));
        if let Some(client) = &self.client {
            if client.send(frame).is_err() {
                // The client went away; it may resume from the kept events.
                self.client = None;
            }
        }
    }

    /// The first event of a stream from 2025-11-25 on: an id to resume
    /// from and how long to wait before reconnecting, without data.
    fn prime(&mut self, number: u64) {
        let frame = format!("id: {number}-{}\nretry: {RETRY_MS}\ndata: \n\n", self.sent);
        if let Some(client) = &self.client {
            let _ = client.send(Bytes::from(frame));
        }
    }
}

/// Whether streams for this protocol version open with a priming event
/// (2025-11-25 and later; earlier clients would read its empty data as a
/// message that is not JSON).
fn primes(version: Option<&str>) -> bool {
    version.is_some_and(|v| v >= "2025-11-25")
}

/// `STREAM-NUMBER`, as [`Routes::emit`] writes event ids.
fn parse_event_id(id: &str) -> Option<(u64, u64)> {
    let (stream, number) = id.trim().split_once('-')?;
    Some((stream.parse().ok()?, number.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids() {
        assert_eq!(parse_event_id("3-17"), Some((3, 17)));
        assert_eq!(parse_event_id(" 3-0 "), Some((3, 0)));
        assert_eq!(parse_event_id("3"), None);
        assert_eq!(parse_event_id("a-1"), None);
    }

    #[test]
    fn priming_from_2025_11_25() {
        assert!(!primes(None));
        assert!(!primes(Some("2025-06-18")));
        assert!(primes(Some("2025-11-25")));
        assert!(primes(Some("2026-07-28")));
    }

    fn frames(events: &mut Events) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(frame) = events.try_recv() {
            out.push(String::from_utf8(frame.to_vec()).unwrap());
        }
        out
    }

    fn session() -> Session {
        Session {
            id: "s".into(),
            input: Mutex::new(None),
            routes: Mutex::new(Routes::default()),
            last_active: Mutex::new(Instant::now()),
        }
    }

    #[test]
    fn answers_progress_and_unrelated_messages_find_their_streams() {
        let session = session();
        // Unrelated, before any stream: it waits for the GET stream.
        session
            .route(Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#));
        let mut first = session.open_request("1", Some("\"p1\"".into()), None).unwrap();
        let mut second = session.open_request("\"two\"", Some("7".into()), None).unwrap();
        session.route(Bytes::from_static(
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1}}"#,
        ));
        session
            .route(Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#));
        session.route(Bytes::from_static(br#"{"jsonrpc":"2.0","id":"two","result":{}}"#));
        let second_frames = frames(&mut second);
        assert_eq!(second_frames.len(), 2, "{second_frames:?}");
        assert!(second_frames[0].starts_with("id: 2-1\ndata: ") && second_frames[0].contains("progress"));
        assert!(second_frames[1].contains(r#""id":"two""#));
        // The answer ended the second stream.
        assert!(second.try_recv().is_err() && second.is_closed());
        // The log message went to the oldest open request.
        let first_frames = frames(&mut first);
        assert_eq!(first_frames.len(), 1);
        assert!(first_frames[0].contains("notifications/message"));
        // The GET stream gets what waited.
        let mut get = session.listen(None).unwrap();
        assert!(frames(&mut get)[0].contains("list_changed"));
        assert_eq!(session.listen(None).unwrap_err(), Refused::AlreadyListening);
    }

    #[test]
    fn a_broken_stream_is_resumed_with_what_it_missed_then_its_answer() {
        let session = session();
        let events = session.open_request("5", None, Some("2025-11-25")).unwrap();
        drop(events);
        session
            .route(Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#));
        let mut resumed = session.resume("1-0").unwrap();
        let replayed = frames(&mut resumed);
        assert_eq!(replayed.len(), 1);
        assert!(replayed[0].starts_with("id: 1-1\n"));
        session.route(Bytes::from_static(br#"{"jsonrpc":"2.0","id":5,"result":{}}"#));
        let rest = frames(&mut resumed);
        assert_eq!(rest.len(), 1);
        assert!(rest[0].starts_with("id: 1-2\n"));
        // A finished stream is replayed and ends.
        let mut again = session.resume("1-1").unwrap();
        assert_eq!(frames(&mut again).len(), 1);
        assert!(again.is_closed());
        assert!(session.resume("9-1").is_none());
    }
}
