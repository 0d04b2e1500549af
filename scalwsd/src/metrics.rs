//! `GET /metrics`: every counter the process keeps, read at scrape time and
//! encoded by prometheus-client in the OpenMetrics text format (which
//! Prometheus scrapes natively).
//!
//! Nothing here runs on the request path: routes count into atomics
//! (`scalws_proxy::metrics`), pools and caches keep their own counters, and a
//! scrape reads them all into one [`Snapshot`] and encodes it.

use std::sync::atomic::Ordering;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use scalws_cache::CacheStats;
use scalws_core::ListenerStats;
use scalws_proxy::metrics::{LATENCY_BUCKETS, RouteSnapshot};
use scalws_proxy::upstream::{EndpointState, EndpointStats};

use crate::serve::Shared;

/// The whole exposition, ending with `# EOF`.
pub(crate) fn encode(shared: &Shared) -> Result<String, std::fmt::Error> {
    let loaded = shared.loaded.load();
    // One row per upstream address, its label text made once.
    let mut pools: Vec<(String, String, EndpointStats)> = loaded
        .carried
        .pools
        .iter()
        .flat_map(|(name, pool)| {
            pool.stats()
                .into_iter()
                .map(move |a| (name.to_owned(), a.address.to_string(), a))
        })
        .collect();
    pools.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    let mut caches: Vec<(String, CacheStats)> = loaded
        .carried
        .caches
        .iter()
        .map(|(app, (_, cache))| (app.clone(), cache.stats()))
        .collect();
    caches.sort_by(|a, b| a.0.cmp(&b.0));
    let snapshot = Snapshot {
        routes: shared.metrics.snapshot(),
        pools,
        caches,
        listeners: shared.server.listeners(),
        reloads_ok: shared.reloads_ok.load(Ordering::Relaxed),
        reloads_failed: shared.reloads_failed.load(Ordering::Relaxed),
        hash: loaded.hash.clone(),
        access_log: shared.access_log_counts(),
        kubernetes: shared.kubernetes.as_ref().map(|k| {
            (
                k.in_sync.load(Ordering::Relaxed),
                k.leader.load(Ordering::Relaxed),
                k.applied.load(Ordering::Relaxed),
                k.failed.load(Ordering::Relaxed),
            )
        }),
    };
    let mut registry = Registry::with_prefix("scalws");
    registry.register_collector(Box::new(snapshot));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    Ok(text)
}

/// Everything one scrape reports.
#[derive(Debug)]
struct Snapshot {
    routes: Vec<(String, String, RouteSnapshot)>,
    /// Upstream name, address, its counters.
    pools: Vec<(String, String, EndpointStats)>,
    caches: Vec<(String, CacheStats)>,
    listeners: Vec<ListenerStats>,
    reloads_ok: u64,
    reloads_failed: u64,
    hash: String,
    /// Lines written, dropped and lost to write errors, when an access log is on.
    access_log: Option<(u64, u64, u64)>,
    /// In sync, leader, translations applied and failed, when configured from Kubernetes.
    kubernetes: Option<(bool, bool, u64, u64)>,
}

