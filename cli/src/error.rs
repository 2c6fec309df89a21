//! How a command fails ([`CliError`], exit status 2), and its writes to
//! standard output, which end quietly with [`CLOSED_STDOUT`] when the reader
//! went away.

/// A failure that ends a command with exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Config(#[from] guardhost::ConfigError),
    #[error(transparent)]
    Build(#[from] guardhost::BuildError),
    #[error("{0}")]
    Usage(String),
    /// The config loads, but its provider cannot decide a call.
    #[error("{0}")]
    CannotDecide(String),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    /// Standard output was closed before the command wrote all it had
    /// (its reader went away, as `| head` does): the command ends quietly
    /// with [`CLOSED_STDOUT`].
    #[error("standard output was closed before everything was written")]
    StdoutClosed,
}

/// The exit status when standard output was closed before everything was
/// written: 141, what a shell reports for a process that `SIGPIPE` ended
/// (128 + 13), as `cat` or `yes` end in `... | head`.
pub const CLOSED_STDOUT: u8 = 141;

/// The error of a write to standard output: [`CliError::StdoutClosed`]
/// when its reader went away, else what went wrong.
pub fn stdout_error(source: std::io::Error) -> CliError {
    if source.kind() == std::io::ErrorKind::BrokenPipe {
        CliError::StdoutClosed
    } else {
        CliError::Io { what: "cannot write to stdout".into(), source }
    }
}

/// Writes a report to `path`, or to standard output without one.
pub fn write_report(path: Option<&std::path::Path>, text: &str) -> Result<(), CliError> {
    match path {
        Some(path) => std::fs::write(path, text)
            .map_err(|source| CliError::Io { what: format!("cannot write {}", path.display()), source }),
        None => write_stdout(format_args!("{text}")),
    }
}

/// Writes `text` to standard output at once (see [`outln`]).
pub fn write_stdout(text: std::fmt::Arguments<'_>) -> Result<(), CliError> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout.write_fmt(text).and_then(|()| stdout.flush()).map_err(stdout_error)
}
