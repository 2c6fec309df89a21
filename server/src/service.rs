//! The routes: one request in, one response out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use guardhost::{
    outcome_of, unix_now, Approval, Ask, Guardrail, Isolation, ProviderFailure, ProviderInfo, ProviderSource,
    ToolCallRequest,
};
use guardhost_lines::answer::{self, Handled, OutputFormat};
use guardhost_lines::jsonl::{parse_line, parse_line_with_args_text};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, AUTHORIZATION, CONNECTION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::value::RawValue;
use tokio::sync::Semaphore;

use crate::metrics::{Decided, Metrics};
use crate::options::Options;
use crate::pending::{Answer, Claim, Held, Pending};
use crate::source::Source;

/// What every connection shares.
#[derive(Debug, Clone)]
pub struct Service {
    source: Source,
    options: Arc<Options>,
    metrics: Arc<Metrics>,
    draining: Arc<AtomicBool>,
    /// Places on the threads that decide for providers whose calls block.
    deciders: Arc<Semaphore>,
    /// Calls held for approval, by id.
    pending: Arc<Pending>,
}

/// Calls of providers that block (in-process libraries without
/// `provider.timeout_ms`) decided at once, each on a thread of its own;
/// more wait for a place, within their deadline. A call stuck in such a
/// provider keeps its place (nothing can stop a thread in foreign code).
pub const DECISION_THREADS: usize = 256;

/// Where a provider's calls are decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// On the I/O thread: the built-in provider, the host's own code, which
    /// takes microseconds and cannot block, or a library that declares it
    /// never blocks (`NEVER_BLOCKS`, which `guardhost conformance` checks).
    Here,
    /// On the I/O thread through the provider's async path, which waits
    /// without blocking it: a provider process (`isolation: process`,
    /// `command:`), or one with `provider.timeout_ms` (its calls run on its
    /// own evaluation threads).
    Awaited,
    /// On a decision thread: an in-process library, whose calls may take
    /// any time.
    Thread,
}

impl Placement {
    fn of(info: &ProviderInfo) -> Placement {
        if info.isolation == Isolation::Process || info.timeout_ms.is_some() {
            Placement::Awaited
        } else if matches!(info.source, ProviderSource::Builtin { .. }) || info.never_blocks {
            Placement::Here
        } else {
            Placement::Thread
        }
    }

    /// Where a chain's decisions run: on a thread when any entry may
    /// block it, awaited when every entry is built in, never blocks or is
    /// bounded by a deadline of its own, here only when every entry is
    /// built in or never blocks.
    fn of_all(entries: &[ProviderInfo]) -> Placement {
        let places: Vec<Placement> = entries.iter().map(Placement::of).collect();
        if places.contains(&Placement::Thread) {
            Placement::Thread
        } else if places.contains(&Placement::Awaited) {
            Placement::Awaited
        } else {
            Placement::Here
        }
    }
}

/// A response of this service.
pub type Reply = Response<Full<Bytes>>;

/// A refusal: its status, kind and message (the `Error` schema).
struct Refusal {
    status: StatusCode,
    kind: &'static str,
    message: String,
}

impl Refusal {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Refusal { status, kind, message: message.into() }
    }

    fn reply(self) -> Reply {
        let body = serde_json::json!({"error": {"kind": self.kind, "message": self.message}});
        let mut reply = json(self.status, body.to_string().into_bytes());
        if self.status == StatusCode::UNAUTHORIZED {
            reply.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if matches!(self.status, StatusCode::SERVICE_UNAVAILABLE | StatusCode::REQUEST_TIMEOUT) {
            reply.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
        }
        reply
    }
}

fn json(status: StatusCode, body: Vec<u8>) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from(body)));
    *reply.status_mut() = status;
    reply.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    reply
}

/// The routes, for the metrics' `route` label (unknown paths are one;
/// `/v1/pending/{id}` is `/v1/pending`).
const ROUTES: [&str; 8] = [
    "/v1/decide",
    "/v1/decide/batch",
    "/v1/filter",
    "/v1/pending",
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
];

/// Where a held call is resumed: this and its id.
const PENDING_PREFIX: &str = "/v1/pending/";

impl Service {
    /// A service deciding with `source`'s guardrail.
    pub fn new(source: Source, options: Options, metrics: Arc<Metrics>) -> Self {
        Service {
            source,
            options: Arc::new(options),
            metrics,
            draining: Arc::new(AtomicBool::new(false)),
            deciders: Arc::new(Semaphore::new(DECISION_THREADS)),
            pending: Arc::new(Pending::default()),
        }
    }

