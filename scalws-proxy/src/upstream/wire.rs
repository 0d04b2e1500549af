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
//! - **Chunks** are read strictly: hexadecimal sizes of at most 16 digits,
//!   extensions of visible characters, every line ended by CRLF, the line
//!   at most 4 KiB and the trailers within the head limit.
//! - **Limits**: a response head larger than `max_head` bytes or with more
//!   than 100 fields is refused.
//! - **Reuse**: only after HTTP/1.1 without `Connection: close` (or HTTP/1.0
//!   with `keep-alive`), with the response read to its end, the request
//!   sent whole, and no byte read beyond the response.

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};

use bytes::{Buf, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode, Version};
use http_body::{Body as _, Frame, SizeHint};
use scalws_core::{Body, BoxError};
use tokio::io::AsyncWrite;

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
    max_head: usize,
}

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
        self.poll_fill(&mut cx).is_ready()
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

#[derive(Clone, Copy)]
enum Chunk {
    Size,
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    Trailers,
}

/// A response head, and how its body is read.
pub(crate) struct Head {
    pub(crate) response: Response<()>,
    decode: Decode,
}

/// One request and its response on a connection.
pub(crate) struct Exchange {
    wire: Box<Wire>,
    sending: Sending,
    decode: Decode,
    head_request: bool,
    keep_alive: bool,
}

