//! Every manifest in `deploy/` parses into its typed Kubernetes struct, with
//! no field the type does not know; the RBAC grants exactly what the
//! controller uses; the Deployment runs the controller as documented.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service, ServiceAccount};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn manifests() -> Vec<(PathBuf, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let mut files = Vec::new();
    for sub in [dir.clone(), dir.join("example")] {
        for entry in std::fs::read_dir(&sub).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut docs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let values: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        docs.extend(
            values
                .into_iter()
                .filter(|v| !v.is_null())
                .map(|v| (file.clone(), v)),
        );
    }
    docs
}

/// `value` as `T`, refusing fields `T` does not have.
fn typed<T: DeserializeOwned + Serialize>(file: &Path, value: &Value) -> T {
    let parsed: T =
        serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let back = serde_json::to_value(&parsed).unwrap();
    if let Some(path) = dropped(value, &back, String::new()) {
        panic!("{}: unknown field {path}", file.display());
    }
    parsed
}

fn dropped(original: &Value, back: &Value, path: String) -> Option<String> {
    match (original, back) {
        (Value::Object(a), Value::Object(b)) => a.iter().find_map(|(k, v)| {
            let here = format!("{path}.{k}");
            match b.get(k) {
                None if !v.is_null() => Some(here),
                None => None,
                Some(w) => dropped(v, w, here),
            }
        }),
        (Value::Array(a), Value::Array(b)) => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (v, w))| dropped(v, w, format!("{path}[{i}]"))),
        _ => None,
    }
}

#[test]
fn every_deploy_manifest_is_a_valid_typed_resource() {
    let mut cluster_role = None;
    let mut role = None;
    let mut deployment = None;
    let mut kinds = Vec::new();
    for (file, doc) in manifests() {
        let kind = doc["kind"].as_str().unwrap().to_owned();
        match kind.as_str() {
            "Namespace" => drop(typed::<Namespace>(&file, &doc)),
            "ServiceAccount" => drop(typed::<ServiceAccount>(&file, &doc)),
            "ClusterRole" => cluster_role = Some(typed::<ClusterRole>(&file, &doc)),
            "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(&file, &doc)),
            "Role" => role = Some(typed::<Role>(&file, &doc)),
            "RoleBinding" => drop(typed::<RoleBinding>(&file, &doc)),
            "Deployment" => {
                let d = typed::<Deployment>(&file, &doc);
                if d.metadata.name.as_deref() == Some("scalws") {
                    deployment = Some(d);
                }
            }
            "Service" => drop(typed::<Service>(&file, &doc)),
            "IngressClass" => drop(typed::<IngressClass>(&file, &doc)),
            "GatewayClass" => drop(typed::<GatewayClass>(&file, &doc)),
            "Gateway" => drop(typed::<Gateway>(&file, &doc)),
            "HTTPRoute" => drop(typed::<HttpRoute>(&file, &doc)),
            "Ingress" => drop(typed::<Ingress>(&file, &doc)),
            "EndpointSlice" => drop(typed::<EndpointSlice>(&file, &doc)),
            // kustomize's own file, not a cluster resource.
            "Kustomization" => {}
            other => panic!("{}: a {other} is not checked by this test", file.display()),
        }
        kinds.push(kind);
    }
    for needed in [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "Role",
        "Deployment",
        "Service",
        "IngressClass",
        "GatewayClass",
    ] {
        assert!(kinds.iter().any(|k| k == needed), "deploy/ has no {needed}");
    }

    // RBAC: read every kind the controller watches, write only status and the Lease.
    let rules = cluster_role.unwrap().rules.unwrap();
    let allows = |rules: &[PolicyRule], group: &str, resource: &str, verb: &str| {
        rules.iter().any(|r| {
            r.api_groups.iter().flatten().any(|g| g == group)
                && r.resources.iter().flatten().any(|x| x == resource)
                && r.verbs.iter().any(|v| v == verb)
        })
    };
    for (group, resource) in [
        ("gateway.networking.k8s.io", "gatewayclasses"),
        ("gateway.networking.k8s.io", "gateways"),
        ("gateway.networking.k8s.io", "httproutes"),
        ("gateway.networking.k8s.io", "referencegrants"),
        ("networking.k8s.io", "ingresses"),
        ("networking.k8s.io", "ingressclasses"),
        ("", "services"),
        ("", "secrets"),
        ("", "namespaces"),
        ("discovery.k8s.io", "endpointslices"),
    ] {
        for verb in ["list", "watch"] {
            assert!(
                allows(&rules, group, resource, verb),
                "{verb} {group}/{resource}"
            );
        }
        assert!(
            !allows(&rules, group, resource, "patch") && !allows(&rules, group, resource, "update"),
            "{group}/{resource} is read only"
        );
    }
    for (group, resource) in [
        ("gateway.networking.k8s.io", "gatewayclasses/status"),
        ("gateway.networking.k8s.io", "gateways/status"),
        ("gateway.networking.k8s.io", "httproutes/status"),
        ("networking.k8s.io", "ingresses/status"),
    ] {
        assert!(
            allows(&rules, group, resource, "patch"),
            "patch {group}/{resource}"
        );
    }
    for rule in &rules {
        for verb in &rule.verbs {
            assert!(
                ["get", "list", "watch", "patch", "update"].contains(&verb.as_str()),
                "unexpected verb {verb}"
            );
        }
    }
    let lease_rules = role.unwrap().rules.unwrap();
    for verb in ["get", "create", "update"] {
        assert!(
            allows(&lease_rules, "coordination.k8s.io", "leases", verb),
            "{verb} leases"
        );
    }

    // The Deployment: the controller, two replicas, health on the admin port, no root.
    let deployment = deployment.unwrap();
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.unwrap();
    let container = &pod.containers[0];
    assert_eq!(
        container.args.as_deref(),
        Some(&["--kubernetes".to_owned()][..])
    );
    let probe = container
        .readiness_probe
        .as_ref()
        .unwrap()
        .http_get
        .as_ref()
        .unwrap();
    assert_eq!(probe.path.as_deref(), Some("/healthz"));
    let security = container.security_context.as_ref().unwrap();
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.run_as_non_root, Some(true));
    // The flag the Deployment passes is one scalwsd accepts.
    let bin = env!("CARGO_BIN_EXE_scalwsd");
    let help = std::process::Command::new(bin)
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in ["--kubernetes", "--namespace", "--publish", "--admin"] {
        assert!(help.contains(flag), "scalwsd --help lacks {flag}");
    }
}
