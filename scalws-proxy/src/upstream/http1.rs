//! The HTTP/1.1 client of one `http1` address: the exchange is ScalWS's own
//! (`wire/`), driven by the request's own future until the response head,
//! then by the response body until it ends, and the connection is handed
//! back to an idle list of the worker thread the body ended on. No
//! connection task, channel or dispatcher, no task spawned, no lock: the
//! idle lists are the thread's own.
//!
//! - **Reuse.** A connection goes back to the idle list only when its
//!   response body was read to the end, its request was sent whole, and the
//!   upstream keeps it open; one whose body was dropped early, that said
//!   `Connection: close`, or that failed is closed.
//! - **Idle lists.** One per address per worker thread, newest last, at most
//!   `max_idle_per_address` long (the oldest is closed past it). A request
//!   takes the newest; a connection idle longer than `idle_timeout` is never
//!   used, and is closed at the next request on that thread or by the sweep
//!   a thread makes at most once a second when it hands one back.
//! - **A reused connection the upstream closed.** An idle connection is not
//!   polled, so a close is seen when it is taken: what the socket has ready
//!   is read first (never waiting), and one that closed, failed or sent
//!   bytes nobody asked for is dropped and the next one taken, before
//!   anything of the request is written, whatever its method.
//! - **Upgrades.** A request with `Upgrade` (or a CONNECT) goes through
//!   hyper's `client::conn`, whose driving is spawned (a tunnel outlives the
//!   request); that connection is never reused.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::hash::{BuildHasherDefault, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{Method, Request, Response, header};
use http_body::{Frame, SizeHint};
use hyper::client::conn::http1::Builder;
use hyper_util::rt::TokioIo;
use scalws_core::clock::{millis, now_ms};
use scalws_core::{Body, BoxError};
use tokio::time::Instant;

use super::Forwarding;
use super::client::{DeadlinePassed, within};
use super::connector::Connector;
use super::wire::{Exchange, Wire, WireError};

/// How often a thread's idle lists are swept of expired connections and of
/// the lists of clients that are gone, at most, in milliseconds.
const SWEEP_EVERY_MS: u64 = 1000;

/// The client of one address. Cloning shares its idle lists.
#[derive(Clone)]
pub(crate) struct Http1Client {
    shared: Arc<Shared>,
}

struct Shared {
    /// The key of this client's idle lists (never reused).
    id: u64,
    connector: Connector,
    /// For upgrades, which hyper's client carries.
    builder: Builder,
    /// The largest response head (and trailers) accepted.
    max_head: usize,
    idle_timeout: Duration,
    /// The same, in milliseconds of the coarse clock the idle lists read.
    idle_ms: u64,
    max_idle: usize,
}

struct Idle {
    /// Boxed once per connection: a request, its body and the idle list
    /// move a pointer, not the connection's buffers.
    wire: Box<Wire>,
    /// When it went idle, on `scalws_core::clock`'s coarse clock: the idle
    /// timeout is kept to within a kernel tick, and the two reads per
    /// request cost less than `Instant`'s.
    since_ms: u64,
}

impl Http1Client {
    pub(crate) fn new(
        connector: Connector,
        max_buf_size: usize,
        idle_timeout: Duration,
        max_idle: usize,
    ) -> Self {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let mut builder = Builder::new();
        builder.max_buf_size(max_buf_size);
        Self {
            shared: Arc::new(Shared {
                id: NEXT_ID.fetch_add(1, Relaxed),
                connector,
                builder,
                max_head: max_buf_size,
                idle_timeout,
                idle_ms: millis(idle_timeout),
                max_idle,
            }),
        }
    }

