//! The `static` action over a real directory: traversal, conditional requests,
//! ranges, directories, the in-memory cache and streaming.
#![allow(clippy::unwrap_used)]

use std::fs;
use std::os::unix::fs::symlink;
use std::time::Duration;

use bytes::Bytes;
use http::header::{
    ACCEPT_RANGES, ALLOW, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, ETAG, IF_MODIFIED_SINCE,
    IF_NONE_MATCH, IF_RANGE, LAST_MODIFIED, RANGE,
};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use http_body_util::BodyExt;
use scalws_proxy::{StaticFiles, StaticOptions};
use tempfile::TempDir;

/// In `secret.txt`, beside the root: must never appear in a response.
const MARKER: &str = "SECRET-MARKER-d41d8cd98f00b204";
const HELLO: &str = "hello world";

struct Site {
    dir: TempDir,
}

impl Site {
    /// `<tmp>/secret.txt` and `<tmp>/root/...`.
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        fs::write(top.join("secret.txt"), MARKER).unwrap();
        let root = top.join("root");
        for sub in ["docs", "empty", "a/b", "list/sub", ".git"] {
            fs::create_dir_all(root.join(sub)).unwrap();
        }
        fs::write(root.join("hello.txt"), HELLO).unwrap();
        fs::write(root.join("style.css"), "body{}").unwrap();
        fs::write(root.join("blob.unknownext"), "?").unwrap();
        fs::write(root.join(".env"), "DOTFILE").unwrap();
        fs::write(root.join(".git/config"), "DOTFILE").unwrap();
        fs::write(root.join("docs/index.html"), "<h1>docs</h1>").unwrap();
        fs::write(root.join("docs/guide.md"), "# guide").unwrap();
        fs::write(root.join("list/b.txt"), "b").unwrap();
        fs::write(root.join("list/a.txt"), "a").unwrap();
        fs::write(root.join("list/x <y>&z\".txt"), "x").unwrap();
        fs::write(root.join("list/.hidden"), "h").unwrap();
        symlink(top.join("secret.txt"), root.join("link-out.txt")).unwrap();
        symlink(top, root.join("dir-out")).unwrap();
        symlink(root.join("hello.txt"), root.join("link-in.txt")).unwrap();
        Self { dir }
    }

    fn root(&self) -> std::path::PathBuf {
        self.dir.path().join("root")
    }

    fn files(&self, index: Option<&str>, listing: bool, prefix: &str) -> StaticFiles {
        StaticFiles::new(StaticOptions {
            root: self.root(),
            index: index.map(Into::into),
            listing,
            strip_prefix: prefix.into(),
            ..StaticOptions::default()
        })
        .unwrap()
    }

    fn plain(&self) -> StaticFiles {
        self.files(Some("index.html"), false, "/")
    }
}

#[derive(Debug)]
struct Got {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Got {
    fn header(&self, name: HeaderName) -> &str {
        self.headers.get(name).map_or("", |v| v.to_str().unwrap())
    }

    fn text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap()
    }
}