    /// The service with held calls kept in `pending` (a Redis server that
    /// replicas share, [`Pending::redis`]) instead of this process's memory.
    pub fn with_pending(mut self, pending: Pending) -> Self {
        self.pending = Arc::new(pending);
        self
    }

    /// The calls held for approval.
    pub fn pending(&self) -> &Pending {
        &self.pending
    }

    /// The options it runs with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Its metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Where its guardrail comes from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// From now on `/readyz` says draining and new calls are refused (503),
    /// while the calls in flight finish.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether [`Self::drain`] was called.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Answers one request.
    pub async fn handle(&self, request: Request<Incoming>) -> Reply {
        let path = request.uri().path();
        let route = match path.starts_with(PENDING_PREFIX) {
            true => "/v1/pending",
            false => ROUTES.iter().find(|&&r| r == path).copied().unwrap_or("other"),
        };
        let reply = self.route(request).await;
        self.metrics.answered(route, reply.status().as_u16());
        reply
    }

    async fn route(&self, request: Request<Incoming>) -> Reply {
        let path = request.uri().path().to_owned();
        let method = request.method().clone();
        match (method.clone(), path.as_str()) {
            (Method::GET, "/healthz") => return json(StatusCode::OK, br#"{"status":"ok"}"#.to_vec()),
            (Method::GET, "/readyz") => return self.readiness(),
            _ => {}
        }
        // On the held calls' routes an approver's token stands for the
        // service's: it names who answers.
        let pending_route = path == "/v1/pending" || path.starts_with(PENDING_PREFIX);
        let approvers = &self.options.approvers;
        let authorization = request.headers().get(AUTHORIZATION).map(|v| v.as_bytes());
        let by_token = match pending_route {
            true => approvers.by_token(authorization).map(str::to_owned),
            false => None,
        };
        if by_token.is_none() {
            if let Err(refusal) = self.authorize(&request) {
                return refusal.reply();
            }
        }
        // A header a trusted proxy sets, on a request that passed the
        // service's token (when there is one).
        let approver = by_token.or_else(|| match (pending_route, approvers.header()) {
            (true, Some(header)) => {
                approvers.by_header(request.headers().get(header).map(|v| v.as_bytes())).map(str::to_owned)
            }
            _ => None,
        });
        match (method, path.as_str()) {
            (Method::GET, "/metrics") => {
                let held = match self.pending.waiting().await {
                    Ok(held) => Some(held),
                    Err(error) => {
                        tracing::warn!("/metrics: cannot count the held calls: {error}");
                        None
                    }
                };
                let dropped = self
                    .source
                    .current()
                    .and_then(|guardrail| guardrail.middleware.decision_log().map(|log| log.dropped()))
                    .unwrap_or(0);
                let mut reply = Response::new(Full::new(Bytes::from(
                    self.metrics.render(
                        guardhost_isolation::restarts(),
                        dropped,
                        self.source.reload_status().as_ref(),
                        held,
                    ),
                )));
                reply
                    .headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
                reply
            }
            (Method::GET, "/openapi.json") => json(StatusCode::OK, crate::OPENAPI.as_bytes().to_vec()),
            (Method::POST, "/v1/decide") => match self.body(request).await {
                Ok(body) => self.decide_one(&body).await,
                Err(refusal) => refusal.reply(),
            },
            (Method::POST, "/v1/decide/batch") => match self.body(request).await {
                Ok(body) => self.decide_batch(&body).await,
                Err(refusal) => refusal.reply(),
            },
            (Method::POST, "/v1/filter") => match self.body(request).await {
                Ok(body) => self.filter(&body).await,
                Err(refusal) => refusal.reply(),
            },
            (Method::GET, "/v1/pending") => self.list(request.uri().query(), approver.as_deref()).await,
            (Method::GET, path) if path.starts_with(PENDING_PREFIX) => {
                self.show(&path[PENDING_PREFIX.len()..], approver.as_deref()).await
            }
            (Method::POST, path) if path.starts_with(PENDING_PREFIX) => {
                let id = path[PENDING_PREFIX.len()..].to_owned();
                match self.body(request).await {
                    Ok(body) => {
                        let (reply, result) = self.answer(&id, &body, approver).await;
                        self.metrics.answer(result);
                        reply
                    }
                    Err(refusal) => refusal.reply(),
                }
            }
            (_, path) if path.starts_with(PENDING_PREFIX) => Refusal::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                format!("{path} takes GET (the held call) or POST (the approver's answer); see /openapi.json"),
            )
            .reply(),
            (_, path) if ROUTES.contains(&path) => {
                Refusal::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", format!("{path} does not take this method; see /openapi.json")).reply()
            }
            (_, path) => Refusal::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no route {path}: POST /v1/decide, /v1/decide/batch, /v1/filter or /v1/pending/{{id}}; GET /v1/pending, /v1/pending/{{id}}, /healthz, /readyz, /metrics, /openapi.json"),
            )
            .reply(),
        }
    }

    /// `/readyz`: 503 while draining, and while no guardrail is installed
    /// (every call would be allowed undecided) unless the operator started
    /// the server with `--allow-unguarded`.
    fn readiness(&self) -> Reply {
        let current = self.source.current();
        let provider = current.as_deref().map(|guardrail| guardrail.info.name.clone());
        let (status, body) = if self.is_draining() {
            (StatusCode::SERVICE_UNAVAILABLE, serde_json::json!({"status": "draining", "provider": provider}))
        } else if provider.is_none() && !self.options.allow_unguarded {
            let message = "no guardrail is installed, so every call would be allowed undecided; fix the \
                           config (`enabled: true` and a `provider:` in its `guardrails:` section), or start \
                           the server with --allow-unguarded to serve without one";
            (
                StatusCode::SERVICE_UNAVAILABLE,
                serde_json::json!({"status": "unguarded", "provider": provider, "message": message}),
            )
        } else {
            (StatusCode::OK, serde_json::json!({"status": "ready", "provider": provider}))
        };
        let mut body = body;
        // Every guard, in the order they are asked: what decides calls.
        if let (Some(guardrail), Some(fields)) = (current.as_deref(), body.as_object_mut()) {
            fields.insert("entries".into(), entries_of(guardrail));
        }
        // Under --watch: the running config's digest, and how the guardrail
        // is weaker than the one the server started with (a reload without
        // --require-guardrail may weaken it; empty when it did not).
        if let (Some(status), Some(fields)) = (self.source.reload_status(), body.as_object_mut()) {
            fields.insert("config_digest".into(), status.config_digest.into());
            fields.insert("weakened".into(), status.weakened.into());
        }
        json(status, body.to_string().into_bytes())
    }

    /// Whether a request with this `Authorization` header value (`None`:
    /// without one) may use the routes a token guards: always when no
    /// token is set; the token compared in constant time.
    pub fn authorized(&self, authorization: Option<&[u8]>) -> bool {
        let Some(token) = &self.options.token else { return true };
        let given = authorization.and_then(|v| v.strip_prefix(b"Bearer "));
        given.is_some_and(|given| {
            given.len() == token.len()
                && given.iter().zip(token.as_bytes()).fold(0u8, |diff, (a, b)| diff | (a ^ b)) == 0
        })
    }

    /// The bearer token, when one is set, compared in constant time.
    fn authorize(&self, request: &Request<Incoming>) -> Result<(), Refusal> {
        if self.authorized(request.headers().get(AUTHORIZATION).map(|v| v.as_bytes())) {
            Ok(())
        } else {
            Err(Refusal::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "this server needs `Authorization: Bearer <token>`, with the token it was started with",
            ))
        }
    }

    /// The request's body: at most `max_body_bytes`, within `request_timeout`.
    async fn body(&self, request: Request<Incoming>) -> Result<Bytes, Refusal> {
        if self.is_draining() {
            return Err(Refusal::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "draining",
                "this server is shutting down; ask another replica",
            ));
        }
        let limit = self.options.max_body_bytes;
        let body = Limited::new(request.into_body(), limit);
        match tokio::time::timeout(self.options.request_timeout, body.collect()).await {
            Ok(Ok(collected)) => Ok(collected.to_bytes()),
            Ok(Err(error)) if error.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
                Err(Refusal::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    format!("the body is larger than the {limit} bytes this server accepts (--max-body)"),
                ))
            }
            Ok(Err(error)) => Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "bad_body",
                format!("cannot read the body: {error}"),
            )),
            Err(_) => Err(Refusal::new(
                StatusCode::REQUEST_TIMEOUT,
                "slow_body",
                format!("the body did not arrive within {} ms", self.options.request_timeout.as_millis()),
            )),
        }
    }

    /// Decides call `number` (its place in a batch, 1 alone) and writes its
    /// document into `out`; whether it was a usable call.
    async fn decide(&self, number: u64, bytes: &[u8], out: &mut Vec<u8>) -> bool {
        // The arguments' text is kept for a provider that reads them: it is
        // handed that text rather than their serialisation.
        let reads_arguments = self.source.current().is_some_and(|g| g.middleware.reads_tool_input());
        let parsed = match reads_arguments {
            true => parse_line_with_args_text(number, bytes),
            false => parse_line(number, bytes).map(|call| (call, None)),
        };
        let call = parsed.map_err(|message| {
            let (id, name) = answer::readable_id_and_name(bytes);
            Handled::Malformed { id, name, message }
        });
        self.decide_parsed(number, call, out).await
    }

    /// [`Self::decide`] for a parsed call, with its arguments' text when it
    /// was kept (or the answer to a malformed one).
    async fn decide_parsed(
        &self,
        number: u64,
        call: Result<(ToolCallRequest, Option<&str>), Handled>,
        out: &mut Vec<u8>,
    ) -> bool {
        let guardrail = self.source.current();
        let middleware = guardrail.as_deref().map(|g| &g.middleware);
        let started = Instant::now();
        let mut timed_out = false;
        let mut pending = None;
        let handled = match call {
            Ok((call, args_text)) => match guardrail.as_deref() {
                Some(guardrail) => {
                    self.decide_call(guardrail, call, args_text, &mut timed_out, &mut pending).await
                }
                None => answer::adecide(middleware, call, args_text).await,
            },
            Err(malformed) => malformed,
        };
        let took = started.elapsed();
        let mut by =
            guardrail.as_deref().and_then(|g| g.described().next().map(|d| (d.name, &*d.provider.name)));
        if guardrail.as_deref().is_some_and(|g| g.middleware.is_chain()) {
            by = None;
        }
        let (outcome, code, provider_error, would_deny, usable) = match &handled {
            Handled::Decided { decision, provider_error, .. } => {
                let allow = decision.as_ref().is_none_or(|d| d.allow);
                let code = decision.as_ref().and_then(|d| d.reasons.first()).map_or("", |r| &*r.code);
                // `mode: warn` or `observe` (the host's, or a provider's own).
                let would_deny =
                    decision.as_ref().is_some_and(|d| d.allow && d.metadata.contains_key("would_deny"));
                let outcome = match decision {
                    Some(decision) => outcome_of(decision),
                    None if allow => "allow",
                    None => "deny",
                };
                // In a chain, the entry that decided (none: no entry
                // selected the call, or the host refused its name).
                let decided_by =
                    decision.as_ref().and_then(|d| d.metadata.get("decided_by")).and_then(|v| v.as_str());
                if let (Some(guardrail), Some(name)) = (guardrail.as_deref(), decided_by) {
                    by = guardrail.provider_of(name).map(|info| (name, &*info.name)).or(by);
                }
                (outcome, code, *provider_error, would_deny, true)
            }
            Handled::Interrupted { .. } => ("interrupt", "", false, false, true),
            Handled::Malformed { .. } | Handled::Failed { .. } => ("error", "", false, false, false),
        };
        let (entry, provider) = by.unwrap_or(("none", "none"));
        self.metrics.decided(Decided {
            entry,
            provider,
            outcome,
            code,
            provider_error,
            would_deny,
            timed_out,
            took,
        });
        // Writing a document of strings and JSON values cannot fail.
        let start = out.len();
        let _ = answer::write(out, OutputFormat::Decisions, number, &handled);
        if let Some(id) = pending {
            with_pending(out, start, &id);
        }
        usable
    }

    /// Decides `call` with `guardrail` off the I/O threads' way (see
    /// [`Placement`]), within `--decision-timeout-ms`: past it, the call is
    /// answered as a provider error, which `fail_closed` decides, and
    /// `timed_out` is set.
    async fn decide_call(
        &self,
        guardrail: &Guardrail,
        call: ToolCallRequest,
        args_text: Option<&str>,
        timed_out: &mut bool,
        pending: &mut Option<String>,
    ) -> Handled {
        let middleware = &guardrail.middleware;
        let limit = self.options.decision_timeout;
        let late = || {
            ProviderFailure::error(format!(
                "provider '{}' did not decide within {} ms (--decision-timeout-ms)",
                guardrail.info.name,
                limit.as_millis()
            ))
        };
        let decided = match Placement::of_all(&guardrail.entries) {
            Placement::Here => middleware.adecide_with_args_text(&call, args_text).await,
            Placement::Awaited => {
                match tokio::time::timeout(limit, middleware.adecide_with_args_text(&call, args_text)).await {
                    Ok(decided) => decided,
                    // The provider's call was dropped, unanswered: this is its
                    // answer (audited and logged once).
                    Err(_) => {
                        *timed_out = true;
                        middleware.adecide_with(&call, |_| std::future::ready(Err(late()))).await
                    }
                }
            }
            Placement::Thread => {
                let deadline = tokio::time::Instant::now() + limit;
                let late_one = std::sync::atomic::AtomicBool::new(false);
                let late_one = &late_one;
                let decided = middleware
                    .adecide_text_with(&call, args_text, |evaluation| {
                        let deciders = Arc::clone(&self.deciders);
                        async move {
                            let on_a_thread = async move {
                                // Waiting for a place counts against the deadline.
                                let place = deciders.acquire_owned().await;
                                tokio::task::spawn_blocking(move || {
                                    let _place = place;
                                    evaluation.run()
                                })
                                .await
                            };
                            match tokio::time::timeout_at(deadline, on_a_thread).await {
                                Ok(Ok(evaluation)) => evaluation,
                                Ok(Err(error)) => Err(ProviderFailure::error(format!(
                                    "provider '{}': its decision thread failed: {error}",
                                    guardrail.info.name
                                ))),
                                Err(_) => {
                                    late_one.store(true, std::sync::atomic::Ordering::Relaxed);
                                    Err(late())
                                }
                            }
                        }
                    })
                    .await;
                *timed_out |= late_one.load(std::sync::atomic::Ordering::Relaxed);
                decided
            }
        };
        if let Ok((decision, _)) = &decided {
            if let Some(ask) = Ask::of(decision) {
                match self.pending.hold(call.clone(), ask).await {
                    Ok(Some(id)) => *pending = Some(id),
                    Ok(None) => tracing::warn!(
                        "{} calls are held for approval already: this one gets no pending id",
                        crate::pending::MAX_PENDING
                    ),
                    Err(error) => tracing::error!("a call held for approval gets no pending id: {error}"),
                }
            }
        }
        answer::handled(call, Some(decided))
    }

    /// `GET /v1/pending`: the calls waiting for an answer, filtered by
    /// `tool`, `entry` and `approver` (the calls that approver may answer).
    async fn list(&self, query: Option<&str>, approver: Option<&str>) -> Reply {
        let mut filters = (None, None, None);
        for (key, value) in query_pairs(query.unwrap_or("")) {
            let slot = match key.as_str() {
                "tool" => &mut filters.0,
                "entry" => &mut filters.1,
                "approver" => &mut filters.2,
                _ => {
                    return Refusal::new(
                        StatusCode::BAD_REQUEST,
                        "bad_query",
                        "GET /v1/pending takes the query parameters tool, entry and approver",
                    )
                    .reply()
                }
            };
            *slot = Some(value);
        }
        let (tool, entry, may_answer) = filters;
        let listed = match self.pending.list().await {
            Ok(listed) => listed,
            Err(error) => return unavailable(&error),
        };
        let items: Vec<serde_json::Value> = listed
            .iter()
            .filter(|(_, held)| {
                tool.as_deref().is_none_or(|tool| held.call.tool_call.name.as_deref() == Some(tool))
            })
            .filter(|(_, held)| entry.as_deref().is_none_or(|entry| held.ask.entry == entry))
            .filter(|(_, held)| may_answer.as_deref().is_none_or(|who| may_approve(&held.ask, Some(who))))
            .map(|(id, held)| item(id, held, approver))
            .collect();
        json(StatusCode::OK, serde_json::to_vec(&serde_json::json!({ "pending": items })).unwrap_or_default())
    }

    /// `GET /v1/pending/{id}`: the call held under `id`, with its answer
    /// once given (what the runtime that asked polls for).
    async fn show(&self, id: &str, approver: Option<&str>) -> Reply {
        match self.pending.get(id).await {
            Ok(Some(held)) => {
                json(StatusCode::OK, serde_json::to_vec(&item(id, &held, approver)).unwrap_or_default())
            }
            Ok(None) => unknown_pending(id),
            Err(error) => unavailable(&error),
        }
    }

    /// `POST /v1/pending/{id}`: an approver's answer to the call held under
    /// `id`, which is decided again with that approval in its context, and
    /// answered as `/v1/decide` would; with the result the metrics count.
    /// A refused answer leaves the call held; only one that is given,
    /// by an approver the call names, takes it (once).
    async fn answer(&self, id: &str, body: &[u8], approver: Option<String>) -> (Reply, &'static str) {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Given {
            approved: bool,
            #[serde(default)]
            approved_by: Option<String>,
        }
        let Ok(Given { approved, approved_by }) = serde_json::from_slice::<Given>(body) else {
            let refusal = Refusal::new(
                StatusCode::BAD_REQUEST,
                "bad_approval",
                "an answer is {\"approved\": true|false}, with \"approved_by\" optional (it must then name the \
                 authenticated approver)",
            );
            return (refusal.reply(), "bad");
        };
        let by = match (approver, approved_by) {
            (Some(approver), Some(named)) if named != approver => {
                let refusal = Refusal::new(
                    StatusCode::FORBIDDEN,
                    "approved_by_mismatch",
                    "`approved_by` names someone other than the authenticated approver; leave it out (the \
                     approver is who authenticated)",
                );
                return (refusal.reply(), "forbidden");
            }
            (Some(approver), _) => Some(approver),
            (None, named) if self.options.approvers.unauthenticated => named,
            (None, _) => {
                let how = match self.options.approvers.any() {
                    true => {
                        "an approver's token (`Authorization: Bearer <token>`, --approver) or the trusted \
                             proxy's header (--approver-header)"
                    }
                    false => {
                        "an approver's identity, and this server knows none: start it with --approver \
                              NAME=ENV (or --approver-header behind a trusted proxy)"
                    }
                };
                let refusal = Refusal::new(
                    StatusCode::UNAUTHORIZED,
                    "approver_unauthenticated",
                    format!("answering a held call needs {how}; the call stays held"),
                );
                return (refusal.reply(), "unauthenticated");
            }
        };
        let held = match self.pending.get(id).await {
            Ok(Some(held)) => held,
            Ok(None) => return (unknown_pending(id), "unknown"),
            Err(error) => return (unavailable(&error), "unavailable"),
        };
        if held.answer.is_some() {
            return (already_answered(id), "conflict");
        }
        if !may_approve(&held.ask, by.as_deref()) {
            let refusal = Refusal::new(
                StatusCode::FORBIDDEN,
                "approver_not_allowed",
                "the approver is not one of those this call names (its `approvers`); the call stays held for \
                 one of them",
            );
            return (refusal.reply(), "forbidden");
        }
        let now = unix_now();
        let answer = Answer { approved, approved_by: by.clone(), answered_at: now, decision: None };
        match self.pending.claim(id, answer).await {
            Ok(Claim::Won) => {}
            Ok(Claim::Answered) => return (already_answered(id), "conflict"),
            Ok(Claim::Unknown) => return (unknown_pending(id), "unknown"),
            Err(error) => return (unavailable(&error), "unavailable"),
        }
        let Held { mut call, null_id, ask, .. } = held;
        call.tool_call.null_id = null_id;
        let approval = Approval {
            approved,
            entry: ask.entry,
            digest: ask.digest,
            deadline: ask.deadline,
            approved_by: by,
        };
        let approval = serde_json::to_value(approval).unwrap_or_default();
        let context = call.context.get_or_insert_with(Default::default);
        // Approvals given before (of other entries of a chain) stay.
        let approvals = match context.remove("approval") {
            Some(serde_json::Value::Array(mut given)) => {
                given.push(approval);
                serde_json::Value::Array(given)
            }
            Some(given) if !given.is_null() => serde_json::Value::Array(vec![given, approval]),
            _ => approval,
        };
        context.insert("approval".into(), approvals);
        let mut out = Vec::with_capacity(512);
        let usable = self.decide_parsed(1, Ok((call, None)), &mut out).await;
        if let Ok(decision) = serde_json::from_slice::<serde_json::Value>(&out) {
            if let Err(error) = self.pending.decided(id, decision).await {
                tracing::warn!(
                    "the answer to a held call was not recorded for GET /v1/pending/{{id}}: {error}"
                );
            }
        }
        let status = if usable { StatusCode::OK } else { StatusCode::BAD_REQUEST };
        (json(status, out), if approved { "approved" } else { "refused" })
    }

    async fn decide_one(&self, body: &[u8]) -> Reply {
        let mut out = Vec::with_capacity(512);
        let usable = self.decide(1, body, &mut out).await;
        json(if usable { StatusCode::OK } else { StatusCode::BAD_REQUEST }, out)
    }

    async fn decide_batch(&self, body: &[u8]) -> Reply {
        // Each call is decided from its own bytes, as `/v1/decide` would.
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Batch<'a> {
            #[serde(borrow)]
            calls: Vec<&'a RawValue>,
        }
        let calls = match serde_json::from_slice::<Batch<'_>>(body) {
            Ok(Batch { calls }) => calls,
            Err(error) => return bad_batch(&error),
        };
        if calls.len() > self.options.max_batch {
            return Refusal::new(
                StatusCode::BAD_REQUEST,
                "bad_batch",
                format!(
                    "the batch has {} calls, more than the {} this server takes at once (--max-batch)",
                    calls.len(),
                    self.options.max_batch
                ),
            )
            .reply();
        }
        let mut out = Vec::with_capacity(64 + 512 * calls.len());
        out.extend_from_slice(b"{\"decisions\":[");
        for (i, call) in calls.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            self.decide(i as u64 + 1, call.get().as_bytes(), &mut out).await;
        }
        out.extend_from_slice(b"]}");
        json(StatusCode::OK, out)
    }
}

