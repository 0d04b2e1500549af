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
    let secret = support::cluster::tls_secret(
        "gateway-conformance-infra",
        "tls-validity-checks-certificate",
        &cert,
        &key,
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

/// A rule `{ matches: PathPrefix path, filters: [filter], backendRefs: v1 }`.
fn filtered(path: &str, filter: &str) -> String {
    format!(
        "    - {{ matches: [{{ path: {{ type: PathPrefix, value: {path} }} }}], filters: [{filter}], backendRefs: {} }}\n",
        backend("infra-backend-v1")
    )
}

type HeaderCase<'a> = (
    &'a str,
    &'a [(&'a str, &'a str)],
    &'a [(&'a str, &'a str)],
    &'a [&'a str],
);

#[tokio::test]
async fn request_and_response_header_modifiers() {
    let backends = Backends::start().await;
    let request =
        |body: &str| format!("{{ type: RequestHeaderModifier, requestHeaderModifier: {body} }}");
    let response =
        |body: &str| format!("{{ type: ResponseHeaderModifier, responseHeaderModifier: {body} }}");
    let multiple = "{ set: [{ name: X-Header-Set-1, value: header-set-1 }, { name: X-Header-Set-2, value: header-set-2 }], add: [{ name: X-Header-Add-1, value: header-add-1 }, { name: X-Header-Add-2, value: header-add-2 }, { name: X-Header-Add-3, value: header-add-3 }], remove: [X-Header-Remove-1, X-Header-Remove-2] }";
    let rules = [
        filtered("/set", &request("{ set: [{ name: X-Header-Set, value: set-overwrites-values }] }")),
        filtered("/add", &request("{ add: [{ name: X-Header-Add, value: add-appends-values }] }")),
        filtered("/remove", &request("{ remove: [X-Header-Remove] }")),
        filtered("/multiple", &request(multiple)),
        filtered(
            "/case-insensitivity",
            &request("{ set: [{ name: X-Header-Set, value: header-set }], add: [{ name: X-Header-Add, value: header-add }], remove: [X-Header-Remove] }"),
        ),
    ]
    .concat();
    let response_rules = [
        filtered("/set", &response("{ set: [{ name: X-Header-Set, value: set-overwrites-values }] }")),
        filtered("/add", &response("{ add: [{ name: X-Header-Add, value: add-appends-values }] }")),
        filtered("/remove", &response("{ remove: [X-Header-Remove] }")),
        filtered("/multiple", &response(multiple)),
        format!(
            "    - {{ matches: [{{ path: {{ type: PathPrefix, value: /both }} }}], filters: [{}, {}], backendRefs: {} }}\n",
            response(multiple),
            request("{ set: [{ name: X-Header-Set, value: set-overwrites-values }], add: [{ name: X-Header-Add, value: header-val-1 }, { name: X-Header-Add-Append, value: header-val-2 }], remove: [X-Header-Remove] }"),
            backend("infra-backend-v1")
        ),
    ]
    .concat();
    let docs = format!(
        "{}\n  hostnames: [request.example]\n---\n{}\n  hostnames: [response.example]\n",
        route("request-header-modifier", &rules).trim_end(),
        route("response-header-modifier", &response_rules).trim_end()
    );
    let served = serve(&manifests(&backends, &docs), &[80]);
    let addr = served.ports[&80];

    // (path, headers sent, headers the backend sees, headers it must not see)
    let cases: [HeaderCase<'_>; 7] = [
        (
            "/set",
            &[("Some-Other-Header", "val")],
            &[
                ("some-other-header", "val"),
                ("x-header-set", "set-overwrites-values"),
            ],
            &[],
        ),
        (
            "/set",
            &[
                ("Some-Other-Header", "val"),
                ("X-Header-Set", "some-other-value"),
            ],
            &[("x-header-set", "set-overwrites-values")],
            &[],
        ),
        (
            "/add",
            &[("Some-Other-Header", "val")],
            &[("x-header-add", "add-appends-values")],
            &[],
        ),
        (
            "/add",
            &[("X-Header-Add", "some-other-value")],
            &[("x-header-add", "some-other-value,add-appends-values")],
            &[],
        ),
        (
            "/remove",
            &[("X-Header-Remove", "val")],
            &[],
            &["x-header-remove"],
        ),
        (
            "/multiple",
            &[
                ("X-Header-Set-2", "set-val-2"),
                ("X-Header-Add-2", "add-val-2"),
                ("X-Header-Remove-2", "remove-val-2"),
                ("Another-Header", "another-header-val"),
            ],
            &[
                ("x-header-set-1", "header-set-1"),
                ("x-header-set-2", "header-set-2"),
                ("x-header-add-1", "header-add-1"),
                ("x-header-add-2", "add-val-2,header-add-2"),
                ("x-header-add-3", "header-add-3"),
                ("another-header", "another-header-val"),
            ],
            &["x-header-remove-1", "x-header-remove-2"],
        ),
        (
            "/case-insensitivity",
            &[
                ("x-header-set", "original-val-set"),
                ("x-header-add", "original-val-add"),
                ("x-header-remove", "original-val-remove"),
                ("Another-Header", "another-header-val"),
            ],
            &[
                ("x-header-set", "header-set"),
                ("x-header-add", "original-val-add,header-add"),
                ("another-header", "another-header-val"),
            ],
            &["x-header-remove"],
        ),
    ];
    for (path, sent, want, absent) in cases {
        let seen = send(addr, "GET", "request.example", path, sent).await;
        expect(&seen, Ok("infra-backend-v1"), path);
        for (name, value) in want {
            assert_eq!(
                seen.header_seen(name).as_deref(),
                Some(*value),
                "request {path}: {name}"
            );
        }
        for name in absent {
            assert_eq!(
                seen.header_seen(name),
                None,
                "request {path}: {name} removed"
            );
        }
        if path == "/case-insensitivity" {
            continue;
        }
        // The same headers, set by the backend on its response.
        let echo_set: Vec<String> = sent.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        let echo_set = echo_set.join(",");
        let seen = send(
            addr,
            "GET",
            "response.example",
            path,
            &[("X-Echo-Set-Header", &echo_set)],
        )
        .await;
        expect(&seen, Ok("infra-backend-v1"), path);
        for (name, value) in want {
            assert_eq!(
                seen.response_header(name).as_deref(),
                Some(*value),
                "response {path}: {name}"
            );
        }
        for name in absent {
            assert_eq!(
                seen.response_header(name),
                None,
                "response {path}: {name} removed"
            );
        }
    }
    let seen = send(
        addr,
        "GET",
        "response.example",
        "/both",
        &[
            ("X-Header-Remove", "remove-val"),
            ("X-Header-Add-Append", "append-val-1"),
            (
                "X-Echo-Set-Header",
                "X-Header-Set-2:set-val-2,X-Header-Add-2:add-val-2,X-Header-Remove-1:val",
            ),
        ],
    )
    .await;
    assert_eq!(
        seen.header_seen("x-header-add").as_deref(),
        Some("header-val-1")
    );
    assert_eq!(
        seen.header_seen("x-header-add-append").as_deref(),
        Some("append-val-1,header-val-2")
    );
    assert_eq!(
        seen.header_seen("x-header-set").as_deref(),
        Some("set-overwrites-values")
    );
    assert_eq!(seen.header_seen("x-header-remove"), None);
    assert_eq!(
        seen.response_header("x-header-add-2").as_deref(),
        Some("add-val-2,header-add-2")
    );
    assert_eq!(
        seen.response_header("x-header-set-1").as_deref(),
        Some("header-set-1")
    );
    assert_eq!(seen.response_header("x-header-remove-1"), None);
}

