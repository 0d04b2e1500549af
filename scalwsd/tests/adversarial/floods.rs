//! Connection and handshake floods against the binary: more idle sockets
//! than `max_connections`, TLS handshakes left half-done, and a run of
//! complete handshakes. The listener holds at most `max_connections`, each
//! silent one is closed at `header_read_timeout`, and resident memory and CPU
//! time (from `/proc`) stay bounded; then an ordinary client is served.

use std::time::Duration;

use test_support::tls::{TestCa, tls_handshake};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::still_serves;
use super::support::process::{Scalwsd, free_addr};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_and_handshake_floods_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    ca.issue(dir.path(), "a", &["a.test"], false);
    let (http, https) = (free_addr(), free_addr());
    let yaml = format!(
        r#"
limits: {{ max_connections: 64, header_read_timeout: 1s }}
listeners:
  - {{ name: http, address: "{http}" }}
  - {{ name: https, address: "{https}", protocol: https, tls: {{ certificates: [ {{ cert: {dir}/a.pem, key: {dir}/a.key }} ] }} }}
applications:
  - name: site
    domains: ["*"]
    routes: [{{ path: /, respond: {{ body: alive }} }}]
"#,
        dir = dir.path().display()
    );
    let server = Scalwsd::start(tempfile::tempdir().unwrap(), &yaml, http, None, 1).await;
    let before = server.usage();

    // 300 sockets that send nothing, and 300 that start a ClientHello and stop.
    let mut idle = Vec::new();
    for _ in 0..300 {
        if let Ok(Ok(stream)) =
            tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(http)).await
        {
            idle.push(stream);
        }
    }
    for _ in 0..300 {
        if let Ok(Ok(mut stream)) =
            tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(https)).await
        {
            let _ = stream
                .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
                .await;
            idle.push(stream);
        }
    }
    let held = server.usage();
    // Every one is closed at header_read_timeout, 64 at a time per listener.
    let mut closed = 0;
    for stream in &mut idle {
        if test_support::closed_within(stream, Duration::from_secs(15)).await {
            closed += 1;
        }
    }
    assert_eq!(closed, idle.len(), "silent connections left open");
    drop(idle);

    // 200 complete TLS handshakes, one after the other.
    for _ in 0..200 {
        assert!(tls_handshake(https, "a.test").await.is_ok());
    }
    let after = server.usage();
    eprintln!(
        "floods: RSS {} KiB before, {} KiB holding 600 sockets, {} KiB after",
        before.rss_kib, held.rss_kib, after.rss_kib
    );
    before.assert_bounded(after, 64, Duration::from_secs(20), "connection floods");
    still_serves(http).await;
}
