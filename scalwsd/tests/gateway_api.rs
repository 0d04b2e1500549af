//! Gateway API, end to end: the cases of the conformance suite
//! (kubernetes-sigs/gateway-api, conformance/tests, v1.5.1) as manifests ->
//! translation -> a live gateway on 127.0.0.1 -> real requests to echo
//! backends that say who they are and what they saw. Services resolve through
//! EndpointSlices that point at the echo servers.
#![allow(clippy::unwrap_used)]

mod support;

use support::cluster::{BASE, Backends, Seen, expect, get, send, serve};

/// The base manifests, the backends' Services, and `routes`.
fn manifests(backends: &Backends, routes: &str) -> String {
    format!("{BASE}{}\n---\n{routes}", backends.manifests())
}

/// An HTTPRoute in the infra namespace attached to `same-namespace`.
fn route(name: &str, rules: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{ name: {name}, namespace: gateway-conformance-infra }}\nspec:\n  parentRefs: [{{ name: same-namespace }}]\n  rules:\n{rules}"
    )
}

fn backend(name: &str) -> String {
    format!("[{{ name: {name}, port: 8080 }}]")
}

#[tokio::test]
async fn simple_same_namespace_and_cross_namespace_by_selector() {
    let backends = Backends::start().await;
    let routes = format!(
        "{}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{ name: cross-namespace, namespace: gateway-conformance-web-backend }}\nspec:\n  parentRefs: [{{ name: backend-namespaces, namespace: gateway-conformance-infra }}]\n  hostnames: [web.example]\n  rules: [{{ backendRefs: {} }}]\n",
        route(
            "gateway-conformance-infra-test",
            &format!("    - backendRefs: {}\n", backend("infra-backend-v1"))
        ),
        backend("web-backend"),
    );
    let served = serve(&manifests(&backends, &routes), &[80]);
    let addr = served.ports[&80];
    expect(
        &get(addr, "any.example", "/").await,
        Ok("infra-backend-v1"),
        "same namespace",
    );
    let seen = get(addr, "web.example", "/").await;
    expect(&seen, Ok("web-backend"), "cross namespace");
    assert_eq!(seen.saw("namespace"), Some(support::cluster::WEB));
    for line in [
        "HTTPRoute gateway-conformance-infra/gateway-conformance-infra-test parent gateway-conformance-infra/same-namespace: Accepted=True",
        "HTTPRoute gateway-conformance-infra/gateway-conformance-infra-test parent gateway-conformance-infra/same-namespace: ResolvedRefs=True",
        "HTTPRoute gateway-conformance-web-backend/cross-namespace parent gateway-conformance-infra/backend-namespaces: Accepted=True",
        "Gateway gateway-conformance-infra/same-namespace listener http: attachedRoutes=1",
        "Gateway gateway-conformance-infra/backend-namespaces listener http: attachedRoutes=1",
        "Gateway gateway-conformance-infra/all-namespaces listener http: attachedRoutes=0",
    ] {
        assert!(
            served.status.contains(line),
            "missing {line:?} in\n{}",
            served.status
        );
    }
}

#[tokio::test]
async fn exact_path_matching() {
    let backends = Backends::start().await;
    let rules = format!(
        "    - {{ matches: [{{ path: {{ type: Exact, value: /one }} }}], backendRefs: {} }}\n    - {{ matches: [{{ path: {{ type: Exact, value: /two }} }}], backendRefs: {} }}\n",
        backend("infra-backend-v1"),
        backend("infra-backend-v2")
    );
    let served = serve(
        &manifests(&backends, &route("exact-matching", &rules)),
        &[80],
    );
    let addr = served.ports[&80];
    for (path, want) in [
        ("/one", Ok("infra-backend-v1")),
        ("/two", Ok("infra-backend-v2")),
        ("/", Err(404)),
        ("/one/example", Err(404)),
        ("/two/", Err(404)),
        ("/Two", Err(404)),
    ] {
        expect(&get(addr, "example.com", path).await, want, path);
    }
}

