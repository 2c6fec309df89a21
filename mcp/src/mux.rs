//! Several servers behind one client (`mcp.servers`): a proxy for each
//! server (its own guard points, pins and restarts, under the server's
//! name), and between them and the client a multiplexer that makes them
//! one server.
//!
//! Towards the client, a tool or prompt `T` of the server `NAME` is
//! `NAME__T` (no server name holds `__`, so every name maps back to one
//! server); resources keep their URIs and go to the server that listed
//! them (or whose template's fixed start the URI has). `initialize` and the
//! lists go to every server and their answers are merged (capabilities
//! joined, each server's pages followed so the client gets one page);
//! `ping` is answered here; the servers' requests, notifications and
//! progress reach the client under ids of the multiplexer's. A server that
//! ends leaves the others serving; its pending calls are answered with an
//! error by its own proxy.

use std::collections::{BTreeMap, HashMap};

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use crate::config::{McpConfig, Servers, Target, SEPARATOR};
use crate::framing::{spawn_reader, spawn_writer, Line};
use crate::gate::Gate;
use crate::message::{raw, Kind, Message, INVALID_PARAMS, SERVER_GONE};
use crate::proxy::{self, Ended};
use crate::McpError;

/// JSON-RPC's "method not found".
const METHOD_NOT_FOUND: i64 = -32601;

/// Messages queued towards one side.
const QUEUE: usize = 1024;

/// Relays between the client and `servers`: one server's proxy, or the
/// multiplexer over several.
pub async fn relay<R, W>(
    gate: Gate,
    config: McpConfig,
    servers: &Servers,
    client_in: R,
    client_out: W,
) -> Result<Ended, McpError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    match servers {
        Servers::One(target) => proxy::run(gate, config, target, client_in, client_out).await,
        Servers::Several(servers) => run(gate, config, servers, client_in, client_out).await,
    }
}

/// Something the multiplexer handles.
enum Event {
    /// A line from the client; `None` at its end.
    Client(Option<std::io::Result<Line>>),
    /// A line from server `n`'s proxy; `None` at its end.
    Backend(usize, Option<std::io::Result<Line>>),
}

/// The multiplexer over `servers`, until the client closes its side (and
/// every server's proxy has ended) or every server has ended.
pub async fn run<R, W>(
    gate: Gate,
    config: McpConfig,
    servers: &[(String, Target)],
    client_in: R,
    client_out: W,
) -> Result<Ended, McpError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    if servers.is_empty() {
        return Err(McpError::NoServer);
    }
    let limit = config.max_message_bytes;
    let (events_tx, mut events) = mpsc::channel(QUEUE);
    let mut backends = Vec::new();
    let mut proxies = Vec::new();
    for (n, (name, target)) in servers.iter().enumerate() {
        let (to_proxy, proxy_in) = tokio::io::duplex(64 * 1024);
        let (proxy_out, from_proxy) = tokio::io::duplex(64 * 1024);
        let (input, _writer) = spawn_writer(to_proxy, QUEUE);
        spawn_reader(from_proxy, limit.saturating_mul(2), events_tx.clone(), move |line| {
            Event::Backend(n, line)
        });
        let (gate, config, target, name_) =
            (gate.for_server(name), config.clone(), target.clone(), name.clone());
        proxies.push(tokio::spawn(async move {
            let ended = proxy::run(gate, config, &target, proxy_in, proxy_out).await;
            if let Err(error) = &ended {
                tracing::error!(server = %name_, "{error}");
            }
            ended
        }));
        backends.push(Backend { name: name.clone(), input: Some(input), capabilities: Value::Null });
    }
    spawn_reader(client_in, limit, events_tx.clone(), Event::Client);
    drop(events_tx);
    let (client, client_writer) = spawn_writer(client_out, QUEUE);
    let mut mux = Mux {
        backends,
        client,
        next_id: 0,
        sent: HashMap::new(),
        relayed: HashMap::new(),
        groups: HashMap::new(),
        resources: HashMap::new(),
        templates: Vec::new(),
    };
    let mut client_closed = false;
    let mut open = mux.backends.len();
    while let Some(event) = events.recv().await {
        match event {
            Event::Client(Some(Ok(Line::Message(bytes)))) => mux.client_line(&bytes).await,
            Event::Client(Some(Ok(Line::TooLong(length)))) => {
                let text = format!(
                    "the message is {length} bytes, over this proxy's limit of {limit} (mcp.max_message_bytes)"
                );
                mux.reply_error(raw(&Value::Null), crate::message::INVALID_REQUEST, &text).await
            }
            Event::Client(end) => {
                if let Some(Err(error)) = end {
                    tracing::error!("reading the client's messages failed: {error}");
                }
                // Each server's proxy sees its client go, closes its server
                // and ends.
                client_closed = true;
                for backend in &mut mux.backends {
                    backend.input = None;
                }
            }
            Event::Backend(n, Some(Ok(Line::Message(bytes)))) => mux.backend_line(n, &bytes).await,
            Event::Backend(n, Some(Ok(Line::TooLong(length)))) => {
                tracing::error!(server = %mux.backends[n].name, "a message of {length} bytes from the server's proxy, over the limit (mcp.max_message_bytes), was dropped");
            }
            Event::Backend(n, _) => {
                open -= 1;
                mux.backend_ended(n).await;
                if open == 0 {
                    break;
                }
            }
        }
    }
    let mut exits = Vec::new();
    for (proxy, (name, _)) in proxies.into_iter().zip(servers) {
        if let Ok(Ok(Ended::ServerExited(how))) = proxy.await {
            exits.push(format!("{name}: {how}"));
        }
    }
    drop(mux);
    let _ = client_writer.await;
    Ok(if client_closed { Ended::ClientClosed } else { Ended::ServerExited(exits.join("; ")) })
}

