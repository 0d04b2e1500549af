//! The translation: a snapshot of resources in, a configuration and the
//! status of every resource out. No I/O, no clock: the CLI and the controller
//! both call [`translate`], and the tests drive it directly.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::document::{
    Application, CertificatePair, Document, Listener, ListenerTls, Respond, Route,
};
use super::resources::Resources;
use super::status::Status;

/// The controller name of GatewayClasses that are ours, unless `--controller-name` says otherwise.
pub const GATEWAY_CONTROLLER: &str = "scalws.io/gateway-controller";
/// The controller name of IngressClasses that are ours.
pub const INGRESS_CONTROLLER: &str = "scalws.io/ingress-controller";

/// What the command line decides about a translation.
#[derive(Clone, Debug)]
pub struct Options {
    /// The address Gateway ports bind on (`--bind`, default `0.0.0.0`).
    pub bind: IpAddr,
    /// `--listen PORT=ADDR:PORT`: where a Gateway port binds instead.
    pub listen: BTreeMap<u16, SocketAddr>,
    /// `--class`: the IngressClass name that is ours even without an IngressClass object.
    pub ingress_class: String,
    /// `--gateway-class`: when set, only the GatewayClass of this name (and of our controller) is served.
    pub gateway_class: Option<String>,
    /// `--controller-name`: GatewayClasses with this `controllerName` are ours.
    pub controller_name: String,
    /// Where certificates are said to be: `DIR/NAMESPACE/NAME.crt` and `.key`.
    pub certs_dir: String,
    /// Addresses published in Gateway and Ingress status (the Service's load balancer).
    pub publish: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            bind: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            listen: BTreeMap::new(),
            ingress_class: "scalws".to_owned(),
            gateway_class: None,
            controller_name: GATEWAY_CONTROLLER.to_owned(),
            certs_dir: "certs".to_owned(),
            publish: Vec::new(),
        }
    }
}

/// A certificate taken from a Secret, to be written where the document says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Certificate {
    /// The paths the document gives it.
    pub files: CertificatePair,
    /// `tls.crt`.
    pub cert: Vec<u8>,
    /// `tls.key`.
    pub key: Vec<u8>,
}

/// What [`translate`] returns.
#[derive(Clone, Debug, Default)]
pub struct Translation {
    /// The configuration, as a YAML file would say it.
    pub document: Document,
    /// The certificates the document refers to, by path.
    pub certificates: Vec<Certificate>,
    /// The status of every resource of ours.
    pub status: Status,
}

/// Translates `resources` as `options` say.
pub fn translate(resources: &Resources, options: &Options) -> Translation {
    let mut t = Translator {
        resources,
        options,
        document: Document::default(),
        listeners: BTreeMap::new(),
        apps: BTreeMap::new(),
        certificates: BTreeMap::new(),
        status: Status::default(),
    };
    t.gateway_api();
    t.ingresses();
    t.finish()
}

/// The order of a route among equals: the object's age and name, then the
/// rule and match index.
pub(crate) type RouteKey = (Option<Time>, String, String, usize, usize);

/// One ScalWS listener, for every Gateway listener (and Ingress) on a port.
pub(crate) struct PortListener {
    pub(crate) https: bool,
    pub(crate) address: SocketAddr,
    pub(crate) certificates: Vec<CertificatePair>,
}

/// One application: the routes for one hostname pattern on one listener.
#[derive(Default)]
pub(crate) struct App {
    pub(crate) routes: Vec<(RouteKey, Route)>,
    /// What answers when no route matches (Ingress `defaultBackend`); else 404.
    pub(crate) fallback: Option<Route>,
}

pub(crate) struct Translator<'a> {
    pub(crate) resources: &'a Resources,
    pub(crate) options: &'a Options,
    pub(crate) document: Document,
    /// By client port.
    pub(crate) listeners: BTreeMap<u16, PortListener>,
    /// By (client port, ScalWS domain pattern).
    pub(crate) apps: BTreeMap<(u16, String), App>,
    /// By (namespace, name) of the Secret.
    pub(crate) certificates: BTreeMap<(String, String), Certificate>,
    pub(crate) status: Status,
}

impl Translator<'_> {
    /// The listener name for a client port: `http-80`, `https-443`.
    pub(crate) fn listener_name(https: bool, port: u16) -> String {
        format!("{}-{port}", if https { "https" } else { "http" })
    }

    /// Where a port clients see binds: `--listen`, else `--bind` at the port
    /// (ports below 1024 at port + 10000, so the process needs no privilege).
    pub(crate) fn bind_address(&self, port: u16) -> SocketAddr {
        if let Some(address) = self.options.listen.get(&port) {
            return *address;
        }
        let bound = if port < 1024 { port + 10_000 } else { port };
        SocketAddr::new(self.options.bind, bound)
    }

    /// The listener for `port`, made if needed; `None` when the port is
    /// already another protocol's.
    pub(crate) fn port_listener(&mut self, port: u16, https: bool) -> Option<&mut PortListener> {
        let address = self.bind_address(port);
        let listener = self.listeners.entry(port).or_insert(PortListener {
            https,
            address,
            certificates: Vec::new(),
        });
        (listener.https == https).then_some(listener)
    }

    /// The paths of Secret `ns/name`'s certificate, remembering its PEM.
    pub(crate) fn certificate(
        &mut self,
        ns: &str,
        name: &str,
        cert: Vec<u8>,
        key: Vec<u8>,
    ) -> CertificatePair {
        let dir = self.options.certs_dir.trim_end_matches('/');
        let files = CertificatePair {
            cert: format!("{dir}/{ns}/{name}.crt"),
            key: format!("{dir}/{ns}/{name}.key"),
        };
        self.certificates
            .entry((ns.to_owned(), name.to_owned()))
            .or_insert_with(|| Certificate {
                files: files.clone(),
                cert,
                key,
            });
        files
    }

    fn finish(mut self) -> Translation {
        for (&port, listener) in &self.listeners {
            if listener.https && listener.certificates.is_empty() {
                continue;
            }
            self.document.listeners.push(Listener {
                name: Self::listener_name(listener.https, port),
                address: listener.address.to_string(),
                protocol: if listener.https { "https" } else { "http" },
                tls: listener.https.then(|| ListenerTls {
                    certificates: listener.certificates.clone(),
                }),
            });
        }
        for ((port, pattern), app) in std::mem::take(&mut self.apps) {
            let Some(listener) = self.listeners.get(&port) else {
                continue;
            };
            if listener.https && listener.certificates.is_empty() {
                continue;
            }
            let name = Self::listener_name(listener.https, port);
            let mut routes = app.routes;
            routes.sort_by(|a, b| a.0.cmp(&b.0));
            let mut routes: Vec<Route> = routes.into_iter().map(|(_, r)| r).collect();
            // A catch-all last: it answers what no route matches, and also what
            // only a route's method refused (the Gateway API has no 405).
            routes.push(app.fallback.unwrap_or_else(|| Route {
                respond: Some(Respond::status(404)),
                ..Route::default()
            }));
            self.document.applications.push(Application {
                name: format!("{name} {pattern}"),
                domains: vec![pattern],
                listeners: vec![name],
                routes,
            });
        }
        Translation {
            document: self.document,
            certificates: self.certificates.into_values().collect(),
            status: self.status,
        }
    }
}