#[tokio::test]
async fn redirects_host_status_path_port_and_scheme() {
    let backends = Backends::start().await;
    let redirect = |path: &str, body: &str| {
        filtered(
            path,
            &format!("{{ type: RequestRedirect, requestRedirect: {body} }}"),
        )
    };
    let rules = [
        redirect("/hostname-redirect", "{ hostname: example.org }"),
        redirect("/host-and-status", "{ hostname: example.org, statusCode: 301 }"),
        redirect("/original-prefix", "{ path: { type: ReplacePrefixMatch, replacePrefixMatch: /replacement-prefix } }"),
        redirect("/full", "{ path: { type: ReplaceFullPath, replaceFullPath: /full-path-replacement } }"),
        redirect("/path-and-host", "{ hostname: example.org, path: { type: ReplacePrefixMatch, replacePrefixMatch: /replacement-prefix } }"),
        redirect("/path-and-status", "{ statusCode: 301, path: { type: ReplacePrefixMatch, replacePrefixMatch: /replacement-prefix } }"),
        redirect("/full-path-and-host", "{ hostname: example.org, path: { type: ReplaceFullPath, replaceFullPath: /replacement-full } }"),
        redirect("/full-path-and-status", "{ statusCode: 301, path: { type: ReplaceFullPath, replaceFullPath: /replacement-full } }"),
        redirect("/port", "{ port: 8083 }"),
        redirect("/port-and-host", "{ hostname: example.org, port: 8083 }"),
        redirect("/port-and-status", "{ port: 8083, statusCode: 301 }"),
        redirect("/scheme", "{ scheme: https }"),
        redirect("/scheme-and-host", "{ scheme: https, hostname: example.org }"),
        redirect("/scheme-and-status", "{ scheme: https, statusCode: 301 }"),
        redirect("/scheme-nil-and-port-nil", "{ hostname: example.org }"),
        redirect("/scheme-nil-and-port-80", "{ hostname: example.org, port: 80 }"),
        redirect("/scheme-nil-and-port-8080", "{ hostname: example.org, port: 8080 }"),
        redirect("/scheme-https-and-port-nil", "{ hostname: example.org, scheme: https }"),
        redirect("/scheme-https-and-port-443", "{ hostname: example.org, scheme: https, port: 443 }"),
        redirect("/scheme-https-and-port-8443", "{ hostname: example.org, scheme: https, port: 8443 }"),
        redirect("/scheme-http-and-port-nil", "{ hostname: example.org, scheme: http }"),
        redirect("/s303", "{ statusCode: 303 }"),
        redirect("/s307", "{ statusCode: 307 }"),
        redirect("/s308", "{ statusCode: 308 }"),
    ]
    .concat();
    let ca = test_support::tls::TestCa::new();
    let (cert, key) = ca.issue_pem(&["example.org"]);
    let docs = format!(
        "{}
---
{}
---
{}---
{}",
        route("redirects", &rules).replace(
            "[{ name: same-namespace }]",
            "[{ name: same-namespace }, { name: on-8080 }, { name: on-443 }]"
        ),
        gateway(
            "on-8080",
            "    - { name: http, port: 8080, protocol: HTTP }\n"
        ),
        support::cluster::tls_secret("gateway-conformance-infra", "cert", &cert, &key),
        gateway(
            "on-443",
            "    - { name: https, port: 443, protocol: HTTPS, tls: { certificateRefs: [{ name: cert }] } }\n"
        ),
    );
    let served = serve(&manifests(&backends, &docs), &[80, 8080, 443]);
    let http = served.ports[&80];
    for (path, status, location) in [
        (
            "/hostname-redirect",
            302,
            "http://example.org/hostname-redirect",
        ),
        (
            "/host-and-status",
            301,
            "http://example.org/host-and-status",
        ),
        (
            "/original-prefix/lemon",
            302,
            "http://gw.example/replacement-prefix/lemon",
        ),
        (
            "/full/path/original",
            302,
            "http://gw.example/full-path-replacement",
        ),
        (
            "/path-and-host",
            302,
            "http://example.org/replacement-prefix",
        ),
        (
            "/path-and-status",
            301,
            "http://gw.example/replacement-prefix",
        ),
        (
            "/full-path-and-host",
            302,
            "http://example.org/replacement-full",
        ),
        (
            "/full-path-and-status",
            301,
            "http://gw.example/replacement-full",
        ),
        ("/port", 302, "http://gw.example:8083/port"),
        (
            "/port-and-host",
            302,
            "http://example.org:8083/port-and-host",
        ),
        (
            "/port-and-status",
            301,
            "http://gw.example:8083/port-and-status",
        ),
        ("/scheme", 302, "https://gw.example/scheme"),
        (
            "/scheme-and-host",
            302,
            "https://example.org/scheme-and-host",
        ),
        (
            "/scheme-and-status",
            301,
            "https://gw.example/scheme-and-status",
        ),
        (
            "/scheme-nil-and-port-nil",
            302,
            "http://example.org/scheme-nil-and-port-nil",
        ),
        (
            "/scheme-nil-and-port-80",
            302,
            "http://example.org/scheme-nil-and-port-80",
        ),
        (
            "/scheme-nil-and-port-8080",
            302,
            "http://example.org:8080/scheme-nil-and-port-8080",
        ),
        (
            "/scheme-https-and-port-nil",
            302,
            "https://example.org/scheme-https-and-port-nil",
        ),
        (
            "/scheme-https-and-port-443",
            302,
            "https://example.org/scheme-https-and-port-443",
        ),
        (
            "/scheme-https-and-port-8443",
            302,
            "https://example.org:8443/scheme-https-and-port-8443",
        ),
        ("/s303", 303, "http://gw.example/s303"),
        ("/s307", 307, "http://gw.example/s307"),
        ("/s308", 308, "http://gw.example/s308"),
    ] {
        let seen = get(http, "gw.example", path).await;
        assert_eq!(seen.status(), status, "{path}");
        assert_eq!(seen.reply.header("location"), Some(location), "{path}");
    }
    // On 8080, a redirect without scheme and port keeps the port clients use
    // (not the one scalwsd binds).
    for (path, location) in [
        (
            "/scheme-nil-and-port-nil",
            "http://example.org:8080/scheme-nil-and-port-nil",
        ),
        (
            "/scheme-nil-and-port-80",
            "http://example.org/scheme-nil-and-port-80",
        ),
        (
            "/scheme-https-and-port-nil",
            "https://example.org/scheme-https-and-port-nil",
        ),
    ] {
        let seen = get(served.ports[&8080], "gw.example:8080", path).await;
        assert_eq!(seen.reply.header("location"), Some(location), "8080 {path}");
    }
    for (path, location) in [
        (
            "/scheme-nil-and-port-nil",
            "https://example.org/scheme-nil-and-port-nil",
        ),
        (
            "/scheme-http-and-port-nil",
            "http://example.org/scheme-http-and-port-nil",
        ),
        (
            "/scheme-nil-and-port-8080",
            "https://example.org:8080/scheme-nil-and-port-8080",
        ),
    ] {
        let request = test_support::request("GET", "example.org", path)
            .body(Default::default())
            .unwrap();
        let reply = test_support::tls::https(
            ca.client_config(&[b"http/1.1"]),
            served.ports[&443],
            "example.org",
            false,
            request,
        )
        .await;
        assert_eq!(reply.reply.header("location"), Some(location), "443 {path}");
    }
}

