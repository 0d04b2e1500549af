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

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use scalws_core::server::Workers;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::cli::ControllerArgs;
use crate::config::{Carried, Config, ConfigErrors, Inputs};
use crate::run::Source;
use crate::serve::{KubernetesLink, KubernetesState, Update};

use super::check;
use super::translate::{Options, Translation, translate};

/// Where certificates from Secrets are said to be; they are only in memory.
const SECRETS: &str = "/kubernetes/secrets";
/// How long a change waits for the next one before it is translated.
const DEBOUNCE: Duration = Duration::from_millis(100);
/// How long one round of status writes may take; an API server that does not
/// answer must not hold up applying changes.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The Kubernetes client from the in-cluster service account or KUBECONFIG,
/// without kube's own retries: they hold a request that meets a 503 for
/// minutes (15 tries with growing waits), which would hide an API server that
/// is down from the health check and keep a leader that cannot renew its
/// Lease believing it leads. Every caller here retries on its own: the
/// watches with their backoff, the election every round, status writes on
/// the next round.
async fn client() -> Result<kube::Client, kube::Error> {
    let mut config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    config.default_retry = false;
    kube::Client::try_from(config)
}

/// Runs the controller until SIGTERM or SIGINT (inside the runtime `scalwsd`
/// starts); returns the exit status.
pub async fn run(args: ControllerArgs, workers: Workers) -> ExitCode {
    let client = match client().await {
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
    let state = Arc::new(KubernetesState::default());
    let identity = std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        // In a container every process is pid 1: the host name tells replicas apart.
        .unwrap_or_else(|| {
            let host = std::env::var("HOSTNAME").unwrap_or_default();
            format!(
                "scalwsd-{host}-{}-{}",
                std::process::id(),
                fastrand_suffix()
            )
        });
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
        reserved: [args.admin].into_iter().collect(),
        admin: args.admin,
    };
    let resources = watches.snapshot();
    let (config, translation) = match translator.load(resources.clone()).await {
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
        applied: fingerprint(&translation),
        last: (resources, translation),
        written_as_leader: false,
        write_failing: false,
    };
    tokio::spawn(controller.run());
    crate::serve::run(
        config,
        Source::Kubernetes,
        Some(KubernetesLink { updates: rx, state }),
        workers,
    )
    .await
}

/// A few random hex digits, from the time the process started.
fn fastrand_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{nanos:08x}")
}

#[derive(Clone)]
struct Translator {
    options: Options,
    /// What the configuration in use carries (pools, caches, counters).
    carried: Carried,
    /// Addresses no listener may take: the admin listener's, and those that
    /// could not be bound.
    reserved: HashSet<SocketAddr>,
    admin: SocketAddr,
}

impl Translator {
    /// Translates and loads `resources` on the blocking pool (a large
    /// cluster takes a second or more, which must not hold up a worker that
    /// serves requests); certificates stay in memory.
    async fn load(
        &self,
        resources: super::Resources,
    ) -> Result<(Config, Translation), ConfigErrors> {
        let me = self.clone();
        match tokio::task::spawn_blocking(move || me.load_now(&resources)).await {
            Ok(loaded) => loaded,
            Err(error) => Err(ConfigErrors(vec![crate::config::ConfigError {
                file: check::FILE_NAME.to_owned(),
                line: 0,
                column: 0,
                path: String::new(),
                message: format!("the translation did not finish: {error}"),
            }])),
        }
    }

    fn load_now(
        &self,
        resources: &super::Resources,
    ) -> Result<(Config, Translation), ConfigErrors> {
        let mut translation = translate(resources, &self.options);
        // Listeners on a reserved address are left out (and reported) first.
        while let Some(index) = translation.document.listeners.iter().position(|l| {
            l.address
                .parse()
                .is_ok_and(|a: SocketAddr| self.reserved.contains(&a))
        }) {
            let why = if translation.document.listeners[index].address == self.admin.to_string() {
                "its address is the admin listener's"
            } else {
                "its address cannot be bound"
            };
            check::refuse_listener(&mut translation, index, why);
        }
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
        let (mut config, _) =
            check::load(&mut translation, Path::new("/"), &self.carried, &inputs)?;
        config.admin = Some(self.admin);
        Ok((config, translation))
    }
}

/// What a translation serves: its YAML and its certificates. Two equal
/// fingerprints serve the same; the second is not applied.
fn fingerprint(translation: &Translation) -> Vec<u8> {
    let mut bytes = check::to_yaml(translation).into_bytes();
    for c in &translation.certificates {
        bytes.extend_from_slice(&c.cert);
        bytes.extend_from_slice(&c.key);
    }
    ring::digest::digest(&ring::digest::SHA256, &bytes)
        .as_ref()
        .to_vec()
}

