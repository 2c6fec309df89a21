//! The streamable HTTP transport towards clients (`guardhost mcp --listen
//! ADDR`), as MCP's 2025-06-18 and 2025-11-25 revisions define it, over
//! HTTP/1.1 at `http://ADDR/mcp`, or over TLS at `https://ADDR/mcp`
//! ([`crate::tls::acceptor`]).
//!
//! Each client's `initialize` starts a session ([`crate::session`]): a
//! proxy run of its own, so a server started by command serves one client
//! as a stdio server expects, and an upstream reached by URL gets a session
//! per client. The client names its session in `Mcp-Session-Id` from then
//! on and ends it with `DELETE`; an idle session (no stream open, no
//! message for [`Listen::idle`]) is ended by the proxy.
//!
//! Before anything else, every request passes three checks, in this order:
//! - `Host` must name this server (when it listens on a loopback address:
//!   `localhost`, `127.0.0.1` or `[::1]`, with or without its port, or a
//!   name given with `--allow-host`), and a browser's `Origin`, when there
//!   is one, must be one of those as an `http://` origin or one given with
//!   `--allow-origin`: a web page cannot reach the proxy through a DNS
//!   name rebound to 127.0.0.1 (HTTP 403);
//! - with a bearer token, `Authorization: Bearer TOKEN` (HTTP 401,
//!   compared in constant time; the token is never logged);
//! - the path is `/mcp` (HTTP 404), `GET /metrics` for the counters
//!   ([`crate::metrics`]), or `/v1/pending` for calls held for an approver
//!   ([`crate::pending`]).
//!
//! A guardrail's denial is never an HTTP error: it is the JSON-RPC answer
//! the stdio transport gives too ([`crate::proxy`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::config::McpConfig;
use crate::config::Servers;
use crate::gate::Gate;
use crate::message::{Kind, Message, INVALID_REQUEST};
use crate::pending::{Answer, AnswerError, Pending};
use crate::reply::{ended, error, event_stream, json_response, rpc_error, Reply};
use crate::session::{Events, First, Refused, Session};
use crate::tls::Stream;

/// The longest a client's TLS handshake may take.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// The path the transport is served at.
pub const PATH: &str = "/mcp";

/// The path of the counters (Prometheus's text format), behind the same
/// checks.
pub const METRICS_PATH: &str = "/metrics";

/// Where calls held for an approver are listed (`GET`) and answered
/// (`POST /v1/pending/{id}` with `{"approved": true|false, "approved_by":
/// NAME}`), behind the same checks.
pub const PENDING_PATH: &str = "/v1/pending";

/// The protocol versions a client may name in `MCP-Protocol-Version`.
pub const VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// A response that refuses a request, in place of what was asked for.
type Refusal = Box<Response<Reply>>;

/// How the transport is served.
#[derive(Clone)]
pub struct Listen {
    /// The token every request must carry as `Authorization: Bearer
    /// TOKEN`; `None`: no token asked.
    pub token: Option<String>,
    /// `Host` values answered besides the listening address's own names
    /// (`name` or `name:port`).
    pub hosts: Vec<String>,
    /// `Origin` values accepted besides the listening address's own.
    pub origins: Vec<String>,
    /// Sessions at once: one more `initialize` ends the session idle the
    /// longest, or is answered HTTP 503 when every session has a stream
    /// open.
    pub max_sessions: usize,
    /// How long a session with no stream open and no message lives.
    pub idle: Duration,
    /// TLS for clients (`--tls-cert`, `--tls-key`): `https://ADDR/mcp`.
    pub tls: Option<TlsAcceptor>,
}

/// Shows neither the token nor the TLS key: whether there is one.
impl std::fmt::Debug for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listen")
            .field("token", &self.token.as_ref().map(|_| ".."))
            .field("hosts", &self.hosts)
            .field("origins", &self.origins)
            .field("max_sessions", &self.max_sessions)
            .field("idle", &self.idle)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Default for Listen {
    fn default() -> Self {
        Listen {
            token: None,
            hosts: Vec::new(),
            origins: Vec::new(),
            max_sessions: 32,
            idle: Duration::from_secs(30 * 60),
            tls: None,
        }
    }
}

