//! The tee: a response body that streams to the client as it arrives and,
//! on the side, collects a copy (up to `max_object` bytes) for the cache.
//!
//! Chunks go out as soon as the origin sends them; the copy never holds more
//! than the limit (past it, collecting stops and what was collected is
//! dropped). Only a body that ends cleanly, with the length it announced, is
//! handed to `on_complete`; an error, a short body, or the client going away
//! (the body dropped unfinished) drops `on_complete` unused.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use http_body::{Body as HttpBody, Frame, SizeHint};
use pin_project_lite::pin_project;

/// What one collected chunk costs beyond its bytes (its `Bytes` handle and
/// slot), counted against the limit so that many tiny chunks cannot make the
/// copy cost far more than the body.
pub(crate) const CHUNK_OVERHEAD: u64 = 64;

pin_project! {
    /// A body that hands a copy of itself to `on_complete` once whole.
    pub(crate) struct TeeBody<B, F> {
        #[pin]
        inner: B,
        collector: Option<Collector<F>>,
    }
}

struct Collector<F> {
    chunks: Vec<Bytes>,
    len: u64,
    /// What the copy costs so far: its bytes plus [`CHUNK_OVERHEAD`] per chunk
    /// after the first.
    cost: u64,
    limit: u64,
    expected: Option<u64>,
    on_complete: F,
}

impl<B, F> TeeBody<B, F>
where
    B: HttpBody<Data = Bytes>,
    F: FnOnce(Bytes),
{
    /// Tees `inner`, collecting at most `limit` bytes; `expected` is the
    /// announced `Content-Length`, if any.
    pub(crate) fn new(inner: B, limit: u64, expected: Option<u64>, on_complete: F) -> Self {
        let mut collector = Some(Collector {
            chunks: Vec::new(),
            len: 0,
            cost: 0,
            limit,
            expected,
            on_complete,
        });
        // An empty body may never be polled: it is whole already.
        if inner.is_end_stream() {
            complete(&mut collector);
        }
        Self { inner, collector }
    }
}

fn complete<F: FnOnce(Bytes)>(collector: &mut Option<Collector<F>>) {
    let Some(c) = collector.take() else { return };
    if c.expected.is_some_and(|expected| expected != c.len) {
        tracing::debug!(
            len = c.len,
            "cache: body shorter than its content-length, not stored"
        );
        return;
    }
    // A copy of exactly the body's size: the origin's chunks may be slices of
    // larger buffers that the cache should not keep alive.
    let mut body = BytesMut::with_capacity(usize::try_from(c.len).unwrap_or(0));
    for chunk in &c.chunks {
        body.extend_from_slice(chunk);
    }
    (c.on_complete)(body.freeze());
}

impl<B, F> HttpBody for TeeBody<B, F>
where
    B: HttpBody<Data = Bytes>,
    F: FnOnce(Bytes),
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let mut this = self.project();
        match ready!(this.inner.as_mut().poll_frame(cx)) {
            Some(Ok(frame)) => {
                if let (Some(data), Some(c)) = (frame.data_ref(), this.collector.as_mut()) {
                    c.len += data.len() as u64;
                    // A body in one chunk may be `limit` bytes; each further
                    // chunk costs its overhead too.
                    let overhead = if c.chunks.is_empty() {
                        0
                    } else {
                        CHUNK_OVERHEAD
                    };
                    c.cost = c
                        .cost
                        .saturating_add(data.len() as u64)
                        .saturating_add(overhead);
                    if c.cost > c.limit {
                        tracing::debug!(limit = c.limit, "cache: body over max_object, not stored");
                        *this.collector = None;
                    } else {
                        c.chunks.push(data.clone());
                    }
                }
                // The server stops polling once a body says it is over.
                if this.inner.is_end_stream() {
                    complete(this.collector);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(error)) => {
                tracing::debug!("cache: body failed, not stored");
                *this.collector = None;
                Poll::Ready(Some(Err(error)))
            }
            None => {
                complete(this.collector);
                Poll::Ready(None)
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
    use super::*;
    use std::sync::{Arc, Mutex};

    use http_body_util::{BodyExt, StreamBody};
    use scalws_core::{Body, BoxError};

    type Seen = Arc<Mutex<Option<Bytes>>>;

    fn tee(
        body: Body,
        limit: u64,
        expected: Option<u64>,
    ) -> (TeeBody<Body, impl FnOnce(Bytes)>, Seen) {
        let seen: Seen = Arc::default();
        let out = Arc::clone(&seen);
        let tee = TeeBody::new(body, limit, expected, move |b| {
            *out.lock().expect("lock") = Some(b);
        });
        (tee, seen)
    }

    fn chunks(parts: Vec<Result<&'static str, &'static str>>) -> Body {
        let frames = parts.into_iter().map(|p| {
            p.map(|s| Frame::data(Bytes::from_static(s.as_bytes())))
                .map_err(|e| -> BoxError { e.into() })
        });
        Body::new(StreamBody::new(futures_util::stream::iter(frames)))
    }

    #[tokio::test]
    async fn whole_bodies_are_handed_over() {
        let (t, seen) = tee(chunks(vec![Ok("ab"), Ok("cd")]), 4 + CHUNK_OVERHEAD, None);
        assert_eq!(
            t.collect().await.ok().map(|c| c.to_bytes()),
            Some(Bytes::from("abcd"))
        );
        assert_eq!(seen.lock().expect("lock").as_deref(), Some(&b"abcd"[..]));
    }

    #[tokio::test]
    async fn over_the_limit_streams_whole_but_is_not_handed_over() {
        let (t, seen) = tee(chunks(vec![Ok("abc"), Ok("def")]), 4, None);
        assert_eq!(
            t.collect().await.ok().map(|c| c.to_bytes()),
            Some(Bytes::from("abcdef"))
        );
        assert!(seen.lock().expect("lock").is_none());
    }

    #[tokio::test]
    async fn tiny_chunks_count_their_overhead() {
        // 16 one-byte chunks: 16 bytes of body, but 16 handles to keep.
        let parts = vec![Ok("x"); 16];
        let (t, seen) = tee(chunks(parts.clone()), 100, None);
        assert_eq!(t.collect().await.ok().map(|c| c.to_bytes().len()), Some(16));
        assert!(seen.lock().expect("lock").is_none());
        let (t, seen) = tee(chunks(parts), 16 + 15 * CHUNK_OVERHEAD, None);
        assert!(t.collect().await.is_ok());
        assert_eq!(
            seen.lock().expect("lock").as_ref().map(Bytes::len),
            Some(16)
        );
    }

    #[tokio::test]
    async fn failed_or_short_bodies_are_not_handed_over() {
        let (t, seen) = tee(chunks(vec![Ok("ab"), Err("reset")]), 100, None);
        assert!(t.collect().await.is_err());
        assert!(seen.lock().expect("lock").is_none());
        let (t, seen) = tee(chunks(vec![Ok("ab")]), 10, Some(5));
        assert!(t.collect().await.is_ok());
        assert!(seen.lock().expect("lock").is_none());
    }

    #[tokio::test]
    async fn empty_and_full_bodies_complete_without_a_poll_past_the_end() {
        let (_t, seen) = tee(Body::empty(), 10, None);
        assert_eq!(seen.lock().expect("lock").as_deref(), Some(&b""[..]));
        let (mut t, seen) = tee(Body::full("xyz"), 10, Some(3));
        let frame = std::future::poll_fn(|cx| Pin::new(&mut t).poll_frame(cx)).await;
        assert!(frame.is_some());
        assert_eq!(seen.lock().expect("lock").as_deref(), Some(&b"xyz"[..]));
    }
}
