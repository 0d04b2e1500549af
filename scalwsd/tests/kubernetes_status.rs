//! The status the translation gives Gateways, their listeners and routes, for
//! the conformance suite's Gateway cases (TLS configuration, Secret references,
//! route kinds, attached routes), and what still serves when some are invalid.
#![allow(clippy::unwrap_used)]

mod support;

use scalwsd::kubernetes::{Options, Resources, manifests, translate};
use support::cluster::{Backends, expect, get, serve, tls_secret};

const HEAD: &str = "apiVersion: v1\nkind: Namespace\nmetadata: { name: gateway-conformance-infra }\n---\napiVersion: v1\nkind: Namespace\nmetadata: { name: gateway-conformance-web-backend }\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: { name: scalws }\nspec: { controllerName: scalws.io/gateway-controller }\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: { name: other }\nspec: { controllerName: example.com/other }\n";

fn status_of(yaml: &str) -> String {
    let mut resources = Resources::default();
    manifests::read_str("test.yaml", &format!("{HEAD}---\n{yaml}"), &mut resources).unwrap();
    translate(&resources, &Options::default())
        .status
        .to_string()
}

fn https_gateway(name: &str, certificate_ref: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: {name}, namespace: gateway-conformance-infra }}\nspec:\n  gatewayClassName: scalws\n  listeners: [{{ name: https, port: 443, protocol: HTTPS, allowedRoutes: {{ namespaces: {{ from: All }} }}, tls: {{ certificateRefs: [{certificate_ref}] }} }}]\n"
    )
}

fn assert_lines(status: &str, lines: &[String]) {
    for line in lines {
        assert!(
            status.contains(line.as_str()),
            "missing {line:?} in\n{status}"
        );
    }
}

#[test]
fn invalid_tls_configurations_are_invalid_certificate_refs() {
    let ca = test_support::tls::TestCa::new();
    let (cert, _) = ca.issue_pem(&["a.example"]);
    let (_, other_key) = ca.issue_pem(&["b.example"]);
    let docs = [
        https_gateway("nonexistent-secret", "{ name: nonexistent-certificate }"),
        https_gateway("unsupported-group", "{ group: wrong.group.company.io, kind: Secret, name: tls-validity-checks-certificate }"),
        https_gateway("unsupported-kind", "{ group: \"\", kind: WrongKind, name: tls-validity-checks-certificate }"),
        https_gateway("malformed-secret", "{ name: malformed-certificate }"),
        tls_secret("gateway-conformance-infra", "malformed-certificate", "Hello world", "Hello world"),
        https_gateway("mismatched-key", "{ name: mismatched }"),
        tls_secret("gateway-conformance-infra", "mismatched", &cert, &other_key),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: { name: not-ours, namespace: gateway-conformance-infra }\nspec: { gatewayClassName: other, listeners: [{ name: http, port: 80, protocol: HTTP }] }\n".to_owned(),
    ];
    let status = status_of(&docs.join("---\n"));
    let mut lines = Vec::new();
    for gw in [
        "nonexistent-secret",
        "unsupported-group",
        "unsupported-kind",
        "malformed-secret",
    ] {
        let at = format!("Gateway gateway-conformance-infra/{gw}");
        lines.push(format!(
            "{at} listener https: ResolvedRefs=False (InvalidCertificateRef)"
        ));
        lines.push(format!("{at} listener https: Programmed=False (Invalid)"));
        lines.push(format!("{at} listener https: attachedRoutes=0"));
        lines.push(format!("{at}: Accepted=False (ListenersNotValid)"));
    }
    assert_lines(&status, &lines);
    assert!(
        status.contains("tls.crt holds no PEM certificate"),
        "{status}"
    );
    assert!(
        !status.contains("not-ours"),
        "another controller's Gateway gets no status:\n{status}"
    );
    assert!(!status.contains("GatewayClass other"), "{status}");
    assert!(
        status.contains("GatewayClass scalws: Accepted=True"),
        "{status}"
    );
}

