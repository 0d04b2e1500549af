//! Accepting connections and driving each one: protocol, timeouts, drain.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use futures_util::future::Either;
use futures_util::task::AtomicWaker;
use http::{Request, Response};
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
#[cfg(feature = "tls")]
use tokio_rustls::TlsAcceptor;
use tokio_util::task::TaskTracker;
use tower::Service;

use super::activity::{Activity, Verdict};
use super::edge::{Edge, EdgeService};
use super::io::{ConnectionWatcher, Socket, TrackedIo};
#[cfg(feature = "tls")]
use super::io::{SendDeadline, Watched};
use super::limits::Limits;
#[cfg(feature = "tls")]
use super::listener::ListenerProtocol;
use super::listener::{ConnectionPermit, ListenerState, Phase};
use super::streams::{StreamExecutor, Streams};
use super::tunnel::TunnelHost;
use crate::error::BoxError;
#[cfg(feature = "tls")]
use crate::tls::TlsCertificates;
use crate::{Body, ConnInfo, Scheme};

pub(super) struct Acceptor<S> {
    /// Name, protocol and limits: swapped when a reload changes them.
    pub(super) state: Arc<ArcSwap<ListenerState>>,
    /// Registered with the runtime of the worker that runs the loop.
    pub(super) socket: std::net::TcpListener,
    /// Whether other workers accept on the same address (`SO_REUSEPORT`).
    pub(super) shared: bool,
    pub(super) local: std::net::SocketAddr,
    /// The listener's count of open connections.
    pub(super) open: Arc<AtomicUsize>,
    pub(super) service: S,
    pub(super) phase: watch::Receiver<Phase>,
    pub(super) connections: TaskTracker,
}

/// What an accept loop derives from its [`ListenerState`], rebuilt when the
/// state is swapped.
struct Current {
    state: Arc<ListenerState>,
    protocols: Arc<Protocols>,
    #[cfg(feature = "tls")]
    tls: Option<Tls>,
}

impl Current {
    fn new(state: Arc<ListenerState>) -> Self {
        Self {
            protocols: Arc::new(Protocols::new(&state.limits)),
            // Once per generation: the certificate resolver follows reloads by itself.
            #[cfg(feature = "tls")]
            tls: match &state.protocol {
                ListenerProtocol::Https(certificates) => Some(Tls {
                    acceptor: TlsAcceptor::from(certificates.server_config(&[b"h2", b"http/1.1"])),
                    certificates: certificates.clone(),
                }),
                _ => None,
            },
            state,
        }
    }
}

pub(super) async fn accept_loop<S, B>(acceptor: Acceptor<S>)
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let mut current = Current::new(acceptor.state.load_full());
    let socket = match TcpListener::from_std(acceptor.socket) {
        Ok(socket) => socket,
        Err(error) => {
            tracing::error!(listener = %current.state.name, %error, "cannot serve the listener's socket");
            return;
        }
    };
    loop {
        // Past max_connections we stop calling accept(): new clients wait in
        // the backlog. With a socket per worker a loop waiting for a permit
        // would hold one its socket may never use, so each worker accepts
        // first and then waits: at most one connection per worker is
        // accepted beyond the limit, and it is served when a permit frees.
        let permit = if acceptor.shared {
            None
        } else {
            let Ok(permit) = current.state.permits.clone().acquire_owned().await else {
                return;
            };
            Some(permit)
        };
        let (stream, peer) = match socket.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(listener = %current.state.name, %error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let latest = acceptor.state.load_full();
        if !Arc::ptr_eq(&latest, &current.state) {
            current = Current::new(latest);
        }
        let permit = match permit {
            Some(permit) => permit,
            None => match current.state.permits.clone().acquire_owned().await {
                Ok(permit) => permit,
                Err(_) => return,
            },
        };
        let _ = stream.set_nodelay(true);
        // The header clock starts now: a TLS handshake counts against it too.
        let activity = Arc::new(Activity::new());
        let state = &current.state;
        let connection = Connection {
            protocols: current.protocols.clone(),
            limits: state.limits.clone(),
            phase: acceptor.phase.clone(),
            permit: ConnectionPermit::new(permit, &acceptor.open),
        };
        let conn = ConnInfo::new(state.name.clone(), Scheme::Http, peer, acceptor.local, None)
            .with_tunnels(TunnelHost {
                tasks: acceptor.connections.clone(),
                phase: acceptor.phase.clone(),
                idle_timeout: state.limits.tunnel_idle_timeout,
                activity: activity.clone(),
            });
        let service = acceptor.service.clone();
        let edge = Edge::new(
            conn,
            activity,
            state.limits.max_request_body,
            state.alt_svc.clone(),
        );
        #[cfg(feature = "tls")]
        if let Some(tls) = &current.tls {
            acceptor
                .connections
                .spawn(connection.secure(tls.clone(), stream, edge, service));
            continue;
        }
        acceptor.connections.spawn(connection.serve(
            Socket::new(stream),
            edge,
            service,
            Some(state.limits.send_timeout),
        ));
    }
}

