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
use scalws_core::BoxError;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
#[cfg(feature = "tls")]
use tokio_rustls::client::TlsStream;

use super::error::{ConnectFailed, ConnectTimedOut};
use super::tls::TlsSetup;

/// Connects to one address.
#[derive(Clone)]
pub(crate) struct Connector {
    address: SocketAddr,
    timeout: Duration,
    tls: Option<Arc<TlsSetup>>,
}

impl Connector {
    pub(crate) fn new(address: SocketAddr, timeout: Duration, tls: Option<Arc<TlsSetup>>) -> Self {
        Self {
            address,
            timeout,
            tls,
        }
    }

    pub(crate) async fn connect(self) -> Result<TokioIo<UpstreamStream>, BoxError> {
        let address = self.address;
        let open = async {
            let tcp = TcpStream::connect(address).await?;
            tcp.set_nodelay(true)?;
            match &self.tls {
                None => Ok(UpstreamStream::Plain(tcp)),
                #[cfg(feature = "tls")]
                Some(tls) => Ok(UpstreamStream::Tls(Box::new(
                    tls.connect(address, tcp).await?,
                ))),
                #[cfg(not(feature = "tls"))]
                Some(never) => match **never {},
            }
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
    #[cfg(feature = "tls")]
    Tls(Box<TlsStream<TcpStream>>),
}

impl Connection for UpstreamStream {
    fn connected(&self) -> Connected {
        match self {
            Self::Plain(_) => Connected::new(),
            #[cfg(feature = "tls")]
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
            #[cfg(feature = "tls")]
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
            #[cfg(feature = "tls")]
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
            #[cfg(feature = "tls")]
            Self::Tls(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(s) => s.is_write_vectored(),
            #[cfg(feature = "tls")]
            Self::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            #[cfg(feature = "tls")]
            Self::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            Self::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