struct Backend {
    name: String,
    /// Lines to the server's proxy; `None` once it ended (or the client
    /// closed its side).
    input: Option<mpsc::Sender<Vec<u8>>>,
    /// What it answered `initialize` with.
    capabilities: Value,
}

/// A request the multiplexer sent a server's proxy.
enum Sent {
    /// The client's request, to one server.
    One { id: Box<RawValue>, backend: usize },
    /// One server's part of a request sent to every server.
    Part { group: u64, backend: usize },
}

/// A request sent to every server, and what came back.
struct Group {
    id: Box<RawValue>,
    method: String,
    /// Parts still to come.
    waiting: usize,
    /// Each server's results (every page of a list), or its error.
    parts: BTreeMap<usize, Result<Vec<Value>, Value>>,
    /// The client's `initialize` parameters.
    params: Value,
}

struct Mux {
    backends: Vec<Backend>,
    client: mpsc::Sender<Vec<u8>>,
    next_id: u64,
    /// Requests the servers' proxies have, by the multiplexer's id.
    sent: HashMap<u64, Sent>,
    /// The servers' requests the client has, by the multiplexer's id: the
    /// server and its id.
    relayed: HashMap<u64, (usize, Box<RawValue>)>,
    groups: HashMap<u64, Group>,
    /// Resource URIs and the server that listed each.
    resources: HashMap<String, usize>,
    /// Resource templates' fixed starts and their server.
    templates: Vec<(String, usize)>,
}

impl Mux {
    fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    async fn to_client(&self, message: &Message) {
        let _ = self.client.send(message.to_line()).await;
    }

    async fn reply(&self, id: Box<RawValue>, result: &Value) {
        self.to_client(&Message::result(id, raw(result))).await
    }

    async fn reply_error(&self, id: Box<RawValue>, code: i64, text: &str) {
        self.to_client(&Message::error(Some(id), code, text)).await
    }

    async fn to_backend(&self, n: usize, message: &Message) -> bool {
        match &self.backends[n].input {
            Some(input) => input.send(message.to_line()).await.is_ok(),
            None => false,
        }
    }

    fn up(&self) -> Vec<usize> {
        (0..self.backends.len()).filter(|n| self.backends[*n].input.is_some()).collect()
    }

