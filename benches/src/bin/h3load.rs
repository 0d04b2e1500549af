//! `h3load`: a small HTTP/3 load generator, because Debian's h2load and curl
//! here have no HTTP/3.
//!
//! ```text
//! h3load --addr 127.0.0.1:18443 --host bench.test --connections 4 --streams 16 --duration 10
//! ```
//!
//! Opens `connections` QUIC connections, runs `streams` request loops on each
//! for `duration` seconds (GET `path`, body read to the end), and prints
//! requests/s, the p50/p99 latency and the count of failed requests. Server
//! certificates are not verified: this is a load tool for loopback.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Buf;
use clap::Parser;

#[derive(Debug, Parser)]
#[command(about = "HTTP/3 load generator for loopback benchmarks")]
struct Args {
    /// Server UDP address.
    #[arg(long)]
    addr: SocketAddr,
    /// Host (SNI and :authority).
    #[arg(long, default_value = "localhost")]
    host: String,
    /// Request path.
    #[arg(long, default_value = "/")]
    path: String,
    /// QUIC connections.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Concurrent request loops per connection.
    #[arg(long, default_value_t = 16)]
    streams: usize,
    /// Seconds of load.
    #[arg(long, default_value_t = 10)]
    duration: u64,
}

#[derive(Default)]
struct Tally {
    done: u64,
    failed: u64,
    latencies_us: Vec<u32>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])?
    .dangerous()
    .with_custom_certificate_verifier(Arc::new(NoVerify))
    .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls)?;
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse()?)?;
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));

    let deadline = Instant::now() + Duration::from_secs(args.duration);
    let uri: http::Uri = format!("https://{}{}", args.host, args.path).parse()?;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..args.connections {
        let connection = endpoint.connect(args.addr, &args.host)?.await?;
        let (mut driver, sender) = h3::client::new(h3_quinn::Connection::new(connection)).await?;
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        for _ in 0..args.streams {
            let mut sender = sender.clone();
            let uri = uri.clone();
            tasks.spawn(async move {
                let mut tally = Tally::default();
                while Instant::now() < deadline {
                    let started = Instant::now();
                    let ok = async {
                        let request = http::Request::get(uri.clone()).body(())?;
                        let mut stream = sender.send_request(request).await?;
                        stream.finish().await?;
                        let response = stream.recv_response().await?;
                        while let Some(mut chunk) = stream.recv_data().await? {
                            chunk.advance(chunk.remaining());
                        }
                        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(
                            response.status().is_success(),
                        )
                    }
                    .await;
                    match ok {
                        Ok(true) => {
                            tally.done += 1;
                            let us = started.elapsed().as_micros();
                            tally
                                .latencies_us
                                .push(u32::try_from(us).unwrap_or(u32::MAX));
                        }
                        _ => tally.failed += 1,
                    }
                }
                tally
            });
        }
    }
    let started = Instant::now();
    let mut all = Tally::default();
    while let Some(result) = tasks.join_next().await {
        let tally = result?;
        all.done += tally.done;
        all.failed += tally.failed;
        all.latencies_us.extend(tally.latencies_us);
    }
    let elapsed = started.elapsed().as_secs_f64().max(f64::EPSILON);
    all.latencies_us.sort_unstable();
    let pct = |p: f64| -> u32 {
        if all.latencies_us.is_empty() {
            return 0;
        }
        let i = ((all.latencies_us.len() as f64 - 1.0) * p).round() as usize;
        all.latencies_us[i]
    };
    println!(
        "requests {}  failed {}  req/s {:.0}  p50 {} us  p99 {} us",
        all.done,
        all.failed,
        all.done as f64 / elapsed,
        pct(0.50),
        pct(0.99)
    );
    endpoint.close(0u32.into(), b"done");
    Ok(())
}

/// Accepts any server certificate: loopback load only.
#[derive(Debug)]
struct NoVerify;

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
