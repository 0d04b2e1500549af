//! The request on the way out: its head, and its body framed by length or
//! in chunks (with the trailers its `Trailer` header declares).

use std::io::Write as _;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Method;
use http::header::{self, HeaderMap, HeaderName};
use http::request::Parts;
use http_body::Body as _;
use scalws_core::Body;

use super::{
    Decode, Exchange, Sending, Wire, WireError, content_length, ends_in_chunked, has_token,
};
use crate::upstream::Forwarding;
use crate::upstream::forwarding::X_FORWARDED_FOR;

impl Exchange {
    /// Writes a request's head (`parts`) into the connection's buffer
    /// (nothing is sent yet) and takes its body. The head must be
    /// origin-form with its Host; it goes as HTTP/1.1, with `forwarding`'s
    /// fields in place of the request's own. It is borrowed, not taken, so
    /// that the caller still has it to send again. A request that cannot be
    /// framed gives its connection back with the error.
    pub(crate) fn start(
        mut wire: Box<Wire>,
        parts: &Parts,
        body: Body,
        forwarding: Option<&Forwarding>,
    ) -> Result<Self, (Box<Wire>, WireError)> {
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
        let mut client_for = false;
        for (name, value) in headers {
            if *name == header::CONTENT_LENGTH && !keep_length {
                continue;
            }
            if let Some(forwarding) = forwarding
                && forwarding.replaces(name)
            {
                client_for |= *name == X_FORWARDED_FOR;
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
        if let Some(forwarding) = forwarding {
            forwarding.write(out, headers, client_for);
        }
        let sending = match framing {
            Framing::None { .. } => Sending::Done,
            Framing::Length { n, own_header } => {
                if own_header {
                    // Writing into a Vec cannot fail.
                    let _ = write!(out, "content-length: {n}\r\n");
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
    pub(super) fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), WireError>> {
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
                                        // Into the buffer, not a string of its own.
                                        let _ = write!(wire.out, "{:x}\r\n", data.len());
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
}

enum Framing {
    /// No body; `keep_length`: the head's `Content-Length: 0` stays.
    None { keep_length: bool },
    /// `n` bytes; `own_header`: the head had no `Content-Length`.
    Length { n: u64, own_header: bool },
    /// Chunks.
    Chunked,
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