#[test]
fn secrets_in_other_namespaces_need_a_reference_grant() {
    let ca = test_support::tls::TestCa::new();
    let (cert, key) = ca.issue_pem(&["secure.example"]);
    let cross = "{ name: certificate, namespace: gateway-conformance-web-backend }";
    let grant = |name: &str, to: &str, from_kind: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{ name: {name}, namespace: gateway-conformance-web-backend }}\nspec:\n  from: [{{ group: gateway.networking.k8s.io, kind: {from_kind}, namespace: gateway-conformance-infra }}]\n  to: [{to}]\n"
        )
    };
    for (docs, want) in [
        (
            vec![grant("all", "{ group: \"\", kind: Secret }", "Gateway")],
            "Programmed=True",
        ),
        (
            vec![grant(
                "specific",
                "{ group: \"\", kind: Secret, name: certificate }",
                "Gateway",
            )],
            "Programmed=True",
        ),
        (vec![], "ResolvedRefs=False (RefNotPermitted)"),
        (
            vec![
                grant(
                    "wrong-from-kind",
                    "{ group: \"\", kind: Secret }",
                    "HTTPRoute",
                ),
                grant("wrong-to-kind", "{ group: \"\", kind: Service }", "Gateway"),
                grant(
                    "wrong-name",
                    "{ group: \"\", kind: Secret, name: not-the-certificate }",
                    "Gateway",
                ),
            ],
            "ResolvedRefs=False (RefNotPermitted)",
        ),
    ] {
        let mut all = vec![
            https_gateway("gateway-secret-reference-grant", cross),
            tls_secret(
                "gateway-conformance-web-backend",
                "certificate",
                &cert,
                &key,
            ),
        ];
        all.extend(docs);
        let status = status_of(&all.join("---\n"));
        assert_lines(
            &status,
            &[format!(
                "Gateway gateway-conformance-infra/gateway-secret-reference-grant listener https: {want}"
            )],
        );
    }
}

