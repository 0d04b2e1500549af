//! Ingress v1: classes, rules (host, Exact / Prefix / ImplementationSpecific
//! paths), `defaultBackend`, and TLS from Secrets by host. Ingress is served
//! on the ports 80 and 443 clients see (bound as `--bind` and `--listen` say).

use std::collections::HashSet;

use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};

use super::backends::PortRef;
use super::document::{Match, Origin, PathMatch, Respond, Route};
use super::hosts::ingress_pattern;
use super::resources::{age_key, name, namespace};
use super::status::IngressStatus;
use super::translate::{INGRESS_CONTROLLER, Translator};

const HTTP_PORT: u16 = 80;
const HTTPS_PORT: u16 = 443;

impl Translator<'_> {
    /// Whether an Ingress naming `class` (or none) is ours: an IngressClass
    /// of that name decides by its controller; a name with no IngressClass is
    /// ours when it is `--class`.
    fn class_is_ours(&self, class: &str) -> bool {
        match self
            .resources
            .ingress_classes
            .iter()
            .find(|c| name(&c.metadata) == class)
        {
            Some(c) => {
                c.spec.as_ref().and_then(|s| s.controller.as_deref()) == Some(INGRESS_CONTROLLER)
            }
            None => class == self.options.ingress_class,
        }
    }

    fn ingress_is_ours(&self, ingress: &Ingress, default_ours: bool) -> bool {
        let class = ingress
            .spec
            .as_ref()
            .and_then(|s| s.ingress_class_name.as_deref())
            .or_else(|| {
                ingress
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("kubernetes.io/ingress.class"))
                    .map(String::as_str)
            });
        match class {
            Some(class) => self.class_is_ours(class),
            None => default_ours,
        }
    }

    pub(crate) fn ingresses(&mut self) {
        let resources = self.resources;
        let default_ours = resources.ingress_classes.iter().any(|c| {
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("ingressclass.kubernetes.io/is-default-class"))
                .is_some_and(|v| v == "true")
                && self.class_is_ours(name(&c.metadata))
        });
        // Applications the Gateway API made keep their own 404 for what no
        // route matches; the Ingress default backend is not theirs.
        let gateway_apps: HashSet<(u16, String)> = self.apps.keys().cloned().collect();
        let mut ingresses: Vec<&Ingress> = resources
            .ingresses
            .iter()
            .filter(|i| self.ingress_is_ours(i, default_ours))
            .collect();
        if ingresses.is_empty() {
            return;
        }
        ingresses.sort_by(|a, b| age_key(&a.metadata).cmp(&age_key(&b.metadata)));

        let mut statuses: Vec<IngressStatus> = ingresses
            .iter()
            .map(|i| IngressStatus {
                namespace: namespace(&i.metadata).to_owned(),
                name: name(&i.metadata).to_owned(),
                addresses: self.options.publish.clone(),
                problems: Vec::new(),
            })
            .collect();
        if self.port_listener(HTTP_PORT, false).is_none() {
            for s in &mut statuses {
                s.problems
                    .push("port 80 is an HTTPS listener of a Gateway; not served there".to_owned());
            }
        }

        // TLS first, so every rule knows whether port 443 serves.
        for (ingress, status) in ingresses.iter().zip(&mut statuses) {
            let ns = namespace(&ingress.metadata);
            for tls in ingress.spec.iter().flat_map(|s| s.tls.iter().flatten()) {
                let Some(secret) = tls.secret_name.as_deref() else {
                    status
                        .problems
                        .push("a tls entry without secretName is not served".to_owned());
                    continue;
                };
                match self.tls_secret(ns, secret) {
                    Ok((cert, key)) => {
                        let pair = self.certificate(ns, secret, cert, key);
                        match self.port_listener(HTTPS_PORT, true) {
                            Some(listener) => {
                                if !listener.certificates.contains(&pair) {
                                    listener.certificates.push(pair);
                                }
                            }
                            None => status.problems.push(
                                "port 443 is an HTTP listener of a Gateway; TLS not served"
                                    .to_owned(),
                            ),
                        }
                    }
                    Err(message) => status.problems.push(format!("TLS not served: {message}")),
                }
            }
        }
        let ports: Vec<u16> = [HTTP_PORT, HTTPS_PORT]
            .into_iter()
            .filter(|p| {
                self.listeners.get(p).is_some_and(|l| {
                    l.https == (*p == HTTPS_PORT) && (!l.https || !l.certificates.is_empty())
                })
            })
            .collect();

        let mut default_backend: Option<(String, Route)> = None;
        let mut patterns: Vec<String> = Vec::new();
        for (ingress, status) in ingresses.iter().zip(&mut statuses) {
            let ns = namespace(&ingress.metadata);
            let Some(spec) = &ingress.spec else { continue };
            if let Some(backend) = &spec.default_backend {
                match &default_backend {
                    None => {
                        default_backend = Some((
                            format!("{ns}/{}", name(&ingress.metadata)),
                            self.ingress_route(ns, backend, Match::default(), status),
                        ));
                    }
                    Some((owner, _)) => status.problems.push(format!(
                        "defaultBackend not used: the older Ingress {owner} has one, and there is one default"
                    )),
                }
            }
            for (i, rule) in spec.rules.iter().flatten().enumerate() {
                let pattern = ingress_pattern(rule.host.as_deref());
                if !patterns.contains(&pattern) {
                    patterns.push(pattern.clone());
                }
                for (j, path) in rule.http.iter().flat_map(|h| h.paths.iter()).enumerate() {
                    let value = path.path.clone().unwrap_or_else(|| "/".to_owned());
                    let matcher = Match {
                        path: match path.path_type.as_str() {
                            "Exact" => PathMatch::Exact(value),
                            // ImplementationSpecific is Prefix here.
                            _ => PathMatch::Prefix(value),
                        },
                        ..Match::default()
                    };
                    let mut route = self.ingress_route(ns, &path.backend, matcher, status);
                    route.origin = Some(Origin::of("Ingress", &ingress.metadata));
                    let key = (
                        ingress.metadata.creation_timestamp.clone(),
                        ns.to_owned(),
                        name(&ingress.metadata).to_owned(),
                        i,
                        j,
                    );
                    for &port in &ports {
                        self.apps
                            .entry((port, pattern.clone()))
                            .or_default()
                            .routes
                            .push((key.clone(), route.clone()));
                    }
                }
            }
        }
        if let Some((_, fallback)) = default_backend {
            if !patterns.iter().any(|p| p == "*") {
                patterns.push("*".to_owned());
            }
            for &port in &ports {
                for pattern in &patterns {
                    let key = (port, pattern.clone());
                    if gateway_apps.contains(&key) {
                        continue;
                    }
                    let app = self.apps.entry(key).or_default();
                    app.fallback.get_or_insert_with(|| fallback.clone());
                }
            }
        }
        self.status.ingresses = statuses;
    }

    fn ingress_route(
        &mut self,
        ns: &str,
        backend: &IngressBackend,
        matcher: Match,
        status: &mut IngressStatus,
    ) -> Route {
        let mut route = Route {
            matcher,
            ..Route::default()
        };
        let resolved = match (&backend.service, &backend.resource) {
            (Some(service), _) => match service.port.as_ref() {
                Some(port) => {
                    let port = match (&port.name, port.number) {
                        (Some(name), _) => PortRef::Name(name),
                        (None, Some(number)) => PortRef::Number(number),
                        (None, None) => PortRef::Number(0),
                    };
                    self.service_backend(ns, &service.name, port, 1)
                        .map_err(|u| u.message)
                }
                None => Err(format!("backend Service {} has no port", service.name)),
            },
            (None, Some(resource)) => Err(format!(
                "resource backend {} is not supported",
                resource.name
            )),
            (None, None) => Err("a backend names neither a Service nor a resource".to_owned()),
        };
        match resolved {
            Ok(share) => match share.proxy {
                Some(upstream) => route.proxy = Some(upstream),
                None => route.respond = Some(Respond::status(share.status.unwrap_or(503))),
            },
            Err(message) => {
                status
                    .problems
                    .push(format!("backend answers 500: {message}"));
                route.respond = Some(Respond::status(500));
            }
        }
        route
    }
}
