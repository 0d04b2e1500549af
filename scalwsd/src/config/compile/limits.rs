//! `limits:` and the other process-wide settings: every value bounded, every duration positive.

use super::*;

impl Compiler<'_> {
    pub(super) fn limits(&mut self, file: &LimitsFile) -> Limits {
        let mut limits = Limits::default();
        let path = |key: &str| format!("limits.{key}");
        if let Some(v) = &file.max_connections {
            limits.max_connections = self.bounded(v, MAX_CONNECTIONS, &path("max_connections"));
        }
        if let Some(v) = &file.header_read_timeout {
            limits.header_read_timeout = self.positive(v, &path("header_read_timeout"));
        }
        if let Some(v) = &file.keepalive_timeout {
            limits.keepalive_timeout = self.positive(v, &path("keepalive_timeout"));
        }
        if let Some(v) = &file.max_header_bytes {
            if v.value.0 < 8192 {
                self.errors.at(
                    &v.referenced,
                    path("max_header_bytes"),
                    "must be at least 8KiB (the smallest read buffer the HTTP/1 parser takes)",
                );
            }
            limits.max_header_bytes = usize::try_from(v.value.0).unwrap_or(usize::MAX);
        }
        if let Some(v) = &file.max_headers {
            // The HTTP/1 parser reserves room for this many headers per request.
            limits.max_headers = self.bounded(v, MAX_HEADERS, &path("max_headers"));
        }
        if let Some(v) = &file.h2_max_concurrent_streams {
            match NonZeroU32::new(v.value) {
                Some(n) => limits.h2_max_concurrent_streams = n,
                None => self.errors.at(
                    &v.referenced,
                    path("h2_max_concurrent_streams"),
                    "must be at least 1",
                ),
            }
        }
        if let Some(v) = &file.max_request_body {
            limits.max_request_body = v.value.0;
        }
        if let Some(v) = &file.drain_timeout {
            limits.drain_timeout = v.value.0;
        }
        if let Some(v) = &file.send_timeout {
            limits.send_timeout = self.positive(v, &path("send_timeout"));
        }
        if let Some(v) = &file.tunnel_idle_timeout {
            limits.tunnel_idle_timeout = self.positive(v, &path("tunnel_idle_timeout"));
        }
        limits
    }
}
