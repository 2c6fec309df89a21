//! The routes: one request in, one response out. The service and its
//! router are here, with what every route shares (the bearer token, the
//! body's limits) and the one-line routes (`/healthz`, `/openapi.json`);
//! each other route, or group of routes of one idea, has a module of its
//! own:
//!
//! - `decide`: `POST /v1/decide` and `/v1/decide/batch`, and where a
//!   provider's calls are decided (on the I/O thread, awaited, or on a
//!   decision thread);
//! - `held`: `/v1/pending`, the calls held for a human's approval, listed,
//!   shown and answered;
//! - `filter`: `POST /v1/filter`, the tools a caller may use;
//! - `health`: `/readyz` and `/metrics`, what the service says of itself;
//! - `reply`: the responses and refusals every route writes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::AUTHORIZATION;
use hyper::{Method, Request, StatusCode};
use tokio::sync::Semaphore;

use crate::metrics::Metrics;
use crate::options::Options;
use crate::pending::Pending;
use crate::source::Source;
use reply::{json, Refusal};

mod decide;
mod filter;
mod health;
mod held;
mod reply;

pub use health::entries_of;
pub use reply::Reply;

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
            (Method::GET, "/metrics") => self.exposition().await,
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
}
