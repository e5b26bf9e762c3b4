//! A sync after this process's own flag changes and expunges does not list the folder
//! (issue 17: the rescan before a QRESYNC), while another process's change is always
//! found, even in the same timestamp tick as ours (`crates/store/src/sync_watch.rs`).

use std::fs::{File, FileTimes};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use maildex_store::{sync_watch, FlagOp, Flags, SyncReport, Uid, UserStore};

use crate::support::{deliver_many, inbox_states, make_folder, message, put_file, Scratch};

/// Times INBOX's folders were listed since they became tracked.
fn listings(s: &Scratch) -> u64 {
    sync_watch::listings(&s.maildir).expect("INBOX watched")
}

/// A store with `n` messages delivered to INBOX and INBOX synced (its watch's baseline).
fn synced(n: usize) -> (Scratch, UserStore) {
    let s = Scratch::new();
    let store = s.open();
    deliver_many(&store, "INBOX", n);
    store.sync_mailbox("INBOX").unwrap();
    (s, store)
}

fn uids(store: &UserStore) -> Vec<Uid> {
    inbox_states(store).into_iter().map(|(u, _)| u).collect()
}

/// (mtime of new/, mtime of cur/).
fn mtimes(dir: &Path) -> [SystemTime; 2] {
    ["new", "cur"].map(|sub| {
        std::fs::metadata(dir.join(sub))
            .unwrap()
            .modified()
            .unwrap()
    })
}

/// Puts the folders' mtimes back: as if a change had come in the same tick as the last.
fn put_back(dir: &Path, times: [SystemTime; 2]) {
    for (sub, t) in ["new", "cur"].into_iter().zip(times) {
        File::open(dir.join(sub))
            .unwrap()
            .set_times(FileTimes::new().set_modified(t))
            .unwrap();
    }
}

#[test]
fn own_flag_changes_and_expunges_are_not_listed_again() {
    let (s, store) = synced(60);
    let all = uids(&store);
    let before = listings(&s);
    // one at a time, as sessions send them; the messages are in new/ (moved to cur/)
    for &uid in &all[..20] {
        store
            .set_flags("INBOX", &[uid], FlagOp::Add, Flags::SEEN, &[], None)
            .unwrap();
    }
    store
        .set_flags(
            "INBOX",
            &all[10..30],
            FlagOp::Add,
            Flags::FLAGGED,
            &[],
            None,
        )
        .unwrap();
    for &uid in &all[40..50] {
        store
            .set_flags("INBOX", &[uid], FlagOp::Add, Flags::DELETED, &[], None)
            .unwrap();
        assert_eq!(store.expunge("INBOX", Some(&[uid])).unwrap(), vec![uid]);
    }
    let report = store.sync_mailbox("INBOX").unwrap();
    assert_eq!(report.unchanged, 1, "{report:?}");
    assert_eq!(listings(&s), before, "the folder was listed again");
    let states = inbox_states(&store);
    assert_eq!(states.len(), 50);
    assert!(states
        .iter()
        .filter(|(u, _)| all[..20].contains(u))
        .all(|(_, st)| st.flags & Flags::SEEN.0 != 0 && !st.in_new));
    // the index is what the files say
    assert_eq!(store.check().unwrap(), vec![]);
}