#[tokio::test]
async fn matching_within_and_across_routes() {
    let backends = Backends::start().await;
    let v1 = backend("infra-backend-v1");
    let v2 = backend("infra-backend-v2");
    let rules = format!(
        "    - {{ matches: [{{ path: {{ type: PathPrefix, value: / }} }}, {{ headers: [{{ name: version, value: one }}] }}], backendRefs: {v1} }}\n    - {{ matches: [{{ path: {{ type: PathPrefix, value: /v2 }} }}, {{ headers: [{{ name: version, value: two }}] }}], backendRefs: {v2} }}\n"
    );
    let part1 = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{ name: matching-part1, namespace: gateway-conformance-infra }}\nspec:\n  parentRefs: [{{ name: same-namespace }}]\n  hostnames: [example.com, example.net]\n  rules:\n    - {{ matches: [{{ path: {{ type: PathPrefix, value: / }} }}, {{ headers: [{{ name: version, value: one }}] }}], backendRefs: {v1} }}\n"
    );
    let part2 = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{ name: matching-part2, namespace: gateway-conformance-infra }}\nspec:\n  parentRefs: [{{ name: same-namespace }}]\n  hostnames: [example.com]\n  rules:\n    - {{ matches: [{{ path: {{ type: PathPrefix, value: /v2 }} }}, {{ headers: [{{ name: version, value: two }}] }}], backendRefs: {v2} }}\n"
    );
    let all = format!("{}\n---\n{part1}\n---\n{part2}", route("matching", &rules));
    let served = serve(&manifests(&backends, &all), &[80]);
    let addr = served.ports[&80];
    // HTTPRouteMatching (no hostnames: every host but the two of the other routes).
    for (path, header, want) in [
        ("/", None, "infra-backend-v1"),
        ("/example", None, "infra-backend-v1"),
        ("/", Some("one"), "infra-backend-v1"),
        ("/v2", None, "infra-backend-v2"),
        ("/v2/example", None, "infra-backend-v2"),
        ("/", Some("two"), "infra-backend-v2"),
        ("/v2/", None, "infra-backend-v2"),
        ("/v2example", None, "infra-backend-v1"),
        ("/foo/v2/example", None, "infra-backend-v1"),
    ] {
        let headers: Vec<(&str, &str)> = header.map(|h| ("Version", h)).into_iter().collect();
        expect(
            &send(addr, "GET", "matching.example", path, &headers).await,
            Ok(want),
            path,
        );
    }
    // HTTPRouteMatchingAcrossRoutes.
    for (host, path, header, want) in [
        ("example.com", "/", None, "infra-backend-v1"),
        ("example.com", "/example", None, "infra-backend-v1"),
        ("example.net", "/example", None, "infra-backend-v1"),
        ("example.com", "/example", Some("one"), "infra-backend-v1"),
        ("example.com", "/v2", None, "infra-backend-v2"),
        ("example.net", "/v2", None, "infra-backend-v1"),
        ("example.com", "/v2/example", None, "infra-backend-v2"),
        ("example.com", "/", Some("two"), "infra-backend-v2"),
    ] {
        let headers: Vec<(&str, &str)> = header.map(|h| ("Version", h)).into_iter().collect();
        expect(
            &send(addr, "GET", host, path, &headers).await,
            Ok(want),
            &format!("{host}{path}"),
        );
    }
}

#[tokio::test]
async fn method_matching_and_404_for_a_wrong_method() {
    let backends = Backends::start().await;
    let (v1, v2, v3) = (
        backend("infra-backend-v1"),
        backend("infra-backend-v2"),
        backend("infra-backend-v3"),
    );
    let rules = format!(
        "    - {{ matches: [{{ method: POST }}], backendRefs: {v1} }}
    - {{ matches: [{{ method: GET }}], backendRefs: {v2} }}
    - {{ matches: [{{ path: {{ type: PathPrefix, value: /path1 }}, method: GET }}], backendRefs: {v1} }}
    - {{ matches: [{{ headers: [{{ name: version, value: one }}], method: PUT }}], backendRefs: {v2} }}
    - {{ matches: [{{ path: {{ type: PathPrefix, value: /path2 }}, headers: [{{ name: version, value: two }}], method: POST }}], backendRefs: {v3} }}
    - {{ matches: [{{ path: {{ type: PathPrefix, value: /path3 }}, method: PATCH }}, {{ path: {{ type: PathPrefix, value: /path4 }}, headers: [{{ name: version, value: three }}], method: DELETE }}], backendRefs: {v1} }}
    - {{ matches: [{{ path: {{ type: PathPrefix, value: /path5 }} }}], backendRefs: {v1} }}
    - {{ matches: [{{ method: PATCH }}], backendRefs: {v2} }}
    - {{ matches: [{{ headers: [{{ name: version, value: four }}] }}], backendRefs: {v3} }}
"
    );
    let served = serve(
        &manifests(&backends, &route("method-matching", &rules)),
        &[80],
    );
    let addr = served.ports[&80];
    for (method, path, header, want) in [
        ("POST", "/", None, Ok("infra-backend-v1")),
        ("GET", "/", None, Ok("infra-backend-v2")),
        ("HEAD", "/", None, Err(404)),
        ("GET", "/path1", None, Ok("infra-backend-v1")),
        ("PUT", "/", Some("one"), Ok("infra-backend-v2")),
        ("POST", "/path2", Some("two"), Ok("infra-backend-v3")),
        ("PATCH", "/path3", None, Ok("infra-backend-v1")),
        ("DELETE", "/path4", Some("three"), Ok("infra-backend-v1")),
        ("PUT", "/", None, Err(404)),
        ("DELETE", "/path4", None, Err(404)),
        ("PATCH", "/path5", None, Ok("infra-backend-v1")),
        ("PATCH", "/", Some("four"), Ok("infra-backend-v2")),
    ] {
        let headers: Vec<(&str, &str)> = header.map(|h| ("version", h)).into_iter().collect();
        let seen = send(addr, method, "example.com", path, &headers).await;
        if method == "HEAD" {
            assert_eq!(seen.status(), 404, "HEAD {path}: no 405 in the Gateway API");
            continue;
        }
        expect(&seen, want, &format!("{method} {path} {header:?}"));
    }
}

