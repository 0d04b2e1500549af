//! Bad configuration files: each gives the exact `FILE:LINE:COLUMN: path: message`
//! a user sees, for every error in the file.
#![allow(clippy::unwrap_used, missing_docs)]

/// Loads `yaml` as `bad.yaml` beside an existing `public/` directory and
/// returns the error text, with the temp dir's path replaced by `DIR`.
fn errors(yaml: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("public")).unwrap();
    let base = dir.path().to_path_buf();
    match scalwsd::config::load("bad.yaml", yaml, &base) {
        Ok(_) => panic!("expected errors for:\n{yaml}"),
        Err(errors) => errors
            .to_string()
            .replace(&base.display().to_string(), "DIR"),
    }
}

const LISTENER: &str = "listeners:\n  - name: http\n    address: 127.0.0.1:0\n";

fn with_app(app: &str) -> String {
    format!("{LISTENER}applications:\n{app}")
}

#[test]
fn yaml_syntax_error() {
    assert_eq!(
        errors("listeners: [\n"),
        "bad.yaml:1:12: listeners: unclosed bracket '['"
    );
}

#[test]
fn unknown_top_level_key_with_hint() {
    assert_eq!(
        errors("listners: []\n"),
        "bad.yaml:1:1: listners: unknown key \"listners\" (did you mean \"listeners\"?)"
    );
}

#[test]
fn unknown_nested_key_with_hint() {
    assert_eq!(
        errors("listeners:\n  - name: http\n    adress: 127.0.0.1:0\n"),
        "bad.yaml:3:5: listeners[0].adress: unknown key \"adress\" (did you mean \"address\"?)"
    );
}

#[test]
fn unknown_listener_reference() {
    let yaml = with_app(
        "  - name: a\n    domains: [x.com]\n    listeners: [htp]\n    routes: [{ path: /, respond: { body: hi } }]\n",
    );
    assert_eq!(
        errors(&yaml),
        "bad.yaml:7:17: applications[0].listeners[0]: unknown listener \"htp\" (did you mean \"http\"?)"
    );
}

#[test]
fn duplicate_domain_names_both_applications() {
    let yaml = with_app(concat!(
        "  - name: a\n    domains: [x.com]\n    routes: [{ path: /, respond: { body: hi } }]\n",
        "  - name: b\n    domains: [\"X.com\"]\n    routes: [{ path: /, respond: { body: hi } }]\n",
    ));
    assert_eq!(
        errors(&yaml),
        "bad.yaml:9:15: applications[1].domains[0]: domain \"x.com\" on listener \"http\" is claimed by both \"a\" and \"b\""
    );
}

/// The host table finds every domain claimed twice (an application's own
/// repeat too), each reported where the later claim is, beside the file's
/// other errors.
#[test]
fn every_duplicate_domain_is_reported_with_the_other_errors() {
    let yaml = with_app(concat!(
        "  - name: a\n    domains: [x.com, y.com, x.com]\n    routes: [{ path: /, respond: { body: hi } }]\n",
        "  - name: b\n    domains: [y.com]\n    routes: [{ path: /, respond: { body: hi } }]\n",
        "  - name: c\n    domains: [z.com]\n    routes: [{ path: /, respond: { status: 999 } }]\n",
    ));
    let text = errors(&yaml);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("bad.yaml:6:"), "{text}");
    assert!(lines[0].ends_with("applications[0].domains[2]: domain \"x.com\" on listener \"http\" is claimed by both \"a\" and \"a\""), "{text}");
    assert!(lines[1].ends_with("applications[1].domains[0]: domain \"y.com\" on listener \"http\" is claimed by both \"a\" and \"b\""), "{text}");
    assert!(
        lines[2].contains("applications[2].routes[0].respond.status"),
        "{text}"
    );
}

#[test]
fn same_domain_on_different_listeners_is_fine() {
    let yaml = "listeners:\n  - { name: a, address: 127.0.0.1:0 }\n  - { name: b, address: 127.0.0.1:0 }\n\
                applications:\n  - { name: one, domains: [x.com], listeners: [a], routes: [{ path: /, respond: {} }] }\n  \
                - { name: two, domains: [x.com], listeners: [b], routes: [{ path: /, respond: {} }] }\n";
    assert!(scalwsd::config::load("ok.yaml", yaml, std::path::Path::new(".")).is_ok());
}