impl Service {
    /// `/v1/filter`: the tools of `tools` the caller of `context` may use,
    /// in their order, as the config's `authorization:` provider says
    /// (every tool without one), asked before the model sees the tools;
    /// never a name the host refuses (`guardhost::tool_name`).
    async fn filter(&self, body: &[u8]) -> Reply {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Filter {
            tools: Vec<String>,
            #[serde(default)]
            context: Option<serde_json::Map<String, serde_json::Value>>,
        }
        let Ok(Filter { tools, context }) = serde_json::from_slice::<Filter>(body) else {
            return Refusal::new(
                StatusCode::BAD_REQUEST,
                "bad_filter",
                "a filter request is {\"tools\": [\"name\", ...], \"context\": {...}} (context optional: the \
                 runtime context of a call, `user_role`, `user_id` ...)",
            )
            .reply();
        };
        let Some(guardrail) = self.source.current() else {
            // Unguarded, every tool may be used but one whose name the
            // host refuses.
            let names: Vec<&str> = tools.iter().map(String::as_str).collect();
            return match guardhost::authorization::usable_names(&names) {
                Ok(tools) => json(
                    StatusCode::OK,
                    serde_json::to_vec(&serde_json::json!({ "tools": tools })).unwrap_or_default(),
                ),
                Err(error) => Refusal::new(StatusCode::BAD_REQUEST, "bad_filter", error.to_string()).reply(),
            };
        };
        // A provider library may take its time: off the I/O threads.
        let filtered = tokio::task::spawn_blocking(move || {
            let names: Vec<&str> = tools.iter().map(String::as_str).collect();
            guardrail.filter_tools(context.as_ref(), &names).map_err(|e| e.to_string())
        })
        .await;
        match filtered {
            Ok(Ok(tools)) => json(
                StatusCode::OK,
                serde_json::to_vec(&serde_json::json!({ "tools": tools })).unwrap_or_default(),
            ),
            Ok(Err(message)) => Refusal::new(StatusCode::BAD_REQUEST, "bad_filter", message).reply(),
            Err(error) => Refusal::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "filter_failed",
                format!("the filter's thread failed: {error}"),
            )
            .reply(),
        }
    }
}