#[tokio::test]
async fn header_and_query_matching() {
    let backends = Backends::start().await;
    let (v1, v2, v3) = (
        backend("infra-backend-v1"),
        backend("infra-backend-v2"),
        backend("infra-backend-v3"),
    );
    let headers = format!(
        "    - {{ matches: [{{ headers: [{{ name: version, value: one }}] }}], backendRefs: {v1} }}
    - {{ matches: [{{ headers: [{{ name: version, value: two }}] }}], backendRefs: {v2} }}
    - {{ matches: [{{ headers: [{{ name: version, value: two }}, {{ name: color, value: orange }}] }}], backendRefs: {v1} }}
    - {{ matches: [{{ headers: [{{ name: color, value: blue }}] }}, {{ headers: [{{ name: color, value: green }}] }}], backendRefs: {v1} }}
    - {{ matches: [{{ headers: [{{ name: color, value: red }}] }}, {{ headers: [{{ name: color, value: yellow }}] }}], backendRefs: {v2} }}
"
    );
    let query = format!(
        "    - {{ matches: [{{ queryParams: [{{ name: animal, value: whale }}] }}], backendRefs: {v1} }}
    - {{ matches: [{{ queryParams: [{{ name: animal, value: dolphin }}] }}], backendRefs: {v2} }}
    - {{ matches: [{{ queryParams: [{{ name: animal, value: dolphin }}, {{ name: color, value: blue }}] }}, {{ queryParams: [{{ name: ANIMAL, value: Whale }}] }}], backendRefs: {v3} }}
    - {{ matches: [{{ path: {{ type: PathPrefix, value: /path1 }}, queryParams: [{{ name: animal, value: whale }}] }}], backendRefs: {v1} }}
    - {{ matches: [{{ headers: [{{ name: version, value: one }}], queryParams: [{{ name: animal, value: whale }}] }}], backendRefs: {v2} }}
    - {{ matches: [{{ path: {{ type: PathPrefix, value: /path2 }}, headers: [{{ name: version, value: two }}], queryParams: [{{ name: animal, value: whale }}] }}], backendRefs: {v3} }}
    - {{ matches: [{{ path: {{ type: PathPrefix, value: /path3 }}, queryParams: [{{ name: animal, value: shark }}] }}, {{ path: {{ type: PathPrefix, value: /path4 }}, headers: [{{ name: version, value: three }}], queryParams: [{{ name: animal, value: kraken }}] }}], backendRefs: {v1} }}
    - {{ matches: [{{ path: {{ type: PathPrefix, value: /path5 }} }}], backendRefs: {v1} }}
    - {{ matches: [{{ queryParams: [{{ name: animal, value: hydra }}] }}], backendRefs: {v2} }}
    - {{ matches: [{{ headers: [{{ name: version, value: four }}] }}], backendRefs: {v3} }}
"
    );
    let both = format!(
        "{}\n  hostnames: [headers.example]\n---\n{}\n  hostnames: [query.example]\n",
        route("header-matching", &headers).trim_end(),
        route("query-param-matching", &query).trim_end()
    );
    let served = serve(&manifests(&backends, &both), &[80]);
    let addr = served.ports[&80];
    for (sent, want) in [
        (vec![("Version", "one")], Ok("infra-backend-v1")),
        (vec![("Version", "two")], Ok("infra-backend-v2")),
        (
            vec![("Version", "two"), ("Color", "orange")],
            Ok("infra-backend-v1"),
        ),
        (
            vec![("Version", "two"), ("Color", "blue")],
            Ok("infra-backend-v2"),
        ),
        (vec![("Color", "orange")], Err(404)),
        (vec![("Some-Other-Header", "one")], Err(404)),
        (vec![("Color", "blue")], Ok("infra-backend-v1")),
        (vec![("Color", "green")], Ok("infra-backend-v1")),
        (vec![("Color", "red")], Ok("infra-backend-v2")),
        (vec![("Color", "yellow")], Ok("infra-backend-v2")),
        (vec![("Color", "purple")], Err(404)),
    ] {
        expect(
            &send(addr, "GET", "headers.example", "/", &sent).await,
            want,
            &format!("{sent:?}"),
        );
    }
    for (path, version, want) in [
        ("/?animal=whale", None, Ok("infra-backend-v1")),
        ("/?animal=dolphin", None, Ok("infra-backend-v2")),
        ("/?animal=dolphin&color=blue", None, Ok("infra-backend-v3")),
        ("/?ANIMAL=Whale", None, Ok("infra-backend-v3")),
        (
            "/?animal=whale&otherparam=irrelevant",
            None,
            Ok("infra-backend-v1"),
        ),
        (
            "/?animal=dolphin&color=yellow",
            None,
            Ok("infra-backend-v2"),
        ),
        ("/?color=blue", None, Err(404)),
        ("/?animal=dog", None, Err(404)),
        ("/?animal=whaledolphin", None, Err(404)),
        ("/", None, Err(404)),
        ("/path1?animal=whale", None, Ok("infra-backend-v1")),
        ("/?animal=whale", Some("one"), Ok("infra-backend-v2")),
        ("/path2?animal=whale", Some("two"), Ok("infra-backend-v3")),
        ("/path3?animal=shark", None, Ok("infra-backend-v1")),
        (
            "/path4?animal=kraken",
            Some("three"),
            Ok("infra-backend-v1"),
        ),
        ("/?animal=shark", None, Err(404)),
        ("/path4?animal=kraken", None, Err(404)),
        ("/path5?animal=hydra", None, Ok("infra-backend-v1")),
        ("/?animal=hydra", Some("four"), Ok("infra-backend-v3")),
    ] {
        let headers: Vec<(&str, &str)> = version.map(|v| ("version", v)).into_iter().collect();
        let seen = send(addr, "GET", "query.example", path, &headers).await;
        expect(&seen, want, &format!("{path} {version:?}"));
        if want.is_ok() {
            assert_eq!(
                seen.saw("path"),
                Some(path),
                "the backend sees the path and query as sent"
            );
        }
    }
}