impl Exchange {
    /// Writes `request`'s head into the connection's buffer (nothing is
    /// sent yet) and takes its body. `request` must be origin-form with
    /// its Host; it goes as HTTP/1.1. A request that cannot be framed
    /// gives its connection back with the error.
    pub(crate) fn start(
        mut wire: Box<Wire>,
        request: Request<Body>,
    ) -> Result<Self, (Box<Wire>, WireError)> {
        let (parts, body) = request.into_parts();
        let headers = &parts.headers;
        // What the head says about the body, in one pass over its names.
        let mut keep_alive = true;
        // `Some(None)`: invalid, or lines that disagree.
        let mut length: Option<Option<u64>> = None;
        let mut codings = 0usize;
        let mut last_coding_chunked = false;
        let mut declared_trailers = false;
        for (name, value) in headers {
            if *name == header::CONTENT_LENGTH {
                let this = content_length(value.as_bytes());
                length = Some(match length {
                    Some(before) if before != this => None,
                    _ => this,
                });
            } else if *name == header::TRANSFER_ENCODING {
                codings += 1;
                last_coding_chunked = ends_in_chunked(value.as_bytes());
            } else if *name == header::TRAILER {
                declared_trailers = true;
            } else if *name == header::CONNECTION && has_token(value.as_bytes(), b"close") {
                keep_alive = false;
            }
        }
        let framing = if body.is_end_stream() {
            match length {
                None => Framing::None { keep_length: false },
                Some(Some(0)) => Framing::None { keep_length: true },
                Some(_) => {
                    let error = WireError::BadRequest("a Content-Length for a body that has ended");
                    return Err((wire, error));
                }
            }
        } else if codings > 0 {
            Framing::Chunked
        } else {
            match length {
                Some(Some(n)) => Framing::Length {
                    n,
                    own_header: false,
                },
                Some(None) => {
                    return Err((wire, WireError::BadRequest("an invalid Content-Length")));
                }
                None => match body.size_hint().exact() {
                    Some(n) => Framing::Length {
                        n,
                        own_header: true,
                    },
                    // As hyper's client: these methods almost never have a
                    // body of unknown length, and are sent without one.
                    None if matches!(
                        parts.method,
                        Method::GET | Method::HEAD | Method::CONNECT
                    ) =>
                    {
                        Framing::None { keep_length: false }
                    }
                    None => Framing::Chunked,
                },
            }
        };
        let keep_length = matches!(
            framing,
            Framing::None { keep_length: true }
                | Framing::Length {
                    own_header: false,
                    ..
                }
        );
        let keep_codings = matches!(framing, Framing::Chunked);

        let out = &mut wire.out;
        out.extend_from_slice(parts.method.as_str().as_bytes());
        out.push(b' ');
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        out.extend_from_slice(target.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\n");
        let mut coding = 0usize;
        for (name, value) in headers {
            if *name == header::CONTENT_LENGTH && !keep_length {
                continue;
            }
            let is_coding = *name == header::TRANSFER_ENCODING;
            if is_coding && !keep_codings {
                continue;
            }
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            if is_coding {
                coding += 1;
                // The last coding must be chunked: add it, as hyper did.
                if coding == codings && !last_coding_chunked {
                    out.extend_from_slice(b", chunked");
                }
            }
            out.extend_from_slice(b"\r\n");
        }
        let sending = match framing {
            Framing::None { .. } => Sending::Done,
            Framing::Length { n, own_header } => {
                if own_header {
                    out.extend_from_slice(b"content-length: ");
                    out.extend_from_slice(n.to_string().as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
                if n == 0 {
                    Sending::Done
                } else {
                    Sending::Length { body, left: n }
                }
            }
            Framing::Chunked => {
                if codings == 0 {
                    out.extend_from_slice(b"transfer-encoding: chunked\r\n");
                }
                let trailers = declared_trailers
                    .then(|| allowed_trailers(headers))
                    .filter(|names| !names.is_empty());
                Sending::Chunked { body, trailers }
            }
        };
        out.extend_from_slice(b"\r\n");
        Ok(Self {
            wire,
            sending,
            decode: Decode::Done,
            head_request: parts.method == Method::HEAD,
            keep_alive,
        })
    }

    /// Sends what is left of the request: ready when all of it is written.
    /// A failure of the request body is the client's; a failed write ends
    /// the sending (`Broken`) and is returned once.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), WireError>> {
        loop {
            let wire = &mut *self.wire;
            if wire.data.is_empty() && wire.tail.is_empty() {
                match &mut self.sending {
                    Sending::Done | Sending::Broken => {}
                    Sending::Length { body, left } => match Pin::new(&mut *body).poll_frame(cx) {
                        Poll::Pending => {}
                        Poll::Ready(None) => {
                            self.sending = Sending::Broken;
                            let error =
                                WireError::BadRequest("a body shorter than its Content-Length");
                            return Poll::Ready(Err(error));
                        }
                        Poll::Ready(Some(Err(error))) => {
                            self.sending = Sending::Broken;
                            return Poll::Ready(Err(WireError::RequestBody(error)));
                        }
                        Poll::Ready(Some(Ok(frame))) => {
                            if let Ok(data) = frame.into_data() {
                                let n = data.len() as u64;
                                if n > *left {
                                    self.sending = Sending::Broken;
                                    let error = WireError::BadRequest(
                                        "a body longer than its Content-Length",
                                    );
                                    return Poll::Ready(Err(error));
                                }
                                *left -= n;
                                wire.data = data;
                                // As hyper: the body is asked whether it ended
                                // (a watched body records it), and is not
                                // polled past its length.
                                let ended = body.is_end_stream();
                                if *left == 0 {
                                    self.sending = Sending::Done;
                                } else if ended {
                                    self.sending = Sending::Broken;
                                    let error = WireError::BadRequest(
                                        "a body shorter than its Content-Length",
                                    );
                                    return Poll::Ready(Err(error));
                                }
                            }
                            // Trailers of a body framed by length cannot go.
                            continue;
                        }
                    },
                    Sending::Chunked { body, trailers } => {
                        match Pin::new(&mut *body).poll_frame(cx) {
                            Poll::Pending => {}
                            Poll::Ready(None) => {
                                wire.tail = b"0\r\n\r\n";
                                self.sending = Sending::Done;
                            }
                            Poll::Ready(Some(Err(error))) => {
                                self.sending = Sending::Broken;
                                return Poll::Ready(Err(WireError::RequestBody(error)));
                            }
                            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                                Ok(data) => {
                                    if !data.is_empty() {
                                        wire.out.extend_from_slice(
                                            format!("{:x}\r\n", data.len()).as_bytes(),
                                        );
                                        wire.data = data;
                                        wire.tail = b"\r\n";
                                    }
                                    if body.is_end_stream() {
                                        wire.tail = if wire.data.is_empty() {
                                            b"0\r\n\r\n"
                                        } else {
                                            b"\r\n0\r\n\r\n"
                                        };
                                        self.sending = Sending::Done;
                                    }
                                    continue;
                                }
                                Err(frame) => {
                                    let fields = frame.into_trailers().ok();
                                    encode_trailers(
                                        &mut wire.out,
                                        trailers.as_deref(),
                                        fields.as_ref(),
                                    );
                                    self.sending = Sending::Done;
                                    continue;
                                }
                            },
                        }
                    }
                }
            }
            if wire.has_out() {
                match wire.poll_write_out(cx) {
                    Poll::Ready(Ok(())) => continue,
                    Poll::Ready(Err(error)) => {
                        self.sending = Sending::Broken;
                        wire.out.clear();
                        wire.out_at = 0;
                        wire.data = Bytes::new();
                        wire.tail = b"";
                        return Poll::Ready(Err(WireError::Io(error)));
                    }
                    Poll::Pending => return Poll::Pending,
                }
            }
            return match self.sending {
                Sending::Done | Sending::Broken => Poll::Ready(Ok(())),
                // Waiting for the request body.
                _ => Poll::Pending,
            };
        }
    }

    /// Sends the request and reads the response head; what is left of the
    /// request body goes on with the response body.
    pub(crate) fn poll_head(&mut self, cx: &mut Context<'_>) -> Poll<Result<Head, WireError>> {
        let mut write_failed = None;
        if let Poll::Ready(Err(error)) = self.poll_send(cx) {
            match error {
                // The upstream may have answered before it stopped reading.
                WireError::Io(error) => write_failed = Some(error),
                other => return Poll::Ready(Err(other)),
            }
        }
        loop {
            if !self.wire.read.is_empty()
                && let Some(head) = self.parse_head()?
            {
                return Poll::Ready(Ok(head));
            }
            match self.wire.poll_fill(cx) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(match write_failed {
                        Some(error) => WireError::Io(error),
                        None => WireError::ClosedBeforeHead,
                    }));
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(error)) => return Poll::Ready(Err(WireError::Io(error))),
                Poll::Pending => {
                    return match write_failed {
                        // Nothing more will come either way.
                        Some(error) => Poll::Ready(Err(WireError::Io(error))),
                        None => Poll::Pending,
                    };
                }
            }
        }
    }

    /// A response head from what has been read, skipping 1xx answers other
    /// than 101; `None` until all of it has come.
    fn parse_head(&mut self) -> Result<Option<Head>, WireError> {
        loop {
            let wire = &mut *self.wire;
            let mut fields = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
            let mut parsed = httparse::Response::new(&mut []);
            let base = wire.read.as_ptr() as usize;
            let len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
                &mut parsed,
                &wire.read,
                &mut fields,
            ) {
                Ok(httparse::Status::Complete(len)) => len,
                Ok(httparse::Status::Partial) if wire.read.len() >= wire.max_head => {
                    return Err(WireError::BadResponse(
                        "a response head over the size limit",
                    ));
                }
                Ok(httparse::Status::Partial) => return Ok(None),
                Err(httparse::Error::TooManyHeaders) => {
                    return Err(WireError::BadResponse("more than 100 header fields"));
                }
                Err(_) => return Err(WireError::BadResponse("not an HTTP/1.1 response head")),
            };
            if len > wire.max_head {
                return Err(WireError::BadResponse(
                    "a response head over the size limit",
                ));
            }
            let code = parsed.code.unwrap_or(0);
            let status = StatusCode::from_u16(code)
                .map_err(|_| WireError::BadResponse("an invalid status code"))?;
            let http10 = parsed.version == Some(0);
            let reason = parsed
                .reason
                .filter(|r| Some(*r) != status.canonical_reason())
                .map(str::to_owned);
            wire.spans.clear();
            for field in parsed.headers.iter() {
                let name = field.name.as_ptr() as usize - base;
                let value = field.value.as_ptr() as usize - base;
                wire.spans.push(Span {
                    name: (name, name + field.name.len()),
                    value: (value, value + field.value.len()),
                });
            }
            let head = wire.read.split_to(len).freeze();
            if status.is_informational() && status != StatusCode::SWITCHING_PROTOCOLS {
                // 100 Continue, 103 Early Hints...: not the answer.
                if wire.read.is_empty() {
                    return Ok(None);
                }
                continue;
            }

            let mut headers = HeaderMap::with_capacity(wire.spans.len());
            let mut keep_alive = !http10;
            let mut close = false;
            let mut length: Option<Option<u64>> = None;
            let mut coded = false;
            let mut chunked = false;
            for span in &wire.spans {
                let name = HeaderName::from_bytes(&head[span.name.0..span.name.1])
                    .map_err(|_| WireError::BadResponse("an invalid header name"))?;
                let value = HeaderValue::from_maybe_shared(head.slice(span.value.0..span.value.1))
                    .map_err(|_| WireError::BadResponse("an invalid header value"))?;
                if name == header::CONTENT_LENGTH {
                    let this = content_length(value.as_bytes());
                    length = Some(match length {
                        Some(before) if before != this => None,
                        _ => this,
                    });
                } else if name == header::TRANSFER_ENCODING {
                    coded = true;
                    chunked = ends_in_chunked(value.as_bytes());
                } else if name == header::CONNECTION {
                    // Once one line says close, a later keep-alive does not undo it.
                    if close || has_token(value.as_bytes(), b"close") {
                        close = true;
                        keep_alive = false;
                    } else if http10 && has_token(value.as_bytes(), b"keep-alive") {
                        keep_alive = true;
                    }
                }
                headers.append(name, value);
            }

            let decode = match code {
                101 => {
                    // Not asked for on this path: the proxy answers 502.
                    keep_alive = false;
                    Decode::Done
                }
                204 | 304 => Decode::Done,
                _ if self.head_request => Decode::Done,
                _ if coded => {
                    if http10 {
                        return Err(WireError::BadResponse(
                            "Transfer-Encoding in an HTTP/1.0 response",
                        ));
                    }
                    if !chunked {
                        keep_alive = false;
                        Decode::Eof
                    } else {
                        if headers.remove(header::CONTENT_LENGTH).is_some() {
                            // Both: chunks frame it (RFC 9112 6.3), and a
                            // connection that sent this is not trusted again.
                            keep_alive = false;
                        }
                        Decode::Chunked(Chunk::Size)
                    }
                }
                _ => match length {
                    Some(Some(0)) => Decode::Done,
                    Some(Some(n)) => Decode::Length(n),
                    Some(None) => return Err(WireError::BadResponse("an invalid Content-Length")),
                    None => {
                        keep_alive = false;
                        Decode::Eof
                    }
                },
            };
            self.keep_alive &= keep_alive;

            let mut response = Response::new(());
            *response.status_mut() = status;
            *response.version_mut() = if http10 {
                Version::HTTP_10
            } else {
                Version::HTTP_11
            };
            *response.headers_mut() = headers;
            if let Some(reason) = reason
                && let Ok(reason) = hyper::ext::ReasonPhrase::try_from(reason.into_bytes())
            {
                response.extensions_mut().insert(reason);
            }
            return Ok(Some(Head { response, decode }));
        }
    }

    /// Takes the response body's framing from its head.
    pub(crate) fn read_body_of(&mut self, head: &mut Head) {
        self.decode = std::mem::replace(&mut head.decode, Decode::Done);
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

    /// The next frame of the response body; the request body goes on too.
    pub(crate) fn poll_body(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, WireError>>> {
        if !matches!(self.sending, Sending::Done | Sending::Broken) || self.wire.has_out() {
            match self.poll_send(cx) {
                // A client's failure ends the response too, as it did in hyper.
                Poll::Ready(Err(
                    error @ (WireError::RequestBody(_) | WireError::BadRequest(_)),
                )) => {
                    self.decode = Decode::Done;
                    self.keep_alive = false;
                    return Poll::Ready(Some(Err(error)));
                }
                // The upstream stopped reading: what it answered still counts.
                Poll::Ready(Err(_)) => self.keep_alive = false,
                _ => {}
            }
        }
        loop {
            let wire = &mut *self.wire;
            match &mut self.decode {
                Decode::Done => return Poll::Ready(None),
                Decode::Length(left) => {
                    if !wire.read.is_empty() {
                        let n = (*left).min(wire.read.len() as u64);
                        *left -= n;
                        if *left == 0 {
                            self.decode = Decode::Done;
                        }
                        let data = wire.read.split_to(n as usize).freeze();
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                }
                Decode::Eof => {
                    if !wire.read.is_empty() {
                        let data = wire.read.split().freeze();
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                }
                Decode::Chunked(state) => {
                    match decode_chunk(state, &mut wire.read, wire.max_head) {
                        Err(error) => {
                            self.decode = Decode::Done;
                            self.keep_alive = false;
                            return Poll::Ready(Some(Err(error)));
                        }
                        Ok(Some(Decoded::Data(data))) => {
                            return Poll::Ready(Some(Ok(Frame::data(data))));
                        }
                        Ok(Some(Decoded::End(trailers))) => {
                            self.decode = Decode::Done;
                            return Poll::Ready(trailers.map(|t| Ok(Frame::trailers(t))));
                        }
                        Ok(None) => {}
                    }
                }
            }
            match ready!(self.wire.poll_fill(cx)) {
                Ok(0) => {
                    if matches!(self.decode, Decode::Eof) {
                        self.decode = Decode::Done;
                        return Poll::Ready(None);
                    }
                    self.decode = Decode::Done;
                    self.keep_alive = false;
                    return Poll::Ready(Some(Err(WireError::BodyCut)));
                }
                Ok(_) => {}
                Err(error) => {
                    self.decode = Decode::Done;
                    self.keep_alive = false;
                    return Poll::Ready(Some(Err(WireError::Io(error))));
                }
            }
        }
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

enum Framing {
    /// No body; `keep_length`: the head's `Content-Length: 0` stays.
    None { keep_length: bool },
    /// `n` bytes; `own_header`: the head had no `Content-Length`.
    Length { n: u64, own_header: bool },
    /// Chunks.
    Chunked,
}

/// A `Content-Length` value: digits, or a list of equal ones.
fn content_length(value: &[u8]) -> Option<u64> {
    let mut length = None;
    for item in value.split(|&b| b == b',') {
        let item = item.trim_ascii();
        if item.is_empty() || item.len() > 19 || !item.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let n = item.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
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

/// The fields a request's `Trailer` header names that may be trailers.
fn allowed_trailers(headers: &HeaderMap) -> Vec<HeaderName> {
    headers
        .get_all(header::TRAILER)
        .iter()
        .flat_map(|value| value.as_bytes().split(|&b| b == b','))
        .filter_map(|name| HeaderName::from_bytes(name.trim_ascii()).ok())
        .filter(|name| {
            !matches!(
                *name,
                header::AUTHORIZATION
                    | header::CACHE_CONTROL
                    | header::CONTENT_ENCODING
                    | header::CONTENT_LENGTH
                    | header::CONTENT_RANGE
                    | header::CONTENT_TYPE
                    | header::HOST
                    | header::MAX_FORWARDS
                    | header::SET_COOKIE
                    | header::TRAILER
                    | header::TRANSFER_ENCODING
                    | header::TE
            )
        })
        .collect()
}

/// The last chunk, with the trailers that were declared.
fn encode_trailers(out: &mut Vec<u8>, allowed: Option<&[HeaderName]>, fields: Option<&HeaderMap>) {
    out.extend_from_slice(b"0\r\n");
    if let (Some(allowed), Some(fields)) = (allowed, fields) {
        for (name, value) in fields {
            if allowed.contains(name) {
                out.extend_from_slice(name.as_str().as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(value.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// What a step of chunked decoding gave.
enum Decoded {
    Data(Bytes),
    /// The last chunk, and its trailers if it had any.
    End(Option<HeaderMap>),
}

/// Decodes from `read` as far as it goes: `None` when more must be read.
fn decode_chunk(
    state: &mut Chunk,
    read: &mut BytesMut,
    max_trailers: usize,
) -> Result<Option<Decoded>, WireError> {
    loop {
        match *state {
            Chunk::Size => {
                let window = &read[..read.len().min(MAX_CHUNK_LINE)];
                let Some(end) = window.iter().position(|&b| b == b'\n') else {
                    if read.len() >= MAX_CHUNK_LINE {
                        return Err(WireError::BadResponse("a chunk size line over 4 KiB"));
                    }
                    return Ok(None);
                };
                let size = chunk_size(&read[..end])?;
                read.advance(end + 1);
                *state = if size == 0 {
                    Chunk::Trailers
                } else {
                    Chunk::Data(size)
                };
            }
            Chunk::Data(left) => {
                if read.is_empty() {
                    return Ok(None);
                }
                let n = left.min(read.len() as u64);
                *state = if n == left {
                    Chunk::DataEnd
                } else {
                    Chunk::Data(left - n)
                };
                return Ok(Some(Decoded::Data(read.split_to(n as usize).freeze())));
            }
            Chunk::DataEnd => {
                if read.len() < 2 {
                    return Ok(None);
                }
                if read[..2] != *b"\r\n" {
                    return Err(WireError::BadResponse("chunk data not ended by CRLF"));
                }
                read.advance(2);
                *state = Chunk::Size;
            }
            Chunk::Trailers => {
                let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
                match httparse::parse_headers(read, &mut fields) {
                    Ok(httparse::Status::Complete((len, fields))) => {
                        let trailers = if fields.is_empty() {
                            None
                        } else {
                            let mut map = HeaderMap::with_capacity(fields.len());
                            for field in fields {
                                let name = HeaderName::from_bytes(field.name.as_bytes()).map_err(
                                    |_| WireError::BadResponse("an invalid trailer name"),
                                )?;
                                let value = HeaderValue::from_bytes(field.value).map_err(|_| {
                                    WireError::BadResponse("an invalid trailer value")
                                })?;
                                map.append(name, value);
                            }
                            Some(map)
                        };
                        read.advance(len);
                        return Ok(Some(Decoded::End(trailers)));
                    }
                    Ok(httparse::Status::Partial) if read.len() >= max_trailers => {
                        return Err(WireError::BadResponse("trailers over the head size limit"));
                    }
                    Ok(httparse::Status::Partial) => return Ok(None),
                    Err(_) => return Err(WireError::BadResponse("invalid trailers")),
                }
            }
        }
    }
}

/// A chunk-size line without its LF: hex digits, then optional blanks and
/// extensions of visible characters, then CR.
fn chunk_size(line: &[u8]) -> Result<u64, WireError> {
    let bad = || WireError::BadResponse("an invalid chunk size line");
    let line = line.strip_suffix(b"\r").ok_or_else(bad)?;
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 || digits > 16 {
        return Err(bad());
    }
    let size = line[..digits].iter().fold(0u64, |n, &d| {
        n << 4 | u64::from((d as char).to_digit(16).unwrap_or(0))
    });
    let rest = &line[digits..];
    let rest = &rest[rest
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count()..];
    match rest.first() {
        None => Ok(size),
        Some(b';')
            if rest
                .iter()
                .all(|&b| b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80) =>
        {
            Ok(size)
        }
        Some(_) => Err(bad()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::future::poll_fn;
    use std::time::Duration;

    use http_body_util::StreamBody;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// A connection to a server on loopback that reads a request until it
    /// ends with `until`, answers `answer`, and closes if `close`. Gives
    /// back what the server received.
    async fn upstream(
        until: &'static str,
        answer: &'static [u8],
        close: bool,
    ) -> (Box<Wire>, tokio::task::JoinHandle<String>) {
        upstream_in_pieces(until, vec![answer], close).await
    }

    /// As `upstream`, with the answer written in `pieces`, a pause after
    /// each, so that the client reads it in as many parts.
    async fn upstream_in_pieces(
        until: &'static str,
        pieces: Vec<&'static [u8]>,
        close: bool,
    ) -> (Box<Wire>, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            while !got.ends_with(until.as_bytes()) {
                let n = tokio::time::timeout(Duration::from_secs(5), socket.read(&mut buf))
                    .await
                    .expect("the request within 5 s")
                    .unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            for piece in pieces {
                // The client may have given up (a refused head): not an error here.
                if socket.write_all(piece).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
            if close {
                let _ = socket.shutdown().await;
            } else {
                // Held open until the client is done.
                let _ = socket.read(&mut buf).await;
            }
            String::from_utf8(got).unwrap()
        });
        let client = TcpStream::connect(addr).await.unwrap();
        (
            Box::new(Wire::new(UpstreamStream::Plain(client), 1024)),
            server,
        )
    }

    struct Answer {
        response: Response<()>,
        body: Vec<u8>,
        trailers: Option<HeaderMap>,
        reusable: bool,
    }

    async fn exchange(wire: Box<Wire>, request: Request<Body>) -> Result<Answer, WireError> {
        let mut exchange = Exchange::start(wire, request).map_err(|(_, e)| e)?;
        let mut head = poll_fn(|cx| exchange.poll_head(cx)).await?;
        exchange.read_body_of(&mut head);
        let mut body = Vec::new();
        let mut trailers = None;
        while let Some(frame) = poll_fn(|cx| exchange.poll_body(cx)).await {
            match frame?.into_data() {
                Ok(data) => body.extend_from_slice(&data),
                Err(frame) => trailers = frame.into_trailers().ok(),
            }
        }
        Ok(Answer {
            response: head.response,
            body,
            trailers,
            reusable: exchange.into_reusable().is_some(),
        })
    }

    fn get(path: &str) -> Request<Body> {
        Request::get(path)
            .header("host", "a.test")
            .body(Body::empty())
            .unwrap()
    }

    fn streamed(parts: &[&'static str], trailers: Option<HeaderMap>) -> Body {
        let mut frames: Vec<Result<Frame<Bytes>, BoxError>> = parts
            .iter()
            .map(|p| Ok(Frame::data(Bytes::from_static(p.as_bytes()))))
            .collect();
        frames.extend(trailers.map(|t| Ok(Frame::trailers(t))));
        Body::new(StreamBody::new(futures_util::stream::iter(frames)))
    }

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

    #[tokio::test]
    async fn requests_are_framed_as_hyper_framed_them() {
        let cases: Vec<(&str, Request<Body>, &'static str, &str)> = vec![
            (
                "an empty GET",
                get("/x?y"),
                "\r\n\r\n",
                "GET /x?y HTTP/1.1\r\nhost: a.test\r\n\r\n",
            ),
            (
                "a body of known size gets its length",
                Request::post("/").body(Body::full("hello")).unwrap(),
                "hello",
                "POST / HTTP/1.1\r\ncontent-length: 5\r\n\r\nhello",
            ),
            (
                "a declared length is kept and sent exactly",
                Request::put("/")
                    .header("content-length", "5")
                    .body(streamed(&["he", "llo"], None))
                    .unwrap(),
                "hello",
                "PUT / HTTP/1.1\r\ncontent-length: 5\r\n\r\nhello",
            ),
            (
                "an unknown length is chunked, empty frames skipped",
                Request::post("/")
                    .body(streamed(&["ab", "", "cde"], None))
                    .unwrap(),
                "0\r\n\r\n",
                "POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n",
            ),
            (
                "a coding not ending in chunked gets chunked, and the length goes",
                Request::post("/")
                    .header("transfer-encoding", "gzip")
                    .header("content-length", "3")
                    .body(streamed(&["abc"], None))
                    .unwrap(),
                "0\r\n\r\n",
                "POST / HTTP/1.1\r\ntransfer-encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            ),
            (
                "only declared trailers that may be trailers go",
                Request::post("/")
                    .header("trailer", "x-sum, content-type")
                    .body(streamed(
                        &["abc"],
                        Some({
                            let mut t = HeaderMap::new();
                            t.insert("x-sum", HeaderValue::from_static("7"));
                            t.insert("x-other", HeaderValue::from_static("1"));
                            t.insert("content-type", HeaderValue::from_static("text/plain"));
                            t
                        }),
                    ))
                    .unwrap(),
                "\r\n\r\n3\r\nabc\r\n0\r\nx-sum: 7\r\n\r\n",
                "POST / HTTP/1.1\r\ntrailer: x-sum, content-type\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nx-sum: 7\r\n\r\n",
            ),
            (
                "a GET of unknown length goes without its body",
                Request::get("/").body(streamed(&["abc"], None)).unwrap(),
                "\r\n\r\n",
                "GET / HTTP/1.1\r\n\r\n",
            ),
            (
                "an ended body drops its coding and keeps a zero length",
                Request::post("/")
                    .header("content-length", "0")
                    .header("transfer-encoding", "chunked")
                    .body(Body::empty())
                    .unwrap(),
                "\r\n\r\n",
                "POST / HTTP/1.1\r\ncontent-length: 0\r\n\r\n",
            ),
        ];
        for (what, request, until, expected) in cases {
            let (wire, server) = upstream(until, OK, false).await;
            let answer = exchange(wire, request).await.unwrap();
            assert_eq!(answer.body, b"ok", "{what}");
            assert!(answer.reusable, "{what}");
            // The connection was dropped with the answer: the server is done.
            assert_eq!(server.await.unwrap(), expected, "{what}");
        }
    }

    /// What a response should give: status, body, trailer `x-sum`, reuse.
    struct Expect {
        status: u16,
        body: &'static str,
        x_sum: Option<&'static str>,
        reusable: bool,
    }

    const fn ok(status: u16, body: &'static str, reusable: bool) -> Expect {
        Expect {
            status,
            body,
            x_sum: None,
            reusable,
        }
    }

    #[tokio::test]
    async fn responses_are_framed_by_rfc_9112() {
        // What, the method, the answer's pieces, whether the upstream closes after.
        type Case = (&'static str, &'static str, Vec<&'static [u8]>, bool, Expect);
        let cases: Vec<Case> = vec![
            (
                "a length read in several parts",
                "GET",
                vec![b"HTTP/1.1 200 OK\r\nContent-Le", b"ngth: 11\r\n\r\nhello", b" world"],
                false,
                ok(200, "hello world", true),
            ),
            (
                "chunks cut anywhere, with extensions and trailers",
                "GET",
                vec![
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r",
                    b"\nhello\r",
                    b"\n6 \r\n world\r\n0\r\nx-sum: 42\r",
                    b"\n\r\n",
                ],
                false,
                Expect {
                    status: 200,
                    body: "hello world",
                    x_sum: Some("42"),
                    reusable: true,
                },
            ),
            (
                "1xx answers before the answer are skipped",
                "GET",
                vec![
                    b"HTTP/1.1 100 Continue\r\n\r\n",
                    b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx",
                ],
                false,
                ok(201, "x", true),
            ),
            (
                "no body after a HEAD, whatever its length says",
                "HEAD",
                vec![b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"],
                false,
                ok(200, "", true),
            ),
            (
                "no body in a 204",
                "GET",
                vec![b"HTTP/1.1 204 No Content\r\n\r\n"],
                false,
                ok(204, "", true),
            ),
            (
                "no body in a 304, whatever its length says",
                "GET",
                vec![b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n"],
                false,
                ok(304, "", true),
            ),
            (
                "neither field: the body ends with the connection",
                "GET",
                vec![b"HTTP/1.1 200 OK\r\n\r\nabc", b"def"],
                true,
                ok(200, "abcdef", false),
            ),
            (
                "Connection: close is not reused",
                "GET",
                vec![b"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 2\r\n\r\nok"],
                false,
                ok(200, "ok", false),
            ),
            (
                "a later keep-alive does not undo a close",
                "GET",
                vec![b"HTTP/1.1 200 OK\r\nConnection: close\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"],
                false,
                ok(200, "ok", false),
            ),
            (
                "HTTP/1.0 with keep-alive is reused",
                "GET",
                vec![b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok"],
                false,
                ok(200, "ok", true),
            ),
            (
                "HTTP/1.0 without keep-alive is not",
                "GET",
                vec![b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"],
                false,
                ok(200, "ok", false),
            ),
            (
                "chunks win over a length, and the connection is not trusted again",
                "GET",
                vec![b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"],
                false,
                ok(200, "ok", false),
            ),
            (
                "a coding not ending in chunked reads to the close",
                "GET",
                vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzz"],
                true,
                ok(200, "zz", false),
            ),
            (
                "equal lengths in a list are one length",
                "GET",
                vec![b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok"],
                false,
                ok(200, "ok", true),
            ),
            (
                "bytes after the response: the connection is not reused",
                "GET",
                vec![b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n"],
                false,
                ok(200, "ok", false),
            ),
        ];
        for (what, method, pieces, close, expect) in cases {
            let (wire, _server) = upstream_in_pieces("\r\n\r\n", pieces, close).await;
            let request = Request::builder()
                .method(method)
                .uri("/")
                .header("host", "a.test")
                .body(Body::empty())
                .unwrap();
            let answer = exchange(wire, request)
                .await
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(answer.response.status().as_u16(), expect.status, "{what}");
            assert_eq!(
                String::from_utf8(answer.body).unwrap(),
                expect.body,
                "{what}"
            );
            let x_sum = answer.trailers.as_ref().and_then(|t| t.get("x-sum"));
            assert_eq!(x_sum.map(|v| v.to_str().unwrap()), expect.x_sum, "{what}");
            assert_eq!(answer.reusable, expect.reusable, "{what}");
        }
    }

    #[tokio::test]
    async fn the_response_head_keeps_its_fields_and_drops_a_length_beside_chunks() {
        let (wire, _server) = upstream(
            "\r\n\r\n",
            b"HTTP/1.1 299 Fine Thanks\r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            false,
        )
        .await;
        let answer = exchange(wire, get("/")).await.unwrap();
        let head = &answer.response;
        let values: Vec<_> = head.headers().get_all("x-a").iter().collect();
        assert_eq!(values, ["1", "2"]);
        assert!(head.headers().get("content-length").is_none());
        assert_eq!(head.headers()["transfer-encoding"], "chunked");
        assert_eq!(
            head.extensions()
                .get::<hyper::ext::ReasonPhrase>()
                .map(|r| r.as_bytes()),
            Some(&b"Fine Thanks"[..])
        );
    }

    #[tokio::test]
    async fn bad_responses_are_refused_with_their_reason() {
        let long_head: &'static [u8] = {
            let mut head = b"HTTP/1.1 200 OK\r\nx-long: ".to_vec();
            head.extend(std::iter::repeat_n(b'a', 1100));
            head.extend_from_slice(b"\r\n\r\n");
            head.leak()
        };
        let many_fields: &'static [u8] = {
            let mut head = b"HTTP/1.1 200 OK\r\n".to_vec();
            for i in 0..101 {
                head.extend_from_slice(format!("x-{i}: 1\r\n").as_bytes());
            }
            head.extend_from_slice(b"\r\n");
            head.leak()
        };
        let cases: Vec<(&str, Vec<&'static [u8]>, bool, &str)> = vec![
            (
                "garbage",
                vec![b"HELLO THERE\r\n\r\n"],
                false,
                "invalid response from the upstream: not an HTTP/1.1 response head",
            ),
            (
                "a head over the limit",
                vec![long_head],
                false,
                "invalid response from the upstream: a response head over the size limit",
            ),
            (
                "too many fields",
                vec![many_fields],
                false,
                "invalid response from the upstream: more than 100 header fields",
            ),
            (
                "lengths that differ",
                vec![b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"],
                false,
                "invalid response from the upstream: an invalid Content-Length",
            ),
            (
                "a length in a list that differs",
                vec![b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nok"],
                false,
                "invalid response from the upstream: an invalid Content-Length",
            ),
            (
                "a length that is not digits",
                vec![b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok"],
                false,
                "invalid response from the upstream: an invalid Content-Length",
            ),
            (
                "HTTP/1.0 with a coding",
                vec![b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"],
                false,
                "invalid response from the upstream: Transfer-Encoding in an HTTP/1.0 response",
            ),
            (
                "a folded field",
                vec![b"HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 0\r\n\r\n"],
                false,
                "invalid response from the upstream: not an HTTP/1.1 response head",
            ),
            (
                "a chunk size that is not hex",
                vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"],
                false,
                "invalid response from the upstream: an invalid chunk size line",
            ),
            (
                "a chunk size of 17 digits",
                vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n"],
                false,
                "invalid response from the upstream: an invalid chunk size line",
            ),
            (
                "a chunk size line ended by LF alone",
                vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\r\n0\r\n\r\n"],
                false,
                "invalid response from the upstream: an invalid chunk size line",
            ),
            (
                "chunk data longer than its size",
                vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokk\r\n0\r\n\r\n"],
                false,
                "invalid response from the upstream: chunk data not ended by CRLF",
            ),
            (
                "a body cut short",
                vec![b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"],
                true,
                "upstream response body cut short",
            ),
            (
                "chunks cut short",
                vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"],
                true,
                "upstream response body cut short",
            ),
            (
                "a close before the head",
                vec![b"HTTP/1.1 200 OK\r\nContent-"],
                true,
                "upstream closed the connection before the response head",
            ),
            (
                "a close with nothing",
                vec![],
                true,
                "upstream closed the connection before the response head",
            ),
        ];
        for (what, pieces, close, message) in cases {
            let (wire, _server) = upstream_in_pieces("\r\n\r\n", pieces, close).await;
            let error = match exchange(wire, get("/")).await {
                Ok(_) => panic!("{what}: answered"),
                Err(error) => error,
            };
            assert_eq!(error.to_string(), message, "{what}");
        }
    }

    #[tokio::test]
    async fn trailers_past_the_head_limit_are_refused() {
        let trailers: &'static [u8] = {
            let mut body =
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nx-long: ".to_vec();
            body.extend(std::iter::repeat_n(b'a', 1100));
            body.leak()
        };
        let (wire, _server) = upstream("\r\n\r\n", trailers, false).await;
        let error = exchange(wire, get("/")).await.err().expect("refused");
        assert_eq!(
            error.to_string(),
            "invalid response from the upstream: trailers over the head size limit"
        );
        assert!(error.is_final());
    }

    #[tokio::test]
    async fn an_idle_connection_is_unusable_once_closed_or_sent_to() {
        // Open and quiet: usable.
        let (mut wire, server) = upstream("\r\n\r\n", OK, false).await;
        assert!(!wire.is_unusable());
        drop(wire);
        server.abort();

        // Closed by the upstream.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (socket, _) = listener.accept().await.unwrap();
        drop(socket);
        let mut wire = Wire::new(UpstreamStream::Plain(client), 1024);
        let mut closed = false;
        for _ in 0..100 {
            if wire.is_unusable() {
                closed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(closed, "a closed connection is seen as unusable");

        // Sent bytes nobody asked for.
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut socket, _) = listener.accept().await.unwrap();
        socket
            .write_all(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
            .await
            .unwrap();
        let mut wire = Wire::new(UpstreamStream::Plain(client), 1024);
        let mut spoke = false;
        for _ in 0..100 {
            if wire.is_unusable() {
                spoke = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(spoke, "unasked-for bytes make a connection unusable");
    }

    #[tokio::test]
    async fn a_body_that_does_not_match_its_length_is_refused_and_not_reused() {
        let cases: Vec<(&str, Body, &str)> = vec![
            (
                "longer",
                streamed(&["abc", "def"], None),
                "request not sendable: a body longer than its Content-Length",
            ),
            (
                "shorter",
                streamed(&["ab"], None),
                "request not sendable: a body shorter than its Content-Length",
            ),
        ];
        for (what, body, message) in cases {
            let (wire, _server) = upstream("never", OK, false).await;
            let request = Request::post("/")
                .header("content-length", "4")
                .body(body)
                .unwrap();
            let error = exchange(wire, request)
                .await
                .err()
                .unwrap_or_else(|| panic!("{what}: sent"));
            assert_eq!(error.to_string(), message, "{what}");
            assert!(error.is_final(), "{what}");
        }
    }
}