    /// Sends the request (`head`, origin-form with its Host, and `body`) and
    /// returns the response once its head has arrived; the body streams and
    /// drives the connection. The head is sent from where the caller keeps
    /// it, which is where a retry finds it; once the answer's head is in,
    /// its header map is taken, emptied, for the connection's next answer
    /// head. A `deadline` that passes first is [`DeadlinePassed`] (the
    /// connection is closed).
    pub(crate) async fn request(
        &self,
        head: &mut Parts,
        body: Body,
        deadline: Instant,
        forwarding: Option<&Forwarding>,
    ) -> Result<Response<Body>, BoxError> {
        if head.headers.contains_key(header::UPGRADE) || head.method == Method::CONNECT {
            // Boxed: its future (hyper's handshake and send) would make this
            // one, and every future around it, a kilobyte larger to move.
            return within(deadline, Box::pin(self.upgrade(head, body, forwarding))).await?;
        }
        let wire = match self.checkout() {
            Some(wire) => wire,
            // Boxed: the connect future is large and rarely needed, and
            // the request's future is moved into a box of its own.
            None => match within(deadline, Box::pin(self.connect())).await? {
                Ok(wire) => wire,
                Err(source) => return Err(source),
            },
        };
        let mut exchange = match Exchange::start(wire, head, body, forwarding) {
            Ok(exchange) => exchange,
            Err((wire, error)) => {
                // Nothing was written: the connection is as it was.
                self.checkin(wire);
                return Err(error.into());
            }
        };
        // The head, or the deadline on the connection's own timer (polled
        // after the head, as `tokio::time::timeout` does).
        let answer = poll_fn(|cx| {
            if let Poll::Ready(head) = exchange.poll_head(cx) {
                return Poll::Ready(Some(head));
            }
            exchange.poll_deadline(cx, deadline).map(|()| None)
        });
        let response = match answer.await {
            Some(Ok(response)) => response,
            Some(Err(error)) => return Err(error.into()),
            None => return Err(DeadlinePassed.into()),
        };
        exchange.recycle(std::mem::take(&mut head.headers));
        let (parts, ()) = response.into_parts();
        let body = if exchange.body_ended() {
            self.ended(exchange);
            Body::empty()
        } else {
            Body::new(Streamed {
                exchange: Some(exchange),
                client: self.clone(),
                gave_data: false,
                error: None,
            })
        };
        Ok(Response::from_parts(parts, body))
    }

    async fn connect(&self) -> Result<Box<Wire>, BoxError> {
        let io = self.shared.connector.clone().connect().await?;
        Ok(Box::new(Wire::new(io.into_inner(), self.shared.max_head)))
    }

    /// A request that may switch protocols, on hyper's client: a 101's
    /// tunnel needs the connection driven past this request, so it gets a
    /// task of its own, and is not reused.
    #[cold]
    async fn upgrade(
        &self,
        head: &Parts,
        body: Body,
        forwarding: Option<&Forwarding>,
    ) -> Result<Response<Body>, BoxError> {
        // hyper's client takes the request: a copy of its head (this path
        // is rare), the head itself staying with the caller for a retry.
        let mut outgoing = head.clone();
        if let Some(forwarding) = forwarding {
            forwarding.apply(&mut outgoing.headers);
        }
        let request = Request::from_parts(outgoing, body);
        let sent = async {
            let io = match self.checkout() {
                Some(wire) => TokioIo::new(wire.into_io()),
                None => Box::pin(self.shared.connector.clone().connect()).await?,
            };
            let (mut sender, conn) = self.shared.builder.handshake(io).await?;
            tokio::spawn(conn.with_upgrades());
            Ok::<_, BoxError>(sender.send_request(request).await?)
        };
        match sent.await {
            Ok(response) => Ok(response.map(|body| Body::incoming(body, u64::MAX))),
            Err(source) => Err(source),
        }
    }

