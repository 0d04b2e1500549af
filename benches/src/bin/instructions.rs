//! The single-process workload that `benches/instructions.sh` runs under
//! valgrind's callgrind to count instructions per request.
//!
//! ```text
//! instructions SCENARIO COUNT
//! ```
//!
//! One thread does everything, so the count is repeatable: a current-thread
//! runtime runs the real `scalws_core::Server` with a gateway loaded from
//! YAML by `scalwsd::config::load`, an origin (a small hyper server) for the
//! `proxy` and `cache-hit` scenarios, and a client that sends `COUNT`
//! HTTP/1.1 requests one after another on one keep-alive connection (after
//! the same warm-up requests whatever `COUNT` is). The script runs it with two
//! counts and divides the difference in instructions by the difference in
//! requests, so start-up and shutdown cancel out.
//!
//! Every response must be `200` with the expected body, or the program exits
//! 1: a count of error responses would be a count of the wrong thing.
//!
//! How cost grows with the configuration (`benches/scaling.sh`): with
//! `HOSTS=N` in the environment the file has N - 1 more applications, each
//! with a domain of its own (`h1.test`, ...), and with `ROUTES=N` the
//! `bench` application has N more routes (`/r0/...`, listed before the
//! measured ones). The requests are the same.
//!
//! The worker model (`RUNTIME=multi-thread`): the same workload on tokio's
//! multi-thread scheduler with one worker (what `scalwsd` runs with two or
//! more workers) instead of the current-thread runtime (what it runs with
//! one). Everything is spawned onto the worker, so the thread that waits
//! for it does nothing but wait.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The allocator `scalwsd` uses, so the counts are those of the binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Requests sent before the measured ones: connections made, caches filled.
const WARMUP: usize = 20;

/// The scenarios, with the path each requests and the body it expects.
const SCENARIOS: [(&str, &str, &str); 5] = [
    ("respond", "/respond", "ok"),
    ("static-small", "/static/small.html", SMALL_FILE),
    ("proxy", "/proxy", "ok"),
    ("cache-hit", "/cache", "ok"),
    // `respond` on a gateway built in code whose route has an embedder's
    // layer (`Route::layer`, a pass-through): what the layer point costs.
    ("route-layer", "/layered", "ok"),
];

