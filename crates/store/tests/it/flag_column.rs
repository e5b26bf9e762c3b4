//! `index check` compares the index's flags column with the message records, and
//! `--repair` (`UserStore::repair_flag_column`) rewrites it from them.

use maildex_store::{Difference, Uid};

use crate::support::{deliver_many, Scratch};

/// Empties the user's `flags` database with heed, as a fault or an older build could
/// leave it, while no store has the env open.
fn empty_the_flags_column(s: &Scratch) {
    // SAFETY: the env is not open in this process (the store was dropped)
    let env = unsafe {
        heed::EnvOpenOptions::new()
            .max_dbs(24)
            .open(&s.index)
            .unwrap()
    };
    let db: heed::Database<heed::types::Bytes, heed::types::Bytes> = env
        .create_databases_and_commit(env.write_txn().unwrap(), |dbo, w| {
            dbo.create_database(w, Some("flags"))
                .map(heed::CommitOrAbort::<_, ()>::Commit)
        })
        .unwrap()
        .unwrap_commit();
    let mut w = env.write_txn().unwrap();
    assert!(!db.is_empty(&w).unwrap());
    db.clear(&mut w).unwrap();
    w.commit().unwrap();
    env.prepare_for_closing().wait();
}

fn column_diffs(diffs: &[Difference]) -> Vec<Uid> {
    diffs
        .iter()
        .filter_map(|d| match d {
            Difference::FlagColumn { mailbox, uid } if mailbox == "INBOX" => Some(*uid),
            _ => None,
        })
        .collect()
}

#[test]
fn check_finds_a_flags_column_that_lost_its_entries_and_repair_rewrites_them() {
    let s = Scratch::new();
    let store = s.open();
    deliver_many(&store, "INBOX", 5);
    assert_eq!(column_diffs(&store.check().unwrap()), vec![]);
    drop(store);
    empty_the_flags_column(&s);
    let store = s.open();
    let diffs = store.check().unwrap();
    let uids = column_diffs(&diffs);
    assert_eq!(uids, (1..=5).map(Uid).collect::<Vec<_>>(), "{diffs:?}");
    assert!(diffs
        .iter()
        .all(|d| matches!(d, Difference::FlagColumn { .. })));
    for uid in uids {
        assert!(store.repair_flag_column("INBOX", uid).unwrap());
    }
    assert_eq!(store.check().unwrap(), vec![]);
}
