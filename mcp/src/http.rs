//! The streamable HTTP transport towards a server (`--upstream URL`), as
//! MCP's 2025-06-18 and 2025-11-25 revisions define it, over plain HTTP/1.1.
//!
//! Each message the proxy sends is one `POST` to the server's URL (on a
//! connection of its own, so that a long answer streamed as server-sent
//! events holds up no other call): a notification or a response is
//! answered `202 Accepted`; a request with one JSON message or with an
//! event stream whose events are messages (progress, the server's own
//! requests, and the answer). The `Mcp-Session-Id` the server gives at
//! `initialize` and the negotiated `MCP-Protocol-Version` are sent with
//! every later message. Once the client said `notifications/initialized`, a
//! `GET` stream carries what the server sends unasked (a server that
//! offers none answers 405); it is opened again, with `Last-Event-ID`, when
//! it ends. When the proxy ends, the session is closed with `DELETE`.
//!
//! A request the server cannot be reached for, answers with an HTTP error,
//! or whose event stream ends before its answer, is answered with a
//! JSON-RPC error saying so, so no call waits for an answer that will not
//! come. An `https://` server is reached over TLS ([`crate::tls`]: the
//! system's roots and `mcp.ca_file`, the certificate checked against the
//! URL's host).
//!
//! A connection whose exchange has ended (its answer read to the end) is
//! kept for the next message, up to [`IDLE_CONNECTIONS`] of them; one the
//! server closed meanwhile is not used, and a message a kept connection
//! could not send at all is sent again on a new one.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::HeaderValue;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

use crate::framing::Line;
use crate::message::{Kind, Message, SERVER_GONE};
use crate::sse::EventParser;
use crate::tls::{Stream, TlsError};

/// An `http://` or `https://` URL, read as far as the transport needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `host:port`, for the connection.
    pub address: String,
    /// The `Host` header.
    pub authority: String,
    /// The path and query.
    pub path: String,
    /// For `https://`: the host the server's certificate must name (a
    /// DNS name or an IP address, without brackets).
    pub tls: Option<String>,
    /// The token every request carries as `Authorization: Bearer TOKEN`.
    pub bearer: Option<Bearer>,
}

/// A token sent to the server, never shown: its `Debug` names no byte of
/// it, and the header it goes in is marked sensitive.
#[derive(Clone, PartialEq, Eq)]
pub struct Bearer(HeaderValue);

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bearer(..)")
    }
}

impl Bearer {
    /// The token in the environment variable `var`; why not, naming the
    /// variable (never its value).
    pub fn from_env(var: &str) -> Result<Bearer, String> {
        let token = std::env::var(var).unwrap_or_default();
        let token = token.trim();
        if token.is_empty() {
            return Err(format!(
                "the environment variable {var} is unset or empty; set it to the token the server expects as \
                 `Authorization: Bearer TOKEN`"
            ));
        }
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            format!("the environment variable {var} holds characters a header cannot carry (a token is printable ASCII)")
        })?;
        value.set_sensitive(true);
        Ok(Bearer(value))
    }
}

/// A URL the transport cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the upstream `{url}` is not a URL this proxy can reach: {why}")]
pub struct BadUrl {
    /// The URL given.
    pub url: String,
    /// What is wrong.
    pub why: &'static str,
}

impl Endpoint {
    /// Reads `http://host[:port][/path]` or `https://host[:port][/path]`.
    pub fn parse(url: &str) -> Result<Endpoint, BadUrl> {
        let bad = |why| BadUrl { url: url.to_owned(), why };
        let (rest, tls, port) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (rest, false, 80),
            (_, Some(rest)) => (rest, true, 443),
            _ => return Err(bad("it does not start with http:// or https://")),
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(bad("it names no host, or names a user (credentials go in headers, not URLs)"));
        }
        let has_port = match authority.rfind(':') {
            Some(at) => !authority[at..].contains(']'),
            None => false,
        };
        let address = if has_port { authority.to_owned() } else { format!("{authority}:{port}") };
        let path = if path.starts_with('?') { format!("/{path}") } else { path.to_owned() };
        let host = match has_port {
            true => &authority[..authority.rfind(':').expect("a port follows a colon")],
            false => authority,
        };
        let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        if tls && ServerName::try_from(host).is_err() {
            return Err(bad(
                "its host is neither a DNS name nor an IP address, so no certificate can name it",
            ));
        }
        let tls = tls.then(|| host.to_owned());
        Ok(Endpoint { address, authority: authority.to_owned(), path, tls, bearer: None })
    }
}

