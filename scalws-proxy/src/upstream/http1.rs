//! The HTTP/1.1 client of one `http1` address, on hyper's `client::conn`:
//! the connection is driven by the request's own future until the response
//! head, then by the response body until it ends, and handed back to an idle
//! list of the worker thread the body ended on. No channel to a connection
//! task, no task spawned, no lock: the idle lists are the thread's own.
//!
//! - **Reuse.** A connection goes back to the idle list only when its
//!   response body was read to the end and hyper says it is ready for the
//!   next request; one whose body was dropped early, that said
//!   `Connection: close`, or that failed is closed.
//! - **Idle lists.** One per address per worker thread, newest last, at most
//!   `max_idle_per_address` long (the oldest is closed past it). A request
//!   takes the newest; a connection idle longer than `idle_timeout` is never
//!   used, and is closed at the next request on that thread or by the sweep
//!   a thread makes at most once a second when it hands one back.
//! - **A reused connection the upstream closed.** An idle connection is not
//!   polled, so a close is seen when it is used: hyper hands the request back
//!   unsent and it goes on the next idle connection or a new one, whatever
//!   its method (nothing of it was written).
//! - **Upgrades.** A request with `Upgrade` gets a connection whose driving
//!   is spawned (a tunnel outlives the request), and that connection is
//!   never reused.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::future::{Future, poll_fn};
use std::hash::{BuildHasherDefault, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, header};
use http_body::{Body as _, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1::{Builder, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use scalws_core::{Body, BoxError};

use super::connector::{Connector, UpstreamStream};

type Conn = Connection<TokioIo<UpstreamStream>, Body>;

/// How often a thread's idle lists are swept of expired connections and of
/// the lists of clients that are gone, at most.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// The client of one address. Cloning shares its idle lists.
#[derive(Clone)]
pub(crate) struct Http1Client {
    shared: Arc<Shared>,
}

struct Shared {
    /// The key of this client's idle lists (never reused).
    id: u64,
    connector: Connector,
    builder: Builder,
    idle_timeout: Duration,
    max_idle: usize,
}

/// A connection and its request handle, between requests or during one.
struct Held {
    sender: SendRequest<Body>,
    conn: Conn,
}

struct Idle {
    /// Boxed once per connection: a request, its body and the idle list
    /// move a pointer, not hyper's connection state.
    held: Box<Held>,
    since: Instant,
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
                idle_timeout,
                max_idle,
            }),
        }
    }

    /// Sends `request` (origin-form, with its Host) and returns the response
    /// once its head has arrived; the body streams and drives the connection.
    pub(crate) async fn request(
        &self,
        mut request: Request<Body>,
    ) -> Result<Response<Body>, BoxError> {
        let upgrade = request.headers().contains_key(header::UPGRADE);
        loop {
            let (mut held, reused) = match self.checkout() {
                Some(held) => (held, true),
                // Boxed: the connect future is large and rarely needed, and
                // the request's future is moved into a box of its own.
                None => (Box::pin(self.connect()).await?, false),
            };
            let mut response = std::pin::pin!(held.sender.try_send_request(request));
            let mut conn = None;
            if upgrade {
                // A 101's tunnel needs the connection driven past this
                // request: it gets a task of its own, and is not reused.
                tokio::spawn(held.conn.with_upgrades());
            } else {
                conn = Some(held);
            }
            let result = poll_fn(|cx| {
                if let Some(c) = conn.as_mut()
                    && Pin::new(&mut c.conn).poll(cx).is_ready()
                {
                    // Closed or failed: dropping it hands back a request
                    // it never took, or ends the response's wait.
                    conn = None;
                }
                response.as_mut().poll(cx)
            })
            .await;
            match result {
                Ok(response) => {
                    return Ok(match conn {
                        Some(held) => response.map(|body| self.streamed(body, held)),
                        None => response.map(|body| Body::incoming(body, u64::MAX)),
                    });
                }
                Err(mut failed) => match failed.take_message() {
                    // An idle connection the upstream had closed: nothing
                    // was written, so the request goes again as it is.
                    Some(unsent) if reused => request = unsent,
                    _ => return Err(failed.into_error().into()),
                },
            }
        }
    }

    async fn connect(&self) -> Result<Box<Held>, BoxError> {
        let io = self.shared.connector.clone().connect().await?;
        let (sender, conn) = self.shared.builder.handshake(io).await?;
        Ok(Box::new(Held { sender, conn }))
    }

    fn streamed(&self, body: Incoming, held: Box<Held>) -> Body {
        Body::new(Streamed {
            body,
            held: Some(held),
            client: self.clone(),
            gave_data: false,
            error: None,
        })
    }

    /// Drives a connection whose response has ended until its request has
    /// been sent too, then hands it back if hyper is ready for another.
    async fn finish_sending(self, mut held: Box<Held>) {
        let ready = poll_fn(|cx| match Pin::new(&mut held.conn).poll(cx) {
            Poll::Ready(_) => Poll::Ready(false),
            Poll::Pending if held.sender.is_ready() => Poll::Ready(true),
            Poll::Pending => Poll::Pending,
        })
        .await;
        if ready {
            self.checkin(held);
        }
    }

    /// The newest idle connection of this thread, when one is young enough.
    fn checkout(&self) -> Option<Box<Held>> {
        let shared = &*self.shared;
        IDLE.try_with(|lists| {
            let mut lists = lists.borrow_mut();
            let list = lists.by_client.get_mut(&shared.id)?;
            let idle = list.conns.pop_back()?;
            if idle.since.elapsed() < shared.idle_timeout {
                Some(idle.held)
            } else {
                // The newest is too old: so are the rest.
                list.conns.clear();
                None
            }
        })
        .ok()
        .flatten()
    }

    /// Back to this thread's idle list, if it has room.
    fn checkin(&self, held: Box<Held>) {
        let shared = &self.shared;
        if shared.max_idle == 0 {
            return;
        }
        let _ = IDLE.try_with(|lists| {
            let now = Instant::now();
            let mut lists = lists.borrow_mut();
            let list = lists.by_client.entry(shared.id).or_insert_with(|| List {
                owner: Arc::downgrade(shared),
                conns: VecDeque::new(),
            });
            if list.conns.len() >= shared.max_idle {
                list.conns.pop_front();
            }
            list.conns.push_back(Idle { held, since: now });
            if now.duration_since(lists.swept) >= SWEEP_EVERY {
                lists.sweep(now);
            }
        });
    }
}

