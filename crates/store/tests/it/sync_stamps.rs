//! An unchanged mailbox is not read: a sync compares directory stamps and stops there.

use std::fs::{File, FileTimes};
use std::time::{Duration, SystemTime};

use crate::support::{inbox_states, message, put_file, Scratch};

/// Sets a folder's mtime (as if its last change were `ago` in the past).
fn age(dir: &std::path::Path, to: SystemTime) {
    File::open(dir)
        .unwrap()
        .set_times(FileTimes::new().set_modified(to))
        .unwrap();
}

/// Delivers three messages to INBOX and settles its folders: their last change is a minute
/// old (returned).
fn three_delivered_and_settled(s: &Scratch, store: &maildex_store::UserStore) -> SystemTime {
    for i in 0..3 {
        store
            .deliver(
                "INBOX",
                &mut &message(&format!("m{i}"))[..],
                &Default::default(),
            )
            .unwrap();
    }
    let past = SystemTime::now() - Duration::from_secs(60);
    for sub in ["new", "cur"] {
        age(&s.maildir.join(sub), past);
    }
    past
}

#[test]
fn an_unchanged_mailbox_costs_only_stats_and_a_change_is_seen() {
    let s = Scratch::new();
    let store = s.open();
    let past = three_delivered_and_settled(&s, &store);
    let first = store.sync_mailbox("INBOX").unwrap();
    assert_eq!(
        first.unchanged, 0,
        "stamps changed since the deliveries: the folders are read"
    );
    let second = store.sync_mailbox("INBOX").unwrap();
    assert_eq!(second.unchanged, 1, "{second:?}");

    // Proof that the fast path does not list the folder: a file slipped in with the folder's
    // stamp put back is not seen by a sync of a mailbox without a held watch (a watched
    // one lists after any other process's change: tests/it/sync_watch.rs)...
    maildex_store::sync_watch::forget(&s.maildir);
    put_file(
        &s.maildir,
        "new",
        "1900000000.M1P1.sneaky",
        &message("sneaky"),
    );
    age(&s.maildir.join("new"), past);
    let third = store.sync_mailbox("INBOX").unwrap();
    assert_eq!((third.unchanged, third.added), (1, 0));
    // ...until the stamp moves, as it does whenever a real tool adds a file
    age(&s.maildir.join("new"), past + Duration::from_secs(1));
    maildex_store::sync_watch::forget(&s.maildir);
    let fourth = store.sync_mailbox("INBOX").unwrap();
    assert_eq!((fourth.unchanged, fourth.added), (0, 1));
    assert_eq!(store.check().unwrap(), vec![]);
}

/// A store with one message delivered to INBOX and INBOX synced.
fn one_message_synced() -> (Scratch, maildex_store::UserStore) {
    let s = Scratch::new();
    let store = s.open();
    store
        .deliver("INBOX", &mut &message("a")[..], &Default::default())
        .unwrap();
    store.sync_mailbox("INBOX").unwrap();
    (s, store)
}

#[test]
fn a_folder_changed_within_the_last_second_is_always_read() {
    let (s, store) = one_message_synced();
    // the folders changed just now: equal stamps are not trusted (a change in the same
    // timestamp tick could hide), so every sync lists them (without a held watch: one
    // that saw nothing since the last sync vouches for the folder, tests/it/sync_watch.rs)
    maildex_store::sync_watch::forget(&s.maildir);
    let again = store.sync_mailbox("INBOX").unwrap();
    assert_eq!(again.unchanged, 0, "{again:?}");
}

#[test]
fn a_sync_always_sees_what_was_there_when_it_was_called_even_when_others_run() {
    // Concurrent syncs of one mailbox share a listing when one began after a caller
    // arrived; one that began before must not be reused, or a file dropped just before
    // the call would be missed. Other threads keep syncing the whole time.
    let s = Scratch::new();
    let store = std::sync::Arc::new(s.open());
    let stop = std::sync::atomic::AtomicBool::new(false);
    // stops the other threads however the main one leaves the scope (a failed assert too)
    struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    std::thread::scope(|scope| {
        for _ in 0..3 {
            let store = &store;
            let stop = &stop;
            scope.spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    store.sync_mailbox("INBOX").unwrap();
                }
            });
        }
        let _stop = StopOnDrop(&stop);
        for i in 0..60u32 {
            put_file(
                &s.maildir,
                "new",
                &format!("19000000{i:02}.M1P1.dropped"),
                &message(&format!("d{i}")),
            );
            store.sync_mailbox("INBOX").unwrap();
            let n = store
                .index()
                .read(|r| {
                    let id = r.mailbox_id("INBOX")?.expect("INBOX indexed");
                    Ok(r.require_mailbox(id)?.counts.messages)
                })
                .unwrap();
            assert_eq!(n, i + 1, "the file dropped before sync {i} is indexed");
        }
    });
    assert_eq!(store.check().unwrap(), vec![]);
}

