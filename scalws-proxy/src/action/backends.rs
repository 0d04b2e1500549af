//! The `backends` action: a weighted [`Split`] over services, here proxies
//! and fixed statuses.

use std::task::{Context, Poll};

use http::request::Parts;
use http::{Request, Response, StatusCode};
use scalws_core::Body;
use scalws_core::error::error_response;

use super::{ActionFuture, Proxy};

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

/// A service over services: each request goes to one of them, with
/// probability proportional to its weight. Weight 0 is never taken; when
/// every weight is 0 each request gets 500.
#[derive(Clone, Debug)]
pub struct Split<S> {
    /// Services with weight > 0 and the running total of weights up to each.
    shares: Vec<(u64, S)>,
    total: u64,
}

impl<S> Split<S> {
    /// A split over `(service, weight)`.
    pub fn new(services: impl IntoIterator<Item = (S, u32)>) -> Self {
        let mut total = 0u64;
        let shares = services
            .into_iter()
            .filter(|(_, weight)| *weight > 0)
            .map(|(service, weight)| {
                total += u64::from(weight);
                (total, service)
            })
            .collect();
        Self { shares, total }
    }

    /// The service for one request, or `None` when every weight is 0.
    pub fn choose(&self) -> Option<&S> {
        if self.total == 0 {
            return None;
        }
        let ticket = fastrand::u64(0..self.total);
        let index = self.shares.partition_point(|(upto, _)| *upto <= ticket);
        self.shares.get(index).map(|(_, service)| service)
    }

    /// The services and their weights, in order.
    pub fn shares(&self) -> impl Iterator<Item = (&S, u64)> {
        let mut previous = 0;
        self.shares.iter().map(move |(upto, service)| {
            let weight = upto - previous;
            previous = *upto;
            (service, weight)
        })
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
        let mut counts = [0u32; 3];
        for _ in 0..10_000 {
            match status_of(split.choose()) {
                Some(200) => counts[0] += 1,
                Some(503) => counts[1] += 1,
                _ => counts[2] += 1,
            }
        }
        assert_eq!(counts[2], 0);
        assert!((8_800..=9_200).contains(&counts[0]), "{counts:?}");
    }

    #[test]
    fn all_zero_has_no_choice() {
        let split = Backends::new([(Backend::Status(StatusCode::OK), 0)]);
        assert!(split.choose().is_none());
    }
}
