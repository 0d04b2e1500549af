//! Every fuzz target's corpus and every input that once made one fail,
//! replayed through the same code the fuzzer runs (`scalwsd/fuzz/targets.rs`):
//! a fault fixed once stays fixed, without nightly or libFuzzer. The corpora
//! were minimised (`cargo fuzz cmin`) after the runs in `docs/security.md`.

use std::path::Path;

#[path = "../../fuzz/targets.rs"]
mod targets;

/// Runs `target` on every file of `seeds/NAME` (written by hand),
/// `corpus/NAME` (what the fuzzer kept) and `regressions/NAME` (inputs that
/// once failed), naming the file that fails.
fn replay(name: &str, target: fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut inputs = 0;
    for kind in ["seeds", "corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(kind).join(name)) else {
            continue;
        };
        let mut paths: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
        paths.sort();
        for path in paths {
            // A fuzzer running meanwhile replaces corpus files as it shrinks them.
            let Ok(data) = std::fs::read(&path) else {
                continue;
            };
            let outcome = std::panic::catch_unwind(|| target(&data));
            assert!(outcome.is_ok(), "{name}: {} fails", path.display());
            inputs += 1;
        }
    }
    assert!(inputs > 0, "{name}: no corpus under {}", root.display());
}

#[test]
fn config() {
    replay("config", targets::config);
}

#[test]
fn host() {
    replay("host", targets::host);
}

#[test]
fn path() {
    replay("path", targets::path);
}

#[test]
fn routes() {
    replay("routes", targets::routes);
}

#[test]
fn cache() {
    replay("cache", targets::cache);
}

#[test]
fn http1() {
    replay("http1", targets::http1);
}
