//! The client of one address: for `http1`, ours (the exchange spoken in the
//! request's own task, see `http1.rs` and `wire/`); for `http2` and `https`,
//! hyper-util's pooled client (HTTP/2 multiplexing, ALPN). Both keep
//! connections alive and bound the response head.

use futures_util::future::Either;
use http::request::Parts;
use http::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use scalws_core::{Body, BoxError};
use tokio::time::Instant;

use super::Forwarding;
use super::connector::Connector;
use super::http1::Http1Client;
use super::options::{Protocol, UpstreamOptions};

/// hyper-util's pooled client, for `http2` and `https`.
pub(crate) type PooledClient = Client<Connector, Body>;

/// One per address, shared by requests and health checks.
#[derive(Clone)]
pub(crate) enum UpstreamClient {
    Http1(Http1Client),
    /// Boxed: hyper-util's client is some 350 bytes, ours a pointer.
    Pooled(Box<PooledClient>),
}

impl UpstreamClient {
    /// Sends the request (`head`, lent, and `body`) and returns the response
    /// once its head arrived (the body streams), or [`DeadlinePassed`] if
    /// `deadline` passes first. For `http1` the URI must be origin-form and
    /// Host set. The future is the chosen client's own, not an async
    /// function around it: that would be one more copy of the body and of
    /// what the future keeps per request.
    ///
    /// `forwarding`'s fields go with the request: `http1` writes them into
    /// the head it sends, the pooled client gets them in the header map of
    /// its copy. hyper-util's client takes a request of its own: a copy of
    /// `head`, or `head` itself when `last` (no attempt can follow).
    #[inline]
    pub(crate) fn request<'a>(
        &'a self,
        head: &'a mut Parts,
        body: Body,
        deadline: Instant,
        forwarding: Option<&'a Forwarding>,
        last: bool,
    ) -> impl Future<Output = Result<Response<Body>, BoxError>> + Send + 'a {
        match self {
            Self::Http1(client) => Either::Left(client.request(head, body, deadline, forwarding)),
            Self::Pooled(client) => {
                let mut own = lent(head, last);
                if let Some(forwarding) = forwarding {
                    forwarding.apply(&mut own.headers);
                }
                Either::Right(pooled(client, Request::from_parts(own, body), deadline))
            }
        }
    }
}

/// The head hyper-util's client takes for one attempt: a copy of `head`, or
/// `head` itself (an empty head left in its place) when no attempt follows.
fn lent(head: &mut Parts, last: bool) -> Parts {
    if last {
        std::mem::replace(head, Request::new(()).into_parts().0)
    } else {
        head.clone()
    }
}

/// The request's deadline (`request_timeout`) passed before its response
/// head came.
#[derive(Debug, thiserror::Error)]
#[error("no response head within request_timeout")]
pub(crate) struct DeadlinePassed;

/// `future`'s output, or [`DeadlinePassed`] if `deadline` passes first.
pub(crate) async fn within<F: Future>(
    deadline: Instant,
    future: F,
) -> Result<F::Output, DeadlinePassed> {
    tokio::time::timeout_at(deadline, future)
        .await
        .map_err(|_elapsed| DeadlinePassed)
}

async fn pooled(
    client: &PooledClient,
    request: Request<Body>,
    deadline: Instant,
) -> Result<Response<Body>, BoxError> {
    match within(deadline, client.request(request)).await? {
        Ok(response) => Ok(response.map(|body| Body::incoming(body, u64::MAX))),
        Err(error) => Err(error.into()),
    }
}

/// The largest HTTP/1.1 response head. For `http1` upstreams (ours) it is
/// exact: a head (or a chunked body's trailers) over 32 KiB fails (502) and
/// its connection is closed. hyper-util's client (`https` upstreams that
/// speak HTTP/1.1) uses it as its read buffer limit, and may read up to twice
/// this before it checks, so there heads up to 32 KiB always pass and heads
/// over 64 KiB always fail (its strict `max_header_size` is not exposed).
const HTTP1_MAX_BUF: usize = 32 * 1024;

/// The HTTP/2 response header list limit.
const HTTP2_MAX_HEADER_LIST: u32 = 64 * 1024;

pub(crate) fn build(options: &UpstreamOptions, connector: Connector) -> UpstreamClient {
    if options.protocol == Protocol::Http1 {
        return UpstreamClient::Http1(Http1Client::new(
            connector,
            HTTP1_MAX_BUF,
            options.idle_timeout,
            options.max_idle_per_address,
        ));
    }
    let mut builder = Client::builder(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(options.idle_timeout)
        .pool_max_idle_per_host(options.max_idle_per_address)
        // A request on a reused connection that closed before the request was
        // written goes again on another connection (hyper-util's own retry).
        .retry_canceled_requests(true)
        .http1_max_buf_size(HTTP1_MAX_BUF)
        .http2_max_header_list_size(HTTP2_MAX_HEADER_LIST);
    match options.protocol {
        Protocol::Http2 => {
            builder.http2_only(true);
        }
        Protocol::Http1 | Protocol::Https => {}
    }
    UpstreamClient::Pooled(Box::new(builder.build(connector)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http::Method;
    use scalws_core::ConnInfo;

    use super::*;

    #[test]
    fn a_lent_head_keeps_the_request_and_its_conn_info() {
        let info = ConnInfo::new(
            "http".into(),
            scalws_core::Scheme::Http,
            "10.0.0.1:5000".parse().unwrap(),
            "127.0.0.1:80".parse().unwrap(),
            None,
        );
        let mut request = Request::delete("/x?y")
            .header("host", "a.test")
            .body(Body::empty())
            .unwrap();
        request.extensions_mut().insert(info);
        let (mut head, _) = request.into_parts();
        for last in [false, true] {
            let again = lent(&mut head, last);
            assert_eq!(again.method, Method::DELETE);
            assert_eq!(again.uri, "/x?y");
            assert_eq!(again.headers["host"], "a.test");
            assert_eq!(
                again.extensions.get::<ConnInfo>().map(ConnInfo::peer),
                Some("10.0.0.1:5000".parse().unwrap())
            );
        }
        // The last attempt took the head itself.
        assert!(head.headers.is_empty());
    }
}
