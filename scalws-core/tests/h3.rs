//! HTTP/3 listeners over real QUIC sockets, with an h3-quinn client: streaming
//! both ways, limits, panics, HEAD, drain.
#![allow(clippy::unwrap_used, missing_docs)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use scalws_core::tls::{CertificateFiles, TlsCertificates};
use scalws_core::{Body, ConnInfo, Limits, ListenerProtocol, ListenerSpec, Server};
use test_support::tls::TestCa;
use tokio::sync::oneshot;

const BIG: usize = 2 * 1024 * 1024;

/// Lets `/drip` send its second frame.
static DRIP: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// `i`-th byte of the big response: a pattern that catches reordering.
fn pattern(i: usize) -> u8 {
    (i % 251) as u8
}

/// Answers by path: `/big` streams 2 MiB, `/echo` streams the request body
/// back, `/count` reads it whole, `/trailers` ends with trailers, `/panic`
/// panics, `/slow` sleeps; anything else names listener, scheme, version, SNI.
async fn app(request: Request<Body>) -> Result<Response<Body>, Infallible> {
    match request.uri().path() {
        "/panic" => panic!("boom"),
        "/slow" => {
            tokio::time::sleep(Duration::from_millis(800)).await;
            Ok(Response::new(Body::from("slow done")))
        }
        "/big" => {
            let chunks = (0..BIG / 65536).map(|n| {
                let chunk: Vec<u8> = (n * 65536..(n + 1) * 65536).map(pattern).collect();
                Ok::<_, Infallible>(Frame::data(Bytes::from(chunk)))
            });
            let body = StreamBody::new(futures_util::stream::iter(chunks));
            Ok(Response::new(Body::new(body)))
        }
        "/trailers" => {
            let mut trailers = HeaderMap::new();
            trailers.insert("x-checksum", "42".parse().unwrap());
            let frames = [
                Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"with trailers"))),
                Ok(Frame::trailers(trailers)),
            ];
            let body = StreamBody::new(futures_util::stream::iter(frames));
            Ok(Response::new(Body::new(body)))
        }
        "/echo" => Ok(Response::new(request.into_body())),
        "/first-frame" => {
            // Answers as soon as one frame arrives: the client is still sending.
            let first = request.into_body().frame().await;
            let len = first
                .and_then(|f| f.ok()?.into_data().ok())
                .map_or(0, |d| d.len());
            Ok(Response::new(Body::from(format!("first frame {len}"))))
        }
        "/drip" => {
            // "first", then "second" only once the test says so.
            let frames = futures_util::stream::unfold(0, |n| async move {
                let data = match n {
                    0 => "first",
                    1 => {
                        DRIP.notified().await;
                        "second"
                    }
                    _ => return None,
                };
                Some((Ok::<_, Infallible>(Frame::data(Bytes::from(data))), n + 1))
            });
            Ok(Response::new(Body::new(StreamBody::new(frames))))
        }
        "/count" => match request.into_body().collect().await {
            Ok(body) => Ok(Response::new(Body::from(body.to_bytes().len().to_string()))),
            Err(error) => {
                let status = scalws_core::error::status_for(error.as_ref());
                Ok(scalws_core::error::error_response(status))
            }
        },
        "/switch" => {
            // A 101 with no tunnel behind it (no `spawn_tunnel`).
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
            Ok(response)
        }
        "/no-content" => {
            let mut response = Response::new(Body::from("must not be sent"));
            *response.status_mut() = StatusCode::NO_CONTENT;
            Ok(response)
        }
        _ => {
            let conn = request.extensions().get::<ConnInfo>().unwrap();
            let text = format!(
                "{} {} {:?} {}",
                conn.listener(),
                conn.scheme().as_str(),
                request.version(),
                conn.sni().unwrap_or("-"),
            );
            Ok(Response::new(Body::from(text)))
        }
    }
}

// === certificates ===

/// A CA and a certificate for `localhost` signed by it, as PEM files.
struct Pki {
    ca: TestCa,
    files: CertificateFiles,
}

fn pki() -> Pki {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "scalws-h3-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = TestCa::new();
    let (cert, key) = ca.issue(&dir, "site", &["localhost"], false);
    Pki {
        ca,
        files: CertificateFiles { cert, key },
    }
}

