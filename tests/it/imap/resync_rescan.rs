//! The first QRESYNC after another session's flag changes and expunges through the daemon
//! (issue 17): the index holds every one of them, so the SELECT's sync does not list the
//! folder (`crates/store/src/sync_watch.rs`), and the answer carries them all.

use std::collections::BTreeSet;

use maildex_store::sync_watch;

use crate::support::daemon::Server;

const MESSAGES: u32 = 300;

fn msg(i: u32) -> String {
    format!("From: a@example.net\nSubject: message {i}\n\nbody {i}\n")
}

#[test]
fn a_qresync_after_the_daemons_own_changes_lists_nothing_and_answers_them() {
    let s = Server::start();
    for i in 0..MESSAGES {
        s.deliver("alice", &msg(i));
    }
    let inbox = s.maildir("alice");
    // the client that will come back knows the folder
    let mut c = s.login("alice");
    c.ok("ENABLE QRESYNC");
    let r = c.ok("SELECT INBOX");
    let (v, m) = (r.expect_code("UIDVALIDITY"), r.expect_code("HIGHESTMODSEQ"));
    c.ok("LOGOUT");

    // another session: 100 STOREs and 50 EXPUNGEs, one command each
    let mut other = s.select("alice", "INBOX");
    for uid in 1..=100 {
        other.ok(&format!("UID STORE {uid} +FLAGS.SILENT (\\Flagged)"));
    }
    for uid in 201..=250 {
        other.ok(&format!("UID STORE {uid} +FLAGS.SILENT (\\Deleted)"));
        other.ok(&format!("UID EXPUNGE {uid}"));
    }
    other.ok("LOGOUT");

    let before = sync_watch::listings(&inbox).expect("INBOX is watched while in use");
    let mut c = s.login("alice");
    c.ok("ENABLE QRESYNC");
    let r = c.ok(&format!("SELECT INBOX (QRESYNC ({v} {m} 1:{MESSAGES}))"));
    assert_eq!(
        sync_watch::listings(&inbox),
        Some(before),
        "the SELECT listed the folder"
    );
    // RFC 7162 §3.2.5.2: the expunged UIDs as VANISHED (EARLIER), the changed as FETCH
    assert_eq!(
        r.lines("* VANISHED (EARLIER) "),
        ["* VANISHED (EARLIER) 201:250"]
    );
    let flagged: BTreeSet<u32> = r
        .fetches()
        .iter()
        .filter(|(_, f)| f.text().contains("\\Flagged"))
        .map(|(_, f)| {
            let t = f.text();
            t.split("UID ")
                .nth(1)
                .unwrap()
                .split([' ', ')'])
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(flagged, (1..=100).collect());
    assert_eq!(r.fetches().len(), 100, "only the changed messages");
    assert!(r.expect_code("HIGHESTMODSEQ") > m);
    c.ok("LOGOUT");
    s.assert_clean("alice");
}
