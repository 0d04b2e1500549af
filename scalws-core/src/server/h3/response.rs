//! Sending a response on an HTTP/3 stream: head, body frames as they come,
//! trailers, end of stream.

use std::pin::pin;

use bytes::Bytes;
use http::{HeaderMap, Response, header};
use http_body_util::BodyExt;

use crate::error::BoxError;

pub(super) type SendHalf = ::h3::server::RequestStream<h3_quinn::SendStream<Bytes>, Bytes>;

/// The sending half of a request stream. Unless a whole response went out,
/// dropping it resets the stream: a quinn stream dropped as is would end
/// cleanly, and a client would take a cut-off body for a whole one.
pub(super) struct ResponseStream {
    send: SendHalf,
    finished: bool,
}

impl ResponseStream {
    pub(super) fn new(send: SendHalf) -> Self {
        Self {
            send,
            finished: false,
        }
    }

    /// Sends the head, then (with `with_body`) each body frame as the body
    /// yields it, then ends the stream.
    pub(super) async fn send<B>(
        &mut self,
        response: Response<B>,
        with_body: bool,
    ) -> Result<(), BoxError>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let (parts, body) = response.into_parts();
        self.send_head(Response::from_parts(parts, ())).await?;
        if with_body {
            let mut body = pin!(body);
            while let Some(frame) = body.as_mut().frame().await {
                let frame = frame.map_err(Into::into)?;
                match frame.into_data() {
                    Ok(data) if data.is_empty() => {}
                    Ok(data) => self.send.send_data(data).await?,
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            self.send.send_trailers(trailers).await?;
                            break;
                        }
                    }
                }
            }
        }
        self.send.finish().await?;
        self.finished = true;
        Ok(())
    }

    /// Sends the response head, without HTTP/1.1's connection fields.
    pub(super) async fn send_head(&mut self, head: Response<()>) -> Result<(), BoxError> {
        let (mut parts, ()) = head.into_parts();
        remove_connection_headers(&mut parts.headers);
        self.send
            .send_response(Response::from_parts(parts, ()))
            .await?;
        Ok(())
    }

    /// The stream, for a tunnel to send on after the head.
    pub(super) fn sender(&mut self) -> &mut SendHalf {
        &mut self.send
    }

    /// Notes that the stream was ended whole (see `Drop`).
    pub(super) fn finished(&mut self) {
        self.finished = true;
    }

    /// Resets the stream with `code` now (rather than `Drop`'s).
    pub(super) fn cancel(&mut self, code: ::h3::error::Code) {
        self.send.stop_stream(code);
        self.finished = true;
    }
}

impl Drop for ResponseStream {
    fn drop(&mut self) {
        if !self.finished {
            self.send.stop_stream(::h3::error::Code::H3_INTERNAL_ERROR);
        }
    }
}

/// HTTP/3 has no connection-specific header fields; a message carrying one
/// is malformed (RFC 9114 4.2), and clients reject it.
fn remove_connection_headers(headers: &mut HeaderMap) {
    for name in [
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
    for name in ["keep-alive", "proxy-connection"] {
        headers.remove(name);
    }
}
