//! HTTP/1.1 on an upstream connection, spoken here rather than by hyper's
//! client: the request head and its body's framing on the way out, the
//! response head and its body's framing on the way back. There is no
//! connection task, channel or dispatcher: the request's future, then the
//! response body, call [`Exchange`] directly, and one poll both writes what
//! the request still has to send and reads what the upstream has answered.
//!
//! The rules it keeps:
//!
//! - **Request framing**, as hyper's client framed it before (so what an
//!   upstream receives is unchanged): a body that has ended is sent as
//!   nothing (`Transfer-Encoding` dropped; a `Content-Length` other than 0
//!   is refused); a `Transfer-Encoding` is kept and made to end in
//!   `chunked`, and `Content-Length` is dropped; else a valid
//!   `Content-Length` frames the body and the body must match it; else a
//!   body of known size gets its `Content-Length`; else GET, HEAD and
//!   CONNECT are sent with no body and anything else is chunked. Request
//!   trailers go only in chunked bodies and only the fields the `Trailer`
//!   header names (and that may be trailers). An invalid `Content-Length`
//!   is refused, never guessed at.
//! - **Response framing** (RFC 9112 6.3): no body after a HEAD or in a 1xx,
//!   204 or 304; other 1xx answers than 101 are read and skipped; a
//!   `Transfer-Encoding` ending in `chunked` frames by chunks (a
//!   `Content-Length` beside it is removed and the connection is not
//!   reused), any other `Transfer-Encoding`, or neither field, frames by
//!   the connection's close; `Content-Length` must be digits, and several
//!   must agree; HTTP/1.0 with `Transfer-Encoding` is refused.
//! - **Chunks** are read strictly: hexadecimal sizes of at most 16 digits
//!   after any leading zeros,
//!   extensions of visible characters, every line ended by CRLF, the line
//!   at most 4 KiB and the trailers within the head limit.
//! - **Limits**: a response head larger than `max_head` bytes or with more
//!   than 100 fields is refused.
//! - **Reuse**: only after HTTP/1.1 without `Connection: close` (never after
//!   HTTP/1.0, `keep-alive` or not: the next request could be chunked, which
//!   an HTTP/1.0 server need not read as such), with the response read to
//!   its end, the request sent whole, and no byte read beyond the response.

mod chunked;
mod request;
mod response;
#[cfg(test)]
mod tests;

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};

use bytes::{Buf, Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName};
use http_body::SizeHint;
use scalws_core::{Body, BoxError};
use tokio::io::AsyncWrite;

use self::chunked::Chunk;

use super::connector::UpstreamStream;

