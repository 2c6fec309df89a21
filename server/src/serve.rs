//! The accept loop: a bounded number of connections, each served by hyper
//! with a limit on how long a request's headers may take, and a graceful
//! shutdown that stops accepting, says draining, and waits for the requests
//! in flight.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Semaphore;

use crate::options::Listen;
use crate::service::Service;

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address or socket could not be bound.
    #[error("cannot listen on {listen}: {source}")]
    Bind {
        /// Where.
        listen: Listen,
        /// Why.
        source: std::io::Error,
    },
    /// The Unix socket's path holds something that is not a socket.
    #[error("cannot listen on {0}: a file that is not a socket is there; remove it or choose another path")]
    NotASocket(Listen),
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// A bound service, not yet serving.
pub struct Server {
    service: Service,
    listener: Listener,
    local: Listen,
}

impl Server {
    /// Binds the service's listener.
    pub async fn bind(service: Service) -> Result<Server, ServeError> {
        let listen = service.options().listen.clone();
        let bind_error = |source| ServeError::Bind { listen: listen.clone(), source };
        let (listener, local) = match &listen {
            Listen::Tcp(address) => {
                let listener = TcpListener::bind(address).await.map_err(bind_error)?;
                let local = Listen::Tcp(listener.local_addr().map_err(bind_error)?);
                (Listener::Tcp(listener), local)
            }
            Listen::Unix(path) => {
                if let Ok(meta) = std::fs::symlink_metadata(path) {
                    use std::os::unix::fs::FileTypeExt;
                    if !meta.file_type().is_socket() {
                        return Err(ServeError::NotASocket(listen.clone()));
                    }
                    // A socket left by an earlier run that did not end cleanly.
                    std::fs::remove_file(path).map_err(bind_error)?;
                }
                (Listener::Unix(UnixListener::bind(path).map_err(bind_error)?), listen.clone())
            }
        };
        Ok(Server { service, listener, local })
    }

    /// Where it listens (with the port the system chose for port 0).
    pub fn local(&self) -> &Listen {
        &self.local
    }

    /// Serves until `shutdown` completes, then drains: stops accepting,
    /// refuses new calls (503, `/readyz` draining) and waits up to the
    /// drain timeout for the requests in flight.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let Server { service, listener, local } = self;
        let graceful = GracefulShutdown::new();
        let connections = Arc::new(Semaphore::new(service.options().max_connections));
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                accepted = accept(&listener) => accepted,
                () = &mut shutdown => break,
            };
            let io = match accepted {
                Ok(io) => io,
                Err(error) => {
                    // Out of descriptors, say: wait a moment rather than spin.
                    tracing::warn!("cannot accept a connection: {error}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let Ok(permit) = connections.clone().try_acquire_owned() else {
                tokio::spawn(refuse_busy(io, service.options().max_connections));
                continue;
            };
            let connection = {
                let service = service.clone();
                let options = service.options();
                let io = Deadlined::new(io, options.request_timeout);
                http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(options.request_timeout)
                    .serve_connection(
                        TokioIo::new(io),
                        service_fn(move |request| {
                            let service = service.clone();
                            async move { Ok::<_, Infallible>(service.handle(request).await) }
                        }),
                    )
            };
            let connection = graceful.watch(connection);
            tokio::spawn(async move {
                if let Err(error) = connection.await {
                    tracing::debug!("connection ended: {error}");
                }
                drop(permit);
            });
        }
        service.drain();
        drop(listener);
        if let Listen::Unix(path) = &local {
            let _ = std::fs::remove_file(path);
        }
        let drain = service.options().drain_timeout;
        tracing::info!(
            "draining: no new connections; waiting up to {} ms for the calls in flight",
            drain.as_millis()
        );
        if tokio::time::timeout(drain, graceful.shutdown()).await.is_err() {
            tracing::warn!("connections still open after {} ms: closing them", drain.as_millis());
        }
    }
}

/// Binds and serves `service` until `shutdown` completes (see
/// [`Server::run`]).
pub async fn serve(service: Service, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
    Server::bind(service).await?.run(shutdown).await;
    Ok(())
}

/// A connection from either listener.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Stream for T {}

async fn accept(listener: &Listener) -> std::io::Result<Box<dyn Stream>> {
    Ok(match listener {
        Listener::Tcp(listener) => {
            let (stream, _) = listener.accept().await?;
            // Decisions are small: send each at once.
            let _ = stream.set_nodelay(true);
            Box::new(stream)
        }
        Listener::Unix(listener) => Box::new(listener.accept().await?.0),
    })
}

/// A connection with the deadline hyper does not keep itself: one that
/// takes no byte of its answers for `stalled` (a client that writes
/// requests and never reads) is closed. (hyper closes one that sends no
/// request head within its header timeout, from its start or after its
/// last answer.)
struct Deadlined<S> {
    io: S,
    stalled: Duration,
    writing: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> Deadlined<S> {
    fn new(io: S, stalled: Duration) -> Self {
        Deadlined { io, stalled, writing: None }
    }

    /// `Pending` until the stall's timer (set on first need) fires, then
    /// the error that closes the connection.
    fn stall<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let stalled = self.stalled;
        let timer = self.writing.get_or_insert_with(|| Box::pin(tokio::time::sleep(stalled)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client took nothing of its answers for the request timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    /// What a write or a flush did: progress clears the timer.
    fn progress<T>(&mut self, polled: Poll<io::Result<T>>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match polled {
            Poll::Pending => self.stall(cx),
            ready => {
                self.writing = None;
                ready
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Deadlined<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Deadlined<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, bytes);
        self.progress(polled, cx)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_flush(cx);
        self.progress(polled, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buffers: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, buffers);
        self.progress(polled, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// Answers a connection beyond the limit with 503 and closes it, having
/// read what the client sent first (closing a socket with unread bytes
/// resets it, and the client might never see the answer).
async fn refuse_busy(mut io: Box<dyn Stream>, limit: usize) {
    let body = format!(
        "{{\"error\":{{\"kind\":\"busy\",\"message\":\"this server serves {limit} connections at once \
         (--max-connections); retry, or reuse a connection\"}}}}"
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = async {
        let mut request = [0u8; 4096];
        let _ = tokio::time::timeout(Duration::from_millis(100), io.read(&mut request)).await;
        io.write_all(response.as_bytes()).await?;
        io.shutdown().await?;
        // Until the client closes too (or a second passes).
        while io.read(&mut request).await? > 0 {}
        Ok::<_, io::Error>(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), answer).await;
}