/// Issue 15 #22: `sync_mailbox_fast` looks at the Maildir only when no sync of the mailbox
/// began in the last `FAST_SYNC_INTERVAL`; `sync_mailbox` always does.
#[test]
fn a_fast_sync_right_after_a_sync_reads_nothing_and_a_full_one_still_does() {
    let (s, store) = one_message_synced();
    put_file(
        &s.maildir,
        "new",
        "1900000000.M1P1.othertool",
        &message("b"),
    );
    let fast = store.sync_mailbox_fast("INBOX").unwrap();
    assert_eq!((fast.unchanged, fast.added), (1, 0), "{fast:?}");
    let full = store.sync_mailbox("INBOX").unwrap();
    assert_eq!(full.added, 1, "{full:?}");
    // a store that never synced the mailbox looks at it in a fast sync too
    put_file(
        &s.maildir,
        "new",
        "1900000001.M2P1.othertool",
        &message("c"),
    );
    let other = s.open();
    let first = other.sync_mailbox_fast("INBOX").unwrap();
    assert_eq!(first.added, 1, "{first:?}");
}

/// Renames alone (flag changes, `new/` to `cur/`) since the last complete sync, with
/// dovecot-uidlist unchanged: the index vouches for the UIDs, so the sync neither locks nor
/// reads the list (a 30,000-message folder's rescan spent 40% of its time there). Shown
/// with the list locked by another host's Dovecot meanwhile, which a sync that needs the
/// list waits for; a new file or a vanished one still goes through the list.
#[test]
fn renames_alone_are_synced_without_the_uidlist_and_other_changes_still_use_it() {
    let s = Scratch::new();
    let mut opts = Scratch::options();
    opts.lock_timeout = Duration::from_millis(300);
    let store = maildex_store::UserStore::open(&s.maildir, &s.index, opts).unwrap();
    let past = three_delivered_and_settled(&s, &store);
    store.sync_mailbox("INBOX").unwrap();
    let uids = |store: &maildex_store::UserStore| {
        inbox_states(store)
            .into_iter()
            .map(|(u, st)| (u, st.file_name, st.in_new))
            .collect::<Vec<_>>()
    };
    let before = uids(&store);
    assert_eq!(before.len(), 3);

    // another tool marks the second message \Seen (moving it to cur/) while Dovecot on
    // another host holds the uidlist lock
    let (uid, name, _) = before[1].clone();
    let from = s
        .maildir
        .join(if before[1].2 { "new" } else { "cur" })
        .join(&name);
    let base = name.split(':').next().unwrap().to_string();
    std::fs::rename(&from, s.maildir.join("cur").join(format!("{base}:2,S"))).unwrap();
    for sub in ["new", "cur"] {
        age(&s.maildir.join(sub), past + Duration::from_secs(1));
    }
    let lock = s.maildir.join("dovecot-uidlist.lock");
    std::fs::write(&lock, format!("{}:otherhost.example", std::process::id())).unwrap();
    let synced = store.sync_mailbox("INBOX").unwrap();
    assert_eq!(
        (synced.updated, synced.added, synced.removed),
        (1, 0, 0),
        "{synced:?}"
    );
    let after = uids(&store);
    assert_eq!(after[1], (uid, format!("{base}:2,S"), false));
    assert_eq!((&after[0], &after[2]), (&before[0], &before[2]));
    assert!(lock.exists(), "the lock was left alone");
    let unchanged = store.sync_mailbox("INBOX").unwrap();
    assert_eq!(
        unchanged.unchanged, 1,
        "the stamps were stored: {unchanged:?}"
    );

    // a file the index does not know needs a UID from the list: the sync waits for the lock
    put_file(
        &s.maildir,
        "new",
        "1900000000.M1P1.othertool",
        &message("n"),
    );
    age(&s.maildir.join("new"), past + Duration::from_secs(2));
    assert!(store.sync_mailbox("INBOX").is_err(), "the list is locked");
    std::fs::remove_file(&lock).unwrap();
    let added = store.sync_mailbox("INBOX").unwrap();
    assert_eq!(added.added, 1, "{added:?}");

    // a vanished file is removed through the list's complete listing too
    std::fs::remove_file(s.maildir.join("cur").join(format!("{base}:2,S"))).unwrap();
    age(&s.maildir.join("cur"), past + Duration::from_secs(3));
    std::fs::write(&lock, format!("{}:otherhost.example", std::process::id())).unwrap();
    assert!(store.sync_mailbox("INBOX").is_err(), "the list is locked");
    std::fs::remove_file(&lock).unwrap();
    let removed = store.sync_mailbox("INBOX").unwrap();
    assert_eq!(removed.removed, 1, "{removed:?}");
    assert!(uids(&store).iter().all(|(u, _, _)| *u != uid));
    assert_eq!(store.check().unwrap(), vec![]);
}