const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "requests",
            "Responses by application, route and status class (application and route are empty for requests no route answered).",
            None,
            MetricType::Counter,
        )?;
        for (app, route, s) in &self.routes {
            for (class, count) in CLASSES.iter().zip(s.classes) {
                let labels = [
                    ("application", app.as_str()),
                    ("route", route.as_str()),
                    ("class", class),
                ];
                family
                    .encode_family(&labels)?
                    .encode_counter::<NoLabelSet, _, u64>(&count, None)?;
            }
        }

        let mut family = encoder.encode_descriptor(
            "request_duration_seconds",
            "Time from routing to the response head (answers made while routing count as 0).",
            None,
            MetricType::Histogram,
        )?;
        for (app, route, s) in &self.routes {
            let labels = [("application", app.as_str()), ("route", route.as_str())];
            // prometheus-client sums the buckets itself and writes f64::MAX as
            // le="+Inf": hand it per-bucket counts, the snapshot's are cumulative.
            let buckets: Vec<(f64, u64)> = LATENCY_BUCKETS
                .iter()
                .copied()
                .chain([f64::MAX])
                .zip(
                    s.buckets
                        .iter()
                        .scan(0, |below, &c| Some(c - std::mem::replace(below, c))),
                )
                .collect();
            family
                .encode_family(&labels)?
                .encode_histogram::<NoLabelSet>(s.sum.as_secs_f64(), s.count(), &buckets, None)?;
        }

        let mut family = encoder.encode_descriptor(
            "upstream_state",
            "1 for the state each upstream address is in: healthy, ejected (passive), down (active check).",
            None,
            MetricType::Gauge,
        )?;
        for (upstream, address, a) in &self.pools {
            for state in ["healthy", "ejected", "down"] {
                let labels = [
                    ("upstream", upstream.as_str()),
                    ("address", address.as_str()),
                    ("state", state),
                ];
                let value = i64::from(state_name(a.state) == state);
                family.encode_family(&labels)?.encode_gauge(&value)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "upstream_in_flight",
            "Requests in flight to each upstream address.",
            None,
            MetricType::Gauge,
        )?;
        for (upstream, address, a) in &self.pools {
            let labels = [
                ("upstream", upstream.as_str()),
                ("address", address.as_str()),
            ];
            family.encode_family(&labels)?.encode_gauge(&a.in_flight)?;
        }
        let mut family = encoder.encode_descriptor(
            "upstream_failures",
            "Transport failures (connect, reset, timeout, bad response) per upstream address.",
            None,
            MetricType::Counter,
        )?;
        for (upstream, address, a) in &self.pools {
            let labels = [
                ("upstream", upstream.as_str()),
                ("address", address.as_str()),
            ];
            family
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&a.failures, None)?;
        }

        type CacheField = fn(&CacheStats) -> u64;
        let counters: [(&str, &str, CacheField); 5] = [
            ("cache_hits", "Responses answered from the cache.", |s| {
                s.hits
            }),
            (
                "cache_misses",
                "Requests the cache sent to the origin for a full response.",
                |s| s.misses,
            ),
            (
                "cache_stale_served",
                "Stale responses served (stale-while-revalidate, stale-if-error, max-stale).",
                |s| s.stale_served,
            ),
            (
                "cache_revalidations",
                "Conditional requests sent to revalidate a stored response.",
                |s| s.revalidations,
            ),
            (
                "cache_bypasses",
                "Requests the cache passed through without looking (methods, Authorization, no-store).",
                |s| s.bypasses,
            ),
        ];
        for (name, help, field) in counters {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (app, stats) in &self.caches {
                family
                    .encode_family(&[("application", app.as_str())])?
                    .encode_counter::<NoLabelSet, _, u64>(&field(stats), None)?;
            }
        }
        let gauges: [(&str, &str, CacheField); 2] = [
            ("cache_bytes", "Bytes of responses stored.", |s| {
                s.bytes_stored
            }),
            ("cache_entries", "Responses stored.", |s| s.entries),
        ];
        for (name, help, field) in gauges {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (app, stats) in &self.caches {
                family
                    .encode_family(&[("application", app.as_str())])?
                    .encode_gauge(&field(stats))?;
            }
        }

        let mut family = encoder.encode_descriptor(
            "open_connections",
            "Connections open per listener (QUIC connections for http3).",
            None,
            MetricType::Gauge,
        )?;
        for l in &self.listeners {
            let labels = [("listener", &*l.name), ("protocol", l.protocol)];
            family
                .encode_family(&labels)?
                .encode_gauge(&l.open_connections)?;
        }

        let mut family = encoder.encode_descriptor(
            "config_reloads",
            "Configuration reloads (SIGHUP or POST /reload) by result.",
            None,
            MetricType::Counter,
        )?;
        for (result, count) in [("ok", self.reloads_ok), ("failed", self.reloads_failed)] {
            family
                .encode_family(&[("result", result)])?
                .encode_counter::<NoLabelSet, _, u64>(&count, None)?;
        }
        let info = encoder.encode_descriptor(
            "config",
            "The configuration in use: the SHA-256 of its file.",
            None,
            MetricType::Info,
        )?;
        let mut info = info;
        info.encode_info(&[("sha256", self.hash.as_str())])?;

        if let Some((written, dropped, failed)) = self.access_log {
            for (name, help, value) in [
                ("access_log_lines", "Access log lines written.", written),
                (
                    "access_log_dropped",
                    "Access log lines dropped because the writer fell behind.",
                    dropped,
                ),
                (
                    "access_log_failed",
                    "Access log lines lost to write errors (a full disk, a closed stdout).",
                    failed,
                ),
            ] {
                let metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
                let mut metric = metric;
                metric.encode_counter::<NoLabelSet, _, u64>(&value, None)?;
            }
        }
        if let Some((in_sync, leader, applied, failed)) = self.kubernetes {
            for (name, help, value) in [
                (
                    "kubernetes_in_sync",
                    "1 when every watch of the API server has listed and none is failing.",
                    in_sync,
                ),
                (
                    "kubernetes_leader",
                    "1 on the replica that holds the Lease and writes status.",
                    leader,
                ),
            ] {
                let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
                metric.encode_gauge(&i64::from(value))?;
            }
            let mut family = encoder.encode_descriptor(
                "kubernetes_translations",
                "Translations of the cluster's resources, by result (applied, or failed and not applied).",
                None,
                MetricType::Counter,
            )?;
            for (result, count) in [("applied", applied), ("failed", failed)] {
                family
                    .encode_family(&[("result", result)])?
                    .encode_counter::<NoLabelSet, _, u64>(&count, None)?;
            }
        }
        Ok(())
    }
}

fn state_name(state: EndpointState) -> &'static str {
    match state {
        EndpointState::Healthy => "healthy",
        EndpointState::Ejected => "ejected",
        EndpointState::Down => "down",
    }
}
