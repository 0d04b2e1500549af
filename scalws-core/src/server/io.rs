//! Streams wrapped to note when bytes last moved: a connection's socket (its
//! [`Activity`], for the timeouts) and the two sides of a tunnel (for its
//! idle limit).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use super::activity::Activity;
use super::listener::ConnectionPermit;

/// Told by a [`Watched`] stream when a read or a write moved bytes.
pub(crate) trait Watcher {
    fn on_read(&self);
    fn on_write(&mut self);
    /// A write was refused for now (the peer is not reading); an error ends
    /// the stream. Called within the task that writes, with its context.
    fn on_write_blocked(&mut self, _cx: &mut Context<'_>) -> Option<io::Error> {
        None
    }
}

pin_project_lite::pin_project! {
    /// Forwards to `inner` and tells the watcher of every read and write
    /// that moved bytes.
    pub(crate) struct Watched<T, W> {
        #[pin]
        inner: T,
        watcher: W,
    }
}

impl<T, W> Watched<T, W> {
    pub(crate) fn new(inner: T, watcher: W) -> Self {
        Self { inner, watcher }
    }
}

/// A connection's socket: stamps its [`Activity`], and holds its place in
/// its listener as long as the socket lives, through a tunnel too when the
/// connection is upgraded.
pub(crate) type TrackedIo<T> = Watched<T, ConnectionWatcher>;

pub(crate) struct ConnectionWatcher {
    pub(crate) activity: Arc<Activity>,
    pub(crate) _permit: ConnectionPermit,
    /// `send_timeout`, when this layer is the one that meets the socket
    /// (plain connections; for TLS it watches the TCP stream underneath).
    send: Option<SendDeadline>,
}

impl ConnectionWatcher {
    pub(crate) fn new(
        activity: Arc<Activity>,
        permit: ConnectionPermit,
        send_timeout: Option<Duration>,
    ) -> Self {
        Self {
            activity,
            _permit: permit,
            send: send_timeout.map(SendDeadline::new),
        }
    }
}

impl Watcher for ConnectionWatcher {
    fn on_read(&self) {
        self.activity.on_read();
    }

    fn on_write(&mut self) {
        self.activity.on_write();
        if let Some(send) = &mut self.send {
            send.on_write();
        }
    }

    fn on_write_blocked(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        self.send.as_mut()?.on_write_blocked(cx)
    }
}

/// `send_timeout` on the stream that meets the socket: a timer armed when
/// a write is refused, dropped when one goes through. Its waker is the
/// writing task's, which then writes again and finds it elapsed; no timer
/// exists while writes go through.
pub(crate) struct SendDeadline {
    timeout: Duration,
    timer: Option<Pin<Box<Sleep>>>,
}

impl SendDeadline {
    pub(crate) fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            timer: None,
        }
    }
}

impl Watcher for SendDeadline {
    fn on_read(&self) {}

    fn on_write(&mut self) {
        if self.timer.is_some() {
            self.timer = None;
        }
    }

    /// The client has taken no byte for `send_timeout`: the connection ends.
    fn on_write_blocked(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        let timeout = self.timeout;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        timer.as_mut().poll(cx).is_ready().then(|| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                "the client took no byte within send_timeout",
            )
        })
    }
}

/// A tunnel's two sides share one [`Activity`]: when bytes last moved.
impl Watcher for Arc<Activity> {
    fn on_read(&self) {
        Activity::on_read(self);
    }

    fn on_write(&mut self) {
        Activity::on_write(self);
    }
}

impl<T: AsyncRead, W: Watcher> AsyncRead for Watched<T, W> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        let result = this.inner.poll_read(cx, buf);
        if buf.filled().len() > before {
            this.watcher.on_read();
        }
        result
    }
}

/// Tells the watcher what a write did: bytes taken, or refused (which may
/// end the connection, when the watcher's `send_timeout` has run out).
#[inline]
fn wrote<W: Watcher>(
    watcher: &mut W,
    cx: &mut Context<'_>,
    result: Poll<io::Result<usize>>,
) -> Poll<io::Result<usize>> {
    match result {
        Poll::Ready(Ok(n)) if n > 0 => watcher.on_write(),
        Poll::Pending => {
            if let Some(error) = watcher.on_write_blocked(cx) {
                return Poll::Ready(Err(error));
            }
        }
        _ => {}
    }
    result
}

impl<T: AsyncWrite, W: Watcher> AsyncWrite for Watched<T, W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        let result = this.inner.poll_write(cx, buf);
        wrote(this.watcher, cx, result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        let result = this.inner.poll_write_vectored(cx, bufs);
        wrote(this.watcher, cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_shutdown(cx)
    }
}

pin_project_lite::pin_project! {
    /// A plain connection's socket as hyper's HTTP/1 server reads it. A
    /// zero-length read waits until the socket is readable, without a system
    /// call: the vendored hyper (scalws-core/vendor/hyper/PATCHED.md) reads so
    /// between requests, and releases its buffers while that read is
    /// pending, so an idle keep-alive connection holds none. (tokio's
    /// `TcpStream` would make a zero-length `read(2)` when it is readable:
    /// one more system call per request.)
    pub(crate) struct Socket {
        #[pin]
        stream: TcpStream,
    }
}

impl Socket {
    pub(crate) fn new(stream: TcpStream) -> Self {
        Self { stream }
    }

    pub(crate) fn tcp(&self) -> &TcpStream {
        &self.stream
    }
}

impl AsyncRead for Socket {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if buf.remaining() == 0 {
            return self.stream.poll_read_ready(cx);
        }
        self.project().stream.poll_read(cx, buf)
    }
}

impl AsyncWrite for Socket {
    #[inline]
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().stream.poll_write(cx, buf)
    }

    #[inline]
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().stream.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().stream.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().stream.poll_shutdown(cx)
    }
}