/// Each guard of `guardrail` as `/readyz` lists it: its name, where the
/// config writes it, its provider, kind, mode, `fail_closed`, and its
/// entry's digest as written.
pub fn entries_of(guardrail: &Guardrail) -> serde_json::Value {
    let entries = guardrail.described().map(|entry| {
        let kind = match entry.guard.kind() {
            guardhost::GuardKind::Authorization => "authorization",
            _ => "guardrail",
        };
        serde_json::json!({
            "name": entry.name,
            "at": entry.written.place,
            "provider": entry.provider.name,
            "kind": kind,
            "mode": entry.guard.mode().as_str(),
            "fail_closed": entry.guard.fail_closed(),
            "digest": entry.written.digest,
        })
    });
    serde_json::Value::Array(entries.collect())
}

/// Whether `who` may answer `ask`: one of its approvers, or anyone
/// (authenticated, or not under `--approvals-unauthenticated`) when it
/// names none.
fn may_approve(ask: &Ask, who: Option<&str>) -> bool {
    ask.approvers.is_empty() || who.is_some_and(|who| ask.approvers.iter().any(|a| a == who))
}

/// A held call as `/v1/pending` shows it. Its arguments are the call's own
/// data: shown only to an authenticated approver who may answer it.
fn item(id: &str, held: &Held, approver: Option<&str>) -> serde_json::Value {
    let call = &held.call;
    let status = match &held.answer {
        None => "pending",
        Some(answer) if answer.approved => "approved",
        Some(_) => "refused",
    };
    let mut item = serde_json::json!({
        "id": id,
        "resume": format!("{PENDING_PREFIX}{id}"),
        "status": status,
        "tool": call.tool_call.name,
        "tool_call_id": call.tool_call.id,
        "entry": held.ask.entry,
        "digest": held.ask.digest,
        "deadline": held.ask.deadline,
        "approvers": held.ask.approvers,
        "held_at": held.held_at,
    });
    let Some(fields) = item.as_object_mut() else { return item };
    for key in ["thread_id", "user_id"] {
        if let Some(value) = call.context.as_ref().and_then(|c| c.get(key)).filter(|v| v.is_string()) {
            fields.insert(key.into(), value.clone());
        }
    }
    if approver.is_some() && may_approve(&held.ask, approver) {
        fields.insert("args".into(), serde_json::Value::Object(call.tool_call.args.clone()));
    }
    if let Some(answer) = &held.answer {
        fields.insert(
            "answer".into(),
            serde_json::json!({
                "approved": answer.approved,
                "approved_by": answer.approved_by,
                "answered_at": answer.answered_at,
                "decision": answer.decision,
            }),
        );
    }
    item
}