#[tokio::test]
async fn rewrites_of_path_and_host() {
    let backends = Backends::start().await;
    let rewrite = |path: &str, body: &str| {
        filtered(path, &format!("{{ type: URLRewrite, urlRewrite: {body} }}"))
    };
    let rules = [
        rewrite(
            "/prefix/one",
            "{ path: { type: ReplacePrefixMatch, replacePrefixMatch: /one } }",
        ),
        rewrite(
            "/strip-prefix",
            "{ path: { type: ReplacePrefixMatch, replacePrefixMatch: / } }",
        ),
        rewrite(
            "/full/one",
            "{ path: { type: ReplaceFullPath, replaceFullPath: /one } }",
        ),
        rewrite(
            "/foo",
            "{ path: { type: ReplacePrefixMatch, replacePrefixMatch: /xyz } }",
        ),
        rewrite(
            "/bar/",
            "{ path: { type: ReplacePrefixMatch, replacePrefixMatch: /xyz/ } }",
        ),
        rewrite(
            "/empty",
            "{ path: { type: ReplacePrefixMatch, replacePrefixMatch: \"\" } }",
        ),
        rewrite("/host", "{ hostname: one.example.org }"),
    ]
    .concat();
    let served = serve(&manifests(&backends, &route("rewrite-path", &rules)), &[80]);
    let addr = served.ports[&80];
    for (sent, want) in [
        ("/prefix/one/two", "/one/two"),
        ("/strip-prefix/three", "/three"),
        ("/strip-prefix", "/"),
        ("/full/one/two", "/one"),
        ("/foo/bar", "/xyz/bar"),
        ("/foo", "/xyz"),
        ("/foo/", "/xyz/"),
        ("/bar/baz", "/xyz/baz"),
        ("/empty/bar", "/bar"),
        ("/empty/", "/"),
        ("/empty", "/"),
        ("/foo/bar?q=1", "/xyz/bar?q=1"),
    ] {
        let seen = get(addr, "rewrite.example", sent).await;
        expect(&seen, Ok("infra-backend-v1"), sent);
        assert_eq!(seen.saw("path"), Some(want), "{sent}");
    }
    let seen = get(addr, "rewrite.example", "/host/x").await;
    assert_eq!(seen.saw("host"), Some("one.example.org"));
    assert_eq!(
        seen.header_seen("x-forwarded-host").as_deref(),
        Some("rewrite.example")
    );
}

