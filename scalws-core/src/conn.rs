//! What the server knows about the connection a request came on.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use http::HeaderValue;

use crate::server::TunnelHost;
#[cfg(feature = "tls")]
use crate::tls::TlsCertificates;

/// The scheme a listener serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Plain HTTP (HTTP/1.1 and h2c).
    Http,
    /// HTTP over TLS (HTTP/1.1 and h2), or HTTP/3.
    Https,
}

impl Scheme {
    /// `"http"` or `"https"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// The host a request was routed by, when a policy has since replaced its
/// `Host` (a `rewrite.host`): forwarding headers and the response cache key
/// use it, so the rewrite never merges or hides the client's host.
#[derive(Clone, Debug)]
pub struct OriginalHost(pub http::HeaderValue);

/// Put in a request's extensions by whoever reads the details the stages can
/// attach to its response (the access log): the upstream address that
/// answered, what the cache did. Stages skip those details on requests
/// without it, since each costs the response an allocation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observed;

/// Put in every request's extensions by the server runtime.
///
/// Shared by all requests of one connection: cloning it is one reference count.
#[derive(Clone, Debug)]
pub struct ConnInfo {
    inner: Arc<Inner>,
}

#[derive(Clone, Debug)]
struct Inner {
    listener: Arc<str>,
    scheme: Scheme,
    peer: SocketAddr,
    local: SocketAddr,
    sni: Option<Arc<str>>,
    #[cfg(feature = "tls")]
    tls: Option<TlsCertificates>,
    /// `peer`'s IP as text, made by the first request that asks for it.
    peer_ip: OnceLock<HeaderValue>,
    /// Set by the server: where this connection's tunnels run.
    tunnels: Option<TunnelHost>,
}

impl ConnInfo {
    /// Describes a connection accepted on `listener`.
    pub fn new(
        listener: Arc<str>,
        scheme: Scheme,
        peer: SocketAddr,
        local: SocketAddr,
        sni: Option<Arc<str>>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                listener,
                scheme,
                peer,
                local,
                sni,
                #[cfg(feature = "tls")]
                tls: None,
                peer_ip: OnceLock::new(),
                tunnels: None,
            }),
        }
    }

    #[cfg(feature = "tls")]
    /// Notes the certificates the connection's TLS handshake chose from.
    pub fn with_tls(mut self, certificates: TlsCertificates) -> Self {
        Arc::make_mut(&mut self.inner).tls = Some(certificates);
        self
    }

    /// The server's hold on this connection's tunnels (see `spawn_tunnel`).
    pub(crate) fn with_tunnels(mut self, host: TunnelHost) -> Self {
        Arc::make_mut(&mut self.inner).tunnels = Some(host);
        self
    }

    pub(crate) fn tunnel_host(&self) -> Option<&TunnelHost> {
        self.inner.tunnels.as_ref()
    }

    #[cfg(feature = "tls")]
    /// The connection after its TLS handshake: scheme https, the server name
    /// the client sent, the certificates chosen from. No allocation while
    /// this is the only handle.
    pub(crate) fn secure(&mut self, sni: Option<Arc<str>>, certificates: TlsCertificates) {
        let inner = Arc::make_mut(&mut self.inner);
        inner.scheme = Scheme::Https;
        inner.sni = sni;
        inner.tls = Some(certificates);
    }

    /// Whether the certificate this connection was served with covers
    /// `host` (the 421 check, RFC 9110 15.5.20); always true for a
    /// connection without TLS, so callers need not know how core was built.
    pub fn certificate_covers(&self, host: &str) -> bool {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.inner.tls {
            return tls.covers(self.sni(), host);
        }
        let _ = host;
        true
    }

    /// The name of the listener that accepted the connection.
    pub fn listener(&self) -> &str {
        &self.inner.listener
    }

    /// The scheme the client used.
    pub fn scheme(&self) -> Scheme {
        self.inner.scheme
    }

    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        self.inner.peer
    }

    /// The client's IP address as a header value (for `X-Forwarded-For`):
    /// formatted once per connection, then one reference count per request.
    pub fn peer_ip_header(&self) -> &HeaderValue {
        self.inner.peer_ip.get_or_init(|| {
            let text = self.inner.peer.ip().to_string();
            // An IP address is always a valid header value.
            HeaderValue::try_from(text).unwrap_or(HeaderValue::from_static(""))
        })
    }

    /// The address the connection was accepted on.
    pub fn local(&self) -> SocketAddr {
        self.inner.local
    }

    /// The TLS server name the client asked for, if any.
    pub fn sni(&self) -> Option<&str> {
        self.inner.sni.as_deref()
    }

    #[cfg(feature = "tls")]
    /// The certificates of the TLS listener the connection came on, if any:
    /// [`certificate_covers`](Self::certificate_covers) asks whether the
    /// certificate the client got is valid for `host`.
    pub fn tls(&self) -> Option<&TlsCertificates> {
        self.inner.tls.as_ref()
    }
}
