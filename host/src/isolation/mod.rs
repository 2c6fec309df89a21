//! Process isolation (`provider.isolation: process`): the provider runs in a
//! child process, so its crash, `exit` or hang costs the calls in flight
//! (each a provider error, decided by `fail_closed`) and a restart, never
//! the host.
//!
//! - [`protocol`]: the framed, versioned wire format;
//! - [`server`]: the child's side, `guardhost provider-server`;
//! - [`client`]: the host's side, [`ProcessProvider`];
//! - [`shm`]: the shared-memory transport calls take on Linux (the pipes
//!   remain for the handshake, large messages and the connection's end).
//!
//! ```no_run
//! # fn main() -> Result<(), guardhost::BuildError> {
//! use guardhost::{instantiate, Isolation, ProviderSpec};
//!
//! let mut spec = ProviderSpec::new("plugins/libmy_policy.so:MyPolicy", Default::default());
//! spec.isolation = Isolation::Process;
//! spec.timeout_ms = Some(500);
//! // Starts `guardhost provider-server` ($GUARDHOST_BIN in an embedding program).
//! let loaded = instantiate(&spec, ".".as_ref())?;
//! assert_eq!(loaded.info.isolation, Isolation::Process);
//! # Ok(()) }
//! ```

pub mod client;
pub mod protocol;
pub mod server;
#[cfg(target_os = "linux")]
pub mod shm;

pub use client::{restarts, server_program, ProcessProvider};
pub use server::{serve, ServeError};
