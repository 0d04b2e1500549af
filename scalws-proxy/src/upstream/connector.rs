//! Opening a connection to one address: TCP (TCP_NODELAY) with `connect_timeout`,
//! then TLS for `https` pools. A tower `Service<Uri>`, as hyper-util's pooled
//! client wants; each address has its own client and connector, so the URI's
//! authority (which may be the request's host) is not where it connects.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use scalws_core::BoxError;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::error::{ConnectFailed, ConnectTimedOut};

/// Connects to one address.
#[derive(Clone)]
pub(crate) struct Connector {
    address: SocketAddr,
    timeout: Duration,
    tls: Option<Arc<TlsSetup>>,
}

/// TLS for an `https` pool, shared by its addresses.
pub(crate) struct TlsSetup {
    pub(crate) connector: TlsConnector,
    /// `tls.sni`; `None`: the address's IP is the server name.
    pub(crate) sni: Option<ServerName<'static>>,
}

impl Connector {
    pub(crate) fn new(address: SocketAddr, timeout: Duration, tls: Option<Arc<TlsSetup>>) -> Self {
        Self {
            address,
            timeout,
            tls,
        }
    }

    async fn connect(self) -> Result<TokioIo<UpstreamStream>, BoxError> {
        let address = self.address;
        let open = async {
            let tcp = TcpStream::connect(address).await?;
            tcp.set_nodelay(true)?;
            let Some(tls) = &self.tls else {
                return Ok(UpstreamStream::Plain(tcp));
            };
            let name = match &tls.sni {
                Some(name) => name.clone(),
                None => ServerName::IpAddress(address.ip().into()),
            };
            let stream = tls.connector.connect(name, tcp).await?;
            Ok(UpstreamStream::Tls(Box::new(stream)))
        };
        match tokio::time::timeout(self.timeout, open).await {
            Ok(Ok(stream)) => Ok(TokioIo::new(stream)),
            Ok(Err(source)) => Err(ConnectFailed { address, source }.into()),
            Err(_) => Err(ConnectTimedOut {
                address,
                timeout: self.timeout,
            }
            .into()),
        }
    }
}

impl tower::Service<Uri> for Connector {
    type Response = TokioIo<UpstreamStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _dst: Uri) -> Self::Future {
        Box::pin(self.clone().connect())
    }
}

/// A connection to an upstream address, plain or TLS.
pub(crate) enum UpstreamStream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Connection for UpstreamStream {
    fn connected(&self) -> Connected {
        match self {
            Self::Plain(_) => Connected::new(),
            Self::Tls(stream) => {
                if stream.get_ref().1.alpn_protocol() == Some(b"h2") {
                    Connected::new().negotiated_h2()
                } else {
                    Connected::new()
                }
            }
        }
    }
}

impl AsyncRead for UpstreamStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for UpstreamStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Tls(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(s) => s.is_write_vectored(),
            Self::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
