//! Writing status back: the translation's conditions as the Gateway API and
//! Ingress types say them, with `observedGeneration` and a
//! `lastTransitionTime` kept while a condition stays the same. Only what
//! changed is written (a merge patch of the status subresource).

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::{
    Gateway, GatewayStatusAddresses, GatewayStatusListeners, GatewayStatusListenersSupportedKinds,
};
use gateway_api::apis::standard::httproutes::{
    HttpRoute, HttpRouteStatusParents, HttpRouteStatusParentsParentRef,
};
use k8s_openapi::api::networking::v1::{Ingress, IngressLoadBalancerIngress};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition as K8sCondition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::kubernetes::Resources;
use crate::kubernetes::resources::{name, namespace};
use crate::kubernetes::status::{Condition, Status};

/// How a round of status writes went.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) written: usize,
    pub(crate) failed: usize,
    /// The first failure: which resource, and why.
    pub(crate) first_error: Option<String>,
}

/// Writes every status that differs from what `resources` hold. Failures
/// are counted, not logged: the caller says when writing starts and stops
/// failing.
pub(crate) async fn write(
    client: &Client,
    controller: &str,
    resources: &Resources,
    status: &Status,
) -> Tally {
    let now = Time(Timestamp::now());
    let mut tally = Tally::default();
    for class in &status.classes {
        let Some(current) = resources
            .gateway_classes
            .iter()
            .find(|c| name(&c.metadata) == class.name)
        else {
            continue;
        };
        let old = current
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let new =
            json!({ "conditions": conditions(&class.conditions, &old, class.generation, &now) });
        let api: Api<GatewayClass> = Api::all(client.clone());
        tally
            .patch(&api, &class.name, to_value(&current.status), new)
            .await;
    }
    for gw in &status.gateways {
        let Some(current) = resources
            .gateways
            .iter()
            .find(|g| namespace(&g.metadata) == gw.namespace && name(&g.metadata) == gw.name)
        else {
            continue;
        };
        let old_status = current.status.clone().unwrap_or_default();
        let old = old_status.conditions.clone().unwrap_or_default();
        let listeners: Vec<GatewayStatusListeners> = gw
            .listeners
            .iter()
            .map(|l| {
                let before = old_status
                    .listeners
                    .iter()
                    .flatten()
                    .find(|o| o.name == l.name)
                    .map(|o| o.conditions.clone())
                    .unwrap_or_default();
                GatewayStatusListeners {
                    name: l.name.clone(),
                    attached_routes: l.attached_routes,
                    conditions: conditions(&l.conditions, &before, gw.generation, &now),
                    supported_kinds: Some(
                        l.supported_kinds
                            .iter()
                            .map(|k| GatewayStatusListenersSupportedKinds {
                                group: Some(super::super::gateway::GROUP.to_owned()),
                                kind: (*k).to_owned(),
                            })
                            .collect(),
                    ),
                }
            })
            .collect();
        let addresses: Vec<GatewayStatusAddresses> = gw
            .addresses
            .iter()
            .map(|a| GatewayStatusAddresses {
                r#type: Some(
                    if a.parse::<std::net::IpAddr>().is_ok() {
                        "IPAddress"
                    } else {
                        "Hostname"
                    }
                    .to_owned(),
                ),
                value: a.clone(),
            })
            .collect();
        let new = json!({
            "conditions": conditions(&gw.conditions, &old, gw.generation, &now),
            "listeners": listeners,
            "addresses": addresses,
        });
        let api: Api<Gateway> = Api::namespaced(client.clone(), &gw.namespace);
        tally
            .patch(&api, &gw.name, to_value(&current.status), new)
            .await;
    }
    for route in &status.routes {
        let Some(current) = resources
            .http_routes
            .iter()
            .find(|r| namespace(&r.metadata) == route.namespace && name(&r.metadata) == route.name)
        else {
            continue;
        };
        let old_parents = current
            .status
            .as_ref()
            .map(|s| s.parents.clone())
            .unwrap_or_default();
        // Other controllers' entries stay as they are.
        let mut parents: Vec<HttpRouteStatusParents> = old_parents
            .iter()
            .filter(|p| p.controller_name != controller)
            .cloned()
            .collect();
        for p in &route.parents {
            let parent_ref = HttpRouteStatusParentsParentRef {
                group: Some(super::super::gateway::GROUP.to_owned()),
                kind: Some("Gateway".to_owned()),
                name: p.name.clone(),
                namespace: Some(p.namespace.clone()),
                port: p.port,
                section_name: p.section_name.clone(),
            };
            let before = old_parents
                .iter()
                .find(|o| {
                    o.controller_name == controller
                        && o.parent_ref.name == p.name
                        && o.parent_ref
                            .namespace
                            .as_deref()
                            .unwrap_or(&route.namespace)
                            == p.namespace
                        && o.parent_ref.section_name == p.section_name
                        && o.parent_ref.port == p.port
                })
                .map(|o| o.conditions.clone())
                .unwrap_or_default();
            parents.push(HttpRouteStatusParents {
                conditions: conditions(&p.conditions, &before, route.generation, &now),
                controller_name: controller.to_owned(),
                parent_ref,
            });
        }
        let new = json!({ "parents": parents });
        let api: Api<HttpRoute> = Api::namespaced(client.clone(), &route.namespace);
        tally
            .patch(&api, &route.name, to_value(&current.status), new)
            .await;
    }
    // Routes that no longer have a parent of ours keep no entry of ours.
    for current in &resources.http_routes {
        let Some(old) = &current.status else { continue };
        let (ns, n) = (namespace(&current.metadata), name(&current.metadata));
        if !old.parents.iter().any(|p| p.controller_name == controller)
            || status
                .routes
                .iter()
                .any(|r| r.namespace == ns && r.name == n)
        {
            continue;
        }
        let parents: Vec<&HttpRouteStatusParents> = old
            .parents
            .iter()
            .filter(|p| p.controller_name != controller)
            .collect();
        let api: Api<HttpRoute> = Api::namespaced(client.clone(), ns);
        tally
            .patch(
                &api,
                n,
                to_value(&current.status),
                json!({ "parents": parents }),
            )
            .await;
    }
    for ingress in &status.ingresses {
        // Nothing published: the address is not ours to say (nor to clear).
        if ingress.addresses.is_empty() {
            continue;
        }
        let Some(current) = resources.ingresses.iter().find(|i| {
            namespace(&i.metadata) == ingress.namespace && name(&i.metadata) == ingress.name
        }) else {
            continue;
        };
        let addresses: Vec<IngressLoadBalancerIngress> = ingress
            .addresses
            .iter()
            .map(|a| {
                if a.parse::<std::net::IpAddr>().is_ok() {
                    IngressLoadBalancerIngress {
                        ip: Some(a.clone()),
                        ..Default::default()
                    }
                } else {
                    IngressLoadBalancerIngress {
                        hostname: Some(a.clone()),
                        ..Default::default()
                    }
                }
            })
            .collect();
        let new = json!({ "loadBalancer": { "ingress": addresses } });
        let api: Api<Ingress> = Api::namespaced(client.clone(), &ingress.namespace);
        tally
            .patch(&api, &ingress.name, to_value(&current.status), new)
            .await;
    }
    tally
}

