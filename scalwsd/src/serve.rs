//! The serving loop: listeners, the admin listener, signals, reloads, drain.
//!
//! A reload (SIGHUP or `POST /reload`) reads and checks the whole file first;
//! an invalid file changes nothing. A valid one is applied in this order:
//!
//! 1. the new gateway is stored: new requests route by it, requests in
//!    flight finish on the one they started with;
//! 2. the listeners are reconfigured (new addresses were bound before
//!    anything changed; a listener kept at its address keeps its socket);
//!    if a new address cannot be bound, the old gateway is put back and the
//!    reload fails as a whole;
//! 3. what the new configuration no longer uses (pools, caches) is dropped
//!    when the last request holding it ends.
//!
//! Open connections are never closed by a reload: HTTP/1.1 keep-alives,
//! HTTP/2 and HTTP/3 connections and upgraded WebSockets carry on.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use scalws_core::server::Workers;
use scalws_core::{Running, Server, ServerStats};
use scalws_proxy::SharedGateway;
use scalws_proxy::metrics::Metrics;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use crate::access_log::{AccessLogs, Served};
use crate::admin::{self, ReloadRequest};
use crate::config::{self, Carried, Config};
use crate::run::Source;

/// What the admin endpoints read while the server runs.
pub(crate) struct Shared {
    /// The configuration in use: its hash, pools and caches.
    pub(crate) loaded: ArcSwap<Loaded>,
    pub(crate) server: ServerStats,
    pub(crate) metrics: Metrics,
    pub(crate) reloads_ok: AtomicU64,
    pub(crate) reloads_failed: AtomicU64,
    pub(crate) access_log: AccessLogs,
    /// The Kubernetes controller's state, when configured from a cluster.
    pub(crate) kubernetes: Option<Arc<KubernetesState>>,
}

/// What the admin listener reports about the Kubernetes controller.
#[derive(Debug, Default)]
#[cfg_attr(not(feature = "kubernetes"), allow(dead_code))]
pub(crate) struct KubernetesState {
    /// Every watch has listed and none is failing.
    pub(crate) in_sync: std::sync::atomic::AtomicBool,
    /// This replica holds the Lease.
    pub(crate) leader: std::sync::atomic::AtomicBool,
    /// Translations applied.
    pub(crate) applied: AtomicU64,
    /// Translations that could not be applied (the previous one serves on).
    pub(crate) failed: AtomicU64,
}

/// A configuration the Kubernetes controller translated, to apply as a reload.
#[cfg_attr(not(feature = "kubernetes"), allow(dead_code))]
pub(crate) struct Update {
    pub(crate) config: Config,
    /// Whether it was applied (a listener address may not bind).
    pub(crate) reply: tokio::sync::oneshot::Sender<Result<String, String>>,
}

/// What `run` needs from the Kubernetes controller.
#[cfg_attr(not(feature = "kubernetes"), allow(dead_code))]
pub(crate) struct KubernetesLink {
    pub(crate) updates: mpsc::Receiver<Update>,
    pub(crate) state: Arc<KubernetesState>,
}

async fn next_update(updates: &mut Option<mpsc::Receiver<Update>>) -> Option<Update> {
    match updates {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The part of a loaded configuration the admin endpoints need.
pub(crate) struct Loaded {
    pub(crate) hash: String,
    pub(crate) carried: Carried,
}

impl Shared {
    /// Lines written, dropped and lost by the access log, when one is on.
    pub(crate) fn access_log_counts(&self) -> Option<(u64, u64, u64)> {
        self.access_log.counts()
    }
}

/// The exit code of [`run`] when a listener cannot be bound.
pub(crate) const EXIT_RUNTIME: u8 = 1;

/// Serves `config` until SIGTERM or SIGINT, reloading `source` on SIGHUP and
/// `POST /reload`, then drains.
pub(crate) async fn run(
    config: Config,
    source: Source,
    kubernetes: Option<KubernetesLink>,
    workers: Workers,
) -> ExitCode {
    // First, so that a SIGHUP or SIGUSR1 sent while starting (whose default
    // action ends the process) is only queued.
    let mut signals = match Signals::new() {
        Ok(signals) => signals,
        Err(error) => {
            eprintln!("scalwsd: cannot install signal handlers: {error}");
            return ExitCode::from(EXIT_RUNTIME);
        }
    };
    let server = match Server::bind_with(&config.listeners, config.limits.clone(), workers) {
        Ok(server) => server,
        Err(error) => {
            eprintln!("scalwsd: {error}");
            return ExitCode::from(EXIT_RUNTIME);
        }
    };
    let access_log = match AccessLogs::start(&config.access_log) {
        Ok(access_log) => access_log,
        Err(error) => {
            eprintln!("scalwsd: {error}");
            return ExitCode::from(EXIT_RUNTIME);
        }
    };
    let gateway = SharedGateway::new(config.gateway.clone());
    let mut running = server.start(access_log.layer(gateway.clone()));
    let shared = Arc::new(Shared {
        loaded: ArcSwap::from_pointee(Loaded {
            hash: config.hash.clone(),
            carried: config.carried.clone(),
        }),
        server: running.stats(),
        metrics: config.carried.metrics.clone(),
        reloads_ok: AtomicU64::new(0),
        reloads_failed: AtomicU64::new(0),
        access_log,
        kubernetes: kubernetes.as_ref().map(|k| k.state.clone()),
    });
    let mut updates = kubernetes.map(|k| k.updates);
    let (reload_tx, mut reload_rx) = mpsc::channel::<ReloadRequest>(8);
    let admin = match config.admin {
        None => None,
        Some(address) => match admin::start(address, shared.clone(), reload_tx.clone()).await {
            Ok((_, task)) => Some(task),
            Err(error) => {
                eprintln!("scalwsd: admin: cannot bind {address}: {error}");
                return ExitCode::from(EXIT_RUNTIME);
            }
        },
    };
    let mut reloader = Reloader {
        source,
        current: config,
        gateway,
        shared: shared.clone(),
    };
    loop {
        tokio::select! {
            _ = signals.term.recv() => { tracing::info!("SIGTERM received"); break; }
            _ = signals.int.recv() => { tracing::info!("SIGINT received"); break; }
            _ = signals.hup.recv() => {
                tracing::info!("SIGHUP received: reloading");
                let _ = reloader.reload(&mut running).await;
            }
            Some(reply) = reload_rx.recv() => {
                tracing::info!("POST /reload received: reloading");
                let _ = reply.send(reloader.reload(&mut running).await);
            }
            Some(update) = next_update(&mut updates) => {
                let _ = update.reply.send(reloader.apply_update(update.config, &mut running).await);
            }
            _ = signals.usr1.recv() => {
                tracing::info!("SIGUSR1 received: reopening the access log");
                shared.access_log.reopen();
            }
        }
    }
    if let Some(admin) = admin {
        admin.abort();
    }
    running.shutdown().await;
    shared.access_log.flush().await;
    ExitCode::SUCCESS
}

struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    usr1: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
            usr1: signal(SignalKind::user_defined1())?,
        })
    }
}

