//! `https` upstream pools against a real rustls + hyper server with rcgen
//! certificates: SNI, custom CA, verification on by default, `verify: false`.
#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use http::{Request, StatusCode, Version, header};
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls_pki_types::PrivateKeyDer;
use scalws_core::Body;
use scalws_proxy::upstream::{Protocol, TlsOptions, UpstreamError, UpstreamOptions, UpstreamPool};
use tempfile::TempDir;
use test_support::tls::TestCa;
use test_support::upstream::ok;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// A CA, and a server certificate for `upstream.test` signed by it.
struct Pki {
    ca_pem: String,
    server_chain: Vec<rustls_pki_types::CertificateDer<'static>>,
    server_key: PrivateKeyDer<'static>,
}

fn pki() -> Pki {
    let ca = TestCa::new();
    let (server_chain, server_key) = ca.issue_der(&["upstream.test"]);
    Pki {
        ca_pem: ca.pem().to_owned(),
        server_chain,
        server_key,
    }
}

/// Serves HTTP/1.1 and h2 (ALPN) over TLS, answering "tls".
async fn tls_upstream(pki: &Pki) -> SocketAddr {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(pki.server_chain.clone(), pki.server_key.clone_key())
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service =
                    hyper::service::service_fn(|_request| async { Ok::<_, Infallible>(ok("tls")) });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    addr
}

fn ca_file(dir: &TempDir, pem: &str) -> PathBuf {
    let path = dir.path().join("ca.pem");
    std::fs::write(&path, pem).unwrap();
    path
}

fn https(addr: SocketAddr, tls: TlsOptions) -> UpstreamOptions {
    UpstreamOptions {
        addresses: vec![(addr, 1)],
        protocol: Protocol::Https,
        tls,
        ..UpstreamOptions::default()
    }
}

/// The error and its causes, one line.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

fn get() -> Request<Body> {
    Request::get("/")
        .header(header::HOST, "app.test")
        .body(Body::empty())
        .unwrap()
}

#[tokio::test]
async fn sni_and_custom_ca_verify_and_negotiate_h2() {
    let pki = pki();
    let dir = TempDir::new().unwrap();
    let addr = tls_upstream(&pki).await;
    let pool = UpstreamPool::new(
        "secure",
        https(
            addr,
            TlsOptions {
                sni: Some("upstream.test".into()),
                ca: Some(ca_file(&dir, &pki.ca_pem)),
                verify: true,
            },
        ),
    )
    .unwrap();
    for _ in 0..3 {
        let (response, answered) = pool.send(get()).await.unwrap();
        assert_eq!(answered, addr);
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.version(), Version::HTTP_2, "ALPN chose h2");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"tls");
    }
}

#[tokio::test]
async fn verification_is_on_by_default_with_system_roots() {
    let pki = pki();
    let addr = tls_upstream(&pki).await;
    let pool = UpstreamPool::new(
        "secure",
        https(
            addr,
            TlsOptions {
                sni: Some("upstream.test".into()),
                ..TlsOptions::default()
            },
        ),
    )
    .unwrap();
    let Err(error) = pool.send(get()).await else {
        panic!("a certificate from an unknown CA was accepted");
    };
    assert!(matches!(error, UpstreamError::Unavailable { .. }));
    assert_eq!(error.status(), StatusCode::BAD_GATEWAY);
    assert!(chain(&error).contains("UnknownIssuer"), "{}", chain(&error));
}

#[tokio::test]
async fn the_ip_is_the_server_name_without_sni() {
    let pki = pki();
    let dir = TempDir::new().unwrap();
    let addr = tls_upstream(&pki).await;
    let pool = UpstreamPool::new(
        "secure",
        https(
            addr,
            TlsOptions {
                ca: Some(ca_file(&dir, &pki.ca_pem)),
                ..TlsOptions::default()
            },
        ),
    )
    .unwrap();
    // The certificate names upstream.test, not 127.0.0.1.
    let Err(error) = pool.send(get()).await else {
        panic!("a certificate for another name was accepted");
    };
    assert!(
        chain(&error).contains("not valid for name \"127.0.0.1\""),
        "{}",
        chain(&error)
    );
}

#[tokio::test]
async fn verify_false_accepts_any_certificate() {
    let pki = pki();
    let addr = tls_upstream(&pki).await;
    let pool = UpstreamPool::new(
        "secure",
        https(
            addr,
            TlsOptions {
                verify: false,
                ..TlsOptions::default()
            },
        ),
    )
    .unwrap();
    let (response, _) = pool.send(get()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[test]
fn unreadable_or_empty_ca_is_a_build_error() {
    let dir = TempDir::new().unwrap();
    let addr: SocketAddr = "127.0.0.1:9443".parse().unwrap();
    let missing = dir.path().join("missing.pem");
    let error = UpstreamPool::new(
        "secure",
        https(
            addr,
            TlsOptions {
                ca: Some(missing.clone()),
                ..TlsOptions::default()
            },
        ),
    )
    .unwrap_err();
    assert!(
        error.to_string().starts_with(&format!(
            "upstream \"secure\": tls.ca: cannot read {}",
            missing.display()
        )),
        "{error}"
    );
    let empty = ca_file(&dir, "not a certificate\n");
    let error = UpstreamPool::new(
        "secure",
        https(
            addr,
            TlsOptions {
                ca: Some(empty.clone()),
                ..TlsOptions::default()
            },
        ),
    )
    .unwrap_err();
    assert_eq!(
        error.reason,
        format!("tls.ca: no certificate in {}", empty.display())
    );
    let error = UpstreamPool::new(
        "secure",
        https(
            addr,
            TlsOptions {
                sni: Some("not a name!".into()),
                ..TlsOptions::default()
            },
        ),
    )
    .unwrap_err();
    assert_eq!(
        error.reason,
        r#"tls.sni: "not a name!" is not a valid server name"#
    );
}