fn to_value<T: serde::Serialize>(status: &Option<T>) -> Value {
    status
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or(Value::Null)
}

impl Tally {
    /// Patches `status` of `name` to `new` unless every field of `new` is already so.
    async fn patch<K>(&mut self, api: &Api<K>, name: &str, old: Value, new: Value)
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let same = new.as_object().is_some_and(|fields| {
            fields.iter().all(|(k, v)| {
                old.get(k).unwrap_or(&Value::Null) == v
                    || (v.as_array().is_some_and(Vec::is_empty) && old.get(k).is_none())
            })
        });
        if same {
            return;
        }
        match api
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": new })),
            )
            .await
        {
            Ok(_) => self.written += 1,
            Err(error) => {
                tracing::debug!(%name, %error, "cannot write status");
                self.failed += 1;
                self.first_error
                    .get_or_insert_with(|| format!("{name}: {error}"));
            }
        }
    }
}

/// Our conditions as the API's, keeping `lastTransitionTime` of those whose status did not change.
fn conditions(
    ours: &[Condition],
    before: &[K8sCondition],
    generation: Option<i64>,
    now: &Time,
) -> Vec<K8sCondition> {
    ours.iter()
        .map(|c| {
            let status = if c.status { "True" } else { "False" };
            let since = before
                .iter()
                .find(|b| b.type_ == c.kind && b.status == status)
                .map_or_else(|| now.clone(), |b| b.last_transition_time.clone());
            K8sCondition {
                type_: c.kind.to_owned(),
                status: status.to_owned(),
                reason: c.reason.to_owned(),
                message: c.message.clone(),
                observed_generation: generation,
                last_transition_time: since,
            }
        })
        .collect()
}
