//! The `backends` action: a weighted split between proxies and fixed statuses.

use http::{Request, Response, StatusCode};
use scalws_core::Body;
use scalws_core::error::error_response;

use crate::Proxy;

/// One share of a split.
#[derive(Clone, Debug)]
pub enum Backend {
    /// Forward to a pool.
    Proxy(Proxy),
    /// Answer this status with an empty body.
    Status(StatusCode),
}

/// Each request takes one backend, with probability proportional to its weight.
#[derive(Clone, Debug)]
pub struct Backends {
    /// Backends with weight > 0 and the running total of weights up to each.
    shares: Vec<(u64, Backend)>,
    total: u64,
}

impl Backends {
    /// A split over `(backend, weight)`. Weight 0 is never taken; when every
    /// weight is 0 each request gets 500.
    pub fn new(backends: impl IntoIterator<Item = (Backend, u32)>) -> Self {
        let mut total = 0u64;
        let shares = backends
            .into_iter()
            .filter(|(_, weight)| *weight > 0)
            .map(|(backend, weight)| {
                total += u64::from(weight);
                (total, backend)
            })
            .collect();
        Self { shares, total }
    }

    /// The backend for one request, or `None` when every weight is 0.
    pub fn choose(&self) -> Option<&Backend> {
        if self.total == 0 {
            return None;
        }
        let ticket = fastrand::u64(0..self.total);
        let index = self.shares.partition_point(|(upto, _)| *upto <= ticket);
        self.shares.get(index).map(|(_, backend)| backend)
    }

    /// Answers one request.
    pub async fn call(&self, request: Request<Body>) -> Response<Body> {
        match self.choose() {
            Some(Backend::Proxy(proxy)) => proxy.forward(request).await,
            Some(Backend::Status(status)) => {
                let mut response = Response::new(Body::empty());
                *response.status_mut() = *status;
                response
            }
            None => error_response(StatusCode::INTERNAL_SERVER_ERROR),
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
