//! Active health checks: one task per pool sends `GET path` to every address
//! each `interval`, through the address's own pooled client.
//!
//! 2xx and 3xx are successes; anything else, an error or no response head
//! within `timeout` is a failure. `unhealthy_after` failures in a row take an
//! address down; `healthy_after` successes in a row bring it back, and also end
//! a passive ejection that began since the run started. The task stops when the
//! pool is dropped (the pool aborts it).

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;

use http::uri::{PathAndQuery, Scheme};
use http::{Request, Uri, header};
use http_body::Body as _;
use scalws_core::Body;
use tokio::task::AbortHandle;
use tokio::time::MissedTickBehavior;

use super::endpoint::Endpoint;
use super::options::HealthCheck;

/// Bytes of a check's response body read (so its connection can be reused)
/// before the rest is dropped with the connection.
const MAX_DRAIN: usize = 64 * 1024;

/// What the checker needs, cloned out of the pool so it holds no pool reference.
pub(crate) struct Checker {
    pub(crate) name: Arc<str>,
    pub(crate) endpoints: Arc<[Endpoint]>,
    pub(crate) scheme: Scheme,
    /// An `http1` pool: the URI is origin-form and Host the address.
    pub(crate) http1: bool,
    pub(crate) path: PathAndQuery,
    pub(crate) check: HealthCheck,
}

impl Checker {
    /// Starts the task on the current tokio runtime.
    pub(crate) fn spawn(self, runtime: &tokio::runtime::Handle) -> AbortHandle {
        runtime.spawn(self.run()).abort_handle()
    }

    async fn run(self) {
        let uris: Vec<Option<Uri>> = self
            .endpoints
            .iter()
            .map(|e| {
                // Weight 0 is never chosen: no point checking it.
                (e.weight() > 0).then(|| {
                    if self.http1 {
                        return Some(Uri::from(self.path.clone()));
                    }
                    Uri::builder()
                        .scheme(self.scheme.clone())
                        .authority(e.authority().clone())
                        .path_and_query(self.path.clone())
                        .build()
                        .ok()
                })?
            })
            .collect();
        let mut runs: Vec<Run> = vec![Run::default(); self.endpoints.len()];
        let mut ticker = tokio::time::interval(self.check.interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let this = &self;
        loop {
            ticker.tick().await;
            let probes = self
                .endpoints
                .iter()
                .zip(&uris)
                .map(|(endpoint, uri)| async move {
                    match uri {
                        Some(uri) => Some(this.probe(endpoint, uri.clone()).await),
                        None => None,
                    }
                });
            let results = futures_util::future::join_all(probes).await;
            for ((endpoint, run), result) in self.endpoints.iter().zip(&mut runs).zip(results) {
                if let Some(healthy) = result {
                    self.record(endpoint, run, healthy);
                }
            }
        }
    }

    /// One check: `true` for a 2xx or 3xx head within the timeout.
    async fn probe(&self, endpoint: &Endpoint, uri: Uri) -> bool {
        let mut request = Request::new(Body::empty());
        *request.uri_mut() = uri;
        if self.http1 {
            request
                .headers_mut()
                .insert(header::HOST, endpoint.host().clone());
        }
        // The check's deadline bounds the head here and, below, the body.
        let deadline = tokio::time::Instant::now() + self.check.timeout;
        let check = async {
            let (mut head, body) = request.into_parts();
            let response = endpoint
                .client()
                .request(&mut head, body, deadline, None, true)
                .await
                .ok()?;
            let status = response.status();
            drain(response.into_body()).await;
            Some(status.is_success() || status.is_redirection())
        };
        matches!(
            tokio::time::timeout_at(deadline, check).await,
            Ok(Some(true))
        )
    }

    fn record(&self, endpoint: &Endpoint, run: &mut Run, healthy: bool) {
        if healthy {
            let ejection = endpoint.ejection();
            if ejection != 0 && ejection != run.ejection_seen {
                // A new passive ejection: count successes from here.
                run.ejection_seen = ejection;
                run.successes = 0;
            }
            run.failures = 0;
            run.successes = run.successes.saturating_add(1);
            let unhealthy = endpoint.is_down() || endpoint.ejection() != 0;
            if unhealthy && run.successes >= self.check.healthy_after.get() {
                tracing::info!(
                    upstream = &*self.name,
                    address = %endpoint.address(),
                    "upstream address healthy again"
                );
                endpoint.set_down(false);
                run.ejection_seen = 0;
            }
        } else {
            endpoint.record_check_failure();
            run.successes = 0;
            run.failures = run.failures.saturating_add(1);
            if !endpoint.is_down() && run.failures >= self.check.unhealthy_after.get() {
                tracing::warn!(
                    upstream = &*self.name,
                    address = %endpoint.address(),
                    failures = run.failures,
                    "upstream address down after failed health checks"
                );
                endpoint.set_down(true);
            }
        }
    }
}

/// One address's run of check results.
#[derive(Clone, Default)]
struct Run {
    failures: u32,
    successes: u32,
    /// The passive ejection last seen, to restart the success count on a new one.
    ejection_seen: u64,
}

/// Reads a check's response body (bounded) so the connection can be reused.
async fn drain(mut body: Body) {
    let mut read = 0;
    while read <= MAX_DRAIN {
        match poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            Some(Ok(frame)) => read += frame.data_ref().map_or(0, |d| d.len()),
            _ => return,
        }
    }
}