#[test]
fn missing_static_root() {
    let yaml = with_app(
        "  - name: a\n    domains: [x.com]\n    routes:\n      - path: /\n        static: { root: ./nope }\n",
    );
    assert_eq!(
        errors(&yaml),
        "bad.yaml:9:25: applications[0].routes[0].static.root: static root DIR/./nope: No such file or directory (os error 2) \
         (relative roots are resolved from the config file's directory, DIR)"
    );
}

#[test]
fn bad_duration() {
    assert_eq!(
        errors(&format!("{LISTENER}limits:\n  keepalive_timeout: 5x\n")),
        "bad.yaml:5:22: limits.keepalive_timeout: invalid duration \"5x\" (expected a number and a unit: 250ms, 5s, 2m, 1h)"
    );
}

#[test]
fn bad_size() {
    assert_eq!(
        errors(&format!("{LISTENER}limits:\n  max_request_body: 12XB\n")),
        "bad.yaml:5:21: limits.max_request_body: invalid size \"12XB\" (expected a number and a unit: 512B, 64KiB, 16MiB, 1GiB)"
    );
}

#[test]
fn bad_pattern() {
    let yaml = with_app(
        "  - name: a\n    domains: [x.com]\n    routes:\n      - match: { path: { pattern: \"/users/{id\" } }\n        respond: { body: hi }\n",
    );
    assert_eq!(
        errors(&yaml),
        "bad.yaml:8:35: applications[0].routes[0].match.path.pattern: invalid route path \"/users/{id\": Parameters must be registered with a valid name"
    );
    // 30 parameters once made the loader panic (in matchit); now an error.
    let many: String = (0..30).map(|i| format!("/{{p{i}}}")).collect();
    let yaml = with_app(&format!(
        "  - name: a\n    domains: [x.com]\n    routes:\n      - match: {{ path: {{ pattern: \"{many}\" }} }}\n        respond: {{ body: hi }}\n"
    ));
    assert_eq!(
        errors(&yaml),
        format!(
            "bad.yaml:8:35: applications[0].routes[0].match.path.pattern: invalid route path \"{many}\": more than 16 parameters in one pattern"
        )
    );
}

#[test]
fn bad_domain() {
    let yaml = with_app(
        "  - name: a\n    domains: [\"a*.com\"]\n    routes: [{ path: /, respond: { body: hi } }]\n",
    );
    assert_eq!(
        errors(&yaml),
        "bad.yaml:6:15: applications[0].domains[0]: invalid domain \"a*.com\": \"*\" must be a whole label at the start"
    );
}

#[test]
fn two_actions_on_one_route() {
    let yaml = with_app(
        "  - name: a\n    domains: [x.com]\n    routes:\n      - path: /\n        respond: { body: hi }\n        static: { root: ./public }\n",
    );
    assert_eq!(
        errors(&yaml),
        "bad.yaml:8:9: applications[0].routes[0]: a route takes exactly one action, this one has respond, static"
    );
}

#[test]
fn route_without_action() {
    let yaml = with_app("  - name: a\n    domains: [x.com]\n    routes:\n      - path: /\n");
    assert_eq!(
        errors(&yaml),
        "bad.yaml:8:9: applications[0].routes[0]: a route needs an action: one of respond, static, proxy, redirect or backends"
    );
}

#[test]
fn unknown_upstream_with_hint() {
    let yaml = format!(
        "{LISTENER}upstreams:\n  api: {{ addresses: [\"127.0.0.1:9001\"] }}\napplications:\n  - name: a\n    domains: [x.com]\n    routes:\n      - path: /\n        proxy: apj\n"
    );
    assert_eq!(
        errors(&yaml),
        "bad.yaml:11:16: applications[0].routes[0].proxy: unknown upstream \"apj\" (did you mean \"api\"?); name one under upstreams, or give host:port"
    );
}

