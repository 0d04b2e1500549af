//! The request body as the pool sends it, watched, so that a failure or a
//! stall on the client's side is told apart from the upstream's: the client
//! is answered for its own fault (400, 408, 413) and the upstream's health
//! is left alone.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::StatusCode;
use http_body::{Frame, SizeHint};
use scalws_core::error::status_for;
use scalws_core::{Body, BoxError};

/// Not all sent, and not waiting for the client either: never polled yet
/// (still connecting), or held by hyper while the upstream takes no more.
const SENDING: u8 = 0;
/// The last poll found no data from the client yet: it is the client that
/// is slow.
const WAITING_ON_CLIENT: u8 = 1;
const SENT: u8 = 2;
const FAILED: u8 = 3;

/// What became of a request body: being sent, waiting on the client, all
/// sent, or failed.
pub(crate) struct BodyWatch(Arc<AtomicU8>);

/// Watches a request's body, unless it has none (then nothing can go wrong
/// on the client's side, and nothing is allocated).
pub(crate) fn watch(body: &mut Body) -> Option<BodyWatch> {
    if http_body::Body::is_end_stream(body) {
        return None;
    }
    let state = Arc::new(AtomicU8::new(SENDING));
    let inner = std::mem::take(body);
    *body = Body::new(Watched {
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

    /// Whether the body is waiting for bytes the client has not sent: at a
    /// timeout, the client's slowness (408) rather than the upstream's (504,
    /// which is also what a connect that stalls or an upstream that stops
    /// reading gives).
    pub(crate) fn waiting_on_client(&self) -> bool {
        self.0.load(Ordering::Acquire) == WAITING_ON_CLIENT
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
        let Poll::Ready(polled) = Pin::new(&mut self.inner).poll_frame(cx) else {
            self.state.store(WAITING_ON_CLIENT, Ordering::Release);
            return Poll::Pending;
        };
        let state = match &polled {
            None => SENT,
            Some(Err(_)) => FAILED,
            // hyper stops polling after trailers, or a body that says it ended.
            Some(Ok(frame)) if frame.is_trailers() || self.inner.is_end_stream() => SENT,
            Some(Ok(_)) => SENDING,
        };
        self.state.store(state, Ordering::Release);
        Poll::Ready(polled)
    }

    fn is_end_stream(&self) -> bool {
        let end = self.inner.is_end_stream();
        if end {
            // hyper stops polling a body that says it has ended.
            let state = self.state.load(Ordering::Acquire);
            if state == SENDING || state == WAITING_ON_CLIENT {
                self.state.store(SENT, Ordering::Release);
            }
        }
        end
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