impl Connection {
    /// An HTTPS connection: the handshake, then HTTP over TLS.
    #[cfg(feature = "tls")]
    async fn secure<S, B>(mut self, tls: Tls, stream: TcpStream, mut edge: Edge, service: S)
    where
        S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        // send_timeout watches the TCP stream: TLS takes writes into its
        // own buffer before the socket refuses them.
        let stream = Watched::new(stream, SendDeadline::new(self.limits.send_timeout));
        // Boxed, as the stream after it: the handshake's future holds rustls'
        // connection state (1,240 bytes), and this fn's local, `opening`'s
        // argument and its timeout would each keep room for it in the
        // connection's task for the connection's whole life.
        let handshake = Box::pin(tls.acceptor.accept(stream));
        let Some(stream) = self.opening("TLS handshake", handshake, &edge.conn).await else {
            return;
        };
        let sni = stream.get_ref().1.server_name().map(Arc::from);
        edge.conn.secure(sni, tls.certificates);
        // Boxed for the same reason: otherwise held by this fn's local,
        // `serve`'s argument and hyper's connection.
        self.serve(Box::new(stream), edge, service, None).await;
    }
}

/// What an HTTPS listener adds to a plain one.
#[cfg(feature = "tls")]
#[derive(Clone)]
struct Tls {
    acceptor: TlsAcceptor,
    certificates: TlsCertificates,
}

/// One accepted connection's share of the listener, until it closes.
struct Connection {
    protocols: Arc<Protocols>,
    limits: Arc<Limits>,
    phase: watch::Receiver<Phase>,
    /// Returned to the listener's `max_connections` when the socket is
    /// dropped: when the connection ends, or its tunnel if it was upgraded.
    permit: ConnectionPermit,
}

impl Connection {
    /// What comes before HTTP on a connection (the TLS handshake, or the
    /// look at a plain connection's first bytes), within
    /// `header_read_timeout`; `None` (and the connection closed) on failure,
    /// timeout, or when the server drains.
    async fn opening<T>(
        &mut self,
        what: &'static str,
        opening: impl Future<Output = std::io::Result<T>>,
        conn: &ConnInfo,
    ) -> Option<T> {
        let (listener, peer) = (conn.listener(), conn.peer());
        let opening = tokio::time::timeout(self.limits.header_read_timeout, opening);
        tokio::select! {
            // First, so a drain seen here is never lost to `drive`.
            biased;
            _ = self.phase.wait_for(|phase| *phase != Phase::Serving) => None,
            result = opening => match result {
                Ok(Ok(opened)) => Some(opened),
                Ok(Err(error)) => {
                    tracing::debug!(listener, %peer, %error, "{what} failed; closing");
                    None
                }
                Err(_elapsed) => {
                    tracing::debug!(listener, %peer, "{what} not done in time; closing");
                    None
                }
            },
        }
    }

