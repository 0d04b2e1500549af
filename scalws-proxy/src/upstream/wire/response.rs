//! The answer on the way back: the response head (1xx skipped, framing
//! and reuse read from its fields), then its body by length, by chunks or
//! until the close, while what is left of the request goes on.

use std::mem::MaybeUninit;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{Response, StatusCode, Version};
use http_body::Frame;

use super::chunked::{Chunk, Decoded, decode_chunk};
use super::{
    Decode, Exchange, MAX_HEADERS, SPARE_FIELDS, Sending, Span, WireError, content_length,
    ends_in_chunked, has_token,
};

/// The name of the head's field at `at`, written `raw`: the last head's
/// name at that place when it was written the same way (an upstream's
/// fields come in the same order and case answer after answer, and
/// comparing bytes costs less than parsing a name), else parsed and
/// remembered there.
#[inline]
fn field_name(
    known: &mut Vec<(Box<[u8]>, HeaderName)>,
    at: usize,
    raw: &[u8],
) -> Result<HeaderName, WireError> {
    if let Some((written, name)) = known.get(at)
        && **written == *raw
    {
        return Ok(name.clone());
    }
    let name = HeaderName::from_bytes(raw)
        .map_err(|_| WireError::BadResponse("an invalid header name"))?;
    if let Some(slot) = known.get_mut(at) {
        *slot = (raw.into(), name.clone());
    } else if at == known.len() && at < SPARE_FIELDS {
        known.push((raw.into(), name.clone()));
    }
    Ok(name)
}

impl Exchange {
    /// Sends the request and reads the response head, and from it how the
    /// body is framed; what is left of the request body goes on with the
    /// response body.
    pub(crate) fn poll_head(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Response<()>, WireError>> {
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
    /// than 101, with its body's framing set; `None` until all of it has come.
    fn parse_head(&mut self) -> Result<Option<Response<()>>, WireError> {
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

            let mut headers = std::mem::take(&mut wire.spare);
            headers.reserve(wire.spans.len());
            // An HTTP/1.0 upstream is never sent another request on this
            // connection: the next one could be chunked, which it may not
            // read as such (RFC 9112 6.1), and the chunks would be taken
            // for a request of their own.
            let mut keep_alive = !http10;
            let mut length: Option<Option<u64>> = None;
            let mut coded = false;
            let mut chunked = false;
            for (at, span) in wire.spans.iter().enumerate() {
                let name = field_name(&mut wire.names, at, &head[span.name.0..span.name.1])?;
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
                    let options = value.as_bytes();
                    if has_token(options, b"close") {
                        keep_alive = false;
                    }
                    // The usual `Connection: keep-alive` (or `close`) is about
                    // this connection alone, which the client keeps or
                    // drops: not one of the answer's fields. One that lists
                    // more stays, for the proxy to remove what it names.
                    if options.eq_ignore_ascii_case(b"keep-alive")
                        || options.eq_ignore_ascii_case(b"close")
                    {
                        continue;
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
            self.decode = decode;

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
            return Ok(Some(response));
        }
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
}
