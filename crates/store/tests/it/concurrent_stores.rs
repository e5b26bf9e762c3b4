//! Writes of one mailbox side by side (issue 15 #22): STOREs and EXPUNGEs of different
//! messages and an APPEND do not wait for each other, so their index updates meet in one
//! group commit; a STORE of a message another STORE is changing still waits for it.
//!
//! Both tests hold the index's group-commit leader inside a write of their own (it waits
//! for the test's signal), so every STORE that reaches its commit meanwhile stays queued
//! (`Index::queued`) where the test can count it.

use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use maildex_maildir::Flags;
use maildex_store::{DeliverOptions, FlagOp, FlagsOutcome, ModSeq, Uid, UserStore};

use crate::support::{message, Scratch};

/// A write that leads a group commit until `release` is dropped or sent to.
fn hold_the_writer(store: &Arc<UserStore>) -> (JoinHandle<()>, mpsc::Sender<()>) {
    let (started_tx, started_rx) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let index = Arc::clone(store.index());
    let leader = std::thread::spawn(move || {
        index
            .write(move |_| {
                started_tx.send(()).expect("test waits");
                let _ = released.recv();
                Ok(())
            })
            .expect("the held write");
    });
    started_rx.recv().expect("the held write began");
    (leader, release)
}

/// Whether `cond` came true within `limit` (polled).
fn within(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let until = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn store_in_thread(
    store: &Arc<UserStore>,
    uid: Uid,
    flag: Flags,
    unchanged_since: Option<ModSeq>,
) -> JoinHandle<FlagsOutcome> {
    let store = Arc::clone(store);
    std::thread::spawn(move || {
        store
            .set_flags("INBOX", &[uid], FlagOp::Add, flag, &[], unchanged_since)
            .expect("STORE")
    })
}

fn delivered(store: &UserStore, n: usize) -> Vec<(Uid, ModSeq)> {
    (0..n)
        .map(|i| {
            let d = store
                .deliver(
                    "INBOX",
                    &mut &message(&format!("m{i}"))[..],
                    &DeliverOptions::default(),
                )
                .expect("deliver");
            (d.uid, d.modseq)
        })
        .collect()
}

/// The writes since commit count `before` went into one commit, and the index matches the
/// Maildir.
fn shared_one_commit(store: &UserStore, before: u64, writes: &str) {
    let commits = store.index().commits() - before;
    assert_eq!(commits, 1, "{writes} should have shared one commit");
    assert!(store.check().expect("check").is_empty());
}

/// Before: every STORE held its mailbox's lock through its index commit, so the second
/// STORE reached the index only after the first one's commit, and each paid its own.
#[test]
fn stores_of_different_messages_share_one_commit() {
    let s = Scratch::new();
    let store = Arc::new(s.open());
    let msgs = delivered(&store, 2);
    let before = store.index().commits();
    let (leader, release) = hold_the_writer(&store);
    let a = store_in_thread(&store, msgs[0].0, Flags::SEEN, None);
    let b = store_in_thread(&store, msgs[1].0, Flags::FLAGGED, None);
    let both_queued = within(Duration::from_secs(30), || store.index().queued() == 2);
    drop(release);
    leader.join().expect("held write");
    let (a, b) = (a.join().expect("STORE a"), b.join().expect("STORE b"));
    assert!(
        both_queued,
        "the second STORE did not reach the index while the first one's commit waited"
    );
    assert!(
        a.messages[0].changed && b.messages[0].changed,
        "{a:?} {b:?}"
    );
    assert_ne!(a.messages[0].modseq, b.messages[0].modseq);
    shared_one_commit(&store, before, "the two STOREs");
}

/// Before: an EXPUNGE and a delivery held the mailbox exclusively too, each through its
/// own commit, and a STORE queued behind them.
#[test]
fn a_store_an_expunge_and_a_delivery_share_one_commit() {
    let s = Scratch::new();
    let store = Arc::new(s.open());
    let a = delivered(&store, 1)[0].0;
    let deleted = DeliverOptions {
        flags: Flags::DELETED,
        ..DeliverOptions::default()
    };
    let b = store
        .deliver("INBOX", &mut &message("b")[..], &deleted)
        .expect("deliver b")
        .uid;
    let before = store.index().commits();
    let (leader, release) = hold_the_writer(&store);
    let storing = store_in_thread(&store, a, Flags::SEEN, None);
    let expunging = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || store.expunge("INBOX", Some(&[b])).expect("EXPUNGE"))
    };
    let delivering = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            let msg = message("c");
            let opts = DeliverOptions::default();
            store
                .deliver("INBOX", &mut &msg[..], &opts)
                .expect("deliver c")
        })
    };
    let all_queued = within(Duration::from_secs(30), || store.index().queued() == 3);
    drop(release);
    leader.join().expect("held write");
    let stored = storing.join().expect("STORE");
    let expunged = expunging.join().expect("EXPUNGE");
    let c = delivering.join().expect("delivery");
    assert!(all_queued, "the writes did not reach the index together");
    assert!(stored.messages[0].changed, "{stored:?}");
    assert_eq!(expunged, vec![b]);
    assert!(c.uid > b);
    shared_one_commit(&store, before, "the three writes");
}

/// RFC 7162 §3.1.3: UNCHANGEDSINCE compares the modseq the message has when the STORE
/// changes it, so a STORE of a message another STORE is changing must wait for that one's
/// commit and then find the message modified, rather than read the record from before it.
#[test]
fn a_store_of_a_message_another_store_is_changing_waits_for_it() {
    let s = Scratch::new();
    let store = Arc::new(s.open());
    let (uid, modseq) = delivered(&store, 1)[0];
    let (leader, release) = hold_the_writer(&store);
    let first = store_in_thread(&store, uid, Flags::SEEN, None);
    assert!(
        within(Duration::from_secs(30), || store.index().queued() == 1),
        "the first STORE never reached the index"
    );
    let second = store_in_thread(&store, uid, Flags::FLAGGED, Some(modseq));
    // the second must not get past the first: give it time to try
    let overtook = within(Duration::from_millis(500), || store.index().queued() == 2);
    drop(release);
    leader.join().expect("held write");
    let (first, second) = (first.join().expect("first"), second.join().expect("second"));
    assert!(
        !overtook,
        "a STORE of the same message ran beside the first"
    );
    assert!(first.messages[0].changed, "{first:?}");
    assert_eq!(second.modified, vec![uid], "{second:?}");
    assert!(second.messages.is_empty(), "{second:?}");
}
