//! HTTPS listeners over real sockets: certificates chosen by SNI, ALPN h2 and
//! http/1.1, expired certificates, load errors, handshake timeout, reload.
#![allow(clippy::unwrap_used, missing_docs)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ClientConfig;
use rustls_pki_types::{CertificateDer, ServerName};
use scalws_core::tls::{CertificateFiles, TlsCertificates, TlsLoadError, UnknownServerName};
use scalws_core::{Body, ConnInfo, Limits, ListenerProtocol, ListenerSpec, Server};
use test_support::{closed_within, raw_exchange, read_response};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

// === certificates on disk ===

/// A fresh directory per test, under the system's temporary directory,
/// removed when dropped.
struct ScratchDir(PathBuf);

impl std::ops::Deref for ScratchDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch_dir() -> ScratchDir {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "scalws-tls-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    ScratchDir(dir)
}

/// A self-signed certificate written as `{name}.pem` and `{name}.key`.
struct TestCert {
    files: CertificateFiles,
    der: CertificateDer<'static>,
    key_pem: String,
}

fn write_cert(dir: &Path, name: &str, params: rcgen::CertificateParams) -> TestCert {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let files = CertificateFiles {
        cert: dir.join(format!("{name}.pem")),
        key: dir.join(format!("{name}.key")),
    };
    std::fs::write(&files.cert, cert.pem()).unwrap();
    std::fs::write(&files.key, key.serialize_pem()).unwrap();
    TestCert {
        files,
        der: cert.der().clone(),
        key_pem: key.serialize_pem(),
    }
}

fn cert_for(dir: &Path, name: &str, sans: &[&str]) -> TestCert {
    let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
    write_cert(dir, name, rcgen::CertificateParams::new(sans).unwrap())
}

/// Certificate a (`a.test`, `*.a.test`), the default, and b (`b.test`).
fn two_certs(dir: &Path) -> (TestCert, TestCert) {
    (
        cert_for(dir, "a", &["a.test", "*.a.test"]),
        cert_for(dir, "b", &["b.test"]),
    )
}

// === server ===

/// Names the listener, scheme, SNI and version, and whether the connection's
/// certificate covers the `Host` header.
async fn app(request: Request<Body>) -> Result<Response<Body>, Infallible> {
    let conn = request.extensions().get::<ConnInfo>().unwrap();
    let host = request
        .headers()
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or(request.uri().host())
        .unwrap_or("");
    let covers = conn.tls().map(|tls| tls.covers(conn.sni(), host));
    let text = format!(
        "{} {} sni={} {:?} covers={covers:?}",
        conn.listener(),
        conn.scheme().as_str(),
        conn.sni().unwrap_or("-"),
        request.version(),
    );
    Ok(Response::new(Body::from(text)))
}

struct Running {
    addr: SocketAddr,
    _stop: oneshot::Sender<()>,
}

fn start(certs: TlsCertificates, limits: Limits) -> Running {
    let spec = ListenerSpec {
        name: "secure".into(),
        address: "127.0.0.1:0".parse().unwrap(),
        protocol: ListenerProtocol::Https(certs),
    };
    let server = Server::bind(&[spec], limits).unwrap();
    let addr = server.local_addrs()[0].1;
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve(tower::service_fn(app), async {
        let _ = stopped.await;
    }));
    Running { addr, _stop: stop }
}

// === client ===

use test_support::tls::AcceptAnyCertificate;

#[derive(Clone, Copy)]
struct Client<'a> {
    /// `None`: connect by IP and send no SNI.
    sni: Option<&'a str>,
    alpn: &'a [&'a [u8]],
    tls12_only: bool,
}

impl<'a> Client<'a> {
    fn sni(sni: &'a str) -> Self {
        Self {
            sni: Some(sni),
            alpn: &[],
            tls12_only: false,
        }
    }

    fn no_sni() -> Self {
        Self {
            sni: None,
            alpn: &[],
            tls12_only: false,
        }
    }

    async fn connect(self, addr: SocketAddr) -> TlsStream<TcpStream> {
        self.try_connect(addr).await.expect("handshake failed")
    }

