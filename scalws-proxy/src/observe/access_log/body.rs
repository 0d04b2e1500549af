//! [`LoggedBody`]: a response body that counts its bytes and logs its
//! request's entry once, when it ends, fails, or is dropped.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use scalws_core::{Body, BoxError};

use super::pending::Pending;

/// A response body on its way to the client.
pub(super) struct LoggedBody {
    inner: Body,
    bytes: u64,
    /// Taken when the entry is logged.
    pending: Option<Box<Pending>>,
}

impl LoggedBody {
    pub(super) fn new(inner: Body, pending: Box<Pending>) -> Self {
        Self {
            inner,
            bytes: 0,
            pending: Some(pending),
        }
    }

    fn finish(&mut self) {
        if let Some(pending) = self.pending.take() {
            pending.finish(self.bytes);
        }
    }
}

impl http_body::Body for LoggedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let frame = ready!(Pin::new(&mut this.inner).poll_frame(cx));
        match &frame {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    this.bytes += data.len() as u64;
                }
            }
            // The end, or a failure that aborts the response.
            None | Some(Err(_)) => this.finish(),
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for LoggedBody {
    /// The server drops a body it will not read on (its end seen through
    /// `is_end_stream`, a HEAD, or a client gone): the entry is logged then.
    fn drop(&mut self) {
        self.finish();
    }
}
