use bytes::BytesMut;
use http::{HeaderMap, Method};
use httparse::ParserConfig;

use crate::body::DecodedLength;
use crate::proto::{BodyLength, MessageHead};

pub(crate) use self::conn::Conn;
pub(crate) use self::decode::Decoder;
pub(crate) use self::dispatch::Dispatcher;
pub(crate) use self::encode::{EncodedBuf, Encoder};
//TODO: move out of h1::io
pub(crate) use self::io::MINIMUM_MAX_BUFFER_SIZE;

mod conn;
mod decode;
pub(crate) mod dispatch;
mod encode;
mod io;
mod role;

cfg_client! {
    pub(crate) type ClientTransaction = role::Client;
}

cfg_server! {
    pub(crate) type ServerTransaction = role::Server;
}

pub(crate) trait Http1Transaction {
    type Incoming;
    type Outgoing: Default;
    #[cfg(feature = "tracing")]
    const LOG: &'static str;
    fn parse(bytes: &mut BytesMut, ctx: ParseContext<'_>) -> ParseResult<Self::Incoming>;
    fn encode(enc: Encode<'_, Self::Outgoing>, dst: &mut Vec<u8>) -> crate::Result<Encoder>;

    fn on_error(err: &crate::Error) -> Option<MessageHead<Self::Outgoing>>;

    fn is_client() -> bool {
        !Self::is_server()
    }

    fn is_server() -> bool {
        !Self::is_client()
    }

    fn should_error_on_parse_eof() -> bool {
        Self::is_client()
    }

    fn should_read_first() -> bool {
        Self::is_server()
    }

    fn update_date() {}
}

/// Result newtype for `Http1Transaction::parse`.
pub(crate) type ParseResult<T> = Result<Option<ParsedMessage<T>>, crate::error::Parse>;

#[derive(Debug)]
pub(crate) struct ParsedMessage<T> {
    head: MessageHead<T>,
    decode: DecodedLength,
    expect_continue: bool,
    keep_alive: bool,
    wants_upgrade: bool,
    /// A request's `TE` lists `trailers` (always `false` for a response).
    te_trailers: bool,
}

pub(crate) struct ParseContext<'ctx> {
    cached_headers: &'ctx mut Option<HeaderMap>,
    req_method: &'ctx mut Option<Method>,
    h1_parser_config: ParserConfig,
    h1_max_headers: Option<usize>,
    h1_max_header_size: Option<usize>,
    preserve_header_case: bool,
    #[cfg(feature = "ffi")]
    preserve_header_order: bool,
    h09_responses: bool,
    #[cfg(feature = "client")]
    on_informational: &'ctx mut Option<crate::ext::OnInformational>,
}

/// Passed to `Http1Transaction::encode`.
pub(crate) struct Encode<'encode, T> {
    head: &'encode mut MessageHead<T>,
    body: Option<BodyLength>,
    #[cfg(feature = "server")]
    keep_alive: bool,
    req_method: &'encode mut Option<Method>,
    title_case_headers: bool,
    #[cfg(feature = "server")]
    date_header: bool,
}

/// Extra flags that a request "wants", like expect-continue or upgrades.
#[derive(Clone, Copy, Debug)]
struct Wants(u8);

impl Wants {
    const EMPTY: Wants = Wants(0b00);
    const EXPECT: Wants = Wants(0b01);
    const UPGRADE: Wants = Wants(0b10);

    #[must_use]
    fn add(self, other: Wants) -> Wants {
        Wants(self.0 | other.0)
    }

    fn contains(&self, other: Wants) -> bool {
        (self.0 & other.0) == other.0
    }
}

/// ScalWS: the field names of the last request head a thread parsed, as
/// written and as parsed, by place. Clients send the same fields in the same
/// order and case request after request (and clients of one kind, the same
/// as each other); a name written as the one at its place is taken from
/// here (one `memcmp`) instead of parsed again (`HeaderName::from_bytes`).
/// Kept per thread, not per connection, so that an idle connection holds
/// none of it. At most [`FieldNames::MAX_NAMES`] names and
/// [`FieldNames::MAX_WRITTEN`] bytes of them are kept.
#[derive(Default)]
pub(crate) struct FieldNames {
    /// The names as written, one after another.
    written: Vec<u8>,
    /// Each name's end in `written`, and the name.
    names: Vec<(u32, http::HeaderName)>,
}