#[tokio::test]
async fn path_match_order() {
    let backends = Backends::start().await;
    let (v1, v2, v3) = (
        backend("infra-backend-v1"),
        backend("infra-backend-v2"),
        backend("infra-backend-v3"),
    );
    let rules = format!(
        "    - {{ matches: [{{ path: {{ type: Exact, value: /match }} }}], backendRefs: {v1} }}
    - {{ matches: [{{ path: {{ type: Exact, value: /match/exact }} }}], backendRefs: {v2} }}
    - {{ matches: [{{ path: {{ type: Exact, value: /match/exact/one }} }}], backendRefs: {v3} }}
    - {{ matches: [{{ path: {{ type: PathPrefix, value: /match/ }} }}], backendRefs: {v3} }}
    - {{ matches: [{{ path: {{ type: PathPrefix, value: /match/prefix/ }} }}], backendRefs: {v1} }}
    - {{ matches: [{{ path: {{ type: PathPrefix, value: /match/prefix/one }} }}], backendRefs: {v2} }}
"
    );
    let served = serve(
        &manifests(&backends, &route("path-matching-order", &rules)),
        &[80],
    );
    let addr = served.ports[&80];
    for (path, want) in [
        ("/match/exact/one", "infra-backend-v3"),
        ("/match/exact", "infra-backend-v2"),
        ("/match", "infra-backend-v1"),
        ("/match/prefix/one/any", "infra-backend-v2"),
        ("/match/prefix/any", "infra-backend-v1"),
        ("/match/any", "infra-backend-v3"),
    ] {
        expect(&get(addr, "example.com", path).await, Ok(want), path);
    }
}

/// Checks a table of `(host, path, expected)` against `addr`.
async fn table(addr: std::net::SocketAddr, cases: &[(&str, &str, Result<&str, u16>)]) {
    for (host, path, want) in cases {
        let seen: Seen = get(addr, host, path).await;
        expect(&seen, *want, &format!("{host}{path}"));
        if want.is_ok() {
            assert_eq!(
                seen.saw("host"),
                Some(*host),
                "Host reaches the backend unchanged, port included"
            );
        }
    }
}

fn gateway(name: &str, listeners: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: {name}, namespace: gateway-conformance-infra }}\nspec:\n  gatewayClassName: scalws\n  listeners:\n{listeners}"
    )
}

fn attached(name: &str, parents: &str, hostnames: &str, rules: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{ name: {name}, namespace: gateway-conformance-infra }}\nspec:\n  parentRefs: {parents}\n  hostnames: {hostnames}\n  rules: {rules}\n"
    )
}

#[tokio::test]
async fn hostname_intersection() {
    let backends = Backends::start().await;
    let prefix = |p: &str, b: &str| {
        format!(
            "[{{ matches: [{{ path: {{ type: PathPrefix, value: {p} }} }}], backendRefs: {} }}]",
            backend(b)
        )
    };
    let parent =
        "[{ name: httproute-hostname-intersection, namespace: gateway-conformance-infra }]";
    let docs = [
        gateway(
            "httproute-hostname-intersection",
            "    - { name: listener-1, port: 80, protocol: HTTP, hostname: very.specific.com }\n    - { name: listener-2, port: 80, protocol: HTTP, hostname: \"*.wildcard.io\" }\n    - { name: listener-3, port: 80, protocol: HTTP, hostname: \"*.anotherwildcard.io\" }\n",
        ),
        gateway(
            "httproute-hostname-intersection-all",
            "    - { name: listener-1, port: 80, protocol: HTTP }\n",
        ),
        attached(
            "specific-host-matches-listener-specific-host",
            parent,
            "[non.matching.com, \"*.nonmatchingwildcard.io\", very.specific.com]",
            &prefix("/s1", "infra-backend-v1"),
        ),
        attached(
            "specific-host-matches-listener-wildcard-host",
            parent,
            "[non.matching.com, wildcard.io, foo.wildcard.io, bar.wildcard.io, foo.bar.wildcard.io]",
            &prefix("/s2", "infra-backend-v2"),
        ),
        attached(
            "wildcard-host-matches-listener-specific-host",
            parent,
            "[non.matching.com, \"*.specific.com\"]",
            &prefix("/s3", "infra-backend-v3"),
        ),
        attached(
            "wildcard-host-matches-listener-wildcard-host",
            parent,
            "[\"*.anotherwildcard.io\"]",
            &prefix("/s4", "infra-backend-v1"),
        ),
        attached(
            "no-intersecting-hosts",
            parent,
            "[specific.but.wrong.com, wildcard.io]",
            &prefix("/s5", "infra-backend-v2"),
        ),
        attached(
            "httproute-hostname-intersection-all",
            "[{ name: httproute-hostname-intersection-all }]",
            "[first.com, sub.first.com, second.com, sub.second.com]",
            &format!("[{{ backendRefs: {} }}]", backend("infra-backend-v2")),
        ),
    ];
    // The base Gateways would take every host on port 80: this test has it alone.
    let text = format!(
        "{}\n---\n{}\n---\n{}",
        base_without_gateways(),
        backends.manifests(),
        docs.join("\n---\n")
    );
    let served = serve(&text, &[80]);
    let addr = served.ports[&80];
    let (v1, v2, v3) = (
        Ok("infra-backend-v1"),
        Ok("infra-backend-v2"),
        Ok("infra-backend-v3"),
    );
    table(
        addr,
        &[
            ("very.specific.com", "/s1", v1),
            ("very.specific.com:1234", "/s1", v1),
            ("non.matching.com", "/s1", Err(404)),
            ("foo.nonmatchingwildcard.io", "/s1", Err(404)),
            ("foo.wildcard.io", "/s1", Err(404)),
            ("very.specific.com", "/non-matching-prefix", Err(404)),
            ("foo.wildcard.io", "/s2", v2),
            ("bar.wildcard.io", "/s2", v2),
            ("foo.bar.wildcard.io", "/s2", v2),
            ("non.matching.com", "/s2", Err(404)),
            ("wildcard.io", "/s2", Err(404)),
            ("very.specific.com", "/s2", Err(404)),
            ("foo.wildcard.io", "/non-matching-prefix", Err(404)),
            ("very.specific.com", "/s3", v3),
            ("non.matching.com", "/s3", Err(404)),
            ("foo.specific.com", "/s3", Err(404)),
            ("foo.wildcard.io", "/s3", Err(404)),
            ("foo.anotherwildcard.io", "/s4", v1),
            ("bar.anotherwildcard.io", "/s4", v1),
            ("foo.bar.anotherwildcard.io", "/s4", v1),
            ("anotherwildcard.io", "/s4", Err(404)),
            ("foo.wildcard.io", "/s4", Err(404)),
            ("very.specific.com", "/s4", Err(404)),
            ("specific.but.wrong.com", "/s5", Err(404)),
            ("wildcard.io", "/s5", Err(404)),
            ("first.com", "/", v2),
            ("sub.first.com", "/", v2),
            ("second.com", "/", v2),
            ("sub.second.com", "/", v2),
            ("third.com", "/", Err(404)),
            ("sub.third.com", "/", Err(404)),
        ],
    )
    .await;
    let gw = "gateway-conformance-infra/httproute-hostname-intersection";
    for line in [
        format!(
            "HTTPRoute gateway-conformance-infra/no-intersecting-hosts parent {gw}: Accepted=False (NoMatchingListenerHostname)"
        ),
        format!(
            "HTTPRoute gateway-conformance-infra/no-intersecting-hosts parent {gw}: ResolvedRefs=True"
        ),
        format!("Gateway {gw} listener listener-1: attachedRoutes=2"),
        format!("Gateway {gw} listener listener-2: attachedRoutes=1"),
        format!("Gateway {gw} listener listener-3: attachedRoutes=1"),
    ] {
        assert!(
            served.status.contains(&line),
            "missing {line:?} in\n{}",
            served.status
        );
    }
}

