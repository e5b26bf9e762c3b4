//! Issues 18 #3 and 19 #1: the full text is indexed after delivery, by the daemon's
//! background indexer (woken by commits) or by the SEARCH that needs it first; an answer
//! never misses a delivered message and never names an expunged one.

use super::search_index::uids;
use crate::support::daemon::Server;

/// A message holding `word` in its body.
fn message(i: usize, word: &str) -> String {
    format!(
        "From: a@example.org\nTo: alice@example.org\nSubject: note {i}\n\
         Message-ID: <n{i}@example.org>\n\nline {i} with {word} inside\n"
    )
}

#[test]
fn a_message_is_found_by_search_body_right_after_its_250() {
    let s = Server::start();
    let mut c = s.login("alice");
    c.ok("SELECT INBOX");
    for i in 1..=20u32 {
        // no wait for the indexer: the SEARCH indexes what it compares
        s.deliver("alice", &message(i as usize, &format!("word{i}x")));
        c.ok("NOOP");
        assert_eq!(
            uids(&mut c, &format!("UID SEARCH BODY word{i}x")),
            vec![i],
            "message {i}"
        );
    }
    s.wait_text_indexed("alice");
    s.assert_clean("alice");
}

#[test]
fn the_background_indexer_writes_the_text_without_any_search() {
    let s = Server::start();
    for i in 1..=50 {
        s.deliver("alice", &message(i, "plain"));
    }
    // no IMAP session: only the indexer, woken by the deliveries' commits
    s.wait_text_indexed("alice");
    s.assert_clean("alice");
    // and every file is read before: emptied now, the answers are the stored text's
    for f in s.files("alice", "INBOX") {
        std::fs::write(&f, b"").unwrap();
    }
    let mut c = s.login("alice");
    c.ok("SELECT INBOX");
    assert_eq!(uids(&mut c, "UID SEARCH BODY \"line 7 \""), vec![7]);
    assert_eq!(uids(&mut c, "UID SEARCH BODY plain").len(), 50);
}

#[test]
fn an_expunge_racing_the_indexer_leaves_no_record_and_search_never_answers_it() {
    let s = Server::start();
    for i in 1..=200 {
        s.deliver("alice", &message(i, "needle"));
    }
    let mut c = s.login("alice");
    c.ok("SELECT INBOX");
    // while the indexer works through the 200: every odd UID expunged, a few at a time,
    // with searches in between
    for start in (1..=200u32).step_by(20) {
        let odd: Vec<String> = (start..start + 20)
            .filter(|u| u % 2 == 1)
            .map(|u| u.to_string())
            .collect();
        c.ok(&format!(
            "UID STORE {} +FLAGS.SILENT (\\Deleted)",
            odd.join(",")
        ));
        c.ok("EXPUNGE");
        let found = uids(&mut c, "UID SEARCH BODY needle");
        assert!(
            found.iter().all(|u| u % 2 == 0 || *u > start + 19),
            "{found:?}"
        );
    }
    s.wait_text_indexed("alice");
    let even: Vec<u32> = (1..=200).filter(|u| u % 2 == 0).collect();
    assert_eq!(uids(&mut c, "UID SEARCH BODY needle"), even);
    assert_eq!(text_uids(&s), even, "text records of expunged UIDs");
    s.assert_clean("alice");
}

#[test]
fn a_rebuild_that_defers_the_text_leaves_it_to_the_daemon() {
    let s = Server::start();
    for i in 1..=30 {
        s.deliver("alice", &message(i, "again"));
    }
    s.wait_text_indexed("alice");
    let u = s.accounts.lookup("alice").unwrap().unwrap();
    let store = s.accounts.store(&u).unwrap();
    // what `index rebuild --defer-text` does: the listing records only
    let report = store.rebuild(&mut |_| {}).unwrap();
    assert_eq!(report.sync.added, 30);
    // the daemon indexes them, without a SEARCH; not a difference meanwhile
    s.assert_clean("alice");
    s.wait_text_indexed("alice");
    assert_eq!(text_uids(&s), (1..=30).collect::<Vec<u32>>());
    let mut c = s.login("alice");
    c.ok("SELECT INBOX");
    assert_eq!(uids(&mut c, "UID SEARCH BODY again").len(), 30);
}

#[test]
fn the_indexer_waits_while_a_session_command_runs_and_is_not_starved_by_one() {
    let s = Server::start();
    s.deliver("alice", &message(0, "first"));
    s.wait_text_indexed("alice");
    let u = s.accounts.lookup("alice").unwrap().unwrap();
    let store = s.accounts.store(&u).unwrap();
    // what a session holds while its command runs (a listing right after a bulk delivery);
    // the indexer waits for the commands of every user, at most a second a batch
    let command = store.foreground();
    // few, and looked at soon: the indexer waits at most a second from the first one
    for i in 1..=3 {
        s.deliver("alice", &message(i, "busy"));
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(
        text_uids(&s),
        vec![1],
        "no text written while the command runs"
    );
    // a command that never ends defers the text; it does not stop it
    s.wait_text_indexed("alice");
    assert_eq!(text_uids(&s), (1..=4).collect::<Vec<u32>>());
    drop(command);
}

/// UIDs of alice's INBOX with a full-text record.
fn text_uids(s: &Server) -> Vec<u32> {
    let u = s.accounts.lookup("alice").unwrap().unwrap();
    let store = s.accounts.store(&u).unwrap();
    store
        .index()
        .read(|r| {
            let id = r.mailbox_id("INBOX")?.expect("INBOX");
            let mut out = Vec::new();
            r.for_each_fts(
                maildex_store::records::Fts::Text,
                id,
                maildex_store::Uid::MIN..=maildex_store::Uid::MAX,
                |uid, _| {
                    out.push(uid.get());
                    Ok(std::ops::ControlFlow::Continue(()))
                },
            )?;
            Ok(out)
        })
        .unwrap()
}
