//! The request body as the pool sends it, watched, so that a failure or a
//! stall on the client's side is told apart from the upstream's: the client
//! is answered for its own fault (400, 408, 413) and the upstream's health
//! is left alone.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body::{Frame, SizeHint};
use scalws_core::error::status_for;
use scalws_core::{Body, BoxError};

const SENDING: u8 = 0;
const SENT: u8 = 1;
const FAILED: u8 = 2;

/// What became of a request body: still being sent, all sent, or failed.
pub(crate) struct BodyWatch(Arc<AtomicU8>);

/// Watches `request`'s body, unless it has none (then nothing can go wrong
/// on the client's side, and nothing is allocated).
pub(crate) fn watch(request: &mut Request<Body>) -> Option<BodyWatch> {
    if http_body::Body::is_end_stream(request.body()) {
        return None;
    }
    let state = Arc::new(AtomicU8::new(SENDING));
    let inner = std::mem::take(request.body_mut());
    *request.body_mut() = Body::new(Watched {
        inner,
        state: state.clone(),
    });
    Some(BodyWatch(state))
}

impl BodyWatch {
    /// The client's status when the attempt failed because the request
    /// body did: 413 past `max_request_body`, else 400 (bad chunk framing,
    /// a body cut short).
    pub(crate) fn client_fault(
        &self,
        error: &(dyn std::error::Error + 'static),
    ) -> Option<StatusCode> {
        (self.0.load(Ordering::Acquire) == FAILED).then(|| match status_for(error) {
            StatusCode::PAYLOAD_TOO_LARGE => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::BAD_REQUEST,
        })
    }

    /// Whether the whole body was handed to the upstream.
    pub(crate) fn is_sent(&self) -> bool {
        self.0.load(Ordering::Acquire) == SENT
    }
}

struct Watched {
    inner: Body,
    state: Arc<AtomicU8>,
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        match &polled {
            None => self.state.store(SENT, Ordering::Release),
            Some(Err(_)) => self.state.store(FAILED, Ordering::Release),
            Some(Ok(_)) if self.inner.is_end_stream() => self.state.store(SENT, Ordering::Release),
            Some(Ok(_)) => {}
        }
        Poll::Ready(polled)
    }

    fn is_end_stream(&self) -> bool {
        let end = self.inner.is_end_stream();
        if end {
            // hyper stops polling a body that says it has ended.
            let _ = self
                .state
                .compare_exchange(SENDING, SENT, Ordering::AcqRel, Ordering::Acquire);
        }
        end
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