/// The base manifests without their Gateways (namespaces and the class).
fn base_without_gateways() -> &'static str {
    let end = BASE
        .find("kind: Gateway\nmetadata: { name: same-namespace")
        .unwrap();
    let end = BASE[..end].rfind("---").unwrap();
    &BASE[..end]
}

#[tokio::test]
async fn listener_hostname_matching_and_isolation() {
    let backends = Backends::start().await;
    let v = |b: &str| format!("[{{ backendRefs: {} }}]", backend(b));
    let mut docs = vec![
        gateway(
            "httproute-listener-hostname-matching",
            "    - { name: listener-1, port: 80, protocol: HTTP, hostname: bar.com }\n    - { name: listener-2, port: 80, protocol: HTTP, hostname: foo.bar.com }\n    - { name: listener-3, port: 80, protocol: HTTP, hostname: \"*.bar.com\" }\n    - { name: listener-4, port: 80, protocol: HTTP, hostname: \"*.foo.com\" }\n",
        ),
        attached(
            "backend-v1",
            "[{ name: httproute-listener-hostname-matching, sectionName: listener-1 }]",
            "[]",
            &v("infra-backend-v1"),
        ),
        attached(
            "backend-v2",
            "[{ name: httproute-listener-hostname-matching, sectionName: listener-2 }]",
            "[]",
            &v("infra-backend-v2"),
        ),
        attached(
            "backend-v3",
            "[{ name: httproute-listener-hostname-matching, sectionName: listener-3 }, { name: httproute-listener-hostname-matching, sectionName: listener-4 }]",
            "[]",
            &v("infra-backend-v3"),
        ),
    ];
    let served = serve(
        &format!(
            "{}\n---\n{}\n---\n{}",
            base_without_gateways(),
            backends.manifests(),
            docs.join("\n---\n")
        ),
        &[80],
    );
    let addr = served.ports[&80];
    table(
        addr,
        &[
            ("bar.com", "/", Ok("infra-backend-v1")),
            ("foo.bar.com", "/", Ok("infra-backend-v2")),
            ("baz.bar.com", "/", Ok("infra-backend-v3")),
            ("boo.bar.com", "/", Ok("infra-backend-v3")),
            ("multiple.prefixes.bar.com", "/", Ok("infra-backend-v3")),
            ("multiple.prefixes.foo.com", "/", Ok("infra-backend-v3")),
            ("foo.com", "/", Err(404)),
            ("no.matching.host", "/", Err(404)),
        ],
    )
    .await;
    drop(served);

    // GatewayHTTPListenerIsolation, with and without route hostnames that intersect.
    for hostnames in [
        "[]",
        "[bar.com, \"*.example.com\", \"*.foo.example.com\", abc.foo.example.com]",
    ] {
        docs.clear();
        docs.push(gateway(
            "http-listener-isolation",
            "    - { name: empty-hostname, port: 80, protocol: HTTP, allowedRoutes: { namespaces: { from: All } } }\n    - { name: wildcard-example-com, port: 80, protocol: HTTP, hostname: \"*.example.com\", allowedRoutes: { namespaces: { from: All } } }\n    - { name: wildcard-foo-example-com, port: 80, protocol: HTTP, hostname: \"*.foo.example.com\", allowedRoutes: { namespaces: { from: All } } }\n    - { name: abc-foo-example-com, port: 80, protocol: HTTP, hostname: abc.foo.example.com, allowedRoutes: { namespaces: { from: All } } }\n",
        ));
        for listener in [
            "empty-hostname",
            "wildcard-example-com",
            "wildcard-foo-example-com",
            "abc-foo-example-com",
        ] {
            docs.push(attached(
                &format!("attaches-to-{listener}"),
                &format!("[{{ name: http-listener-isolation, sectionName: {listener} }}]"),
                hostnames,
                &format!("[{{ matches: [{{ path: {{ type: PathPrefix, value: /{listener} }} }}], backendRefs: {} }}]", backend("infra-backend-v1")),
            ));
        }
        let served = serve(
            &format!(
                "{}\n---\n{}\n---\n{}",
                base_without_gateways(),
                backends.manifests(),
                docs.join("\n---\n")
            ),
            &[80],
        );
        let addr = served.ports[&80];
        let paths = [
            "/empty-hostname",
            "/wildcard-example-com",
            "/wildcard-foo-example-com",
            "/abc-foo-example-com",
        ];
        for (row, host) in [
            "bar.com",
            "bar.example.com",
            "bar.foo.example.com",
            "abc.foo.example.com",
        ]
        .iter()
        .enumerate()
        {
            for (column, path) in paths.iter().enumerate() {
                let want = if row == column {
                    Ok("infra-backend-v1")
                } else {
                    Err(404)
                };
                expect(
                    &get(addr, host, path).await,
                    want,
                    &format!("{host}{path} (route hostnames {hostnames})"),
                );
            }
        }
    }
}

