//! A client that stops reading a large response is cut at `send_timeout`,
//! over plain HTTP and over TLS (where the timer watches the TCP stream
//! under TLS, which buffers writes of its own).

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Response;
use http_body_util::{BodyExt, StreamBody};
use test_support::tls::{TestCa, tls_over};
use test_support::upstream::Upstream;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::support;

const CHUNK: usize = 64 * 1024;
const CHUNKS: usize = 1024; // 64 MiB

async fn big_upstream() -> Upstream {
    Upstream::start(|_req| async {
        let frames = futures_util::stream::iter((0..CHUNKS).map(|_| {
            Ok::<_, std::io::Error>(hyper::body::Frame::data(Bytes::from(vec![b'x'; CHUNK])))
        }));
        let mut response = Response::new(BodyExt::boxed(StreamBody::new(frames)));
        response
            .headers_mut()
            .insert("content-length", (CHUNK * CHUNKS).into());
        response
    })
    .await
}

/// A socket with a small receive buffer, so the gateway's writes block soon.
async fn small_window(addr: std::net::SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(addr).await.unwrap()
}

/// Asks for the 64 MiB, reads nothing for three send_timeouts, then reads
/// what is there: a cut connection ends well short of 64 MiB.
async fn stop_reading<S: AsyncRead + AsyncWrite + Unpin>(mut client: S, what: &str) {
    client
        .write_all(b"GET /big HTTP/1.1\r\nHost: a.test\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
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
        "{what}: still open after {:?} and {received} bytes",
        started.elapsed()
    );
    assert!(
        received < CHUNK * CHUNKS,
        "{what}: the whole response arrived ({received} bytes)"
    );
}

#[tokio::test]
async fn a_client_that_stops_reading_is_cut_at_send_timeout() {
    let upstream = big_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    ca.issue(dir.path(), "a", &["a.test"], false);
    let yaml = format!(
        r#"
limits: {{ send_timeout: 1s }}
listeners:
  - {{ name: http, address: "127.0.0.1:0" }}
  - {{ name: tls, address: "127.0.0.1:0", protocol: https, tls: {{ certificates: [ {{ cert: a.pem, key: a.key }} ] }} }}
upstreams:
  app: {{ addresses: ["{}"] }}
applications:
  - name: site
    domains: ["*"]
    routes: [{{ path: /, proxy: app }}]
"#,
        upstream.addr
    );
    let running = support::start(&yaml, dir.path());
    stop_reading(small_window(running.addr("http")).await, "plain").await;
    let tcp = small_window(running.addr("tls")).await;
    let tls = tls_over(tcp, ca.client_config(&[b"http/1.1"]), "a.test").await;
    stop_reading(tls, "TLS").await;
}
