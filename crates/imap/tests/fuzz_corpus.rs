//! Replays the committed corpus of the whole-server fuzz target
//! (`fuzz/corpus/session/`, including the reproducers of bugs it found) through the same
//! harness (`maildex_imap::fuzzing`), so CI covers them on stable, and checks that the
//! harness really reaches each state.

use std::fs;
use std::path::Path;

use maildex_imap::fuzzing::Harness;

#[test]
fn session_corpus() {
    let h = Harness::new();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/session");
    let mut n = 0;
    for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = fs::read(&path).unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h.run(&data)));
        assert!(r.is_ok(), "session: {} fails", path.display());
        n += 1;
    }
    assert!(n > 0, "empty corpus {}", dir.display());
}

/// The three states are what the harness says they are: a command that needs each state
/// succeeds there.
#[test]
fn the_harness_reaches_every_state() {
    let h = Harness::new();
    let text = |input: &[u8]| String::from_utf8_lossy(&h.session(input)).into_owned();
    let out = text(b"x CAPABILITY\r\n");
    assert!(out.starts_with("* OK") && out.contains("x OK"), "{out}");
    let out = text(b"p1 LOGIN alice pw\r\nx STATUS INBOX (MESSAGES)\r\n");
    assert!(
        out.contains("(MESSAGES 3)") && out.contains("x OK"),
        "{out}"
    );
    let out = text(b"p1 LOGIN alice pw\r\np2 SELECT INBOX\r\nx FETCH 2 BODY.PEEK[1]\r\n");
    assert!(out.contains("* 2 FETCH") && out.contains("x OK"), "{out}");
    // the client closing mid-literal ends the session too
    let out = text(b"p1 LOGIN alice pw\r\nx APPEND INBOX {100+}\r\nshort");
    assert!(out.contains("p1 OK"), "{out}");
}
