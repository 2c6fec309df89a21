//! The accept loop: a bounded number of connections, each served by hyper
//! with a limit on how long a request's headers may take, and a graceful
//! shutdown that stops accepting, says draining, and waits for the requests
//! in flight.
//!
//! A connection holds a place among the served only once its first
//! request's head has come: until then it waits among a bounded number of
//! others (four times the places), the oldest closed when a new one needs
//! room, so connections that send nothing cannot take the places. The last places (an eighth) are
//! kept for connections whose first request carries the token (or needs
//! none) or is a probe.

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
use tokio::net::TcpListener;
#[cfg(unix)]
use tokio::net::UnixListener;
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
    /// A Unix socket asked for where there are none (Windows).
    #[error("cannot listen on {0}: this system has no Unix sockets; listen on TCP instead (--listen 127.0.0.1:PORT)")]
    NoUnixSockets(Listen),
    /// The Unix socket's path holds something that is not a socket.
    #[error("cannot listen on {0}: a file that is not a socket is there; remove it or choose another path")]
    NotASocket(Listen),
}

enum Listener {
    Tcp(TcpListener),
    #[cfg(unix)]
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
            #[cfg(not(unix))]
            Listen::Unix(_) => return Err(ServeError::NoUnixSockets(listen.clone())),
            #[cfg(unix)]
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
        let slots = Slots::new(service.options().max_connections);
        let waiting = Arc::new(Waiting::new(waiting_limit(service.options().max_connections)));
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                accepted = accept(&listener) => accepted,
                () = &mut shutdown => break,
            };
            let mut io = match accepted {
                Ok(io) => io,
                Err(error) => {
                    // Out of descriptors, say: wait a moment rather than spin.
                    tracing::warn!("cannot accept a connection: {error}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            // Its first request's head is read before it may hold a place:
            // a connection that sends nothing, or nothing complete, waits
            // among the `waiting` (the oldest closed when too many wait),
            // never among the served.
            let (service, slots, waiting_list) = (service.clone(), slots.clone(), Arc::clone(&waiting));
            let watcher = graceful.watcher();
            waiting.admit(move |id| async move {
                let timeout = service.options().request_timeout;
                let head = tokio::time::timeout(timeout, read_head(&mut io)).await;
                if !waiting_list.leave(id) {
                    return; // closed to make room for a newer connection
                }
                let head = match head {
                    Ok(Ok(head)) => head,
                    // Closed, broken, or no complete head in time.
                    _ => return,
                };
                // An approver's token counts on the held calls' routes,
                // where it stands for the service's.
                let trusted = head.is_probe()
                    || service.authorized(head.authorization())
                    || (head.is_pending()
                        && service.options().approvers.by_token(head.authorization()).is_some());
                let io = Prefixed::new(head.bytes, io);
                let Some(slot) = slots.take(trusted) else {
                    refuse_busy(Box::new(io), service.options().max_connections).await;
                    return;
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
                if let Err(error) = watcher.watch(connection).await {
                    tracing::debug!("connection ended: {error}");
                }
                drop(slot);
            });
        }
        service.drain();
        drop(listener);
        // Connections that never sent a request are closed, not waited for.
        waiting.close_all();
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

/// The places connections are served in: `max_connections` in all, the
/// last [`reserve`] of them only for connections whose first request is
/// authenticated (or needs no token) or a probe (`GET /healthz`,
/// `/readyz`), so clients without the token cannot take them all.
#[derive(Clone)]
struct Slots {
    open: Arc<Semaphore>,
    reserved: Arc<Semaphore>,
}

/// The places kept for authenticated clients and probes: an eighth of
/// `max_connections`, at least one when there are two or more.
pub fn reserve(max_connections: usize) -> usize {
    if max_connections < 2 {
        0
    } else {
        (max_connections / 8).max(1)
    }
}

/// A place held: given back when dropped.
#[allow(dead_code)] // held for its drop
struct Slot(tokio::sync::OwnedSemaphorePermit);

impl Slots {
    fn new(max_connections: usize) -> Self {
        let reserved = reserve(max_connections);
        Slots {
            open: Arc::new(Semaphore::new(max_connections - reserved)),
            reserved: Arc::new(Semaphore::new(reserved)),
        }
    }

    /// A place for a connection (`trusted`: authenticated or a probe), if
    /// one is free for it.
    fn take(&self, trusted: bool) -> Option<Slot> {
        let open = self.open.clone().try_acquire_owned();
        match open {
            Ok(permit) => Some(Slot(permit)),
            Err(_) if trusted => self.reserved.clone().try_acquire_owned().ok().map(Slot),
            Err(_) => None,
        }
    }
}

/// How many connections may wait for their first request's head to come:
/// four times `max_connections` (at least 8).
pub fn waiting_limit(max_connections: usize) -> usize {
    max_connections.saturating_mul(4).max(8)
}

/// Connections whose first request's head is being read: at most `limit`;
/// a new one past it closes the one that has waited longest.
struct Waiting {
    limit: usize,
    next: std::sync::atomic::AtomicU64,
    tasks: std::sync::Mutex<std::collections::BTreeMap<u64, tokio::task::AbortHandle>>,
}

impl Waiting {
    fn new(limit: usize) -> Self {
        Waiting {
            limit: limit.max(1),
            next: std::sync::atomic::AtomicU64::new(0),
            tasks: std::sync::Mutex::new(std::collections::BTreeMap::new()),
        }
    }

    /// Starts the task `start(id)` makes, among the waiting.
    fn admit<F, Fut>(&self, start: F)
    where
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Under the lock, so that the task cannot leave before it is in.
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        while tasks.len() >= self.limit {
            let Some((_, oldest)) = tasks.pop_first() else { break };
            oldest.abort();
        }
        let task = tokio::spawn(start(id));
        tasks.insert(id, task.abort_handle());
    }

    /// Closes every connection still waiting (at shutdown).
    fn close_all(&self) {
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        for task in tasks.into_values() {
            task.abort();
        }
    }

    /// Leaves the waiting; `false` when it was closed for a newer one.
    fn leave(&self, id: u64) -> bool {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner()).remove(&id).is_some()
    }
}

/// The largest request head read before a connection is given a place;
/// a longer one is not searched for a token (hyper answers it).
const MAX_HEAD: usize = 16 << 10;

/// What came before a connection's first request's body.
struct Head {
    /// Everything read so far (the head, maybe some of the body).
    bytes: Vec<u8>,
    /// Where the head ends in `bytes` (`None`: longer than [`MAX_HEAD`]).
    end: Option<usize>,
}

impl Head {
    fn text(&self) -> &[u8] {
        self.end.map_or(&[][..], |end| &self.bytes[..end])
    }

    fn lines(&self) -> impl Iterator<Item = &[u8]> {
        self.text().split(|&b| b == b'\n').map(|line| line.strip_suffix(b"\r").unwrap_or(line))
    }

    /// `GET /healthz` or `GET /readyz`.
    fn is_probe(&self) -> bool {
        let Some(line) = self.lines().next() else { return false };
        let mut parts = line.split(|&b| b == b' ');
        let (method, target) = (parts.next(), parts.next().unwrap_or_default());
        let path = target.split(|&b| b == b'?').next().unwrap_or_default();
        method == Some(&b"GET"[..]) && (path == b"/healthz" || path == b"/readyz")
    }

    /// Whether it asks for a held calls' route (`/v1/pending...`).
    fn is_pending(&self) -> bool {
        let Some(line) = self.lines().next() else { return false };
        line.split(|&b| b == b' ').nth(1).is_some_and(|target| target.starts_with(b"/v1/pending"))
    }

    /// The `Authorization` header's value, if there is one.
    fn authorization(&self) -> Option<&[u8]> {
        self.lines().skip(1).find_map(|line| {
            let colon = line.iter().position(|&b| b == b':')?;
            let (name, value) = line.split_at(colon);
            name.eq_ignore_ascii_case(b"authorization").then(|| value[1..].trim_ascii())
        })
    }
}

/// Reads until the end of the first request's head (or [`MAX_HEAD`]
/// bytes); an error when the connection ends first.
async fn read_head(io: &mut Box<dyn Stream>) -> io::Result<Head> {
    let mut bytes = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let read = io.read(&mut chunk).await?;
        if read == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let searched_from = bytes.len().saturating_sub(3);
        bytes.extend_from_slice(&chunk[..read]);
        if let Some(at) = bytes[searched_from..].windows(4).position(|w| w == b"\r\n\r\n") {
            let end = searched_from + at + 4;
            return Ok(Head { bytes, end: Some(end) });
        }
        if bytes.len() > MAX_HEAD {
            return Ok(Head { bytes, end: None });
        }
    }
}

/// A connection whose first bytes were read already: they come first.
struct Prefixed<S> {
    read: Vec<u8>,
    at: usize,
    io: S,
}

impl<S> Prefixed<S> {
    fn new(read: Vec<u8>, io: S) -> Self {
        Prefixed { read, at: 0, io }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.at < self.read.len() {
            let n = buf.remaining().min(self.read.len() - self.at);
            let at = self.at;
            buf.put_slice(&self.read[at..at + n]);
            self.at += n;
            if self.at == self.read.len() {
                self.read = Vec::new();
                self.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, bytes)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buffers: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, buffers)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
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
        #[cfg(unix)]
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
