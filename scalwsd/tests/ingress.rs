//! Ingress v1 end to end: the path table of the Kubernetes documentation and
//! the cases of kubernetes-sigs/ingress-controller-conformance (path rules,
//! host rules with TLS, default backend, class, load balancing), as manifests
//! -> translation -> a live gateway -> requests to echo backends.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;

use support::cluster::{echo, expect, get, seen, send, serve, service};

const NS: &str = "ingress";
const NAMES: [&str; 8] = [
    "foo-exact",
    "foo-prefix",
    "aaa-slash-bbb-prefix",
    "aaa-prefix",
    "aaa-slash-bbb-slash-prefix",
    "foo-slash-exact",
    "wildcard-foo-com",
    "foo-bar-com",
];

/// Echo servers and Services for `NAMES`, plus `echo-service` in front of three endpoints.
async fn services() -> (String, Vec<test_support::upstream::Upstream>) {
    let mut text = String::from(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: { name: scalws }\nspec: { controller: scalws.io/ingress-controller }\n",
    );
    let mut servers = Vec::new();
    for name in NAMES {
        let server = echo(NS, name).await;
        text.push_str(&service(NS, name, server.addr));
        servers.push(server);
    }
    let mut endpoints = Vec::new();
    for _ in 0..3 {
        let server = echo(NS, "echo-service").await;
        endpoints.push("{ addresses: [\"127.0.0.1\"], conditions: { ready: true } }".to_owned());
        servers.push(server);
    }
    // One slice per endpoint: each echo server has its own port.
    text.push_str("\n---\napiVersion: v1\nkind: Service\nmetadata: { name: echo-service, namespace: ingress }\nspec: { ports: [{ name: http, port: 8080 }] }\n");
    for (i, server) in servers[NAMES.len()..].iter().enumerate() {
        text.push_str(&format!(
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{ name: echo-service-{i}, namespace: ingress, labels: {{ kubernetes.io/service-name: echo-service }} }}\naddressType: IPv4\nports: [{{ name: http, port: {} }}]\nendpoints: [{}]\n",
            server.addr.port(),
            endpoints[i]
        ));
    }
    (text, servers)
}

fn ingress(name: &str, spec: &str) -> String {
    format!(
        "\n---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{ name: {name}, namespace: ingress }}\nspec:\n{spec}"
    )
}

fn path(kind: &str, path: &str, service: &str) -> String {
    format!(
        "{{ pathType: {kind}, path: {path}, backend: {{ service: {{ name: {service}, port: {{ number: 8080 }} }} }} }}"
    )
}

#[tokio::test]
async fn path_rules() {
    let (mut text, _servers) = services().await;
    text.push_str(&ingress(
        "path-rules",
        &format!(
            "  ingressClassName: scalws
  rules:
    - {{ host: exact-path-rules, http: {{ paths: [{}] }} }}
    - {{ host: prefix-path-rules, http: {{ paths: [{}, {}, {}] }} }}
    - {{ host: mixed-path-rules, http: {{ paths: [{}, {}] }} }}
    - {{ host: trailing-slash-path-rules, http: {{ paths: [{}, {}] }} }}
    - {{ host: implementation-specific, http: {{ paths: [{}] }} }}
",
            path("Exact", "/foo", "foo-exact"),
            path("Prefix", "/foo", "foo-prefix"),
            path("Prefix", "/aaa/bbb", "aaa-slash-bbb-prefix"),
            path("Prefix", "/aaa", "aaa-prefix"),
            path("Prefix", "/foo", "foo-prefix"),
            path("Exact", "/foo", "foo-exact"),
            path("Prefix", "/aaa/bbb/", "aaa-slash-bbb-slash-prefix"),
            path("Exact", "/foo/", "foo-slash-exact"),
            path("ImplementationSpecific", "/foo", "foo-prefix"),
        ),
    ));
    let served = serve(&text, &[80]);
    let addr = served.ports[&80];
    for (host, path, want) in [
        ("exact-path-rules", "/foo", Ok("foo-exact")),
        ("exact-path-rules", "/foo/", Err(404)),
        ("exact-path-rules", "/FOO", Err(404)),
        ("exact-path-rules", "/bar", Err(404)),
        ("prefix-path-rules", "/foo", Ok("foo-prefix")),
        ("prefix-path-rules", "/foo/", Ok("foo-prefix")),
        ("prefix-path-rules", "/FOO", Err(404)),
        ("prefix-path-rules", "/aaa/bbb", Ok("aaa-slash-bbb-prefix")),
        (
            "prefix-path-rules",
            "/aaa/bbb/ccc",
            Ok("aaa-slash-bbb-prefix"),
        ),
        ("prefix-path-rules", "/aaa/bbbxyz", Ok("aaa-prefix")),
        ("prefix-path-rules", "/aaa/ccc", Ok("aaa-prefix")),
        ("prefix-path-rules", "/aaaccc", Err(404)),
        ("mixed-path-rules", "/foo", Ok("foo-exact")),
        ("mixed-path-rules", "/foo/x", Ok("foo-prefix")),
        (
            "trailing-slash-path-rules",
            "/aaa/bbb",
            Ok("aaa-slash-bbb-slash-prefix"),
        ),
        (
            "trailing-slash-path-rules",
            "/aaa/bbb/",
            Ok("aaa-slash-bbb-slash-prefix"),
        ),
        ("trailing-slash-path-rules", "/foo", Err(404)),
        ("trailing-slash-path-rules", "/foo/", Ok("foo-slash-exact")),
        ("implementation-specific", "/foo/bar", Ok("foo-prefix")),
        ("implementation-specific", "/foobar", Err(404)),
        ("no-such-host", "/foo", Err(404)),
    ] {
        expect(&get(addr, host, path).await, want, &format!("{host}{path}"));
    }
    assert!(
        served
            .status
            .contains("Ingress ingress/path-rules: loadBalancer="),
        "{}",
        served.status
    );
}

