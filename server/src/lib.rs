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
//! - [`service`]: the routes, one module per route or group of routes of
//!   one idea;
//! - [`pending`]: calls held for a human's approval, until answered, in
//!   memory or in a Redis server replicas share;
//! - [`approvers`]: who may answer them, and how they are known;
//! - [`metrics`]: what `/metrics` says;
//! - [`mod@serve`]: the accept loop, its limits and the graceful shutdown.
//!
//! The `guardhost-server` binary (and `guardhost serve`, which runs it) is
//! this crate's `main.rs`; docs/server.md is its guide. It depends on the
//! library (`guardhost`) and process isolation (`guardhost-isolation`,
//! installed at start), not on the command line or the kit.
//!
//! ```
//! use std::sync::Arc;
//!
//! use guardhost::{install, ConfigOrigin, LoadedConfig};
//! use guardhost_server::{Listen, Metrics, Options, Server, Service, Source};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let yaml = "guardrails:\n  enabled: true\n  provider:\n    use: builtin:AllowlistProvider\n    config: { denied_tools: [bash] }\n";
//! guardhost_builtins::register();
//! let config = LoadedConfig::from_yaml(yaml, ".".into(), ConfigOrigin::Embedded, |_| None)?;
//! let source = Source::Fixed(install(&config)?.map(Arc::new));
//! let options = Options { listen: Listen::Tcp("127.0.0.1:0".parse()?), ..Options::default() };
//! let server = Server::bind(Service::new(source, options, Arc::new(Metrics::default()))).await?;
//! let Listen::Tcp(address) = server.local().clone() else { unreachable!("a TCP listener") };
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let running = tokio::spawn(server.run(async {
//!     let _ = stopped.await;
//! }));
//!
//! let body = r#"{"name": "bash", "args": {"command": "ls"}, "id": "call-1"}"#;
//! let mut stream = tokio::net::TcpStream::connect(address).await?;
//! let request = format!(
//!     "POST /v1/decide HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
//!      content-length: {}\r\nconnection: close\r\n\r\n{body}",
//!     body.len()
//! );
//! stream.write_all(request.as_bytes()).await?;
//! let mut answer = String::new();
//! stream.read_to_string(&mut answer).await?;
//! assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
//! assert!(answer.contains(r#""outcome":"deny""#), "{answer}");
//! stop.send(()).ok();
//! running.await?;
//! # Ok(()) }
//! ```

pub mod approvers;
pub mod metrics;
pub mod options;
pub mod pending;
pub mod serve;
pub mod service;
pub mod source;

pub use approvers::Approvers;
pub use metrics::Metrics;
pub use options::{Listen, Options};
pub use serve::{serve, ServeError, Server};
pub use service::Service;
pub use source::Source;

/// The OpenAPI document of this service.
pub const OPENAPI: &str = include_str!("../openapi.json");