/// Connections kept for later messages, at most.
pub const IDLE_CONNECTIONS: usize = 8;

/// What every exchange with the server shares.
struct Shared {
    endpoint: Endpoint,
    /// For `https://`.
    tls: Option<TlsConnector>,
    /// Connections kept: each is used again once its exchange has ended.
    kept: Mutex<Vec<SendRequest<Full<Bytes>>>>,
    limit: usize,
    session: Mutex<Option<String>>,
    version: Mutex<Option<String>>,
    /// Lines from the server, into the proxy.
    output: mpsc::Sender<Line>,
}

impl Shared {
    /// Hands a line from the server on; whether the proxy still listens.
    async fn deliver(&self, line: Line) -> bool {
        self.output.send(line).await.is_ok()
    }
}

/// The ends of a running transport.
pub struct Transport {
    /// Messages to send to the server, one a line; dropping it ends the
    /// session (`DELETE`).
    pub input: mpsc::Sender<Vec<u8>>,
    /// What the server sends, message by message; it ends once the session
    /// is closed.
    pub output: mpsc::Receiver<Line>,
    /// The task that sends.
    pub task: tokio::task::JoinHandle<()>,
}

/// Starts the transport towards `endpoint` (over TLS for `https://`,
/// trusting the system's roots and `ca_file`'s); messages over `limit`
/// bytes are handed on as [`Line::TooLong`].
pub fn start(endpoint: Endpoint, limit: usize, ca_file: Option<&Path>) -> Result<Transport, TlsError> {
    let tls = match endpoint.tls {
        Some(_) => Some(crate::tls::connector(ca_file)?),
        None => None,
    };
    let (input, mut lines) = mpsc::channel::<Vec<u8>>(1024);
    let (output_tx, output) = mpsc::channel::<Line>(1024);
    let shared = Arc::new(Shared {
        endpoint,
        tls,
        kept: Mutex::new(Vec::new()),
        limit,
        session: Mutex::new(None),
        version: Mutex::new(None),
        output: output_tx,
    });
    let task = tokio::spawn(async move {
        let mut listening = None;
        let mut initializing: Option<oneshot::Receiver<()>> = None;
        while let Some(line) = lines.recv().await {
            // Everything after `initialize` needs the session id and the
            // protocol version its answer gives: it waits for that answer
            // (or its failure), not for the rest of the answer's stream.
            if let Some(answered) = initializing.take() {
                let _ = answered.await;
            }
            let Ok(message) = Message::parse(&line) else { continue };
            let kind = message.kind().ok();
            let method = message.method();
            let initialized =
                kind == Some(Kind::Notification) && method.as_deref() == Some("notifications/initialized");
            let answered = match method.as_deref() == Some("initialize") {
                true => {
                    let (tell, answered) = oneshot::channel();
                    initializing = Some(answered);
                    Some(tell)
                }
                false => None,
            };
            let sending = Arc::clone(&shared);
            tokio::spawn(async move { post(&sending, line, message, answered).await });
            if initialized && listening.is_none() {
                listening = Some(tokio::spawn(listen(Arc::clone(&shared))));
            }
        }
        if let Some(listening) = listening {
            listening.abort();
        }
        close(&shared).await;
    });
    Ok(Transport { input, output, task })
}