#[tokio::test]
async fn weights_and_request_timeouts() {
    let backends = Backends::start().await;
    let rules = "    - { matches: [{ path: { type: PathPrefix, value: /weighted } }], backendRefs: [{ name: infra-backend-v1, port: 8080, weight: 70 }, { name: infra-backend-v2, port: 8080, weight: 30 }, { name: infra-backend-v3, port: 8080, weight: 0 }] }
    - { matches: [{ path: { type: PathPrefix, value: /request-timeout } }], timeouts: { request: 500ms }, backendRefs: [{ name: infra-backend-v1, port: 8080 }] }
    - { matches: [{ path: { type: PathPrefix, value: /disable-request-timeout } }], timeouts: { request: 0s }, backendRefs: [{ name: infra-backend-v1, port: 8080 }] }
    - { matches: [{ path: { type: PathPrefix, value: /backend-timeout } }], timeouts: { backendRequest: 500ms }, backendRefs: [{ name: infra-backend-v1, port: 8080 }] }
";
    let served = serve(
        &manifests(&backends, &route("weighted-and-timeouts", rules)),
        &[80],
    );
    let addr = served.ports[&80];
    let mut counts = std::collections::BTreeMap::new();
    for _ in 0..500 {
        let seen = get(addr, "example.com", "/weighted").await;
        *counts
            .entry(seen.backend().unwrap().to_owned())
            .or_insert(0) += 1;
    }
    // The conformance suite allows 5 %; the split is a smooth round robin,
    // so 500 requests in a row are 350 and 150 to within one schedule's turn.
    let share = |b: &str| f64::from(*counts.get(b).unwrap_or(&0)) / 500.0;
    assert!(
        (share("infra-backend-v1") - 0.7).abs() <= 0.02,
        "{counts:?}"
    );
    assert!(
        (share("infra-backend-v2") - 0.3).abs() <= 0.02,
        "{counts:?}"
    );
    assert_eq!(
        counts.get("infra-backend-v3"),
        None,
        "weight 0 is never taken: {counts:?}"
    );

    expect(
        &get(addr, "example.com", "/request-timeout").await,
        Ok("infra-backend-v1"),
        "fast",
    );
    expect(
        &get(addr, "example.com", "/request-timeout?delay=1s").await,
        Err(504),
        "slower than 500ms",
    );
    expect(
        &get(addr, "example.com", "/backend-timeout?delay=1s").await,
        Err(504),
        "backendRequest",
    );
    let seen = get(addr, "example.com", "/disable-request-timeout?delay=1s").await;
    expect(&seen, Ok("infra-backend-v1"), "0s disables it");
    assert_eq!(seen.saw("path"), Some("/disable-request-timeout?delay=1s"));
}