    async fn try_connect(self, addr: SocketAddr) -> std::io::Result<TlsStream<TcpStream>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let versions: &[&rustls::SupportedProtocolVersion] = if self.tls12_only {
            &[&rustls::version::TLS12]
        } else {
            &[&rustls::version::TLS13, &rustls::version::TLS12]
        };
        let mut config = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions)
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth();
        config.alpn_protocols = self.alpn.iter().map(|p| p.to_vec()).collect();
        let server_name = match self.sni {
            Some(name) => ServerName::try_from(name.to_owned()).unwrap(),
            None => {
                config.enable_sni = false;
                ServerName::IpAddress(addr.ip().into())
            }
        };
        let tcp = TcpStream::connect(addr).await.unwrap();
        let connector = TlsConnector::from(Arc::new(config));
        tokio::time::timeout(Duration::from_secs(5), connector.connect(server_name, tcp))
            .await
            .expect("handshake timed out")
    }

    /// The certificate the server presents.
    async fn peer_cert(self, addr: SocketAddr) -> CertificateDer<'static> {
        let tls = self.connect(addr).await;
        tls.get_ref().1.peer_certificates().unwrap()[0].clone()
    }
}

/// One HTTP/1.1 GET on an open TLS stream, `Host: host`.
async fn get_http1(tls: TlsStream<TcpStream>, host: &str) -> (http::Version, String) {
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let request = Request::get("/")
        .header(http::header::HOST, host)
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    read(response).await
}

async fn read(response: Response<hyper::body::Incoming>) -> (http::Version, String) {
    let version = response.version();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (version, String::from_utf8(body.to_vec()).unwrap())
}

// === tests ===

#[tokio::test]
async fn sni_chooses_the_certificate_and_the_first_is_the_default() {
    let dir = scratch_dir();
    let (a, b) = two_certs(&dir);
    let certs = TlsCertificates::load(&[a.files.clone(), b.files.clone()]).unwrap();
    let server = start(certs, Limits::default());

    assert!(Client::sni("a.test").peer_cert(server.addr).await == a.der);
    assert!(Client::sni("x.a.test").peer_cert(server.addr).await == a.der);
    assert!(Client::sni("b.test").peer_cert(server.addr).await == b.der);
    assert!(Client::sni("B.Test").peer_cert(server.addr).await == b.der);
    // No server name: the default. A name no certificate has (wildcards
    // stand for one label only) is refused: the default is a.test's.
    assert!(Client::no_sni().peer_cert(server.addr).await == a.der);
    for unknown in ["y.x.a.test", "unknown.test"] {
        let refused = Client::sni(unknown).try_connect(server.addr).await;
        let error = refused
            .err()
            .unwrap_or_else(|| panic!("{unknown} was served"));
        // rustls' alert when no certificate is chosen.
        assert!(error.to_string().contains("AccessDenied"), "{error}");
    }

    let tls12 = Client {
        tls12_only: true,
        ..Client::sni("b.test")
    };
    let stream = tls12.connect(server.addr).await;
    assert_eq!(
        stream.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    assert!(stream.get_ref().1.peer_certificates().unwrap()[0] == b.der);
}

#[tokio::test]
async fn an_unknown_name_gets_the_default_when_told() {
    let dir = scratch_dir();
    let (a, b) = two_certs(&dir);
    let certs = TlsCertificates::load(&[a.files.clone(), b.files.clone()]).unwrap();
    certs.set_unknown_server_name(UnknownServerName::ServeDefault);
    let server = start(certs.clone(), Limits::default());
    assert!(Client::sni("unknown.test").peer_cert(server.addr).await == a.der);
    assert!(Client::sni("b.test").peer_cert(server.addr).await == b.der);
    // A reload keeps the choice.
    certs.reload(&[b.files.clone(), a.files.clone()]).unwrap();
    assert!(Client::sni("unknown.test").peer_cert(server.addr).await == b.der);
    // And it can be taken back.
    certs.set_unknown_server_name(UnknownServerName::Refuse);
    assert!(
        Client::sni("unknown.test")
            .try_connect(server.addr)
            .await
            .is_err()
    );
    assert!(Client::sni("a.test").peer_cert(server.addr).await == a.der);
}

#[tokio::test]
async fn http1_over_tls_has_scheme_and_sni() {
    let dir = scratch_dir();
    let (a, b) = two_certs(&dir);
    let certs = TlsCertificates::load(&[a.files, b.files]).unwrap();
    let server = start(certs, Limits::default());

    let client = Client {
        alpn: &[b"http/1.1"],
        ..Client::sni("b.test")
    };
    let tls = client.connect(server.addr).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let (version, text) = get_http1(tls, "b.test").await;
    assert_eq!(version, http::Version::HTTP_11);
    assert_eq!(text, "secure https sni=b.test HTTP/1.1 covers=Some(true)");

    // The certificate chosen for b.test does not cover a.test (the gateway answers 421).
    let tls = client.connect(server.addr).await;
    let (_, text) = get_http1(tls, "x.a.test").await;
    assert_eq!(text, "secure https sni=b.test HTTP/1.1 covers=Some(false)");

    // No ALPN at all: HTTP/1.1.
    let tls = Client::no_sni().connect(server.addr).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), None);
    let (_, text) = get_http1(tls, "a.test").await;
    assert_eq!(text, "secure https sni=- HTTP/1.1 covers=Some(true)");
}

