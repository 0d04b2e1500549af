//! `paced`: an open-loop HTTP/1.1 load generator that holds a fixed rate,
//! for the latency of two servers compared at the same offered load
//! (`benches/multi.sh` with `RATE=` and `PACER=paced`).
//!
//! Request `i` is due at `start + i / rate`, whatever happened before it. A
//! due request goes out on the first connection without a request in flight
//! (at most one per connection, as a browser or wrk sends them); one that
//! finds every connection busy waits for the next free one. Its latency is
//! counted from when it was due, not from when it went out, so a server that
//! falls behind is charged for the requests queued behind a slow answer
//! (coordinated omission, as wrk2 and `oha --latency-correction` count it).
//!
//! Built for rates one load CPU cannot hold with oha: one thread, `mio`
//! readiness, a request prepared once, a response read with `httparse` and
//! framed by its `Content-Length`, every latency kept (4 bytes each) and
//! sorted at the end for exact percentiles. While a request is due within a
//! millisecond it polls without sleeping (epoll waits in whole
//! milliseconds), yielding the CPU between looks, so its load CPU looks busy
//! by design. `paced.sendLagP99` and `sendLagMax` say how long due requests
//! waited to be written (for a free connection, or for the generator) and
//! `paced.maxQueued` how many waited at once (at least 1: a request is
//! queued the moment it is due): against a server that keeps up at that rate
//! the lag stays near zero and the queue small, which is how to tell that the
//! generator held the rate. `paced.reconnects` counts connections replaced
//! (an idle one the server closed, or one that took no request); only a
//! request lost with a connection is an error.
//!
//! ```text
//! paced -c 64 -q 50000 -z 10 http://127.0.0.1:18080/respond
//! ```
//!
//! Prints one JSON object with oha's field names for what `benches/aggregate.py`
//! reads (`summary.total`, `statusCodeDistribution`, `latencyPercentiles` in
//! seconds, `errorDistribution`) and its own (`paced`). Plain `http://` and
//! responses with a `Content-Length` only (chunked answers are counted as
//! errors): the scenarios of `multi.sh` answer so.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

#[derive(Parser)]
#[command(
    about = "Open-loop HTTP/1.1 load at a fixed rate, latencies from when each request was due"
)]
struct Args {
    /// Connections.
    #[arg(short = 'c', default_value_t = 64)]
    connections: usize,
    /// Requests per second, in all.
    #[arg(short = 'q')]
    rate: f64,
    /// Seconds of load.
    #[arg(short = 'z', default_value_t = 10.0)]
    seconds: f64,
    /// Seconds to wait, after the last request was due, for the answers still running.
    #[arg(long, default_value_t = 2.0)]
    grace: f64,
    /// `http://HOST:PORT/PATH`.
    url: String,
}

/// The largest response head read.
const MAX_HEAD: usize = 16 * 1024;

struct Conn {
    stream: TcpStream,
    /// When the request in flight was due; `None` when idle.
    due: Option<Instant>,
    read: Vec<u8>,
    /// Once the head is read: the bytes the whole answer takes.
    answer_len: Option<usize>,
    status: u16,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("paced: {error}");
            ExitCode::FAILURE
        }
    }
}

fn target(url: &str) -> Result<(SocketAddr, String, String), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: only http:// URLs"))?;
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    let address = authority
        .to_socket_addrs()
        .map_err(|e| format!("{authority}: {e}"))?
        .next()
        .ok_or_else(|| format!("{authority}: no address"))?;
    Ok((address, authority.to_string(), path.to_string()))
}

/// A new connection, registered for readability. Blocking (up to 5 s): the
/// connections are made at the start, and again only when one is lost.
fn connect(poll: &Poll, address: SocketAddr, token: usize) -> io::Result<Conn> {
    let std_stream = std::net::TcpStream::connect_timeout(&address, Duration::from_secs(5))?;
    std_stream.set_nodelay(true)?;
    std_stream.set_nonblocking(true)?;
    let mut stream = TcpStream::from_std(std_stream);
    poll.registry()
        .register(&mut stream, Token(token), Interest::READABLE)?;
    Ok(Conn {
        stream,
        due: None,
        read: Vec::with_capacity(4096),
        answer_len: None,
        status: 0,
    })
}

