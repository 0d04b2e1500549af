//! A connection's socket, wrapped to note when bytes last moved.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::activity::Activity;
use super::running::ConnectionPermit;

pin_project_lite::pin_project! {
    /// Forwards to the socket and stamps [`Activity`] on every read and write that moved bytes.
    pub(crate) struct TrackedIo<T> {
        #[pin]
        inner: T,
        activity: Arc<Activity>,
        // The connection's place in its listener, held as long as the socket:
        // through a tunnel too, when the connection is upgraded.
        permit: ConnectionPermit,
    }
}

impl<T> TrackedIo<T> {
    pub(crate) fn new(inner: T, activity: Arc<Activity>, permit: ConnectionPermit) -> Self {
        Self {
            inner,
            activity,
            permit,
        }
    }
}

impl<T: AsyncRead> AsyncRead for TrackedIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        let result = this.inner.poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.on_read();
        }
        result
    }
}

impl<T: AsyncWrite> AsyncWrite for TrackedIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        let result = this.inner.poll_write(cx, buf);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.on_write();
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
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.on_write();
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
