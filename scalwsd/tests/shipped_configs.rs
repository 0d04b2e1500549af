//! Every configuration the repository ships (the embedded default, the
//! examples) passes the checks, so the docs never show a broken file.
#![allow(clippy::unwrap_used, missing_docs)]

use std::path::Path;

#[test]
fn embedded_default_is_valid() {
    let config = scalwsd::config::load(
        "<embedded default>",
        scalwsd::config::DEFAULT_CONFIG,
        Path::new("."),
    )
    .unwrap();
    assert_eq!(config.listeners[0].address.to_string(), "127.0.0.1:8080");
}

#[tokio::test]
async fn example_configs_are_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/configs");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            // tls.yaml names site.pem and site.key, which a user makes with
            // openssl: check it beside a certificate made here instead.
            let loaded = if text.contains("site.pem") {
                let copy = tempfile::tempdir().unwrap();
                let ca = test_support::tls::TestCa::new();
                ca.issue(copy.path(), "site", &["localhost"], false);
                std::fs::create_dir(copy.path().join("public")).unwrap();
                scalwsd::config::load(&path.display().to_string(), &text, copy.path())
            } else {
                scalwsd::config::load_file(&path)
            };
            if let Err(errors) = loaded {
                panic!("{errors}");
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 1,
        "no example configs found in {}",
        dir.display()
    );
}