#[test]
fn bad_upstream_definitions() {
    let yaml = format!(
        "{LISTENER}upstreams:\n  api:\n    addresses: [\"127.0.0.1:9001\", {{ address: nowhere, weight: 2 }}]\n    balance: round_robn\n    protocol: http3\n    retries: 50\n  hashy:\n    addresses: [\"127.0.0.1:9002\"]\n    balance: header_hash\n  zero:\n    addresses: [{{ address: \"127.0.0.1:9003\", weight: 0 }}]\n"
    );
    assert_eq!(
        errors(&yaml),
        "bad.yaml:6:35: upstreams.api.addresses[1]: invalid address \"nowhere\": invalid socket address (expected IP:PORT or host:port)\n\
         bad.yaml:7:14: upstreams.api.balance: unknown balance \"round_robn\" (did you mean \"round_robin\"?); expected one of round_robin, least_requests, random_two, ip_hash, header_hash\n\
         bad.yaml:8:15: upstreams.api.protocol: unknown protocol \"http3\" (did you mean \"https\"?); expected http1, http2 or https\n\
         bad.yaml:9:14: upstreams.api.retries: must be at most 10\n\
         bad.yaml:12:14: upstreams.hashy.balance: header_hash needs hash_header: the header whose value picks the address\n\
         bad.yaml:14:16: upstreams.zero.addresses: every address has weight 0: none could ever be chosen"
    );
}

#[test]
fn a_backend_needs_exactly_one_of_proxy_or_status() {
    let yaml = with_app(
        "  - name: a\n    domains: [x.com]\n    routes:\n      - path: /\n        backends:\n          - { weight: 1 }\n          - { status: 700, weight: 1 }\n",
    );
    assert_eq!(
        errors(&yaml),
        "bad.yaml:10:13: applications[0].routes[0].backends[0]: a backend takes exactly one of proxy or status\n\
         bad.yaml:11:23: applications[0].routes[0].backends[1].status: invalid status 700 (expected 200 to 599)"
    );
}

#[test]
fn every_error_is_reported_in_document_order() {
    assert_eq!(
        errors("listeners:\n  - name: http\n    address: localhost\n    protocol: htp\n"),
        "bad.yaml:3:14: listeners[0].address: invalid address \"localhost\": expected IP:PORT, e.g. 127.0.0.1:8080 or [::1]:8080\n\
         bad.yaml:4:15: listeners[0].protocol: unknown protocol \"htp\" (did you mean \"http\"?); expected http, https or http3"
    );
}

#[test]
fn method_case_and_status_range() {
    let yaml = with_app(
        "  - name: a\n    domains: [x.com]\n    routes:\n      - match: { path: { prefix: /a }, methods: [get] }\n        respond: { status: 700 }\n",
    );
    assert_eq!(
        errors(&yaml),
        "bad.yaml:8:50: applications[0].routes[0].match.methods[0]: invalid method \"get\" (did you mean \"GET\"? methods are case-sensitive)\n\
         bad.yaml:9:28: applications[0].routes[0].respond.status: invalid status 700 (expected 200 to 599)"
    );
}

#[test]
fn zero_workers() {
    assert_eq!(
        errors(&format!("{LISTENER}workers: 0\n")),
        "bad.yaml:4:10: workers: must be at least 1"
    );
}

#[test]
fn duplicate_listener_name_and_address() {
    assert_eq!(
        errors(
            "listeners:\n  - name: http\n    address: 127.0.0.1:8080\n  - name: http\n    address: 127.0.0.1:8080\n"
        ),
        "bad.yaml:4:11: listeners[1].name: listener name \"http\" is used twice\n\
         bad.yaml:5:14: listeners[1].address: address 127.0.0.1:8080 is already used by listener \"http\""
    );
}

#[test]
fn wrong_type() {
    assert_eq!(
        errors(&format!("{LISTENER}workers: many\n")),
        "bad.yaml:4:10: workers: expected a whole number"
    );
}

#[test]
fn https_listener_needs_certificates_and_http_takes_none() {
    assert_eq!(
        errors("listeners:\n  - name: https\n    address: 127.0.0.1:0\n    protocol: https\n"),
        "bad.yaml:4:15: listeners[0].tls: protocol https needs tls.certificates"
    );
    assert_eq!(
        errors(
            "listeners:\n  - name: http\n    address: 127.0.0.1:0\n    tls: { certificates: [] }\n"
        ),
        "bad.yaml:4:10: listeners[0].tls: tls applies only to protocol https or http3"
    );
}