/// What every request shares.
struct Server {
    options: Listen,
    /// `Host` values answered (lower case); empty: any.
    hosts: Vec<String>,
    /// `Origin` values accepted (lower case).
    origins: Vec<String>,
    gate: Gate,
    pending: Arc<Pending>,
    config: McpConfig,
    servers: Servers,
    sessions: Arc<Mutex<HashMap<String, Arc<Session>>>>,
}

/// Serves the transport on `listener` until `shutdown` completes, then
/// ends every session (each server is closed as over stdio) and returns.
pub async fn serve(
    listener: TcpListener,
    options: Listen,
    gate: Gate,
    config: McpConfig,
    servers: Servers,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let local = listener.local_addr()?;
    let (hosts, origins) = allowed(local, &options);
    // Asks a client cannot be asked through elicitation wait here for an
    // approver (`/v1/pending`).
    let pending = Arc::new(Pending::default());
    let gate = gate.with_pending(Arc::clone(&pending));
    let server = Arc::new(Server {
        options,
        hosts,
        origins,
        gate,
        pending,
        config,
        servers,
        sessions: Arc::new(Mutex::new(HashMap::new())),
    });
    let sweeper = tokio::spawn(sweep(Arc::clone(&server)));
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors, most likely: wait, and go on.
                    tracing::error!("accepting a connection failed: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let server = Arc::clone(&server);
        tokio::spawn(async move {
            let stream: Box<dyn Stream> = match &server.options.tls {
                None => Box::new(stream),
                Some(acceptor) => match tokio::time::timeout(HANDSHAKE, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => Box::new(stream),
                    Ok(Err(error)) => {
                        tracing::debug!(%peer, "a TLS handshake failed: {error}");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "a TLS handshake took more than {HANDSHAKE:?}: closed");
                        return;
                    }
                },
            };
            let service = hyper::service::service_fn(move |request| {
                let server = Arc::clone(&server);
                async move { Ok::<_, Infallible>(handle(&server, request).await) }
            });
            if let Err(error) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%peer, "an HTTP connection ended with an error: {error}");
            }
        });
    }
    sweeper.abort();
    // Every session is told its client is gone; each proxy closes its
    // server (or upstream session) and ends within its grace period.
    let sessions: Vec<Arc<Session>> =
        server.sessions.lock().expect("not poisoned").values().cloned().collect();
    tracing::info!("shutting down: ending {} MCP sessions", sessions.len());
    for session in &sessions {
        session.close();
    }
    let deadline = Instant::now() + Duration::from_secs(7);
    while !server.sessions.lock().expect("not poisoned").is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Ends sessions idle for longer than `options.idle`.
async fn sweep(server: Arc<Server>) {
    let every = (server.options.idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(60));
    loop {
        tokio::time::sleep(every).await;
        let idle: Vec<Arc<Session>> = server
            .sessions
            .lock()
            .expect("not poisoned")
            .values()
            .filter(|s| s.idle_since().is_some_and(|since| since.elapsed() > server.options.idle))
            .cloned()
            .collect();
        for session in idle {
            tracing::info!("an MCP session idle for {:?} was ended", server.options.idle);
            server.sessions.lock().expect("not poisoned").remove(&session.id);
            session.close();
        }
    }
}

/// The `Host` and `Origin` values a server listening at `local` answers.
fn allowed(local: SocketAddr, options: &Listen) -> (Vec<String>, Vec<String>) {
    let port = local.port();
    let mut hosts: Vec<String> = Vec::new();
    if local.ip().is_loopback() {
        for name in ["localhost", "127.0.0.1", "[::1]"] {
            hosts.push(name.to_owned());
            hosts.push(format!("{name}:{port}"));
        }
    }
    hosts.extend(options.hosts.iter().map(|h| h.to_ascii_lowercase()));
    let scheme = if options.tls.is_some() { "https" } else { "http" };
    let mut origins: Vec<String> = hosts.iter().map(|h| format!("{scheme}://{h}")).collect();
    origins.extend(options.origins.iter().map(|o| o.trim_end_matches('/').to_ascii_lowercase()));
    (hosts, origins)
}

