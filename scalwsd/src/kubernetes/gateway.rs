//! Gateway API: GatewayClasses, Gateways and their listeners, and which
//! HTTPRoutes attach where (parentRefs, allowedRoutes, hostnames, listener
//! isolation). The rules themselves are in `rules.rs`.

use std::collections::HashSet;

use gateway_api::apis::standard::gateways::{
    Gateway, GatewayListeners, GatewayListenersAllowedRoutesNamespacesFrom as From,
    GatewayListenersTlsMode,
};
use gateway_api::apis::standard::httproutes::HttpRoute;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::document::CertificatePair;
use super::hosts::{self, Hostname};
use super::resources::{age_key, name, namespace};
use super::rules::Rules;
use super::status::{
    ClassStatus, Condition, GatewayStatus, ListenerStatus, ParentStatus, RouteStatus,
};
use super::translate::Translator;

pub(crate) const GROUP: &str = "gateway.networking.k8s.io";
const HTTP_ROUTE: &str = "HTTPRoute";

/// One listener of one of our Gateways, as checked.
struct GatewayListener<'a> {
    /// Index into the sorted Gateways.
    gateway: usize,
    spec: &'a GatewayListeners,
    /// The port clients see.
    port: u16,
    https: bool,
    hostname: Hostname,
    /// Whether HTTPRoutes may attach (allowedRoutes.kinds).
    takes_routes: bool,
    /// Accepted, Programmed, ResolvedRefs, Conflicted in that order.
    conditions: Vec<Condition>,
    programmed: bool,
    attached: i32,
    certificates: Vec<CertificatePair>,
}