#[test]
fn every_bad_route_of_an_application_is_reported() {
    let yaml = with_app(
        "  - name: a\n    domains: [x.com]\n    routes:\n      - { path: nope, respond: {} }\n      - { match: { path: { pattern: \"/{a\" } }, respond: {} }\n",
    );
    assert_eq!(
        errors(&yaml),
        "bad.yaml:8:17: applications[0].routes[0].path: invalid route path \"nope\": must start with \"/\"\n\
         bad.yaml:9:37: applications[0].routes[1].match.path.pattern: invalid route path \"/{a\": Parameters must be registered with a valid name"
    );
}

#[test]
fn empty_listeners_and_empty_match_path_have_positions() {
    assert_eq!(
        errors("listeners: []\n"),
        "bad.yaml:1:12: listeners: at least one listener is needed"
    );
    let yaml = with_app(
        "  - name: a\n    domains: [x.com]\n    routes:\n      - { match: { path: {} }, respond: {} }\n",
    );
    assert_eq!(
        errors(&yaml),
        "bad.yaml:8:26: applications[0].routes[0].match.path: needs one of exact, prefix or pattern"
    );
}

#[test]
fn limits_that_would_exhaust_memory_are_refused() {
    assert_eq!(
        errors(&format!(
            "{LISTENER}limits:\n  max_headers: 100000000\n  max_connections: 9999999999\n"
        )),
        "bad.yaml:5:16: limits.max_headers: must be between 1 and 1000\n\
         bad.yaml:6:20: limits.max_connections: must be between 1 and 1000000"
    );
    assert_eq!(
        errors(&format!("{LISTENER}limits:\n  drain_timeout: 9000h\n")),
        "bad.yaml:5:18: limits.drain_timeout: duration \"9000h\" is too long (at most 365 days)"
    );
}

#[test]
fn bad_redirects() {
    let yaml = with_app(concat!(
        "  - name: a\n    domains: [x.com]\n    routes:\n",
        "      - path: /a\n        redirect: { scheme: htps, host: \"x.com:80\", port: 0, status: 200 }\n",
        "      - path: /b\n        redirect: { path: /new, prefix: /old }\n",
        "      - path: /c\n        redirect: { path: relative, port: 70000 }\n",
    ));
    assert_eq!(
        errors(&yaml),
        "bad.yaml:9:29: applications[0].routes[0].redirect.scheme: unknown scheme \"htps\" (did you mean \"https\"?); expected http or https\n\
         bad.yaml:9:41: applications[0].routes[0].redirect.host: invalid host \"x.com:80\": expected a name or an address without a port (the port goes in port)\n\
         bad.yaml:9:59: applications[0].routes[0].redirect.port: must be between 1 and 65535\n\
         bad.yaml:9:70: applications[0].routes[0].redirect.status: invalid redirect status 200 (expected 301, 302, 303, 307 or 308)\n\
         bad.yaml:11:41: applications[0].routes[1].redirect.prefix: give either path or prefix, not both\n\
         bad.yaml:13:27: applications[0].routes[2].redirect.path: invalid path \"relative\": must start with \"/\"\n\
         bad.yaml:13:43: applications[0].routes[2].redirect.port: must be between 1 and 65535"
    );
}

#[test]
fn a_prefix_replacement_needs_a_prefix_route() {
    let yaml = with_app(concat!(
        "  - name: a\n    domains: [x.com]\n    routes:\n",
        "      - match: { path: { exact: /login } }\n        rewrite: { prefix: /v2 }\n        respond: {}\n",
        "      - match: { path: { pattern: \"/u/{id}\" } }\n        redirect: { prefix: /users }\n",
        "      - match: { path: { exact: /old } }\n        redirect: { path: /new }\n",
    ));
    assert_eq!(
        errors(&yaml),
        "bad.yaml:9:28: applications[0].routes[0].rewrite.prefix: replaces the prefix the route matched, but this route matches an exact path; use path for a full replacement\n\
         bad.yaml:12:29: applications[0].routes[1].redirect.prefix: replaces the prefix the route matched, but this route matches a pattern; use path for a full replacement"
    );
}

