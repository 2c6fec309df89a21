//! This process's standard input and output as the client's side of the
//! stdio transport.
//!
//! tokio's `stdin()` and `stdout()` hand every read and write to a thread
//! of the blocking pool, a thread switch each way per message. MCP clients
//! start servers with pipes, and a pipe can be driven by the runtime's own
//! event loop instead: on Unix, when standard input or output is a pipe
//! (or FIFO) it is read or written through `tokio::net::unix::pipe`, in
//! non-blocking mode; anything else (a terminal, a file, Windows) falls
//! back to tokio's blocking-pool handles.

use tokio::io::{AsyncRead, AsyncWrite};

/// A reader of the client's messages.
pub type ClientIn = Box<dyn AsyncRead + Unpin + Send>;
/// A writer of the answers to the client.
pub type ClientOut = Box<dyn AsyncWrite + Unpin + Send>;

/// Standard input and output, as pipes where they are pipes. Must be
/// called inside a tokio runtime.
pub fn client() -> (ClientIn, ClientOut) {
    (input(), output())
}

#[cfg(unix)]
fn input() -> ClientIn {
    use std::os::fd::AsFd;
    let pipe = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(tokio::net::unix::pipe::Receiver::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(pipe),
        Err(error) => {
            tracing::debug!("standard input is read through the blocking pool ({error})");
            Box::new(tokio::io::stdin())
        }
    }
}

#[cfg(unix)]
fn output() -> ClientOut {
    use std::os::fd::AsFd;
    let pipe = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(tokio::net::unix::pipe::Sender::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(pipe),
        Err(error) => {
            tracing::debug!("standard output is written through the blocking pool ({error})");
            Box::new(tokio::io::stdout())
        }
    }
}

#[cfg(not(unix))]
fn input() -> ClientIn {
    Box::new(tokio::io::stdin())
}

#[cfg(not(unix))]
fn output() -> ClientOut {
    Box::new(tokio::io::stdout())
}
