//! Responses for a file, a listing, or a refused method.

use std::io::{Seek, SeekFrom};

use bytes::Bytes;
use http::header::{ALLOW, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, RANGE};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use scalws_core::Body;
use scalws_core::error::error_response;

use super::body::FileBody;
use super::conditional;
use super::range::ByteRange;
use super::representation::Representation;

/// Where a file's bytes come from.
pub(super) enum Content {
    /// The cache.
    Memory(Bytes),
    /// An open file, at offset 0.
    Disk(std::fs::File),
}

/// 200, 206, 304 or 416 for a file, by the request's conditional and `Range` headers.
/// HEAD gets the same headers as GET and no body.
pub(super) fn file(
    head: bool,
    request: &HeaderMap,
    file: &Representation,
    content: Content,
) -> Response<Body> {
    if conditional::not_modified(request, file) {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        file.representation_headers(response.headers_mut());
        return response;
    }
    let range = if request.contains_key(RANGE) && conditional::range_allowed(request, file) {
        ByteRange::from_headers(request, file.len)
    } else {
        ByteRange::Whole
    };
    match range {
        ByteRange::Whole => {
            let body = if head {
                Body::empty()
            } else {
                match content.body(0, file.len) {
                    Ok(body) => body,
                    Err(status) => return error_response(status),
                }
            };
            let mut response = Response::new(body);
            *response.headers_mut() = file.whole.clone();
            response
        }
        ByteRange::Part { start, end } => partial(head, file, content, start, end),
        ByteRange::Unsatisfiable => unsatisfiable(file.len),
    }
}

#[cold]
#[inline(never)]
fn partial(
    head: bool,
    file: &Representation,
    content: Content,
    start: u64,
    end: u64,
) -> Response<Body> {
    let len = end - start + 1;
    let body = if head {
        Body::empty()
    } else {
        match content.body(start, len) {
            Ok(body) => body,
            Err(status) => return error_response(status),
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::PARTIAL_CONTENT;
    let headers = response.headers_mut();
    file.representation_headers(headers);
    headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    if let Ok(value) = HeaderValue::try_from(format!("bytes {start}-{end}/{}", file.len)) {
        headers.insert(CONTENT_RANGE, value);
    }
    response
}

#[cold]
#[inline(never)]
fn unsatisfiable(len: u64) -> Response<Body> {
    let mut response = error_response(StatusCode::RANGE_NOT_SATISFIABLE);
    if let Ok(value) = HeaderValue::try_from(format!("bytes */{len}")) {
        response.headers_mut().insert(CONTENT_RANGE, value);
    }
    response
}

impl Content {
    /// `len` bytes from `start`, which the caller has checked lie within the file.
    fn body(self, start: u64, len: u64) -> Result<Body, StatusCode> {
        match self {
            Self::Memory(bytes) => {
                let start =
                    usize::try_from(start).map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
                let len = usize::try_from(len).map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
                match start.checked_add(len) {
                    Some(end) if end <= bytes.len() => Ok(Body::full(bytes.slice(start..end))),
                    _ => Err(StatusCode::INTERNAL_SERVER_ERROR),
                }
            }
            Self::Disk(mut file) => {
                if start > 0 {
                    // lseek only moves the offset, no I/O: fine on a runtime thread.
                    file.seek(SeekFrom::Start(start))
                        .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
                }
                Ok(Body::new(FileBody::new(file, len)))
            }
        }
    }
}

/// 200 with a directory listing.
pub(super) fn listing(head: bool, html: Bytes) -> Response<Body> {
    let len = HeaderValue::from(html.len());
    let mut response = Response::new(if head {
        Body::empty()
    } else {
        Body::full(html)
    });
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(CONTENT_LENGTH, len);
    response
}

/// 405 with `Allow: GET, HEAD`.
#[cold]
#[inline(never)]
pub(super) fn method_not_allowed() -> Response<Body> {
    let mut response = error_response(StatusCode::METHOD_NOT_ALLOWED);
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
    response
}