#[tokio::test]
async fn unsupported_filters_and_matches_answer_500_and_leave_the_rest_serving() {
    let backends = Backends::start().await;
    let rules = format!(
        "    - {{ matches: [{{ path: {{ type: PathPrefix, value: /mirror }} }}], filters: [{{ type: RequestMirror, requestMirror: {{ backendRef: {{ name: infra-backend-v2, port: 8080 }} }} }}], backendRefs: {v1} }}
    - {{ matches: [{{ path: {{ type: RegularExpression, value: \"/re.*\" }} }}], backendRefs: {v1} }}
    - {{ matches: [{{ path: {{ type: Exact, value: /exact }} }}], filters: [{{ type: URLRewrite, urlRewrite: {{ path: {{ type: ReplacePrefixMatch, replacePrefixMatch: /x }} }} }}], backendRefs: {v1} }}
    - {{ matches: [{{ path: {{ type: PathPrefix, value: /content-length }} }}], filters: [{{ type: RequestHeaderModifier, requestHeaderModifier: {{ set: [{{ name: Content-Length, value: \"5\" }}] }} }}], backendRefs: {v1} }}
    - {{ matches: [{{ path: {{ type: PathPrefix, value: /fine }} }}], backendRefs: {v1} }}
",
        v1 = backend("infra-backend-v1")
    );
    let served = serve(
        &manifests(&backends, &route("partly-unsupported", &rules)),
        &[80],
    );
    let addr = served.ports[&80];
    expect(
        &get(addr, "example.com", "/mirror").await,
        Err(500),
        "RequestMirror is not supported",
    );
    expect(
        &get(addr, "example.com", "/exact").await,
        Err(500),
        "ReplacePrefixMatch on an Exact match",
    );
    expect(
        &get(addr, "example.com", "/content-length").await,
        Err(500),
        "a header the proxy manages",
    );
    expect(
        &get(addr, "example.com", "/regex").await,
        Err(404),
        "a regular expression match matches nothing",
    );
    expect(
        &get(addr, "example.com", "/fine").await,
        Ok("infra-backend-v1"),
        "the rest serves",
    );
    let line = "HTTPRoute gateway-conformance-infra/partly-unsupported parent gateway-conformance-infra/same-namespace: PartiallyInvalid=True (UnsupportedValue): ";
    let status_line = served
        .status
        .lines()
        .find(|l| l.starts_with(line))
        .unwrap_or_else(|| panic!("no {line:?} in\n{}", served.status));
    for why in [
        "RequestMirror is not supported",
        "RegularExpression path matches",
        "ReplacePrefixMatch needs PathPrefix",
        "content-length",
    ] {
        assert!(status_line.contains(why), "{why:?} not in {status_line:?}");
    }
    assert!(served.status.contains(
        "partly-unsupported parent gateway-conformance-infra/same-namespace: Accepted=True"
    ));
}

#[tokio::test]
async fn conflicting_routes_go_to_the_oldest_then_by_name() {
    let backends = Backends::start().await;
    let route_at = |name: &str, created: &str, b: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{ name: {name}, namespace: gateway-conformance-infra, creationTimestamp: \"{created}\" }}\nspec:\n  parentRefs: [{{ name: same-namespace }}]\n  hostnames: [conflict.example]\n  rules: [{{ matches: [{{ path: {{ type: PathPrefix, value: /same }} }}], backendRefs: {} }}]\n",
            backend(b)
        )
    };
    let docs = [
        route_at("aa-newer", "2026-01-02T00:00:00Z", "infra-backend-v1"),
        route_at("zz-older", "2026-01-01T00:00:00Z", "infra-backend-v2"),
        route_at("mm-older-too", "2026-01-01T00:00:00Z", "infra-backend-v3"),
    ];
    let served = serve(&manifests(&backends, &docs.join("\n---\n")), &[80]);
    // The oldest two tie on age: namespace/name decides, so mm before zz.
    expect(
        &get(served.ports[&80], "conflict.example", "/same").await,
        Ok("infra-backend-v3"),
        "oldest, then by name",
    );
    for route in ["aa-newer", "zz-older", "mm-older-too"] {
        let line = format!(
            "HTTPRoute gateway-conformance-infra/{route} parent gateway-conformance-infra/same-namespace: Accepted=True"
        );
        assert!(served.status.contains(&line), "{line}\n{}", served.status);
    }
}