async fn handle(server: &Server, request: Request<Incoming>) -> Response<Reply> {
    // A browser page on an accepted origin (the Origin check passed) may
    // read the answer, and the session id and auth challenge in it.
    let origin = header(request.headers(), "origin").map(str::to_owned);
    let mut response = route(server, request).await;
    if let (Some(origin), false) = (origin, response.status() == StatusCode::FORBIDDEN) {
        if let Ok(origin) = HeaderValue::from_str(&origin) {
            let headers = response.headers_mut();
            headers.insert("access-control-allow-origin", origin);
            headers.insert(
                "access-control-expose-headers",
                HeaderValue::from_static("mcp-session-id, www-authenticate"),
            );
            headers.insert("vary", HeaderValue::from_static("origin"));
        }
    }
    server.gate.metrics().responded(response.status().as_u16());
    response
}

async fn route(server: &Server, request: Request<Incoming>) -> Response<Reply> {
    let headers = request.headers();
    if let Some(refused) = server.check_host_and_origin(headers) {
        return refused;
    }
    // A browser's preflight carries no credentials: answered before the
    // token check, for origins the check above accepted.
    if request.method() == Method::OPTIONS {
        let mut response = Response::new(Reply::empty());
        *response.status_mut() = StatusCode::NO_CONTENT;
        let headers = response.headers_mut();
        headers.insert("access-control-allow-methods", HeaderValue::from_static("GET, POST, DELETE"));
        headers.insert(
            "access-control-allow-headers",
            HeaderValue::from_static(
                "accept, authorization, content-type, last-event-id, mcp-protocol-version, mcp-session-id",
            ),
        );
        headers.insert("access-control-max-age", HeaderValue::from_static("600"));
        return response;
    }
    if let Some(token) = &server.options.token {
        if !bearer_matches(headers, token) {
            let mut response = error(
                StatusCode::UNAUTHORIZED,
                "Unauthorized: this server needs `Authorization: Bearer TOKEN`",
            );
            response.headers_mut().insert("www-authenticate", HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    if request.uri().path() == METRICS_PATH && request.method() == Method::GET {
        let open = server.sessions.lock().expect("not poisoned").len();
        let mut response = Response::new(Reply::Whole(Some(Bytes::from(server.gate.metrics().render(open)))));
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
        return response;
    }
    if let Some(rest) = request.uri().path().strip_prefix(PENDING_PATH) {
        return match (request.method().clone(), rest.strip_prefix('/')) {
            (Method::GET, None) if rest.is_empty() => {
                let list = serde_json::json!({"pending": server.pending.list()});
                json_response(StatusCode::OK, &list)
            }
            (Method::POST, Some(id)) if !id.is_empty() && !id.contains('/') => {
                let id = id.to_owned();
                server.answer(&id, request.into_body()).await
            }
            _ => error(
                StatusCode::NOT_FOUND,
                &format!(
                    "Not Found: GET {PENDING_PATH} lists the held calls, POST {PENDING_PATH}/ID answers one"
                ),
            ),
        };
    }
    if request.uri().path() != PATH {
        return error(StatusCode::NOT_FOUND, &format!("Not Found: the MCP endpoint is {PATH}"));
    }
    match *request.method() {
        Method::POST => server.post(request).await,
        Method::GET => server.get(request.headers()),
        Method::DELETE => server.delete(request.headers()),
        _ => {
            let mut response = error(
                StatusCode::METHOD_NOT_ALLOWED,
                "Method Not Allowed: the MCP endpoint takes POST, GET and DELETE",
            );
            response.headers_mut().insert("allow", HeaderValue::from_static("GET, POST, DELETE"));
            response
        }
    }
}

impl Server {
    fn check_host_and_origin(&self, headers: &HeaderMap) -> Option<Response<Reply>> {
        if !self.hosts.is_empty() {
            let host = header(headers, "host").unwrap_or_default().to_ascii_lowercase();
            if !self.hosts.contains(&host) {
                tracing::warn!("a request for another Host was refused (DNS rebinding protection)");
                return Some(error(
                    StatusCode::FORBIDDEN,
                    "Forbidden: the Host header names another server (DNS rebinding protection); \
                     a proxy in front of guardhost adds its name with --allow-host",
                ));
            }
        }
        if let Some(origin) = header(headers, "origin") {
            if !self.origins.contains(&origin.trim_end_matches('/').to_ascii_lowercase()) {
                tracing::warn!("a request from another Origin was refused (DNS rebinding protection)");
                return Some(error(
                    StatusCode::FORBIDDEN,
                    "Forbidden: requests from this Origin are not accepted; add it with --allow-origin",
                ));
            }
        }
        None
    }

    fn session(&self, headers: &HeaderMap) -> Result<Arc<Session>, Refusal> {
        let Some(id) = header(headers, "mcp-session-id") else {
            return Err(Box::new(error(
                StatusCode::BAD_REQUEST,
                "Bad Request: no Mcp-Session-Id header; a session starts with an initialize request",
            )));
        };
        match self.sessions.lock().expect("not poisoned").get(id) {
            Some(session) => Ok(Arc::clone(session)),
            None => Err(Box::new(error(
                StatusCode::NOT_FOUND,
                "Session not found: it ended (DELETE, idle, or its server exited); initialize again",
            ))),
        }
    }

    async fn post(&self, request: Request<Incoming>) -> Response<Reply> {
        let headers = request.headers().clone();
        if !accepts(&headers, "application/json") || !accepts(&headers, "text/event-stream") {
            return error(
                StatusCode::NOT_ACCEPTABLE,
                "Not Acceptable: a POST must accept both application/json and text/event-stream",
            );
        }
        if !header(&headers, "content-type").is_some_and(|t| t.trim_start().starts_with("application/json")) {
            return error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Unsupported Media Type: send application/json",
            );
        }
        let version = match version(&headers) {
            Ok(version) => version,
            Err(refused) => return *refused,
        };
        let limit = self.config.max_message_bytes;
        let body = match read_body(request.into_body(), limit).await {
            Ok(body) => body,
            Err(Some(length)) => {
                return rpc_error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    INVALID_REQUEST,
                    &format!("the message is {length} bytes, over this proxy's limit of {limit} (mcp.max_message_bytes)"),
                )
            }
            Err(None) => return error(StatusCode::BAD_REQUEST, "Bad Request: the body could not be read"),
        };
        let message = match Message::parse(&body) {
            Ok(message) => message,
            Err(problem) => return rpc_error(StatusCode::BAD_REQUEST, problem.code(), &problem.to_string()),
        };
        let kind = message.kind().expect("a parsed message has a kind");
        let initialize = message.method().as_deref() == Some("initialize");
        let request = (kind == Kind::Request).then(|| {
            let id = message.get("id").map(|id| id.get().to_owned()).unwrap_or_default();
            let token = message
                .value("params")
                .and_then(|params| params.pointer("/_meta/progressToken").map(Value::to_string));
            (id, token)
        });
        let (session, first) = match self.session(&headers) {
            Ok(session) => (session, None),
            Err(_) if initialize && header(&headers, "mcp-session-id").is_none() => {
                // The session's first request is registered before its
                // proxy starts: a server that cannot start answers it.
                let first = request.clone().map(|(id, progress_token)| First {
                    id,
                    progress_token,
                    version: version.clone(),
                    message: body.clone(),
                });
                match self.start_session(first) {
                    Ok((session, events)) => (session, Some(events)),
                    Err(refused) => return *refused,
                }
            }
            Err(refused) => return *refused,
        };
        let new = first.is_some();
        let mut response = match (first.flatten(), request) {
            (Some(events), _) => event_stream(events),
            (None, Some((id, token))) if !new => {
                let events = match session.open_request(&id, token, version.as_deref()) {
                    Ok(events) => events,
                    Err(_) => return ended(),
                };
                if !session.send(body).await {
                    session.abandon_request(&id);
                    return ended();
                }
                event_stream(events)
            }
            _ => {
                if !session.send(body).await {
                    return ended();
                }
                let mut response = Response::new(Reply::empty());
                *response.status_mut() = StatusCode::ACCEPTED;
                response
            }
        };
        if new {
            let id = HeaderValue::from_str(&session.id).expect("session ids are hex");
            response.headers_mut().insert("mcp-session-id", id);
        }
        response
    }

    fn start_session(&self, first: Option<First>) -> Result<(Arc<Session>, Option<Events>), Refusal> {
        let mut sessions = self.sessions.lock().expect("not poisoned");
        if sessions.len() >= self.options.max_sessions {
            // Clients often end without DELETE: the session idle the
            // longest (no stream open) makes room; refused only when
            // every session is in use.
            let oldest = sessions
                .values()
                .filter_map(|s| s.idle_since().map(|since| (since, Arc::clone(s))))
                .min_by_key(|(since, _)| *since);
            match oldest {
                Some((_, session)) => {
                    tracing::info!("the session idle the longest was ended to make room (--max-sessions)");
                    sessions.remove(&session.id);
                    session.close();
                }
                None => {
                    tracing::warn!(
                        "an initialize was refused: {} sessions are open and in use (--max-sessions)",
                        sessions.len()
                    );
                    return Err(Box::new(error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "Service Unavailable: too many sessions are in use; end one (DELETE) or try again later",
                    )));
                }
            }
        }
        let id = session_id();
        let registry = Arc::clone(&self.sessions);
        let key = id.clone();
        let (session, events) = Session::start(
            id,
            self.gate.clone(),
            self.config.clone(),
            self.servers.clone(),
            first,
            move || {
                registry.lock().expect("not poisoned").remove(&key);
            },
        );
        sessions.insert(session.id.clone(), Arc::clone(&session));
        self.gate.metrics().session_started();
        tracing::info!("an MCP session started ({} open)", sessions.len());
        Ok((session, events))
    }

    /// An approver's answer to a held call.
    async fn answer(&self, id: &str, body: Incoming) -> Response<Reply> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Given {
            approved: bool,
            #[serde(default)]
            approved_by: Option<String>,
        }
        let bad = |why: String| {
            error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "Bad Request: {why}; send {{\"approved\": true or false, \"approved_by\": \"NAME\"}}"
                ),
            )
        };
        let given: Given = match read_body(body, 64 * 1024).await {
            Ok(bytes) => match serde_json::from_slice(&bytes) {
                Ok(given) => given,
                Err(e) => return bad(format!("the answer is not what this endpoint reads ({e})")),
            },
            Err(_) => return bad("the answer could not be read, or is over 64 KiB".into()),
        };
        match self.pending.answer(id, Answer { approved: given.approved, approved_by: given.approved_by }) {
            Ok(held) => {
                tracing::info!(
                    server = %held.server,
                    tool = %held.tool,
                    entry = %held.ask.entry,
                    approved = given.approved,
                    "a held call was answered over {PENDING_PATH}; it runs (or is refused) when the client calls it again"
                );
                json_response(StatusCode::OK, &serde_json::to_value(&held).unwrap_or_default())
            }
            Err(e @ AnswerError::Unknown) => error(StatusCode::NOT_FOUND, &format!("Not Found: {e}")),
            Err(e @ AnswerError::Answered) => error(StatusCode::CONFLICT, &format!("Conflict: {e}")),
        }
    }

    fn get(&self, headers: &HeaderMap) -> Response<Reply> {
        if !accepts(headers, "text/event-stream") {
            return error(StatusCode::NOT_ACCEPTABLE, "Not Acceptable: a GET must accept text/event-stream");
        }
        let version = match version(headers) {
            Ok(version) => version,
            Err(refused) => return *refused,
        };
        let session = match self.session(headers) {
            Ok(session) => session,
            Err(refused) => return *refused,
        };
        if let Some(events) = header(headers, "last-event-id").and_then(|id| session.resume(id)) {
            return event_stream(events);
        }
        match session.listen(version.as_deref()) {
            Ok(events) => event_stream(events),
            Err(Refused::AlreadyListening) => {
                error(StatusCode::CONFLICT, "Conflict: this session's GET stream is open already")
            }
            Err(Refused::Ended) => ended(),
        }
    }

    fn delete(&self, headers: &HeaderMap) -> Response<Reply> {
        let session = match self.session(headers) {
            Ok(session) => session,
            Err(refused) => return *refused,
        };
        self.sessions.lock().expect("not poisoned").remove(&session.id);
        session.close();
        tracing::info!("an MCP session was ended by its client");
        Response::new(Reply::empty())
    }
}

