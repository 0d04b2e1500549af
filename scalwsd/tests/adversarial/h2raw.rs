//! HTTP/2 built by hand (RFC 9113 frames, RFC 7541 literals): what an
//! attacker sends when no well-behaved client library will.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub(crate) const DATA: u8 = 0;
pub(crate) const HEADERS: u8 = 1;
pub(crate) const RST_STREAM: u8 = 3;
pub(crate) const SETTINGS: u8 = 4;
pub(crate) const PING: u8 = 6;
pub(crate) const GOAWAY: u8 = 7;
pub(crate) const WINDOW_UPDATE: u8 = 8;
pub(crate) const CONTINUATION: u8 = 9;

pub(crate) const END_STREAM: u8 = 0x1;
pub(crate) const ACK: u8 = 0x1;
pub(crate) const END_HEADERS: u8 = 0x4;

pub(crate) const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;

/// `CANCEL`, the error code a client resets a stream with.
pub(crate) const CANCEL: u32 = 0x8;

#[derive(Debug)]
pub(crate) struct Frame {
    pub(crate) kind: u8,
    pub(crate) stream: u32,
    pub(crate) payload: Vec<u8>,
}

impl Frame {
    /// The `:status` of a HEADERS frame the server sent (its encoder puts
    /// the status first: a static-table entry, or a literal with the
    /// `:status` name, its digits perhaps Huffman-coded).
    pub(crate) fn status(&self) -> Option<u16> {
        if self.kind != HEADERS {
            return None;
        }
        let first = *self.payload.first()?;
        let index = if first & 0x80 != 0 {
            return match first & 0x7f {
                8 => Some(200),
                9 => Some(204),
                10 => Some(206),
                11 => Some(304),
                12 => Some(400),
                13 => Some(404),
                14 => Some(500),
                _ => None,
            };
        } else if first & 0x40 != 0 {
            first & 0x3f
        } else {
            first & 0x0f
        };
        if !(8..=14).contains(&index) {
            return None;
        }
        let head = *self.payload.get(1)?;
        let value = self.payload.get(2..2 + usize::from(head & 0x7f))?;
        let digits = if head & 0x80 != 0 {
            huffman_digits(value)?
        } else {
            String::from_utf8(value.to_vec()).ok()?
        };
        digits.parse().ok()
    }
}

/// RFC 7541's Huffman code for digits only (`0`-`2` in 5 bits, `3`-`9` in
/// 6), padding of 1s: enough for a status.
fn huffman_digits(bytes: &[u8]) -> Option<String> {
    let bits: Vec<u8> = bytes
        .iter()
        .flat_map(|b| (0..8).rev().map(move |i| (b >> i) & 1))
        .collect();
    let take = |at: usize, n: usize| {
        bits.get(at..at + n)
            .map(|b| b.iter().fold(0u8, |v, bit| v << 1 | bit))
    };
    let mut out = String::new();
    let mut at = 0;
    while at < bits.len() {
        if bits[at..].iter().all(|&b| b == 1) && bits.len() - at < 8 {
            break;
        }
        match take(at, 5)? {
            five @ 0..=2 => {
                out.push(char::from(b'0' + five));
                at += 5;
            }
            _ => match take(at, 6)? {
                six @ 0b011001..=0b011111 => {
                    out.push(char::from(b'3' + six - 0b011001));
                    at += 6;
                }
                _ => return None,
            },
        }
    }
    Some(out)
}

/// One HTTP/2 connection over plain TCP (prior knowledge).
pub(crate) struct H2Raw {
    stream: TcpStream,
    read: Vec<u8>,
    /// The server closed the connection (a read returned end of file or an error).
    pub(crate) closed: bool,
}

impl H2Raw {
    /// Connects, sends the preface and a SETTINGS frame with `settings`.
    pub(crate) async fn connect(addr: SocketAddr, settings: &[(u16, u32)]) -> Self {
        let stream = TcpStream::connect(addr).await.unwrap();
        let mut h2 = Self {
            stream,
            read: Vec::new(),
            closed: false,
        };
        let mut payload = Vec::new();
        for (id, value) in settings {
            payload.extend_from_slice(&id.to_be_bytes());
            payload.extend_from_slice(&value.to_be_bytes());
        }
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(frame(SETTINGS, 0, 0, &payload));
        bytes.extend(frame(SETTINGS, ACK, 0, &[]));
        h2.write(&bytes).await.unwrap();
        h2
    }