/// The `key=value` pairs of a query, percent-decoded (`+` is a space).
fn query_pairs(query: &str) -> Vec<(String, String)> {
    fn decode(text: &str) -> String {
        let bytes = text.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < bytes.len() => {
                    let hex = |b: u8| (b as char).to_digit(16);
                    match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                        (Some(high), Some(low)) => {
                            out.push((high * 16 + low) as u8);
                            i += 2;
                        }
                        _ => out.push(b'%'),
                    }
                }
                byte => out.push(byte),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(key), decode(value))
        })
        .collect()
}

fn unknown_pending(id: &str) -> Reply {
    let id: String = id.chars().take(64).filter(|c| !c.is_control()).collect();
    Refusal::new(
        StatusCode::NOT_FOUND,
        "unknown_pending",
        format!(
            "no call is held under {id}: its deadline passed, it was answered long ago, or it was never held \
             (a server without --pending-store knows only the calls it held itself, since its start); decide \
             the call again"
        ),
    )
    .reply()
}

fn already_answered(id: &str) -> Reply {
    Refusal::new(
        StatusCode::CONFLICT,
        "already_answered",
        format!("the call held under {id} was answered already; GET it to see the answer"),
    )
    .reply()
}

fn unavailable(error: &crate::pending::StoreError) -> Reply {
    tracing::error!("{error}");
    Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "pending_store_unavailable",
        format!("the held calls cannot be reached: {error}"),
    )
    .reply()
}

