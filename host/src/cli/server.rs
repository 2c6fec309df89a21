//! `guardhost provider-server`: the child process of a provider with
//! `isolation: process`. Not for people: the host starts it and speaks the
//! protocol of `guardhost::isolation` with it on stdin/stdout.

use std::io::{self, BufRead, Write};
use std::process::ExitCode;

use guardhost::isolation::{serve, ServeError};

use super::CliError;

/// Where the protocol goes: this process's stdout, written without the
/// line buffering of `std::io::stdout`.
fn protocol_output() -> io::Result<Box<dyn Write + Send>> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        Ok(Box::new(std::fs::File::from(io::stdout().as_fd().try_clone_to_owned()?)))
    }
    #[cfg(not(unix))]
    {
        Ok(Box::new(io::stdout()))
    }
}

/// Where the protocol comes from: this process's stdin.
fn protocol_input() -> impl BufRead + Send + 'static {
    io::BufReader::with_capacity(64 << 10, io::stdin())
}

pub fn run() -> Result<ExitCode, CliError> {
    let output = protocol_output()
        .map_err(|source| CliError::Io { what: "cannot open the protocol output".into(), source })?;
    match serve(protocol_input(), output) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // The host has the message already.
        Err(ServeError::Build(_)) => Ok(ExitCode::from(2)),
        Err(error) => Err(CliError::Usage(format!("provider server: {error}"))),
    }
}