/// A worker thread's idle connections, per client.
struct Lists {
    by_client: HashMap<u64, List, BuildHasherDefault<IdHasher>>,
    swept: Instant,
}

struct List {
    owner: Weak<Shared>,
    conns: VecDeque<Idle>,
}

impl Lists {
    /// Closes connections idle past their client's timeout, and those of
    /// clients that are gone (a pool replaced by a reload).
    #[cold]
    fn sweep(&mut self, now: Instant) {
        self.swept = now;
        self.by_client.retain(|_, list| {
            let Some(owner) = list.owner.upgrade() else {
                return false;
            };
            while list
                .conns
                .front()
                .is_some_and(|idle| now.duration_since(idle.since) >= owner.idle_timeout)
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
        swept: Instant::now(),
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
/// idle list when the body has ended and the connection is ready again.
struct Streamed {
    body: Incoming,
    /// `None` once the connection closed, failed or was handed back.
    held: Option<Box<Held>>,
    client: Http1Client,
    /// The last poll gave data: an error now waits one turn (see `poll_frame`).
    gave_data: bool,
    /// The body's error, given at the next poll.
    error: Option<hyper::Error>,
}

impl Streamed {
    /// The body has ended: one more turn of the connection (with no waker:
    /// nothing waits on it now) lets it finish the exchange, then it goes
    /// back if hyper is ready to send on it again.
    fn finish(&mut self) {
        let Some(mut held) = self.held.take() else {
            return;
        };
        let mut cx = Context::from_waker(Waker::noop());
        if Pin::new(&mut held.conn).poll(&mut cx).is_ready() {
            return;
        }
        if held.sender.is_ready() {
            self.client.checkin(held);
        } else if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            // The response ended before the request did (an early answer
            // to an upload): the rest of the request body still goes, in a
            // task of its own, and the connection comes back after it if
            // it can.
            runtime.spawn(self.client.clone().finish_sending(held));
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
        if let Some(held) = &mut this.held
            && Pin::new(&mut held.conn).poll(cx).is_ready()
        {
            // Closed (after the last of the body) or failed (the body
            // gets the error): not to be used again either way.
            this.held = None;
        }
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        match polled {
            Poll::Ready(Some(Err(error))) => {
                this.held = None;
                if std::mem::take(&mut this.gave_data) {
                    // The connection is driven here, so the upstream's data
                    // and its failure can come in two polls with no wait
                    // between: hyper's server would drop the data it has
                    // not written yet with the response. One turn first,
                    // so it writes what came (a short body, cut off).
                    this.error = Some(error);
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                return Poll::Ready(Some(Err(error.into())));
            }
            Poll::Ready(None) => this.finish(),
            // hyper's server polls no further after trailers.
            Poll::Ready(Some(Ok(ref frame)))
                if frame.is_trailers() || this.body.is_end_stream() =>
            {
                this.finish();
            }
            Poll::Ready(Some(Ok(_))) => this.gave_data = true,
            Poll::Pending => this.gave_data = false,
        }
        polled.map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Streamed {
    fn drop(&mut self) {
        // A body that was never polled to its end (a HEAD, a 204, a
        // length the server knew was reached) may still have ended.
        if self.held.is_some() && self.body.is_end_stream() {
            self.finish();
        }
    }
}
