//! The request body of an HTTP/3 stream, read as the service polls it.

use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};

use bytes::{Buf, Bytes};
use http_body::{Frame, SizeHint};

use crate::error::{BodyTooLarge, BoxError};

/// The receiving half of a request stream.
pub(super) type RecvHalf = ::h3::server::RequestStream<h3_quinn::RecvStream, Bytes>;

/// The body's length differed from its `Content-Length` (RFC 9114 4.1.2).
#[derive(Debug, thiserror::Error)]
#[error("request body length differs from its content-length")]
pub(crate) struct BodyLengthMismatch;

/// Streams DATA frames, then trailers, from the client; past `limit` bytes it
/// yields [`BodyTooLarge`], which the server answers with 413.
pub(super) struct RequestBody {
    recv: RecvHalf,
    /// Bytes still allowed by `max_request_body`.
    remaining: u64,
    /// `Content-Length` minus the bytes read so far, when declared.
    declared: Option<u64>,
    state: State,
    /// A frame read ahead by [`RequestBody::new`], returned first.
    peeked: Option<Result<Frame<Bytes>, BoxError>>,
}

type Polled = Poll<Option<Result<Frame<Bytes>, BoxError>>>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Data,
    Trailers,
    Done,
}

impl RequestBody {
    pub(super) fn new(recv: RecvHalf, limit: u64, declared: Option<u64>) -> Self {
        let mut body = Self {
            recv,
            remaining: limit,
            declared,
            state: State::Data,
            peeked: None,
        };
        // A GET's stream usually ends with its head: finding that out now lets
        // `is_end_stream` say so, and a proxy send no body upstream.
        if let Poll::Ready(Some(frame)) = body.poll_next(&mut Context::from_waker(Waker::noop())) {
            body.peeked = Some(frame);
        }
        body
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Polled {
        let polled = match self.state {
            State::Data => self.poll_data(cx),
            State::Trailers => self.poll_trailers(cx),
            State::Done => return Poll::Ready(None),
        };
        if let Poll::Ready(Some(Err(_))) = &polled {
            self.state = State::Done;
        }
        polled
    }

    fn poll_data(&mut self, cx: &mut Context<'_>) -> Polled {
        let Some(mut buf) = ready!(self.recv.poll_recv_data(cx))? else {
            self.state = State::Trailers;
            if self.declared.is_some_and(|left| left > 0) {
                self.state = State::Done;
                return Poll::Ready(Some(Err(BodyLengthMismatch.into())));
            }
            return self.poll_trailers(cx);
        };
        let data = buf.copy_to_bytes(buf.remaining());
        let len = data.len() as u64;
        if len > self.remaining {
            self.state = State::Done;
            return Poll::Ready(Some(Err(BodyTooLarge.into())));
        }
        self.remaining -= len;
        if let Some(left) = &mut self.declared {
            let Some(rest) = left.checked_sub(len) else {
                self.state = State::Done;
                return Poll::Ready(Some(Err(BodyLengthMismatch.into())));
            };
            *left = rest;
        }
        Poll::Ready(Some(Ok(Frame::data(data))))
    }

    fn poll_trailers(&mut self, cx: &mut Context<'_>) -> Polled {
        let trailers = ready!(self.recv.poll_recv_trailers(cx));
        self.state = State::Done;
        Poll::Ready(trailers?.map(|trailers| Ok(Frame::trailers(trailers))))
    }
}

impl http_body::Body for RequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled {
        let this = self.get_mut();
        if let Some(frame) = this.peeked.take() {
            return Poll::Ready(Some(frame));
        }
        this.poll_next(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.peeked.is_none() && self.state == State::Done
    }

    fn size_hint(&self) -> SizeHint {
        if self.is_end_stream() {
            return SizeHint::with_exact(0);
        }
        let Some(left) = self.declared else {
            return SizeHint::default();
        };
        // Honest: a body that strays from its declared length is an error.
        let peeked = match &self.peeked {
            Some(Ok(frame)) => frame.data_ref().map_or(0, |data| data.len() as u64),
            _ => 0,
        };
        SizeHint::with_exact(left + peeked)
    }
}