fn client_tls(pki: &Pki, alpn: &[u8]) -> rustls::ClientConfig {
    pki.ca.client_config(&[alpn])
}

// === server ===

struct Running {
    addr: SocketAddr,
    pki: Pki,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<()>,
}

impl Running {
    fn shut_down(&mut self) {
        self.stop.take().unwrap().send(()).unwrap();
    }
}

fn start(limits: Limits) -> Running {
    let pki = pki();
    let certificates = TlsCertificates::load(std::slice::from_ref(&pki.files)).unwrap();
    let spec = ListenerSpec {
        name: "h3".into(),
        address: "127.0.0.1:0".parse().unwrap(),
        protocol: ListenerProtocol::Http3(certificates),
    };
    let server = Server::bind(&[spec], limits).unwrap();
    run(server, pki)
}

fn run(server: Server, pki: Pki) -> Running {
    let addr = server.local_addrs()[0].1;
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(server.serve(tower::service_fn(app), async {
        let _ = stopped.await;
    }));
    Running {
        addr,
        pki,
        stop: Some(stop),
        done,
    }
}

// === client ===

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    trailers: Option<HeaderMap>,
}

impl Reply {
    fn text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap()
    }
}

/// One HTTP/3 connection to the server.
struct H3Client {
    send_request: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    quic: quinn::Connection,
    _endpoint: quinn::Endpoint,
}

impl H3Client {
    async fn connect(server: &Running) -> Self {
        Self::try_connect(server).await.unwrap()
    }

    async fn try_connect(server: &Running) -> Result<Self, quinn::ConnectionError> {
        let tls = client_tls(&server.pki, b"h3");
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
        let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
        let quic = endpoint.connect(server.addr, "localhost").unwrap().await?;
        let (mut driver, send_request) = h3::client::new(h3_quinn::Connection::new(quic.clone()))
            .await
            .unwrap();
        tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
        Ok(Self {
            send_request,
            quic,
            _endpoint: endpoint,
        })
    }

    async fn get(&mut self, path: &str) -> Reply {
        self.send(request(Method::GET, path), None).await.unwrap()
    }

    /// Sends the request and `body` (in 16 KiB frames, from another task, so
    /// the response can stream back meanwhile), and reads the whole response.
    async fn send(
        &mut self,
        request: Request<()>,
        body: Option<Bytes>,
    ) -> Result<Reply, h3::error::StreamError> {
        let exchange = async {
            let stream = self.send_request.send_request(request).await?;
            let (mut send, mut recv) = stream.split();
            let sender = tokio::spawn(async move {
                let mut body = body.unwrap_or_default();
                while !body.is_empty() {
                    let chunk = body.split_to(body.len().min(16 * 1024));
                    send.send_data(chunk).await?;
                }
                send.finish().await
            });
            let head = recv.recv_response().await?;
            let mut data = BytesMut::new();
            while let Some(mut chunk) = recv.recv_data().await? {
                data.put(chunk.copy_to_bytes(chunk.remaining()));
            }
            let trailers = recv.recv_trailers().await?;
            drop(sender);
            Ok(Reply {
                status: head.status(),
                headers: head.headers().clone(),
                body: data.freeze(),
                trailers,
            })
        };
        tokio::time::timeout(Duration::from_secs(10), exchange)
            .await
            .expect("HTTP/3 exchange timed out")
    }
}

fn request(method: Method, path: &str) -> Request<()> {
    Request::builder()
        .method(method)
        .uri(format!("https://localhost{path}"))
        .body(())
        .unwrap()
}

fn patterned(len: usize) -> Bytes {
    (0..len).map(|i| (i * 7 % 256) as u8).collect()
}

// === tests ===

#[tokio::test]
async fn get_answers_with_conn_info_over_h3() {
    let server = start(Limits::default());
    let mut client = H3Client::connect(&server).await;
    let reply = client.get("/").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.text(), "h3 https HTTP/3.0 localhost");
}

#[tokio::test]
async fn a_large_response_streams_back_whole() {
    let server = start(Limits::default());
    let mut client = H3Client::connect(&server).await;
    let reply = client.get("/big").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body.len(), BIG);
    assert!(reply.body.iter().enumerate().all(|(i, &b)| b == pattern(i)));
}

