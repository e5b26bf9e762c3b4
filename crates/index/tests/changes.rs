//! The change log: "what changed since MODSEQ m" reads only the changed records, and
//! agrees with a scan of the whole mailbox whatever the history.

use std::collections::{BTreeMap, BTreeSet};

use maildex_index::{flag, Index, MessageRecord, MessageState, ModSeq, OpenOptions, Uid};
use proptest::prelude::*;

fn open(dir: &std::path::Path) -> std::sync::Arc<Index> {
    let opts = OpenOptions {
        map_size: 16 << 20,
        durable: false,
        sync_delay: None,
    };
    Index::open(dir, &opts).unwrap()
}

fn batch(uids: impl Iterator<Item = u32>) -> Vec<(Uid, MessageRecord, Vec<u8>)> {
    uids.map(|uid| {
        let rec = MessageRecord {
            state: MessageState {
                file_name: format!("{uid}.M1P1.host,S=10:2,"),
                vsize: 10,
                ..MessageState::default()
            },
            ..MessageRecord::default()
        };
        (Uid(uid), rec, Vec::new())
    })
    .collect()
}

#[test]
fn changes_since_reads_only_the_changed_records_of_a_large_mailbox() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let (id, seen) = index
        .write(|w| {
            let id = w.create_mailbox("INBOX", 1)?;
            w.insert_messages(id, batch(1..=10_000))?;
            Ok((id, w.reader().require_mailbox(id)?.highest_modseq))
        })
        .unwrap();
    // 100 flag changes and 50 expunges, in other transactions (as STORE and EXPUNGE are)
    let flagged: Vec<Uid> = (0..100).map(|i| Uid(17 + i * 97)).collect();
    let expunged: Vec<Uid> = (0..50).map(|i| Uid(40 + i * 199)).collect();
    assert!(flagged.iter().all(|u| !expunged.contains(u)));
    for &uid in &flagged {
        index
            .write(move |w| w.update_message(id, uid, flag::SEEN, 0, "renamed:2,S", false))
            .unwrap();
    }
    for &uid in &expunged {
        index.write(move |w| w.remove_message(id, uid)).unwrap();
    }
    let set = index.read(|r| r.changes_since(id, seen)).unwrap();
    let changed: Vec<Uid> = set.changed.iter().map(|(u, _)| *u).collect();
    assert_eq!(changed, flagged, "UID order");
    assert!(set.changed.iter().all(|(_, s)| s.flags == flag::SEEN));
    assert_eq!(set.expunged, Some(expunged.clone()));
    // one change-log entry and one state per changed message, one tombstone per expunge
    assert_eq!(set.records_read, 2 * 100 + 50);
    // nothing since now; and the same answer as a scan of the whole mailbox
    let top = index
        .read(|r| Ok(r.require_mailbox(id)?.highest_modseq))
        .unwrap();
    let none = index.read(|r| r.changes_since(id, top)).unwrap();
    assert!(none.changed.is_empty() && none.expunged == Some(Vec::new()));
    assert_eq!(none.records_read, 0);
    let scanned: Vec<Uid> = index
        .read(|r| r.states(id))
        .unwrap()
        .into_iter()
        .filter(|(_, s)| s.modseq > seen)
        .map(|(u, _)| u)
        .collect();
    assert_eq!(scanned, flagged);
}

#[test]
fn a_cleared_mailbox_says_its_expunge_history_is_gone() {
    // rebuild clears a mailbox's records and indexes it again: a client that synced
    // before cannot be told what was expunged meanwhile (RFC 7162 §3.2.5.2: full list)
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let (id, seen) = index
        .write(|w| {
            let id = w.create_mailbox("INBOX", 1)?;
            w.insert_messages(id, batch(1..=20))?;
            w.remove_message(id, Uid(3))?;
            Ok((id, w.reader().require_mailbox(id)?.highest_modseq))
        })
        .unwrap();
    index
        .write(move |w| {
            w.clear_messages(id)?;
            w.insert_messages(id, batch((1..=20).filter(|&u| u != 3 && u != 7)))?;
            Ok(())
        })
        .unwrap();
    let set = index.read(|r| r.changes_since(id, seen)).unwrap();
    assert_eq!(set.expunged, None);
    assert_eq!(set.changed.len(), 18, "every message was indexed again");
    let after = index
        .read(|r| Ok(r.require_mailbox(id)?.highest_modseq))
        .unwrap();
    index.write(move |w| w.remove_message(id, Uid(9))).unwrap();
    let set = index.read(|r| r.changes_since(id, after)).unwrap();
    assert_eq!(set.expunged, Some(vec![Uid(9)]));
    assert!(set.changed.is_empty());
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Vec<u32>),
    Flag(u32, u8),
    Remove(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        proptest::collection::vec(1u32..80, 1..6).prop_map(Op::Insert),
        (1u32..80, 0u8..4).prop_map(|(u, f)| Op::Flag(u, f)),
        (1u32..80).prop_map(Op::Remove),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// After any history, for every modseq a client can have seen, the change log
    /// answers what a scan of the mailbox and a log of the expunges answer.
    #[test]
    fn changes_since_agrees_with_a_scan(ops in proptest::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let index = open(dir.path());
        let id = index.write(|w| w.create_mailbox("INBOX", 1)).unwrap();
        let mut seen = vec![index.read(|r| Ok(r.require_mailbox(id)?.highest_modseq)).unwrap()];
        // (modseq of the expunge, uid); a removed UID is never given again, as in IMAP
        let mut expunges: Vec<(ModSeq, u32)> = Vec::new();
        let mut gone = BTreeSet::new();
        for op in ops {
            match op {
                Op::Insert(uids) => {
                    let uids: BTreeSet<u32> =
                        uids.into_iter().filter(|u| !gone.contains(u)).collect();
                    index.write(move |w| w.insert_messages(id, batch(uids.into_iter())).map(drop)).unwrap();
                }
                Op::Flag(uid, f) => {
                    index.write(move |w| w.update_message(id, Uid(uid), f, 0, "n", false).map(drop)).unwrap();
                }
                Op::Remove(uid) => {
                    let at = index.write(move |w| {
                        let removed = w.remove_message(id, Uid(uid))?.is_some();
                        Ok(removed.then_some(w.reader().require_mailbox(id)?.highest_modseq))
                    }).unwrap();
                    if let Some(at) = at {
                        expunges.push((at, uid));
                        gone.insert(uid);
                    }
                }
            }
            seen.push(index.read(|r| Ok(r.require_mailbox(id)?.highest_modseq)).unwrap());
        }
        let states: BTreeMap<Uid, MessageState> =
            index.read(|r| r.states(id)).unwrap().into_iter().collect();
        for m in seen {
            let set = index.read(|r| r.changes_since(id, m)).unwrap();
            let want: Vec<(Uid, MessageState)> = states
                .iter()
                .filter(|(_, s)| s.modseq > m)
                .map(|(u, s)| (*u, s.clone()))
                .collect();
            prop_assert_eq!(&set.changed, &want);
            let mut want_gone: Vec<Uid> =
                expunges.iter().filter(|(at, _)| *at > m).map(|(_, u)| Uid(*u)).collect();
            want_gone.sort_unstable();
            prop_assert_eq!(set.expunged, Some(want_gone));
        }
    }
}