    /// Serves HTTP/1 or HTTP/2, as `io` tells (see [`Speaks`]), on `io`
    /// (plain or TLS) to the end; `send_timeout` when `io` is the socket
    /// itself.
    ///
    /// The protocol is told here, not before the call: the arguments of an
    /// async fn stay in its future for its whole life, so an async fn that
    /// waited for the first bytes and then called this one would hold the
    /// edge and the service twice, about 1 KiB more per idle connection
    /// (`benches/idle.sh`).
    async fn serve<I, S, B>(
        mut self,
        io: I,
        mut edge: Edge,
        service: S,
        send_timeout: Option<Duration>,
    ) where
        I: AsyncRead + AsyncWrite + Speaks + Unpin + Send + 'static,
        S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let Some(protocol) = self.opening("first bytes", io.protocol(), &edge.conn).await else {
            return;
        };
        let activity = edge.activity.clone();
        let watcher = ConnectionWatcher::new(activity.clone(), self.permit, send_timeout);
        let io: TrackedIo<I> = TrackedIo::new(io, watcher);
        let io = TokioIo::new(io);
        edge.seal();
        let service = EdgeService::new(edge, service);
        let protocols = &self.protocols;
        // Pinned here and lent to `drive`: an async fn keeps its arguments in
        // its future for its whole life, so a `drive` that took the
        // connection by value and pinned it would hold it twice (720 bytes
        // more in every connection's task).
        let connection = pin!(match protocol {
            Protocol::Http1 => Either::Left(
                protocols
                    .http1
                    .serve_connection(io, service)
                    .with_upgrades(),
            ),
            // Boxed: an HTTP/2 connection's state is about twice an HTTP/1
            // one's, and the task of every connection would otherwise keep
            // room for it (850 bytes more per connection).
            Protocol::Http2 => {
                Either::Right(Box::pin(protocols.http2.serve_connection(io, service)))
            }
        });
        drive(connection, &activity, &self.limits, self.phase).await;
    }
}

/// What a TCP connection speaks.
#[derive(Clone, Copy)]
enum Protocol {
    Http1,
    Http2,
}

/// How a connection's stream tells which protocol it carries.
trait Speaks {
    fn protocol(&self) -> impl Future<Output = std::io::Result<Protocol>> + Send;
}

/// A plain connection: HTTP/2 when its first bytes are HTTP/2's connection
/// preface (prior knowledge), else HTTP/1.
impl Speaks for Socket {
    fn protocol(&self) -> impl Future<Output = std::io::Result<Protocol>> + Send {
        sniff(self.tcp())
    }
}

/// HTTPS: HTTP/2 when the client chose `h2` by ALPN, else HTTP/1 (RFC 9113,
/// section 3.3: HTTP/2 over TLS is always negotiated).
#[cfg(feature = "tls")]
impl<T> Speaks for Box<tokio_rustls::server::TlsStream<T>> {
    fn protocol(&self) -> impl Future<Output = std::io::Result<Protocol>> + Send {
        std::future::ready(Ok(match self.get_ref().1.alpn_protocol() {
            Some(b"h2") => Protocol::Http2,
            _ => Protocol::Http1,
        }))
    }
}

