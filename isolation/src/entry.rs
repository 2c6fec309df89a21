//! The provider process's program: `guardhost provider-server` and the
//! `guardhost-provider-server` binary both run [`run`]. Not for people: the
//! host starts it and speaks [`crate::protocol`] with it on stdin/stdout.

use std::io;

use crate::server::{serve, ServeError};
use crate::stdio::private_stdio;

/// Why the provider process could not serve (its exit status is then 2).
#[derive(Debug, thiserror::Error)]
#[error("provider server: {0}")]
pub struct EntryError(String);

/// Ends this process when its host is gone (it then has another parent),
/// even while every thread is stuck in the provider and no one reads the
/// closed input.
#[cfg(unix)]
fn exit_with_the_host() -> io::Result<()> {
    let host = std::os::unix::process::parent_id();
    std::thread::Builder::new().name("guardhost-server-host-watch".into()).spawn(move || loop {
        std::thread::sleep(std::time::Duration::from_millis(500));
        if std::os::unix::process::parent_id() != host {
            std::process::exit(3);
        }
    })?;
    Ok(())
}

#[cfg(not(unix))]
fn exit_with_the_host() -> io::Result<()> {
    Ok(())
}

/// Serves the host on this process's standard streams until the host is
/// done; the exit status to end with (0, or 2 when the provider could not
/// be built: the host has the message already).
pub fn run() -> Result<u8, EntryError> {
    exit_with_the_host().map_err(|e| EntryError(format!("cannot watch the host process: {e}")))?;
    // The protocol's ends: what the provider prints cannot corrupt it, and
    // a process it starts does not inherit the pipes (which would hide this
    // process's death from the host).
    let (input, output) =
        private_stdio().map_err(|e| EntryError(format!("cannot set up the protocol streams: {e}")))?;
    match serve(io::BufReader::with_capacity(64 << 10, input), output) {
        Ok(()) => Ok(0),
        // The host has the message already.
        Err(ServeError::Build(_)) => Ok(2),
        // The host is gone (it finished, or gave up on this process while
        // it started): no one is left to tell.
        Err(ServeError::Io(error)) if error.kind() == io::ErrorKind::BrokenPipe => Ok(0),
        Err(error) => Err(EntryError(error.to_string())),
    }
}
