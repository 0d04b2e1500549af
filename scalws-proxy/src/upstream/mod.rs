//! Upstream pools: a named set of addresses behind one pooled HTTP client.
//!
//! An [`UpstreamPool`] is built from [`UpstreamOptions`] and sends requests with
//! [`UpstreamPool::send`]. The life of a request:
//!
//! 1. **Choose an address** among the *available* ones: weight above 0, not
//!    down (active checks) and not ejected (passive), by the pool's [`Balance`]:
//!    - `RoundRobin`: smooth weighted round robin (3:1 gives a a b a), a
//!      schedule computed at build and an atomic cursor; turns of a left-out
//!      address are shared among the others by weight.
//!    - `LeastRequests`: fewest requests in flight per unit of weight; ties go
//!      round robin.
//!    - `RandomTwo`: two weighted random picks, the less loaded one wins.
//!    - `IpHash`, `HeaderHash`: rendezvous hashing of the client IP (from
//!      [`ConnInfo`](scalws_core::ConnInfo)) or of the header's value, weighted:
//!      a key stays on its address, and only the keys of an address that
//!      leaves move. Without the key (no `ConnInfo`, header missing) a request
//!      goes round robin.
//!
//!    A request never goes to an address that is down or ejected while another
//!    is available. **When every address is unavailable, the pool fails open**:
//!    it sends to the address whose last failure is the oldest, rather than
//!    refuse, since a check can be wrong and an answer is better than none.
//! 2. **Send** through the address's own client, which keeps connections
//!    alive (`max_idle_per_address`, `idle_timeout`). For `http1` it is
//!    ScalWS's own, HTTP/1.1 spoken by the proxy itself (`wire/`, on
//!    `httparse`; upgrades on hyper's `client::conn`): the connection is
//!    driven by the request's future until the head and by the response body
//!    until it ends, then goes back to an idle list of the worker thread (no
//!    channel, no task, no lock); `max_idle_per_address` is per worker thread
//!    there. A connection is reused only after an HTTP/1.1 answer read to its
//!    end without `Connection: close`, with the request sent whole.
//!    For `http2` and `https` it is hyper-util's pooled client, which
//!    multiplexes HTTP/2 and speaks TLS with rustls (SNI, custom CA, ALPN;
//!    verification on unless `verify: false`). The caller's Host header is
//!    kept. For `http1` the URI becomes the path and query (origin-form);
//!    for `http2` and `https` it becomes `{scheme}://{host}{path}` with the
//!    request's Host, so an HTTP/2 upstream gets `:authority` equal to Host
//!    (not the address); there connections are kept per address and host.
//! 3. **Wait for the response head** within `request_timeout`, which bounds
//!    connecting and every retry together; past it: [`UpstreamError::TimedOut`]
//!    (504), not retried. The body is not awaited: it streams to the caller.
//! 4. **Retry** a failure before any response byte (connect refused or timed
//!    out, TLS handshake failed, connection reset or closed before the head)
//!    up to `retries` times, on another available address when there is one,
//!    for idempotent methods (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) with an
//!    empty body only. A POST is never retried. An upstream that answers
//!    garbage or an oversized head (`http1`: 32 KiB and 100 fields; HTTP/1.1
//!    over `https`: up to 32 KiB always passes, over 64 KiB always fails;
//!    HTTP/2: a 64 KiB header list) is not retried; it is
//!    [`UpstreamError::Unavailable`] (502) and that connection is not reused.
//!    An idle keep-alive connection that the upstream closed (or sent bytes
//!    on) is found so before the request is written, and the request goes on
//!    another connection, whatever its method, without counting as a retry.
//!
//! ## Health
//!
//! - *Passive* ([`Passive`]): `failures` consecutive failures of requests
//!   before their response head (connect errors and timeouts, resets, garbage,
//!   `request_timeout`) eject an address for `cooldown`. After it, the address
//!   takes requests again; one more failure ejects it again at once, a success
//!   (any response head, whatever its status) ends the run.
//! - *Active* ([`HealthCheck`]): a task per pool sends `GET path` to each
//!   address every `interval` with `timeout`; 2xx and 3xx succeed.
//!   `unhealthy_after` failures in a row take the address down,
//!   `healthy_after` successes bring it back and end a passive ejection.
//!
//! ## Counters
//!
//! [`UpstreamPool::stats`] gives, per address, its weight, the requests *in
//! flight* (sent, response head not yet arrived nor failed: the response body
//! is not counted, since it streams after `send` returns), the request failures
//! since build (health checks are not counted) and the [`EndpointState`].
//! Counters are atomics: `send` takes no lock.

mod address;
pub(crate) mod balance;
mod client;
mod connector;
mod endpoint;
mod error;
mod forwarding;
mod health;
mod http1;
mod options;
mod pool;
mod rendezvous;
mod retry;
mod sent;
#[cfg(feature = "tls")]
mod tls;
mod wire;
/// Without the `tls` feature an `https` pool cannot be built.
#[cfg(not(feature = "tls"))]
mod tls {
    use super::options::TlsOptions;

    /// Uninhabited: no `https` pool exists without the `tls` feature.
    pub(crate) enum TlsSetup {}

    impl TlsSetup {
        pub(crate) fn new(_name: &str, _tls: &TlsOptions) -> Result<Self, String> {
            Err("protocol https needs TLS, which is not built in (scalws-proxy's \"tls\" feature is off)".into())
        }
    }

    #[cfg(test)]
    mod tests {
        use crate::upstream::{Protocol, UpstreamOptions, UpstreamPool};

        #[test]
        fn an_https_pool_is_refused_by_name() {
            let options = UpstreamOptions {
                addresses: vec![("127.0.0.1:9".parse().expect("address"), 1)],
                protocol: Protocol::Https,
                ..UpstreamOptions::default()
            };
            let error = UpstreamPool::new("secure", options).expect_err("no TLS in this build");
            assert!(error.to_string().contains("secure"), "{error}");
            assert!(error.to_string().contains("\"tls\" feature"), "{error}");
        }
    }
}

pub use address::UpstreamAddress;
pub use endpoint::{EndpointState, EndpointStats};
pub use error::{ConnectFailed, ConnectTimedOut, InvalidUpstream, UpstreamError};
pub(crate) use forwarding::Forwarding;
pub use options::{Balance, HealthCheck, Passive, Protocol, TlsOptions, UpstreamOptions};
pub use pool::UpstreamPool;

/// The upstream call as an embedder's layer sees it
/// ([`Proxy::upstream_layer`](crate::Proxy::upstream_layer)): the pool, or
/// the layers added before, boxed. Its errors are [`UpstreamError`]s (502,
/// 504) or the layers' own.
pub type UpstreamService = tower::util::BoxCloneSyncService<
    http::Request<scalws_core::Body>,
    http::Response<scalws_core::Body>,
    scalws_core::BoxError,
>;
