//! The `backends` action: a weighted [`Split`] over services, here proxies
//! and fixed statuses.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::task::{Context, Poll};

use http::request::Parts;
use http::{Request, Response, StatusCode};
use scalws_core::Body;
use scalws_core::error::error_response;

use super::{ActionFuture, Proxy};
use crate::upstream::balance::smooth_schedule;

/// One share of a [`Backends`] split.
#[derive(Clone, Debug)]
pub enum Backend {
    /// Forward to a pool.
    Proxy(Proxy),
    /// Answer this status with an empty body.
    Status(StatusCode),
}

/// The `backends` action: a split over proxies and fixed statuses.
pub type Backends = Split<Backend>;

/// A service over services: each request goes to one of them, in proportion
/// to its weight, in smooth weighted round-robin order (nginx's: 3:1 gives
/// a a b a), so that every run of requests as long as the sum of the weights
/// holds each service exactly its weight's number of times. Weight 0 is never
/// taken; when every weight is 0 each request gets 500. Clones share the
/// turn, so the shares hold over every request of every clone.
#[derive(Clone, Debug)]
pub struct Split<S> {
    /// Services with weight > 0, with their weights.
    shares: Vec<(S, u32)>,
    /// Indices into `shares`, in turn order (empty when every weight is 0).
    schedule: Arc<[u32]>,
    cursor: Arc<AtomicUsize>,
}

impl<S> Split<S> {
    /// A split over `(service, weight)`.
    pub fn new(services: impl IntoIterator<Item = (S, u32)>) -> Self {
        let shares: Vec<(S, u32)> = services
            .into_iter()
            .filter(|(_, weight)| *weight > 0)
            .collect();
        let weights: Vec<u32> = shares.iter().map(|(_, weight)| *weight).collect();
        Self {
            schedule: smooth_schedule(&weights).into(),
            shares,
            cursor: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The service for the next request, or `None` when every weight is 0.
    pub fn choose(&self) -> Option<&S> {
        if self.schedule.is_empty() {
            return None;
        }
        let turn = self.cursor.fetch_add(1, Relaxed);
        let index = self.schedule[turn % self.schedule.len()] as usize;
        self.shares.get(index).map(|(service, _)| service)
    }

    /// The services and their weights, in order.
    pub fn shares(&self) -> impl Iterator<Item = (&S, u64)> {
        self.shares
            .iter()
            .map(|(service, weight)| (service, u64::from(*weight)))
    }
}

impl Split<Backend> {
    /// Answers one request with the chosen share.
    pub(crate) fn call_parts(&self, parts: Parts, body: Body) -> ActionFuture {
        match self.choose() {
            Some(Backend::Proxy(proxy)) => proxy.call_parts(parts, body),
            Some(Backend::Status(status)) => {
                let mut response = Response::new(Body::empty());
                *response.status_mut() = *status;
                ActionFuture::ready(response)
            }
            None => ActionFuture::error(StatusCode::INTERNAL_SERVER_ERROR),
        }
    }
}

/// Any other split: the chosen service is cloned and called.
impl<S> tower::Service<Request<Body>> for Split<S>
where
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = std::convert::Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = std::convert::Infallible;
    type Future = ActionFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> ActionFuture {
        match self.choose() {
            Some(service) => ActionFuture::oneshot(service.clone(), request),
            None => ActionFuture::ready(error_response(StatusCode::INTERNAL_SERVER_ERROR)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_of(backend: Option<&Backend>) -> Option<u16> {
        match backend {
            Some(Backend::Status(s)) => Some(s.as_u16()),
            _ => None,
        }
    }

    #[test]
    fn weights_are_honoured_and_zero_is_never_taken() {
        let split = Backends::new([
            (Backend::Status(StatusCode::OK), 90),
            (Backend::Status(StatusCode::SERVICE_UNAVAILABLE), 10),
            (Backend::Status(StatusCode::IM_A_TEAPOT), 0),
        ]);
        // Every run of 100 turns, wherever it starts, holds exactly 90 and 10.
        let turns: Vec<_> = (0..1_000).map(|_| status_of(split.choose())).collect();
        for window in turns.windows(100) {
            let ok = window.iter().filter(|s| **s == Some(200)).count();
            let unavailable = window.iter().filter(|s| **s == Some(503)).count();
            assert_eq!((ok, unavailable), (90, 10), "{window:?}");
        }
    }

    #[test]
    fn turns_are_spread_and_shared_by_clones() {
        let split = Split::new([("a", 3), ("b", 1)]);
        let other = split.clone();
        let order: Vec<_> = (0..8)
            .map(|turn| {
                let chosen = if turn % 2 == 0 { &split } else { &other };
                chosen.choose().copied()
            })
            .collect();
        let expected = ["a", "a", "b", "a", "a", "a", "b", "a"].map(Some);
        assert_eq!(order, expected);
    }

    #[test]
    fn all_zero_has_no_choice() {
        let split = Backends::new([(Backend::Status(StatusCode::OK), 0)]);
        assert!(split.choose().is_none());
    }
}
