//! Standard streams a provider in this process cannot touch.
//!
//! A provider that prints to standard output would corrupt the answers of
//! `run` (or the frames of `provider-server`), and one that reads standard
//! input would steal the calls. The command keeps private copies of both,
//! then points descriptor 0 at `/dev/null` and descriptor 1 at standard
//! error, so what a provider prints lands in the log instead. The copies are
//! closed on `exec`, so a process the provider starts does not inherit them.

use std::io::{self, Read, Write};

/// The command's own standard input and output (see the module docs).
#[cfg(unix)]
pub fn private_stdio() -> io::Result<(Box<dyn Read + Send>, Box<dyn Write + Send>)> {
    use std::os::fd::AsFd;
    let input = std::fs::File::from(io::stdin().as_fd().try_clone_to_owned()?);
    let output = std::fs::File::from(io::stdout().as_fd().try_clone_to_owned()?);
    io::stdout().flush()?;
    rustix::stdio::dup2_stdout(io::stderr().as_fd())?;
    rustix::stdio::dup2_stdin(std::fs::File::open("/dev/null")?)?;
    Ok((Box::new(input), Box::new(output)))
}

/// Elsewhere the streams are shared with the provider.
#[cfg(not(unix))]
pub fn private_stdio() -> io::Result<(Box<dyn Read + Send>, Box<dyn Write + Send>)> {
    Ok((Box::new(io::stdin()), Box::new(io::stdout())))
}
