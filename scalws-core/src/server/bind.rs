//! Opening listeners' sockets: TCP for HTTP and HTTPS, UDP for HTTP/3,
//! every address before anything is served.

use std::net::SocketAddr;
use std::sync::Arc;

use std::net::TcpListener;

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

/// The sockets a listener serves on. Not yet registered with a runtime:
/// each is registered by the worker that serves it.
pub(super) enum Socket {
    /// One per worker; with more than one, all share the address with
    /// `SO_REUSEPORT`.
    Tcp(Vec<TcpListener>),
    #[cfg(feature = "http3")]
    Udp(std::net::UdpSocket),
}

/// Opens `spec`'s socket (for TCP, one per worker); an HTTP/3 listener
/// without the `http3` feature is refused.
pub(super) fn bind(spec: &ListenerSpec, workers: usize) -> Result<Bound, BindFailed> {
    let fail = |source| BindFailed {
        name: spec.name.clone(),
        address: spec.address,
        source,
    };
    let socket = if spec.protocol.is_udp() {
        bind_udp(spec.address).map_err(fail)?
    } else {
        Socket::Tcp(bind_tcp(spec.address, workers).map_err(fail)?)
    };
    let local = match &socket {
        Socket::Tcp(tcp) => tcp[0].local_addr(),
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

/// `workers` sockets at `address`, sharing it with `SO_REUSEPORT` when
/// there is more than one.
///
/// The first is bound without `SO_REUSEPORT` and only then given it (before
/// `listen`, so the kernel makes it a reuse group the others join). Bound
/// with it, a port-0 bind may be handed the port of another reuse group of
/// the same user (one listener would take another's connections), and a
/// second server at an address already served would share it silently;
/// this way the first bind finds a free port, or fails with "address in
/// use" as with one worker.
fn bind_tcp(address: SocketAddr, workers: usize) -> std::io::Result<Vec<TcpListener>> {
    let shared = workers > 1;
    let first = socket(address)?;
    first.bind(&address.into())?;
    if shared {
        first.set_reuse_port(true)?;
    }
    first.listen(1024)?;
    let first: TcpListener = first.into();
    let address = first.local_addr()?;
    let mut sockets = Vec::with_capacity(workers);
    sockets.push(first);
    for _ in 1..workers {
        let other = socket(address)?;
        other.set_reuse_port(true)?;
        other.bind(&address.into())?;
        other.listen(1024)?;
        sockets.push(other.into());
    }
    Ok(sockets)
}

/// A TCP socket for `address`: `SO_REUSEADDR`, IPv6 only for an IPv6
/// address, non-blocking; not yet bound.
fn socket(address: SocketAddr) -> std::io::Result<socket2::Socket> {
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
    Ok(socket)
}
