//! The one body type that flows through a ScalWS stack, in both directions.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;

use crate::error::{BodyTooLarge, BoxError};

/// A request or response body.
///
/// A closed set of shapes so the common ones (empty, one buffer, a client's
/// request body) cost no allocation or dynamic dispatch; anything else is boxed.
pub struct Body {
    kind: Kind,
}

enum Kind {
    Empty,
    Full(Option<Bytes>),
    /// A request body from a client, cut off with [`BodyTooLarge`] past `remaining`.
    Incoming {
        body: Incoming,
        remaining: u64,
    },
    Boxed(UnsyncBoxBody<Bytes, BoxError>),
}

impl Body {
    /// An empty body.
    pub const fn empty() -> Self {
        Self { kind: Kind::Empty }
    }

    /// A body of one buffer.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        let bytes = bytes.into();
        if bytes.is_empty() {
            return Self::empty();
        }
        Self {
            kind: Kind::Full(Some(bytes)),
        }
    }

    /// Wraps any body whose data is [`Bytes`].
    pub fn new<B>(body: B) -> Self
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        Self {
            kind: Kind::Boxed(body.map_err(Into::into).boxed_unsync()),
        }
    }

    /// A client's request body, limited to `limit` bytes: past it the body
    /// yields [`BodyTooLarge`], which the server answers with 413.
    pub fn incoming(body: Incoming, limit: u64) -> Self {
        Self {
            kind: Kind::Incoming {
                body,
                remaining: limit,
            },
        }
    }
}

impl Default for Body {
    fn default() -> Self {
        Self::empty()
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            Kind::Empty => "empty",
            Kind::Full(_) => "full",
            Kind::Incoming { .. } => "incoming",
            Kind::Boxed(_) => "boxed",
        };
        f.debug_struct("Body").field("kind", &kind).finish()
    }
}

impl From<Bytes> for Body {
    fn from(bytes: Bytes) -> Self {
        Self::full(bytes)
    }
}

impl From<&'static str> for Body {
    fn from(s: &'static str) -> Self {
        Self::full(Bytes::from_static(s.as_bytes()))
    }
}

impl From<String> for Body {
    fn from(s: String) -> Self {
        Self::full(Bytes::from(s))
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut self.get_mut().kind {
            Kind::Empty => Poll::Ready(None),
            Kind::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Kind::Incoming { body, remaining } => {
                match std::task::ready!(Pin::new(body).poll_frame(cx)) {
                    None => Poll::Ready(None),
                    Some(Err(e)) => Poll::Ready(Some(Err(e.into()))),
                    Some(Ok(frame)) => {
                        if let Some(data) = frame.data_ref() {
                            let len = data.len() as u64;
                            if len > *remaining {
                                *remaining = 0;
                                return Poll::Ready(Some(Err(BodyTooLarge.into())));
                            }
                            *remaining -= len;
                        }
                        Poll::Ready(Some(Ok(frame)))
                    }
                }
            }
            Kind::Boxed(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Empty => true,
            Kind::Full(bytes) => bytes.is_none(),
            Kind::Incoming { body, .. } => body.is_end_stream(),
            Kind::Boxed(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Empty => SizeHint::with_exact(0),
            Kind::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            Kind::Incoming { body, .. } => body.size_hint(),
            Kind::Boxed(body) => body.size_hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn full_body_yields_its_bytes_once() {
        let body = Body::full("hello");
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(5));
        let bytes = body.collect().await.map(|c| c.to_bytes());
        assert_eq!(bytes.ok(), Some(Bytes::from_static(b"hello")));
    }

    #[tokio::test]
    async fn empty_full_is_empty() {
        let body = Body::full(Bytes::new());
        assert!(http_body::Body::is_end_stream(&body));
    }
}
