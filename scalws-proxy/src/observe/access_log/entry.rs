//! [`AccessLogEntry`]: what is known of one request, and its JSON line.

use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use http::Method;
use scalws_core::ConnInfo;

/// One request, as the access log writes it.
#[derive(Clone, Debug)]
pub struct AccessLogEntry {
    /// When the request started (reached the access log layer).
    pub time: SystemTime,
    /// The connection it came on (listener name, peer address), when the
    /// request had a [`ConnInfo`]. Kept whole: cloning it is one reference
    /// count, where copying the listener name out would be an allocation.
    pub conn: Option<ConnInfo>,
    /// The request method.
    pub method: Method,
    /// The host as the client sent it: `:authority` (or an absolute-form
    /// URI's authority), else the `Host` header; bytes that are not UTF-8
    /// are replaced.
    pub host: Option<String>,
    /// The path and query as the client sent them.
    pub path: String,
    /// The response status (499 when the client went away before the
    /// response head).
    pub status: u16,
    /// Response body bytes handed to the server for the client.
    pub bytes: u64,
    /// From the request's start to the end of the response body, or to when
    /// the body was dropped.
    pub duration: Duration,
    /// The upstream address that answered, for a proxied response.
    pub upstream: Option<SocketAddr>,
    /// What the cache did (`hit`, `miss`, ...), for a route with a cache.
    pub cache: Option<&'static str>,
}

impl AccessLogEntry {
    /// The name of the listener the request came on.
    pub fn listener(&self) -> Option<&str> {
        self.conn.as_ref().map(ConnInfo::listener)
    }

    /// The client's address.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.conn.as_ref().map(ConnInfo::peer)
    }

    /// Appends the entry's JSON line (with its `\n`) to `out`. Strings from
    /// the request are escaped by `serde_json`, so any bytes make valid JSON.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        // Writes to a Vec cannot fail: the results below are ignored.
        out.extend_from_slice(b"{\"time\":\"");
        // humantime formats 1970 to 9999 only (else it panics, or fails and
        // `write!` panics): a clock that far off is clamped.
        let time = self.time.clamp(SystemTime::UNIX_EPOCH, last_formattable());
        let _ = write!(out, "{}", humantime::format_rfc3339_millis(time));
        out.extend_from_slice(b"\",\"listener\":");
        string_or_null(out, self.listener());
        out.extend_from_slice(b",\"peer\":");
        display_or_null(out, self.peer());
        out.extend_from_slice(b",\"method\":");
        string(out, self.method.as_str());
        out.extend_from_slice(b",\"host\":");
        string_or_null(out, self.host.as_deref());
        out.extend_from_slice(b",\"path\":");
        string(out, &self.path);
        let micros = self.duration.as_micros();
        let _ = write!(
            out,
            ",\"status\":{},\"bytes\":{},\"duration_ms\":{}.{:03},\"upstream\":",
            self.status,
            self.bytes,
            micros / 1000,
            micros % 1000,
        );
        display_or_null(out, self.upstream);
        out.extend_from_slice(b",\"cache\":");
        string_or_null(out, self.cache);
        out.extend_from_slice(b"}\n");
    }
}

/// The last second of the year 9999.
fn last_formattable() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(253_402_300_799)
}

fn string(out: &mut Vec<u8>, value: &str) {
    let _ = serde_json::to_writer(&mut *out, value);
}

fn string_or_null(out: &mut Vec<u8>, value: Option<&str>) {
    match value {
        Some(value) => string(out, value),
        None => out.extend_from_slice(b"null"),
    }
}

/// A value whose text needs no escaping (an address), quoted, or `null`.
fn display_or_null(out: &mut Vec<u8>, value: Option<impl std::fmt::Display>) {
    match value {
        Some(value) => {
            let _ = write!(out, "\"{value}\"");
        }
        None => out.extend_from_slice(b"null"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn entry() -> AccessLogEntry {
        AccessLogEntry {
            time: SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
            conn: Some(ConnInfo::new(
                "public".into(),
                scalws_core::Scheme::Http,
                "[::1]:4000".parse().unwrap(),
                "[::1]:80".parse().unwrap(),
                None,
            )),
            method: Method::GET,
            host: Some("a.test".into()),
            path: "/x?y=1".into(),
            status: 200,
            bytes: 12,
            duration: Duration::from_micros(1_234_567),
            upstream: Some("10.0.0.1:8080".parse().unwrap()),
            cache: Some("miss"),
        }
    }

    fn line(entry: &AccessLogEntry) -> String {
        let mut out = Vec::new();
        entry.write_json(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn writes_every_key_in_order() {
        assert_eq!(
            line(&entry()),
            concat!(
                r#"{"time":"2023-11-14T22:13:20.123Z","listener":"public","peer":"[::1]:4000","#,
                r#""method":"GET","host":"a.test","path":"/x?y=1","status":200,"bytes":12,"#,
                r#""duration_ms":1234.567,"upstream":"10.0.0.1:8080","cache":"miss"}"#,
                "\n"
            )
        );
    }

    #[test]
    fn unknowns_are_null_and_strings_are_escaped() {
        let entry = AccessLogEntry {
            conn: None,
            host: Some("\"evil\"\n\u{1}é".into()),
            path: "/\\".into(),
            duration: Duration::from_micros(7),
            upstream: None,
            cache: None,
            ..entry()
        };
        let line = line(&entry);
        assert!(line.ends_with("}\n") && line.matches('\n').count() == 1);
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["host"], "\"evil\"\n\u{1}é");
        assert_eq!(value["path"], "/\\");
        assert_eq!(value["duration_ms"], 0.007);
        for key in ["listener", "peer", "upstream", "cache"] {
            assert!(value[key].is_null(), "{key}");
        }
    }

    #[test]
    fn a_time_out_of_range_is_clamped() {
        let before = AccessLogEntry {
            time: SystemTime::UNIX_EPOCH - Duration::from_secs(1),
            ..entry()
        };
        assert!(line(&before).starts_with(r#"{"time":"1970-01-01T00:00:00.000Z","#));
        let after = AccessLogEntry {
            time: SystemTime::UNIX_EPOCH + Duration::from_secs(300_000_000_000),
            ..entry()
        };
        assert!(line(&after).starts_with(r#"{"time":"9999-12-31T23:59:59.000Z","#));
    }
}
