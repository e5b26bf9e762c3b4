//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`, including
//! the reproducers of bugs the fuzzer found) through the same invariant
//! checks the cargo-fuzz targets run, so CI covers them on stable.

#[path = "support/oracle_check.rs"]
mod oracle_check;

use std::fs;
use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut n = 0;
    for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = fs::read(&path).unwrap();
        let r = std::panic::catch_unwind(|| check(&data));
        assert!(r.is_ok(), "{target}: {} fails its check", path.display());
        n += 1;
    }
    assert!(n > 0, "empty corpus {}", dir.display());
}

#[test]
fn receiver_corpus() {
    replay("receiver", maildex_imap_proto::fuzzing::receiver);
}

#[test]
fn command_corpus() {
    replay("command", maildex_imap_proto::fuzzing::command);
}

#[test]
fn oracle_corpus() {
    replay("oracle", oracle_check::differential);
}
