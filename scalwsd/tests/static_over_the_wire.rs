//! The static action through the whole stack: raw requests as an attacker
//! would send them, and never a byte from outside the root.
#![allow(clippy::unwrap_used, missing_docs)]

mod support;

use std::time::Duration;

use test_support::{Proto, TestClient, raw_exchange};

const SECRET: &str = "TOP-SECRET-MARKER-7f3a";

struct Site {
    _dir: tempfile::TempDir,
    running: support::Running,
}

fn site() -> Site {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("public");
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(root.join("hello.txt"), "hello from public\n").unwrap();
    std::fs::write(root.join("docs/index.html"), "<h1>docs</h1>\n").unwrap();
    std::fs::write(root.join(".env"), format!("{SECRET}\n")).unwrap();
    std::fs::write(dir.path().join("secret.txt"), format!("{SECRET}\n")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("escape.txt")).unwrap();
    let yaml = r#"
listeners: [{ name: http, address: "127.0.0.1:0" }]
applications:
  - name: files
    domains: ["*"]
    routes:
      - { path: /static, static: { root: ./public } }
      - { path: /assets/, static: { root: ./public } }
      - { path: /, respond: { body: "fallback\n" } }
"#;
    let running = support::start(yaml, dir.path());
    Site { _dir: dir, running }
}

async fn raw_get(site: &Site, target: &str) -> String {
    let head = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    raw_exchange(
        site.running.addr("http"),
        head.as_bytes(),
        Duration::from_secs(5),
    )
    .await
}

fn status(reply: &str) -> &str {
    reply.get(9..12).unwrap_or("---")
}

#[tokio::test]
async fn serves_files_under_the_prefix() {
    let site = site();
    let addr = site.running.addr("http");
    for proto in [Proto::Http1, Proto::H2c] {
        let client = TestClient::new(proto);
        let reply = client.get(addr, "x", "/static/hello.txt").await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.text(), "hello from public\n");
        assert_eq!(
            reply.header("content-type"),
            Some("text/plain; charset=utf-8")
        );
        assert!(reply.header("etag").is_some());
        let index = client.get(addr, "x", "/static/docs/").await;
        assert_eq!(index.text(), "<h1>docs</h1>\n");
        assert_eq!(client.get(addr, "x", "/static/missing").await.status, 404);
        // A prefix written with a trailing slash strips the same way.
        assert_eq!(
            client.get(addr, "x", "/assets/hello.txt").await.text(),
            "hello from public\n"
        );
    }
}

#[tokio::test]
async fn traversal_attempts_never_leak_a_byte() {
    let site = site();
    let cases = [
        ("/static/../secret.txt", "fallback"),
        ("/static/%2e%2e/secret.txt", "fallback"),
        ("/static/%2e%2e%2fsecret.txt", "404"),
        ("/static/..%2fsecret.txt", "404"),
        ("/static/%252e%252e/secret.txt", "404"),
        ("/static/docs/..%2f..%2fsecret.txt", "404"),
        ("/static/%2e%2e/%2e%2e/secret.txt", "400"),
        ("/static/escape.txt", "404"),
        ("/static/.env", "404"),
        ("/static/%2eenv", "404"),
        ("/static/hello.txt%00", "400"),
        ("/../secret.txt", "400"),
    ];
    for (target, expected) in cases {
        let reply = raw_get(&site, target).await;
        assert!(!reply.contains(SECRET), "{target} leaked: {reply}");
        match expected {
            "fallback" => assert!(reply.ends_with("fallback\n"), "{target} -> {reply}"),
            code => assert_eq!(status(&reply), code, "{target} -> {reply}"),
        }
    }
}

#[tokio::test]
async fn conditional_range_and_head_over_both_protocols() {
    use http_body_util::Full;
    use test_support::request;
    let site = site();
    let addr = site.running.addr("http");
    for proto in [Proto::Http1, Proto::H2c] {
        let client = TestClient::new(proto);
        let send = |method: &str, headers: &[(&str, &str)]| {
            let mut builder = request(method, "x", "/static/hello.txt");
            for (name, value) in headers {
                builder = builder.header(*name, *value);
            }
            client.send(addr, builder.body(Full::default()).unwrap())
        };
        let full = send("GET", &[]).await;
        let etag = full.header("etag").unwrap().to_owned();
        let modified = full.header("last-modified").unwrap().to_owned();

        let not_modified = send("GET", &[("if-none-match", &etag)]).await;
        assert_eq!(not_modified.status, 304, "{proto:?}");
        assert!(not_modified.body.is_empty());
        assert_eq!(
            send("GET", &[("if-modified-since", &modified)])
                .await
                .status,
            304
        );

        let range = send("GET", &[("range", "bytes=0-4")]).await;
        assert_eq!(range.status, 206, "{proto:?}");
        assert_eq!(range.text(), "hello");
        assert_eq!(range.header("content-range"), Some("bytes 0-4/18"));
        let suffix = send("GET", &[("range", "bytes=-7")]).await;
        assert_eq!(suffix.text(), "public\n");
        let unsatisfiable = send("GET", &[("range", "bytes=100-")]).await;
        assert_eq!(unsatisfiable.status, 416);
        assert_eq!(unsatisfiable.header("content-range"), Some("bytes */18"));

        let head = send("HEAD", &[]).await;
        assert_eq!(head.status, 200, "{proto:?}");
        assert!(head.body.is_empty());
        assert_eq!(head.header("content-length"), Some("18"));
        assert_eq!(head.header("etag"), Some(etag.as_str()));
    }
}

/// `.well-known` is served by default (ACME challenges, security.txt), other
/// dotfiles never; `allow_dotfiles` changes which, `[]` hiding it too.
#[tokio::test]
async fn well_known_is_served_and_other_dotfiles_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("public");
    std::fs::create_dir_all(root.join(".well-known/acme-challenge")).unwrap();
    std::fs::write(root.join(".well-known/acme-challenge/tok"), "proof\n").unwrap();
    std::fs::write(root.join(".env"), format!("{SECRET}\n")).unwrap();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join(".git/config"), format!("{SECRET}\n")).unwrap();
    let yaml = r#"
listeners: [{ name: http, address: "127.0.0.1:0" }]
applications:
  - name: files
    domains: ["*"]
    routes:
      - { path: /hidden, static: { root: ./public, allow_dotfiles: [] } }
      - { path: /git, static: { root: ./public, allow_dotfiles: [.git] } }
      - { path: /, static: { root: ./public } }
"#;
    let running = support::start(yaml, dir.path());
    let get = |target: &'static str| {
        let addr = running.addr("http");
        async move {
            let head = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            raw_exchange(addr, head.as_bytes(), Duration::from_secs(5)).await
        }
    };
    let proof = get("/.well-known/acme-challenge/tok").await;
    assert!(
        proof.starts_with("HTTP/1.1 200") && proof.ends_with("proof\n"),
        "{proof}"
    );
    let encoded = get("/%2Ewell-known/acme-challenge/tok").await;
    assert!(encoded.starts_with("HTTP/1.1 200"), "{encoded}");
    for refused in [
        "/.env",
        "/.git/config",
        "/%2eenv",
        "/hidden/.well-known/acme-challenge/tok",
        "/git/.env",
    ] {
        let reply = get(refused).await;
        assert!(reply.starts_with("HTTP/1.1 404"), "{refused}: {reply}");
        assert!(!reply.contains(SECRET), "{refused}: {reply}");
    }
    let git = get("/git/.git/config").await;
    assert!(
        git.starts_with("HTTP/1.1 200") && git.contains(SECRET),
        "{git}"
    );
}
