//! The full text written after the listing records (issues 18 #3, 19 #1): delivery and
//! rebuild write no `fts-text`/`fts-sig` record, the pending messages are indexed by
//! `index_pending_text` in steps, and a message expunged meanwhile never gets a record.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use crate::support::{message, Scratch};
use maildex_index::Fts;
use maildex_maildir::Flags;
use maildex_store::{DeliverOptions, FlagOp, MailboxId, Uid, UserStore};

fn deliver(store: &UserStore, n: usize) {
    for i in 0..n {
        let mut m = message(&format!("note {i}"));
        m.extend_from_slice(format!("needle{i} and the common word\n").as_bytes());
        store
            .deliver("INBOX", &mut &m[..], &DeliverOptions::default())
            .unwrap();
    }
}

/// The UIDs of INBOX with a text record, and with a signature.
fn with_text(store: &UserStore) -> (BTreeSet<u32>, BTreeSet<u32>) {
    let id = store
        .index()
        .read(|r| r.mailbox_id("INBOX"))
        .unwrap()
        .unwrap();
    let column = |c: Fts| {
        let mut out = BTreeSet::new();
        store
            .index()
            .read(|r| {
                r.for_each_fts(c, id, Uid::MIN..=Uid::MAX, |uid, _| {
                    out.insert(uid.get());
                    Ok(ControlFlow::Continue(()))
                })
            })
            .unwrap();
        out
    };
    (column(Fts::Text), column(Fts::Sig))
}

fn pending(store: &UserStore) -> usize {
    store.pending_texts().unwrap().iter().map(|(_, n)| n).sum()
}

#[test]
fn delivery_writes_no_text_and_the_pending_messages_are_indexed_in_steps() {
    let s = Scratch::new();
    let store = s.open();
    deliver(&store, 150);
    // listing records all there, no full text
    assert_eq!(
        store.index().read(|r| r.uids(MailboxId(1))).unwrap().len(),
        150
    );
    assert_eq!(with_text(&store).0.len(), 0);
    assert_eq!(pending(&store), 150);
    // in steps of 64 from a cursor, in UID order
    let first = store.index_pending_text("INBOX", Uid::MIN, 64).unwrap();
    assert_eq!((first.written, first.unreadable), (64, 0));
    assert_eq!(first.next, Some(Uid(65)));
    assert_eq!(with_text(&store).0, (1..=64).collect());
    assert_eq!(pending(&store), 86);
    let second = store.index_pending_text("INBOX", Uid(65), 64).unwrap();
    assert_eq!(second.next, Some(Uid(129)));
    let last = store.index_pending_text("INBOX", Uid(129), 64).unwrap();
    assert_eq!((last.written, last.next), (22, None));
    let (text, sig) = with_text(&store);
    assert_eq!(text, (1..=150).collect());
    assert_eq!(sig, text);
    assert_eq!(pending(&store), 0);
    assert_eq!(store.check().unwrap(), vec![]);
    // nothing left: a walk writes nothing
    let again = store.index_pending_text("INBOX", Uid::MIN, 64).unwrap();
    assert_eq!((again.written, again.next), (0, None));
}

#[test]
fn a_gap_left_by_an_unreadable_file_is_walked_past_and_filled_later() {
    let s = Scratch::new();
    let store = s.open();
    deliver(&store, 40);
    // the file of UID 10 is out of reach (another tool renamed it: a sync will tell)
    let state = store
        .index()
        .read(|r| r.state(MailboxId(1), Uid(10)))
        .unwrap()
        .unwrap();
    let file = s.maildir.join("new").join(&state.file_name);
    let aside = s.dir.path().join("aside");
    std::fs::rename(&file, &aside).unwrap();
    let pass = store.index_pending_text("INBOX", Uid::MIN, 100).unwrap();
    assert_eq!((pass.written, pass.unreadable, pass.next), (39, 1, None));
    assert_eq!(pending(&store), 1);
    // UIDs above it got their records in place: a later one fills the gap
    std::fs::rename(&aside, &file).unwrap();
    let pass = store.index_pending_text("INBOX", Uid::MIN, 100).unwrap();
    assert_eq!((pass.written, pass.unreadable), (1, 0));
    assert_eq!(with_text(&store).0, (1..=40).collect());
    assert_eq!(store.check().unwrap(), vec![]);
}

#[test]
fn an_expunge_racing_the_indexer_leaves_no_record_of_an_expunged_uid() {
    let s = Scratch::new();
    let store = s.open();
    deliver(&store, 400);
    let odd: Vec<Uid> = (1..=400).filter(|u| u % 2 == 1).map(Uid).collect();
    std::thread::scope(|scope| {
        let indexer = scope.spawn(|| {
            let mut from = Uid::MIN;
            while let Some(next) = store.index_pending_text("INBOX", from, 16).unwrap().next {
                from = next;
            }
        });
        // expunged in small bites while the indexer walks
        for chunk in odd.chunks(10) {
            store
                .set_flags("INBOX", chunk, FlagOp::Add, Flags::DELETED, &[], None)
                .unwrap();
            store.expunge("INBOX", Some(chunk)).unwrap();
        }
        indexer.join().unwrap();
    });
    store
        .index_pending_text("INBOX", Uid::MIN, usize::MAX)
        .unwrap();
    let (text, sig) = with_text(&store);
    let even: BTreeSet<u32> = (1..=400).filter(|u| u % 2 == 0).collect();
    assert_eq!(
        text, even,
        "a record of an expunged UID, or a message left out"
    );
    assert_eq!(sig, even);
    assert_eq!(store.check().unwrap(), vec![]);
}

#[test]
fn rebuild_commits_the_listing_records_before_any_full_text() {
    let s = Scratch::new();
    let store = s.open();
    deliver(&store, 40);
    store
        .index_pending_text("INBOX", Uid::MIN, usize::MAX)
        .unwrap();
    // the listing phase: every message listed again, no full text yet
    let report = store.rebuild(&mut |_| {}).unwrap();
    assert_eq!(report.sync.added, 40);
    assert_eq!(
        store.index().read(|r| r.uids(MailboxId(1))).unwrap().len(),
        40
    );
    assert_eq!(pending(&store), 40);
    // then the full text, reported by messages
    let mut seen = Vec::new();
    let t = store
        .index_all_pending_text(&mut |p| seen.push((p.done, p.total, p.messages)))
        .unwrap();
    assert_eq!((t.written, t.unreadable), (40, 0));
    assert_eq!(seen.last(), Some(&(1, 1, 40)));
    assert_eq!(pending(&store), 0);
    assert_eq!(store.check().unwrap(), vec![]);
}
