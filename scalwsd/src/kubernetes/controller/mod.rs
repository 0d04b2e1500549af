//! `scalwsd --kubernetes`: the translation fed by the API server.
//!
//! Reflectors ([`watch`]) keep every resource the translation reads. A change
//! is debounced (100 ms), translated, loaded through the configuration's own
//! checks (certificates from Secrets held in memory, never written), and
//! applied through the reload path: requests in flight finish, connections
//! stay open, pools whose endpoints did not change keep their connections and
//! a pool whose endpoints did keeps those to the endpoints that remain. The
//! replica holding the Lease ([`leader`]) writes status ([`write`]).
//!
//! When the API server is unreachable, slow or answers 410 Gone, the watches
//! reconnect with backoff and relist, and the last good configuration keeps
//! serving; `/healthz` and `scalws_kubernetes_in_sync` say whether it is in sync.

mod leader;
mod watch;
mod write;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::cli::ControllerArgs;
use crate::config::{Carried, Config, ConfigErrors, Inputs};
use crate::run::Source;
use crate::serve::{KubernetesLink, Update};

use super::check;
use super::translate::{Options, Translation, translate};

/// Where certificates from Secrets are said to be; they are only in memory.
const SECRETS: &str = "/kubernetes/secrets";
/// How long a change waits for the next one before it is translated.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// What the admin listener reports about the controller.
#[derive(Debug, Default)]
pub struct State {
    /// Every watch has listed and none is failing.
    pub in_sync: AtomicBool,
    /// This replica holds the Lease.
    pub leader: AtomicBool,
    /// Translations applied.
    pub applied: AtomicU64,
    /// Translations that could not be applied (the previous one serves on).
    pub failed: AtomicU64,
}

/// Runs the controller until SIGTERM or SIGINT; returns the exit status.
pub fn main(workers: usize, args: &ControllerArgs) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("scalwsd: cannot start the runtime: {error}");
            return ExitCode::from(crate::run::EXIT_RUNTIME);
        }
    };
    runtime.block_on(run(args.clone()))
}

async fn run(args: ControllerArgs) -> ExitCode {
    let client = match kube::Client::try_default().await {
        Ok(client) => client,
        Err(error) => {
            eprintln!(
                "scalwsd: --kubernetes: cannot configure the Kubernetes client (in-cluster service account or KUBECONFIG): {error}"
            );
            return ExitCode::from(crate::run::EXIT_RUNTIME);
        }
    };
    let options = Options {
        certs_dir: SECRETS.to_owned(),
        publish: args.publish.clone(),
        ..args.translation.options(SECRETS.to_owned())
    };
    let watches = watch::Watches::start(&client, &args.namespace);
    let state = Arc::new(State::default());
    let identity = std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| format!("scalwsd-{}", std::process::id()));
    let lease_namespace = args
        .lease_namespace
        .clone()
        .or_else(|| {
            std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|n| !n.is_empty())
        })
        .unwrap_or_else(|| "default".to_owned());
    let leadership = leader::start(
        client.clone(),
        lease_namespace,
        args.lease.clone(),
        identity,
    );

    tracing::info!("listing resources from the API server");
    let mut waited = 0u32;
    while !watches.listed() {
        if tokio::time::timeout(Duration::from_secs(5), watches.changed.notified())
            .await
            .is_err()
        {
            waited += 5;
            tracing::warn!(
                seconds = waited,
                "still waiting for the first list of every resource from the API server"
            );
        }
    }
    let mut translator = Translator {
        options,
        carried: Carried::default(),
        admin: args.admin,
    };
    let resources = watches.snapshot();
    let (config, translation) = match translator.load(&resources) {
        Ok(loaded) => loaded,
        Err(errors) => {
            eprintln!("{errors}");
            eprintln!(
                "scalwsd: the cluster's resources translate to a configuration that does not load"
            );
            return ExitCode::from(crate::run::EXIT_CONFIG);
        }
    };
    translator.carried = config.carried.clone();
    state.in_sync.store(watches.in_sync(), Ordering::Relaxed);
    state.applied.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::channel(1);
    let controller = Controller {
        client,
        watches,
        translator,
        state: state.clone(),
        leadership,
        updates: tx,
        controller_name: args.translation.controller_name.clone(),
    };
    tokio::spawn(controller.run(resources, translation));
    crate::serve::run(
        config,
        Source::Kubernetes,
        Some(KubernetesLink { updates: rx, state }),
    )
    .await
}