thread_local! {
    /// This thread's [`FieldNames`], asked for each field's name by a
    /// server's parse.
    pub(crate) static FIELD_NAMES: std::cell::RefCell<FieldNames> =
        const { std::cell::RefCell::new(FieldNames::new()) };
}

impl FieldNames {
    const MAX_NAMES: usize = 32;
    const MAX_WRITTEN: usize = 512;

    pub(crate) const fn new() -> Self {
        Self {
            written: Vec::new(),
            names: Vec::new(),
        }
    }

    /// The name of the head's field at `at`, written `raw`.
    #[inline]
    pub(crate) fn name(
        &mut self,
        at: usize,
        raw: &[u8],
    ) -> Result<http::HeaderName, http::header::InvalidHeaderName> {
        if let Some((end, name)) = self.names.get(at) {
            let start = match at {
                0 => 0,
                _ => self.names[at - 1].0,
            };
            if self.written.get(start as usize..*end as usize) == Some(raw) {
                return Ok(name.clone());
            }
        }
        let name = http::HeaderName::from_bytes(raw)?;
        self.remember(at, raw, &name);
        Ok(name)
    }

    /// `name`, written `raw`, at `at`: what was remembered from there on is
    /// dropped (a later field's place may have moved).
    #[inline(never)]
    fn remember(&mut self, at: usize, raw: &[u8], name: &http::HeaderName) {
        if at > self.names.len() {
            // An earlier field was not remembered (past the limits).
            return;
        }
        self.names.truncate(at);
        let start = self.names.last().map_or(0, |(end, _)| *end as usize);
        self.written.truncate(start);
        if at >= Self::MAX_NAMES || start + raw.len() > Self::MAX_WRITTEN {
            return;
        }
        self.written.extend_from_slice(raw);
        self.names.push(((start + raw.len()) as u32, name.clone()));
    }
}

#[cfg(test)]
mod field_names_tests {
    use super::FieldNames;

    /// Each head's names, parsed through one `FieldNames` in turn.
    fn names(heads: &[&[&str]]) -> (Vec<Vec<String>>, FieldNames) {
        let mut known = FieldNames::default();
        let parsed = heads
            .iter()
            .map(|head| {
                head.iter()
                    .enumerate()
                    .map(|(at, raw)| known.name(at, raw.as_bytes()).unwrap().to_string())
                    .collect()
            })
            .collect();
        (parsed, known)
    }

    #[test]
    fn every_head_gets_its_own_names() {
        let (parsed, _) = names(&[
            &["Host", "User-Agent", "X-Ab"],
            &["HOST", "user-agent", "X-Ac"],
            &["Host", "X-Ac", "Accept", "X-More"],
            &["host"],
            &["Host", "User-Agent", "X-Ab"],
        ]);
        assert_eq!(parsed[0], ["host", "user-agent", "x-ab"]);
        assert_eq!(parsed[1], ["host", "user-agent", "x-ac"]);
        assert_eq!(parsed[2], ["host", "x-ac", "accept", "x-more"]);
        assert_eq!(parsed[3], ["host"]);
        assert_eq!(parsed[4], ["host", "user-agent", "x-ab"]);
    }

    #[test]
    fn an_invalid_name_is_refused_wherever_it_comes() {
        let mut known = FieldNames::default();
        assert!(known.name(0, b"Host").is_ok());
        assert!(known.name(0, b"Ho st").is_err());
        assert!(known.name(1, b"").is_err());
        assert_eq!(known.name(0, b"Host").unwrap(), "host");
    }

    #[test]
    fn what_is_kept_is_bounded() {
        let many: Vec<String> = (0..100).map(|i| format!("x-field-{i}")).collect();
        let head: Vec<&str> = many.iter().map(String::as_str).collect();
        let (parsed, known) = names(&[&head, &head]);
        assert_eq!(parsed[0], parsed[1]);
        assert_eq!(parsed[1][99], "x-field-99");
        assert!(known.names.len() <= FieldNames::MAX_NAMES);
        assert!(known.written.len() <= FieldNames::MAX_WRITTEN);
        let long = "x".repeat(600);
        let (parsed, known) = names(&[&[&long], &[&long]]);
        assert_eq!(parsed[1][0], long);
        assert!(known.names.is_empty() && known.written.is_empty());
    }
}
