//! From a Service port to an upstream: the ready endpoints of the Service's
//! EndpointSlices, with the slice port that carries the Service port.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ServicePort;

use super::document::{Backend, Upstream};
use super::resources::{self, Resources};
use super::translate::Translator;

/// How a backend reference names its Service port.
pub(crate) enum PortRef<'a> {
    /// `port: 8080` (Gateway API, or Ingress `port.number`).
    Number(i32),
    /// Ingress `port.name`.
    Name(&'a str),
}

/// Why a reference became a 500 share.
#[derive(Clone, Debug)]
pub(crate) struct Unresolved {
    /// The Gateway API reason: `BackendNotFound`, `InvalidKind`, `RefNotPermitted`.
    pub(crate) reason: &'static str,
    /// For people.
    pub(crate) message: String,
}

impl Unresolved {
    pub(crate) fn new(reason: &'static str, message: String) -> Self {
        Self { reason, message }
    }
}

impl Translator<'_> {
    /// The share for Service `ns/name` at `port` with `weight`: its upstream,
    /// or a 503 share when no endpoint is ready.
    pub(crate) fn service_backend(
        &mut self,
        ns: &str,
        name: &str,
        port: PortRef<'_>,
        weight: u32,
    ) -> Result<Backend, Unresolved> {
        let res: &Resources = self.resources;
        let Some(service) = res.services.iter().find(|s| {
            resources::namespace(&s.metadata) == ns && resources::name(&s.metadata) == name
        }) else {
            return Err(Unresolved::new(
                "BackendNotFound",
                format!("Service {ns}/{name} does not exist"),
            ));
        };
        let spec = service.spec.as_ref();
        if spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName") {
            return Err(Unresolved::new(
                "BackendNotFound",
                format!("Service {ns}/{name} is of type ExternalName, which is not supported"),
            ));
        }
        let ports: &[ServicePort] = spec.and_then(|s| s.ports.as_deref()).unwrap_or(&[]);
        let found = match &port {
            PortRef::Number(n) => ports.iter().find(|p| p.port == *n),
            PortRef::Name(n) => ports.iter().find(|p| p.name.as_deref() == Some(*n)),
        };
        let Some(service_port) = found else {
            let wanted = match port {
                PortRef::Number(n) => n.to_string(),
                PortRef::Name(n) => format!("\"{n}\""),
            };
            return Err(Unresolved::new(
                "BackendNotFound",
                format!("Service {ns}/{name} has no port {wanted}"),
            ));
        };
        let addresses = ready_addresses(res, ns, name, service_port);
        if addresses.is_empty() {
            return Ok(Backend {
                proxy: None,
                status: Some(503),
                weight,
            });
        }
        let upstream = format!("{ns}/{name}:{}", service_port.port);
        self.document.upstreams.insert(
            upstream.clone(),
            Upstream {
                addresses: addresses.into_iter().collect(),
            },
        );
        Ok(Backend {
            proxy: Some(upstream),
            status: None,
            weight,
        })
    }
}

/// `IP:PORT` of every ready endpoint of the slices labelled with the Service.
fn ready_addresses(
    res: &Resources,
    ns: &str,
    service: &str,
    port: &ServicePort,
) -> BTreeSet<String> {
    let wanted = port.name.as_deref().unwrap_or("");
    let mut out = BTreeSet::new();
    for slice in &res.endpoint_slices {
        if resources::namespace(&slice.metadata) != ns
            || slice
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("kubernetes.io/service-name"))
                .map(String::as_str)
                != Some(service)
        {
            continue;
        }
        let ipv6 = match slice.address_type.as_str() {
            "IPv4" => false,
            "IPv6" => true,
            _ => continue,
        };
        let slice_ports = slice.ports.as_deref().unwrap_or(&[]);
        let number = slice_ports
            .iter()
            .find(|p| p.name.as_deref().unwrap_or("") == wanted)
            .or(match slice_ports {
                [only] => Some(only),
                _ => None,
            })
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0);
        let Some(number) = number else { continue };
        for endpoint in slice.endpoints.iter().flatten() {
            // The API says an absent `ready` means ready.
            let ready = endpoint
                .conditions
                .as_ref()
                .and_then(|c| c.ready)
                .unwrap_or(true);
            if !ready {
                continue;
            }
            for address in &endpoint.addresses {
                let parsed: Option<std::net::IpAddr> = address.parse().ok();
                match parsed {
                    Some(ip) if ip.is_ipv6() == ipv6 => {
                        out.insert(std::net::SocketAddr::new(ip, number).to_string());
                    }
                    _ => {}
                }
            }
        }
    }
    out
}