/// Puts a new connection in `slot` in place of one that cannot be used,
/// counting it in `reconnects`; when none can be made the slot stays empty
/// and `open` counts one fewer. Whether there is a connection now.
fn replace(
    slot: &mut Option<Conn>,
    poll: &Poll,
    address: SocketAddr,
    token: usize,
    open: &mut usize,
    reconnects: &mut u64,
) -> bool {
    *reconnects += 1;
    *slot = connect(poll, address, token).ok();
    if slot.is_none() {
        *open -= 1;
    }
    slot.is_some()
}

/// What one readable event did to a connection.
enum Read1 {
    /// Nothing complete yet.
    More,
    /// An answer ended; the connection is free again.
    Answered,
    /// The connection is unusable (closed, an error, a response not read).
    Broken(String),
}

fn read_answer(conn: &mut Conn, buf: &mut [u8]) -> Read1 {
    loop {
        match conn.stream.read(buf) {
            Ok(0) => return Read1::Broken("connection closed by the server".into()),
            Ok(n) => {
                conn.read.extend_from_slice(&buf[..n]);
                // A read that did not fill the buffer emptied the socket: no
                // second read only to be told so (a new arrival is a new
                // readiness event).
                if n < buf.len() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Read1::Broken(format!("read: {e}")),
        }
    }
    if conn.answer_len.is_none() {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut response = httparse::Response::new(&mut headers);
        match response.parse(&conn.read) {
            Ok(httparse::Status::Complete(head)) => {
                let mut length = None;
                for header in response.headers.iter() {
                    if header.name.eq_ignore_ascii_case("content-length") {
                        length = std::str::from_utf8(header.value)
                            .ok()
                            .and_then(|v| v.trim().parse::<usize>().ok());
                    } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
                        return Read1::Broken("a chunked answer (not read by paced)".into());
                    }
                }
                let Some(length) = length else {
                    return Read1::Broken("an answer without Content-Length".into());
                };
                conn.status = response.code.unwrap_or(0);
                conn.answer_len = Some(head + length);
            }
            Ok(httparse::Status::Partial) if conn.read.len() > MAX_HEAD => {
                return Read1::Broken("a response head over 16 KiB".into());
            }
            Ok(httparse::Status::Partial) => return Read1::More,
            Err(e) => return Read1::Broken(format!("a bad response head: {e}")),
        }
    }
    match conn.answer_len {
        Some(len) if conn.read.len() >= len => {
            if conn.read.len() > len {
                return Read1::Broken("bytes after the answer".into());
            }
            conn.read.clear();
            conn.answer_len = None;
            Read1::Answered
        }
        _ => Read1::More,
    }
}