/// Adds `"pending": {"id": ..., "resume": "/v1/pending/<id>"}` to the
/// decision document written at `out[start..]`.
fn with_pending(out: &mut Vec<u8>, start: usize, id: &str) {
    let Ok(serde_json::Value::Object(mut document)) = serde_json::from_slice(&out[start..]) else { return };
    document
        .insert("pending".into(), serde_json::json!({"id": id, "resume": format!("{PENDING_PREFIX}{id}")}));
    out.truncate(start);
    let _ = serde_json::to_writer(&mut *out, &document);
}

fn bad_batch(error: &serde_json::Error) -> Reply {
    // Only this error is named: others may quote the body at any length.
    let why = error.to_string();
    let twice = match why.strip_prefix("duplicate field ") {
        Some(rest) => {
            format!(" (duplicate key {}: a key may appear once)", rest.split(' ').next().unwrap_or(""))
        }
        None => String::new(),
    };
    Refusal::new(
        StatusCode::BAD_REQUEST,
        "bad_batch",
        format!("a batch is {{\"calls\": [call, ...]}}, each call what POST /v1/decide takes{twice}"),
    )
    .reply()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use guardhost::{AbiKind, Isolation, ProviderInfo, ProviderSource};

    use super::Placement;

    fn library(never_blocks: bool, timeout_ms: Option<u64>, isolation: Isolation) -> ProviderInfo {
        ProviderInfo {
            name: "p".into(),
            source: ProviderSource::Library { path: PathBuf::from("/lib/libp.so"), symbol: "P".into() },
            abi_version: (1, 3),
            abi_kind: AbiKind::Rust,
            accepted_keys: Vec::new(),
            accepts_extra_keys: false,
            framework_injected: false,
            volatile_metadata_keys: Vec::new(),
            path_keys: Vec::new(),
            unread_inputs: Vec::new(),
            never_blocks,
            timeout_ms,
            isolation,
            transport: None,
            sha256: None,
        }
    }

    #[test]
    fn a_library_that_never_blocks_is_decided_in_place_unless_given_a_deadline() {
        assert_eq!(Placement::of(&library(false, None, Isolation::InProcess)), Placement::Thread);
        assert_eq!(Placement::of(&library(true, None, Isolation::InProcess)), Placement::Here);
        assert_eq!(Placement::of(&library(true, Some(50), Isolation::InProcess)), Placement::Awaited);
        assert_eq!(Placement::of(&library(true, None, Isolation::Process)), Placement::Awaited);
        let builtin = ProviderInfo {
            source: ProviderSource::Builtin { symbol: "AllowlistProvider".into() },
            ..library(false, None, Isolation::InProcess)
        };
        assert_eq!(Placement::of(&builtin), Placement::Here);
        // A chain goes where its least trusted entry must.
        let never = library(true, None, Isolation::InProcess);
        let may = library(false, None, Isolation::InProcess);
        assert_eq!(Placement::of_all(&[never.clone(), builtin]), Placement::Here);
        assert_eq!(Placement::of_all(&[never, may]), Placement::Thread);
    }
}