#[test]
fn bad_rewrites() {
    let yaml = with_app(concat!(
        "  - name: a\n    domains: [x.com]\n    routes:\n",
        "      - path: /a\n        rewrite: {}\n        respond: {}\n",
        "      - path: /b\n        rewrite: { prefix: v2, host: \"a b\" }\n        respond: {}\n",
        "      - path: /c\n        rewrite: { path: /x }\n        redirect: { status: 301 }\n",
    ));
    assert_eq!(
        errors(&yaml),
        "bad.yaml:9:18: applications[0].routes[0].rewrite: needs at least one of path, prefix or host\n\
         bad.yaml:12:28: applications[0].routes[1].rewrite.prefix: invalid path \"v2\": must be empty or start with \"/\"\n\
         bad.yaml:12:38: applications[0].routes[1].rewrite.host: invalid host \"a b\": expected a name or an address, with an optional :port\n\
         bad.yaml:15:18: applications[0].routes[2].rewrite: a redirect answers before any rewrite; give one of redirect or rewrite"
    );
}

#[test]
fn bad_header_modifiers() {
    let yaml = with_app(concat!(
        "  - name: a\n    domains: [x.com]\n    routes:\n",
        "      - path: /\n        respond: {}\n",
        "        request_headers:\n",
        "          set: { \"bad name\": \"1\", X-A: \"1\", x-a: \"2\", host: h, content-length: \"5\" }\n",
        "          add: { x-b: \"bad\\nvalue\" }\n",
        "          remove: [\"no good\"]\n",
        "        response_headers: { set: { connection: close }, add: { host: fine } }\n",
    ));
    assert_eq!(
        errors(&yaml),
        "bad.yaml:11:30: applications[0].routes[0].request_headers.set.bad name: invalid header name \"bad name\"\n\
         bad.yaml:11:50: applications[0].routes[0].request_headers.set.x-a: header \"x-a\" is given twice (names are case-insensitive)\n\
         bad.yaml:11:61: applications[0].routes[0].request_headers.set.host: the host is changed with rewrite.host, not request_headers\n\
         bad.yaml:11:80: applications[0].routes[0].request_headers.set.content-length: \"content-length\" frames the message or belongs to the connection; it cannot be changed\n\
         bad.yaml:12:23: applications[0].routes[0].request_headers.add.x-b: invalid header value\n\
         bad.yaml:13:20: applications[0].routes[0].request_headers.remove[0]: invalid header name \"no good\"\n\
         bad.yaml:14:48: applications[0].routes[0].response_headers.set.connection: \"connection\" frames the message or belongs to the connection; it cannot be changed"
    );
}

#[test]
fn https_redirect_needs_an_https_listener() {
    let yaml = with_app(concat!(
        "  - name: a\n    domains: [x.com]\n    https_redirect: true\n    routes:\n",
        "      - { path: /, respond: {}, https_redirect: true }\n",
        "      - { path: /off, respond: {}, https_redirect: false }\n",
    ));
    assert_eq!(
        errors(&yaml),
        "bad.yaml:7:21: applications[0].https_redirect: https_redirect needs an https listener\n\
         bad.yaml:9:49: applications[0].routes[0].https_redirect: https_redirect needs an https listener"
    );
}

#[test]
fn route_cache_applies_only_to_proxy_routes() {
    let yaml = with_app(
        "  - name: a\n    domains: [x.com]\n    routes:\n      - { path: /, respond: {}, cache: false }\n",
    );
    assert_eq!(
        errors(&yaml),
        "bad.yaml:8:40: applications[0].routes[0].cache: cache applies only to proxy routes"
    );
}

#[test]
fn allow_dotfiles_takes_dot_names_only() {
    let yaml = with_app(
        "  - name: a\n    domains: [x.com]\n    routes:\n      - path: /\n        static: { root: ./public, allow_dotfiles: [.ok, env, \"..\", .a/b] }\n",
    );
    let text = errors(&yaml);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (line, (i, name)) in lines.iter().zip([(1, "env"), (2, ".."), (3, ".a/b")]) {
        assert!(
            line.contains(&format!("applications[0].routes[0].static.allow_dotfiles[{i}]: \"{name}\" is not a dotfile name")),
            "{text}"
        );
    }
}

#[test]
fn unknown_scheduler() {
    assert_eq!(
        errors(&format!("{LISTENER}scheduler: stealing\n")),
        "bad.yaml:4:12: scheduler: unknown scheduler \"stealing\"; expected one of per_worker, work_stealing"
    );
}