    /// A response has been read to its end: its connection goes back if it
    /// may be reused. A request still sending (the upstream answered an
    /// upload early) goes on in a task of its own, and its connection comes
    /// back after it if it can.
    fn ended(&self, exchange: Exchange) {
        if !exchange.still_sending() {
            if let Some(wire) = exchange.into_reusable() {
                self.checkin(wire);
            }
        } else if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            // At most `idle_timeout`: a client that trickles its upload, or
            // an upstream that stops reading, does not hold the task and the
            // connection past it (the connection is then closed).
            let client = self.clone();
            runtime.spawn(async move {
                let limit = client.shared.idle_timeout;
                if let Ok(Some(wire)) = tokio::time::timeout(limit, exchange.finish_sending()).await
                {
                    client.checkin(wire);
                }
            });
        }
    }

    /// The newest idle connection of this thread that is young enough and
    /// still open.
    fn checkout(&self) -> Option<Box<Wire>> {
        let shared = &*self.shared;
        IDLE.try_with(|lists| {
            let mut lists = lists.borrow_mut();
            let list = lists.by_client.get_mut(&shared.id)?;
            let now = now_ms();
            while let Some(mut idle) = list.conns.pop_back() {
                if now.saturating_sub(idle.since_ms) >= shared.idle_ms {
                    // The newest is too old: so are the rest.
                    list.conns.clear();
                    return None;
                }
                if !idle.wire.is_unusable() {
                    return Some(idle.wire);
                }
            }
            None
        })
        .ok()
        .flatten()
    }

    /// Back to this thread's idle list, if it has room.
    fn checkin(&self, wire: Box<Wire>) {
        let shared = &self.shared;
        if shared.max_idle == 0 {
            return;
        }
        let _ = IDLE.try_with(|lists| {
            let now = now_ms();
            let mut lists = lists.borrow_mut();
            let list = lists.by_client.entry(shared.id).or_insert_with(|| List {
                owner: Arc::downgrade(shared),
                conns: VecDeque::new(),
            });
            if list.conns.len() >= shared.max_idle {
                list.conns.pop_front();
            }
            list.conns.push_back(Idle {
                wire,
                since_ms: now,
            });
            if now.saturating_sub(lists.swept_ms) >= SWEEP_EVERY_MS {
                lists.sweep(now);
            }
        });
    }
}

/// A worker thread's idle connections, per client.
struct Lists {
    by_client: HashMap<u64, List, BuildHasherDefault<IdHasher>>,
    swept_ms: u64,
}

struct List {
    owner: Weak<Shared>,
    conns: VecDeque<Idle>,
}

impl Lists {
    /// Closes connections idle past their client's timeout, and those of
    /// clients that are gone (a pool replaced by a reload).
    #[cold]
    fn sweep(&mut self, now: u64) {
        self.swept_ms = now;
        self.by_client.retain(|_, list| {
            let Some(owner) = list.owner.upgrade() else {
                return false;
            };
            while list
                .conns
                .front()
                .is_some_and(|idle| now.saturating_sub(idle.since_ms) >= owner.idle_ms)
            {
                list.conns.pop_front();
            }
            !list.conns.is_empty()
        });
    }
}

thread_local! {
    static IDLE: RefCell<Lists> = RefCell::new(Lists {
        by_client: HashMap::default(),
        swept_ms: now_ms(),
    });
}

/// The ids are a counter: they need no hashing beyond a spread.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 << 8 | u64::from(byte)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A response body that drives its connection, and hands it back to the
/// idle list when the body has ended and the connection may be reused.
struct Streamed {
    /// `None` once the body failed or its connection was handed on.
    exchange: Option<Exchange>,
    client: Http1Client,
    /// The last poll gave data: an error now waits one turn (see `poll_frame`).
    gave_data: bool,
    /// The body's error, given at the next poll.
    error: Option<WireError>,
}

impl Streamed {
    fn finish(&mut self) {
        if let Some(exchange) = self.exchange.take() {
            self.client.ended(exchange);
        }
    }
}

impl http_body::Body for Streamed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(error) = this.error.take() {
            return Poll::Ready(Some(Err(error.into())));
        }
        let Some(exchange) = &mut this.exchange else {
            return Poll::Ready(None);
        };
        match exchange.poll_body(cx) {
            Poll::Ready(Some(Err(error))) => {
                this.exchange = None;
                if std::mem::take(&mut this.gave_data) {
                    // The upstream's data and its failure can come in two
                    // polls with no wait between: hyper's server would drop
                    // the data it has not written yet with the response.
                    // One turn first, so it writes what came (a short body,
                    // cut off).
                    this.error = Some(error);
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Poll::Ready(Some(Err(error.into())))
            }
            Poll::Ready(None) => {
                this.finish();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Ok(frame))) => {
                // hyper's server polls no further after trailers, or after
                // a frame that leaves the body at its end.
                if exchange.body_ended() {
                    this.finish();
                }
                this.gave_data = true;
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                this.gave_data = false;
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.exchange.as_ref().is_none_or(Exchange::body_ended) && self.error.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        self.exchange
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Exchange::size_hint)
    }
}

impl Drop for Streamed {
    fn drop(&mut self) {
        // A body that was never polled past its end may still have ended.
        if self.exchange.as_ref().is_some_and(Exchange::body_ended) {
            self.finish();
        }
    }
}