async fn request(
    files: &StaticFiles,
    method: Method,
    path: &str,
    headers: &[(HeaderName, &str)],
) -> Got {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.append(name.clone(), HeaderValue::from_str(value).unwrap());
    }
    let response = files.serve(&method, path, &map).await;
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Got {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

async fn get(files: &StaticFiles, path: &str) -> Got {
    request(files, Method::GET, path, &[]).await
}

fn assert_no_secret(got: &Got, path: &str) {
    let body = String::from_utf8_lossy(&got.body);
    assert!(!body.contains(MARKER), "{path} leaked the secret: {got:?}");
}

// === traversal ===

#[tokio::test]
async fn traversal_never_leaves_the_root() {
    let site = Site::new();
    let cases: &[(&str, StatusCode)] = &[
        ("/%2e%2e/secret.txt", StatusCode::NOT_FOUND),
        ("/..%2fsecret.txt", StatusCode::NOT_FOUND),
        ("/%2e%2e%2fsecret.txt", StatusCode::NOT_FOUND),
        ("/%252e%252e/secret.txt", StatusCode::NOT_FOUND),
        ("/a/..%2f..%2fsecret.txt", StatusCode::NOT_FOUND),
        ("/a/b/..%2F..%2F..%2Fsecret.txt", StatusCode::NOT_FOUND),
        ("/../secret.txt", StatusCode::NOT_FOUND),
        ("/a/../../secret.txt", StatusCode::NOT_FOUND),
        ("/%2E%2E/%2E%2E/secret.txt", StatusCode::NOT_FOUND),
        ("/..%5csecret.txt", StatusCode::NOT_FOUND),
        ("/%00", StatusCode::BAD_REQUEST),
        ("/hello.txt%00.css", StatusCode::BAD_REQUEST),
        ("/link-out.txt", StatusCode::NOT_FOUND),
        ("/dir-out/secret.txt", StatusCode::NOT_FOUND),
        ("/dir-out/", StatusCode::NOT_FOUND),
    ];
    for (prefix, files) in [
        ("", site.files(Some("index.html"), true, "/")),
        ("/static", site.files(Some("index.html"), true, "/static")),
    ] {
        for &(raw, status) in cases {
            let raw = format!("{prefix}{raw}");
            // As a direct caller (or the tower Service) would pass it.
            for method in [Method::GET, Method::HEAD] {
                let got = request(&files, method.clone(), &raw, &[]).await;
                assert_eq!(got.status, status, "{method} {raw}");
                assert_no_secret(&got, &raw);
            }
            // As it arrives after the router's normalisation; a path escaping the root
            // never gets that far.
            if let Ok(normalized) = scalws_router::normalize_path(&raw) {
                let got = get(&files, &normalized).await;
                assert!(
                    got.status == StatusCode::NOT_FOUND || got.status == StatusCode::BAD_REQUEST,
                    "{raw} as {normalized}: {got:?}"
                );
                assert_no_secret(&got, &normalized);
            }
        }
    }
}

#[tokio::test]
async fn symlink_inside_the_root_is_served() {
    let site = Site::new();
    let got = get(&site.plain(), "/link-in.txt").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.text(), HELLO);
}

#[tokio::test]
async fn dotfiles_are_hidden() {
    let site = Site::new();
    let files = site.plain();
    for path in [
        "/.env",
        "/.git/config",
        "/.git/",
        "/%2eenv",
        "/%2Egit/config",
    ] {
        let got = get(&files, path).await;
        assert_eq!(got.status, StatusCode::NOT_FOUND, "{path}");
        assert!(!got.text().contains("DOTFILE"), "{path}");
    }
}

#[tokio::test]
async fn tower_service_uses_the_uri_path() {
    use tower::ServiceExt;
    let site = Site::new();
    let files = site.plain();
    let request = http::Request::get("/hello.txt").body(()).unwrap();
    let response = files.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.into_body().collect().await.unwrap().to_bytes(),
        HELLO
    );

    let request = http::Request::get("/%2e%2e/secret.txt").body(()).unwrap();
    let response = files.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(!String::from_utf8_lossy(&body).contains(MARKER));
}

// === files ===

#[tokio::test]
async fn serves_a_file_with_its_headers() {
    let site = Site::new();
    let got = get(&site.plain(), "/hello.txt").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.text(), HELLO);
    assert_eq!(got.header(CONTENT_TYPE), "text/plain; charset=utf-8");
    assert_eq!(got.header(CONTENT_LENGTH), "11");
    assert_eq!(got.header(ACCEPT_RANGES), "bytes");
    let etag = got.header(ETAG);
    assert!(etag.starts_with('"') && etag.ends_with("-b\""), "{etag}");
    assert!(httpdate::parse_http_date(got.header(LAST_MODIFIED)).is_ok());
}

#[tokio::test]
async fn content_type_by_extension() {
    let site = Site::new();
    let files = site.plain();
    assert_eq!(
        get(&files, "/style.css").await.header(CONTENT_TYPE),
        "text/css; charset=utf-8"
    );
    assert_eq!(
        get(&files, "/blob.unknownext").await.header(CONTENT_TYPE),
        "application/octet-stream"
    );
}