struct Translator {
    options: Options,
    /// What the configuration in use carries (pools, caches, counters).
    carried: Carried,
    admin: SocketAddr,
}

impl Translator {
    /// Translates and loads `resources`; certificates stay in memory.
    fn load(&self, resources: &super::Resources) -> Result<(Config, Translation), ConfigErrors> {
        let mut translation = translate(resources, &self.options);
        let files: HashMap<PathBuf, Vec<u8>> = translation
            .certificates
            .iter()
            .flat_map(|c| {
                [
                    (PathBuf::from(&c.files.cert), c.cert.clone()),
                    (PathBuf::from(&c.files.key), c.key.clone()),
                ]
            })
            .collect();
        let inputs = Inputs {
            files,
            allow_no_listeners: true,
        };
        let (mut config, yaml) =
            check::load(&mut translation, Path::new("/"), &self.carried, &inputs)?;
        config.admin = Some(self.admin);
        // The hash names the translated document, as for a file.
        let _ = yaml;
        Ok((config, translation))
    }
}

struct Controller {
    client: kube::Client,
    watches: watch::Watches,
    translator: Translator,
    state: Arc<State>,
    leadership: leader::Leadership,
    updates: mpsc::Sender<Update>,
    controller_name: String,
}

impl Controller {
    async fn run(mut self, first: super::Resources, translation: Translation) {
        // Status of the first translation, once this replica knows whether it leads.
        let mut pending = Some((first, translation));
        loop {
            if let Some((resources, translation)) = pending.take() {
                self.write_status(&resources, &translation).await;
            }
            // A change, or a look at the Lease every few seconds.
            let woke =
                tokio::time::timeout(Duration::from_secs(3), self.watches.changed.notified())
                    .await
                    .is_ok();
            self.state
                .in_sync
                .store(self.watches.in_sync(), Ordering::Relaxed);
            self.state
                .leader
                .store(self.leadership.is_leader(), Ordering::Relaxed);
            if !woke {
                continue;
            }
            tokio::time::sleep(DEBOUNCE).await;
            let resources = self.watches.snapshot();
            match self.translator.load(&resources) {
                Ok((config, translation)) => {
                    let carried = config.carried.clone();
                    let (reply, answer) = oneshot::channel();
                    if self.updates.send(Update { config, reply }).await.is_err() {
                        return; // Shutting down.
                    }
                    match answer.await {
                        Ok(Ok(_)) => {
                            self.translator.carried = carried;
                            self.state.applied.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(Err(message)) => {
                            self.state.failed.fetch_add(1, Ordering::Relaxed);
                            tracing::error!(
                                "the cluster's configuration was not applied: {message}"
                            );
                        }
                        Err(_) => return,
                    }
                    pending = Some((resources, translation));
                }
                Err(errors) => {
                    self.state.failed.fetch_add(1, Ordering::Relaxed);
                    for error in &errors.0 {
                        tracing::error!(
                            "the cluster's resources do not translate to a valid configuration: {error}"
                        );
                    }
                }
            }
        }
    }

    async fn write_status(&self, resources: &super::Resources, translation: &Translation) {
        if !self.leadership.is_leader() {
            return;
        }
        let written = write::write(
            &self.client,
            &self.controller_name,
            resources,
            &translation.status,
        )
        .await;
        if written > 0 {
            tracing::debug!(written, "status written");
        }
    }
}
