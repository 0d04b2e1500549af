//! A stand-in for a cluster: echo backends on 127.0.0.1 that say which
//! backend they are and what they saw (as the Gateway API conformance suite's
//! echo server does), the Services and EndpointSlices that point at them, the
//! suite's base manifests, and a gateway served from a translation.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use scalws_core::Server;
use scalwsd::kubernetes::{Options, Resources, Translation, check, manifests, translate};
use serde_json::Value;
use test_support::upstream::{Upstream, ok};
use test_support::{Proto, Reply, TestClient};
use tokio::sync::oneshot;

pub const INFRA: &str = "gateway-conformance-infra";
pub const APP: &str = "gateway-conformance-app-backend";
pub const WEB: &str = "gateway-conformance-web-backend";

/// The suite's namespaces, GatewayClass and shared Gateways (HTTP ones; an
/// HTTPS one is added by the tests that need certificates).
pub const BASE: &str = r#"
apiVersion: v1
kind: Namespace
metadata: { name: gateway-conformance-infra, labels: { gateway-conformance: infra } }
---
apiVersion: v1
kind: Namespace
metadata: { name: gateway-conformance-app-backend, labels: { gateway-conformance: backend } }
---
apiVersion: v1
kind: Namespace
metadata: { name: gateway-conformance-web-backend, labels: { gateway-conformance: backend } }
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: { name: scalws }
spec: { controllerName: scalws.io/gateway-controller }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: same-namespace, namespace: gateway-conformance-infra }
spec:
  gatewayClassName: scalws
  listeners: [{ name: http, port: 80, protocol: HTTP, allowedRoutes: { namespaces: { from: Same } } }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: all-namespaces, namespace: gateway-conformance-infra }
spec:
  gatewayClassName: scalws
  listeners: [{ name: http, port: 80, protocol: HTTP, allowedRoutes: { namespaces: { from: All } } }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: backend-namespaces, namespace: gateway-conformance-infra }
spec:
  gatewayClassName: scalws
  listeners:
    - name: http
      port: 80
      protocol: HTTP
      allowedRoutes:
        namespaces: { from: Selector, selector: { matchLabels: { gateway-conformance: backend } } }
"#;

/// The suite's backends: `(namespace, service)`, each an echo server.
pub const BACKENDS: [(&str, &str); 6] = [
    (INFRA, "infra-backend-v1"),
    (INFRA, "infra-backend-v2"),
    (INFRA, "infra-backend-v3"),
    (APP, "app-backend-v1"),
    (APP, "app-backend-v2"),
    (WEB, "web-backend"),
];

/// Echo servers for [`BACKENDS`], with their Services (port 8080, named
/// `http`) and EndpointSlices (the echo server's real port).
pub struct Backends {
    pub servers: BTreeMap<&'static str, Upstream>,
}

impl Backends {
    pub async fn start() -> Self {
        let mut servers = BTreeMap::new();
        for (ns, name) in BACKENDS {
            servers.insert(name, echo(ns, name).await);
        }
        Self { servers }
    }

    /// Services and EndpointSlices for every backend.
    pub fn manifests(&self) -> String {
        let mut out = String::new();
        for (ns, name) in BACKENDS {
            out.push_str(&service(ns, name, self.servers[name].addr));
        }
        out
    }
}

/// A Service `ns/name` with port 8080 (`http`), and an EndpointSlice with
/// one ready endpoint at `addr`.
pub fn service(ns: &str, name: &str, addr: SocketAddr) -> String {
    format!(
        r#"
---
apiVersion: v1
kind: Service
metadata: {{ name: {name}, namespace: {ns} }}
spec:
  selector: {{ app: {name} }}
  ports: [{{ name: http, port: 8080, targetPort: 3000 }}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{ name: {name}-abc, namespace: {ns}, labels: {{ kubernetes.io/service-name: {name} }} }}
addressType: IPv4
ports: [{{ name: http, port: {port} }}]
endpoints: [{{ addresses: ["{ip}"], conditions: {{ ready: true }} }}]
"#,
        port = addr.port(),
        ip = addr.ip(),
    )
}

/// A `kubernetes.io/tls` Secret `ns/name` holding `cert` and `key` (PEM) as `stringData`.
pub fn tls_secret(ns: &str, name: &str, cert: &str, key: &str) -> String {
    let indent = |pem: &str| {
        pem.lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    };
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{ name: {name}, namespace: {ns} }}\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
        indent(cert),
        indent(key)
    )
}

