//! The pooled hyper-util client of one address: keep-alive reuse, HTTP/2
//! multiplexing, and a bounded response head.

use http::uri::Authority;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use scalws_core::Body;

use super::connector::Connector;
use super::options::{Protocol, UpstreamOptions};

/// The client type: one per address, shared by requests and health checks.
pub(crate) type PooledClient = Client<Connector, Body>;

/// hyper's HTTP/1 read buffer limit. A response head that does not fit fails
/// (502) and hyper closes that connection. hyper may read up to twice this
/// before it checks, so heads up to 32 KiB always pass and heads over 64 KiB
/// always fail. (hyper's strict `max_header_size` is not exposed by
/// hyper-util's legacy client.) It also caps one read of a response body.
const HTTP1_MAX_BUF: usize = 32 * 1024;

/// The HTTP/2 response header list limit.
const HTTP2_MAX_HEADER_LIST: u32 = 64 * 1024;

pub(crate) fn build(options: &UpstreamOptions, connector: Connector) -> PooledClient {
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
        // The pool sets Host itself (see `http1_pool_key`).
        Protocol::Http1 => {
            builder.set_host(false);
        }
        Protocol::Https => {}
    }
    builder.build(connector)
}

/// The URI authority of every request an `http1` pool sends. HTTP/1 goes out
/// in origin-form with its own Host header, and the connector dials its one
/// address whatever the URI names, so the authority is only hyper-util's pool
/// key, which it hashes byte by byte and compares on every checkout and
/// return. One client per address means one key: the shortest will do
/// (`127.0.0.1:8080` cost ~2,000 instructions a request in hashing).
pub(crate) fn http1_pool_key() -> Authority {
    Authority::from_static("u")
}
