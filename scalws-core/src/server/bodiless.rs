//! HEAD responses and 1xx/204/304 never carry a body (RFC 9110 6.4.1,
//! 8.6). hyper drops such bodies on HTTP/1.1 but sends them on HTTP/2, where
//! a client resets the stream, and h3 sends whatever it is given; so every
//! response of every protocol passes here, whoever made it.

use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Either;

use crate::Body;

/// A response body that can give way to an empty one of its own type.
pub(crate) trait Emptiable {
    /// The body's exact length, if known.
    fn exact_size(&self) -> Option<u64>;
    /// Replaces the body with an empty one of the same type.
    fn empty(&mut self);
}

impl<B: http_body::Body> Emptiable for Either<B, Body> {
    fn exact_size(&self) -> Option<u64> {
        match self {
            Either::Left(body) => body.size_hint().exact(),
            Either::Right(body) => http_body::Body::size_hint(body).exact(),
        }
    }

    fn empty(&mut self) {
        *self = Either::Right(Body::empty());
    }
}

/// Makes the response what may be sent, in place (it is a large value to
/// move), and returns whether its body is to be sent: `false` for a HEAD
/// request and for 1xx, 204 and 304, whose body is then replaced by an
/// empty one. A 1xx or 204 loses its `Content-Length`; a HEAD answer keeps
/// the length a GET would have had, set from the body's exact size when the
/// response has none.
#[inline]
pub(crate) fn forbid_body<B: Emptiable>(response: &mut Response<B>, head: bool) -> bool {
    let status = response.status();
    let bodiless_status = status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    if !head && !bodiless_status {
        return true;
    }
    strip_body(response, head && !bodiless_status);
    false
}

#[cold]
#[inline(never)]
fn strip_body<B: Emptiable>(response: &mut Response<B>, keep_length: bool) {
    let status = response.status();
    if status == StatusCode::NO_CONTENT || status.is_informational() {
        response.headers_mut().remove(header::CONTENT_LENGTH);
    } else if keep_length
        && !response.headers().contains_key(header::CONTENT_LENGTH)
        && let Some(length) = response.body().exact_size()
    {
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    response.body_mut().empty();
}
