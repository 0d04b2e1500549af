//! The HTML listing of a directory, for routes with `listing: true`.

use std::fs;
use std::io;
use std::path::Path;

use bytes::Bytes;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Everything but RFC 3986 unreserved characters is escaped in a link's segment.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Lists `dir`, sorted by name, directories with a trailing `/`, dotfiles and names
/// that are not UTF-8 (which could not be requested) left out. Links are absolute,
/// under `request_path`, so they work with or without its trailing slash.
pub(super) fn render(dir: &Path, request_path: &str) -> io::Result<Bytes> {
    let mut entries = Vec::new();
    for entry in fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let is_dir = match entry.file_type() {
            Ok(kind) if kind.is_symlink() => match fs::metadata(entry.path()) {
                Ok(target) => target.is_dir(),
                Err(_) => continue, // dangling
            },
            Ok(kind) => kind.is_dir(),
            Err(_) => continue,
        };
        entries.push((name, is_dir));
    }
    entries.sort_unstable();

    let base = request_path.trim_end_matches('/');
    let title = if base.is_empty() { "/" } else { request_path };
    let mut html = String::with_capacity(256 + entries.len() * 96);
    html.push_str("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of ");
    escape_into(&mut html, title);
    html.push_str("</title></head>\n<body><h1>Index of ");
    escape_into(&mut html, title);
    html.push_str("</h1>\n<ul>\n");
    for (name, is_dir) in &entries {
        let slash = if *is_dir { "/" } else { "" };
        html.push_str("<li><a href=\"");
        escape_into(&mut html, base);
        html.push('/');
        let encoded = utf8_percent_encode(name, SEGMENT).to_string();
        escape_into(&mut html, &encoded);
        html.push_str(slash);
        html.push_str("\">");
        escape_into(&mut html, name);
        html.push_str(slash);
        html.push_str("</a></li>\n");
    }
    html.push_str("</ul>\n</body></html>\n");
    Ok(Bytes::from(html))
}

fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        let mut out = String::new();
        escape_into(&mut out, "<a href=\"x\">&'");
        assert_eq!(out, "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }
}
