//! **guardhost-mcp**: guardhost in front of an MCP server, for any MCP
//! client.
//!
//! `guardhost mcp --config F -- CMD ARGS...` starts the server `CMD
//! ARGS...` (or `--upstream URL` reaches one already running over the
//! streamable HTTP transport), speaks the Model Context Protocol to the
//! client on one side (stdio, or the streamable HTTP transport with
//! `--listen ADDR`, a session per client) and to the server on the other
//! (stdio or HTTP), relays every message
//! unchanged but for its id, and runs the configured guardrail (any
//! provider, chain, `authorization:` section and mode) at the guard points:
//! a `tools/call`, `resources/read` or `prompts/get` is decided before the
//! server sees it, and a `tools/list` answer is filtered and its tools
//! pinned. `docs/mcp.md` is the user's guide.
//!
//! # Map
//! - [`message`]: JSON-RPC messages read without losing a byte (each
//!   member's value kept as the peer wrote it);
//! - [`framing`]: one message per line, with a size limit;
//! - [`gate`]: the guard points and the names a policy sees;
//! - [`pins`]: tool definitions pinned against "rug pulls";
//! - [`proxy`]: the relay, its id maps, approvals through elicitation, a
//!   server that dies;
//! - [`mux`]: several servers behind one client (`mcp.servers`), their
//!   tools named `NAME__TOOL`;
//! - [`http`]: the streamable HTTP transport towards a server
//!   (`--upstream URL`), its messages and streams as [`sse`] events;
//! - [`tls`]: TLS towards `https://` servers (the system's roots and
//!   `mcp.ca_file`) and for `--listen`'s clients;
//! - [`stdio`]: this process's standard input and output as the client's
//!   side (pipes on the event loop where they are pipes);
//! - [`listen`]: the streamable HTTP transport towards clients (`--listen
//!   ADDR`), with its checks (`Host`, `Origin`, bearer token), and its
//!   answers ([`reply`]);
//!   [`session`]: one client's session, its proxy and its streams;
//! - [`metrics`]: what was decided and served, for `GET /metrics`;
//! - [`pending`]: calls held for an approver over HTTP (`/v1/pending`),
//!   for clients that cannot be asked through elicitation;
//! - [`state`]: asks in the 2026-07-28 form (`InputRequiredResult`, a
//!   signed `requestState`);
//! - [`config`]: the config file's `mcp:` section; [`error`]: how it fails.
#![forbid(unsafe_code)]

pub mod config;
pub mod error;
pub mod framing;
pub mod gate;
pub mod http;
pub mod listen;
pub mod message;
pub mod metrics;
pub mod mux;
pub mod pending;
pub mod pins;
pub mod proxy;
pub mod reply;
pub mod session;
pub mod sse;
pub mod state;
pub mod stdio;
pub mod tls;

pub use config::McpConfig;
pub use config::{Servers, Target};
pub use error::McpError;
pub use gate::Gate;
pub use proxy::{run, Ended};
