//! Replays the committed fuzz corpus (`fuzz/corpus/summary/`, including
//! the reproducers of bugs the fuzzer found) and every golden message
//! through the invariant check the cargo-fuzz target runs, so CI covers
//! them on stable.

use std::fs;
use std::path::Path;

fn replay(dir: &Path, suffix: &str) -> usize {
    let mut n = 0;
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(suffix) {
            continue;
        }
        let data = fs::read(&path).unwrap();
        let r = std::panic::catch_unwind(|| maildex_mime::fuzzing::summary(&data));
        assert!(r.is_ok(), "{} fails its check", path.display());
        n += 1;
    }
    n
}

#[test]
fn summary_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/summary");
    assert!(replay(&dir, "") > 0, "empty corpus {}", dir.display());
}

#[test]
fn golden_messages_hold_the_summary_invariants() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    assert!(replay(&dir, ".eml") > 40);
}
