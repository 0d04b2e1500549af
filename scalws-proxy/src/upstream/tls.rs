//! The rustls client configuration of an `https` pool: roots, verification, ALPN.
//!
//! Always the ring provider, passed explicitly: a process-wide default provider
//! is never relied on (two providers in one build make it ambiguous).

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::options::TlsOptions;

/// TLS for an `https` pool, shared by its addresses.
pub(crate) struct TlsSetup {
    connector: TlsConnector,
    /// `tls.sni`; `None`: the address's IP is the server name.
    sni: Option<ServerName<'static>>,
}

impl TlsSetup {
    /// The client configuration and server name of an `https` pool.
    pub(crate) fn new(name: &str, tls: &TlsOptions) -> Result<Self, String> {
        Ok(Self {
            connector: TlsConnector::from(client_config(name, tls)?),
            sni: match &tls.sni {
                Some(sni) => Some(server_name(sni)?),
                None => None,
            },
        })
    }

    /// The handshake over `tcp`, to `address`.
    pub(crate) async fn connect(
        &self,
        address: std::net::SocketAddr,
        tcp: TcpStream,
    ) -> std::io::Result<TlsStream<TcpStream>> {
        let name = match &self.sni {
            Some(name) => name.clone(),
            None => ServerName::IpAddress(address.ip().into()),
        };
        self.connector.connect(name, tcp).await
    }
}

/// Builds the client configuration, or says what is wrong with the options.
fn client_config(name: &str, tls: &TlsOptions) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("tls: {e}"))?;
    // A CA file is checked even when verification is off: a broken path is a
    // configuration error either way.
    let roots = match &tls.ca {
        Some(path) => Some(load_ca(path)?),
        None if tls.verify => Some(system_roots(name)),
        None => None,
    };
    let mut config = match roots {
        Some(roots) if tls.verify => builder.with_root_certificates(roots).with_no_client_auth(),
        _ => {
            tracing::warn!(
                upstream = name,
                "TLS certificate verification is off: any certificate is accepted"
            );
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate {
                    algorithms: provider.signature_verification_algorithms,
                }))
                .with_no_client_auth()
        }
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// `tls.sni` as a server name, checked at build.
fn server_name(sni: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(sni.to_owned())
        .map_err(|_| format!("tls.sni: {sni:?} is not a valid server name"))
}

fn load_ca(path: &Path) -> Result<RootCertStore, String> {
    let shown = path.display();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("tls.ca: cannot read {shown}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("tls.ca: cannot parse {shown}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("tls.ca: no certificate in {shown}"));
    }
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| format!("tls.ca: bad certificate in {shown}: {e}"))?;
    }
    Ok(roots)
}

fn system_roots(name: &str) -> RootCertStore {
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        tracing::warn!(upstream = name, %error, "cannot load a system root certificate");
    }
    let mut roots = RootCertStore::empty();
    let (_added, _ignored) = roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        tracing::warn!(
            upstream = name,
            "no system root certificates: every upstream certificate will be refused"
        );
    }
    roots
}

/// `verify: false`: any certificate and name pass; handshake signatures are
/// still checked, so the peer must hold the key of the certificate it sent.
#[derive(Debug)]
struct AcceptAnyCertificate {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
