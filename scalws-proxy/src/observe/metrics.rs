//! Request counters and latency histograms per route, kept with atomics so the
//! request path takes no lock and allocates nothing for them.
//!
//! [`Metrics`] is the registry: one [`RouteMetrics`] per (application, route)
//! label pair, handed out once when a configuration is built. A reload that
//! keeps a route gets the same counters back, so counters survive reloads.
//! Whoever exports them (the `scalwsd` admin listener) reads
//! [`Metrics::snapshot`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds (`+Inf` is implied).
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The counters of one route (or of the requests no route answered).
#[derive(Debug, Default)]
pub struct RouteMetrics {
    /// Responses by status class: 1xx, 2xx, 3xx, 4xx, 5xx.
    classes: [AtomicU64; 5],
    /// Non-cumulative: `buckets[i]` counts latencies in (bound[i-1], bound[i]];
    /// the last one counts those above every bound.
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl RouteMetrics {
    /// Counts one response with `status`, whose head took `elapsed` from routing.
    #[inline]
    pub fn record(&self, status: u16, elapsed: Duration) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.classes[class].fetch_add(1, Ordering::Relaxed);
        let seconds = elapsed.as_secs_f64();
        let bucket = LATENCY_BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> RouteSnapshot {
        let classes = std::array::from_fn(|i| self.classes[i].load(Ordering::Relaxed));
        let mut cumulative = 0;
        let buckets = std::array::from_fn(|i| {
            cumulative += self.buckets[i].load(Ordering::Relaxed);
            cumulative
        });
        RouteSnapshot {
            classes,
            buckets,
            sum: Duration::from_nanos(self.sum_nanos.load(Ordering::Relaxed)),
        }
    }
}

/// A reading of one [`RouteMetrics`].
#[derive(Clone, Debug, PartialEq)]
pub struct RouteSnapshot {
    /// Responses by status class: `classes[0]` is 1xx, ..., `classes[4]` 5xx.
    pub classes: [u64; 5],
    /// Cumulative counts per bucket of [`LATENCY_BUCKETS`], then `+Inf` (the total).
    pub buckets: [u64; LATENCY_BUCKETS.len() + 1],
    /// The sum of all latencies.
    pub sum: Duration,
}

impl RouteSnapshot {
    /// Every response counted.
    pub fn count(&self) -> u64 {
        self.buckets[LATENCY_BUCKETS.len()]
    }
}

/// The registry of route counters, shared by every configuration a process
/// loads; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    routes: Arc<Mutex<RouteMap>>,
}

/// Counters by (application, route).
type RouteMap = BTreeMap<(String, String), Arc<RouteMetrics>>;

impl Metrics {
    /// A new, empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The counters of `route` in `application`, the same ones each time the
    /// pair is asked for. The label for requests no route answered is
    /// `("", "")`.
    pub fn route(&self, application: &str, route: &str) -> Arc<RouteMetrics> {
        let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        routes
            .entry((application.to_owned(), route.to_owned()))
            .or_default()
            .clone()
    }

    /// Forgets the pairs that no configuration in use holds any more (after
    /// a reload removed routes), so they stop being exported.
    pub fn prune(&self) {
        let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        routes.retain(|_, metrics| Arc::strong_count(metrics) > 1);
    }

    /// Every pair with its counters, sorted by application then route.
    pub fn snapshot(&self) -> Vec<(String, String, RouteSnapshot)> {
        let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        routes
            .iter()
            .map(|((app, route), m)| (app.clone(), route.clone(), m.snapshot()))
            .collect()
    }
}

/// A route's label in metrics: its path as written, `=` before an exact
/// path (`=/login`, `/api`, `/users/{id}`). An application whose routes share
/// a label adds ` #N` (the route's position) to the later ones
/// ([`ApplicationBuilder::metrics`](crate::ApplicationBuilder::metrics)).
pub fn route_label(path: &scalws_router::PathMatch) -> String {
    match path {
        scalws_router::PathMatch::Exact(path) => format!("={path}"),
        scalws_router::PathMatch::Prefix(path) | scalws_router::PathMatch::Pattern(path) => {
            path.clone()
        }
    }
}

/// Counts the responses of the inner service in one [`RouteMetrics`]
/// (status class, and latency to the response head): what a gateway's route
/// with [`Route::metrics`](crate::Route::metrics) does, as a layer.
#[derive(Clone, Debug)]
pub struct MetricsLayer {
    metrics: Arc<RouteMetrics>,
}

impl MetricsLayer {
    /// A layer counting into `metrics`.
    pub fn new(metrics: Arc<RouteMetrics>) -> Self {
        Self { metrics }
    }
}

impl<S> tower::Layer<S> for MetricsLayer {
    type Service = Measured<S>;

    fn layer(&self, inner: S) -> Measured<S> {
        Measured {
            metrics: self.metrics.clone(),
            inner,
        }
    }
}

/// Made by [`MetricsLayer`].
#[derive(Clone, Debug)]
pub struct Measured<S> {
    metrics: Arc<RouteMetrics>,
    inner: S,
}

impl<S> tower::Service<http::Request<scalws_core::Body>> for Measured<S>
where
    S: tower::Service<
            http::Request<scalws_core::Body>,
            Response = http::Response<scalws_core::Body>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<scalws_core::Body>;
    type Error = std::convert::Infallible;
    type Future = crate::ActionFuture;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<scalws_core::Body>) -> crate::ActionFuture {
        crate::ActionFuture::oneshot(self.inner.clone(), request).measured(&self.metrics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_classes_buckets_and_sum() {
        let m = RouteMetrics::default();
        m.record(200, Duration::from_micros(100));
        m.record(204, Duration::from_millis(3));
        m.record(404, Duration::from_millis(3));
        m.record(503, Duration::from_secs(20));
        m.record(99, Duration::ZERO);
        let s = m.snapshot();
        assert_eq!(s.classes, [1, 2, 0, 1, 1]);
        assert_eq!(s.count(), 5);
        // <= 0.5 ms: 100 us and 0; <= 5 ms: + two 3 ms; 20 s only in +Inf.
        assert_eq!(s.buckets[0], 2);
        assert_eq!(s.buckets[3], 4);
        assert_eq!(s.buckets[LATENCY_BUCKETS.len() - 1], 4);
        assert_eq!(s.buckets[LATENCY_BUCKETS.len()], 5);
        assert_eq!(
            s.sum,
            Duration::from_micros(100) + Duration::from_millis(6) + Duration::from_secs(20)
        );
    }

    #[test]
    fn the_registry_hands_out_one_counter_per_pair_and_prunes_unused_ones() {
        let metrics = Metrics::new();
        let a = metrics.route("app", "/a");
        assert!(Arc::ptr_eq(&a, &metrics.route("app", "/a")));
        let b = metrics.route("app", "/b");
        a.record(200, Duration::ZERO);
        drop(b);
        metrics.prune();
        let snapshot = metrics.snapshot();
        assert_eq!(snapshot.len(), 1);
        assert_eq!(snapshot[0].0, "app");
        assert_eq!(snapshot[0].1, "/a");
        assert_eq!(snapshot[0].2.classes[1], 1);
    }
}