#[tokio::test]
async fn host_rules_with_tls_and_port_names() {
    let (mut text, _servers) = services().await;
    let ca = test_support::tls::TestCa::new();
    let (cert, key) = ca.issue_pem(&["foo.bar.com"]);
    text.push_str("\n---\n");
    text.push_str(&support::cluster::tls_secret(
        "ingress",
        "conformance-tls",
        &cert,
        &key,
    ));
    text.push_str(&ingress(
        "host-rules",
        "  ingressClassName: scalws
  tls: [{ hosts: [foo.bar.com], secretName: conformance-tls }]
  rules:
    - { host: \"*.foo.com\", http: { paths: [{ pathType: Prefix, path: /, backend: { service: { name: wildcard-foo-com, port: { number: 8080 } } } }] } }
    - { host: foo.bar.com, http: { paths: [{ pathType: Prefix, path: /, backend: { service: { name: foo-bar-com, port: { name: http } } } }] } }
",
    ));
    let served = serve(&text, &[80, 443]);
    let addr = served.ports[&80];
    for (host, want) in [
        ("foo.bar.com", Ok("foo-bar-com")),
        ("subdomain.bar.com", Err(404)),
        ("bar.foo.com", Ok("wildcard-foo-com")),
        ("baz.bar.foo.com", Err(404)),
        ("foo.com", Err(404)),
    ] {
        let seen = get(addr, host, "/").await;
        expect(&seen, want, host);
        if want.is_ok() {
            assert_eq!(seen.saw("host"), Some(host));
        }
    }
    let request = test_support::request("GET", "foo.bar.com", "/")
        .body(Default::default())
        .unwrap();
    let reply = test_support::tls::https(
        ca.client_config(&[b"h2"]),
        served.ports[&443],
        "foo.bar.com",
        true,
        request,
    )
    .await;
    expect(&seen(reply.reply), Ok("foo-bar-com"), "https");
}

#[tokio::test]
async fn default_backend_class_and_load_balancing() {
    let (mut text, servers) = services().await;
    text.push_str(&ingress(
        "default-backend",
        "  ingressClassName: scalws\n  defaultBackend: { service: { name: echo-service, port: { number: 8080 } } }\n  rules: [{ host: my-host, http: { paths: [{ pathType: Exact, path: /only, backend: { service: { name: foo-exact, port: { number: 8080 } } } }] } }]\n",
    ));
    text.push_str(&ingress(
        "other-class",
        "  ingressClassName: some-invalid-class-name\n  rules: [{ host: other, http: { paths: [{ pathType: Prefix, path: /, backend: { service: { name: foo-prefix, port: { number: 8080 } } } }] } }]\n",
    ));
    let served = serve(&text, &[80]);
    let addr = served.ports[&80];
    for (method, host, path) in [
        ("GET", "my-host", "/"),
        ("GET", "my-host", "/sub-path"),
        ("POST", "some-host", "/"),
        ("DELETE", "some-host", "/resource"),
        ("PATCH", "my-host", "/resource"),
        ("GET", "other", "/"),
    ] {
        let seen = send(addr, method, host, path, &[]).await;
        expect(&seen, Ok("echo-service"), &format!("{method} {host}{path}"));
        assert_eq!(seen.saw("method"), Some(method));
        assert_eq!(seen.saw("path"), Some(path));
    }
    expect(
        &get(addr, "my-host", "/only").await,
        Ok("foo-exact"),
        "a rule beats the default",
    );
    assert!(
        !served.status.contains("ingress/other-class"),
        "another class's Ingress is not ours:\n{}",
        served.status
    );

    let mut hit = BTreeSet::new();
    for _ in 0..60 {
        get(addr, "any", "/").await;
    }
    for server in &servers[NAMES.len()..] {
        if server.hits() > 0 {
            hit.insert(server.addr);
        }
    }
    assert_eq!(
        hit.len(),
        3,
        "every endpoint of the default backend takes requests"
    );
}

#[tokio::test]
async fn ingress_without_class_is_ours_when_the_default_class_is() {
    let (mut text, _servers) = services().await;
    text = text.replace(
        "metadata: { name: scalws }\nspec: { controller: scalws.io/ingress-controller }",
        "metadata: { name: scalws, annotations: { ingressclass.kubernetes.io/is-default-class: \"true\" } }\nspec: { controller: scalws.io/ingress-controller }",
    );
    text.push_str(&ingress(
        "no-class",
        &format!(
            "  rules: [{{ host: a.example, http: {{ paths: [{}] }} }}]\n",
            path("Prefix", "/", "foo-prefix")
        ),
    ));
    text.push_str(&format!(
        "\n---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{ name: by-annotation, namespace: ingress, annotations: {{ kubernetes.io/ingress.class: scalws }} }}\nspec:\n  rules: [{{ host: b.example, http: {{ paths: [{}] }} }}]\n",
        path("Prefix", "/", "foo-exact")
    ));
    let served = serve(&text, &[80]);
    let addr = served.ports[&80];
    expect(
        &get(addr, "a.example", "/").await,
        Ok("foo-prefix"),
        "no class, default class ours",
    );
    expect(
        &get(addr, "b.example", "/").await,
        Ok("foo-exact"),
        "the old annotation",
    );
}

#[tokio::test]
async fn classes_of_other_controllers_and_a_gateway_on_the_same_port() {
    let (mut text, _servers) = services().await;
    // `scalws` is an IngressClass of another controller here: not ours, even though it is --class.
    text = text.replace(
        "spec: { controller: scalws.io/ingress-controller }",
        "spec: { controller: example.com/other }",
    );
    text.push_str(&ingress("theirs", &format!("  ingressClassName: scalws\n  rules: [{{ host: theirs.example, http: {{ paths: [{}] }} }}]\n", path("Prefix", "/", "foo-prefix"))));
    text.push_str("\n---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: { name: ours }\nspec: { controller: scalws.io/ingress-controller }\n");
    text.push_str(&ingress(
        "mine",
        &format!(
            "  ingressClassName: ours\n  defaultBackend: {{ service: {{ name: echo-service, port: {{ number: 8080 }} }} }}\n  rules: [{{ host: mine.example, http: {{ paths: [{}] }} }}]\n",
            path("Exact", "/exact", "foo-exact")
        ),
    ));
    text.push_str(&ingress(
        "younger-default",
        "  ingressClassName: ours\n  defaultBackend: { service: { name: foo-prefix, port: { number: 8080 } } }\n",
    ));
    // A Gateway listener without a hostname on port 80 owns every other host there.
    text.push_str("\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: { name: scalws }\nspec: { controllerName: scalws.io/gateway-controller }\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: { name: web, namespace: ingress }\nspec: { gatewayClassName: scalws, listeners: [{ name: http, port: 80, protocol: HTTP }] }\n");
    let served = serve(&text, &[80]);
    let addr = served.ports[&80];
    expect(
        &get(addr, "theirs.example", "/").await,
        Err(404),
        "another controller's class",
    );
    expect(
        &get(addr, "mine.example", "/exact").await,
        Ok("foo-exact"),
        "ours",
    );
    expect(
        &get(addr, "mine.example", "/other").await,
        Ok("echo-service"),
        "the oldest default backend",
    );
    expect(
        &get(addr, "unknown.example", "/").await,
        Err(404),
        "the Gateway's listener answers other hosts",
    );
    assert!(served.status.contains("Ingress ingress/younger-default: defaultBackend not used: the older Ingress ingress/mine has one"), "{}", served.status);
    assert!(
        !served.status.contains("ingress/theirs"),
        "{}",
        served.status
    );
}
