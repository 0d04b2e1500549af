//! TLS and HTTP/3 for end-to-end tests: a test CA that issues certificates
//! into a directory, an HTTPS client (HTTP/1.1 or HTTP/2 by ALPN) and an
//! HTTP/3 client, both trusting that CA.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::{Request, Version};
use http_body_util::Full;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

use crate::{Reply, read_whole};

/// A certificate authority for one test.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    der: CertificateDer<'static>,
    pem: String,
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}

impl TestCa {
    pub fn new() -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "ScalWS test CA");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        Self {
            der: cert.der().clone(),
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// The CA's certificate, PEM (for an upstream's `ca` file).
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A certificate for `names`, in memory: the chain and its key (for a
    /// test server built straight on rustls).
    pub fn issue_der(
        &self,
        names: &[&str],
    ) -> (
        Vec<CertificateDer<'static>>,
        rustls_pki_types::PrivateKeyDer<'static>,
    ) {
        let (cert, key) = self.sign(names, false);
        let key = rustls_pki_types::PrivatePkcs8KeyDer::from(key.serialize_der());
        (vec![cert.der().clone()], key.into())
    }

    /// A certificate for `names` as PEM text: the chain and its key (for a
    /// Kubernetes Secret's `tls.crt` and `tls.key`).
    pub fn issue_pem(&self, names: &[&str]) -> (String, String) {
        let (cert, key) = self.sign(names, false);
        (cert.pem(), key.serialize_pem())
    }

    fn sign(&self, names: &[&str], expired: bool) -> (rcgen::Certificate, KeyPair) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        if expired {
            params.not_before = rcgen::date_time_ymd(2019, 1, 1);
            params.not_after = rcgen::date_time_ymd(2020, 1, 1);
        }
        (params.signed_by(&key, &self.issuer).unwrap(), key)
    }

    /// Issues a certificate for `names` into `dir` as `{stem}.pem` and
    /// `{stem}.key`; `expired` makes one that ended in 2020.
    pub fn issue(
        &self,
        dir: &Path,
        stem: &str,
        names: &[&str],
        expired: bool,
    ) -> (PathBuf, PathBuf) {
        let (cert, key) = self.sign(names, expired);
        let cert_path = dir.join(format!("{stem}.pem"));
        let key_path = dir.join(format!("{stem}.key"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }

    /// A client config trusting this CA, offering `alpn`. With `check_time:
    /// false`, validity dates are not checked (for an expired certificate).
    pub fn client_config(&self, alpn: &[&[u8]]) -> rustls::ClientConfig {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.der.clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        config
    }
}

/// What an HTTPS exchange saw: the reply, and the certificate the server sent.
pub struct TlsReply {
    pub reply: Reply,
    pub peer_certificate: CertificateDer<'static>,
}

/// A TLS client handshake over `tcp` (a socket the test set up itself, say
/// with a small receive buffer) with SNI `sni`.
pub async fn tls_over(
    tcp: TcpStream,
    config: rustls::ClientConfig,
    sni: &str,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = ServerName::try_from(sni.to_owned()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), connector.connect(name, tcp))
        .await
        .expect("TLS handshake timed out")
        .expect("TLS handshake failed")
}

/// Sends `request` over a new TLS connection to `addr` with SNI `sni`,
/// speaking HTTP/2 when `h2`, else HTTP/1.1.
pub async fn https(
    config: rustls::ClientConfig,
    addr: SocketAddr,
    sni: &str,
    h2: bool,
    request: Request<Full<Bytes>>,
) -> TlsReply {
    let exchange = async {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let name = ServerName::try_from(sni.to_owned()).unwrap();
        let tls = connector
            .connect(name, tcp)
            .await
            .expect("TLS handshake failed");
        let peer_certificate = tls.get_ref().1.peer_certificates().unwrap()[0]
            .clone()
            .into_owned();
        let io = TokioIo::new(tls);
        let mut request = request;
        let reply = if h2 {
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                    .await
                    .unwrap();
            tokio::spawn(conn);
            *request.version_mut() = Version::HTTP_2;
            request.headers_mut().remove(http::header::HOST);
            read_whole(sender.send_request(request).await.unwrap()).await
        } else {
            let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(conn);
            let origin = request
                .uri()
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .parse()
                .unwrap();
            *request.uri_mut() = origin;
            read_whole(sender.send_request(request).await.unwrap()).await
        };
        TlsReply {
            reply,
            peer_certificate,
        }
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .expect("HTTPS exchange timed out")
}

/// Sends `request` (and `body`) over a new HTTP/3 connection to `addr` with SNI `sni`.
pub async fn h3(
    ca: &TestCa,
    addr: SocketAddr,
    sni: &str,
    request: Request<()>,
    body: Option<Bytes>,
) -> Reply {
    let exchange = async {
        let quic = quic_connect(ca.client_config(&[b"h3"]), addr, sni).await;
        let (mut driver, mut sender) = h3::client::new(h3_quinn::Connection::new(quic))
            .await
            .unwrap();
        tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
        let stream = sender.send_request(request).await.unwrap();
        let (mut send, mut recv) = stream.split();
        let upload = tokio::spawn(async move {
            let mut body = body.unwrap_or_default();
            while !body.is_empty() {
                let chunk = body.split_to(body.len().min(16 * 1024));
                send.send_data(chunk).await?;
            }
            send.finish().await
        });
        let head = recv.recv_response().await.unwrap();
        let mut data = Vec::new();
        while let Some(mut chunk) = recv.recv_data().await.unwrap() {
            while chunk.has_remaining() {
                let part = chunk.chunk();
                data.extend_from_slice(part);
                let n = part.len();
                chunk.advance(n);
            }
        }
        let _ = upload.await;
        Reply {
            status: head.status().as_u16(),
            headers: head.headers().clone(),
            version: Version::HTTP_3,
            body: Bytes::from(data),
        }
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .expect("HTTP/3 exchange timed out")
}

/// A QUIC connection to `addr` with SNI `sni`, from a new client endpoint.
async fn quic_connect(tls: rustls::ClientConfig, addr: SocketAddr, sni: &str) -> quinn::Connection {
    try_quic_connect(tls, addr, sni)
        .await
        .expect("QUIC handshake failed")
}

async fn try_quic_connect(
    tls: rustls::ClientConfig,
    addr: SocketAddr,
    sni: &str,
) -> Result<quinn::Connection, quinn::ConnectionError> {
    let quic_tls = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic_tls)));
    endpoint.connect(addr, sni).unwrap().await
}

