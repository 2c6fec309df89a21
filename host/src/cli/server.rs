//! `guardhost provider-server`: the child process of a provider with
//! `isolation: process`. Not for people: the host starts it and speaks the
//! protocol of `guardhost::isolation` with it on stdin/stdout.

use std::io::{self, BufRead, Write};
use std::process::ExitCode;

use guardhost::isolation::{serve, ServeError};

use super::CliError;

/// The protocol's ends: private copies of stdin and stdout. Standard input
/// then reads `/dev/null` and standard output goes to stderr, so what the
/// provider prints cannot corrupt the protocol, and a process it starts does
/// not inherit the pipes (which would hide this process's death from the
/// host). The copies are closed on `exec`.
#[cfg(unix)]
fn protocol_streams() -> io::Result<(Box<dyn BufRead + Send>, Box<dyn Write + Send>)> {
    use std::os::fd::AsFd;
    let input = std::fs::File::from(io::stdin().as_fd().try_clone_to_owned()?);
    let output = std::fs::File::from(io::stdout().as_fd().try_clone_to_owned()?);
    io::stdout().flush()?;
    rustix::stdio::dup2_stdout(io::stderr().as_fd())?;
    rustix::stdio::dup2_stdin(std::fs::File::open("/dev/null")?)?;
    Ok((Box::new(io::BufReader::with_capacity(64 << 10, input)), Box::new(output)))
}

#[cfg(not(unix))]
fn protocol_streams() -> io::Result<(Box<dyn BufRead + Send>, Box<dyn Write + Send>)> {
    Ok((Box::new(io::BufReader::with_capacity(64 << 10, io::stdin())), Box::new(io::stdout())))
}

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
    let (input, output) = protocol_streams().map_err(io_error("cannot set up the protocol streams"))?;
    match serve(input, output) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // The host has the message already.
        Err(ServeError::Build(_)) => Ok(ExitCode::from(2)),
        Err(error) => Err(CliError::Usage(format!("provider server: {error}"))),
    }
}
