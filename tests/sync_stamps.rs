//! An unchanged mailbox is not read: a sync compares directory stamps and stops there.

use std::fs::{File, FileTimes};
use std::time::{Duration, SystemTime};

use maildex_tests::{message, put_file, Scratch};

/// Sets a folder's mtime (as if its last change were `ago` in the past).
fn age(dir: &std::path::Path, to: SystemTime) {
    File::open(dir)
        .unwrap()
        .set_times(FileTimes::new().set_modified(to))
        .unwrap();
}

#[test]
fn an_unchanged_mailbox_costs_only_stats_and_a_change_is_seen() {
    let s = Scratch::new();
    let store = s.open();
    for i in 0..3 {
        store
            .deliver(
                "INBOX",
                &mut &message(&format!("m{i}"))[..],
                &Default::default(),
            )
            .unwrap();
    }
    // settle the folders: their last change is a minute old
    let past = SystemTime::now() - Duration::from_secs(60);
    for sub in ["new", "cur"] {
        age(&s.maildir.join(sub), past);
    }
    let first = store.sync_mailbox("INBOX").unwrap();
    assert_eq!(
        first.unchanged, 0,
        "stamps changed since the deliveries: the folders are read"
    );
    let second = store.sync_mailbox("INBOX").unwrap();
    assert_eq!(second.unchanged, 1, "{second:?}");

    // Proof that the fast path does not list the folder: a file slipped in with the folder's
    // stamp put back is not seen...
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
    let fourth = store.sync_mailbox("INBOX").unwrap();
    assert_eq!((fourth.unchanged, fourth.added), (0, 1));
    assert_eq!(store.check().unwrap(), vec![]);
}

#[test]
fn a_folder_changed_within_the_last_second_is_always_read() {
    let s = Scratch::new();
    let store = s.open();
    store
        .deliver("INBOX", &mut &message("a")[..], &Default::default())
        .unwrap();
    store.sync_mailbox("INBOX").unwrap();
    // the folders changed just now: equal stamps are not trusted (a change in the same
    // timestamp tick could hide), so every sync lists them
    let again = store.sync_mailbox("INBOX").unwrap();
    assert_eq!(again.unchanged, 0, "{again:?}");
}