fn run(args: &Args) -> Result<String, String> {
    let positive = |v: f64| v.is_finite() && v > 0.0;
    if !positive(args.rate) || args.connections == 0 || !positive(args.seconds) {
        return Err("-q, -c and -z must be above 0".into());
    }
    let (address, authority, path) = target(&args.url)?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: paced\r\n\r\n")
        .into_bytes();
    let mut poll = Poll::new().map_err(|e| format!("poll: {e}"))?;
    let mut conns = Vec::with_capacity(args.connections);
    for token in 0..args.connections {
        conns.push(Some(
            connect(&poll, address, token).map_err(|e| format!("connect {address}: {e}"))?,
        ));
    }
    let mut idle: Vec<usize> = (0..args.connections).rev().collect();
    let interval = Duration::from_secs_f64(1.0 / args.rate);
    let total = (args.rate * args.seconds).round() as u64;
    let mut latencies: Vec<u32> = Vec::with_capacity(total as usize);
    // How long each request waited, once due, to be written.
    let mut lags: Vec<u32> = Vec::with_capacity(total as usize);
    let mut statuses: BTreeMap<u16, u64> = BTreeMap::new();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut queued: VecDeque<Instant> = VecDeque::new();
    let mut events = Events::with_capacity(1024);
    let mut released = 0u64;
    let mut max_queue = 0usize;
    let mut in_flight = 0usize;
    let mut reconnects = 0u64;
    let mut open = args.connections;
    let mut buf = vec![0u8; 64 * 1024];
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(args.seconds);
    let give_up = end + Duration::from_secs_f64(args.grace);

    loop {
        let now = Instant::now();
        // Every request due by now joins the queue.
        while released < total {
            let due = start + interval.mul_f64(released as f64);
            if due > now {
                break;
            }
            queued.push_back(due);
            released += 1;
        }
        max_queue = max_queue.max(queued.len());
        // Free connections take the oldest; a replaced one waits for the
        // next pass (a server that refuses every request must not hold
        // this loop).
        let mut replaced = Vec::new();
        while !queued.is_empty() {
            let Some(token) = idle.pop() else { break };
            let Some(conn) = conns[token].as_mut() else {
                continue;
            };
            match conn.stream.write(&request) {
                Ok(n) if n == request.len() => {
                    conn.due = queued.pop_front();
                    if let Some(due) = conn.due {
                        lags.push(micros_since(due, now));
                    }
                    in_flight += 1;
                }
                // A connection that takes no request (closed by the server
                // while idle, or a full send buffer): a new one in its
                // place; the request stays queued for the next free one.
                _ => {
                    let slot = &mut conns[token];
                    if replace(slot, &poll, address, token, &mut open, &mut reconnects) {
                        replaced.push(token);
                    }
                }
            }
        }
        idle.append(&mut replaced);
        if released >= total && queued.is_empty() && in_flight == 0 {
            break;
        }
        if now >= give_up {
            // Unanswered past the grace period: an error (the run is not
            // valid), not left out of the latencies.
            let cut = in_flight as u64 + queued.len() as u64;
            *errors
                .entry("not answered within the grace period".into())
                .or_default() += cut;
            break;
        }
        if open == 0 {
            return Err(format!("every connection failed: {errors:?}"));
        }
        // Without sleeping while a request is due within a millisecond
        // (epoll waits in whole milliseconds).
        let next_due = (released < total).then(|| start + interval.mul_f64(released as f64));
        let timeout = match next_due {
            _ if !queued.is_empty() && !idle.is_empty() => Duration::ZERO,
            Some(due) => due
                .saturating_duration_since(Instant::now())
                .saturating_sub(Duration::from_millis(1)),
            None => give_up.saturating_duration_since(Instant::now()),
        };
        poll.poll(&mut events, Some(timeout))
            .map_err(|e| format!("poll: {e}"))?;
        if events.is_empty() && timeout.is_zero() {
            // Nothing came: the CPU goes to whatever else runs on it (the
            // origin of proxy and cache-hit shares the load CPU) before the
            // next look, instead of spinning against it.
            std::thread::yield_now();
        }
        for event in events.iter() {
            let token = event.token().0;
            let Some(conn) = conns[token].as_mut() else {
                continue;
            };
            match read_answer(conn, &mut buf) {
                Read1::More => {}
                Read1::Answered => {
                    let done = Instant::now();
                    if let Some(due) = conn.due.take() {
                        in_flight -= 1;
                        latencies.push(micros_since(due, done));
                        *statuses.entry(conn.status).or_default() += 1;
                        idle.push(token);
                    } else {
                        // Idle, and so on the free list already.
                        *errors.entry("an answer to no request".into()).or_default() += 1;
                    }
                }
                Read1::Broken(why) => {
                    // A request in flight is lost with the connection and
                    // counted as this error; an idle connection's close
                    // (an idle timeout) loses nothing. A new connection
                    // takes its place, on the free list if the old one was
                    // not there already.
                    let busy = conn.due.is_some();
                    if busy {
                        in_flight -= 1;
                        *errors.entry(why).or_default() += 1;
                    }
                    let slot = &mut conns[token];
                    if replace(slot, &poll, address, token, &mut open, &mut reconnects) && busy {
                        idle.push(token);
                    }
                }
            }
        }
    }
    let wall = start.elapsed();
    latencies.sort_unstable();
    lags.sort_unstable();
    let percentile = |per_mille: usize| percentile_of(&latencies, per_mille);
    let answered = latencies.len() as u64;
    let json_f = |v: Option<f64>| v.map_or("null".to_string(), |v| format!("{v:.9}"));
    let statuses = statuses
        .iter()
        .map(|(code, n)| format!("\"{code}\": {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let errors = errors
        .iter()
        .map(|(why, n)| format!("{}: {n}", json_string(why)))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(format!(
        concat!(
            "{{\"summary\": {{\"total\": {total:.6}, \"requestsPerSec\": {rps:.1}}}, ",
            "\"statusCodeDistribution\": {{{statuses}}}, ",
            "\"latencyPercentiles\": {{\"p50\": {p50}, \"p90\": {p90}, \"p99\": {p99}, \"p99.9\": {p999}, \"p100\": {p100}}}, ",
            "\"errorDistribution\": {{{errors}}}, ",
            "\"paced\": {{\"offeredRate\": {rate}, \"connections\": {connections}, \"released\": {released}, ",
            "\"answered\": {answered}, \"maxQueued\": {max_queue}, \"reconnects\": {reconnects}, ",
            "\"sendLagP99\": {lag99}, \"sendLagMax\": {lag_max}}}}}"
        ),
        total = wall.as_secs_f64(),
        rps = answered as f64 / wall.as_secs_f64(),
        statuses = statuses,
        p50 = json_f(percentile(500)),
        p90 = json_f(percentile(900)),
        p99 = json_f(percentile(990)),
        p999 = json_f(percentile(999)),
        p100 = json_f(percentile(1000)),
        errors = errors,
        rate = args.rate,
        connections = args.connections,
        released = released,
        answered = answered,
        max_queue = max_queue,
        reconnects = reconnects,
        lag99 = json_f(percentile_of(&lags, 990)),
        lag_max = json_f(percentile_of(&lags, 1000)),
    ))
}

/// Microseconds from `from` to `to` (0 if `to` is earlier), saturated to `u32`.
fn micros_since(from: Instant, to: Instant) -> u32 {
    u32::try_from(to.saturating_duration_since(from).as_micros()).unwrap_or(u32::MAX)
}

/// The percentile `per_mille` / 10 (nearest rank) of sorted microseconds,
/// in seconds; in whole per mille, so that no floating-point rounding
/// moves the rank.
fn percentile_of(sorted: &[u32], per_mille: usize) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (per_mille * sorted.len()).div_ceil(1000);
    let at = rank.clamp(1, sorted.len()) - 1;
    Some(f64::from(sorted[at]) / 1e6)
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::io::{Read, Write};
    use std::net::TcpListener;

    use super::*;

    /// A server on loopback that answers every request with `answer`, a
    /// thread per connection; its address.
    fn server(answer: &'static [u8]) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    let mut buf = [0u8; 4096];
                    loop {
                        let Ok(n) = stream.read(&mut buf) else { return };
                        if n == 0 {
                            return;
                        }
                        got.extend_from_slice(&buf[..n]);
                        while let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                            got.drain(..end + 4);
                            if stream.write_all(answer).is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        address
    }

    fn load(address: SocketAddr, rate: f64, seconds: f64) -> String {
        run(&Args {
            connections: 4,
            rate,
            seconds,
            grace: 2.0,
            url: format!("http://{address}/x"),
        })
        .unwrap()
    }

    #[test]
    fn every_due_request_is_sent_once_and_its_answer_counted() {
        let address = server(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        let report = load(address, 2000.0, 0.5);
        assert!(
            report.contains("\"statusCodeDistribution\": {\"200\": 1000}"),
            "{report}"
        );
        assert!(
            report.contains("\"released\": 1000, \"answered\": 1000"),
            "{report}"
        );
        assert!(report.contains("\"errorDistribution\": {}"), "{report}");
    }

    #[test]
    fn answers_it_cannot_frame_are_errors_not_latencies() {
        let address = server(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
        let report = load(address, 200.0, 0.1);
        assert!(report.contains("\"answered\": 0"), "{report}");
        assert!(
            report.contains("a chunked answer (not read by paced)"),
            "{report}"
        );
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let sorted: Vec<u32> = (1..=1000).collect();
        assert_eq!(percentile_of(&sorted, 500), Some(500e-6));
        assert_eq!(percentile_of(&sorted, 990), Some(990e-6));
        assert_eq!(percentile_of(&sorted, 999), Some(999e-6));
        assert_eq!(percentile_of(&sorted, 1000), Some(1000e-6));
        assert_eq!(percentile_of(&[], 990), None);
        // Where 99.9 / 100 in floating point would be one rank too high.
        let many: Vec<u32> = (1..=500_000).collect();
        assert_eq!(percentile_of(&many, 999), Some(499_500e-6));
    }
}
