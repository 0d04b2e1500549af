//! A client's fault is answered as the client's and never counts against
//! the upstream: bad chunk framing is 400, a request body that has not all
//! arrived by the upstream's `request_timeout` is 408, and after all of them
//! the upstream has no failure recorded and is not ejected (checked in the
//! real binary's /metrics).

use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use test_support::upstream::{Upstream, ok};
use test_support::{Proto, TestClient, raw_exchange, request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::WAIT;
use super::support::process::{Scalwsd, free_addrs};

const BAD_CHUNKS: &[&str] = &[
    "zz\r\nhello\r\n0\r\n\r\n",
    "5\rhello\r\n0\r\n\r\n",
    "5\nhello\n0\n\n",
    "ffffffffffffffffffff\r\nhello\r\n0\r\n\r\n",
    "-5\r\nhello\r\n0\r\n\r\n",
    "0x5\r\nhello\r\n0\r\n\r\n",
];

#[tokio::test]
async fn client_faults_are_the_clients_and_never_the_upstreams() {
    // Reads the whole body before answering, so only a complete body is 200.
    let upstream = Upstream::start(|request: http::Request<hyper::body::Incoming>| async move {
        match request.into_body().collect().await {
            Ok(body) => ok(format!("got {}", body.to_bytes().len())),
            Err(_) => ok("broken"),
        }
    })
    .await;
    let [http, admin] = free_addrs();
    let yaml = format!(
        r#"admin: {admin}
listeners: [{{ name: http, address: "{http}" }}]
upstreams:
  app:
    addresses: ["{upstream}"]
    request_timeout: 1s
    passive: {{ failures: 2, cooldown: 60s }}
applications:
  - name: site
    domains: ["*"]
    routes: [{{ path: /, proxy: app }}]
"#,
        upstream = upstream.addr
    );
    let server = Scalwsd::start(tempfile::tempdir().unwrap(), &yaml, http, Some(admin), 1).await;

    for body in BAD_CHUNKS {
        let head = format!(
            "POST /up HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n{body}"
        );
        let reply = raw_exchange(http, head.as_bytes(), WAIT).await;
        assert!(
            reply.starts_with("HTTP/1.1 400"),
            "{body:?}: {reply}\n{}",
            server.logs()
        );
    }
    let extensions = format!(
        "POST /up HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n5;{}\r\nhello\r\n0\r\n\r\n",
        "x".repeat(100_000)
    );
    let reply = raw_exchange(http, extensions.as_bytes(), WAIT).await;
    assert!(
        reply.starts_with("HTTP/1.1 400"),
        "100 KB of chunk extensions: {reply}"
    );

    // 20 bytes every 0.3 s of a declared 100 KB: 408 at request_timeout, on this connection.
    for _ in 0..2 {
        let mut slow = TcpStream::connect(http).await.unwrap();
        slow.write_all(b"POST /up HTTP/1.1\r\nHost: a.test\r\nContent-Length: 100000\r\n\r\n")
            .await
            .unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(5), async {
            let mut buf = [0u8; 4096];
            loop {
                tokio::select! {
                    read = slow.read(&mut buf) => match read {
                        Ok(n) if n > 0 => return String::from_utf8_lossy(&buf[..n]).into_owned(),
                        _ => return String::new(),
                    },
                    () = tokio::time::sleep(Duration::from_millis(300)) => {
                        let _ = slow.write_all(&[b'a'; 20]).await;
                    }
                }
            }
        })
        .await
        .expect("no answer to a slow body within 5 s");
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    }

    // The upstream still serves, and has no failure against it.
    let client = TestClient::new(Proto::Http1);
    for _ in 0..3 {
        let reply = client
            .send(
                http,
                request("POST", "a.test", "/up")
                    .body(Full::from("hello"))
                    .unwrap(),
            )
            .await;
        assert_eq!((reply.status, reply.text()), (200, "got 5"));
    }
    let metrics = get_metrics(admin).await;
    let address = upstream.addr;
    for line in [
        format!(r#"scalws_upstream_failures_total{{upstream="app",address="{address}"}} 0"#),
        format!(r#"scalws_upstream_state{{upstream="app",address="{address}",state="healthy"}} 1"#),
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "missing {line}:\n{metrics}"
        );
    }
}

async fn get_metrics(admin: SocketAddr) -> String {
    let reply = TestClient::new(Proto::Http1)
        .send(
            admin,
            request("GET", "127.0.0.1", "/metrics")
                .header("connection", "close")
                .body(Full::default())
                .unwrap(),
        )
        .await;
    assert_eq!(reply.status, 200);
    reply.text().to_owned()
}

/// The other side of the same line: an upstream that stops reading a body
/// the client sent whole is the upstream's fault, 504, not the client's 408.
#[tokio::test]
async fn an_upstream_that_stops_reading_is_504_not_408() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let stalled = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut stream, _)) = listener.accept().await {
            // Reads the head and a little, then nothing more, and never answers.
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf).await;
            held.push(stream);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
limits: {{ max_request_body: 64MiB }}
listeners: [{{ name: http, address: "127.0.0.1:0" }}]
upstreams:
  app: {{ addresses: ["{stalled}"], request_timeout: 1s }}
applications:
  - name: site
    domains: ["*"]
    routes: [{{ path: /, proxy: app }}]
"#
    );
    let running = super::support::start(&yaml, dir.path());
    let addr = running.addr("http");
    let mut client = TcpStream::connect(addr).await.unwrap();
    const SIZE: usize = 32 * 1024 * 1024;
    client
        .write_all(
            format!("POST /up HTTP/1.1\r\nHost: a.test\r\nContent-Length: {SIZE}\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let (mut reader, mut writer) = client.into_split();
    // The whole body, as fast as the gateway takes it.
    let sender = tokio::spawn(async move {
        let chunk = vec![b'b'; 64 * 1024];
        for _ in 0..SIZE / chunk.len() {
            if writer.write_all(&chunk).await.is_err() {
                return;
            }
        }
    });
    let mut answer = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), reader.read(&mut answer))
        .await
        .expect("no answer within 10 s")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 504"), "{answer}");
    sender.abort();
}