/// An echo server: answers 200 with JSON `{backend, namespace, method, path,
/// host, headers: {name: [values]}}`. `X-Echo-Set-Header: a:1,b:2` sets
/// response headers; a `delay=1s` (or `500ms`) query parameter waits first.
pub async fn echo(ns: &'static str, name: &'static str) -> Upstream {
    Upstream::start(move |req: Request<hyper::body::Incoming>| async move {
        let query = req.uri().query().unwrap_or("");
        if let Some(delay) = query.split('&').find_map(|p| p.strip_prefix("delay=")) {
            let ms = if let Some(ms) = delay.strip_suffix("ms") {
                ms.parse().unwrap_or(0)
            } else {
                delay.trim_end_matches('s').parse::<u64>().unwrap_or(0) * 1000
            };
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (k, v) in req.headers() {
            headers
                .entry(k.as_str().to_owned())
                .or_default()
                .push(v.to_str().unwrap_or("?").to_owned());
        }
        let body = serde_json::json!({
            "backend": name,
            "namespace": ns,
            "method": req.method().as_str(),
            "path": req.uri().path_and_query().map_or("/", |p| p.as_str()),
            "host": req.headers().get("host").and_then(|h| h.to_str().ok()).unwrap_or(""),
            "headers": headers,
        });
        let mut response = ok(body.to_string());
        response
            .headers_mut()
            .insert("content-type", "application/json".parse().unwrap());
        if let Some(set) = req
            .headers()
            .get("x-echo-set-header")
            .and_then(|v| v.to_str().ok())
        {
            for pair in set.split(',').filter(|p| !p.is_empty()) {
                if let Some((k, v)) = pair.split_once(':') {
                    response.headers_mut().append(
                        http::HeaderName::from_bytes(k.trim().as_bytes()).unwrap(),
                        v.trim().parse().unwrap(),
                    );
                }
            }
        }
        response
    })
    .await
}

/// A translation served in-process: every Gateway port in `ports` bound on
/// 127.0.0.1 at a free port. Stops when dropped.
pub struct Served {
    pub translation: Translation,
    /// The status lines, as `scalwsd translate` prints them.
    pub status: String,
    /// Where each Gateway port clients use is bound.
    pub ports: HashMap<u16, SocketAddr>,
    _stop: oneshot::Sender<()>,
    _certs: tempfile::TempDir,
}

/// Reads `yaml`, translates and serves it (the ports named must be the Gateway ports used).
pub fn serve(yaml: &str, ports: &[u16]) -> Served {
    let mut resources = Resources::default();
    if let Err(errors) = manifests::read_str("test.yaml", yaml, &mut resources) {
        panic!("manifest errors: {errors:?}");
    }
    serve_resources(&resources, ports)
}

pub fn serve_resources(resources: &Resources, ports: &[u16]) -> Served {
    let certs = tempfile::tempdir().unwrap();
    let options = Options {
        listen: ports
            .iter()
            .map(|p| (*p, "127.0.0.1:0".parse().unwrap()))
            .collect(),
        certs_dir: certs.path().display().to_string(),
        ..Options::default()
    };
    let mut translation = translate(resources, &options);
    for c in &translation.certificates {
        std::fs::create_dir_all(Path::new(&c.files.cert).parent().unwrap()).unwrap();
        std::fs::write(&c.files.cert, &c.cert).unwrap();
        std::fs::write(&c.files.key, &c.key).unwrap();
    }
    let (config, _yaml) = match check::load(
        &mut translation,
        certs.path(),
        &Default::default(),
        &Default::default(),
    ) {
        Ok(loaded) => loaded,
        Err(errors) => panic!(
            "the translation does not load:\n{errors}\n{}",
            check::to_yaml(&translation)
        ),
    };
    let server = Server::bind(&config.listeners, config.limits).unwrap();
    let bound: HashMap<String, SocketAddr> = server
        .local_addrs()
        .into_iter()
        .map(|(name, addr)| (name.to_string(), addr))
        .collect();
    let ports = ports
        .iter()
        .filter_map(|p| {
            let name = bound
                .keys()
                .find(|n| n.rsplit('-').next() == Some(&p.to_string()))?;
            Some((*p, bound[name]))
        })
        .collect();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve(config.gateway, async {
        let _ = stopped.await;
    }));
    Served {
        status: translation.status.to_string(),
        translation,
        ports,
        _stop: stop,
        _certs: certs,
    }
}

/// What a request got: the status, the response headers, and (from an echo
/// backend) which backend answered and what it saw.
#[derive(Debug)]
pub struct Seen {
    pub reply: Reply,
    pub echo: Option<Value>,
}

impl Seen {
    pub fn status(&self) -> u16 {
        self.reply.status
    }

    /// The echo backend that answered, if one did.
    pub fn backend(&self) -> Option<&str> {
        self.echo.as_ref()?.get("backend")?.as_str()
    }

    /// `path`, `host`, `method` or `namespace` as the backend saw it.
    pub fn saw(&self, field: &str) -> Option<&str> {
        self.echo.as_ref()?.get(field)?.as_str()
    }

    /// A request header as the backend saw it, its values joined with `,`
    /// (as the suite compares them).
    pub fn header_seen(&self, name: &str) -> Option<String> {
        let values = self.echo.as_ref()?.get("headers")?.get(name)?.as_array()?;
        Some(
            values
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(","),
        )
    }

    /// A response header, its values joined with `,`.
    pub fn response_header(&self, name: &str) -> Option<String> {
        let values: Vec<&str> = self
            .reply
            .headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        (!values.is_empty()).then(|| values.join(","))
    }
}

/// Sends `method path` with `host` and `headers` to `addr` over HTTP/1.1.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Seen {
    let mut request = test_support::request(method, host, path);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let reply = TestClient::new(Proto::Http1)
        .send(addr, request.body(Full::<Bytes>::default()).unwrap())
        .await;
    seen(reply)
}

pub fn seen(reply: Reply) -> Seen {
    let echo = (reply.header("content-type") == Some("application/json"))
        .then(|| serde_json::from_slice(&reply.body).ok())
        .flatten();
    Seen { reply, echo }
}

/// GET `path` with `host` to `addr`.
pub async fn get(addr: SocketAddr, host: &str, path: &str) -> Seen {
    send(addr, "GET", host, path, &[]).await
}

/// Expects `expected`: `Ok(backend)` for a 200 from that backend, `Err(status)` otherwise.
pub fn expect(seen: &Seen, expected: Result<&str, u16>, what: &str) {
    match expected {
        Ok(backend) => {
            assert_eq!(
                seen.status(),
                200,
                "{what}: status ({:?})",
                seen.reply.text()
            );
            assert_eq!(seen.backend(), Some(backend), "{what}: backend");
        }
        Err(status) => assert_eq!(
            seen.status(),
            status,
            "{what}: status ({:?})",
            seen.reply.text()
        ),
    }
}