/// Syncs `mailbox` until `done` holds of the report (a removal waits for settled folders).
fn sync_until(store: &UserStore, mailbox: &str, done: impl Fn(&SyncReport) -> bool) -> SyncReport {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = store.sync_mailbox(mailbox).unwrap();
        if done(&r) || Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn another_process_change_in_the_tick_of_our_own_is_found() {
    type Foreign = fn(&Path, &str);
    type Found = fn(&SyncReport) -> bool;
    let rename: Foreign = |dir, name| {
        let base = name.split(':').next().unwrap();
        std::fs::rename(
            dir.join("cur").join(name),
            dir.join("cur").join(format!("{base}:2,FS")),
        )
        .unwrap();
    };
    let drop_new: Foreign = |dir, _| {
        put_file(dir, "new", "1900000000.M1P1.other", &message("other"));
    };
    let unlink: Foreign = |dir, name| std::fs::remove_file(dir.join("cur").join(name)).unwrap();
    let cases: [(&str, Foreign, Found); 3] = [
        ("rename", rename, |r| r.updated == 1),
        ("new file", drop_new, |r| r.added == 1),
        ("unlink", unlink, |r| r.removed == 1),
    ];
    for (what, foreign, found) in cases {
        let (s, store) = synced(3);
        let uid = uids(&store)[1];
        store
            .set_flags("INBOX", &[uid], FlagOp::Add, Flags::SEEN, &[], None)
            .unwrap();
        let ours = mtimes(&s.maildir);
        let name = inbox_states(&store)
            .into_iter()
            .find(|(u, _)| *u == uid)
            .unwrap()
            .1
            .file_name;
        foreign(&s.maildir, &name);
        put_back(&s.maildir, ours);
        let before = listings(&s);
        let r = sync_until(&store, "INBOX", found);
        assert!(found(&r), "{what}: not found: {r:?}");
        assert!(listings(&s) > before, "{what}");
        assert_eq!(store.check().unwrap(), vec![], "{what}");
    }
}

#[test]
fn a_rename_made_outside_the_store_counts_as_another_process_change() {
    let (s, store) = synced(3);
    let all = uids(&store);
    store
        .set_flags("INBOX", &[all[0]], FlagOp::Add, Flags::SEEN, &[], None)
        .unwrap();
    assert_eq!(store.sync_mailbox("INBOX").unwrap().unchanged, 1);
    // the rename a STORE of \Seen would make, made by hand: nothing confirmed it
    let name = inbox_states(&store)[1].1.file_name.clone();
    let base = name.split(':').next().unwrap().to_string();
    std::fs::rename(
        s.maildir.join("new").join(&name),
        s.maildir.join("cur").join(format!("{base}:2,S")),
    )
    .unwrap();
    let before = listings(&s);
    let r = store.sync_mailbox("INBOX").unwrap();
    assert_eq!((r.unchanged, r.updated), (0, 1), "{r:?}");
    assert_eq!(listings(&s), before + 1);
    assert_eq!(store.check().unwrap(), vec![]);
}

#[test]
fn a_folder_replaced_under_its_name_is_listed() {
    let s = Scratch::new();
    let store = s.open();
    store.create_mailbox("Foo").unwrap();
    store
        .deliver("Foo", &mut &message("old")[..], &Default::default())
        .unwrap();
    store.sync_mailbox("Foo").unwrap();
    let foo = s.maildir.join(".Foo");
    let times = mtimes(&foo);
    // another tool renames the folder away and puts another in its place, with the
    // same directory times: no event reaches the old folder's watch
    std::fs::rename(&foo, s.maildir.join(".Old")).unwrap();
    make_folder(&foo);
    put_file(&foo, "cur", "1900000000.M1P1.other:2,", &message("other"));
    // the same dovecot-uidlist (same inode, size and time): only new/ and cur/ differ
    std::fs::hard_link(
        s.maildir.join(".Old/dovecot-uidlist"),
        foo.join("dovecot-uidlist"),
    )
    .unwrap();
    put_back(&foo, times);
    let r = store.sync_mailbox("Foo").unwrap();
    assert_eq!(r.added, 1, "{r:?}");
}

#[test]
fn a_move_out_leaves_the_source_unlisted() {
    let (s, store) = synced(10);
    store.create_mailbox("Archive").unwrap();
    let all = uids(&store);
    let before = listings(&s);
    let moved = store.move_messages("INBOX", "Archive", &all[..4]).unwrap();
    assert_eq!(moved.pairs.len(), 4);
    let r = store.sync_mailbox("INBOX").unwrap();
    assert_eq!(r.unchanged, 1, "{r:?}");
    assert_eq!(listings(&s), before, "INBOX was listed");
    assert_eq!(inbox_states(&store).len(), 6);
    assert_eq!(store.check().unwrap(), vec![]);
}