#[tokio::test]
async fn missing_file_is_404() {
    let site = Site::new();
    let got = get(&site.plain(), "/nope.txt").await;
    assert_eq!(got.status, StatusCode::NOT_FOUND);
    assert_eq!(got.text(), "404 Not Found\n");
    assert_eq!(
        get(&site.plain(), "/hello.txt/x").await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn other_methods_are_405() {
    let site = Site::new();
    for method in [Method::POST, Method::PUT, Method::DELETE, Method::OPTIONS] {
        let got = request(&site.plain(), method.clone(), "/hello.txt", &[]).await;
        assert_eq!(got.status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
        assert_eq!(got.header(ALLOW), "GET, HEAD");
    }
}

#[tokio::test]
async fn head_has_no_body_and_the_same_headers() {
    let site = Site::new();
    let files = site.plain();
    let got = get(&files, "/hello.txt").await;
    let head = request(&files, Method::HEAD, "/hello.txt", &[]).await;
    assert_eq!(head.status, StatusCode::OK);
    assert!(head.body.is_empty());
    assert_eq!(head.header(CONTENT_LENGTH), "11");
    for name in [CONTENT_TYPE, ETAG, LAST_MODIFIED, ACCEPT_RANGES] {
        assert_eq!(head.header(name.clone()), got.header(name));
    }
}

#[tokio::test]
async fn prefix_is_stripped_by_segment() {
    let site = Site::new();
    let files = site.files(Some("index.html"), false, "/static");
    assert_eq!(get(&files, "/static/hello.txt").await.text(), HELLO);
    assert_eq!(get(&files, "/static/docs").await.text(), "<h1>docs</h1>");
    assert_eq!(get(&files, "/static").await.status, StatusCode::NOT_FOUND); // root has no index
    assert_eq!(
        get(&files, "/staticx/hello.txt").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get(&files, "/hello.txt").await.status,
        StatusCode::NOT_FOUND
    );
    let files = site.files(None, true, "/static/");
    let listing = get(&files, "/static").await;
    assert_eq!(listing.status, StatusCode::OK);
    assert!(
        listing.text().contains("href=\"/static/hello.txt\""),
        "{}",
        listing.text()
    );
}

#[tokio::test]
async fn escaped_names_are_decoded() {
    let site = Site::new();
    fs::write(site.root().join("a b é.txt"), "spaced").unwrap();
    fs::write(site.root().join("%2e%2e"), "literal").unwrap();
    let files = site.plain();
    assert_eq!(get(&files, "/a%20b%20%C3%A9.txt").await.text(), "spaced");
    assert_eq!(get(&files, "/%252e%252e").await.text(), "literal");
    assert_eq!(
        get(&files, "/a%20b%20%E9.txt").await.status,
        StatusCode::NOT_FOUND
    );
}

// === directories ===

#[tokio::test]
async fn directory_serves_its_index() {
    let site = Site::new();
    let files = site.plain();
    for path in ["/docs/", "/docs", "//docs//"] {
        let got = get(&files, path).await;
        assert_eq!(got.status, StatusCode::OK, "{path}");
        assert_eq!(got.text(), "<h1>docs</h1>");
        assert_eq!(got.header(CONTENT_TYPE), "text/html; charset=utf-8");
    }
    assert_eq!(get(&files, "/empty/").await.status, StatusCode::NOT_FOUND);
    assert_eq!(get(&files, "/").await.status, StatusCode::NOT_FOUND);
    let no_index = site.files(None, false, "/");
    assert_eq!(get(&no_index, "/docs/").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn listing_only_when_enabled() {
    let site = Site::new();
    let off = site.files(Some("index.html"), false, "/");
    assert_eq!(get(&off, "/list/").await.status, StatusCode::NOT_FOUND);

    let on = site.files(Some("index.html"), true, "/");
    let got = get(&on, "/list/").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.header(CONTENT_TYPE), "text/html; charset=utf-8");
    let html = got.text();
    let a = html.find("href=\"/list/a.txt\">a.txt</a>").unwrap();
    let b = html.find("href=\"/list/b.txt\">b.txt</a>").unwrap();
    let sub = html.find("href=\"/list/sub/\">sub/</a>").unwrap();
    let odd = html
        .find("href=\"/list/x%20%3Cy%3E%26z%22.txt\">x &lt;y&gt;&amp;z&quot;.txt</a>")
        .unwrap();
    assert!(a < b && b < sub && sub < odd, "{html}");
    assert!(!html.contains("hidden"), "{html}");
    // Without the trailing slash, links are still right.
    assert!(
        get(&on, "/list")
            .await
            .text()
            .contains("href=\"/list/a.txt\"")
    );
    // The index still wins.
    assert_eq!(get(&on, "/docs/").await.text(), "<h1>docs</h1>");
    // HEAD
    let head = request(&on, Method::HEAD, "/list/", &[]).await;
    assert!(head.body.is_empty());
    assert_eq!(head.header(CONTENT_LENGTH), got.body.len().to_string());
}

// === conditional requests ===

#[tokio::test]
async fn if_none_match_gives_304() {
    let site = Site::new();
    let files = site.plain();
    let etag = get(&files, "/hello.txt").await.header(ETAG).to_owned();
    for value in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"x\", {etag}"),
        "*".into(),
    ] {
        let got = request(
            &files,
            Method::GET,
            "/hello.txt",
            &[(IF_NONE_MATCH, &value)],
        )
        .await;
        assert_eq!(got.status, StatusCode::NOT_MODIFIED, "{value}");
        assert!(got.body.is_empty());
        assert_eq!(got.header(ETAG), etag);
    }
    let got = request(
        &files,
        Method::GET,
        "/hello.txt",
        &[(IF_NONE_MATCH, "\"other\"")],
    )
    .await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.text(), HELLO);
}

#[tokio::test]
async fn if_modified_since_gives_304() {
    let site = Site::new();
    let files = site.plain();
    let last_modified = get(&files, "/hello.txt")
        .await
        .header(LAST_MODIFIED)
        .to_owned();
    let got = request(
        &files,
        Method::GET,
        "/hello.txt",
        &[(IF_MODIFIED_SINCE, &last_modified)],
    )
    .await;
    assert_eq!(got.status, StatusCode::NOT_MODIFIED);
    assert!(got.body.is_empty());
    assert_eq!(got.header(LAST_MODIFIED), last_modified);

    let old = "Thu, 01 Jan 1998 00:00:00 GMT";
    let got = request(
        &files,
        Method::GET,
        "/hello.txt",
        &[(IF_MODIFIED_SINCE, old)],
    )
    .await;
    assert_eq!(got.status, StatusCode::OK);
    // If-None-Match, when present, decides alone.
    let got = request(
        &files,
        Method::GET,
        "/hello.txt",
        &[
            (IF_NONE_MATCH, "\"other\""),
            (IF_MODIFIED_SINCE, &last_modified),
        ],
    )
    .await;
    assert_eq!(got.status, StatusCode::OK);
}

// === ranges ===

async fn range(files: &StaticFiles, path: &str, value: &str) -> Got {
    request(files, Method::GET, path, &[(RANGE, value)]).await
}

#[tokio::test]
async fn single_range_gives_206() {
    let site = Site::new();
    let files = site.plain();
    for (value, body, content_range) in [
        ("bytes=0-4", "hello", "bytes 0-4/11"),
        ("bytes=-5", "world", "bytes 6-10/11"),
        ("bytes=6-", "world", "bytes 6-10/11"),
        ("bytes=6-1000", "world", "bytes 6-10/11"),
        ("bytes=-100", HELLO, "bytes 0-10/11"),
    ] {
        let got = range(&files, "/hello.txt", value).await;
        assert_eq!(got.status, StatusCode::PARTIAL_CONTENT, "{value}");
        assert_eq!(got.text(), body, "{value}");
        assert_eq!(got.header(CONTENT_RANGE), content_range, "{value}");
        assert_eq!(
            got.header(CONTENT_LENGTH),
            body.len().to_string(),
            "{value}"
        );
    }
}

#[tokio::test]
async fn unsatisfiable_range_gives_416() {
    let site = Site::new();
    let files = site.plain();
    for value in ["bytes=11-", "bytes=20-30", "bytes=-0"] {
        let got = range(&files, "/hello.txt", value).await;
        assert_eq!(got.status, StatusCode::RANGE_NOT_SATISFIABLE, "{value}");
        assert_eq!(got.header(CONTENT_RANGE), "bytes */11");
        assert!(!got.text().contains(HELLO));
    }
}

#[tokio::test]
async fn several_or_malformed_ranges_give_the_whole_file() {
    let site = Site::new();
    let files = site.plain();
    for value in ["bytes=0-1,3-4", "bytes=x-y", "lines=1-2", "bytes=5-2"] {
        let got = range(&files, "/hello.txt", value).await;
        assert_eq!(got.status, StatusCode::OK, "{value}");
        assert_eq!(got.text(), HELLO);
        assert!(got.headers.get(CONTENT_RANGE).is_none());
    }
}

#[tokio::test]
async fn if_range_decides_whether_range_applies() {
    let site = Site::new();
    let files = site.plain();
    let first = get(&files, "/hello.txt").await;
    let (etag, date) = (first.header(ETAG), first.header(LAST_MODIFIED));
    for (if_range, status) in [
        (etag.to_owned(), StatusCode::PARTIAL_CONTENT),
        (date.to_owned(), StatusCode::PARTIAL_CONTENT),
        ("\"stale\"".to_owned(), StatusCode::OK),
        (format!("W/{etag}"), StatusCode::OK),
        ("Thu, 01 Jan 1998 00:00:00 GMT".to_owned(), StatusCode::OK),
    ] {
        let headers = [(RANGE, "bytes=0-4"), (IF_RANGE, if_range.as_str())];
        let got = request(&files, Method::GET, "/hello.txt", &headers).await;
        assert_eq!(got.status, status, "{if_range}");
    }
}

// === memory and disk ===

#[tokio::test]
async fn changed_file_is_served_fresh_after_the_window() {
    let site = Site::new();
    let files = site.plain();
    let path = site.root().join("changing.txt");
    fs::write(&path, "version one").unwrap();
    assert_eq!(get(&files, "/changing.txt").await.text(), "version one");
    fs::write(&path, "version two, longer").unwrap();
    // Within the window the cached copy answers: no disk access.
    assert_eq!(get(&files, "/changing.txt").await.text(), "version one");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let got = get(&files, "/changing.txt").await;
    assert_eq!(got.text(), "version two, longer");
    assert_eq!(got.header(CONTENT_LENGTH), "19");
}

#[tokio::test]
async fn vanished_file_is_404_after_the_window() {
    let site = Site::new();
    let files = site.plain();
    let path = site.root().join("going.txt");
    fs::write(&path, "here").unwrap();
    assert_eq!(get(&files, "/going.txt").await.status, StatusCode::OK);
    fs::remove_file(&path).unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        get(&files, "/going.txt").await.status,
        StatusCode::NOT_FOUND
    );
}

