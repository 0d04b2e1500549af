//! The `respond` action: a fixed status, headers and body.

use std::convert::Infallible;
use std::future::{Ready, ready};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};

use scalws_core::Body;

/// Fields the server may add to an answer after the action made it: `date`
/// (HTTP/2 and HTTP/3 put it in the map) and `alt-svc` (HTTP/3 advertised).
/// The answer's map is a clone of the action's, and a clone has its
/// original's room; without this room each such field would make the map
/// grow (a new index and a rehash) on every request.
const ROOM: usize = 2;

/// Answers every request with the same response, decided at build time.
#[derive(Clone, Debug)]
pub struct Respond {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Respond {
    /// A response of `status` with `body`; `Content-Length` is set from the body.
    pub fn new(status: StatusCode, body: impl Into<Bytes>) -> Self {
        let body = body.into();
        let mut headers = HeaderMap::with_capacity(1 + ROOM);
        // RFC 9110 8.6: no Content-Length on 1xx, 204 or 304.
        if !(status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED)
        {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        }
        Self {
            status,
            headers,
            body,
        }
    }

    /// Adds a header (a repeated name adds another value). `Content-Length` is
    /// always the body's own and cannot be overridden.
    pub fn header(mut self, name: header::HeaderName, value: HeaderValue) -> Self {
        if name != header::CONTENT_LENGTH {
            self.headers.append(name, value);
            self.headers.reserve(ROOM);
        }
        self
    }

    /// The response for a request of `method`: HEAD gets the headers alone.
    #[inline]
    pub fn response(&self, method: &Method) -> Response<Body> {
        let body = if method == Method::HEAD || self.status == StatusCode::NO_CONTENT {
            Body::empty()
        } else {
            Body::full(self.body.clone())
        };
        let mut response = Response::new(body);
        *response.status_mut() = self.status;
        *response.headers_mut() = self.headers.clone();
        response
    }
}

impl<B> tower::Service<Request<B>> for Respond {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        ready(Ok(self.response(request.method())))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn sets_status_headers_length_and_body() {
        let respond = Respond::new(StatusCode::CREATED, "hello\n")
            .header(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"))
            .header(header::CONTENT_LENGTH, HeaderValue::from_static("999"));
        let response = respond.response(&Method::GET);
        assert_eq!(response.status(), StatusCode::CREATED);
        assert_eq!(response.headers()[header::CONTENT_LENGTH], "6");
        assert_eq!(response.headers()[header::CONTENT_TYPE], "text/plain");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "hello\n");
    }

    #[test]
    fn the_answer_has_room_for_the_fields_the_server_adds() {
        let mut respond = Respond::new(StatusCode::OK, "ok");
        for name in ["content-type", "cache-control", "x-one", "x-two", "x-three"] {
            respond = respond.header(
                header::HeaderName::from_static(name),
                HeaderValue::from_static("v"),
            );
            let headers = respond.response(&Method::GET).into_parts().0.headers;
            assert!(headers.capacity() >= headers.len() + ROOM, "after {name}");
        }
    }

    #[tokio::test]
    async fn head_has_no_body_but_keeps_length() {
        let response = Respond::new(StatusCode::OK, "hello\n").response(&Method::HEAD);
        assert_eq!(response.headers()[header::CONTENT_LENGTH], "6");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert!(body.is_empty());
    }
}