/// Sends one message and hands on what comes back; `answered` is told
/// once the first message of the answer has been handed on.
async fn post(shared: &Shared, line: Vec<u8>, message: Message, mut answered: Option<oneshot::Sender<()>>) {
    let request: Option<&RawValue> = match message.kind() {
        Ok(Kind::Request) => message.get("id"),
        _ => None,
    };
    let initialize = message.method().as_deref() == Some("initialize");
    let fail = |why: String| async move {
        tracing::error!(upstream = %shared.endpoint.authority, "{why}");
        if let Some(id) = request {
            let text = format!("the MCP server at {} could not answer: {why}", shared.endpoint.authority);
            shared
                .deliver(Line::Message(Message::error(Some(id.to_owned()), SERVER_GONE, &text).to_line()))
                .await;
        }
    };
    let response = match exchange(shared, Method::POST, Some(line)).await {
        Ok(response) => response,
        Err(why) => return fail(why).await,
    };
    if initialize {
        if let Some(session) = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
            *shared.session.lock().expect("not poisoned") = Some(session.to_owned());
        }
    }
    match response.status() {
        StatusCode::ACCEPTED => {}
        StatusCode::OK => {
            let sse = is_event_stream(&response);
            let delivered = if sse {
                answer_stream(shared, response.into_body(), initialize, &mut answered, request).await
            } else {
                match body(response.into_body(), shared.limit).await {
                    Ok(Line::Message(bytes)) => {
                        if initialize {
                            remember_version(shared, &bytes);
                        }
                        shared.deliver(Line::Message(bytes)).await;
                        tell(&mut answered);
                        Ok(())
                    }
                    Ok(too_long) => {
                        shared.deliver(too_long).await;
                        Ok(())
                    }
                    Err(why) => Err(why),
                }
            };
            if let Err(why) = delivered {
                fail(why).await
            }
        }
        status => {
            let text = body(response.into_body(), 1024).await.ok();
            let detail = match text {
                Some(Line::Message(bytes)) => String::from_utf8_lossy(&bytes).chars().take(200).collect(),
                _ => String::new(),
            };
            fail(format!("it answered HTTP {status} {detail}").trim_end().to_owned()).await
        }
    }
}

/// Hands on a request's event stream until its answer. A server may close
/// the stream before the answer (2025-11-25's polling: it said how long to
/// wait with `retry`): the stream is then resumed with `GET` and
/// `Last-Event-ID`, up to [`RESUMPTIONS`] times.
async fn answer_stream(
    shared: &Shared,
    mut body: Incoming,
    initialize: bool,
    answered: &mut Option<oneshot::Sender<()>>,
    request: Option<&RawValue>,
) -> Result<(), String> {
    let mut stream = StreamState::default();
    let mut resumed = 0;
    loop {
        if events(shared, body, &mut stream, initialize, answered, request).await? {
            return Ok(());
        }
        let Some(last_event) = stream.last_event.clone() else {
            return Err(
                "the event stream ended before the answer came, and gave no event id to resume it from"
                    .into(),
            );
        };
        if resumed == RESUMPTIONS {
            return Err(format!("the event stream ended before the answer came, {RESUMPTIONS} times"));
        }
        resumed += 1;
        let wait = Duration::from_millis(stream.retry_ms.unwrap_or(1000).min(MAX_RETRY_MS));
        tracing::debug!(upstream = %shared.endpoint.authority, "the server closed a request's event stream early: resuming it in {wait:?}");
        tokio::time::sleep(wait).await;
        let response = exchange_get(shared, Some(&last_event)).await?;
        if response.status() != StatusCode::OK || !is_event_stream(&response) {
            return Err(format!("resuming the event stream was refused: HTTP {}", response.status()));
        }
        body = response.into_body();
    }
}

/// Resumptions of one request's event stream before the request fails.
const RESUMPTIONS: u32 = 5;

/// The longest wait before a resumption, whatever the server asks.
const MAX_RETRY_MS: u64 = 10_000;

/// What an event stream said about resuming it.
#[derive(Debug, Default)]
struct StreamState {
    /// The last event id seen.
    last_event: Option<String>,
    /// The last `retry` (milliseconds).
    retry_ms: Option<u64>,
}