/// HTTP/2 over TLS is negotiated (RFC 9113, section 3.3): a client that chose
/// `http/1.1`, or nothing, and sends HTTP/2's preface anyway is served as
/// HTTP/1.1, which takes the preface for no request and closes the
/// connection without a byte of HTTP/2.
#[tokio::test]
async fn http2_over_tls_needs_alpn() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = scratch_dir();
    let (a, b) = two_certs(&dir);
    let certs = TlsCertificates::load(&[a.files, b.files]).unwrap();
    let server = start(certs, Limits::default());

    let http1 = Client {
        alpn: &[b"http/1.1"],
        ..Client::sni("a.test")
    };
    for client in [http1, Client::sni("a.test")] {
        let mut tls = client.connect(server.addr).await;
        // The preface and an empty SETTINGS frame.
        tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
            .await
            .unwrap();
        let mut answer = Vec::new();
        // Closed without TLS's close_notify is an error here; either way it ends.
        let _closed = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut answer))
            .await
            .expect("the connection stayed open");
        assert!(answer.is_empty(), "answered {answer:?}");
    }
}

#[tokio::test]
async fn http2_over_tls_by_alpn() {
    let dir = scratch_dir();
    let (a, b) = two_certs(&dir);
    let certs = TlsCertificates::load(&[a.files, b.files]).unwrap();
    let server = start(certs, Limits::default());

    let client = Client {
        alpn: &[b"h2", b"http/1.1"],
        ..Client::sni("x.a.test")
    };
    let tls = client.connect(server.addr).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    // Two requests on the one connection.
    for _ in 0..2 {
        let request = Request::get("https://x.a.test/")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let (version, text) = read(sender.send_request(request).await.unwrap()).await;
        assert_eq!(version, http::Version::HTTP_2);
        assert_eq!(text, "secure https sni=x.a.test HTTP/2.0 covers=Some(true)");
    }
}

#[tokio::test]
async fn expired_and_future_certificates_load_warn_and_serve() {
    let dir = scratch_dir();
    let mut params = rcgen::CertificateParams::new(vec!["old.test".to_owned()]).unwrap();
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let old = write_cert(&dir, "old", params);
    let mut params = rcgen::CertificateParams::new(vec!["new.test".to_owned()]).unwrap();
    params.not_before = rcgen::date_time_ymd(2090, 1, 1);
    params.not_after = rcgen::date_time_ymd(2091, 1, 1);
    let future = write_cert(&dir, "future", params);

    let certs = TlsCertificates::load(&[old.files.clone(), future.files.clone()]).unwrap();
    assert_eq!(
        certs.warnings(),
        [
            format!(
                "certificate {}: expired on 2021-01-01T00:00:00Z \
                 (valid from 2020-01-01T00:00:00Z to 2021-01-01T00:00:00Z); serving it anyway",
                old.files.cert.display()
            ),
            format!(
                "certificate {}: not valid until 2090-01-01T00:00:00Z \
                 (valid from 2090-01-01T00:00:00Z to 2091-01-01T00:00:00Z); serving it anyway",
                future.files.cert.display()
            ),
        ]
    );

    let server = start(certs, Limits::default());
    let tls = Client::sni("old.test").connect(server.addr).await;
    assert!(tls.get_ref().1.peer_certificates().unwrap()[0] == old.der);
    let (_, text) = get_http1(tls, "old.test").await;
    assert_eq!(text, "secure https sni=old.test HTTP/1.1 covers=Some(true)");
    assert!(Client::sni("new.test").peer_cert(server.addr).await == future.der);

    // A valid certificate has nothing to say.
    let fine = cert_for(&dir, "fine", &["fine.test"]);
    assert!(
        TlsCertificates::load(&[fine.files])
            .unwrap()
            .warnings()
            .is_empty()
    );
}