    /// Writes bytes already framed; an error when the server has closed.
    pub(crate) async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// The next frame, or `None` when the connection closed or `wait` passed.
    pub(crate) async fn next(&mut self, wait: Duration) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if self.read.len() >= 9 {
                let len = usize::from(self.read[0]) << 16
                    | usize::from(self.read[1]) << 8
                    | usize::from(self.read[2]);
                if self.read.len() >= 9 + len {
                    let head: Vec<u8> = self.read.drain(..9).collect();
                    let payload = self.read.drain(..len).collect();
                    return Some(Frame {
                        kind: head[3],
                        stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]])
                            & 0x7fff_ffff,
                        payload,
                    });
                }
            }
            let mut buf = [0u8; 16384];
            match tokio::time::timeout_at(deadline, self.stream.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => self.read.extend_from_slice(&buf[..n]),
                Ok(_) => {
                    self.closed = true;
                    return None;
                }
                Err(_elapsed) => return None,
            }
        }
    }

    /// Every frame until `done` says so (that frame included), the
    /// connection closes, or `wait` passes.
    pub(crate) async fn until(
        &mut self,
        wait: Duration,
        done: impl Fn(&Frame) -> bool,
    ) -> Vec<Frame> {
        let deadline = Instant::now() + wait;
        let mut frames = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.next(left).await {
                Some(frame) => {
                    let stop = done(&frame);
                    frames.push(frame);
                    if stop {
                        break;
                    }
                }
                None => break,
            }
        }
        frames
    }

    /// Whether the server sent GOAWAY or closed the connection within
    /// `wait`, reading and dropping whatever else it sends.
    pub(crate) async fn goes_away(&mut self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left).await {
                Some(frame) if frame.kind == GOAWAY => return true,
                Some(_) => {}
                None => return self.closed,
            }
        }
    }
}

/// A frame: 24-bit length, type, flags, stream id.
pub(crate) fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap();
    assert!(len < 1 << 24);
    let mut bytes = Vec::with_capacity(9 + payload.len());
    bytes.extend_from_slice(&len.to_be_bytes()[1..]);
    bytes.push(kind);
    bytes.push(flags);
    bytes.extend_from_slice(&stream.to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// An HPACK integer with an `n`-bit prefix, its first byte or'ed with `high`.
fn integer(out: &mut Vec<u8>, high: u8, n: u32, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(high | u8::try_from(value).unwrap());
        return;
    }
    out.push(high | u8::try_from(max).unwrap());
    value -= max;
    while value >= 128 {
        out.push(u8::try_from(value % 128).unwrap() | 0x80);
        value /= 128;
    }
    out.push(u8::try_from(value).unwrap());
}

fn string(out: &mut Vec<u8>, bytes: &[u8]) {
    integer(out, 0, 7, bytes.len());
    out.extend_from_slice(bytes);
}

/// A field as a literal without indexing, its name new (any bytes at all:
/// the encoder is the attacker's).
pub(crate) fn literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    string(out, name);
    string(out, value);
}

/// A field as a literal that the server's decoder must add to its dynamic table.
pub(crate) fn indexed_literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x40);
    string(out, name);
    string(out, value);
}

/// A reference to table entry `index` (62 is the newest dynamic entry).
pub(crate) fn indexed(out: &mut Vec<u8>, index: usize) {
    integer(out, 0x80, 7, index);
}

/// The header block of a request: `method`, `path`, authority `host`,
/// scheme http, then `fields` as literals.
pub(crate) fn request(method: &str, path: &str, host: &str, fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut block = Vec::new();
    literal(&mut block, b":method", method.as_bytes());
    literal(&mut block, b":scheme", b"http");
    literal(&mut block, b":path", path.as_bytes());
    literal(&mut block, b":authority", host.as_bytes());
    for (name, value) in fields {
        literal(&mut block, name, value);
    }
    block
}

/// A complete GET on `stream` (HEADERS with END_HEADERS and END_STREAM).
pub(crate) fn get(stream: u32, path: &str, host: &str) -> Vec<u8> {
    frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        stream,
        &request("GET", path, host, &[]),
    )
}
