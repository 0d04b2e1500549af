//! A file streamed from disk in chunks, never read whole.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures_util::Stream;
use http_body::{Frame, SizeHint};
use tokio::io::{AsyncReadExt, Take};
use tokio_util::io::ReaderStream;

/// Read size: big enough that a 1 MiB file is 16 reads, small enough per connection.
const CHUNK: usize = 64 * 1024;

/// `len` bytes of a file from its current offset, with an exact size hint.
pub(super) struct FileBody {
    chunks: ReaderStream<Take<tokio::fs::File>>,
    remaining: u64,
}

impl FileBody {
    /// `file` must already be positioned at the first byte to send.
    pub(super) fn new(file: std::fs::File, len: u64) -> Self {
        let file = tokio::fs::File::from_std(file).take(len);
        Self {
            chunks: ReaderStream::with_capacity(file, CHUNK),
            remaining: len,
        }
    }
}

impl http_body::Body for FileBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        match ready!(Pin::new(&mut this.chunks).poll_next(cx)) {
            Some(Ok(chunk)) => {
                this.remaining = this.remaining.saturating_sub(chunk.len() as u64);
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
            Some(Err(error)) => Poll::Ready(Some(Err(error))),
            // The file shrank after Content-Length was sent: fail rather than end short,
            // so the connection is cut instead of the client waiting for the rest.
            None if this.remaining > 0 => {
                this.remaining = 0;
                Poll::Ready(Some(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file shrank while being served",
                ))))
            }
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}
