//! `guardhost provider-server`: the child process of a provider with
//! `isolation: process`. Not for people: the host starts it and speaks the
//! protocol of `guardhost::isolation` with it on stdin/stdout.

use std::io;
use std::process::ExitCode;

use guardhost::isolation::{serve, ServeError};

use super::streams::private_stdio;
use super::CliError;

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

pub fn run() -> Result<ExitCode, CliError> {
    let io_error = |what: &str| {
        let what = what.to_owned();
        move |source| CliError::Io { what, source }
    };
    exit_with_the_host().map_err(io_error("cannot watch the host process"))?;
    // The protocol's ends: what the provider prints cannot corrupt it, and
    // a process it starts does not inherit the pipes (which would hide this
    // process's death from the host).
    let (input, output) = private_stdio().map_err(io_error("cannot set up the protocol streams"))?;
    match serve(io::BufReader::with_capacity(64 << 10, input), output) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // The host has the message already.
        Err(ServeError::Build(_)) => Ok(ExitCode::from(2)),
        // The host is gone (it finished, or gave up on this process while
        // it started): no one is left to tell.
        Err(ServeError::Io(error)) if error.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(error) => Err(CliError::Usage(format!("provider server: {error}"))),
    }
}
