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