impl Translator<'_> {
    /// The GatewayClasses of our controller (and of `--gateway-class`, when given).
    fn our_classes(&mut self) -> HashSet<String> {
        let mut ours = HashSet::new();
        let mut classes: Vec<_> = self.resources.gateway_classes.iter().collect();
        classes.sort_by_key(|c| name(&c.metadata).to_owned());
        for class in classes {
            let class_name = name(&class.metadata);
            if class.spec.controller_name != self.options.controller_name
                || self
                    .options
                    .gateway_class
                    .as_deref()
                    .is_some_and(|only| only != class_name)
            {
                continue;
            }
            ours.insert(class_name.to_owned());
            self.status.classes.push(ClassStatus {
                name: class_name.to_owned(),
                generation: class.metadata.generation,
                conditions: vec![Condition::ok("Accepted")],
            });
        }
        ours
    }

    pub(crate) fn gateway_api(&mut self) {
        let classes = self.our_classes();
        let resources = self.resources;
        let mut gateways: Vec<&Gateway> = resources
            .gateways
            .iter()
            .filter(|g| classes.contains(&g.spec.gateway_class_name))
            .collect();
        gateways.sort_by(|a, b| age_key(&a.metadata).cmp(&age_key(&b.metadata)));

        let mut listeners = Vec::new();
        for (index, gateway) in gateways.iter().enumerate() {
            for spec in &gateway.spec.listeners {
                listeners.push(self.check_listener(index, gateway, spec));
            }
        }
        self.claim_ports(&mut listeners);

        let mut routes: Vec<&HttpRoute> = resources.http_routes.iter().collect();
        routes.sort_by(|a, b| age_key(&a.metadata).cmp(&age_key(&b.metadata)));
        for route in routes {
            self.attach(route, &gateways, &mut listeners);
        }

        // Every listener's own hostname has an application, so a request for
        // it never falls through to a less specific listener's routes.
        for l in &listeners {
            if l.programmed {
                self.apps
                    .entry((l.port, l.hostname.gateway_pattern()))
                    .or_default();
            }
        }
        self.gateway_status(&gateways, listeners);
    }

    fn check_listener<'g>(
        &mut self,
        gateway: usize,
        gw: &'g Gateway,
        spec: &'g GatewayListeners,
    ) -> GatewayListener<'g> {
        let mut l = GatewayListener {
            gateway,
            spec,
            port: u16::try_from(spec.port).unwrap_or(0),
            https: spec.protocol == "HTTPS",
            hostname: Hostname::parse(spec.hostname.as_deref()),
            takes_routes: true,
            conditions: vec![
                Condition::ok("Accepted"),
                Condition::ok("Programmed"),
                Condition::ok("ResolvedRefs"),
                Condition::new("Conflicted", false, "NoConflicts", ""),
            ],
            programmed: true,
            attached: 0,
            certificates: Vec::new(),
        };
        if l.port == 0 {
            l.fail(
                "PortUnavailable",
                format!("port {} is out of range", spec.port),
            );
        }
        if spec.protocol != "HTTP" && spec.protocol != "HTTPS" {
            l.fail(
                "UnsupportedProtocol",
                format!(
                    "protocol {} is not supported (HTTP and HTTPS are)",
                    spec.protocol
                ),
            );
            l.takes_routes = false;
        }
        if let Some(kinds) = spec.allowed_routes.as_ref().and_then(|a| a.kinds.as_ref()) {
            let (good, bad): (Vec<_>, Vec<_>) = kinds.iter().partition(|k| {
                k.group.as_deref().is_none_or(|g| g == GROUP) && k.kind == HTTP_ROUTE
            });
            l.takes_routes &= !good.is_empty();
            if !bad.is_empty() {
                let names: Vec<&str> = bad.iter().map(|k| k.kind.as_str()).collect();
                l.conditions[2] = Condition::new(
                    "ResolvedRefs",
                    false,
                    "InvalidRouteKinds",
                    format!("route kinds not supported: {}", names.join(", ")),
                );
                if good.is_empty() {
                    l.unprogram();
                }
            }
        }
        if l.https && l.programmed {
            self.listener_certificates(gw, &mut l);
        }
        l
    }

    /// Resolves an HTTPS listener's certificateRefs into certificate files.
    fn listener_certificates(&mut self, gw: &Gateway, l: &mut GatewayListener<'_>) {
        let tls = l.spec.tls.as_ref();
        if tls.and_then(|t| t.mode.as_ref()) == Some(&GatewayListenersTlsMode::Passthrough) {
            l.fail(
                "UnsupportedValue",
                "TLS mode Passthrough is not supported on HTTPS listeners",
            );
            return;
        }
        let refs = tls
            .and_then(|t| t.certificate_refs.as_deref())
            .unwrap_or(&[]);
        if refs.is_empty() {
            l.resolve_failed(
                "InvalidCertificateRef",
                "an HTTPS listener needs tls.certificateRefs".into(),
            );
            return;
        }
        let gw_ns = namespace(&gw.metadata);
        for r in refs {
            let ns = r.namespace.as_deref().unwrap_or(gw_ns);
            if r.group.as_deref().is_some_and(|g| !g.is_empty())
                || r.kind.as_deref().is_some_and(|k| k != "Secret")
            {
                l.resolve_failed(
                    "InvalidCertificateRef",
                    format!("certificateRef {}/{} is not a Secret", ns, r.name),
                );
                return;
            }
            if ns != gw_ns
                && !self
                    .resources
                    .granted((GROUP, "Gateway", gw_ns), ("", "Secret", ns, &r.name))
            {
                l.resolve_failed(
                    "RefNotPermitted",
                    format!(
                        "no ReferenceGrant in {ns} lets Gateways of {gw_ns} use Secret {}",
                        r.name
                    ),
                );
                return;
            }
            match self.tls_secret(ns, &r.name) {
                Ok((cert, key)) => {
                    let files = self.certificate(ns, &r.name, cert, key);
                    l.certificates.push(files);
                }
                Err(message) => {
                    l.resolve_failed("InvalidCertificateRef", message);
                    return;
                }
            }
        }
    }

    /// A `kubernetes.io/tls` Secret's chain and key, checked to be PEM.
    pub(crate) fn tls_secret(&self, ns: &str, secret: &str) -> Result<(Vec<u8>, Vec<u8>), String> {
        let Some(found) = self
            .resources
            .secrets
            .iter()
            .find(|s| namespace(&s.metadata) == ns && name(&s.metadata) == secret)
        else {
            return Err(format!("Secret {ns}/{secret} does not exist"));
        };
        if found.type_.as_deref() != Some("kubernetes.io/tls") {
            return Err(format!(
                "Secret {ns}/{secret} is not of type kubernetes.io/tls"
            ));
        }
        let field = |key: &str| -> Option<Vec<u8>> {
            found
                .data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|b| b.0.clone())
                .or_else(|| {
                    found
                        .string_data
                        .as_ref()
                        .and_then(|d| d.get(key))
                        .map(|s| s.clone().into_bytes())
                })
        };
        let (Some(cert), Some(key)) = (field("tls.crt"), field("tls.key")) else {
            return Err(format!("Secret {ns}/{secret} lacks tls.crt or tls.key"));
        };
        let chain = CertificateDer::pem_slice_iter(&cert).collect::<Result<Vec<_>, _>>();
        if !matches!(chain, Ok(ref c) if !c.is_empty()) {
            return Err(format!(
                "Secret {ns}/{secret}: tls.crt holds no PEM certificate"
            ));
        }
        if PrivateKeyDer::from_pem_slice(&key).is_err() {
            return Err(format!(
                "Secret {ns}/{secret}: tls.key holds no PEM private key"
            ));
        }
        Ok((cert, key))
    }

    /// Ports are shared by every Gateway listener of one protocol: the oldest
    /// Gateway's listener decides the protocol, others on it conflict.
    fn claim_ports(&mut self, listeners: &mut [GatewayListener<'_>]) {
        for l in listeners.iter_mut().filter(|l| l.programmed) {
            let certificates = std::mem::take(&mut l.certificates);
            match self.port_listener(l.port, l.https) {
                Some(port) => {
                    for pair in &certificates {
                        if !port.certificates.contains(pair) {
                            port.certificates.push(pair.clone());
                        }
                    }
                }
                None => {
                    l.conditions[3] = Condition::new(
                        "Conflicted",
                        true,
                        "ProtocolConflict",
                        format!("port {} is already used by another protocol", l.port),
                    );
                    l.unprogram();
                }
            }
            l.certificates = certificates;
        }
    }

    fn attach(
        &mut self,
        route: &HttpRoute,
        gateways: &[&Gateway],
        listeners: &mut [GatewayListener<'_>],
    ) {
        let route_ns = namespace(&route.metadata).to_owned();
        let route_name = name(&route.metadata).to_owned();
        let hostnames: Vec<Hostname> = route
            .spec
            .hostnames
            .iter()
            .flatten()
            .map(|h| Hostname::parse(Some(h)))
            .collect();
        let mut rules: Option<Rules> = None;
        let mut parents = Vec::new();
        let mut placed: HashSet<(u16, String)> = HashSet::new();
        for parent in route.spec.parent_refs.iter().flatten() {
            if parent.group.as_deref().is_some_and(|g| g != GROUP)
                || parent.kind.as_deref().is_some_and(|k| k != "Gateway")
            {
                continue;
            }
            let gw_ns = parent.namespace.as_deref().unwrap_or(&route_ns);
            let Some(gateway) = gateways
                .iter()
                .position(|g| namespace(&g.metadata) == gw_ns && name(&g.metadata) == parent.name)
            else {
                // Not a Gateway of ours (or none at all): another controller's business.
                continue;
            };
            let candidates: Vec<usize> = (0..listeners.len())
                .filter(|&i| {
                    let l = &listeners[i];
                    l.gateway == gateway
                        && parent
                            .section_name
                            .as_deref()
                            .is_none_or(|s| s == l.spec.name)
                        && parent.port.is_none_or(|p| p == l.spec.port)
                })
                .collect();
            let allowed: Vec<usize> = candidates
                .iter()
                .copied()
                // A listener that is accepted but not programmed (a broken
                // certificate) still counts the route; it just serves nothing.
                .filter(|&i| {
                    listeners[i].conditions[0].status
                        && self.allows(gateways[gateway], &listeners[i], &route_ns)
                })
                .collect();
            let mut attached = Vec::new();
            for &i in &allowed {
                let eff = hosts::effective(&listeners[i].hostname, &hostnames);
                if !eff.is_empty() {
                    attached.push((i, eff));
                }
            }
            let rules = rules.get_or_insert_with(|| self.rules(route));
            let accepted = if candidates.is_empty() {
                Condition::new(
                    "Accepted",
                    false,
                    "NoMatchingParent",
                    "no listener matches the sectionName and port",
                )
            } else if allowed.is_empty() {
                Condition::new(
                    "Accepted",
                    false,
                    "NotAllowedByListeners",
                    "no listener allows this route",
                )
            } else if attached.is_empty() {
                Condition::new(
                    "Accepted",
                    false,
                    "NoMatchingListenerHostname",
                    "no listener hostname intersects the route's hostnames",
                )
            } else if rules.all_invalid() {
                Condition::new(
                    "Accepted",
                    false,
                    "UnsupportedValue",
                    rules.problems.join("; "),
                )
            } else {
                Condition::ok("Accepted")
            };
            // A parent that refuses the route says nothing of its references:
            // the suite expects ResolvedRefs=True beside the refusal.
            let attaches = !(candidates.is_empty() || allowed.is_empty() || attached.is_empty());
            let resolved = if attaches {
                rules.resolved_refs()
            } else {
                Condition::ok("ResolvedRefs")
            };
            let mut conditions = vec![accepted, resolved];
            if let Some(partial) = rules.partially_invalid() {
                conditions.push(partial);
            }
            if conditions[0].status {
                for (i, eff) in attached {
                    let listener = &mut listeners[i];
                    listener.attached += 1;
                    if !listener.programmed {
                        continue;
                    }
                    let owner_port = listener.port;
                    for host in eff {
                        if !owns(listeners, i, &host) {
                            continue;
                        }
                        let key = (owner_port, host.gateway_pattern());
                        if placed.insert(key.clone()) {
                            self.place(rules, &route.metadata, key, owner_port);
                        }
                    }
                }
            }
            parents.push(ParentStatus {
                namespace: gw_ns.to_owned(),
                name: parent.name.clone(),
                section_name: parent.section_name.clone(),
                port: parent.port,
                conditions,
            });
        }
        if !parents.is_empty() {
            self.status.routes.push(RouteStatus {
                namespace: route_ns,
                name: route_name,
                generation: route.metadata.generation,
                parents,
            });
        }
    }

    /// allowedRoutes.namespaces (and kinds) of `l` let a route of `route_ns` attach.
    fn allows(&self, gateway: &Gateway, l: &GatewayListener<'_>, route_ns: &str) -> bool {
        if !l.takes_routes {
            return false;
        }
        let namespaces = l
            .spec
            .allowed_routes
            .as_ref()
            .and_then(|a| a.namespaces.as_ref());
        match namespaces.and_then(|n| n.from.as_ref()) {
            None | Some(From::Same) => route_ns == namespace(&gateway.metadata),
            Some(From::All) => true,
            Some(From::Selector) => {
                let Some(selector) = namespaces.and_then(|n| n.selector.as_ref()) else {
                    return false;
                };
                let labels = self.resources.namespace_labels(route_ns);
                let labels_match = selector
                    .match_labels
                    .iter()
                    .flatten()
                    .all(|(k, v)| labels.get(k) == Some(v));
                let expressions_match = selector.match_expressions.iter().flatten().all(|e| {
                    let values = e.values.as_deref().unwrap_or(&[]);
                    let value = labels.get(&e.key);
                    match e.operator.as_str() {
                        "In" => value.is_some_and(|v| values.contains(v)),
                        "NotIn" => value.is_none_or(|v| !values.contains(v)),
                        "Exists" => value.is_some(),
                        "DoesNotExist" => value.is_none(),
                        _ => false,
                    }
                });
                labels_match && expressions_match
            }
        }
    }

    fn gateway_status(&mut self, gateways: &[&Gateway], listeners: Vec<GatewayListener<'_>>) {
        let mut statuses: Vec<GatewayStatus> = gateways
            .iter()
            .map(|g| GatewayStatus {
                namespace: namespace(&g.metadata).to_owned(),
                name: name(&g.metadata).to_owned(),
                generation: g.metadata.generation,
                conditions: Vec::new(),
                listeners: Vec::new(),
                addresses: self.options.publish.clone(),
            })
            .collect();
        for l in listeners {
            statuses[l.gateway].listeners.push(ListenerStatus {
                name: l.spec.name.clone(),
                port: l.spec.port,
                attached_routes: l.attached,
                supported_kinds: if l.takes_routes {
                    vec![HTTP_ROUTE]
                } else {
                    Vec::new()
                },
                conditions: l.conditions,
            });
        }
        for status in &mut statuses {
            status.recount();
        }
        self.status.gateways = statuses;
    }
}

/// Whether listener `i` is the one a request for `host` reaches on its port:
/// no other programmed listener there has a more specific hostname covering it.
fn owns(listeners: &[GatewayListener<'_>], i: usize, host: &Hostname) -> bool {
    let mine = &listeners[i];
    !listeners.iter().any(|other| {
        other.programmed
            && other.port == mine.port
            && other.hostname.covers(host)
            && hosts::more_specific(&other.hostname, &mine.hostname).is_gt()
    })
}

impl GatewayListener<'_> {
    /// Not accepted, for `reason`.
    fn fail(&mut self, reason: &'static str, message: impl Into<String>) {
        self.conditions[0] = Condition::new("Accepted", false, reason, message);
        self.unprogram();
    }

    /// A reference (a certificate) did not resolve.
    fn resolve_failed(&mut self, reason: &'static str, message: String) {
        self.conditions[2] = Condition::new("ResolvedRefs", false, reason, message);
        self.unprogram();
    }

    fn unprogram(&mut self) {
        self.programmed = false;
        self.conditions[1] =
            Condition::new("Programmed", false, "Invalid", "the listener is not served");
    }
}
