//! `scalwsd explain`: the binary run as an operator runs it, on a real
//! configuration file (with TLS certificates made by rcgen): what it prints
//! for each kind of answer, and its exit codes.
#![allow(clippy::unwrap_used, missing_docs)]

use std::path::Path;
use std::process::Command;

use test_support::tls::TestCa;

const BIN: &str = env!("CARGO_BIN_EXE_scalwsd");

fn config(dir: &Path) -> std::path::PathBuf {
    let ca = TestCa::new();
    let (a_cert, a_key) = ca.issue(dir, "a", &["shop.test", "*.shop.test"], false);
    let (b_cert, b_key) = ca.issue(dir, "b", &["blog.test"], false);
    let file = dir.join("site.yaml");
    std::fs::write(
        &file,
        format!(
            r#"
listeners:
  - {{ name: http, address: "127.0.0.1:8080" }}
  - name: https
    address: "127.0.0.1:8443"
    protocol: https
    tls:
      certificates:
        - {{ cert: "{a_cert}", key: "{a_key}" }}
        - {{ cert: "{b_cert}", key: "{b_key}" }}
upstreams:
  canary: {{ addresses: ["127.0.0.1:9001"] }}
  main: {{ addresses: ["127.0.0.1:9002"] }}
applications:
  - name: shop
    domains: ["shop.test", "*.shop.test"]
    routes:
      - match: {{ path: {{ exact: /login }}, methods: [POST] }}
        respond: {{ status: 204 }}
      - match: {{ path: {{ prefix: /api }}, headers: {{ x-canary: "1" }} }}
        proxy: canary
      - match: {{ path: {{ prefix: /api }}, query: {{ debug: "yes" }} }}
        proxy: canary
        timeout: 2s
      - path: /api
        proxy: main
        request_headers: {{ set: {{ x-from: scalws }} }}
  - name: blog
    domains: ["blog.test"]
    https_redirect: true
    routes:
      - {{ path: /, respond: {{ body: "blog\n" }} }}
"#,
            a_cert = a_cert.display(),
            a_key = a_key.display(),
            b_cert = b_cert.display(),
            b_key = b_key.display(),
        ),
    )
    .unwrap();
    file
}

/// Runs `scalwsd explain --config FILE ARGS...`: exit code and stdout (stderr appended).
fn explain(file: &Path, args: &[&str]) -> (i32, String) {
    let output = Command::new(BIN)
        .arg("explain")
        .arg("--config")
        .arg(file)
        .args(args)
        .output()
        .unwrap();
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.code().unwrap(), text)
}

#[test]
fn a_route_is_shown_with_every_route_before_and_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path());
    let (code, text) = explain(
        &file,
        &["-H", "x-canary: 1", "http://a.shop.test/api/items"],
    );
    assert_eq!(code, 0, "{text}");
    let expected = "\
request:     GET http://a.shop.test/api/items
listener:    http (http on 127.0.0.1:8080)
host:        a.shop.test
host entry:  *.shop.test (one label)
application: shop
routes, in precedence order:
     1. exact /login, methods POST: path does not match
  => 2. prefix /api, header x-canary: 1: matched
     3. prefix /api, query debug=yes: query parameter debug is not \"yes\"
     4. prefix /api: would match, but a route above matched first
action:      proxy to upstream \"canary\"
";
    assert_eq!(text, expected);

    let (code, text) = explain(&file, &["http://shop.test/api/x?debug=yes"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("host entry:  shop.test (exact)\n"), "{text}");
    assert!(
        text.contains("     2. prefix /api, header x-canary: 1: header x-canary is not \"1\"\n"),
        "{text}"
    );
    assert!(
        text.contains("  => 3. prefix /api, query debug=yes: matched\n"),
        "{text}"
    );
    assert!(
        text.contains("policies:    timeout\ntimeout:     2s\n"),
        "{text}"
    );

    let (code, text) = explain(&file, &["http://shop.test/api/x"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("action:      proxy to upstream \"main\"\npolicies:    request_headers\n"),
        "{text}"
    );
}

#[test]
fn statuses_before_a_route_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path());

    let (code, text) = explain(&file, &["http://shop.test/login"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("  1. exact /login, methods POST: method not allowed by this route\n"),
        "{text}"
    );
    assert!(
        text.ends_with("answer:      405 Method Not Allowed (routes match all but the method)\n"),
        "{text}"
    );
    let (code, text) = explain(&file, &["-X", "POST", "http://shop.test/login"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("action:      respond (a fixed response)\n"),
        "{text}"
    );

    let (code, text) = explain(&file, &["http://shop.test/other"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.ends_with("answer:      404 Not Found (no route matches)\n"),
        "{text}"
    );

    let (code, text) = explain(&file, &["http://nobody.test/"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("host entry:  (none)\n"), "{text}");
    assert!(
        text.ends_with("answer:      404 Not Found (no application has that host)\n"),
        "{text}"
    );

    let (code, text) = explain(&file, &["http://shop.test/../../etc"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.ends_with("answer:      400 Bad Request (the path climbs above the root)\n"),
        "{text}"
    );

    // https_redirect on the plain listener; the https listener serves it.
    let (code, text) = explain(&file, &["http://blog.test/post?id=1"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.ends_with("answer:      308 Permanent Redirect to https://blog.test:8443/post?id=1 (https_redirect)\n"),
        "{text}"
    );
    let (code, text) = explain(&file, &["https://blog.test:8443/post"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("listener:    https (https on 127.0.0.1:8443) (SNI blog.test)\n"),
        "{text}"
    );

    // A connection whose SNI chose blog.test's certificate, asking for shop.test: 421.
    let (code, text) = explain(&file, &["--sni", "blog.test", "https://shop.test:8443/api"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.ends_with("answer:      421 Misdirected Request (the certificate chosen by the connection's SNI does not cover the host)\n"), "{text}");
    // The same SNI for one of its own names: served.
    let (code, _) = explain(
        &file,
        &["--sni", "x.shop.test", "https://shop.test:8443/api"],
    );
    assert_eq!(code, 0);
}

#[test]
fn bad_input_and_bad_configurations_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path());
    for args in [
        &["ftp://shop.test/"][..],
        &["--listener", "nope", "http://shop.test/"],
        &["-H", "no colon", "http://shop.test/"],
        &["-X", "GE T", "http://shop.test/"],
    ] {
        let (code, text) = explain(&file, args);
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(text.starts_with("scalwsd explain: "), "{text}");
    }
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "listeners: [{ name: http, adress: 127.0.0.1:0 }]\n").unwrap();
    let (code, text) = explain(&bad, &["http://x/"]);
    assert_eq!(code, 2);
    assert!(text.contains("unknown key \"adress\""), "{text}");

    // --listener picks the table: the https listener by name.
    let (code, text) = explain(&file, &["--listener", "https", "http://blog.test/"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("listener:    https (https on 127.0.0.1:8443)"),
        "{text}"
    );
}
