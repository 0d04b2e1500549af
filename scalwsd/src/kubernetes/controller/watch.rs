//! Reflectors over every kind the translation reads: each keeps a store of
//! its objects, relists after a 410 Gone or a broken watch (with backoff),
//! and says when it has listed everything once and whether it is in sync.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

use crate::kubernetes::Resources;

/// One kind's watch: whether it has listed once, and when it last failed.
#[derive(Default)]
struct Health {
    listed: AtomicBool,
    /// Milliseconds since `EPOCH` of the last error; 0 = none since the last success.
    failed_at: AtomicU64,
}

/// A watch counts as failing for this long after its last error: the
/// watcher's backoff retries well within it, and a watch resumed without a
/// relist brings no event to say it is healthy again.
const FAILING_FOR: Duration = Duration::from_secs(40);

/// How long the probe waits for the API server's answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

static EPOCH: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

fn now_ms() -> u64 {
    u64::try_from(EPOCH.elapsed().as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

impl Health {
    fn failing(&self) -> bool {
        let at = self.failed_at.load(Ordering::Relaxed);
        at != 0
            && now_ms().saturating_sub(at)
                < u64::try_from(FAILING_FOR.as_millis()).unwrap_or(u64::MAX)
    }
}

/// A list the API server answers 404: the kind (or this version of it) is
/// not installed, so there is nothing of it to read.
fn not_served(error: &watcher::Error) -> bool {
    matches!(
        error,
        watcher::Error::InitialListFailed(kube::Error::Api(status)) if status.code == 404
    )
}

/// A store per kind (per namespace for namespaced kinds when `--namespace` is given).
pub(crate) struct Watches {
    gateway_classes: Vec<Store<GatewayClass>>,
    gateways: Vec<Store<Gateway>>,
    http_routes: Vec<Store<HttpRoute>>,
    reference_grants: Vec<Store<ReferenceGrant>>,
    reference_grants_v1beta1: Vec<Store<DynamicObject>>,
    ingresses: Vec<Store<Ingress>>,
    ingress_classes: Vec<Store<IngressClass>>,
    services: Vec<Store<Service>>,
    endpoint_slices: Vec<Store<EndpointSlice>>,
    secrets: Vec<Store<Secret>>,
    namespaces: Vec<Store<Namespace>>,
    health: Vec<Arc<Health>>,
    /// The last probe went unanswered: the API server cannot be reached,
    /// though a watch that hangs on a dead connection may not have said so.
    unreachable: AtomicBool,
    /// Woken on every change of any store.
    pub(crate) changed: Arc<Notify>,
}

impl Watches {
    /// Starts every watch on `client`: cluster-wide, or in `namespaces` only.
    pub(crate) fn start(client: &Client, namespaces: &[String]) -> Self {
        let mut w = Self {
            gateway_classes: Vec::new(),
            gateways: Vec::new(),
            http_routes: Vec::new(),
            reference_grants: Vec::new(),
            reference_grants_v1beta1: Vec::new(),
            ingresses: Vec::new(),
            ingress_classes: Vec::new(),
            services: Vec::new(),
            endpoint_slices: Vec::new(),
            secrets: Vec::new(),
            namespaces: Vec::new(),
            health: Vec::new(),
            unreachable: AtomicBool::new(false),
            changed: Arc::new(Notify::new()),
        };
        let all = watcher::Config::default();
        // Only TLS Secrets are read; the API server filters the rest out.
        let tls = watcher::Config::default().fields("type=kubernetes.io/tls");
        let cluster = |c: &Client| c.clone();
        let scopes: Vec<Option<&str>> = if namespaces.is_empty() {
            vec![None]
        } else {
            namespaces.iter().map(|n| Some(n.as_str())).collect()
        };
        let store = w.watch(Api::<GatewayClass>::all(cluster(client)), all.clone());
        w.gateway_classes.push(store);
        let store = w.watch(Api::<IngressClass>::all(cluster(client)), all.clone());
        w.ingress_classes.push(store);
        let store = w.watch(Api::<Namespace>::all(cluster(client)), all.clone());
        w.namespaces.push(store);
        let v1beta1 = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "gateway.networking.k8s.io",
            "v1beta1",
            "ReferenceGrant",
        ));
        for scope in scopes {
            let c = client.clone();
            let s = w.watch(scoped::<Gateway>(&c, scope), all.clone());
            w.gateways.push(s);
            let s = w.watch(scoped::<HttpRoute>(&c, scope), all.clone());
            w.http_routes.push(s);
            let s = w.watch(scoped::<ReferenceGrant>(&c, scope), all.clone());
            w.reference_grants.push(s);
            let api = match scope {
                Some(ns) => Api::<DynamicObject>::namespaced_with(c.clone(), ns, &v1beta1),
                None => Api::<DynamicObject>::all_with(c.clone(), &v1beta1),
            };
            let s = w.watch_with(api, all.clone(), v1beta1.clone());
            w.reference_grants_v1beta1.push(s);
            let s = w.watch(scoped::<Ingress>(&c, scope), all.clone());
            w.ingresses.push(s);
            let s = w.watch(scoped::<Service>(&c, scope), all.clone());
            w.services.push(s);
            let s = w.watch(scoped::<EndpointSlice>(&c, scope), all.clone());
            w.endpoint_slices.push(s);
            let s = w.watch(scoped::<Secret>(&c, scope), tls.clone());
            w.secrets.push(s);
        }
        w
    }

    fn watch<K>(&mut self, api: Api<K>, config: watcher::Config) -> Store<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    {
        self.watch_with(api, config, K::DynamicType::default())
    }

    fn watch_with<K>(
        &mut self,
        api: Api<K>,
        config: watcher::Config,
        dynamic: K::DynamicType,
    ) -> Store<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        let writer = reflector::store::Writer::new(dynamic);
        let store = writer.as_reader();
        let health = Arc::new(Health::default());
        self.health.push(health.clone());
        let changed = self.changed.clone();
        let kind = std::any::type_name::<K>()
            .rsplit("::")
            .next()
            .unwrap_or("?")
            .to_owned();
        // The watcher relists on 410 Gone and whenever a watch ends; the
        // backoff spaces out reconnections while the API server is away.
        let stream = reflector::reflector(writer, watcher::watcher(api, config).default_backoff());
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            let mut said_absent = false;
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::InitDone) => {
                        health.listed.store(true, Ordering::Relaxed);
                        health.failed_at.store(0, Ordering::Relaxed);
                        changed.notify_one();
                    }
                    Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
                    Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => {
                        health.failed_at.store(0, Ordering::Relaxed);
                        changed.notify_one();
                    }
                    // Not installed (no Gateway API CRDs, no v1beta1 ReferenceGrant):
                    // listed, and empty. The watcher keeps asking, so it is found
                    // once installed.
                    Err(error) if not_served(&error) => {
                        if !said_absent {
                            tracing::info!(kind = %kind, "not served by the API server; read as empty until it is");
                            said_absent = true;
                        }
                        if !health.listed.swap(true, Ordering::Relaxed) {
                            changed.notify_one();
                        }
                    }
                    // Only the health changes: the stores did not, so nothing
                    // is translated again.
                    Err(error) => {
                        if !health.failing() {
                            tracing::warn!(kind = %kind, %error, "watch failed; retrying, serving the last good configuration");
                        }
                        health.failed_at.store(now_ms(), Ordering::Relaxed);
                    }
                }
            }
        });
        store
    }

    /// Asks the API server for one Namespace: if it answers, failures of the
    /// watches from before the question are over (a watch that resumes
    /// without relisting says nothing when it recovers); if it does not
    /// within `PROBE_TIMEOUT`, the API server counts as unreachable.
    pub(crate) async fn probe(&self, client: &Client) {
        let asked = now_ms();
        let api: Api<Namespace> = Api::all(client.clone());
        let answer = tokio::time::timeout(
            PROBE_TIMEOUT,
            api.list_metadata(&kube::api::ListParams::default().limit(1)),
        )
        .await;
        let answered = matches!(answer, Ok(Ok(_)));
        let was_unreachable = self.unreachable.swap(!answered, Ordering::Relaxed);
        // Said once per change: answered after not, or not after answered.
        if was_unreachable == answered {
            if answered {
                tracing::info!("the API server answers again");
            } else {
                let why = match answer {
                    Ok(Err(error)) => error.to_string(),
                    _ => format!("no answer within {} s", PROBE_TIMEOUT.as_secs()),
                };
                tracing::warn!(error = %why, "the API server cannot be reached; serving the last good configuration");
            }
        }
        if answered {
            for h in &self.health {
                let _ = h
                    .failed_at
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |at| {
                        (at <= asked).then_some(0)
                    });
            }
        }
    }

    /// Every kind has been listed at least once.
    pub(crate) fn listed(&self) -> bool {
        self.health.iter().all(|h| h.listed.load(Ordering::Relaxed))
    }

    /// Listed, no watch is failing now, and the last probe was answered.
    pub(crate) fn in_sync(&self) -> bool {
        !self.unreachable.load(Ordering::Relaxed)
            && self
                .health
                .iter()
                .all(|h| h.listed.load(Ordering::Relaxed) && !h.failing())
    }

    /// What the stores hold now.
    pub(crate) fn snapshot(&self) -> Resources {
        fn all<K>(stores: &[Store<K>]) -> Vec<K>
        where
            K: Resource + Clone + 'static,
            K::DynamicType: Eq + Hash + Clone,
        {
            stores
                .iter()
                .flat_map(|s| s.state())
                .map(|k| (*k).clone())
                .collect()
        }
        let mut grants = all(&self.reference_grants);
        let seen: std::collections::HashSet<(Option<String>, Option<String>)> = grants
            .iter()
            .map(|g| (g.metadata.namespace.clone(), g.metadata.name.clone()))
            .collect();
        // v1beta1 objects are the same objects as v1 where both are served;
        // those only served as v1beta1 are read through the v1 type.
        for object in all(&self.reference_grants_v1beta1) {
            let key = (
                object.metadata.namespace.clone(),
                object.metadata.name.clone(),
            );
            if seen.contains(&key) {
                continue;
            }
            let mut value = serde_json::to_value(&object).unwrap_or_default();
            value["apiVersion"] = "gateway.networking.k8s.io/v1".into();
            match serde_json::from_value::<ReferenceGrant>(value) {
                Ok(grant) => grants.push(grant),
                Err(error) => tracing::warn!(?key, %error, "ReferenceGrant v1beta1 cannot be read"),
            }
        }
        Resources {
            gateway_classes: all(&self.gateway_classes),
            gateways: all(&self.gateways),
            http_routes: all(&self.http_routes),
            reference_grants: grants,
            ingresses: all(&self.ingresses),
            ingress_classes: all(&self.ingress_classes),
            services: all(&self.services),
            endpoint_slices: all(&self.endpoint_slices),
            secrets: all(&self.secrets),
            namespaces: all(&self.namespaces),
        }
    }
}

fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}