fn pseudo_random(len: usize) -> Vec<u8> {
    let mut state: u32 = 0x9e37_79b9;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state.to_le_bytes()[0]
        })
        .collect()
}

#[tokio::test]
async fn large_file_streams_whole_and_in_ranges() {
    let site = Site::new();
    let files = site.plain();
    let data = pseudo_random(1024 * 1024 + 17);
    fs::write(site.root().join("big.bin"), &data).unwrap();
    let got = get(&files, "/big.bin").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.header(CONTENT_LENGTH), data.len().to_string());
    assert_eq!(got.header(CONTENT_TYPE), "application/octet-stream");
    assert!(got.body == data, "body differs");

    let got = range(&files, "/big.bin", "bytes=100000-300000").await;
    assert_eq!(got.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(
        got.header(CONTENT_RANGE),
        format!("bytes 100000-300000/{}", data.len())
    );
    assert!(got.body == data[100_000..=300_000], "range differs");

    let got = range(&files, "/big.bin", "bytes=-10").await;
    assert!(got.body == data[data.len() - 10..]);

    let head = request(&files, Method::HEAD, "/big.bin", &[]).await;
    assert!(head.body.is_empty());
    assert_eq!(head.header(CONTENT_LENGTH), data.len().to_string());

    let etag = head.header(ETAG).to_owned();
    let got = request(&files, Method::GET, "/big.bin", &[(IF_NONE_MATCH, &etag)]).await;
    assert_eq!(got.status, StatusCode::NOT_MODIFIED);

    // Not cached: a change is seen at once.
    let data = pseudo_random(200 * 1024);
    fs::write(site.root().join("big.bin"), &data).unwrap();
    assert!(get(&files, "/big.bin").await.body == data);
}

// === build ===

#[test]
fn invalid_root_is_refused() {
    let site = Site::new();
    for (root, reason) in [
        (site.dir.path().join("missing"), "No such file"),
        (site.root().join("hello.txt"), "not a directory"),
    ] {
        let error = StaticFiles::new(StaticOptions {
            root: root.clone(),
            index: None,
            listing: false,
            strip_prefix: "/".into(),
            ..StaticOptions::default()
        })
        .unwrap_err();
        assert_eq!(error.path, root);
        let message = error.to_string();
        assert!(
            message.starts_with(&format!("static root {}: ", root.display())),
            "{message}"
        );
        assert!(message.contains(reason), "{message}");
    }
}