/// A QUIC connection offering ALPN `h3` to `addr` with SNI `sni`, trusting
/// `ca`: for tests that write HTTP/3 frames by hand.
pub async fn quic_connection(ca: &TestCa, addr: SocketAddr, sni: &str) -> quinn::Connection {
    quic_connect(ca.client_config(&[b"h3"]), addr, sni).await
}

/// The certificate an HTTP/3 (QUIC) server at `addr` presents for `sni`:
/// a QUIC handshake only, with any certificate accepted.
pub async fn h3_peer_certificate(addr: SocketAddr, sni: &str) -> CertificateDer<'static> {
    h3_handshake(addr, sni)
        .await
        .expect("QUIC handshake failed")
}

/// A QUIC handshake with `addr` for `sni` (any certificate accepted): the
/// certificate presented, or why the handshake failed.
pub async fn h3_handshake(addr: SocketAddr, sni: &str) -> Result<CertificateDer<'static>, String> {
    let handshake = async {
        let quic = try_quic_connect(insecure_client_config(&[b"h3"]), addr, sni)
            .await
            .map_err(|error| error.to_string())?;
        let chain = quic
            .peer_identity()
            .expect("a TLS peer identity")
            .downcast::<Vec<CertificateDer<'static>>>()
            .expect("a rustls certificate chain");
        quic.close(0u32.into(), b"done");
        Ok(chain[0].clone())
    };
    tokio::time::timeout(Duration::from_secs(10), handshake)
        .await
        .expect("QUIC handshake timed out")
}

/// A TLS handshake over TCP with `addr` for `sni` (any certificate
/// accepted): the certificate presented, or why the handshake failed.
pub async fn tls_handshake(addr: SocketAddr, sni: &str) -> Result<CertificateDer<'static>, String> {
    let handshake = async {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let connector =
            tokio_rustls::TlsConnector::from(Arc::new(insecure_client_config(&[b"http/1.1"])));
        let name = ServerName::try_from(sni.to_owned()).unwrap();
        let tls = connector
            .connect(name, tcp)
            .await
            .map_err(|error| error.to_string())?;
        Ok(tls.get_ref().1.peer_certificates().unwrap()[0]
            .clone()
            .into_owned())
    };
    tokio::time::timeout(Duration::from_secs(10), handshake)
        .await
        .expect("TLS handshake timed out")
}

/// A client config that accepts any server certificate (for a test that
/// serves an expired one on purpose).
pub fn insecure_client_config(alpn: &[&[u8]]) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

/// Accepts any server certificate (signatures are still checked): for tests
/// that look at the certificate they get rather than trust it.
#[derive(Debug)]
pub struct AcceptAnyCertificate(pub Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
