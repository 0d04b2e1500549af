//! Message framing between the gateway and its upstreams.

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use test_support::{raw_exchange, read_whole};

use super::{RawUpstream, WAIT, proxy_config, still_serves, support};

/// RFC 9112 6.3: an upstream response with both `Content-Length` and
/// `Transfer-Encoding: chunked` is framed by its chunks, and the
/// `Content-Length` is not passed on, to HTTP/1.1 or HTTP/2 clients.
#[tokio::test]
async fn a_response_with_length_and_chunks_is_framed_by_its_chunks() {
    for length in ["47", "3"] {
        let answer: &'static [u8] = Box::leak(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
            )
            .into_bytes()
            .into_boxed_slice(),
        );
        let upstream = RawUpstream::start(answer).await;
        let dir = tempfile::tempdir().unwrap();
        let running = support::start(&proxy_config(upstream.addr, false), dir.path());
        let addr = running.addr("http");

        let reply = raw_exchange(
            addr,
            b"GET /p HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n",
            WAIT,
        )
        .await;
        let lower = reply.to_ascii_lowercase();
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(!lower.contains("content-length: "), "{reply}");
        assert!(lower.contains("transfer-encoding: chunked\r\n"), "{reply}");
        assert!(reply.ends_with("5\r\nhello\r\n0\r\n\r\n"), "{reply}");

        let mut h2 = test_support::h2_connection(addr).await;
        let request = Request::get("http://a.test/p")
            .body(Full::<Bytes>::default())
            .unwrap();
        let reply = read_whole(h2.send_request(request).await.unwrap()).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.headers.get("content-length"), None);
        assert_eq!(&reply.body[..], b"hello");
        still_serves(addr).await;
    }
}