#[tokio::test]
async fn listener_ports_and_parent_ref_ports() {
    let backends = Backends::start().await;
    let v = |b: &str| format!("[{{ backendRefs: {} }}]", backend(b));
    let docs = [
        gateway(
            "httproute-listener-port-matching",
            "    - { name: listener-1, port: 80, protocol: HTTP, hostname: foo.com }\n    - { name: listener-2, port: 8080, protocol: HTTP, hostname: foo.com }\n    - { name: listener-3, port: 8080, protocol: HTTP, hostname: bar.com }\n    - { name: listener-4, port: 8090, protocol: HTTP, hostname: foo.com }\n    - { name: listener-5, port: 8090, protocol: HTTP, hostname: bar.com }\n",
        ),
        attached(
            "backend-v1",
            "[{ name: httproute-listener-port-matching, port: 80 }]",
            "[]",
            &v("infra-backend-v1"),
        ),
        attached(
            "backend-v2",
            "[{ name: httproute-listener-port-matching, port: 8080 }]",
            "[]",
            &v("infra-backend-v2"),
        ),
        attached(
            "backend-v3",
            "[{ name: httproute-listener-port-matching, port: 8090, sectionName: listener-4 }]",
            "[]",
            &v("infra-backend-v3"),
        ),
        attached(
            "not-matching-port",
            "[{ name: httproute-listener-port-matching, port: 81 }]",
            "[]",
            &v("infra-backend-v1"),
        ),
        attached(
            "not-matching-section",
            "[{ name: httproute-listener-port-matching, port: 80, sectionName: http1 }]",
            "[]",
            &v("infra-backend-v1"),
        ),
    ];
    let served = serve(
        &format!(
            "{}\n---\n{}\n---\n{}",
            base_without_gateways(),
            backends.manifests(),
            docs.join("\n---\n")
        ),
        &[80, 8080, 8090],
    );
    for (port, host, want) in [
        (80, "foo.com", Ok("infra-backend-v1")),
        (8080, "foo.com:8080", Ok("infra-backend-v2")),
        (8080, "bar.com:8080", Ok("infra-backend-v2")),
        (8090, "foo.com:8090", Ok("infra-backend-v3")),
        (8090, "bar.com:8090", Err(404)),
    ] {
        let seen = get(served.ports[&port], host, "/").await;
        expect(&seen, want, host);
        if want.is_ok() {
            assert_eq!(seen.saw("host"), Some(host));
        }
    }
    let gw = "gateway-conformance-infra/httproute-listener-port-matching";
    for line in [
        format!(
            "HTTPRoute gateway-conformance-infra/not-matching-port parent {gw} port 81: Accepted=False (NoMatchingParent)"
        ),
        format!(
            "HTTPRoute gateway-conformance-infra/not-matching-section parent {gw} section http1 port 80: Accepted=False (NoMatchingParent)"
        ),
        format!("Gateway {gw} listener listener-3: attachedRoutes=1"),
        format!("Gateway {gw} listener listener-5: attachedRoutes=0"),
    ] {
        assert!(
            served.status.contains(&line),
            "missing {line:?} in\n{}",
            served.status
        );
    }
}

