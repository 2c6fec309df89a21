//! Process isolation for guardhost (`provider.isolation: process`, and
//! provider programs named by `command:`): the provider runs in a child
//! process, so its crash, `exit` or hang costs the calls in flight (each a
//! provider error, decided by `fail_closed`) and a restart, never the host.
//!
//! The guardhost library reaches this crate through one narrow interface,
//! [`guardhost::launch::Launcher`]: call [`install`] once at start and every
//! `isolation: process` spec the library builds (from `install`, a reload,
//! `instantiate`) starts its provider here. The `guardhost` command, the
//! decision service and the Python package do so.
//!
//! - [`protocol`]: the framed, versioned wire format;
//! - [`client`]: the host's side, [`ProcessProvider`]: a call's way, the
//!   connection to one child, its start and handshake, the thread reading
//!   its answers, and the supervisor that restarts it, over the client's
//!   state in one struct behind one lock;
//! - [`launcher`]: what [`install`] gives the library, and
//!   [`server_program`], the program a provider process runs;
//! - [`server`]: the provider process's side, [`serve`];
//! - [`entry`]: the provider process's program around it (its standard
//!   streams, [`stdio`], and the watch on its host): `guardhost
//!   provider-server` and the `guardhost-provider-server` binary;
//! - `shm`: the shared-memory transport calls take on Linux (the pipes
//!   remain for the handshake, large messages and the connection's end); its
//!   region's mapping, `shm::region`, is the one module with `unsafe`.
//!
//! What crosses between the two sides is a framed message of [`protocol`]:
//!
//! ```
//! use guardhost_isolation::protocol::{encode, read_message, FromServer, PROTOCOL_VERSION};
//!
//! # fn main() -> Result<(), guardhost_isolation::protocol::FrameError> {
//! guardhost_isolation::install();
//! assert!(guardhost::launch::has_launcher());
//!
//! let frame = encode(&FromServer::Hello { protocol: PROTOCOL_VERSION, version: "0.1.0".into() });
//! let read: FromServer = read_message(&mut &frame[..])?;
//! assert!(matches!(read, FromServer::Hello { protocol: PROTOCOL_VERSION, .. }));
//! # Ok(()) }
//! ```
//!
//! and with a library of your own (the program needs
//! `guardhost-provider-server` or `guardhost` beside it, or `GUARDHOST_BIN`):
//!
//! ```no_run
//! # fn main() -> Result<(), guardhost::BuildError> {
//! use guardhost::{instantiate, Isolation, ProviderSpec};
//!
//! guardhost_isolation::install();
//! let mut spec = ProviderSpec::new("plugins/libmy_policy.so:MyPolicy", Default::default());
//! spec.isolation = Isolation::Process;
//! spec.timeout_ms = Some(500);
//! // Starts `guardhost provider-server` ($GUARDHOST_BIN in an embedding program).
//! let loaded = instantiate(&spec, ".".as_ref())?;
//! assert_eq!(loaded.info.isolation, Isolation::Process);
//! # Ok(()) }
//! ```
// The workspace's lints deny `unsafe`; it is allowed in one module only:
// `shm::region`.

pub mod client;
pub mod entry;
pub mod launcher;
pub mod protocol;
pub mod server;
#[cfg(target_os = "linux")]
pub mod shm;
pub mod stdio;

pub use client::{restarts, ProcessProvider, SERVER_ENV};
pub use launcher::{install, server_program, ProcessLauncher};
pub use server::{serve, ServeError};
