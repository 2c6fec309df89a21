//! **guardhost-server**: the configured guardrail as an HTTP/JSON decision
//! service, for agents in any language, gateways and other programs.
//!
//! A `POST /v1/decide` with a tool call (the object a `guardhost run` input
//! line holds) is answered with the decision document `guardhost run
//! --output decisions` writes for it; `POST /v1/decide/batch` decides
//! several in order. `/healthz`, `/readyz`, `/metrics` (Prometheus) and
//! `/openapi.json` (this API, which the tests check every response
//! against) complete it.
//!
//! - [`options`]: what the service is started with (listener, token,
//!   limits);
//! - [`source`]: where each request's guardrail comes from (fixed, or
//!   reloaded);
//! - [`service`]: the routes;
//! - [`metrics`]: what `/metrics` says;
//! - [`mod@serve`]: the accept loop, its limits and the graceful shutdown.
//!
//! The `guardhost-server` binary (and `guardhost serve`, which runs it) is
//! this crate's `main.rs`; docs/server.md is its guide.

pub mod metrics;
pub mod options;
pub mod serve;
pub mod service;
pub mod source;

pub use metrics::Metrics;
pub use options::{Listen, Options};
pub use serve::{serve, ServeError, Server};
pub use service::Service;
pub use source::Source;

/// The OpenAPI document of this service.
pub const OPENAPI: &str = include_str!("../openapi.json");