#[tokio::test]
async fn https_listeners_with_certificates_from_secrets() {
    let backends = Backends::start().await;
    let ca = test_support::tls::TestCa::new();
    let (cert, key) = ca.issue_pem(&[
        "example.org",
        "second-example.org",
        "unknown-example.org",
        "*.wildcard.org",
    ]);
    let indent = |pem: &str| {
        pem.lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    };
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{ name: tls-validity-checks-certificate, namespace: gateway-conformance-infra }}\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
        indent(&cert),
        indent(&key)
    );
    let tls = "tls: { certificateRefs: [{ name: tls-validity-checks-certificate }] }";
    let docs = [
        secret,
        gateway(
            "same-namespace-with-https-listener",
            &format!(
                "    - {{ name: https, port: 443, protocol: HTTPS, {tls} }}\n    - {{ name: https-with-hostname, port: 443, protocol: HTTPS, hostname: second-example.org, {tls} }}\n    - {{ name: https-with-wildcard-hostname, port: 443, protocol: HTTPS, hostname: \"*.wildcard.org\", {tls} }}\n    - {{ name: https-with-hostname-matching-wildcard, port: 443, protocol: HTTPS, hostname: fourth-example.wildcard.org, {tls} }}\n"
            ),
        ),
        attached(
            "httproute-https-test",
            "[{ name: same-namespace-with-https-listener }]",
            "[example.org]",
            &format!("[{{ backendRefs: {} }}]", backend("infra-backend-v1")),
        ),
        attached(
            "httproute-https-test-no-hostname",
            "[{ name: same-namespace-with-https-listener, sectionName: https-with-hostname }]",
            "[]",
            &format!("[{{ backendRefs: {} }}]", backend("infra-backend-v2")),
        ),
    ];
    let served = serve(
        &format!(
            "{}\n---\n{}\n---\n{}",
            base_without_gateways(),
            backends.manifests(),
            docs.join("\n---\n")
        ),
        &[443],
    );
    let addr = served.ports[&443];
    for (host, want) in [
        ("example.org", Ok("infra-backend-v1")),
        ("unknown-example.org", Err(404)),
        ("second-example.org", Ok("infra-backend-v2")),
    ] {
        let request = test_support::request("GET", host, "/")
            .body(Default::default())
            .unwrap();
        let reply =
            test_support::tls::https(ca.client_config(&[b"http/1.1"]), addr, host, false, request)
                .await;
        expect(&support::cluster::seen(reply.reply), want, host);
    }
    for listener in [
        "https",
        "https-with-hostname",
        "https-with-wildcard-hostname",
        "https-with-hostname-matching-wildcard",
    ] {
        for c in ["Accepted=True", "Programmed=True", "ResolvedRefs=True"] {
            let line = format!(
                "Gateway gateway-conformance-infra/same-namespace-with-https-listener listener {listener}: {c}"
            );
            assert!(
                served.status.contains(&line),
                "missing {line:?} in\n{}",
                served.status
            );
        }
    }
}

#[tokio::test]
async fn invalid_backend_refs_answer_500_and_say_why() {
    let backends = Backends::start().await;
    let infra = |name: &str, hosts: &str, refs: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{ name: {name}, namespace: gateway-conformance-infra }}\nspec:\n  parentRefs: [{{ name: same-namespace }}]\n  hostnames: [{hosts}]\n  rules: {refs}\n"
        )
    };
    let grant = |name: &str, ns: &str, from: &str, to: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{ name: {name}, namespace: {ns} }}\nspec:\n  from: [{from}]\n  to: [{to}]\n"
        )
    };
    let from_infra = "{ group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: gateway-conformance-infra }";
    let docs = [
        infra(
            "invalid-cross-namespace-backend-ref",
            "cross.example",
            "[{ backendRefs: [{ name: web-backend, namespace: gateway-conformance-web-backend, port: 8080 }] }]",
        ),
        infra(
            "invalid-backend-ref-unknown-kind",
            "kind.example",
            "[{ backendRefs: [{ group: unknownkind.example.com, kind: NonExistent, name: infra-backend-v1, port: 8080 }] }]",
        ),
        infra(
            "invalid-nonexistent-backend-ref",
            "missing.example",
            "[{ backendRefs: [{ name: nonexistent, port: 8080 }] }]",
        ),
        infra(
            "partially-invalid",
            "partial.example",
            "[{ matches: [{ path: { type: PathPrefix, value: /v2 } }], backendRefs: [{ name: app-backend-v2, namespace: gateway-conformance-app-backend, port: 8080 }] }, { backendRefs: [{ name: app-backend-v1, namespace: gateway-conformance-app-backend, port: 8080 }] }]",
        ),
        infra(
            "no-backends",
            "none.example",
            "[{ matches: [{ path: { type: Exact, value: /omitted-no-forward } }] }, { matches: [{ path: { type: Exact, value: /empty-no-forward } }], backendRefs: [] }, { backendRefs: [{ name: infra-backend-v1, port: 8080 }] }]",
        ),
        infra(
            "mixed-weights",
            "mixed.example",
            "[{ backendRefs: [{ name: infra-backend-v1, port: 8080, weight: 1 }, { name: nonexistent, port: 8080, weight: 1 }] }]",
        ),
        grant(
            "only-v1",
            "gateway-conformance-app-backend",
            from_infra,
            "{ group: \"\", kind: Service, name: app-backend-v1 }",
        ),
        // Grants in the web-backend namespace that do not apply (the suite's
        // HTTPRouteInvalidReferenceGrant): the cross-namespace ref stays refused.
        grant(
            "wrong-from-kind",
            "gateway-conformance-web-backend",
            "{ group: gateway.networking.k8s.io, kind: Gateway, namespace: gateway-conformance-infra }",
            "{ group: \"\", kind: Service }",
        ),
        grant(
            "wrong-to-kind",
            "gateway-conformance-web-backend",
            from_infra,
            "{ group: \"\", kind: Secret }",
        ),
    ];
    let served = serve(&manifests(&backends, &docs.join("\n---\n")), &[80]);
    let addr = served.ports[&80];
    expect(
        &get(addr, "cross.example", "/").await,
        Err(500),
        "no ReferenceGrant for this route",
    );
    expect(
        &get(addr, "kind.example", "/v2").await,
        Err(500),
        "unknown kind",
    );
    expect(
        &get(addr, "missing.example", "/").await,
        Err(500),
        "no such Service",
    );
    expect(
        &get(addr, "partial.example", "/v2").await,
        Err(500),
        "not granted",
    );
    let seen = get(addr, "partial.example", "/").await;
    expect(&seen, Ok("app-backend-v1"), "granted by name");
    assert_eq!(seen.saw("namespace"), Some(support::cluster::APP));
    expect(
        &get(addr, "none.example", "/omitted-no-forward").await,
        Err(500),
        "no backendRefs",
    );
    expect(
        &get(addr, "none.example", "/empty-no-forward").await,
        Err(500),
        "empty backendRefs",
    );
    expect(
        &get(addr, "none.example", "/forward").await,
        Ok("infra-backend-v1"),
        "the other rule",
    );
    let (mut ok, mut failed) = (0, 0);
    for _ in 0..200 {
        match get(addr, "mixed.example", "/").await.status() {
            200 => ok += 1,
            500 => failed += 1,
            other => panic!("unexpected {other}"),
        }
    }
    assert!(
        (60..=140).contains(&ok) && ok + failed == 200,
        "an invalid share is 500 for its weight only: {ok} ok, {failed} 500"
    );

    let ns = "gateway-conformance-infra";
    for line in [
        format!(
            "HTTPRoute {ns}/invalid-cross-namespace-backend-ref parent {ns}/same-namespace: Accepted=True"
        ),
        format!(
            "HTTPRoute {ns}/invalid-cross-namespace-backend-ref parent {ns}/same-namespace: ResolvedRefs=False (RefNotPermitted)"
        ),
        format!(
            "HTTPRoute {ns}/invalid-backend-ref-unknown-kind parent {ns}/same-namespace: ResolvedRefs=False (InvalidKind)"
        ),
        format!(
            "HTTPRoute {ns}/invalid-nonexistent-backend-ref parent {ns}/same-namespace: ResolvedRefs=False (BackendNotFound)"
        ),
        format!(
            "HTTPRoute {ns}/partially-invalid parent {ns}/same-namespace: ResolvedRefs=False (RefNotPermitted)"
        ),
        format!("HTTPRoute {ns}/no-backends parent {ns}/same-namespace: ResolvedRefs=True"),
    ] {
        assert!(
            served.status.contains(&line),
            "missing {line:?} in\n{}",
            served.status
        );
    }
}

