//! [`Pending`]: an entry in the making, from the request head to the end of
//! the response body.

use std::time::{Duration, Instant, SystemTime};

use http::{Request, Response, header};
#[cfg(feature = "cache")]
use scalws_cache::CacheStatus;
use scalws_core::{Body, ConnInfo};

use super::body::LoggedBody;
use super::entry::AccessLogEntry;
use super::handle::AccessLog;
use crate::upstream::UpstreamAddress;

/// The status noted for a request whose client went away before the
/// response head (nginx's convention).
const CLIENT_CLOSED: u16 = 499;

/// What is known of a request so far, and where its entry goes.
pub(super) struct Pending {
    log: AccessLog,
    entry: AccessLogEntry,
    started: Instant,
}

impl Pending {
    /// Notes the request's head: the copies of host and path and this box
    /// are the per-request cost of the log (the rest is reference counts).
    /// Boxed because the response future and then the body carry it, and
    /// the server keeps room for the largest request future in every
    /// connection: in `scalwsd`, whose service is an `Either` of the logged
    /// gateway and the plain one, that is every connection, logged or not.
    pub(super) fn start(log: &AccessLog, request: &Request<Body>) -> Box<Self> {
        let uri = request.uri();
        let host = match uri.authority() {
            Some(authority) => Some(authority.as_str().to_owned()),
            None => request
                .headers()
                .get(header::HOST)
                .map(|host| String::from_utf8_lossy(host.as_bytes()).into_owned()),
        };
        let path = uri
            .path_and_query()
            .map_or_else(|| uri.path(), |p| p.as_str());
        Box::new(Self {
            log: log.clone(),
            entry: AccessLogEntry {
                time: SystemTime::now(),
                conn: request.extensions().get::<ConnInfo>().cloned(),
                method: request.method().clone(),
                host,
                path: path.to_owned(),
                status: 0,
                bytes: 0,
                duration: Duration::ZERO,
                upstream: None,
                cache: None,
            },
            started: Instant::now(),
        })
    }

    /// Notes the response head and wraps its body, which logs the entry when
    /// it ends or is dropped.
    pub(super) fn respond(mut self: Box<Self>, response: Response<Body>) -> Response<Body> {
        let extensions = response.extensions();
        self.entry.status = response.status().as_u16();
        self.entry.upstream = extensions.get::<UpstreamAddress>().map(|a| a.0);
        #[cfg(feature = "cache")]
        {
            self.entry.cache = extensions.get::<CacheStatus>().map(|c| c.as_str());
        }
        response.map(|body| Body::new(LoggedBody::new(body, self)))
    }

    /// The client went away before the response head.
    #[cold]
    pub(super) fn abandoned(mut self: Box<Self>) {
        self.entry.status = CLIENT_CLOSED;
        self.finish(0);
    }

    /// The handler panicked: the server answers 500.
    #[cold]
    pub(super) fn panicked(mut self: Box<Self>) {
        self.entry.status = 500;
        self.finish(0);
    }

    /// Logs the entry with `bytes` sent, now.
    pub(super) fn finish(self: Box<Self>, bytes: u64) {
        let Self {
            log,
            mut entry,
            started,
        } = *self;
        entry.bytes = bytes;
        entry.duration = started.elapsed();
        log.log(entry);
    }
}
