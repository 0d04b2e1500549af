//! TLS at the edge with two tenants' certificates on one listener: a
//! connection made for one tenant cannot be used for the other (421), a
//! client without SNI is served but never refused as misdirected, a name
//! no certificate has gets no certificate at all (over TCP and QUIC), and
//! plaintext or garbage on the TLS port is closed with nothing forwarded.

use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use test_support::tls::{TestCa, h3_handshake, https, tls_handshake};

use super::{RawUpstream, support};

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

fn get(host: &str) -> Request<Full<Bytes>> {
    Request::get(format!("https://{host}/p"))
        .header("host", host)
        .body(Full::default())
        .unwrap()
}

#[tokio::test]
async fn a_tenants_connection_cannot_reach_the_other_tenant() {
    let upstream = RawUpstream::start(OK).await;
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    ca.issue(dir.path(), "a", &["a.test"], false);
    ca.issue(dir.path(), "b", &["b.test"], false);
    let yaml = format!(
        r#"
limits: {{ header_read_timeout: 1s }}
listeners:
  - name: tls
    address: "127.0.0.1:0"
    protocol: https
    tls: {{ certificates: [ {{ cert: a.pem, key: a.key }}, {{ cert: b.pem, key: b.key }} ] }}
upstreams:
  app: {{ addresses: ["{}"] }}
applications:
  - {{ name: a, domains: [a.test], routes: [{{ path: /, proxy: app }}] }}
  - {{ name: b, domains: [b.test], routes: [{{ path: /, proxy: app }}] }}
"#,
        upstream.addr
    );
    let running = support::start(&yaml, dir.path());
    let addr = running.addr("tls");
    for h2 in [false, true] {
        let alpn: &[&[u8]] = if h2 { &[b"h2"] } else { &[b"http/1.1"] };
        let own = https(ca.client_config(alpn), addr, "a.test", h2, get("a.test")).await;
        assert_eq!(own.reply.status, 200, "h2 {h2}");
        let before = upstream.heads();
        let other = https(ca.client_config(alpn), addr, "a.test", h2, get("b.test")).await;
        assert_eq!(other.reply.status, 421, "h2 {h2}");
        assert_eq!(
            upstream.heads(),
            before,
            "a misdirected request was forwarded"
        );
    }
    // Connecting by address (no SNI): the default certificate, and no 421.
    let config = test_support::tls::insecure_client_config(&[b"http/1.1"]);
    let by_ip = https(config, addr, "127.0.0.1", false, get("b.test")).await;
    assert_eq!(by_ip.reply.status, 200);

    // Plaintext HTTP and garbage on the TLS port: closed, nothing forwarded.
    let before = upstream.heads();
    for bytes in [
        &b"GET /p HTTP/1.1\r\nHost: a.test\r\n\r\n"[..],
        &[0x16, 0x03, 0x01, 0xff, 0xff, 0x01, 0x00][..],
        &[0u8; 4096][..],
    ] {
        let reply = test_support::raw_exchange(addr, bytes, Duration::from_secs(5)).await;
        assert!(!reply.contains("HTTP/1.1 200"), "{reply}");
    }
    // A handshake that never comes is closed at header_read_timeout.
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    assert!(test_support::closed_within(&mut silent, Duration::from_secs(4)).await);
    assert_eq!(upstream.heads(), before);
    let again = https(
        ca.client_config(&[b"h2"]),
        addr,
        "b.test",
        true,
        get("b.test"),
    )
    .await;
    assert_eq!(again.reply.status, 200, "still serves");
}

/// With several certificates the listener's default is one tenant's: a
/// client naming another host (a scanner guessing names) must not be shown
/// it, since it names that tenant's domains. `unknown_sni: default` serves
/// it on purpose; a listener with one certificate serves it unless told
/// `unknown_sni: refuse`.
#[tokio::test]
async fn an_unknown_name_is_shown_no_tenants_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    ca.issue(dir.path(), "a", &["a.test"], false);
    ca.issue(dir.path(), "b", &["b.test"], false);
    let yaml = |unknown: &str| {
        format!(
            r#"
listeners:
  - {{ name: tls, address: "127.0.0.1:0", protocol: https, tls: {{ certificates: [ {{ cert: a.pem, key: a.key }}, {{ cert: b.pem, key: b.key }} ], {unknown} }} }}
  - {{ name: quic, address: "127.0.0.1:0", protocol: http3, tls: {{ certificates: [ {{ cert: a.pem, key: a.key }}, {{ cert: b.pem, key: b.key }} ], {unknown} }} }}
applications:
  - {{ name: a, domains: [a.test], routes: [{{ path: /, respond: {{ body: a }} }}] }}
  - {{ name: b, domains: [b.test], routes: [{{ path: /, respond: {{ body: b }} }}] }}
"#
        )
    };
    let refusing = support::start(&yaml(""), dir.path());
    let (tcp, quic) = (refusing.addr("tls"), refusing.addr("quic"));
    for name in ["c.test", "x.a.test", "localhost"] {
        let over_tcp = tls_handshake(tcp, name).await;
        assert!(over_tcp.is_err(), "{name} got a certificate over TCP");
        let over_quic = h3_handshake(quic, name).await;
        assert!(over_quic.is_err(), "{name} got a certificate over QUIC");
    }
    // The tenants' own names still handshake, each with its certificate.
    let a = tls_handshake(tcp, "a.test").await.unwrap();
    let b = tls_handshake(tcp, "b.test").await.unwrap();
    assert!(a != b);
    assert!(h3_handshake(quic, "b.test").await.unwrap() == b);
    drop(refusing);

    let serving = support::start(&yaml("unknown_sni: default"), dir.path());
    let (tcp, quic) = (serving.addr("tls"), serving.addr("quic"));
    assert!(tls_handshake(tcp, "c.test").await.unwrap() == a);
    assert!(h3_handshake(quic, "c.test").await.unwrap() == a);
    drop(serving);

    // One certificate: no other site to hide, so by default it serves every
    // name (a test with `curl -k` and another name keeps working); `refuse` says otherwise.
    let single = |unknown: &str| {
        format!(
            r#"
listeners:
  - {{ name: tls, address: "127.0.0.1:0", protocol: https, tls: {{ certificates: [ {{ cert: a.pem, key: a.key }} ], {unknown} }} }}
applications:
  - {{ name: a, domains: ["*"], routes: [{{ path: /, respond: {{ body: a }} }}] }}
"#
        )
    };
    let one = support::start(&single(""), dir.path());
    assert!(tls_handshake(one.addr("tls"), "c.test").await.unwrap() == a);
    drop(one);
    let strict = support::start(&single("unknown_sni: refuse"), dir.path());
    assert!(tls_handshake(strict.addr("tls"), "c.test").await.is_err());
    assert!(tls_handshake(strict.addr("tls"), "a.test").await.unwrap() == a);
}
