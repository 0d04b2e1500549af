//! The admin listener: `GET /metrics`, `GET /healthz`, `POST /reload`,
//! `POST /cache/purge`. Plain HTTP/1.1 on the address `admin:` names, apart
//! from the listeners that serve traffic. It has no authentication: bind it
//! to loopback (the documented default) or a private interface.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinHandle, JoinSet};

use crate::serve::Shared;

/// A reload asked for over HTTP: the serving loop answers on the channel.
pub(crate) type ReloadRequest = oneshot::Sender<Result<String, String>>;

/// Binds `address` and serves the admin endpoints until the task is aborted,
/// which also closes the admin connections still open (a keep-alive health
/// checker sees the drain at once, instead of `200` on an old connection).
pub(crate) async fn start(
    address: SocketAddr,
    shared: Arc<Shared>,
    reloads: mpsc::Sender<ReloadRequest>,
) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(address).await?;
    let local = listener.local_addr()?;
    tracing::info!(address = %local, "admin listening");
    let task = tokio::spawn(async move {
        // Owned by this task: aborting it drops the set, which aborts them.
        let mut connections = JoinSet::new();
        loop {
            while connections.try_join_next().is_some() {}
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!(%error, "admin: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let shared = shared.clone();
            let reloads = reloads.clone();
            connections.spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let shared = shared.clone();
                    let reloads = reloads.clone();
                    async move { Ok::<_, Infallible>(handle(request, &shared, &reloads).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .header_read_timeout(std::time::Duration::from_secs(10))
                    .timer(hyper_util::rt::TokioTimer::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok((local, task))
}

async fn handle(
    request: Request<Incoming>,
    shared: &Shared,
    reloads: &mpsc::Sender<ReloadRequest>,
) -> Response<Full<Bytes>> {
    let method = request.method();
    let allowed = match request.uri().path() {
        "/metrics" | "/healthz" => Method::GET,
        "/reload" | "/cache/purge" => Method::POST,
        _ => return text(StatusCode::NOT_FOUND, "not found\n"),
    };
    if *method != allowed && !(allowed == Method::GET && method == Method::HEAD) {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        if let Ok(allow) = header::HeaderValue::from_str(allowed.as_str()) {
            response.headers_mut().insert(header::ALLOW, allow);
        }
        return response;
    }
    match request.uri().path() {
        "/metrics" => match crate::metrics::encode(shared) {
            Ok(body) => {
                let mut response = Response::new(Full::new(Bytes::from(body)));
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    header::HeaderValue::from_static(
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    ),
                );
                response
            }
            Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics\n"),
        },
        "/healthz" => match &shared.kubernetes {
            None => text(StatusCode::OK, "ok\n"),
            // Serving either way (the last good configuration when out of
            // sync), so still 200: a liveness probe must not restart it.
            Some(state) if state.in_sync.load(std::sync::atomic::Ordering::Relaxed) => {
                text(StatusCode::OK, "ok\nkubernetes: in sync\n")
            }
            Some(_) => text(
                StatusCode::OK,
                "ok\nkubernetes: out of sync (reconnecting; serving the last good configuration)\n",
            ),
        },
        "/reload" => {
            let (reply, answer) = oneshot::channel();
            if reloads.send(reply).await.is_err() {
                return text(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n");
            }
            match answer.await {
                Ok(Ok(message)) => text(StatusCode::OK, format!("{message}\n")),
                Ok(Err(message)) => text(StatusCode::UNPROCESSABLE_ENTITY, format!("{message}\n")),
                Err(_) => text(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n"),
            }
        }
        _ => purge(request.uri().query().unwrap_or(""), shared),
    }
}

/// `POST /cache/purge?host=H[&path=/p | &prefix=/p][&application=A]`: every
/// cache (or application A's) forgets the URL (`path`, both schemes), the
/// paths under a prefix, or the whole host.
fn purge(query: &str, shared: &Shared) -> Response<Full<Bytes>> {
    let params = query_params(query);
    let Some(host) = params.get("host").filter(|h| !h.is_empty()) else {
        return text(
            StatusCode::BAD_REQUEST,
            "host is required: /cache/purge?host=H[&path=/p | &prefix=/p][&application=A]\n",
        );
    };
    if params.contains_key("path") && params.contains_key("prefix") {
        return text(StatusCode::BAD_REQUEST, "give path or prefix, not both\n");
    }
    let loaded = shared.loaded.load();
    let application = params.get("application");
    if let Some(app) = application
        && !loaded.carried.caches.contains_key(app.as_str())
    {
        return text(
            StatusCode::NOT_FOUND,
            format!("application \"{app}\" has no cache\n"),
        );
    }
    let mut purged = 0;
    for (app, (_, cache)) in &loaded.carried.caches {
        if application.is_some_and(|a| a != app) {
            continue;
        }
        purged += match (params.get("path"), params.get("prefix")) {
            (Some(path), _) => {
                cache.purge_url("http", host, path) + cache.purge_url("https", host, path)
            }
            (None, Some(prefix)) => cache.purge_prefix(host, prefix),
            (None, None) => cache.purge_host(host),
        };
    }
    text(StatusCode::OK, format!("purged {purged}\n"))
}

/// `a=1&b=x%20y` as a map (the last value of a repeated name wins; `+` is a space).
fn query_params(query: &str) -> HashMap<String, String> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &str| {
                percent_encoding::percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (decode(name), decode(value))
        })
        .collect()
}

fn text(status: StatusCode, body: impl Into<String>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.into())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::query_params;

    #[test]
    fn query_parameters_are_decoded() {
        let params = query_params("host=example.com&path=%2Fa%20b&prefix=&x+y=1+2");
        assert_eq!(params["host"], "example.com");
        assert_eq!(params["path"], "/a b");
        assert_eq!(params["prefix"], "");
        assert_eq!(params["x y"], "1 2");
    }
}