/// The `MCP-Protocol-Version` a request names, if it is one this transport
/// speaks.
fn version(headers: &HeaderMap) -> Result<Option<String>, Refusal> {
    match header(headers, "mcp-protocol-version") {
        None => Ok(None),
        Some(v) if VERSIONS.contains(&v) => Ok(Some(v.to_owned())),
        Some(v) => Err(Box::new(error(
            StatusCode::BAD_REQUEST,
            &format!(
                "Bad Request: unsupported MCP-Protocol-Version `{}`; this proxy speaks {}",
                v.chars().take(40).collect::<String>(),
                VERSIONS.join(", ")
            ),
        ))),
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether `Accept` takes `media` (or everything).
fn accepts(headers: &HeaderMap, media: &str) -> bool {
    headers.get_all(ACCEPT).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(|item| {
        let item = item.split(';').next().unwrap_or_default().trim();
        item.eq_ignore_ascii_case(media) || item == "*/*"
    })
}

/// Whether `Authorization` carries `token`, compared in constant time.
fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    let given = header(headers, "authorization")
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .unwrap_or_default()
        .trim()
        .as_bytes();
    let token = token.as_bytes();
    let mut difference = u8::from(given.len() != token.len());
    for (i, b) in token.iter().enumerate() {
        difference |= b ^ given.get(i).copied().unwrap_or(0);
    }
    difference == 0
}

/// A new session id: 128 random bits, in hex.
fn session_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random source works");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A whole body of at most `limit` bytes; `Err(Some(length))` when longer,
/// `Err(None)` when it could not be read.
async fn read_body(mut body: Incoming, limit: usize) -> Result<Vec<u8>, Option<usize>> {
    let mut bytes = Vec::new();
    let mut length = 0;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| None)?;
        if let Some(data) = frame.data_ref() {
            length += data.len();
            if length <= limit {
                bytes.extend_from_slice(data);
            }
        }
    }
    if length > limit {
        return Err(Some(length));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn accept_lists_are_read_item_by_item() {
        let both = headers(&[("accept", "application/json, text/event-stream;q=0.9")]);
        assert!(accepts(&both, "application/json") && accepts(&both, "text/event-stream"));
        let split = headers(&[("accept", "application/json"), ("accept", "text/event-stream")]);
        assert!(accepts(&split, "text/event-stream"));
        assert!(!accepts(&headers(&[("accept", "application/json")]), "text/event-stream"));
        assert!(accepts(&headers(&[("accept", "*/*")]), "text/event-stream"));
        assert!(!accepts(&HeaderMap::new(), "application/json"));
    }

    #[test]
    fn bearer_tokens_must_match_whole() {
        let token = "s3cret-token";
        assert!(bearer_matches(&headers(&[("authorization", "Bearer s3cret-token")]), token));
        for wrong in ["Bearer s3cret", "Bearer s3cret-token-and-more", "Basic s3cret-token", ""] {
            assert!(!bearer_matches(&headers(&[("authorization", wrong)]), token), "{wrong}");
        }
        assert!(!bearer_matches(&HeaderMap::new(), token));
    }

    #[test]
    fn a_loopback_listener_answers_its_own_names_only() {
        let options = Listen { origins: vec!["https://app.example/".into()], ..Listen::default() };
        let (hosts, origins) = allowed("127.0.0.1:8123".parse().unwrap(), &options);
        assert!(hosts.contains(&"localhost:8123".to_owned()) && hosts.contains(&"127.0.0.1".to_owned()));
        assert!(!hosts.contains(&"evil.example.com".to_owned()));
        assert!(origins.contains(&"http://127.0.0.1:8123".to_owned()));
        assert!(origins.contains(&"https://app.example".to_owned()));
        // Not on loopback: no Host check unless names are given.
        let (hosts, _) = allowed("0.0.0.0:8123".parse().unwrap(), &Listen::default());
        assert!(hosts.is_empty());
    }

    #[test]
    fn session_ids_are_long_and_differ() {
        let (a, b) = (session_id(), session_id());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
