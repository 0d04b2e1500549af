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
            if let Err(errors) = scalwsd::config::load_file(&path) {
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
