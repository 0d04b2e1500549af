//! What the server knows about the connection a request came on.

use std::net::SocketAddr;
use std::sync::Arc;

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

/// Put in every request's extensions by the server runtime.
///
/// Shared by all requests of one connection: cloning it is one reference count.
#[derive(Clone, Debug)]
pub struct ConnInfo {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    listener: Arc<str>,
    scheme: Scheme,
    peer: SocketAddr,
    local: SocketAddr,
    sni: Option<Arc<str>>,
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
            }),
        }
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

    /// The address the connection was accepted on.
    pub fn local(&self) -> SocketAddr {
        self.inner.local
    }

    /// The TLS server name the client asked for, if any.
    pub fn sni(&self) -> Option<&str> {
        self.inner.sni.as_deref()
    }
}