/// The most fields in a response head or in a chunked body's trailers.
const MAX_HEADERS: usize = 100;
/// How much room a read is given, at least.
const READ_ROOM: usize = 8 * 1024;
/// The longest chunk-size line (with its extensions).
const MAX_CHUNK_LINE: usize = 4 * 1024;

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WireError {
    /// The upstream closed before the whole response head came.
    #[error("upstream closed the connection before the response head")]
    ClosedBeforeHead,
    /// Reading or writing the connection failed.
    #[error("upstream connection failed")]
    Io(#[source] io::Error),
    /// The response head cannot be used (garbage, too large, bad framing).
    #[error("invalid response from the upstream: {0}")]
    BadResponse(&'static str),
    /// The response body ended before its length or its last chunk.
    #[error("upstream response body cut short")]
    BodyCut,
    /// The request cannot be sent as given.
    #[error("request not sendable: {0}")]
    BadRequest(&'static str),
    /// The request body failed (the client's side).
    #[error("request body failed")]
    RequestBody(#[source] BoxError),
}

impl WireError {
    /// A bad answer or a bad request, as opposed to a connection that
    /// failed or closed before the answer (which a retry may get past).
    pub(crate) fn is_final(&self) -> bool {
        matches!(self, Self::BadResponse(_) | Self::BadRequest(_))
    }
}

/// One upstream connection, between exchanges or during one.
pub(crate) struct Wire {
    io: UpstreamStream,
    /// Bytes read and not yet taken.
    read: BytesMut,
    /// What goes out before `data`: a head, a chunk's size line, a last chunk.
    out: Vec<u8>,
    out_at: usize,
    /// A request body frame's data, then what ends its chunk.
    data: Bytes,
    tail: &'static [u8],
    /// Where each field of the head being parsed lies (kept for reuse).
    spans: Vec<Span>,
    /// An emptied header map (the last request's) for the next response
    /// head, so a busy connection allocates none; small ones only.
    spare: HeaderMap,
    /// The field names of the last response head as written and as parsed,
    /// in order (at most [`SPARE_FIELDS`]): an upstream sends the same
    /// fields in the same order answer after answer, and a name written as
    /// the one at its place is taken from here instead of parsed again.
    names: Vec<(Box<[u8]>, HeaderName)>,
    /// The timer of a request's deadline (`request_timeout`), kept with the
    /// connection and moved later for each request on it: tokio moves a
    /// registered timer later without touching its wheel, where a timer
    /// made for each request is registered and removed again.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    max_head: usize,
}

/// The most fields a spare header map may have room for: a request with
/// more does not leave its map on an idle connection.
const SPARE_FIELDS: usize = 32;

#[derive(Clone, Copy)]
struct Span {
    name: (usize, usize),
    value: (usize, usize),
}

impl Wire {
    pub(crate) fn new(io: UpstreamStream, max_head: usize) -> Self {
        Self {
            io,
            read: BytesMut::new(),
            out: Vec::new(),
            out_at: 0,
            data: Bytes::new(),
            tail: b"",
            spans: Vec::new(),
            spare: HeaderMap::new(),
            names: Vec::new(),
            deadline: None,
            max_head,
        }
    }

    /// The socket, for a connection hyper's client takes over (an upgrade).
    /// Only an idle connection is given up, so nothing is buffered.
    pub(crate) fn into_io(self) -> UpstreamStream {
        debug_assert!(self.read.is_empty());
        self.io
    }

    /// Whether an idle connection can no longer be used: the upstream
    /// closed it, it failed, or the upstream sent bytes nobody asked for.
    /// Reads only what the socket has ready; never waits.
    pub(crate) fn is_unusable(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        // Outside the task's budget: a spent budget would answer Pending
        // without reading, and a closed connection would pass.
        let mut fill = std::pin::pin!(tokio::task::unconstrained(std::future::poll_fn(
            |cx| self.poll_fill(cx)
        )));
        fill.as_mut().poll(&mut cx).is_ready()
    }

    /// Reads what the socket has into `read`: the count, 0 at its end.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.read.capacity() - self.read.len() < READ_ROOM / 2 {
            self.read.reserve(READ_ROOM);
        }
        tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, &mut self.read)
    }

    fn has_out(&self) -> bool {
        self.out_at < self.out.len() || !self.data.is_empty() || !self.tail.is_empty()
    }

    /// Writes what is queued, in one vectored write where it can.
    fn poll_write_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.has_out() {
            let slices = [
                IoSlice::new(&self.out[self.out_at..]),
                IoSlice::new(&self.data),
                IoSlice::new(self.tail),
            ];
            let mut n = ready!(Pin::new(&mut self.io).poll_write_vectored(cx, &slices))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            let head = (self.out.len() - self.out_at).min(n);
            self.out_at += head;
            n -= head;
            if self.out_at == self.out.len() {
                self.out.clear();
                self.out_at = 0;
            }
            let data = self.data.len().min(n);
            self.data.advance(data);
            n -= data;
            self.tail = &self.tail[n.min(self.tail.len())..];
        }
        Poll::Ready(Ok(()))
    }
}

/// How the rest of the request body goes.
enum Sending {
    /// All sent (or nothing to send).
    Done,
    /// `left` bytes more, as they are.
    Length { body: Body, left: u64 },
    /// In chunks; trailers only of the fields named (none: no trailers).
    Chunked {
        body: Body,
        trailers: Option<Vec<HeaderName>>,
    },
    /// Writing failed: nothing more goes, and the connection is not reused.
    Broken,
}

