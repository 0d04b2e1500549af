//! A fake Kubernetes API server on 127.0.0.1 that a real `kube::Client`
//! talks to over HTTP: lists with `resourceVersion`, watches (chunked JSON
//! events, bookmarks, `timeoutSeconds`), 410 Gone after a compaction, watches
//! that end, status merge patches, and Leases (get, create, replace with
//! optimistic concurrency). No API server can run on our machines; this one
//! speaks the same protocol for what the controller uses.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::broadcast;

type Body = BoxBody<Bytes, Infallible>;

/// `(group, plural)` of a kind, and whether it is namespaced.
fn kind_info(kind: &str) -> (&'static str, &'static str, bool) {
    match kind {
        "Namespace" => ("", "namespaces", false),
        "Service" => ("", "services", true),
        "Secret" => ("", "secrets", true),
        "EndpointSlice" => ("discovery.k8s.io", "endpointslices", true),
        "Ingress" => ("networking.k8s.io", "ingresses", true),
        "IngressClass" => ("networking.k8s.io", "ingressclasses", false),
        "GatewayClass" => ("gateway.networking.k8s.io", "gatewayclasses", false),
        "Gateway" => ("gateway.networking.k8s.io", "gateways", true),
        "HTTPRoute" => ("gateway.networking.k8s.io", "httproutes", true),
        "ReferenceGrant" => ("gateway.networking.k8s.io", "referencegrants", true),
        "Lease" => ("coordination.k8s.io", "leases", true),
        other => panic!("the fake API server does not know kind {other}"),
    }
}

struct Event {
    rv: u64,
    plural: String,
    kind: &'static str,
    object: Value,
}

#[derive(Default)]
struct State {
    rv: u64,
    /// plural -> (namespace, name) -> object
    objects: BTreeMap<String, BTreeMap<(String, String), Value>>,
    events: Vec<Event>,
    /// Watches from a resourceVersion below this get 410 Gone.
    compacted_below: u64,
    /// Everything answers 503 (an API server that is down).
    unreachable: bool,
    /// Status patches received: (path, body).
    pub patches: Vec<(String, Value)>,
    /// Requests received: "METHOD path?query".
    pub requests: Vec<String>,
    /// Path prefixes answered 404, as for an API that is not installed.
    hidden: Vec<String>,
    /// This many status patches still to answer 503.
    failing_patches: usize,
}

/// The server; stops with the test's runtime.
#[derive(Clone)]
pub struct FakeApiServer {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    /// Wakes watches on a new event; a `true` ends every open watch.
    wake: broadcast::Sender<bool>,
    /// While true, requests get no answer (they wait until it is false).
    silent: Arc<tokio::sync::watch::Sender<bool>>,
}

impl FakeApiServer {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (wake, _) = broadcast::channel(1024);
        let server = Self {
            addr,
            state: Arc::new(Mutex::new(State {
                rv: 100,
                ..State::default()
            })),
            wake,
            silent: Arc::new(tokio::sync::watch::Sender::new(false)),
        };
        let accept = server.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let me = accept.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let me = me.clone();
                        async move { Ok::<_, Infallible>(me.handle(req).await) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        server
    }

    /// A kubeconfig file naming this server, for `KUBECONFIG`.
    pub fn kubeconfig(&self, dir: &std::path::Path) -> std::path::PathBuf {
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{ name: fake, cluster: {{ server: \"http://{}\" }} }}]\nusers: [{{ name: fake, user: {{}} }}]\ncontexts: [{{ name: fake, context: {{ cluster: fake, user: fake, namespace: default }} }}]\ncurrent-context: fake\n",
                self.addr
            ),
        )
        .unwrap();
        path
    }

    /// Creates or replaces every object of a multi-document YAML text.
    pub fn apply(&self, yaml: &str) {
        let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).unwrap();
        for doc in docs.into_iter().filter(|d| !d.is_null()) {
            self.put(doc);
        }
    }