    async fn client_line(&mut self, bytes: &[u8]) {
        let mut message = match Message::parse(bytes) {
            Ok(message) => message,
            Err(problem) => {
                tracing::warn!("a client line was refused: {problem}");
                return self.to_client(&Message::error(None, problem.code(), &problem.to_string())).await;
            }
        };
        match message.kind().expect("parsed messages have a kind") {
            Kind::Request => self.client_request(message).await,
            Kind::Notification => {
                if message.method().as_deref() == Some("notifications/cancelled") {
                    return self.client_cancelled(&message).await;
                }
                for n in self.up() {
                    self.to_backend(n, &message).await;
                }
            }
            Kind::Response => {
                let relayed = message.numeric_id().and_then(|id| self.relayed.remove(&id));
                match relayed {
                    Some((n, id)) => {
                        message.set("id", id);
                        self.to_backend(n, &message).await;
                    }
                    None => tracing::warn!("a client response to no request was dropped"),
                }
            }
        }
    }

    async fn client_request(&mut self, mut message: Message) {
        let id = message.take("id").expect("a request has an id");
        let method = message.method().unwrap_or_default();
        let mut params = message.value("params").unwrap_or(Value::Null);
        match method.as_str() {
            "ping" => return self.reply(id, &json!({})).await,
            "initialize"
            | "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "logging/setLevel" => return self.fan_out(id, method, params).await,
            _ => {}
        }
        let routed = match method.as_str() {
            "tools/call" | "prompts/get" => self.by_name(&mut params, "/name"),
            "completion/complete" => match params.pointer("/ref/type").and_then(Value::as_str) {
                Some("ref/prompt") => self.by_name(&mut params, "/ref/name"),
                _ => self.by_uri(params.pointer("/ref/uri").and_then(Value::as_str)),
            },
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                self.by_uri(params.get("uri").and_then(Value::as_str))
            }
            _ => {
                Err((METHOD_NOT_FOUND, format!("`{method}` cannot be routed to one of several MCP servers")))
            }
        };
        let n = match routed {
            Ok(n) => n,
            Err((code, text)) => return self.reply_error(id, code, &text).await,
        };
        if self.backends[n].input.is_none() {
            let text = format!("the MCP server '{}' is gone", self.backends[n].name);
            return self.reply_error(id, SERVER_GONE, &text).await;
        }
        let mux_id = self.next();
        message.set("id", raw(&Value::from(mux_id)));
        if message.get("params").is_some() {
            message.set("params", raw(&params));
        }
        self.sent.insert(mux_id, Sent::One { id, backend: n });
        self.to_backend(n, &message).await;
    }

    /// The server a `NAME__T` name (at `pointer` in `params`) belongs to;
    /// the name is given back as the server knows it.
    fn by_name(&self, params: &mut Value, pointer: &str) -> Result<usize, (i64, String)> {
        let name = params.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned();
        let found = name.split_once(SEPARATOR).and_then(|(server, rest)| {
            let n = self.backends.iter().position(|b| b.name == server)?;
            Some((n, rest.to_owned()))
        });
        match found {
            Some((n, rest)) => {
                *params.pointer_mut(pointer).expect("read above") = Value::from(rest);
                Ok(n)
            }
            None => Err((
                INVALID_PARAMS,
                format!("Unknown tool or prompt: {name} (names are SERVER{SEPARATOR}NAME)"),
            )),
        }
    }

    /// The server a resource URI belongs to: the one that listed it, else
    /// the one whose template's fixed start it has, else the only server
    /// that offers resources.
    fn by_uri(&self, uri: Option<&str>) -> Result<usize, (i64, String)> {
        let uri = uri.unwrap_or_default();
        if let Some(n) = self.resources.get(uri) {
            return Ok(*n);
        }
        let template = self
            .templates
            .iter()
            .filter(|(start, _)| !start.is_empty() && uri.starts_with(start.as_str()))
            .max_by_key(|(start, _)| start.len());
        if let Some((_, n)) = template {
            return Ok(*n);
        }
        let offering: Vec<usize> = (0..self.backends.len())
            .filter(|n| self.backends[*n].capabilities.get("resources").is_some())
            .collect();
        match offering.as_slice() {
            [n] => Ok(*n),
            _ => Err((
                INVALID_PARAMS,
                format!("Unknown resource: {uri} (no server listed it; list resources or templates first)"),
            )),
        }
    }

    /// Sends a request to every server that is up; the answers are merged
    /// once all came.
    async fn fan_out(&mut self, id: Box<RawValue>, method: String, params: Value) {
        let up = self.up();
        if up.is_empty() {
            return self.reply_error(id, SERVER_GONE, "every MCP server is gone").await;
        }
        let group = self.next();
        // A list is fetched whole: the client's cursor (never one of ours) is dropped.
        let mut part_params = params.clone();
        if let Some(object) = part_params.as_object_mut() {
            object.remove("cursor");
        }
        self.groups.insert(
            group,
            Group { id, method: method.clone(), waiting: up.len(), parts: BTreeMap::new(), params },
        );
        for n in up {
            self.send_part(group, n, &method, &part_params).await;
        }
    }

    async fn send_part(&mut self, group: u64, n: usize, method: &str, params: &Value) {
        let mux_id = self.next();
        self.sent.insert(mux_id, Sent::Part { group, backend: n });
        let request = match params {
            Value::Null => Message::from_members(vec![
                ("jsonrpc".into(), raw(&Value::from("2.0"))),
                ("id".into(), raw(&Value::from(mux_id))),
                ("method".into(), raw(&Value::from(method))),
            ]),
            params => Message::request(mux_id, method, params),
        };
        if !self.to_backend(n, &request).await {
            self.sent.remove(&mux_id);
            self.part_done(group, n, Err(json!({"code": SERVER_GONE, "message": "the server is gone"})))
                .await;
        }
    }

    async fn client_cancelled(&mut self, message: &Message) {
        let params = message.value("params").unwrap_or_default();
        let Some(target) = params.get("requestId").map(Value::to_string) else { return };
        let found: Vec<(u64, usize)> = self
            .sent
            .iter()
            .filter_map(|(mux_id, sent)| match sent {
                Sent::One { id, backend } if id.get() == target => Some((*mux_id, *backend)),
                Sent::Part { group, backend }
                    if self.groups.get(group).is_some_and(|g| g.id.get() == target) =>
                {
                    Some((*mux_id, *backend))
                }
                _ => None,
            })
            .collect();
        for (mux_id, n) in found {
            let mut params = params.clone();
            params["requestId"] = Value::from(mux_id);
            self.to_backend(n, &Message::notification("notifications/cancelled", &params)).await;
        }
    }

    async fn backend_line(&mut self, n: usize, bytes: &[u8]) {
        let mut message = match Message::parse(bytes) {
            Ok(message) => message,
            Err(problem) => {
                tracing::error!(server = %self.backends[n].name, "a line from the server's proxy was dropped: {problem}");
                return;
            }
        };
        match message.kind().expect("parsed messages have a kind") {
            Kind::Request => {
                let id = message.take("id").expect("a request has an id");
                let mux_id = self.next();
                message.set("id", raw(&Value::from(mux_id)));
                self.relayed.insert(mux_id, (n, id));
                self.to_client(&message).await
            }
            Kind::Notification => {
                if message.method().as_deref() == Some("notifications/cancelled") {
                    let mut params = message.value("params").unwrap_or_default();
                    let target = params.get("requestId").map(Value::to_string).unwrap_or_default();
                    let ours = self
                        .relayed
                        .iter()
                        .find(|(_, (b, id))| *b == n && id.get() == target)
                        .map(|(m, _)| *m);
                    if let Some(mux_id) = ours {
                        params["requestId"] = Value::from(mux_id);
                        message.set("params", raw(&params));
                    }
                }
                self.to_client(&message).await
            }
            Kind::Response => match message.numeric_id().and_then(|id| self.sent.remove(&id)) {
                Some(Sent::One { id, .. }) => {
                    message.set("id", id);
                    self.to_client(&message).await
                }
                Some(Sent::Part { group, backend }) => {
                    let outcome = match message.value("error") {
                        Some(error) => Err(error),
                        None => Ok(message.value("result").unwrap_or(Value::Null)),
                    };
                    self.part_answered(group, backend, outcome).await
                }
                None => {
                    tracing::warn!(server = %self.backends[n].name, "a response to no request was dropped")
                }
            },
        }
    }

    /// One server's answer to its part of a group: a list's next page is
    /// asked for; otherwise the part is done.
    async fn part_answered(&mut self, group: u64, n: usize, outcome: Result<Value, Value>) {
        let Some(method) = self.groups.get(&group).map(|g| g.method.clone()) else { return };
        let result = match outcome {
            Ok(result) => result,
            Err(error) => return self.part_done(group, n, Err(error)).await,
        };
        let cursor = result.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
        let entry =
            self.groups.get_mut(&group).expect("checked above").parts.entry(n).or_insert(Ok(Vec::new()));
        if let Ok(pages) = entry {
            pages.push(result);
        }
        match cursor {
            Some(cursor) if method.ends_with("/list") => {
                self.send_part(group, n, &method, &json!({"cursor": cursor})).await;
            }
            _ => self.part_done(group, n, Ok(Vec::new())).await,
        }
    }

    /// A server's part of a group is complete (`Ok` adds nothing to the
    /// pages kept, `Err` replaces them); the group is answered once every
    /// part is.
    async fn part_done(&mut self, group: u64, n: usize, outcome: Result<Vec<Value>, Value>) {
        let Some(entry) = self.groups.get_mut(&group) else { return };
        match outcome {
            Err(error) => {
                tracing::debug!(server = %self.backends[n].name, method = %entry.method, "a server answered with an error: {error}");
                entry.parts.insert(n, Err(error));
            }
            Ok(_) => {
                entry.parts.entry(n).or_insert(Ok(Vec::new()));
            }
        }
        entry.waiting -= 1;
        if entry.waiting > 0 {
            return;
        }
        let group = self.groups.remove(&group).expect("present");
        self.answer_group(group).await
    }

    async fn answer_group(&mut self, group: Group) {
        let answered: Vec<(usize, Vec<Value>)> = group
            .parts
            .iter()
            .filter_map(|(n, part)| part.as_ref().ok().map(|pages| (*n, pages.clone())))
            .collect();
        if answered.is_empty() {
            let error = group
                .parts
                .values()
                .find_map(|p| p.as_ref().err().cloned())
                .unwrap_or_else(|| json!({"code": SERVER_GONE, "message": "every MCP server is gone"}));
            let message = Message::from_members(vec![
                ("jsonrpc".into(), raw(&Value::from("2.0"))),
                ("id".into(), group.id),
                ("error".into(), raw(&error)),
            ]);
            return self.to_client(&message).await;
        }
        let result = match group.method.as_str() {
            "initialize" => self.merge_initialize(&group, &answered),
            "tools/list" => self.merge_list(&answered, "tools", true),
            "prompts/list" => self.merge_list(&answered, "prompts", true),
            "resources/list" => {
                let merged = self.merge_list(&answered, "resources", false);
                self.resources.clear();
                for (n, pages) in &answered {
                    for uri in items(pages, "resources").filter_map(|r| r.get("uri").and_then(Value::as_str))
                    {
                        self.resources.entry(uri.to_owned()).or_insert(*n);
                    }
                }
                merged
            }
            "resources/templates/list" => {
                self.templates.clear();
                for (n, pages) in &answered {
                    for template in items(pages, "resourceTemplates") {
                        let text = template.get("uriTemplate").and_then(Value::as_str).unwrap_or_default();
                        let start = text.split('{').next().unwrap_or_default().to_owned();
                        self.templates.push((start, *n));
                    }
                }
                self.merge_list(&answered, "resourceTemplates", false)
            }
            _ => json!({}),
        };
        self.reply(group.id, &result).await
    }

    /// One `initialize` answer for the client: the servers' capabilities
    /// joined, the protocol version they agree on (else the oldest, with a
    /// warning), their instructions each under its server's name.
    fn merge_initialize(&mut self, group: &Group, answered: &[(usize, Vec<Value>)]) -> Value {
        let mut capabilities = Value::Object(Map::new());
        let mut versions = Vec::new();
        let mut instructions = Vec::new();
        for (n, pages) in answered {
            let result = pages.first().cloned().unwrap_or_default();
            self.backends[*n].capabilities = result.get("capabilities").cloned().unwrap_or_default();
            join(&mut capabilities, &self.backends[*n].capabilities);
            if let Some(version) = result.get("protocolVersion").and_then(Value::as_str) {
                versions.push(version.to_owned());
            }
            if let Some(text) = result.get("instructions").and_then(Value::as_str) {
                instructions.push(format!("[{}] {text}", self.backends[*n].name));
            }
        }
        for (n, part) in &group.parts {
            if let Err(error) = part {
                tracing::error!(server = %self.backends[*n].name, "the server refused initialize ({error}): it is left out");
                self.backends[*n].input = None;
            }
        }
        versions.sort();
        versions.dedup();
        if versions.len() > 1 {
            tracing::warn!("the MCP servers answered initialize with different protocol versions ({}): the oldest is used", versions.join(", "));
        }
        let requested = group.params.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
        let version = versions.first().cloned().unwrap_or_else(|| requested.to_owned());
        let names: Vec<&str> = answered.iter().map(|(n, _)| self.backends[*n].name.as_str()).collect();
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": {
                "name": "guardhost-mcp",
                "title": format!("guardhost in front of {}", names.join(", ")),
                "version": env!("CARGO_PKG_VERSION"),
            },
        });
        if !instructions.is_empty() {
            result["instructions"] = Value::from(instructions.join("\n\n"));
        }
        result
    }

    /// Every server's items of a list, named `NAME__ITEM` when `prefixed`.
    fn merge_list(&self, answered: &[(usize, Vec<Value>)], key: &str, prefixed: bool) -> Value {
        let mut all = Vec::new();
        for (n, pages) in answered {
            for item in items(pages, key) {
                let mut item = item.clone();
                if prefixed {
                    if let Some(name) = item.get("name").and_then(Value::as_str) {
                        item["name"] = Value::from(format!("{}{SEPARATOR}{name}", self.backends[*n].name));
                    }
                }
                all.push(item);
            }
        }
        json!({ key: all })
    }

    /// Server `n`'s proxy ended: the others go on. Its parts of groups
    /// still waiting are errors; its requests to the client are forgotten.
    async fn backend_ended(&mut self, n: usize) {
        if self.backends[n].input.take().is_some() {
            tracing::error!(server = %self.backends[n].name, "the MCP server ended; the other servers go on");
        }
        let parts: Vec<(u64, u64)> = self
            .sent
            .iter()
            .filter_map(|(mux_id, sent)| match sent {
                Sent::Part { group, backend } if *backend == n => Some((*mux_id, *group)),
                _ => None,
            })
            .collect();
        for (mux_id, group) in parts {
            self.sent.remove(&mux_id);
            self.part_done(group, n, Err(json!({"code": SERVER_GONE, "message": "the server is gone"})))
                .await;
        }
        // Its single requests were answered by its proxy before it ended.
        self.sent.retain(|_, sent| !matches!(sent, Sent::One { backend, .. } if *backend == n));
        self.relayed.retain(|_, (backend, _)| *backend != n);
    }
}

/// The items under `key` of every page.
fn items<'a>(pages: &'a [Value], key: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    pages.iter().filter_map(move |page| page.get(key).and_then(Value::as_array)).flatten()
}

/// Joins `other`'s capabilities into `into`: objects member by member,
/// `true` wins over `false`, what one server has is kept.
fn join(into: &mut Value, other: &Value) {
    match (into, other) {
        (Value::Object(into), Value::Object(other)) => {
            for (key, value) in other {
                match into.get_mut(key) {
                    Some(existing) => join(existing, value),
                    None => {
                        into.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (Value::Bool(into), Value::Bool(other)) => *into |= *other,
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_joined() {
        let mut into = json!({"tools": {"listChanged": false}, "logging": {}});
        join(&mut into, &json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}}));
        assert_eq!(
            into,
            json!({"tools": {"listChanged": true}, "logging": {}, "resources": {"subscribe": true}})
        );
    }
}
