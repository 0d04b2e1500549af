#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn normalisation_table() {
    for (input, want) in [
        ("/", "/"),
        ("/a/b", "/a/b"),
        ("/a/./b", "/a/b"),
        ("/a/b/../c", "/a/c"),
        ("/a/b/..", "/a/"),
        ("/a/b/.", "/a/b/"),
        ("/a/.", "/a/"),
        ("/.", "/"),
        ("/a/..", "/"),
        ("/./a", "/a"),
        ("/a/../b/./c/..", "/b/"),
        ("/a/%2e%2e/b", "/b"),
        ("/a/%2E%2E/b", "/b"),
        ("/a/.%2e/b", "/b"),
        ("/a/%2e/b", "/a/b"),
        ("/%41%62%7e%2D%5f", "/Ab~-_"),
        ("/a%2Fb", "/a%2Fb"),
        ("/a%2fb", "/a%2fb"),
        ("/a%00b", "/a%00b"),
        ("/%252e%252e/x", "/%252e%252e/x"),
        ("/a%2F..%2Fb", "/a%2F..%2Fb"),
        ("/a%20b", "/a%20b"),
        ("/caf%C3%A9", "/caf%C3%A9"),
        ("//a//b//", "//a//b//"),
        ("/a//../b", "/a/b"),
        ("/a/...", "/a/..."),
        ("/a/..b/.c", "/a/..b/.c"),
        ("/a/b..", "/a/b.."),
    ] {
        assert_eq!(normalize_path(input).unwrap(), want, "{input}");
    }
}

#[test]
fn climbing_above_root_is_refused() {
    for input in [
        "/..",
        "/../x",
        "/a/../../x",
        "/%2e%2e/x",
        "/%2E%2e",
        "/./..",
        "/a/./../..",
    ] {
        assert_eq!(normalize_path(input), Err(BadPath::EscapesRoot), "{input}");
    }
}

#[test]
fn invalid_paths() {
    for input in ["", "a/b", "*", "http://x/", "/a%", "/a%2", "/a%zz", "/%%41"] {
        assert_eq!(normalize_path(input), Err(BadPath::Invalid), "{input}");
    }
}

#[test]
fn borrows_when_already_normal() {
    for input in [
        "/",
        "/a/b/c.html",
        "//x",
        "/a%2Fb",
        "/a%00",
        "/a/...",
        "/.well-known/x",
    ] {
        assert!(
            matches!(normalize_path(input).unwrap(), Cow::Borrowed(_)),
            "{input}"
        );
    }
    assert!(matches!(normalize_path("/%41").unwrap(), Cow::Owned(_)));
    assert!(matches!(normalize_path("/a/./b").unwrap(), Cow::Owned(_)));
}

#[test]
fn error_text() {
    assert_eq!(BadPath::EscapesRoot.to_string(), "path escapes the root");
    assert_eq!(BadPath::Invalid.to_string(), "invalid path");
}

/// Every string of `alphabet` up to `max` bytes.
fn strings(alphabet: &[u8], max: usize) -> Vec<String> {
    let mut all = vec![String::new()];
    let mut last = vec![String::new()];
    for _ in 0..max {
        last = last
            .iter()
            .flat_map(|s| {
                alphabet
                    .iter()
                    .map(move |&b| format!("{s}{}", char::from(b)))
            })
            .collect();
        all.extend(last.iter().cloned());
    }
    all
}

#[test]
fn the_byte_scan_finds_exactly_the_dot_segments_split_finds() {
    for path in strings(b"/.a", 7) {
        let split = path.split('/').any(|s| s == "." || s == "..");
        assert_eq!(has_dot_segment(&path), split, "{path:?}");
    }
}