    fn put(&self, mut object: Value) {
        let kind = object["kind"].as_str().unwrap().to_owned();
        let (_, plural, namespaced) = kind_info(&kind);
        if object["apiVersion"] == "gateway.networking.k8s.io/v1beta1" {
            object["apiVersion"] = "gateway.networking.k8s.io/v1".into();
        }
        let ns = if namespaced {
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_owned()
        } else {
            String::new()
        };
        if namespaced {
            object["metadata"]["namespace"] = ns.clone().into();
        }
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        let mut state = self.state.lock().unwrap();
        state.rv += 1;
        let rv = state.rv;
        let existing = state
            .objects
            .get(plural)
            .and_then(|m| m.get(&(ns.clone(), name.clone())))
            .cloned();
        let meta = &mut object["metadata"];
        meta["resourceVersion"] = rv.to_string().into();
        match &existing {
            Some(old) => {
                meta["uid"] = old["metadata"]["uid"].clone();
                meta["creationTimestamp"] = old["metadata"]["creationTimestamp"].clone();
                let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
                let spec_changed = old.get("spec") != object.get("spec");
                object["metadata"]["generation"] = (generation + i64::from(spec_changed)).into();
                if object.get("status").is_none()
                    && let Some(status) = old.get("status")
                {
                    object["status"] = status.clone();
                }
            }
            None => {
                meta["uid"] = format!("uid-{rv}").into();
                if meta.get("creationTimestamp").is_none() {
                    meta["creationTimestamp"] =
                        format!("2026-01-01T00:{:02}:{:02}Z", (rv / 60) % 60, rv % 60).into();
                }
                meta["generation"] = 1.into();
            }
        }
        state
            .objects
            .entry(plural.to_owned())
            .or_default()
            .insert((ns, name), object.clone());
        state.events.push(Event {
            rv,
            plural: plural.to_owned(),
            kind: if existing.is_some() {
                "MODIFIED"
            } else {
                "ADDED"
            },
            object,
        });
        drop(state);
        let _ = self.wake.send(false);
    }

    pub fn delete(&self, kind: &str, ns: &str, name: &str) {
        let (_, plural, namespaced) = kind_info(kind);
        let ns = if namespaced {
            ns.to_owned()
        } else {
            String::new()
        };
        let mut state = self.state.lock().unwrap();
        let Some(mut object) = state
            .objects
            .get_mut(plural)
            .and_then(|m| m.remove(&(ns, name.to_owned())))
        else {
            return;
        };
        state.rv += 1;
        let rv = state.rv;
        object["metadata"]["resourceVersion"] = rv.to_string().into();
        state.events.push(Event {
            rv,
            plural: plural.to_owned(),
            kind: "DELETED",
            object,
        });
        drop(state);
        let _ = self.wake.send(false);
    }

    /// Forgets history: open watches end, and a watch resumed from an older
    /// resourceVersion gets 410 Gone (so the client must relist).
    pub fn compact(&self) {
        let mut state = self.state.lock().unwrap();
        state.compacted_below = state.rv + 1;
        state.events.clear();
        drop(state);
        let _ = self.wake.send(true);
    }

    /// Ends every open watch (as an API server does at its timeout).
    pub fn end_watches(&self) {
        let _ = self.wake.send(true);
    }

    /// Makes every request fail with 503 (and ends open watches), or back.
    pub fn set_unreachable(&self, down: bool) {
        self.state.lock().unwrap().unreachable = down;
        if down {
            let _ = self.wake.send(true);
        }
    }

    /// Answers the next `n` status patches 503 (everything else as usual).
    pub fn fail_status_patches(&self, n: usize) {
        self.state.lock().unwrap().failing_patches = n;
    }

    /// Holds every new request unanswered (an API server behind a dead
    /// connection: no error, no answer), or answers again. Open watches stay
    /// open and quiet.
    pub fn set_silent(&self, silent: bool) {
        self.silent.send_replace(silent);
    }

    /// Answers 404 under `prefix` (`/apis/gateway.networking.k8s.io/v1beta1`),
    /// as an API server does for a group or version that is not installed.
    pub fn hide(&self, prefix: &str) {
        self.state.lock().unwrap().hidden.push(prefix.to_owned());
    }

    pub fn object(&self, kind: &str, ns: &str, name: &str) -> Option<Value> {
        let (_, plural, namespaced) = kind_info(kind);
        let ns = if namespaced {
            ns.to_owned()
        } else {
            String::new()
        };
        self.state
            .lock()
            .unwrap()
            .objects
            .get(plural)?
            .get(&(ns, name.to_owned()))
            .cloned()
    }

