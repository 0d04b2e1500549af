//! The rustls side: a server configuration whose certificate resolver reads
//! the current [`CertificateSet`] at each handshake.

use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::CertificateSet;

#[derive(Debug)]
struct SniResolver(Arc<ArcSwap<CertificateSet>>);

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0.load().key_for(hello.server_name())
    }
}

pub(super) fn server_config(
    certificates: Arc<ArcSwap<CertificateSet>>,
    alpn: &[&[u8]],
) -> Arc<rustls::ServerConfig> {
    // ring only: a second provider in the build makes rustls' implicit choice panic.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("ring's default provider supports TLS 1.2 and 1.3")
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(SniResolver(certificates)));
    config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
    // Stateless tickets: resumption for any number of clients, no server-side cache.
    match rustls::crypto::ring::Ticketer::new() {
        Ok(ticketer) => config.ticketer = ticketer,
        Err(error) => tracing::warn!(%error, "no TLS session tickets"),
    }
    Arc::new(config)
}