/// How the response body is framed, and how far it has been read.
enum Decode {
    Length(u64),
    Chunked(Chunk),
    /// Until the upstream closes.
    Eof,
    Done,
}

/// One request and its response on a connection.
pub(crate) struct Exchange {
    wire: Box<Wire>,
    sending: Sending,
    /// The response body's framing, from its head; `Done` until the head.
    decode: Decode,
    head_request: bool,
    keep_alive: bool,
}

impl Exchange {
    /// Ready once `deadline` has passed, on the connection's own timer.
    pub(crate) fn poll_deadline(
        &mut self,
        cx: &mut Context<'_>,
        deadline: tokio::time::Instant,
    ) -> Poll<()> {
        let timer = match &mut self.wire.deadline {
            Some(timer) => {
                if timer.deadline() != deadline {
                    timer.as_mut().reset(deadline);
                }
                timer
            }
            None => self
                .wire
                .deadline
                .insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        timer.as_mut().poll(cx)
    }

    /// Keeps the request's header map, emptied, for the connection's next
    /// response head (a map with room for many fields is dropped instead).
    pub(crate) fn recycle(&mut self, mut headers: HeaderMap) {
        // `len` counts every line: a few names with many lines each would
        // leave a large list of extra values behind.
        if headers.capacity() <= SPARE_FIELDS && headers.len() <= SPARE_FIELDS {
            headers.clear();
            self.wire.spare = headers;
        }
    }

    /// Whether the response body has been read to its end.
    pub(crate) fn body_ended(&self) -> bool {
        matches!(self.decode, Decode::Done)
    }

    /// Whether the request has more to send (not when sending failed).
    pub(crate) fn still_sending(&self) -> bool {
        match self.sending {
            Sending::Length { .. } | Sending::Chunked { .. } => true,
            Sending::Done => self.wire.has_out(),
            Sending::Broken => false,
        }
    }

    /// Whether all of the request went.
    fn sent(&self) -> bool {
        matches!(self.sending, Sending::Done) && !self.wire.has_out()
    }

    /// The connection, when it may carry another request: the response was
    /// read to its end, the request went whole, the upstream keeps it open
    /// and sent nothing more.
    pub(crate) fn into_reusable(self) -> Option<Box<Wire>> {
        (self.keep_alive && self.body_ended() && self.sent() && self.wire.read.is_empty())
            .then_some(self.wire)
    }

    /// Sends the rest of the request after its response ended early; then
    /// the connection, if it may be reused.
    pub(crate) async fn finish_sending(mut self) -> Option<Box<Wire>> {
        let sent = std::future::poll_fn(|cx| self.poll_send(cx)).await;
        if sent.is_err() {
            return None;
        }
        self.into_reusable()
    }

    /// What is left of the response body, when known.
    pub(crate) fn size_hint(&self) -> SizeHint {
        match self.decode {
            Decode::Length(left) => SizeHint::with_exact(left),
            Decode::Done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

/// A `Content-Length` value: digits (any number of leading zeros, at most
/// `u64::MAX`), or a list of equal ones.
fn content_length(value: &[u8]) -> Option<u64> {
    let mut length = None;
    for item in value.split(|&b| b == b',') {
        let item = item.trim_ascii();
        if item.is_empty() || !item.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let n = item.iter().try_fold(0u64, |n, &d| {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })?;
        if length.is_some_and(|before| before != n) {
            return None;
        }
        length = Some(n);
    }
    length
}

/// Whether a list of tokens has `token` (ASCII case aside).
fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|item| item.trim_ascii().eq_ignore_ascii_case(token))
}

/// Whether the last coding of a `Transfer-Encoding` line is `chunked`.
fn ends_in_chunked(value: &[u8]) -> bool {
    value
        .rsplit(|&b| b == b',')
        .next()
        .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}