    pub fn patches(&self) -> Vec<(String, Value)> {
        self.state.lock().unwrap().patches.clone()
    }

    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        let _ = self.silent.subscribe().wait_for(|silent| !silent).await;
        let method = req.method().clone();
        let path = req.uri().path().to_owned();
        let query: BTreeMap<String, String> = req
            .uri()
            .query()
            .unwrap_or("")
            .split('&')
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.to_owned(), percent_decode(v)))
            .collect();
        {
            let mut state = self.state.lock().unwrap();
            state.requests.push(format!("{method} {}", req.uri()));
            if state.unreachable {
                return status(503, "ServiceUnavailable", "the fake API server is down");
            }
            if state.hidden.iter().any(|h| path.starts_with(h.as_str())) {
                return status(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                );
            }
        }
        let body = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let Some(target) = parse_path(&path) else {
            return status(404, "NotFound", "no such path");
        };
        match (
            method,
            target.name.as_deref(),
            target.subresource.as_deref(),
        ) {
            (Method::GET, None, None)
                if query.get("watch").is_some_and(|w| w == "true" || w == "1") =>
            {
                self.watch(&target, &query)
            }
            (Method::GET, None, None) => self.list(&target, &query),
            (Method::GET, Some(name), None) => match self.object_at(&target, name) {
                Some(object) => json_response(200, &object),
                None => status(
                    404,
                    "NotFound",
                    &format!("{} \"{name}\" not found", target.plural),
                ),
            },
            (Method::POST, None, None) => {
                let mut object: Value = serde_json::from_slice(&body).unwrap_or_default();
                let name = object["metadata"]["name"].as_str().unwrap_or("").to_owned();
                if self.object_at(&target, &name).is_some() {
                    return status(409, "AlreadyExists", "already exists");
                }
                object["kind"] = kind_of(&target.plural).into();
                object["metadata"]["namespace"] =
                    target.namespace.clone().unwrap_or_default().into();
                self.put(object);
                json_response(201, &self.object_at(&target, &name).unwrap())
            }
            (Method::PUT, Some(name), None) => {
                let mut object: Value = serde_json::from_slice(&body).unwrap_or_default();
                let Some(current) = self.object_at(&target, name) else {
                    return status(404, "NotFound", "not found");
                };
                if object["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"] {
                    return status(409, "Conflict", "the object has been modified");
                }
                object["kind"] = kind_of(&target.plural).into();
                self.put(object);
                json_response(200, &self.object_at(&target, name).unwrap())
            }
            (Method::PATCH, Some(name), Some("status")) => {
                {
                    let mut state = self.state.lock().unwrap();
                    if state.failing_patches > 0 {
                        state.failing_patches -= 1;
                        return status(
                            503,
                            "ServiceUnavailable",
                            "the fake API server refuses this write",
                        );
                    }
                }
                let patch: Value = serde_json::from_slice(&body).unwrap_or_default();
                let Some(mut object) = self.object_at(&target, name) else {
                    return status(404, "NotFound", "not found");
                };
                self.state
                    .lock()
                    .unwrap()
                    .patches
                    .push((path.clone(), patch.clone()));
                merge(&mut object, &patch);
                self.put(object);
                json_response(200, &self.object_at(&target, name).unwrap())
            }
            _ => status(
                405,
                "MethodNotAllowed",
                "not supported by the fake API server",
            ),
        }
    }

    fn object_at(&self, target: &Target, name: &str) -> Option<Value> {
        let state = self.state.lock().unwrap();
        let ns = target.namespace.clone().unwrap_or_default();
        let mut object = state
            .objects
            .get(&target.plural)?
            .get(&(ns, name.to_owned()))?
            .clone();
        target.rewrite(&mut object);
        Some(object)
    }

    fn list(&self, target: &Target, query: &BTreeMap<String, String>) -> Response<Body> {
        let state = self.state.lock().unwrap();
        let items: Vec<Value> = state
            .objects
            .get(&target.plural)
            .into_iter()
            .flat_map(|m| m.values())
            .filter(|o| target.matches(o, query))
            .cloned()
            .map(|mut o| {
                target.rewrite(&mut o);
                o
            })
            .collect();
        json_response(
            200,
            &json!({ "apiVersion": target.api_version(), "kind": "List", "metadata": { "resourceVersion": state.rv.to_string() }, "items": items }),
        )
    }

    fn watch(&self, target: &Target, query: &BTreeMap<String, String>) -> Response<Body> {
        let from: u64 = query
            .get("resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let timeout = query
            .get("timeoutSeconds")
            .and_then(|v| v.parse().ok())
            .unwrap_or(290u64);
        let bookmarks = query
            .get("allowWatchBookmarks")
            .is_some_and(|v| v == "true");
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
        let me = self.clone();
        let target = target.clone();
        let query = query.clone();
        let mut wake = self.wake.subscribe();
        tokio::spawn(async move {
            let gone = me.state.lock().unwrap().compacted_below > from && from != 0;
            if gone {
                let event = json!({ "type": "ERROR", "object": { "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "too old resource version", "reason": "Expired", "code": 410 } });
                let _ = tx.send(line(&event)).await;
                return;
            }
            let mut sent = from;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
            if bookmarks {
                let rv = me.state.lock().unwrap().rv;
                let event = json!({ "type": "BOOKMARK", "object": { "kind": kind_of(&target.plural), "apiVersion": target.api_version(), "metadata": { "resourceVersion": rv.max(from).to_string() } } });
                if tx.send(line(&event)).await.is_err() {
                    return;
                }
            }
            loop {
                let pending: Vec<Value> = {
                    let state = me.state.lock().unwrap();
                    state
                        .events
                        .iter()
                        .filter(|e| {
                            e.rv > sent
                                && e.plural == target.plural
                                && target.matches(&e.object, &query)
                        })
                        .map(|e| {
                            let mut object = e.object.clone();
                            target.rewrite(&mut object);
                            json!({ "type": e.kind, "object": object, "rv": e.rv })
                        })
                        .collect()
                };
                for mut event in pending {
                    sent = event["rv"].as_u64().unwrap_or(sent);
                    event.as_object_mut().unwrap().remove("rv");
                    if tx.send(line(&event)).await.is_err() {
                        return;
                    }
                }
                tokio::select! {
                    woke = wake.recv() => match woke {
                        Ok(true) | Err(broadcast::error::RecvError::Closed) => return,
                        _ => {}
                    },
                    _ = tokio::time::sleep_until(deadline) => return,
                }
            }
        });
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv()
                .await
                .map(|bytes| (Ok::<_, Infallible>(Frame::data(bytes)), rx))
        });
        Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(BodyExt::boxed(StreamBody::new(stream)))
            .unwrap()
    }
}

#[derive(Clone, Debug)]
struct Target {
    group: String,
    version: String,
    plural: String,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

impl Target {
    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// What is stored as v1 is served as the version asked for.
    fn rewrite(&self, object: &mut Value) {
        object["apiVersion"] = self.api_version().into();
    }

    fn matches(&self, object: &Value, query: &BTreeMap<String, String>) -> bool {
        if let Some(ns) = &self.namespace
            && object["metadata"]["namespace"].as_str() != Some(ns)
        {
            return false;
        }
        match query.get("fieldSelector") {
            Some(selector) if !selector.is_empty() => {
                selector.split(',').all(|term| match term.split_once('=') {
                    Some(("type", value)) => object["type"].as_str() == Some(value),
                    _ => true,
                })
            }
            _ => true,
        }
    }
}

fn parse_path(path: &str) -> Option<Target> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => (String::new(), (*version).to_owned(), rest),
        ["apis", group, version, rest @ ..] => ((*group).to_owned(), (*version).to_owned(), rest),
        _ => return None,
    };
    let own = |s: &&str| (*s).to_owned();
    let (namespace, plural, name, subresource) = match rest {
        ["namespaces"] => (None, "namespaces".to_owned(), None, None),
        ["namespaces", name] => (None, "namespaces".to_owned(), Some(own(name)), None),
        ["namespaces", ns, plural] => (Some(own(ns)), own(plural), None, None),
        ["namespaces", ns, plural, name] => (Some(own(ns)), own(plural), Some(own(name)), None),
        ["namespaces", ns, plural, name, sub] => {
            (Some(own(ns)), own(plural), Some(own(name)), Some(own(sub)))
        }
        [plural] => (None, own(plural), None, None),
        [plural, name] => (None, own(plural), Some(own(name)), None),
        [plural, name, sub] => (None, own(plural), Some(own(name)), Some(own(sub))),
        _ => return None,
    };
    Some(Target {
        group,
        version,
        plural,
        namespace,
        name,
        subresource,
    })
}

fn kind_of(plural: &str) -> &'static str {
    for kind in [
        "Namespace",
        "Service",
        "Secret",
        "EndpointSlice",
        "Ingress",
        "IngressClass",
        "GatewayClass",
        "Gateway",
        "HTTPRoute",
        "ReferenceGrant",
        "Lease",
    ] {
        if kind_info(kind).1 == plural {
            return kind;
        }
    }
    "Unknown"
}

/// RFC 7386 JSON merge patch.
fn merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(fields) => {
            if !target.is_object() {
                *target = json!({});
            }
            for (k, v) in fields {
                if v.is_null() {
                    target.as_object_mut().unwrap().remove(k);
                } else {
                    merge(&mut target[k], v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

fn line(value: &Value) -> Bytes {
    let mut text = value.to_string();
    text.push('\n');
    Bytes::from(text)
}

fn json_response(code: u16, value: &Value) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(value.to_string())).boxed())
        .unwrap()
}

fn status(code: u16, reason: &str, message: &str) -> Response<Body> {
    json_response(
        code,
        &json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code }),
    )
}
