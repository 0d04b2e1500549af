//! [`SharedGateway`]: the reload slot. A gateway replaced while it serves,
//! with the host tables of listeners it no longer has kept for their
//! draining connections.

use std::convert::Infallible;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use arc_swap::ArcSwap;
use http::{Request, Response};
use scalws_core::Body;

use super::{Gateway, Inner};
use crate::action::ActionFuture;

/// A [`Gateway`] that can be replaced while it serves: each request goes to
/// the gateway current when it arrives, and keeps it to its end, so a reload
/// never changes a request half way. Cheap to clone; all clones share one slot.
#[derive(Clone, Debug)]
pub struct SharedGateway {
    current: Arc<ArcSwap<Gateway>>,
}

impl SharedGateway {
    /// Serves `gateway` until [`store`](Self::store) replaces it.
    pub fn new(gateway: Gateway) -> Self {
        Self {
            current: Arc::new(ArcSwap::from_pointee(gateway)),
        }
    }

    /// New requests go to `gateway` from now on.
    ///
    /// Requests that name a listener `gateway` does not have, but the gateway
    /// it replaces had, still route by that listener's old host table: they
    /// come on connections accepted before the listener was removed (which
    /// are draining: an HTTP/2 stream sent before the client saw GOAWAY, say)
    /// or renamed in place (which stay open), and they get the answer they
    /// were sent for instead of a 404. Those tables stay until the next
    /// `store` or [`forget_retired_after`](Self::forget_retired_after).
    ///
    /// Returns the gateway replaced, as it was, for [`restore`](Self::restore).
    pub fn store(&self, gateway: Gateway) -> Arc<Gateway> {
        let previous = self.current.load_full();
        self.current.store(Arc::new(gateway.retiring(&previous)));
        previous
    }

    /// Puts back, unchanged, the gateway a [`store`](Self::store) replaced:
    /// for a reload that failed after its gateway was stored.
    pub fn restore(&self, previous: Arc<Gateway>) {
        self.current.store(previous);
    }

    /// Drops the old listeners' host tables the last [`store`](Self::store)
    /// kept, `delay` from now (when their connections have drained), unless
    /// another gateway is stored first. Spawns a task on the current tokio
    /// runtime, which holds no part of the gateway meanwhile.
    pub fn forget_retired_after(&self, delay: std::time::Duration) {
        let current = self.current.load();
        if current.retired.is_none() {
            return;
        }
        let stored = Arc::downgrade(&current.inner);
        let shared = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            shared.forget_retired(&stored);
        });
    }

    /// Drops the retired tables if the gateway `stored` points to is still current.
    fn forget_retired(&self, stored: &Weak<Inner>) {
        let is_current =
            |gateway: &Gateway| std::ptr::eq(stored.as_ptr(), Arc::as_ptr(&gateway.inner));
        let current = self.current.load();
        if current.retired.is_none() || !is_current(&current) {
            return;
        }
        self.current.rcu(|current| {
            let mut current = Gateway::clone(current);
            if is_current(&current) {
                current.retired = None;
            }
            current
        });
    }
}

impl tower::Service<Request<Body>> for SharedGateway {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ActionFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    #[inline]
    fn call(&mut self, request: Request<Body>) -> ActionFuture {
        self.current.load().call_ref(request)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use http_body_util::BodyExt;
    use scalws_router::RouteSpec;
    use tower::Service;

    use http::{StatusCode, header};

    use super::*;
    use crate::{Action, Application, Respond};

    /// A gateway whose listeners each answer with their own name and `version`.
    fn gateway(listeners: &[&'static str], version: &'static str) -> Gateway {
        let mut builder = Gateway::builder();
        for &listener in listeners {
            let body = format!("{listener} {version}");
            let site = Application::builder(listener)
                .domain("*")
                .unwrap()
                .listener(listener)
                .route(RouteSpec::prefix(
                    "/",
                    Action::Respond(Respond::new(StatusCode::OK, body)),
                ))
                .unwrap();
            builder = builder.listener(listener).application(site);
        }
        builder.build().unwrap()
    }

    /// What a request on listener `listener` gets: status and body.
    async fn on(shared: &SharedGateway, listener: &str) -> (u16, String) {
        let mut request = Request::get("/")
            .header(header::HOST, "example.com")
            .body(Body::empty())
            .unwrap();
        request
            .extensions_mut()
            .insert(crate::gateway::plain_connection(listener));
        let response = shared.clone().call(request).await.unwrap();
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_removed_listeners_connections_keep_its_routes_until_forgotten() {
        let shared = SharedGateway::new(gateway(&["a", "b"], "v1"));
        assert_eq!(on(&shared, "b").await, (200, "b v1".into()));

        // "b" is removed, "c" added: "b"'s draining connections keep v1's routes.
        let second = gateway(&["a", "c"], "v2");
        shared.store(second.clone());
        assert_eq!(on(&shared, "a").await, (200, "a v2".into()));
        assert_eq!(on(&shared, "c").await, (200, "c v2".into()));
        assert_eq!(on(&shared, "b").await, (200, "b v1".into()));
        assert_eq!(on(&shared, "never").await.0, 404);

        // Forgetting on behalf of a gateway not current changes nothing.
        let other = gateway(&["a"], "other");
        shared.forget_retired(&Arc::downgrade(&other.inner));
        assert_eq!(on(&shared, "b").await, (200, "b v1".into()));
        shared.forget_retired_after(Duration::from_millis(50));
        assert_eq!(on(&shared, "b").await, (200, "b v1".into()));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(on(&shared, "b").await.0, 404);
        assert_eq!(on(&shared, "a").await, (200, "a v2".into()));
        drop(second);

        // A failed reload puts the gateway back as it was, retired tables too.
        let before_failure = shared.store(gateway(&["c"], "v2b"));
        assert_eq!(on(&shared, "a").await, (200, "a v2".into()), "retired");
        shared.restore(before_failure);
        assert_eq!(on(&shared, "a").await, (200, "a v2".into()));
        assert_eq!(on(&shared, "b").await.0, 404, "nothing retired came back");

        // Only one generation is kept: "a" removed now, "b" long gone.
        shared.store(gateway(&["a", "c"], "v3"));
        shared.store(gateway(&["c"], "v4"));
        assert_eq!(on(&shared, "a").await, (200, "a v3".into()));
        assert_eq!(on(&shared, "b").await.0, 404);
        assert_eq!(on(&shared, "c").await, (200, "c v4".into()));
    }
}