#[test]
fn route_kinds_attached_routes_and_conflicts() {
    let gateway = |name: &str, listeners: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: {name}, namespace: gateway-conformance-infra }}\nspec:\n  gatewayClassName: scalws\n  listeners: {listeners}\n"
        )
    };
    let route = |name: &str, parents: &str, hostnames: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{ name: {name}, namespace: gateway-conformance-infra }}\nspec:\n  parentRefs: {parents}\n  hostnames: {hostnames}\n  rules: [{{ backendRefs: [{{ name: infra-backend-v1, port: 8080 }}] }}]\n"
        )
    };
    let (cert, key) = test_support::tls::TestCa::new().issue_pem(&["conflict.example"]);
    let selector = "allowedRoutes: { kinds: [{ kind: HTTPRoute }], namespaces: { from: Selector, selector: { matchLabels: { kubernetes.io/metadata.name: gateway-conformance-infra } } } }";
    let docs = [
        gateway(
            "only-invalid-route-kind",
            "[{ name: http, port: 8081, protocol: HTTP, allowedRoutes: { kinds: [{ kind: InvalidRoute }] } }]",
        ),
        gateway(
            "supported-and-invalid-route-kind",
            "[{ name: http, port: 8082, protocol: HTTP, allowedRoutes: { kinds: [{ kind: InvalidRoute }, { kind: HTTPRoute }] } }]",
        ),
        gateway(
            "one-attached",
            &format!("[{{ name: http, port: 80, protocol: HTTP, {selector} }}]"),
        ),
        gateway(
            "two-attached",
            &format!(
                "[{{ name: http, port: 80, protocol: HTTP, hostname: foo.example.com, {selector} }}]"
            ),
        ),
        gateway(
            "unresolved",
            &format!(
                "[{{ name: tls, port: 443, protocol: HTTPS, {selector}, tls: {{ mode: Terminate, certificateRefs: [{{ name: does-not-exist }}] }} }}]"
            ),
        ),
        gateway(
            "tcp",
            "[{ name: tcp, port: 9000, protocol: TCP }, { name: http, port: 9001, protocol: HTTP }]",
        ),
        gateway(
            "zz-conflicting",
            "[{ name: https-on-80, port: 80, protocol: HTTPS, tls: { certificateRefs: [{ name: good }] } }]",
        ),
        tls_secret("gateway-conformance-infra", "good", &cert, &key),
        route("http-route-1", "[{ name: one-attached }]", "[]"),
        route("http-route-2", "[{ name: two-attached }]", "[]"),
        route("http-route-3", "[{ name: two-attached }]", "[]"),
        route(
            "http-route-not-accepted",
            "[{ name: two-attached }]",
            "[not-accepted.test.com]",
        ),
        route(
            "http-route-4",
            "[{ name: unresolved, sectionName: tls }]",
            "[]",
        ),
        route(
            "http-route-kinds",
            "[{ name: only-invalid-route-kind }]",
            "[]",
        ),
        route("to-tcp", "[{ name: tcp, sectionName: tcp }]", "[]"),
        route(
            "twice",
            "[{ name: supported-and-invalid-route-kind, sectionName: http }, { name: supported-and-invalid-route-kind, port: 8082 }]",
            "[]",
        ),
    ];
    let status = status_of(&docs.join("---\n"));
    let at = |gw: &str| format!("Gateway gateway-conformance-infra/{gw}");
    let route_at = |r: &str, gw: &str| {
        format!("HTTPRoute gateway-conformance-infra/{r} parent gateway-conformance-infra/{gw}")
    };
    assert_lines(
        &status,
        &[
            format!(
                "{} listener http: ResolvedRefs=False (InvalidRouteKinds)",
                at("only-invalid-route-kind")
            ),
            format!(
                "{} listener http: attachedRoutes=0",
                at("only-invalid-route-kind")
            ),
            format!(
                "{}: Accepted=False (NotAllowedByListeners)",
                route_at("http-route-kinds", "only-invalid-route-kind")
            ),
            format!(
                "{} listener http: ResolvedRefs=False (InvalidRouteKinds)",
                at("supported-and-invalid-route-kind")
            ),
            format!(
                "{} listener http: Programmed=True",
                at("supported-and-invalid-route-kind")
            ),
            format!("{} listener http: attachedRoutes=1", at("one-attached")),
            format!("{} listener http: attachedRoutes=2", at("two-attached")),
            format!(
                "{}: Accepted=False (NoMatchingListenerHostname)",
                route_at("http-route-not-accepted", "two-attached")
            ),
            format!(
                "{} listener tls: Programmed=False (Invalid)",
                at("unresolved")
            ),
            format!(
                "{} listener tls: ResolvedRefs=False (InvalidCertificateRef)",
                at("unresolved")
            ),
            format!("{} listener tls: attachedRoutes=1", at("unresolved")),
            format!(
                "{} section tls: ResolvedRefs=False (BackendNotFound)",
                route_at("http-route-4", "unresolved")
            ),
            format!(
                "{} listener tcp: Accepted=False (UnsupportedProtocol)",
                at("tcp")
            ),
            format!("{} listener http: Programmed=True", at("tcp")),
            format!("{}: Accepted=True (ListenersNotValid)", at("tcp")),
            format!(
                "{} section tcp: Accepted=False (NotAllowedByListeners)",
                route_at("to-tcp", "tcp")
            ),
            format!(
                "{} listener https-on-80: Conflicted=True (ProtocolConflict)",
                at("zz-conflicting")
            ),
        ],
    );
}

#[tokio::test]
async fn an_invalid_listener_leaves_the_rest_serving() {
    let backends = Backends::start().await;
    let yaml = format!(
        "{HEAD}---\n{}---
apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: mixed, namespace: gateway-conformance-infra }}
spec:
  gatewayClassName: scalws
  listeners:
    - {{ name: broken, port: 443, protocol: HTTPS, tls: {{ certificateRefs: [{{ name: missing }}] }} }}
    - {{ name: http, port: 80, protocol: HTTP }}
---
apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: empty, namespace: gateway-conformance-infra }}
spec: {{ gatewayClassName: scalws, listeners: [{{ name: http, port: 8080, protocol: HTTP }}] }}
---
apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{ name: r, namespace: gateway-conformance-infra }}
spec: {{ parentRefs: [{{ name: mixed }}], rules: [{{ backendRefs: [{{ name: infra-backend-v1, port: 8080 }}] }}] }}
",
        backends.manifests().trim_start_matches("\n---\n")
    );
    let served = serve(&yaml, &[80, 8080]);
    expect(
        &get(served.ports[&80], "a.example", "/").await,
        Ok("infra-backend-v1"),
        "the valid listener serves",
    );
    expect(
        &get(served.ports[&8080], "a.example", "/").await,
        Err(404),
        "a Gateway without routes serves 404",
    );
    assert!(
        !served.ports.contains_key(&443),
        "the invalid listener is left out"
    );
}
