//! What the translation says about each resource: the conditions the Gateway
//! API defines, and the Ingress load-balancer addresses.
//!
//! No clock here: the controller stamps `lastTransitionTime` and
//! `observedGeneration` when it writes these back.

use std::fmt;

/// One condition: `Accepted=True`, `ResolvedRefs=False (BackendNotFound)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// `Accepted`, `Programmed`, `ResolvedRefs`, `Conflicted`, `PartiallyInvalid`.
    pub kind: &'static str,
    /// The condition's truth.
    pub status: bool,
    /// The Gateway API reason (`Accepted`, `BackendNotFound`, ...).
    pub reason: &'static str,
    /// A sentence for people.
    pub message: String,
}

impl Condition {
    /// A true condition whose reason is its own type (`Accepted`/`Accepted`).
    pub fn ok(kind: &'static str) -> Self {
        Self {
            kind,
            status: true,
            reason: kind,
            message: String::new(),
        }
    }

    /// A condition with this truth, reason and message.
    pub fn new(
        kind: &'static str,
        status: bool,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            status,
            reason,
            message: message.into(),
        }
    }
}

/// `GatewayClass NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassStatus {
    /// The class's name.
    pub name: String,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// Its conditions.
    pub conditions: Vec<Condition>,
}

/// `Gateway NS/NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayStatus {
    /// The Gateway's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// Accepted and Programmed.
    pub conditions: Vec<Condition>,
    /// One per listener, in spec order.
    pub listeners: Vec<ListenerStatus>,
    /// Where clients reach it (`--publish` addresses), if known.
    pub addresses: Vec<String>,
}

impl GatewayStatus {
    /// The Gateway's own conditions, from its listeners': all programmed,
    /// some (`Accepted=True (ListenersNotValid)`), or none.
    pub(crate) fn recount(&mut self) {
        let total = self.listeners.len();
        let invalid = self
            .listeners
            .iter()
            .filter(|l| {
                l.conditions
                    .iter()
                    .any(|c| c.kind == "Programmed" && !c.status)
            })
            .count();
        self.conditions = if invalid == 0 {
            vec![Condition::ok("Accepted"), Condition::ok("Programmed")]
        } else if invalid < total {
            vec![
                Condition::new(
                    "Accepted",
                    true,
                    "ListenersNotValid",
                    format!("{invalid} of {total} listeners are not valid"),
                ),
                Condition::ok("Programmed"),
            ]
        } else {
            vec![
                Condition::new(
                    "Accepted",
                    false,
                    "ListenersNotValid",
                    "no listener is valid",
                ),
                Condition::new("Programmed", false, "Invalid", "no listener is valid"),
            ]
        };
    }
}

/// One listener of a Gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerStatus {
    /// The listener's name.
    pub name: String,
    /// Its port (the one clients see).
    pub port: i32,
    /// Routes attached to it.
    pub attached_routes: i32,
    /// The route kinds it takes (`HTTPRoute`, or none).
    pub supported_kinds: Vec<&'static str>,
    /// Accepted, Programmed, ResolvedRefs, Conflicted.
    pub conditions: Vec<Condition>,
}

/// `HTTPRoute NS/NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteStatus {
    /// The route's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// One per parentRef that names a Gateway of ours.
    pub parents: Vec<ParentStatus>,
}

/// The status of a route under one parentRef.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParentStatus {
    /// The Gateway's namespace (the route's when the ref leaves it out).
    pub namespace: String,
    /// The Gateway's name.
    pub name: String,
    /// `sectionName`, as written.
    pub section_name: Option<String>,
    /// `port`, as written.
    pub port: Option<i32>,
    /// Accepted and ResolvedRefs (and PartiallyInvalid when some rules are).
    pub conditions: Vec<Condition>,
}

/// `Ingress NS/NAME`: ours, and where it is served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IngressStatus {
    /// The Ingress's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// `status.loadBalancer.ingress` (IPs or host names), from `--publish`.
    pub addresses: Vec<String>,
    /// What could not be used (a TLS Secret, a backend), for people.
    pub problems: Vec<String>,
}

/// Everything the translation says about the resources it read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// GatewayClasses of ours.
    pub classes: Vec<ClassStatus>,
    /// Gateways of our classes.
    pub gateways: Vec<GatewayStatus>,
    /// HTTPRoutes with a parent of ours.
    pub routes: Vec<RouteStatus>,
    /// Ingresses of our class.
    pub ingresses: Vec<IngressStatus>,
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let truth = if self.status { "True" } else { "False" };
        write!(f, "{}={truth}", self.kind)?;
        if !self.status || self.reason != self.kind {
            write!(f, " ({})", self.reason)?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

impl fmt::Display for Status {
    /// One line per condition, as `scalwsd translate` prints them:
    /// `HTTPRoute NS/NAME parent NS/GATEWAY: Accepted=True`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for class in &self.classes {
            for c in &class.conditions {
                writeln!(f, "GatewayClass {}: {c}", class.name)?;
            }
        }
        for gw in &self.gateways {
            for c in &gw.conditions {
                writeln!(f, "Gateway {}/{}: {c}", gw.namespace, gw.name)?;
            }
            for l in &gw.listeners {
                for c in &l.conditions {
                    writeln!(
                        f,
                        "Gateway {}/{} listener {}: {c}",
                        gw.namespace, gw.name, l.name
                    )?;
                }
                writeln!(
                    f,
                    "Gateway {}/{} listener {}: attachedRoutes={}",
                    gw.namespace, gw.name, l.name, l.attached_routes
                )?;
            }
        }
        for route in &self.routes {
            for parent in &route.parents {
                let mut label = format!("{}/{}", parent.namespace, parent.name);
                if let Some(section) = &parent.section_name {
                    label.push_str(&format!(" section {section}"));
                }
                if let Some(port) = parent.port {
                    label.push_str(&format!(" port {port}"));
                }
                for c in &parent.conditions {
                    writeln!(
                        f,
                        "HTTPRoute {}/{} parent {label}: {c}",
                        route.namespace, route.name
                    )?;
                }
            }
        }
        for ingress in &self.ingresses {
            let addresses = if ingress.addresses.is_empty() {
                "(none published)".to_owned()
            } else {
                ingress.addresses.join(",")
            };
            writeln!(
                f,
                "Ingress {}/{}: loadBalancer={addresses}",
                ingress.namespace, ingress.name
            )?;
            for problem in &ingress.problems {
                writeln!(
                    f,
                    "Ingress {}/{}: {problem}",
                    ingress.namespace, ingress.name
                )?;
            }
        }
        Ok(())
    }
}
