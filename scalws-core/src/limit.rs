//! [`RequestLimitsLayer`]: the server's request limits as a layer, for a
//! ScalWS stack mounted in a server that is not ScalWS's own (an axum
//! `Router`, a hyper server of the embedder's). The ScalWS server enforces
//! the same limits at its connection edge, so a stack it serves needs no layer.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::FutureExt;
use http::{HeaderValue, Request, Response, StatusCode, Version, header};
use http_body::{Frame, SizeHint};
use tower::{Layer, Service};

use crate::error::{BodyTooLarge, BoxError, error_response};
use crate::{Body, Limits};

/// Enforces, per request: at most `max_headers` header fields and
/// `max_header_bytes` of them (431), a declared `Content-Length` of at most
/// `max_request_body` (413, before the inner service is called), a body that
/// streams past it (the inner service reads [`BodyTooLarge`], which ScalWS
/// services answer 413); and turns a panic of the inner service into 500.
/// The body, whatever its type, becomes a [`Body`].
///
/// What a layer cannot do is left to the server it runs in: header read and
/// keep-alive timeouts, connection counts, HTTP/2 stream limits.
#[derive(Clone, Copy, Debug)]
pub struct RequestLimitsLayer {
    max_request_body: u64,
    max_headers: usize,
    max_header_bytes: usize,
}

impl RequestLimitsLayer {
    /// The request limits of `limits` (the other fields are the server's).
    pub fn new(limits: &Limits) -> Self {
        Self {
            max_request_body: limits.max_request_body,
            max_headers: limits.max_headers,
            max_header_bytes: limits.max_header_bytes,
        }
    }
}

impl<S> Layer<S> for RequestLimitsLayer {
    type Service = RequestLimits<S>;

    fn layer(&self, inner: S) -> RequestLimits<S> {
        RequestLimits {
            limits: *self,
            inner,
        }
    }
}

/// Made by [`RequestLimitsLayer`].
#[derive(Clone, Debug)]
pub struct RequestLimits<S> {
    limits: RequestLimitsLayer,
    inner: S,
}

impl<S, B> Service<Request<B>> for RequestLimits<S>
where
    S: Service<Request<Body>, Response = Response<Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let limits = &self.limits;
        if let Some(status) = refused_head(limits, &request) {
            let response = refusal(status, request.version());
            return Box::pin(async move { Ok(response) });
        }
        let request = request.map(|body| {
            Body::new(LimitedBody {
                inner: body,
                remaining: limits.max_request_body,
            })
        });
        // A panic in `call` itself (where a ScalWS stack does its routing)
        // as well as one while its future runs becomes 500.
        let inner = &mut self.inner;
        let call = match std::panic::catch_unwind(AssertUnwindSafe(|| inner.call(request))) {
            Ok(future) => AssertUnwindSafe(future).catch_unwind(),
            Err(_panic) => return Box::pin(async { Ok(panicked()) }),
        };
        Box::pin(async move {
            match call.await {
                Ok(result) => result,
                Err(_panic) => Ok(panicked()),
            }
        })
    }
}

#[cold]
#[inline(never)]
fn panicked() -> Response<Body> {
    tracing::error!("request handler panicked; answered 500");
    error_response(StatusCode::INTERNAL_SERVER_ERROR)
}

/// The status for a request head past a limit, if it is.
fn refused_head<B>(limits: &RequestLimitsLayer, request: &Request<B>) -> Option<StatusCode> {
    let headers = request.headers();
    if headers.len() > limits.max_headers {
        return Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    }
    // Each field as HTTP/1.1 writes it: `name: value\r\n`.
    let bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if bytes > limits.max_header_bytes {
        return Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limits.max_request_body) {
        return Some(StatusCode::PAYLOAD_TOO_LARGE);
    }
    None
}

#[cold]
#[inline(never)]
fn refusal(status: StatusCode, version: Version) -> Response<Body> {
    let mut response = error_response(status);
    if version < Version::HTTP_2 {
        // The unread body makes the connection useless for another request.
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

pin_project_lite::pin_project! {
    /// A body cut off with [`BodyTooLarge`] past `remaining` bytes.
    struct LimitedBody<B> {
        #[pin]
        inner: B,
        remaining: u64,
    }
}

impl<B> http_body::Body for LimitedBody<B>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        match std::task::ready!(this.inner.poll_frame(cx)) {
            None => Poll::Ready(None),
            Some(Err(error)) => Poll::Ready(Some(Err(error.into()))),
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    let length = data.len() as u64;
                    if length > *this.remaining {
                        *this.remaining = 0;
                        return Poll::Ready(Some(Err(BodyTooLarge.into())));
                    }
                    *this.remaining -= length;
                }
                Poll::Ready(Some(Ok(frame)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::convert::Infallible;
    use std::future::Ready;

    use tower::ServiceExt;

    use super::*;

    /// Panics in `call` itself, before any future exists.
    #[derive(Clone)]
    struct PanicsInCall;

    impl Service<Request<Body>> for PanicsInCall {
        type Response = Response<Body>;
        type Error = Infallible;
        type Future = Ready<Result<Response<Body>, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<Body>) -> Self::Future {
            panic!("routing failed");
        }
    }

    fn limits() -> RequestLimitsLayer {
        RequestLimitsLayer::new(&Limits {
            max_request_body: 4,
            max_headers: 2,
            ..Limits::default()
        })
    }

    #[tokio::test]
    async fn a_panic_in_call_is_answered_500() {
        let service = limits().layer(PanicsInCall);
        let response = service.oneshot(Request::new(Body::empty())).await.unwrap();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[tokio::test]
    async fn heads_and_declared_bodies_past_the_limits_are_refused() {
        let ok = tower::service_fn(|_: Request<Body>| async {
            Ok::<_, Infallible>(Response::new(Body::from("ok")))
        });
        let service = limits().layer(ok);
        let crowded = Request::builder()
            .header("a", "1")
            .header("b", "2")
            .header("c", "3")
            .body(http_body_util::Empty::<Bytes>::new())
            .unwrap();
        let response = service.clone().oneshot(crowded).await.unwrap();
        assert_eq!(
            response.status(),
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
        );
        let large = Request::builder()
            .header(header::CONTENT_LENGTH, "5")
            .body(http_body_util::Full::new(Bytes::from_static(b"12345")))
            .unwrap();
        let response = service.clone().oneshot(large).await.unwrap();
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(response.headers()[header::CONNECTION], "close");
        let small = Request::builder()
            .body(http_body_util::Full::new(Bytes::from_static(b"123")))
            .unwrap();
        assert_eq!(
            service.oneshot(small).await.unwrap().status(),
            StatusCode::OK
        );
    }
}
