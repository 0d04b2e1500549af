//! Streams wrapped to note when bytes last moved: a connection's socket (its
//! [`Activity`], for the timeouts) and the two sides of a tunnel (for its
//! idle limit).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::activity::Activity;
use super::listener::ConnectionPermit;

/// Told by a [`Watched`] stream when a read or a write moved bytes.
pub(crate) trait Watcher {
    fn on_read(&self);
    fn on_write(&self);
    /// A write was refused for now (the peer is not reading).
    fn on_write_blocked(&self) {}
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
}

impl Watcher for ConnectionWatcher {
    fn on_read(&self) {
        self.activity.on_read();
    }

    fn on_write(&self) {
        self.activity.on_write();
    }

    fn on_write_blocked(&self) {
        Activity::on_write_blocked(&self.activity);
    }
}

/// A tunnel's two sides share one [`Activity`]: when bytes last moved.
impl Watcher for Arc<Activity> {
    fn on_read(&self) {
        Activity::on_read(self);
    }

    fn on_write(&self) {
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

impl<T: AsyncWrite, W: Watcher> AsyncWrite for Watched<T, W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        let result = this.inner.poll_write(cx, buf);
        match result {
            Poll::Ready(Ok(n)) if n > 0 => this.watcher.on_write(),
            Poll::Pending => this.watcher.on_write_blocked(),
            _ => {}
        }
        result
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        let result = this.inner.poll_write_vectored(cx, bufs);
        match result {
            Poll::Ready(Ok(n)) if n > 0 => this.watcher.on_write(),
            Poll::Pending => this.watcher.on_write_blocked(),
            _ => {}
        }
        result
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