/// HTTP/2's connection preface (RFC 9113, section 3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What a plain connection speaks, from its first bytes, looked at without
/// taking them (`MSG_PEEK`), so hyper reads the socket itself, with no layer
/// in between that would hand it bytes read before. An error when the client
/// closes before sending a byte.
async fn sniff(stream: &TcpStream) -> std::io::Result<Protocol> {
    let mut first = [0u8; PREFACE.len()];
    let mut pause = Duration::from_millis(1);
    loop {
        let seen = stream.peek(&mut first).await?;
        if seen == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if first[..seen] != PREFACE[..seen] {
            return Ok(Protocol::Http1);
        }
        if seen == PREFACE.len() {
            return Ok(Protocol::Http2);
        }
        // The preface's start and nothing more yet. The socket stays
        // readable (its bytes are still there), so readiness cannot say when
        // more come: look again after a pause, twice as long each time, up to
        // a second. A client that stalls there costs about ten looks a
        // second at first and one a second after, until `header_read_timeout`;
        // one that sends its preface in quick pieces waits at most as long
        // again as it took.
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// hyper's two servers, configured from the listener's [`Limits`].
struct Protocols {
    http1: http1::Builder,
    http2: http2::Builder<StreamExecutor>,
}

impl Protocols {
    fn new(limits: &Limits) -> Self {
        let mut http1 = http1::Builder::new();
        http1
            .timer(TokioTimer::new())
            // Enforced by `Activity` instead: hyper's would also cut idle keep-alives.
            .header_read_timeout(None)
            .max_headers(limits.max_headers)
            // hyper answers 431 when a head outgrows its read buffer (at least 8 KiB).
            .max_buf_size(limits.max_header_bytes.max(8192))
            .keep_alive(true);
        let mut http2 = http2::Builder::new(StreamExecutor);
        http2
            .timer(TokioTimer::new())
            .max_concurrent_streams(limits.h2_max_concurrent_streams.get())
            // RFC 8441: WebSocket over HTTP/2 streams (see `websocket`).
            .enable_connect_protocol()
            .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
        Self { http1, http2 }
    }
}

/// Runs one connection to its end, closing it when idle, when a head is too
/// slow, or (gracefully) when the server drains.
///
/// The connection, then its HTTP/2 streams (see [`Streams`]), are polled
/// whenever its task wakes; the drain signal and the next check of
/// [`Activity`] only when one of them woke it (see [`SideWake`]), so the many
/// wake-ups of a busy connection cost no polls of futures that have nothing
/// to say.
async fn drive<C>(
    mut connection: Pin<&mut C>,
    activity: &Activity,
    limits: &Limits,
    mut phase: watch::Receiver<Phase>,
) where
    C: Future + GracefulConnection,
{
    // HTTP/2 streams, polled in this task (see `StreamExecutor`).
    let mut streams = Streams::default();
    let mut closing = false;
    // Set when the connection is asked to close for idling or for a reader
    // that opens no window. The close's own writes (a GOAWAY) count as
    // activity and would push the next verdict a whole `keepalive_timeout`
    // or `send_timeout` away; the grace ends at its own time instead.
    let mut grace: Option<Grace> = None;
    let side = Arc::new(SideWake::default());
    let side_waker = Waker::from(side.clone());
    loop {
        if let Some(ended) = grace.take_if(|grace| std::time::Instant::now() >= grace.until) {
            let still = match ended.stuck_at {
                None => activity.quiet(),
                Some(at) => activity.stuck_since(at),
            };
            if still {
                tracing::debug!("still open a grace period after its close began; dropping");
                return;
            }
            // A request came in, or the response moved: the checks go on.
        }
        let next_check = match activity.verdict(limits) {
            Verdict::Wait(at) => at,
            Verdict::HeadTimedOut => {
                tracing::debug!("request head not received in time; closing");
                return;
            }
            Verdict::Unread if !closing => {
                tracing::debug!("a response waited send_timeout for the client's window; closing");
                closing = true;
                connection.as_mut().shutdown_gracefully();
                grace
                    .insert(Grace::new(limits, Some(crate::clock::now_ms())))
                    .until
            }
            Verdict::Idle if !closing => {
                closing = true;
                connection.as_mut().shutdown_gracefully();
                grace.insert(Grace::new(limits, None)).until
            }
            // Asked to close: within its grace, the grace's end decides
            // (above); after it (a request came in meanwhile) or when a drain
            // asked, idle or stuck again means dropped.
            Verdict::Unread | Verdict::Idle => match &grace {
                Some(grace) => grace.until,
                None => return,
            },
        };
        let next_check = grace
            .as_ref()
            .map_or(next_check, |grace| next_check.min(grace.until));
        let woke = {
            let mut check = pin!(tokio::time::sleep_until(next_check.into()));
            let mut changed = pin!(phase.changed());
            // New futures: both are polled once, and from then on when woken.
            side.woken.store(true, Ordering::Relaxed);
            std::future::poll_fn(|cx| {
                side.task.register(cx.waker());
                if streams.enter(|| connection.as_mut().poll(cx)).is_ready() {
                    return Poll::Ready(Woke::Ended);
                }
                streams.poll(cx);
                if side.woken.swap(false, Ordering::AcqRel) {
                    let mut cx = Context::from_waker(&side_waker);
                    if let Poll::Ready(changed) = changed.as_mut().poll(&mut cx) {
                        return Poll::Ready(Woke::Phase(changed.is_ok()));
                    }
                    if check.as_mut().poll(&mut cx).is_ready() {
                        return Poll::Ready(Woke::Check);
                    }
                }
                Poll::Pending
            })
            .await
        };
        match woke {
            Woke::Ended => return,
            Woke::Check => {}
            Woke::Phase(open) => {
                let now = if open {
                    *phase.borrow_and_update()
                } else {
                    Phase::Closing
                };
                match now {
                    Phase::Serving => {}
                    Phase::Draining if !closing => {
                        closing = true;
                        connection.as_mut().shutdown_gracefully();
                    }
                    Phase::Draining => {}
                    Phase::Closing => return,
                }
            }
        }
    }
}

/// The time a connection asked to close (for idling, or for a response its
/// client opens no window for) has to go; past it, it is dropped if it is
/// still quiet, or that response still waits.
struct Grace {
    until: std::time::Instant,
    /// For a stuck response: when the close began (coarse-clock ms).
    stuck_at: Option<u64>,
}

impl Grace {
    /// A grace of `header_read_timeout` from now.
    fn new(limits: &Limits, stuck_at: Option<u64>) -> Self {
        Self {
            until: super::activity::later(std::time::Instant::now(), limits.header_read_timeout),
            stuck_at,
        }
    }
}

/// What ended one wait of [`drive`].
enum Woke {
    /// The connection's future finished.
    Ended,
    /// The drain signal changed (`false`: its sender is gone).
    Phase(bool),
    /// The time of the next check of [`Activity`] came.
    Check,
}

/// The waker [`drive`] gives the drain signal and its timer: it notes that one
/// of them woke the task, and wakes the task.
#[derive(Default)]
struct SideWake {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for SideWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// hyper's connection types all offer a graceful shutdown; this names it once.
pub(super) trait GracefulConnection {
    fn shutdown_gracefully(self: Pin<&mut Self>);
}

impl<A, B> GracefulConnection for Either<A, B>
where
    A: GracefulConnection,
    B: GracefulConnection,
{
    fn shutdown_gracefully(self: Pin<&mut Self>) {
        match self.as_pin_mut() {
            Either::Left(connection) => connection.shutdown_gracefully(),
            Either::Right(connection) => connection.shutdown_gracefully(),
        }
    }
}

impl<C: GracefulConnection + ?Sized> GracefulConnection for Pin<Box<C>> {
    fn shutdown_gracefully(self: Pin<&mut Self>) {
        self.get_mut().as_mut().shutdown_gracefully();
    }
}

impl<I, S> GracefulConnection for http1::UpgradeableConnection<I, S>
where
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::Error: Into<BoxError>,
    S::ResBody: http_body::Body + 'static,
    <S::ResBody as http_body::Body>::Error: Into<BoxError>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    fn shutdown_gracefully(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, E> GracefulConnection for http2::Connection<I, S, E>
where
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::Error: Into<BoxError>,
    S::ResBody: http_body::Body + Send + 'static,
    <S::ResBody as http_body::Body>::Error: Into<BoxError>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + 'static,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, S::ResBody>,
{
    fn shutdown_gracefully(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}
