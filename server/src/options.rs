//! What the service is started with.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::approvers::Approvers;

/// Where the service listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A TCP address (`127.0.0.1:8787` by default: loopback only).
    Tcp(SocketAddr),
    /// A Unix socket at this path (created; a stale socket there is
    /// replaced, any other file is not).
    Unix(PathBuf),
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Tcp(address) => write!(f, "http://{address}"),
            Listen::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// The default TCP address: loopback, so nothing beyond this machine can
/// ask until the operator says so.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8787";

/// The default `--decision-timeout-ms`.
pub const DEFAULT_DECISION_TIMEOUT_MS: u64 = 5000;

/// How the service runs.
#[derive(Clone)]
pub struct Options {
    /// Where to listen.
    pub listen: Listen,
    /// When set, every route but `/healthz` and `/readyz` needs
    /// `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// The largest request body accepted.
    pub max_body_bytes: usize,
    /// The most calls one batch may carry.
    pub max_batch: usize,
    /// Connections served at once; beyond, a new connection is answered 503
    /// and closed.
    pub max_connections: usize,
    /// How long a client may take to send a request's head (from the
    /// connection's start, or after its last answer: an idle connection is
    /// closed after this), then its body, and to take each part of an
    /// answer: a slow client is dropped, not waited for.
    pub request_timeout: Duration,
    /// How long a shutdown waits for the requests in flight.
    pub drain_timeout: Duration,
    /// Whether `/readyz` answers 200 while no guardrail is installed (every
    /// call allowed undecided); by default it answers 503 `unguarded`.
    pub allow_unguarded: bool,
    /// How long one call's decision may take; past it, the call is answered
    /// as a provider error (`fail_closed` decides).
    pub decision_timeout: Duration,
    /// Who may answer held calls, and how they are known.
    pub approvers: Approvers,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token: name whether there is one.
        f.debug_struct("Options")
            .field("listen", &self.listen)
            .field("token", &self.token.as_ref().map(|_| "(set)"))
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_batch", &self.max_batch)
            .field("max_connections", &self.max_connections)
            .field("request_timeout", &self.request_timeout)
            .field("drain_timeout", &self.drain_timeout)
            .field("allow_unguarded", &self.allow_unguarded)
            .field("decision_timeout", &self.decision_timeout)
            .field("approvers", &self.approvers)
            .finish()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            listen: Listen::Tcp(DEFAULT_LISTEN.parse().expect("a socket address")),
            token: None,
            max_body_bytes: 1 << 20,
            max_batch: 1000,
            max_connections: 1024,
            request_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(30),
            allow_unguarded: false,
            decision_timeout: Duration::from_millis(DEFAULT_DECISION_TIMEOUT_MS),
            approvers: Approvers::default(),
        }
    }
}