#[tokio::test]
async fn response_trailers_arrive() {
    let server = start(Limits::default());
    let mut client = H3Client::connect(&server).await;
    let reply = client.get("/trailers").await;
    assert_eq!(reply.text(), "with trailers");
    let trailers = reply.trailers.unwrap();
    assert_eq!(trailers["x-checksum"], "42");
}

#[tokio::test]
async fn a_request_body_streams_up_and_back() {
    let server = start(Limits::default());
    let mut client = H3Client::connect(&server).await;
    let body = patterned(1024 * 1024);
    let echoed = client
        .send(request(Method::POST, "/echo"), Some(body.clone()))
        .await
        .unwrap();
    assert_eq!(echoed.status, StatusCode::OK);
    assert_eq!(echoed.body.len(), body.len());
    assert!(echoed.body == body);

    let mut declared = request(Method::POST, "/count");
    declared
        .headers_mut()
        .insert(http::header::CONTENT_LENGTH, body.len().into());
    let counted = client.send(declared, Some(body)).await.unwrap();
    assert_eq!(counted.text(), "1048576");
}

#[tokio::test]
async fn bodies_over_max_request_body_get_413() {
    let server = start(Limits {
        max_request_body: 64 * 1024,
        ..Limits::default()
    });
    let mut client = H3Client::connect(&server).await;

    // Declared: refused before the service runs, without reading a byte.
    let mut declared = request(Method::POST, "/count");
    declared
        .headers_mut()
        .insert(http::header::CONTENT_LENGTH, (1024 * 1024).into());
    let reply = client.send(declared, None).await.unwrap();
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(reply.text(), "413 Payload Too Large\n");

    // Streamed without a length: the body errors once past the limit.
    let reply = client
        .send(request(Method::POST, "/count"), Some(patterned(256 * 1024)))
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);

    // Under the limit passes, on the same connection.
    let reply = client
        .send(request(Method::POST, "/count"), Some(patterned(60 * 1024)))
        .await
        .unwrap();
    assert_eq!(reply.text(), "61440");
}

#[tokio::test]
async fn head_and_204_have_no_body() {
    let server = start(Limits::default());
    let mut client = H3Client::connect(&server).await;
    let get = client.get("/").await;
    let head = client.send(request(Method::HEAD, "/"), None).await.unwrap();
    assert_eq!(head.status, StatusCode::OK);
    assert!(head.body.is_empty());
    assert_eq!(
        head.headers[http::header::CONTENT_LENGTH],
        get.body.len().to_string()
    );
    let no_content = client.get("/no-content").await;
    assert_eq!(no_content.status, StatusCode::NO_CONTENT);
    assert!(no_content.body.is_empty());
}

#[tokio::test]
async fn a_panicking_handler_gets_500_and_the_connection_goes_on() {
    let server = start(Limits::default());
    let mut client = H3Client::connect(&server).await;
    let reply = client.get("/panic").await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(reply.text(), "500 Internal Server Error\n");
    let reply = client.get("/").await;
    assert_eq!(reply.status, StatusCode::OK);
}

/// An extended CONNECT (RFC 9220) that the service does not tunnel: a bare
/// `101` (nothing handed to `spawn_tunnel`) and an ordinary `200` both open
/// nothing, and a client takes any 2xx for an open tunnel: 502. A
/// `:protocol` other than `websocket` is 501 and never reaches the service.
#[tokio::test]
async fn an_extended_connect_nobody_tunnels_is_502() {
    let server = start(Limits::default());
    let mut client = H3Client::connect(&server).await;
    let connect = |path: &str, protocol: h3::ext::Protocol| {
        Request::connect(format!("https://localhost{path}"))
            .extension(protocol)
            .body(())
            .unwrap()
    };
    for path in ["/switch", "/"] {
        let reply = client
            .send(connect(path, h3::ext::Protocol::WEBSOCKET), None)
            .await
            .unwrap();
        assert_eq!(reply.status, StatusCode::BAD_GATEWAY, "{path}");
    }
    // The 200's own body is not passed on as the 502's.
    let reply = client
        .send(connect("/", h3::ext::Protocol::WEBSOCKET), None)
        .await
        .unwrap();
    assert!(reply.body.is_empty());
    let reply = client
        .send(connect("/", h3::ext::Protocol::CONNECT_UDP), None)
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::NOT_IMPLEMENTED);
    // The connection still serves.
    assert_eq!(client.get("/").await.status, StatusCode::OK);
}