/// The static file of the `static-small` scenario (written to a temp dir).
const SMALL_FILE: &str =
    "<!doctype html><title>small</title><p>A small static file for the benchmark.</p>\n";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let usage = || {
        eprintln!(
            "usage: instructions SCENARIO COUNT  (SCENARIO: respond, static-small, proxy, cache-hit, route-layer)"
        );
        ExitCode::from(2)
    };
    let [_, scenario, count] = args.as_slice() else {
        return usage();
    };
    let Some(&(_, path, body)) = SCENARIOS.iter().find(|(name, ..)| name == scenario) else {
        return usage();
    };
    let Ok(count) = count.parse::<usize>() else {
        return usage();
    };
    let multi_thread = match std::env::var("RUNTIME").as_deref() {
        Err(_) | Ok("current-thread") => false,
        Ok("multi-thread") => true,
        Ok(other) => {
            eprintln!("instructions: RUNTIME is current-thread or multi-thread, not {other:?}");
            return ExitCode::from(2);
        }
    };
    let runtime = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("instructions: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = if multi_thread {
        runtime.block_on(async {
            tokio::spawn(run(path, body, count))
                .await
                .unwrap_or_else(|error| Err(format!("the workload's task failed: {error}")))
        })
    } else {
        runtime.block_on(run(path, body, count))
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("instructions: {scenario}: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(path: &str, body: &str, count: usize) -> Result<(), String> {
    let origin = start_origin().await?;
    let root = std::env::temp_dir().join(format!("scalws-instructions-{}", std::process::id()));
    std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    let result = async {
        std::fs::write(root.join("small.html"), SMALL_FILE)
            .map_err(|e| format!("{}: {e}", root.display()))?;
        let yaml = config(origin, &root);
        let config = scalwsd::config::load("instructions.yaml", &yaml, Path::new("."))
            .map_err(|errors| errors.to_string())?;
        let server = scalws_core::server::Server::bind(&config.listeners, config.limits)
            .map_err(|e| e.to_string())?;
        let address = server
            .local_addrs()
            .first()
            .map(|(_, address)| *address)
            .ok_or("no listener")?;
        let gateway = if path == "/layered" {
            layered_gateway().map_err(|e| e.to_string())?
        } else {
            config.gateway
        };
        tokio::spawn(server.serve(gateway, std::future::pending::<()>()));
        let host = if path == "/cache" {
            "cached.test"
        } else {
            "bench.test"
        };
        let request =
            format!("GET {path} HTTP/1.1\r\nhost: {host}\r\nuser-agent: instructions\r\n\r\n");
        let mut client = Client::connect(address).await?;
        for _ in 0..WARMUP + count {
            client
                .get(request.as_bytes(), body.as_bytes())
                .await
                .map_err(|e| format!("{path}: {e}"))?;
        }
        Ok(())
    }
    .await;
    let _ = std::fs::remove_dir_all(&root);
    result
}

/// The `route-layer` gateway: the `respond` route, built in code, with a
/// pass-through layer of the embedder's around it.
fn layered_gateway() -> Result<scalws_proxy::Gateway, Box<dyn std::error::Error>> {
    use scalws_proxy::{Action, Application, Gateway, HttpService, Respond, Route};
    use tower::ServiceExt;
    let respond = Respond::new(http::StatusCode::OK, "ok").header(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    let pass_through = tower::layer::layer_fn(|inner: HttpService| {
        tower::service_fn(move |request| inner.clone().oneshot(request))
    });
    let route = Route::new(Action::Respond(respond)).layer(pass_through);
    let bench = Application::builder("bench")
        .domain("bench.test")?
        .route(scalws_router::RouteSpec::prefix("/layered", route))?;
    Ok(Gateway::builder()
        .listener("http")
        .application(bench)
        .build()?)
}

/// `NAME` from the environment as a count, `default` when unset.
fn count_from_env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn config(origin: SocketAddr, root: &Path) -> String {
    use std::fmt::Write;
    let mut more_routes = String::new();
    for n in 0..count_from_env("ROUTES", 0) {
        let _ = writeln!(
            more_routes,
            "      - {{ path: /r{n}/page, respond: {{ status: 200, body: r{n} }} }}"
        );
    }
    let mut more_hosts = String::new();
    for n in 1..count_from_env("HOSTS", 1) {
        let _ = writeln!(
            more_hosts,
            "  - {{ name: h{n}, domains: [h{n}.test], routes: [{{ path: /, respond: {{ status: 200, body: h{n} }} }}] }}"
        );
    }
    format!(
        r#"
listeners: [{{ name: http, address: "127.0.0.1:0" }}]
upstreams:
  origin: {{ addresses: ["{origin}"], max_idle_per_address: 16 }}
applications:
  - name: bench
    domains: ["bench.test"]
    routes:
{more_routes}      - {{ path: /respond, respond: {{ status: 200, body: ok, headers: {{ content-type: text/plain }} }} }}
      - {{ path: /static, static: {{ root: "{root}" }} }}
      - {{ path: /proxy, proxy: origin }}
  - name: cached
    domains: ["cached.test"]
    cache: {{ max_size: 64MiB, max_object: 1MiB }}
    routes:
      - {{ path: /cache, proxy: origin }}
{more_hosts}"#,
        root = root.display()
    )
}

/// The origin: `200 ok`, cacheable for an hour, over HTTP/1.1 keep-alive,
/// saying `Connection: keep-alive` as nginx (the origin of `benches/multi.sh`)
/// and most origins do: the proxy removes that hop-by-hop line from every
/// answer, and the count includes it.
async fn start_origin() -> Result<SocketAddr, String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("origin: {e}"))?;
    let address = listener.local_addr().map_err(|e| format!("origin: {e}"))?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(|_request: Request<hyper::body::Incoming>| async {
                        let mut response = Response::new(Full::new(Bytes::from_static(b"ok")));
                        response.headers_mut().insert(
                            http::header::CACHE_CONTROL,
                            http::HeaderValue::from_static("max-age=3600"),
                        );
                        response.headers_mut().insert(
                            http::header::CONNECTION,
                            http::HeaderValue::from_static("keep-alive"),
                        );
                        Ok::<_, Infallible>(response)
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(address)
}

/// A minimal HTTP/1.1 client: one keep-alive connection, one request at a
/// time, responses framed by `Content-Length`.
struct Client {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl Client {
    async fn connect(address: SocketAddr) -> Result<Self, String> {
        let stream = TcpStream::connect(address)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(Self {
            stream,
            buffer: Vec::with_capacity(4096),
        })
    }

    /// Sends `request` and checks that the answer is `200` with `expected` as its body.
    async fn get(&mut self, request: &[u8], expected: &[u8]) -> Result<(), String> {
        self.stream
            .write_all(request)
            .await
            .map_err(|e| format!("write: {e}"))?;
        self.buffer.clear();
        let (head_end, length) = loop {
            if let Some(end) = find(&self.buffer, b"\r\n\r\n") {
                break (end + 4, self.check_head(end)?);
            }
            self.read_more().await?;
        };
        while self.buffer.len() < head_end + length {
            self.read_more().await?;
        }
        if &self.buffer[head_end..] != expected {
            return Err("unexpected body".into());
        }
        Ok(())
    }

    /// The status must be 200; returns the `Content-Length`.
    fn check_head(&self, end: usize) -> Result<usize, String> {
        let head = std::str::from_utf8(&self.buffer[..end]).map_err(|e| e.to_string())?;
        if !head.starts_with("HTTP/1.1 200 ") {
            return Err(format!("expected 200, got {:?}", head.lines().next()));
        }
        head.split("\r\n")
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())?
            })
            .ok_or_else(|| "no content-length".into())
    }

    /// Reads into the buffer's spare capacity (never zeroed, unlike a fresh array).
    async fn read_more(&mut self) -> Result<(), String> {
        self.buffer.reserve(4096);
        let n = self
            .stream
            .read_buf(&mut self.buffer)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("the server closed the connection".into());
        }
        Ok(())
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
