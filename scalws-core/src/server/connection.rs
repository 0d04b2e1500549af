//! Accepting connections and driving each one: protocol, timeouts, drain.

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_util::task::TaskTracker;
use tower::Service;

use super::activity::{Activity, Verdict};
use super::edge::Edge;
use super::io::TrackedIo;
use super::{Limits, Phase};
use crate::error::BoxError;
use crate::{Body, ConnInfo, Scheme};

pub(super) struct Acceptor<S> {
    pub(super) name: Arc<str>,
    pub(super) scheme: Scheme,
    pub(super) socket: TcpListener,
    pub(super) local: std::net::SocketAddr,
    pub(super) permits: Arc<Semaphore>,
    pub(super) limits: Arc<Limits>,
    pub(super) service: S,
    pub(super) phase: watch::Receiver<Phase>,
    pub(super) connections: TaskTracker,
}

pub(super) async fn accept_loop<S, B>(acceptor: Acceptor<S>)
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let builder = Arc::new(protocol_builder(&acceptor.limits));
    loop {
        // Past max_connections we stop calling accept(): new clients wait in the backlog.
        let Ok(permit) = acceptor.permits.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = match acceptor.socket.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(listener = %acceptor.name, %error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let conn = ConnInfo::new(
            acceptor.name.clone(),
            acceptor.scheme,
            peer,
            acceptor.local,
            None,
        );
        let activity = Arc::new(Activity::new());
        let edge = Arc::new(Edge {
            service: acceptor.service.clone(),
            conn,
            activity: activity.clone(),
            max_request_body: acceptor.limits.max_request_body,
        });
        let io = TokioIo::new(TrackedIo::new(stream, activity.clone()));
        let builder = builder.clone();
        let limits = acceptor.limits.clone();
        let phase = acceptor.phase.clone();
        acceptor.connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let edge = edge.clone();
                async move { edge.handle(request).await }
            });
            let connection = builder.serve_connection_with_upgrades(io, service);
            drive(connection, &activity, &limits, phase).await;
            drop(permit);
        });
    }
}

fn protocol_builder(limits: &Limits) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        // Enforced by `Activity` instead: hyper's would also cut idle keep-alives.
        .header_read_timeout(None)
        .max_headers(limits.max_headers)
        // hyper answers 431 when a head outgrows its read buffer (at least 8 KiB).
        .max_buf_size(limits.max_header_bytes.max(8192))
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.h2_max_concurrent_streams.get())
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
    builder
}

/// Runs one connection to its end, closing it when idle, when a head is too
/// slow, or (gracefully) when the server drains.
async fn drive<C>(
    connection: C,
    activity: &Activity,
    limits: &Limits,
    mut phase: watch::Receiver<Phase>,
) where
    C: std::future::Future + GracefulConnection,
{
    let mut connection = pin!(connection);
    let mut closing = false;
    loop {
        let next_check = match activity.verdict(limits) {
            Verdict::Wait(at) => at,
            Verdict::HeadTimedOut => {
                tracing::debug!("request head not received in time; closing");
                return;
            }
            Verdict::Idle if !closing => {
                closing = true;
                connection.as_mut().shutdown_gracefully();
                super::activity::later(std::time::Instant::now(), limits.header_read_timeout)
            }
            // Already asked to close and still open after a grace period: drop it.
            Verdict::Idle => return,
        };
        tokio::select! {
            _ = connection.as_mut() => return,
            changed = phase.changed() => {
                let now = changed.map(|()| *phase.borrow_and_update()).unwrap_or(Phase::Closing);
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
            _ = tokio::time::sleep_until(next_check.into()) => {}
        }
    }
}

/// hyper's connection types all offer a graceful shutdown; this names it once.
pub(super) trait GracefulConnection {
    fn shutdown_gracefully(self: std::pin::Pin<&mut Self>);
}

impl<I, S, E> GracefulConnection for auto::UpgradeableConnection<'_, I, S, E>
where
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::Error: Into<BoxError>,
    S::ResBody: http_body::Body + Send + 'static,
    <S::ResBody as http_body::Body>::Error: Into<BoxError>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, S::ResBody>,
{
    fn shutdown_gracefully(self: std::pin::Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}