#[tokio::test]
async fn too_many_headers_get_431() {
    let server = start(Limits {
        max_headers: 5,
        ..Limits::default()
    });
    let mut client = H3Client::connect(&server).await;
    let mut crowded = request(Method::GET, "/");
    for n in 0..10 {
        crowded.headers_mut().insert(
            format!("x-h{n}").parse::<http::HeaderName>().unwrap(),
            "1".parse().unwrap(),
        );
    }
    let reply = client.send(crowded, None).await.unwrap();
    assert_eq!(reply.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
}

#[tokio::test]
async fn drain_lets_a_request_in_flight_finish_and_refuses_new_connections() {
    let mut server = start(Limits {
        drain_timeout: Duration::from_secs(5),
        ..Limits::default()
    });
    let mut client = H3Client::connect(&server).await;
    let slow = tokio::spawn(async move { client.get("/slow").await.body });
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.shut_down();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let refused = tokio::time::timeout(Duration::from_secs(2), H3Client::try_connect(&server))
        .await
        .expect("a new connection during drain should be refused at once");
    assert!(matches!(
        refused.err(),
        Some(quinn::ConnectionError::ConnectionClosed(_))
    ));
    assert_eq!(slow.await.unwrap(), "slow done");
    tokio::time::timeout(Duration::from_secs(3), &mut server.done)
        .await
        .expect("server did not finish draining")
        .unwrap();
}

#[tokio::test]
async fn drain_timeout_cuts_a_request_that_runs_too_long() {
    let mut server = start(Limits {
        drain_timeout: Duration::from_millis(100),
        ..Limits::default()
    });
    let mut client = H3Client::connect(&server).await;
    let slow = tokio::spawn(async move {
        client
            .send(request(Method::GET, "/slow"), None)
            .await
            .map(|reply| reply.body)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.shut_down();
    tokio::time::timeout(Duration::from_secs(3), &mut server.done)
        .await
        .expect("server did not stop after the drain timeout")
        .unwrap();
    // Cut off: an error, never a response that looks whole.
    assert!(slow.await.unwrap().is_err());
}

#[tokio::test]
async fn the_request_body_reaches_the_service_while_the_client_sends() {
    let server = start(Limits::default());
    let mut client = H3Client::connect(&server).await;
    let stream = client
        .send_request
        .send_request(request(Method::POST, "/first-frame"))
        .await
        .unwrap();
    let (mut send, mut recv) = stream.split();
    send.send_data(patterned(16 * 1024)).await.unwrap();
    // The request is not finished: a buffering server would never answer.
    let response = tokio::time::timeout(Duration::from_secs(5), recv.recv_response())
        .await
        .expect("the service did not see the first frame")
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut chunk = recv.recv_data().await.unwrap().unwrap();
    let text = chunk.copy_to_bytes(chunk.remaining());
    assert!(text.starts_with(b"first frame "), "{text:?}");
}

#[tokio::test]
async fn the_response_body_reaches_the_client_as_it_is_made() {
    let server = start(Limits::default());
    let mut client = H3Client::connect(&server).await;
    let stream = client
        .send_request
        .send_request(request(Method::GET, "/drip"))
        .await
        .unwrap();
    let (mut send, mut recv) = stream.split();
    send.finish().await.unwrap();
    let response = recv.recv_response().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut read = async || {
        let mut chunk = tokio::time::timeout(Duration::from_secs(5), recv.recv_data())
            .await
            .expect("no data")
            .unwrap()
            .unwrap();
        chunk.copy_to_bytes(chunk.remaining())
    };
    // The second frame waits for this test: the first must arrive on its own.
    assert_eq!(read().await, "first");
    DRIP.notify_one();
    assert_eq!(read().await, "second");
}

#[tokio::test]
async fn h2_max_concurrent_streams_caps_streams_per_connection() {
    let server = start(Limits {
        h2_max_concurrent_streams: std::num::NonZeroU32::new(2).unwrap(),
        ..Limits::default()
    });
    let client = H3Client::connect(&server).await;
    let started = std::time::Instant::now();
    let slow = (0..3).map(|_| {
        let mut send_request = client.send_request.clone();
        tokio::spawn(async move {
            let mut stream = send_request
                .send_request(request(Method::GET, "/slow"))
                .await
                .unwrap();
            stream.finish().await.unwrap();
            let response = stream.recv_response().await.unwrap();
            while stream.recv_data().await.unwrap().is_some() {}
            response.status()
        })
    });
    for status in futures_util::future::join_all(slow).await {
        assert_eq!(status.unwrap(), StatusCode::OK);
    }
    // Two at a time: the third waits for a stream, so two rounds of 800 ms.
    assert!(started.elapsed() >= Duration::from_millis(1500));
}

#[tokio::test]
async fn https_on_the_same_port_advertises_h3() {
    let pki = pki();
    let certificates = TlsCertificates::load(std::slice::from_ref(&pki.files)).unwrap();
    // A port free on both TCP and UDP; another process may take it in between.
    let server = (0..20)
        .find_map(|_| {
            let port = std::net::UdpSocket::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let address: SocketAddr = ([127, 0, 0, 1], port).into();
            let specs = [
                ListenerSpec {
                    name: "h3".into(),
                    address,
                    protocol: ListenerProtocol::Http3(certificates.clone()),
                },
                ListenerSpec {
                    name: "https".into(),
                    address,
                    protocol: ListenerProtocol::Https(certificates.clone()),
                },
            ];
            Server::bind(&specs, Limits::default()).ok()
        })
        .unwrap();
    let server = run(server, pki);
    let port = server.addr.port();

    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let connector =
        tokio_rustls::TlsConnector::from(Arc::new(client_tls(&server.pki, b"http/1.1")));
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let tls = connector.connect(name, tcp).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(connection);
    let https = sender
        .send_request(
            Request::get("/")
                .header(http::header::HOST, "localhost")
                .body(http_body_util::Empty::<Bytes>::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        https.headers()[http::header::ALT_SVC],
        format!("h3=\":{port}\"; ma=86400")
    );
    let text = https.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(text, "https https HTTP/1.1 localhost");

    let mut h3 = H3Client::connect(&server).await;
    assert_eq!(h3.get("/").await.text(), "h3 https HTTP/3.0 localhost");
}

#[tokio::test]
async fn keepalive_timeout_closes_idle_connections_but_not_slow_requests() {
    let server = start(Limits {
        keepalive_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    let mut client = H3Client::connect(&server).await;
    // 800 ms without a packet from the handler: longer than the idle timeout.
    assert_eq!(client.get("/slow").await.text(), "slow done");
    let started = std::time::Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(3), client.quic.closed())
        .await
        .expect("an idle connection should be closed");
    assert!(started.elapsed() >= Duration::from_millis(250));
    // Closed by the server, politely: H3_NO_ERROR.
    let quinn::ConnectionError::ApplicationClosed(close) = closed else {
        panic!("unexpected close: {closed:?}");
    };
    assert_eq!(close.error_code, quinn::VarInt::from_u32(0x100));
}

#[tokio::test]
async fn an_oversized_head_is_refused() {
    let server = start(Limits {
        max_header_bytes: 1024,
        ..Limits::default()
    });
    let mut client = H3Client::connect(&server).await;
    // The first answer brings the server's SETTINGS to the client.
    assert_eq!(client.get("/").await.status, StatusCode::OK);
    let mut big = request(Method::GET, "/");
    big.headers_mut()
        .insert("x-big", "a".repeat(4096).parse().unwrap());
    match client.send(big, None).await {
        // The server's SETTINGS told the client not to send it at all...
        Err(h3::error::StreamError::HeaderTooBig { max_size, .. }) => assert_eq!(max_size, 1024),
        // ...or it was sent and refused.
        Ok(reply) => assert_eq!(reply.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE),
        Err(error) => panic!("unexpected error: {error}"),
    }
}