/// The `GET` stream of what the server sends unasked, opened again a
/// second after it ends, until the proxy ends it.
async fn listen(shared: Arc<Shared>) {
    let mut stream = StreamState::default();
    loop {
        let response = match exchange_get(&shared, stream.last_event.as_deref()).await {
            Ok(response) => response,
            Err(why) => {
                tracing::warn!(upstream = %shared.endpoint.authority, "the server's event stream could not be opened: {why}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        match response.status() {
            StatusCode::OK if is_event_stream(&response) => {
                if let Err(why) =
                    events(&shared, response.into_body(), &mut stream, false, &mut None, None).await
                {
                    tracing::warn!(upstream = %shared.endpoint.authority, "the server's event stream ended: {why}");
                }
            }
            StatusCode::METHOD_NOT_ALLOWED => {
                tracing::debug!(upstream = %shared.endpoint.authority, "the server offers no event stream of its own (405)");
                return;
            }
            status => {
                tracing::warn!(upstream = %shared.endpoint.authority, "the server's event stream was refused: HTTP {status}");
                return;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Ends the session.
async fn close(shared: &Shared) {
    if shared.session.lock().expect("not poisoned").is_none() {
        return;
    }
    match tokio::time::timeout(Duration::from_secs(5), exchange(shared, Method::DELETE, None)).await {
        Ok(Ok(_)) => {}
        Ok(Err(why)) => tracing::debug!(upstream = %shared.endpoint.authority, "closing the session: {why}"),
        Err(_) => tracing::debug!(upstream = %shared.endpoint.authority, "closing the session timed out"),
    }
}

/// Tells whoever waits for the first message of an answer.
fn tell(answered: &mut Option<oneshot::Sender<()>>) {
    if let Some(answered) = answered.take() {
        let _ = answered.send(());
    }
}

fn remember_version(shared: &Shared, answer: &[u8]) {
    let version = serde_json::from_slice::<Value>(answer)
        .ok()
        .and_then(|v| v.pointer("/result/protocolVersion").and_then(Value::as_str).map(str::to_owned));
    if let Some(version) = version {
        *shared.version.lock().expect("not poisoned") = Some(version);
    }
}

fn is_event_stream(response: &Response<Incoming>) -> bool {
    response
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

async fn exchange_get(shared: &Shared, last_event: Option<&str>) -> Result<Response<Incoming>, String> {
    let mut request = request(shared, Method::GET, None);
    if let Some(id) = last_event {
        request.headers_mut().insert("last-event-id", id.parse().map_err(|_| "a bad event id".to_owned())?);
    }
    let mut sender = connect(shared).await?;
    sender.send_request(request).await.map_err(|e| format!("the request failed: {e}"))
}

async fn exchange(
    shared: &Shared,
    method: Method,
    body: Option<Vec<u8>>,
) -> Result<Response<Incoming>, String> {
    send(shared, request(shared, method, body)).await
}

fn request(shared: &Shared, method: Method, body: Option<Vec<u8>>) -> Request<Full<Bytes>> {
    let mut builder = Request::builder()
        .method(method.clone())
        .uri(&shared.endpoint.path)
        .header(hyper::header::HOST, &shared.endpoint.authority);
    builder = match method {
        Method::GET => builder.header(hyper::header::ACCEPT, "text/event-stream"),
        _ => builder
            .header(hyper::header::ACCEPT, "application/json, text/event-stream")
            .header(hyper::header::CONTENT_TYPE, "application/json"),
    };
    if let Some(session) = shared.session.lock().expect("not poisoned").as_deref() {
        builder = builder.header("mcp-session-id", session);
    }
    if let Some(version) = shared.version.lock().expect("not poisoned").as_deref() {
        builder = builder.header("mcp-protocol-version", version);
    }
    if let Some(Bearer(token)) = &shared.endpoint.bearer {
        builder = builder.header(hyper::header::AUTHORIZATION, token.clone());
    }
    builder.body(Full::new(Bytes::from(body.unwrap_or_default()))).expect("the request's parts are valid")
}

/// Sends `request` on a kept connection whose exchange has ended, or on a
/// new one, and keeps the connection for a later message.
async fn send(shared: &Shared, mut request: Request<Full<Bytes>>) -> Result<Response<Incoming>, String> {
    while let Some(mut sender) = shared.ready_connection() {
        match sender.try_send_request(request).await {
            Ok(response) => {
                shared.keep(sender);
                return Ok(response);
            }
            Err(mut error) => match error.take_message() {
                // Never sent (the server closed the connection meanwhile).
                Some(unsent) => request = unsent,
                None => return Err(format!("the request failed: {}", error.error())),
            },
        }
    }
    let mut sender = connect(shared).await?;
    let response = sender.send_request(request).await.map_err(|e| format!("the request failed: {e}"))?;
    shared.keep(sender);
    Ok(response)
}

impl Shared {
    /// A kept connection ready for a request, if one is; forgets the ones
    /// the server closed.
    fn ready_connection(&self) -> Option<SendRequest<Full<Bytes>>> {
        let mut kept = self.kept.lock().expect("not poisoned");
        kept.retain(|sender| !sender.is_closed());
        let ready = kept.iter().position(SendRequest::is_ready)?;
        Some(kept.swap_remove(ready))
    }

    /// Keeps `sender` for a later message; past [`IDLE_CONNECTIONS`], the
    /// longest kept one still busy goes (it closes when its exchange ends).
    fn keep(&self, sender: SendRequest<Full<Bytes>>) {
        let mut kept = self.kept.lock().expect("not poisoned");
        kept.retain(|sender| !sender.is_closed());
        if kept.len() >= IDLE_CONNECTIONS {
            let busy = kept.iter().position(|s| !s.is_ready()).unwrap_or(0);
            kept.remove(busy);
        }
        kept.push(sender);
    }
}

/// A new connection to the server (TLS for `https://`).
async fn connect(shared: &Shared) -> Result<SendRequest<Full<Bytes>>, String> {
    let address = &shared.endpoint.address;
    let stream =
        TcpStream::connect(address).await.map_err(|e| format!("cannot connect to {address}: {e}"))?;
    let _ = stream.set_nodelay(true);
    match (&shared.tls, &shared.endpoint.tls) {
        (Some(connector), Some(host)) => {
            let name = ServerName::try_from(host.clone())
                .map_err(|_| format!("`{host}` cannot be named by a certificate"))?;
            let stream = connector
                .connect(name, stream)
                .await
                .map_err(|e| format!("TLS with {} failed: {e}", shared.endpoint.authority))?;
            handshake(Box::new(stream)).await
        }
        _ => handshake(Box::new(stream)).await,
    }
}

async fn handshake(io: Box<dyn Stream>) -> Result<SendRequest<Full<Bytes>>, String> {
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("HTTP handshake failed: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// A whole body, up to `limit` bytes.
async fn body(mut body: Incoming, limit: usize) -> Result<Line, String> {
    let mut bytes = Vec::new();
    let mut length = 0;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("reading the answer failed: {e}"))?;
        if let Some(data) = frame.data_ref() {
            length += data.len();
            if length <= limit {
                bytes.extend_from_slice(data);
            }
        }
    }
    Ok(if length > limit { Line::TooLong(length) } else { Line::Message(bytes) })
}

/// Hands on each event's data of a server-sent event stream; `stream`
/// keeps the last event id and `retry` seen. On an `initialize`'s stream
/// the answer's protocol version is remembered. `Ok(false)`: the stream of
/// `request` ended before its answer.
async fn events(
    shared: &Shared,
    mut body: Incoming,
    stream: &mut StreamState,
    initialize: bool,
    answered: &mut Option<oneshot::Sender<()>>,
    request: Option<&RawValue>,
) -> Result<bool, String> {
    let mut parser = EventParser::new(shared.limit);
    let mut answer_seen = false;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("reading the event stream failed: {e}"))?;
        let Some(data) = frame.data_ref() else { continue };
        let events = parser.feed(data);
        if let Some(retry) = parser.retry_ms {
            stream.retry_ms = Some(retry);
        }
        for event in events {
            if let Some(id) = event.id {
                stream.last_event = Some(id);
            }
            if let Line::Message(bytes) = &event.data {
                if bytes.is_empty() {
                    continue;
                }
                if initialize {
                    remember_version(shared, bytes);
                }
                if let (Some(request), Ok(message)) = (request, Message::parse(bytes)) {
                    answer_seen |= message.kind() == Ok(Kind::Response)
                        && message.get("id").map(RawValue::get) == Some(request.get());
                }
            }
            if !shared.deliver(event.data).await {
                return Ok(true);
            }
            tell(answered);
        }
    }
    // An event without data (a priming event, or one cut short) still
    // set the id to resume from.
    if let Some(id) = &parser.id {
        stream.last_event = Some(id.clone());
    }
    Ok(request.is_none() || answer_seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let e = Endpoint::parse("http://127.0.0.1:8000/mcp").unwrap();
        assert_eq!(
            e,
            Endpoint {
                address: "127.0.0.1:8000".into(),
                authority: "127.0.0.1:8000".into(),
                path: "/mcp".into(),
                tls: None,
                bearer: None,
            }
        );
        assert_eq!(Endpoint::parse("http://example.com").unwrap().address, "example.com:80");
        assert_eq!(Endpoint::parse("http://[::1]:9/x?y=1").unwrap().path, "/x?y=1");
        assert_eq!(Endpoint::parse("http://[::1]/").unwrap().address, "[::1]:80");
        let e = Endpoint::parse("https://example.com/mcp").unwrap();
        assert_eq!((e.address.as_str(), e.tls.as_deref()), ("example.com:443", Some("example.com")));
        let e = Endpoint::parse("https://[::1]:8443").unwrap();
        assert_eq!((e.address.as_str(), e.tls.as_deref(), e.path.as_str()), ("[::1]:8443", Some("::1"), "/"));
        assert_eq!(Endpoint::parse("https://127.0.0.1:9/").unwrap().tls.as_deref(), Some("127.0.0.1"));
        assert!(Endpoint::parse("https://bad_host!/").unwrap_err().to_string().contains("no certificate"));
        assert!(Endpoint::parse("ftp://x").is_err());
        assert!(Endpoint::parse("http://user:pw@x/").is_err());
    }

    /// A server answering each message with the `Authorization` header it
    /// came with as its result, as JSON, closing each connection after its
    /// answer when `close_each`; counts the connections it accepted.
    async fn counting_server(close_each: bool) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use hyper::header::{CONNECTION, CONTENT_TYPE};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let service = hyper::service::service_fn(move |request: Request<Incoming>| async move {
                    let authorization = request.headers().get(hyper::header::AUTHORIZATION).cloned();
                    let authorization = authorization.map(|v| v.to_str().unwrap().to_owned());
                    let body = request.into_body().collect().await.unwrap().to_bytes();
                    let message: Value = serde_json::from_slice(&body).unwrap();
                    let result = serde_json::json!({"authorization": authorization});
                    let answer = serde_json::json!({"jsonrpc": "2.0", "id": message["id"], "result": result});
                    let mut response = Response::new(Full::new(Bytes::from(answer.to_string())));
                    response.headers_mut().insert(CONTENT_TYPE, "application/json".parse().unwrap());
                    if close_each {
                        response.headers_mut().insert(CONNECTION, "close".parse().unwrap());
                    }
                    Ok::<_, std::convert::Infallible>(response)
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service),
                );
            }
        });
        (url, accepted)
    }

    #[test]
    fn a_connection_is_used_again_once_its_answer_is_read_and_a_closed_one_is_not() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            for (close_each, connections) in [(false, 1), (true, 5)] {
                let (url, accepted) = counting_server(close_each).await;
                let mut transport = start(Endpoint::parse(&url).unwrap(), 1 << 20, None).unwrap();
                for n in 0..5 {
                    let request = format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"ping"}}"#);
                    transport.input.send(request.into_bytes()).await.unwrap();
                    let Some(Line::Message(answer)) = transport.output.recv().await else {
                        panic!("no answer to {n}")
                    };
                    let answer: Value = serde_json::from_slice(&answer).unwrap();
                    assert_eq!(answer["id"], n, "{answer}");
                    assert_eq!(answer["result"]["authorization"], Value::Null, "{answer}");
                }
                assert_eq!(
                    accepted.load(std::sync::atomic::Ordering::SeqCst),
                    connections,
                    "close_each {close_each}"
                );
            }
        });
    }

    #[test]
    fn a_bearer_token_from_the_environment_goes_with_every_request_and_is_never_shown() {
        // No other test reads or writes this variable.
        let var = "GUARDHOST_MCP_TEST_UPSTREAM_TOKEN";
        std::env::set_var(var, " s3cret-token ");
        let bearer = Bearer::from_env(var).unwrap();
        assert_eq!(format!("{bearer:?}"), "Bearer(..)");
        std::env::set_var(var, "bad\ntoken");
        let error = Bearer::from_env(var).unwrap_err();
        assert!(error.contains(var) && !error.contains("bad"), "{error}");
        std::env::remove_var(var);
        let error = Bearer::from_env(var).unwrap_err();
        assert!(error.contains("unset or empty") && error.contains("Authorization: Bearer"), "{error}");

        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let (url, _) = counting_server(false).await;
            let endpoint = Endpoint { bearer: Some(bearer), ..Endpoint::parse(&url).unwrap() };
            assert!(!format!("{endpoint:?}").contains("s3cret"));
            let mut transport = start(endpoint, 1 << 20, None).unwrap();
            for n in 0..2 {
                let request = format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"ping"}}"#);
                transport.input.send(request.into_bytes()).await.unwrap();
                let Some(Line::Message(answer)) = transport.output.recv().await else { panic!("no answer") };
                let answer: Value = serde_json::from_slice(&answer).unwrap();
                assert_eq!(answer["result"]["authorization"], "Bearer s3cret-token", "{answer}");
            }
        });
    }
}
