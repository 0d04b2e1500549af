//! Opening listeners' sockets: TCP for HTTP and HTTPS, UDP for HTTP/3,
//! every address before anything is served.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use super::listener::ListenerSpec;

/// Opening a listener failed.
#[derive(Debug, thiserror::Error)]
#[error("listener \"{name}\": cannot bind {address}: {source}")]
pub struct BindFailed {
    /// The listener's name.
    pub name: Arc<str>,
    /// The address it wanted.
    pub address: SocketAddr,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// A listener whose socket is open, not yet served.
pub(super) struct Bound {
    pub(super) spec: ListenerSpec,
    pub(super) local: SocketAddr,
    pub(super) socket: Socket,
}

/// The socket a listener serves on.
pub(super) enum Socket {
    Tcp(TcpListener),
    #[cfg(feature = "http3")]
    Udp(std::net::UdpSocket),
}

/// Opens `spec`'s socket; an HTTP/3 listener without the `http3` feature is refused.
pub(super) fn bind(spec: &ListenerSpec) -> Result<Bound, BindFailed> {
    let fail = |source| BindFailed {
        name: spec.name.clone(),
        address: spec.address,
        source,
    };
    let socket = if spec.protocol.is_udp() {
        bind_udp(spec.address).map_err(fail)?
    } else {
        Socket::Tcp(bind_tcp(spec.address).map_err(fail)?)
    };
    let local = match &socket {
        Socket::Tcp(tcp) => tcp.local_addr(),
        #[cfg(feature = "http3")]
        Socket::Udp(udp) => udp.local_addr(),
    }
    .map_err(fail)?;
    Ok(Bound {
        spec: spec.clone(),
        local,
        socket,
    })
}

/// The ports HTTP/3 listens on (for `Alt-Svc` on HTTPS listeners of the same port).
pub(super) fn h3_ports<'a>(
    listeners: impl Iterator<Item = (&'a ListenerSpec, SocketAddr)>,
) -> Vec<u16> {
    listeners
        .filter(|(spec, _)| spec.protocol.is_udp())
        .map(|(_, local)| local.port())
        .collect()
}

#[cfg(feature = "http3")]
fn bind_udp(address: SocketAddr) -> std::io::Result<Socket> {
    std::net::UdpSocket::bind(address).map(Socket::Udp)
}

/// Without HTTP/3 no listener is UDP: never called.
#[cfg(not(feature = "http3"))]
fn bind_udp(_address: SocketAddr) -> std::io::Result<Socket> {
    Err(std::io::ErrorKind::Unsupported.into())
}

pub(super) fn bind_tcp(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(address),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    if address.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&address.into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}
