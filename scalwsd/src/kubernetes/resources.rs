//! The snapshot the translation reads: every resource of the kinds it uses,
//! typed as the API server sends them.

use std::collections::BTreeMap;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

/// Every resource the translation reads. ReferenceGrants of `v1beta1` and
/// `v1` are the same shape and both land in `reference_grants`.
#[derive(Clone, Debug, Default)]
pub struct Resources {
    /// `gateway.networking.k8s.io/v1` GatewayClass.
    pub gateway_classes: Vec<GatewayClass>,
    /// `gateway.networking.k8s.io/v1` Gateway.
    pub gateways: Vec<Gateway>,
    /// `gateway.networking.k8s.io/v1` HTTPRoute.
    pub http_routes: Vec<HttpRoute>,
    /// `gateway.networking.k8s.io/v1` and `v1beta1` ReferenceGrant.
    pub reference_grants: Vec<ReferenceGrant>,
    /// `networking.k8s.io/v1` Ingress.
    pub ingresses: Vec<Ingress>,
    /// `networking.k8s.io/v1` IngressClass.
    pub ingress_classes: Vec<IngressClass>,
    /// `v1` Service.
    pub services: Vec<Service>,
    /// `discovery.k8s.io/v1` EndpointSlice.
    pub endpoint_slices: Vec<EndpointSlice>,
    /// `v1` Secret (only `kubernetes.io/tls` ones are used).
    pub secrets: Vec<Secret>,
    /// `v1` Namespace.
    pub namespaces: Vec<Namespace>,
}

/// The namespace of a namespaced object (`default` when a manifest leaves it out).
pub(crate) fn namespace(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or("default")
}

/// The name of an object.
pub(crate) fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

/// The order the specification gives ties: oldest first, then by namespace and name.
pub(crate) fn age_key(meta: &ObjectMeta) -> (Option<&Time>, &str, &str) {
    // `None` sorts first: an object without a timestamp (a manifest not yet
    // applied) counts as oldest, and among those the name decides.
    (
        meta.creation_timestamp.as_ref(),
        namespace(meta),
        name(meta),
    )
}

impl Resources {
    /// A Namespace's labels (with `kubernetes.io/metadata.name`, which the API
    /// server always sets, even when the snapshot lacks the Namespace).
    pub(crate) fn namespace_labels(&self, ns: &str) -> BTreeMap<String, String> {
        let mut labels = self
            .namespaces
            .iter()
            .find(|n| name(&n.metadata) == ns)
            .and_then(|n| n.metadata.labels.clone())
            .unwrap_or_default();
        labels
            .entry("kubernetes.io/metadata.name".to_owned())
            .or_insert_with(|| ns.to_owned());
        labels
    }

    /// Whether a ReferenceGrant in `to_namespace` lets a `from_kind` (of
    /// `from_group`) in `from_namespace` refer to the `to_kind` named `to_name`.
    pub(crate) fn granted(&self, from: (&str, &str, &str), to: (&str, &str, &str, &str)) -> bool {
        let (from_group, from_kind, from_namespace) = from;
        let (to_group, to_kind, to_namespace, to_name) = to;
        self.reference_grants.iter().any(|grant| {
            namespace(&grant.metadata) == to_namespace
                && grant.spec.from.iter().any(|f| {
                    f.group == from_group && f.kind == from_kind && f.namespace == from_namespace
                })
                && grant.spec.to.iter().any(|t| {
                    t.group == to_group
                        && t.kind == to_kind
                        && t.name.as_deref().is_none_or(|n| n == to_name)
                })
        })
    }
}