#[test]
fn load_errors_name_the_file() {
    let dir = scratch_dir();
    let (a, b) = two_certs(&dir);

    let mismatched = CertificateFiles {
        cert: a.files.cert.clone(),
        key: b.files.key.clone(),
    };
    let error = TlsCertificates::load(&[a.files.clone(), mismatched]).unwrap_err();
    assert!(
        matches!(error, TlsLoadError::KeyMismatch { .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "certificate {}: does not match key {}",
            a.files.cert.display(),
            b.files.key.display()
        )
    );

    let missing = dir.join("missing.pem");
    let error = TlsCertificates::load(&[CertificateFiles {
        cert: missing.clone(),
        key: a.files.key.clone(),
    }])
    .unwrap_err();
    assert!(
        matches!(error, TlsLoadError::Unreadable { .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with(&format!("certificate {}: cannot read: ", missing.display())),
        "{error}"
    );

    let error = TlsCertificates::load(&[CertificateFiles {
        cert: a.files.cert.clone(),
        key: missing.clone(),
    }])
    .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(&format!("key {}: cannot read: ", missing.display())),
        "{error}"
    );

    // A key where the certificate should be.
    let error = TlsCertificates::load(&[CertificateFiles {
        cert: a.files.key.clone(),
        key: a.files.key.clone(),
    }])
    .unwrap_err();
    assert!(
        matches!(error, TlsLoadError::NoCertificate { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().starts_with(&format!(
            "certificate {}: no certificate found",
            a.files.key.display()
        )),
        "{error}"
    );

    // A certificate where the key should be.
    let error = TlsCertificates::load(&[CertificateFiles {
        cert: a.files.cert.clone(),
        key: a.files.cert.clone(),
    }])
    .unwrap_err();
    assert!(matches!(error, TlsLoadError::NoKey { .. }), "{error:?}");
    assert!(
        error.to_string().starts_with(&format!(
            "key {}: no private key found",
            a.files.cert.display()
        )),
        "{error}"
    );

    // One file holding both works.
    let combined = dir.join("combined.pem");
    let pem = std::fs::read_to_string(&a.files.cert).unwrap() + &a.key_pem;
    std::fs::write(&combined, pem).unwrap();
    TlsCertificates::load(&[CertificateFiles {
        cert: combined.clone(),
        key: combined,
    }])
    .unwrap();

    let error = TlsCertificates::load(&[]).unwrap_err();
    assert!(matches!(error, TlsLoadError::NoCertificates), "{error:?}");
}

#[tokio::test]
async fn silent_client_is_closed_after_header_read_timeout() {
    let dir = scratch_dir();
    let (a, _) = two_certs(&dir);
    let certs = TlsCertificates::load(&[a.files]).unwrap();
    let server = start(
        certs,
        Limits {
            header_read_timeout: Duration::from_millis(300),
            ..Limits::default()
        },
    );

    let began = Instant::now();
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    assert!(closed_within(&mut silent, Duration::from_secs(3)).await);
    let waited = began.elapsed();
    assert!(
        waited >= Duration::from_millis(250),
        "closed after {waited:?}"
    );

    // Plain HTTP on the TLS port fails the handshake: closed, never answered.
    let reply = raw_exchange(
        server.addr,
        b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    assert!(!reply.contains("HTTP/1.1"), "{reply}");

    // The listener still serves others.
    let tls = Client::sni("a.test").connect(server.addr).await;
    let (_, text) = get_http1(tls, "a.test").await;
    assert_eq!(text, "secure https sni=a.test HTTP/1.1 covers=Some(true)");
}

#[tokio::test]
async fn reload_applies_to_new_handshakes_only() {
    let dir = scratch_dir();
    let (a, b) = two_certs(&dir);
    let certs = TlsCertificates::load(std::slice::from_ref(&a.files)).unwrap();
    let server = start(certs.clone(), Limits::default());

    let before = Client::sni("a.test").connect(server.addr).await;
    assert!(before.get_ref().1.peer_certificates().unwrap()[0] == a.der);
    assert!(
        Client::sni("b.test")
            .try_connect(server.addr)
            .await
            .is_err()
    );

    certs.reload(&[b.files.clone(), a.files.clone()]).unwrap();
    assert!(Client::sni("b.test").peer_cert(server.addr).await == b.der);
    assert!(Client::no_sni().peer_cert(server.addr).await == b.der);
    assert!(Client::sni("a.test").peer_cert(server.addr).await == a.der);
    assert_eq!(certs.names(), [vec!["b.test"], vec!["a.test", "*.a.test"]]);

    // The connection opened before the reload keeps working.
    let (_, text) = get_http1(before, "a.test").await;
    assert!(text.starts_with("secure https sni=a.test"), "{text}");

    // A failed reload leaves the certificates in place.
    let broken = CertificateFiles {
        cert: dir.join("missing.pem"),
        key: b.files.key.clone(),
    };
    assert!(certs.reload(&[broken]).is_err());
    assert!(Client::sni("b.test").peer_cert(server.addr).await == b.der);
}

#[test]
fn covers_exact_and_one_label_wildcard_names() {
    let dir = scratch_dir();
    let (a, b) = two_certs(&dir);
    let certs = TlsCertificates::load(&[a.files, b.files]).unwrap();

    assert!(certs.covers(Some("a.test"), "a.test"));
    assert!(certs.covers(Some("a.test"), "x.a.test"));
    assert!(certs.covers(Some("x.a.test"), "y.a.test"));
    assert!(!certs.covers(Some("a.test"), "y.x.a.test"));
    assert!(!certs.covers(Some("a.test"), "b.test"));
    assert!(certs.covers(Some("b.test"), "b.test"));
    assert!(certs.covers(Some("b.test"), "B.TEST"));
    assert!(!certs.covers(Some("b.test"), "a.test"));
    // No SNI, or a name no certificate has: the default (a).
    assert!(certs.covers(None, "a.test"));
    assert!(certs.covers(None, "z.a.test"));
    assert!(!certs.covers(None, "b.test"));
    assert!(!certs.covers(Some("other.test"), "b.test"));

    assert_eq!(certs.names(), [vec!["a.test", "*.a.test"], vec!["b.test"]]);
    assert_eq!(certs, certs.clone());
    assert_ne!(
        certs,
        TlsCertificates::load(&[CertificateFiles {
            cert: dir.join("a.pem"),
            key: dir.join("a.key"),
        }])
        .unwrap()
    );
}

/// Over TLS too, an idle HTTP/1.1 connection gives its buffers back between
/// requests (the vendored hyper reads zero bytes first; tokio-rustls waits
/// for plaintext on that read) and reads whatever comes next whole: after
/// idle spells, a head in pieces, two requests in one write, and the
/// client's close.
#[tokio::test]
async fn over_tls_what_comes_after_an_idle_spell_is_read_whole() {
    use tokio::io::AsyncWriteExt;
    let dir = scratch_dir();
    let (a, b) = two_certs(&dir);
    let certs = TlsCertificates::load(&[a.files, b.files]).unwrap();
    let server = start(certs, Limits::default());
    let client = Client {
        alpn: &[b"http/1.1"],
        ..Client::sni("a.test")
    };
    let mut tls = client.connect(server.addr).await;
    let get = b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
    let expected = "secure https sni=a.test HTTP/1.1 covers=Some(true)";
    let idle = || tokio::time::sleep(Duration::from_millis(150));

    tls.write_all(get).await.unwrap();
    let (head, body) = read_response(&mut tls).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, expected.as_bytes());

    idle().await;
    for piece in get.chunks(5) {
        tls.write_all(piece).await.unwrap();
        tls.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(read_response(&mut tls).await.1, expected.as_bytes());

    idle().await;
    tls.write_all(&[&get[..], &get[..]].concat()).await.unwrap();
    assert_eq!(read_response(&mut tls).await.1, expected.as_bytes());
    assert_eq!(read_response(&mut tls).await.1, expected.as_bytes());

    idle().await;
    tls.shutdown().await.unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        use tokio::io::AsyncReadExt;
        tls.read_to_end(&mut rest).await
    })
    .await;
    assert!(
        closed.is_ok(),
        "the server did not close after the client's close_notify"
    );
}