#[tokio::test]
async fn service_types_and_ports_resolve_through_endpoint_slices() {
    let backends = Backends::start().await;
    let echo = backends.servers["infra-backend-v1"].addr;
    let extra = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{ name: manual-endpointslices, namespace: gateway-conformance-infra }}\nspec: {{ ports: [{{ name: first-port, port: 8080, targetPort: 3000 }}] }}
---
apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{ name: manual-endpointslices-ip4, namespace: gateway-conformance-infra, labels: {{ kubernetes.io/service-name: manual-endpointslices }} }}
addressType: IPv4\nports: [{{ name: first-port, port: {port} }}, {{ name: other, port: 1 }}]
endpoints: [{{ addresses: [\"{ip}\"] }}, {{ addresses: [\"127.0.0.9\"], conditions: {{ ready: false }} }}]
---
apiVersion: v1\nkind: Service\nmetadata: {{ name: headless, namespace: gateway-conformance-infra }}\nspec: {{ clusterIP: None, selector: {{ app: x }}, ports: [{{ port: 8080 }}] }}
---
apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{ name: headless-1, namespace: gateway-conformance-infra, labels: {{ kubernetes.io/service-name: headless }} }}
addressType: IPv4\nports: [{{ port: {port} }}]\nendpoints: [{{ addresses: [\"{ip}\"] }}]
---
apiVersion: v1\nkind: Service\nmetadata: {{ name: no-endpoints, namespace: gateway-conformance-infra }}\nspec: {{ ports: [{{ port: 8080 }}] }}
---
{}",
        route(
            "service-types",
            "    - { matches: [{ path: { type: Exact, value: /manual-endpointslices } }], backendRefs: [{ name: manual-endpointslices, port: 8080 }] }\n    - { matches: [{ path: { type: Exact, value: /headless } }], backendRefs: [{ name: headless, port: 8080 }] }\n    - { matches: [{ path: { type: Exact, value: /no-endpoints } }], backendRefs: [{ name: no-endpoints, port: 8080 }] }\n    - { matches: [{ path: { type: Exact, value: /no-such-port } }], backendRefs: [{ name: headless, port: 9999 }] }\n"
        ),
        port = echo.port(),
        ip = echo.ip(),
    );
    let served = serve(&manifests(&backends, &extra), &[80]);
    let addr = served.ports[&80];
    expect(
        &get(addr, "example.com", "/manual-endpointslices").await,
        Ok("infra-backend-v1"),
        "selector-less Service",
    );
    expect(
        &get(addr, "example.com", "/headless").await,
        Ok("infra-backend-v1"),
        "headless Service",
    );
    expect(
        &get(addr, "example.com", "/no-endpoints").await,
        Err(503),
        "no ready endpoint",
    );
    expect(
        &get(addr, "example.com", "/no-such-port").await,
        Err(500),
        "no such port",
    );
    let upstream = &served.translation.document.upstreams["gateway-conformance-infra/manual-endpointslices:8080"];
    assert_eq!(
        upstream.addresses,
        vec![echo.to_string()],
        "only ready endpoints, with the slice port named like the Service port"
    );
}