struct Controller {
    client: kube::Client,
    watches: watch::Watches,
    translator: Translator,
    state: Arc<KubernetesState>,
    leadership: leader::Leadership,
    updates: mpsc::Sender<Update>,
    controller_name: String,
    /// The fingerprint of the translation being served.
    applied: Vec<u8>,
    /// The resources and translation being served, for status.
    last: (super::Resources, Translation),
    /// Status was written since this replica became the leader.
    written_as_leader: bool,
    /// The last round of status writes failed (logged when it starts and stops).
    write_failing: bool,
}

impl Controller {
    async fn run(mut self) {
        loop {
            // Status of what is served, when this replica leads and has not
            // written it yet (at start, after a take-over, after a change).
            let leader = self.leadership.is_leader();
            self.state.leader.store(leader, Ordering::Relaxed);
            if !leader {
                self.written_as_leader = false;
            } else if !self.written_as_leader {
                let (resources, translation) = &self.last;
                let tally = tokio::time::timeout(
                    WRITE_TIMEOUT,
                    write::write(
                        &self.client,
                        &self.controller_name,
                        resources,
                        &translation.status,
                    ),
                )
                .await;
                let failure = match tally {
                    Ok(tally) => {
                        if tally.written > 0 {
                            tracing::debug!(written = tally.written, "status written");
                        }
                        tally.first_error.map(|first| {
                            format!("{} not written (the first: {first})", tally.failed)
                        })
                    }
                    Err(_) => Some(format!(
                        "the API server did not answer within {} s",
                        WRITE_TIMEOUT.as_secs()
                    )),
                };
                let failed = failure.is_some();
                // Said once per change: failing after not, or written after failing.
                match failure {
                    Some(why) if !self.write_failing => {
                        tracing::warn!(error = %why, "cannot write status; trying again");
                    }
                    None if self.write_failing => tracing::info!("status written again"),
                    _ => {}
                }
                // What failed is written again on the next round.
                self.written_as_leader = !failed;
                self.write_failing = failed;
            }
            // A change, or every few seconds a look at the Lease and the API server.
            let woke =
                tokio::time::timeout(Duration::from_secs(3), self.watches.changed.notified())
                    .await
                    .is_ok();
            if !woke {
                self.watches.probe(&self.client).await;
            }
            self.state
                .in_sync
                .store(self.watches.in_sync(), Ordering::Relaxed);
            if !woke {
                continue;
            }
            tokio::time::sleep(DEBOUNCE).await;
            if !self.apply(self.watches.snapshot()).await {
                return; // Shutting down.
            }
        }
    }

    /// Translates, loads and applies `resources`; a listener that cannot be
    /// bound is left out and the rest tried again. False when serving has ended.
    async fn apply(&mut self, resources: super::Resources) -> bool {
        for _ in 0..3 {
            let (config, translation) = match self.translator.load(resources.clone()).await {
                Ok(loaded) => loaded,
                Err(errors) => {
                    self.state.failed.fetch_add(1, Ordering::Relaxed);
                    for error in &errors.0 {
                        tracing::error!(
                            "the cluster's resources do not translate to a valid configuration: {error}"
                        );
                    }
                    return true;
                }
            };
            let fingerprint = fingerprint(&translation);
            if fingerprint == self.applied {
                // The same configuration (a status write of ours, a relist):
                // nothing to swap, but the status may still have to change.
                self.written_as_leader &= translation.status == self.last.1.status;
                self.last = (resources, translation);
                return true;
            }
            let carried = config.carried.clone();
            let (reply, answer) = oneshot::channel();
            if self.updates.send(Update { config, reply }).await.is_err() {
                return false;
            }
            match answer.await {
                Ok(Ok(_)) => {
                    self.translator.carried = carried;
                    self.applied = fingerprint;
                    self.state.applied.fetch_add(1, Ordering::Relaxed);
                    self.last = (resources, translation);
                    self.written_as_leader = false;
                    return true;
                }
                Ok(Err(message)) => {
                    self.state.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::error!("the cluster's configuration was not applied: {message}");
                    // A listener address that would not bind: leave it out next time.
                    let unbindable: Vec<SocketAddr> = translation
                        .document
                        .listeners
                        .iter()
                        .filter(|l| message.contains(&l.address))
                        .filter_map(|l| l.address.parse().ok())
                        .collect();
                    if unbindable.is_empty() {
                        return true;
                    }
                    self.translator.reserved.extend(unbindable);
                }
                Err(_) => return false,
            }
        }
        true
    }
}