struct Reloader {
    source: Source,
    current: Config,
    gateway: SharedGateway,
    shared: Arc<Shared>,
}

impl Reloader {
    /// Loads the file again and applies it, or changes nothing. The message
    /// (success or every error) is logged and returned for `POST /reload`.
    async fn reload(&mut self, running: &mut Running<Served>) -> Result<String, String> {
        let result = self.try_reload(running).await;
        self.record(result)
    }

    /// Counts and logs the outcome of a reload or a Kubernetes update, and
    /// drops the counters of routes it left behind (or of a refused file).
    fn record(&self, result: Result<String, String>) -> Result<String, String> {
        self.shared.metrics.prune();
        match &result {
            Ok(message) => {
                self.shared.reloads_ok.fetch_add(1, Ordering::Relaxed);
                tracing::info!("{message}");
            }
            Err(message) => {
                self.shared.reloads_failed.fetch_add(1, Ordering::Relaxed);
                for line in message.lines() {
                    tracing::error!("{line}");
                }
            }
        }
        result
    }

    async fn try_reload(&mut self, running: &mut Running<Served>) -> Result<String, String> {
        let path = match &self.source {
            Source::File(path) => path,
            Source::Embedded => {
                return Err(
                    "reload failed: serving the embedded default configuration; there is no file to reload (start with --config FILE)".into(),
                );
            }
            Source::Kubernetes => {
                return Err(
                    "reload failed: configured from Kubernetes; changes in the cluster apply as they happen".into(),
                );
            }
        };
        // Off the runtime's workers: the load reads files and certificates
        // and resolves host names, which block; requests go on meanwhile.
        let (file, carried) = (path.clone(), self.current.carried.clone());
        let loaded = tokio::task::spawn_blocking(move || config::load_file_after(&file, &carried))
            .await
            .map_err(|error| {
                format!("reload failed: {error}; the configuration in use is unchanged")
            })?;
        let next = loaded.map_err(|errors| {
            format!(
                "reload failed: {} error(s) in {}; the configuration in use is unchanged\n{errors}",
                errors.0.len(),
                path.display()
            )
        })?;
        let message = format!(
            "reloaded {} (sha256 {})",
            path.display(),
            &next.hash[..12.min(next.hash.len())]
        );
        self.apply(next, running).await?;
        Ok(message)
    }

    /// Serves `next` from now on: the gateway is swapped, the listeners
    /// reconfigured (or, if that fails, the old gateway put back and an error
    /// returned), and `next` becomes the configuration in use.
    async fn apply(&mut self, next: Config, running: &mut Running<Served>) -> Result<(), String> {
        let replaced = self.gateway.store(next.gateway.clone());
        if let Err(error) = running
            .reconfigure(&next.listeners, next.limits.clone())
            .await
        {
            self.gateway.restore(replaced);
            return Err(format!(
                "reload failed: {error}; the configuration in use is unchanged"
            ));
        }
        self.warn_about_restart_only_changes(&next);
        // Listeners removed or renamed keep their old routes for their
        // draining connections, until the drain is over.
        self.gateway.forget_retired_after(next.limits.drain_timeout);
        self.shared.loaded.store(Arc::new(Loaded {
            hash: next.hash.clone(),
            carried: next.carried.clone(),
        }));
        self.current = next;
        Ok(())
    }

    /// Applies a configuration the Kubernetes controller translated.
    async fn apply_update(
        &mut self,
        next: Config,
        running: &mut Running<Served>,
    ) -> Result<String, String> {
        let hash = next.hash[..12.min(next.hash.len())].to_owned();
        let result = self
            .apply(next, running)
            .await
            .map(|()| format!("applied the configuration from Kubernetes (sha256 {hash})"));
        self.record(result)
    }

    /// Settings a reload does not apply: said once, so nobody believes otherwise.
    fn warn_about_restart_only_changes(&self, next: &Config) {
        if next.workers != self.current.workers {
            tracing::warn!("workers changed: takes effect at the next restart");
        }
        if next.scheduler != self.current.scheduler {
            tracing::warn!("scheduler changed: takes effect at the next restart");
        }
        if next.admin != self.current.admin {
            tracing::warn!(
                address = ?next.admin.map(|a: SocketAddr| a.to_string()),
                "admin changed: takes effect at the next restart"
            );
        }
        if next.access_log != self.current.access_log {
            tracing::warn!("access_log changed: takes effect at the next restart");
        }
    }
}
