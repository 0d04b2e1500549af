//! Static-root traversal in every encoding we know of, over HTTP/1.1 and
//! HTTP/2 (whose `:path` is sent byte for byte, as an attacker's client
//! would): dot segments plain, escaped, upper-case, half-escaped, double-
//! escaped, as overlong or full-width UTF-8, with backslashes, `;`, NUL,
//! repeated slashes, in an absolute-form target, and through a symlink. None
//! may show a byte of a file outside the root or of a dotfile; where the
//! answer is not a 404 or 400 it is the fallback route's.

use std::time::Duration;

use super::h2raw::{END_HEADERS, END_STREAM, H2Raw, HEADERS, frame, request};
use super::support;

const SECRET: &str = "TOP-SECRET-8c1e";

/// Every target, and which answers are acceptable for it.
const TARGETS: &[&str] = &[
    "/static/../secret.txt",
    "/static/%2e%2e/secret.txt",
    "/static/%2E%2E/secret.txt",
    "/static/.%2e/secret.txt",
    "/static/%2e./secret.txt",
    "/static/..%2fsecret.txt",
    "/static/..%2Fsecret.txt",
    "/static/%2e%2e%2fsecret.txt",
    "/static/%252e%252e/secret.txt",
    "/static/%252e%252e%252fsecret.txt",
    "/static/..%5csecret.txt",
    "/static/..%255csecret.txt",
    "/static/..\\secret.txt",
    "/static/%c0%ae%c0%ae/secret.txt",
    "/static/%e0%80%ae%e0%80%ae/secret.txt",
    "/static/%ef%bc%8e%ef%bc%8e/secret.txt",
    "/static/..;/secret.txt",
    "/static/docs/../../secret.txt",
    "/static/docs/%2e%2e/%2e%2e/secret.txt",
    "/static//../secret.txt",
    "/static/docs//..//..//secret.txt",
    "/static/%00/../secret.txt",
    "/static/escape.txt",
    "/static/escape-dir/secret.txt",
    "/static/.env",
    "/static/%2eenv",
    "/static/%2Eenv",
    "/static/.%65nv",
    "/static/docs/../.env",
    "/static/.git/config",
    "/static/%2egit/config",
    "/static/secret.txt/..",
    "/..",
    "/%2e%2e",
    "/../secret.txt",
];

fn site() -> (tempfile::TempDir, support::Running) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("public");
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join("hello.txt"), "hello\n").unwrap();
    std::fs::write(root.join(".env"), SECRET).unwrap();
    std::fs::write(root.join(".git/config"), SECRET).unwrap();
    std::fs::write(dir.path().join("secret.txt"), SECRET).unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("escape.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("escape-dir")).unwrap();
    let yaml = r#"
listeners: [{ name: http, address: "127.0.0.1:0" }]
applications:
  - name: files
    domains: ["*"]
    routes:
      - { path: /static, static: { root: ./public } }
      - { path: /, respond: { body: "fallback" } }
"#;
    let running = support::start(yaml, dir.path());
    (dir, running)
}

fn acceptable(target: &str, status: u16, body: &str) {
    assert!(!body.contains(SECRET), "{target} leaked {status}: {body}");
    assert!(
        matches!(status, 400 | 403 | 404) || (status == 200 && body == "fallback"),
        "{target}: {status} {body}"
    );
}

#[tokio::test]
async fn traversal_in_every_encoding_shows_nothing() {
    let (_dir, running) = site();
    let addr = running.addr("http");
    let mut h2 = H2Raw::connect(addr, &[]).await;
    let mut stream = 1;
    for target in TARGETS {
        // HTTP/1.1, origin form and absolute form.
        for line in [target.to_string(), format!("http://x{target}")] {
            let head = format!("GET {line} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            let reply = test_support::raw_exchange(addr, head.as_bytes(), super::WAIT).await;
            let status = reply.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
            let body = reply.split_once("\r\n\r\n").map_or("", |(_, b)| b);
            acceptable(&line, status, body);
        }
        // HTTP/2: the :path as is.
        let block = request("GET", target, "x", &[]);
        if h2
            .write(&frame(HEADERS, END_HEADERS | END_STREAM, stream, &block))
            .await
            .is_err()
        {
            h2 = H2Raw::connect(addr, &[]).await;
            stream = 1;
            continue;
        }
        let frames = h2
            .until(Duration::from_secs(5), |f| {
                f.stream == stream
                    && (f.kind == super::h2raw::RST_STREAM || f.kind == super::h2raw::DATA)
                    || f.kind == super::h2raw::GOAWAY
            })
            .await;
        let reset = frames
            .iter()
            .any(|f| f.kind == super::h2raw::RST_STREAM || f.kind == super::h2raw::GOAWAY);
        let status = match frames.iter().find_map(|f| f.status()) {
            Some(status) => status,
            // Refused at the frame layer: no answer to read, nothing shown.
            None if reset => 400,
            None => panic!("h2 {target}: no answer within 5 s: {frames:?}"),
        };
        let body: Vec<u8> = frames
            .iter()
            .filter(|f| f.kind == super::h2raw::DATA && f.stream == stream)
            .flat_map(|f| f.payload.clone())
            .collect();
        acceptable(
            &format!("h2 {target}"),
            status,
            &String::from_utf8_lossy(&body),
        );
        if frames.iter().any(|f| f.kind == super::h2raw::GOAWAY) || h2.closed {
            h2 = H2Raw::connect(addr, &[]).await;
            stream = 1;
        } else {
            stream += 2;
        }
    }
    // The root still serves what it holds.
    let reply = test_support::raw_exchange(
        addr,
        b"GET /static/hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        super::WAIT,
    )
    .await;
    assert!(
        reply.starts_with("HTTP/1.1 200") && reply.ends_with("hello\n"),
        "{reply}"
    );
}
