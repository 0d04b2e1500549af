//! A client that stops reading a large response is cut at `send_timeout`,
//! and the connection's upstream side is let go with it.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Response;
use http_body_util::{BodyExt, StreamBody};
use test_support::upstream::Upstream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

use super::support;

const CHUNK: usize = 64 * 1024;
const CHUNKS: usize = 1024; // 64 MiB

#[tokio::test]
async fn a_client_that_stops_reading_is_cut_at_send_timeout() {
    let upstream = Upstream::start(|_req| async {
        let frames = futures_util::stream::iter((0..CHUNKS).map(|_| {
            Ok::<_, std::io::Error>(hyper::body::Frame::data(Bytes::from(vec![b'x'; CHUNK])))
        }));
        let mut response = Response::new(BodyExt::boxed(StreamBody::new(frames)));
        response
            .headers_mut()
            .insert("content-length", (CHUNK * CHUNKS).into());
        response
    })
    .await;
    let yaml = format!(
        r#"
limits: {{ send_timeout: 1s }}
listeners: [{{ name: http, address: "127.0.0.1:0" }}]
upstreams:
  app: {{ addresses: ["{}"] }}
applications:
  - name: site
    domains: ["*"]
    routes: [{{ path: /, proxy: app }}]
"#,
        upstream.addr
    );
    let dir = tempfile::tempdir().unwrap();
    let running = support::start(&yaml, dir.path());

    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut client = socket.connect(running.addr("http")).await.unwrap();
    client
        .write_all(b"GET /big HTTP/1.1\r\nHost: a.test\r\n\r\n")
        .await
        .unwrap();
    // Read nothing for three send_timeouts: the gateway's writes block.
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Then read what is there: a cut connection ends well short of 64 MiB.
    let started = Instant::now();
    let mut received = 0usize;
    let mut buf = vec![0u8; 256 * 1024];
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received += n,
            }
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "still open after {:?} and {received} bytes",
        started.elapsed()
    );
    assert!(
        received < CHUNK * CHUNKS,
        "the whole response arrived ({received} bytes): nothing was cut"
    );
}
