//! Chunked bodies (RFC 9112 7.1), read strictly.

use bytes::{Buf, Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};

use super::{MAX_CHUNK_LINE, MAX_HEADERS, WireError};

/// Where the decoding of a chunked body is.
#[derive(Clone, Copy)]
pub(super) enum Chunk {
    Size,
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    Trailers,
}

/// What a step of chunked decoding gave.
pub(super) enum Decoded {
    Data(Bytes),
    /// The last chunk, and its trailers if it had any.
    End(Option<HeaderMap>),
}

/// Decodes from `read` as far as it goes: `None` when more must be read.
pub(super) fn decode_chunk(
    state: &mut Chunk,
    read: &mut BytesMut,
    max_trailers: usize,
) -> Result<Option<Decoded>, WireError> {
    loop {
        match *state {
            Chunk::Size => {
                let window = &read[..read.len().min(MAX_CHUNK_LINE)];
                let Some(end) = window.iter().position(|&b| b == b'\n') else {
                    if read.len() >= MAX_CHUNK_LINE {
                        return Err(WireError::BadResponse("a chunk size line over 4 KiB"));
                    }
                    return Ok(None);
                };
                let size = chunk_size(&read[..end])?;
                read.advance(end + 1);
                *state = if size == 0 {
                    Chunk::Trailers
                } else {
                    Chunk::Data(size)
                };
            }
            Chunk::Data(left) => {
                if read.is_empty() {
                    return Ok(None);
                }
                let n = left.min(read.len() as u64);
                *state = if n == left {
                    Chunk::DataEnd
                } else {
                    Chunk::Data(left - n)
                };
                return Ok(Some(Decoded::Data(read.split_to(n as usize).freeze())));
            }
            Chunk::DataEnd => {
                if read.len() < 2 {
                    return Ok(None);
                }
                if read[..2] != *b"\r\n" {
                    return Err(WireError::BadResponse("chunk data not ended by CRLF"));
                }
                read.advance(2);
                *state = Chunk::Size;
            }
            Chunk::Trailers => {
                let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
                match httparse::parse_headers(read, &mut fields) {
                    Ok(httparse::Status::Complete((len, fields))) => {
                        let trailers = if fields.is_empty() {
                            None
                        } else {
                            let mut map = HeaderMap::with_capacity(fields.len());
                            for field in fields {
                                let name = HeaderName::from_bytes(field.name.as_bytes()).map_err(
                                    |_| WireError::BadResponse("an invalid trailer name"),
                                )?;
                                let value = HeaderValue::from_bytes(field.value).map_err(|_| {
                                    WireError::BadResponse("an invalid trailer value")
                                })?;
                                map.append(name, value);
                            }
                            Some(map)
                        };
                        read.advance(len);
                        return Ok(Some(Decoded::End(trailers)));
                    }
                    Ok(httparse::Status::Partial) if read.len() >= max_trailers => {
                        return Err(WireError::BadResponse("trailers over the head size limit"));
                    }
                    Ok(httparse::Status::Partial) => return Ok(None),
                    Err(_) => return Err(WireError::BadResponse("invalid trailers")),
                }
            }
        }
    }
}

/// A chunk-size line without its LF: hex digits, then optional blanks and
/// extensions of visible characters, then CR.
fn chunk_size(line: &[u8]) -> Result<u64, WireError> {
    let bad = || WireError::BadResponse("an invalid chunk size line");
    let line = line.strip_suffix(b"\r").ok_or_else(bad)?;
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    // Leading zeros are allowed; what is left must fit in 64 bits.
    let zeros = line[..digits].iter().take_while(|&&b| b == b'0').count();
    if digits == 0 || digits - zeros > 16 {
        return Err(bad());
    }
    let size = line[zeros..digits].iter().fold(0u64, |n, &d| {
        n << 4 | u64::from((d as char).to_digit(16).unwrap_or(0))
    });
    let rest = &line[digits..];
    let rest = &rest[rest
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count()..];
    match rest.first() {
        None => Ok(size),
        Some(b';')
            if rest
                .iter()
                .all(|&b| b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80) =>
        {
            Ok(size)
        }
        Some(_) => Err(bad()),
    }
}
