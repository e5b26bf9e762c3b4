//! Regression tests from a review of the store for data loss under concurrency.

use std::fs::{self, File, FileTimes};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::support::{make_folder, message, put_file, Scratch};
use maildex_maildir::{UidRecord, Uidlist, UidlistLock};

fn count(store: &maildex_store::UserStore, name: &str) -> usize {
    store
        .index()
        .read(|r| Ok(r.states(r.mailbox_id(name)?.unwrap())?.len()))
        .unwrap()
}

/// Sets the mtime of `new/` and `cur/` to one fixed time in the past: a sync sees the same
/// stamps however the folders changed in between.
fn settle(dir: &std::path::Path) {
    let past = SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    for sub in ["new", "cur"] {
        File::open(dir.join(sub))
            .unwrap()
            .set_times(FileTimes::new().set_modified(past))
            .unwrap();
    }
}

/// A file unreadable at one sync is indexed by a later one once it can be read (the stamps
/// of a sync that skipped a file are not kept). Unreadable even as root: a FIFO, which is
/// not a regular file; a symbolic link would not even be listed (issue 15 #2).
#[test]
fn an_unreadable_file_is_retried_by_the_next_sync() {
    let s = Scratch::new();
    let store = s.open();
    let name = s.maildir.join("cur/1700000000.M1P1Q1.h:2,S");
    let made = std::process::Command::new("mkfifo").arg(&name).status();
    assert!(made.unwrap().success(), "mkfifo");
    settle(&s.maildir);
    let r = store.sync_mailbox("INBOX").unwrap();
    assert_eq!(r.unreadable.len(), 1);
    let later = s.dir.path().join("later");
    fs::write(&later, message("x")).unwrap();
    fs::rename(&later, &name).unwrap();
    settle(&s.maildir);
    store.sync_mailbox("INBOX").unwrap();
    assert_eq!(count(&store, "INBOX"), 1, "the message never got indexed");
}

/// sync_all must not drop a mailbox that was created (and synced elsewhere) after it
/// listed the folders.
#[test]
fn sync_all_keeps_a_mailbox_created_meanwhile() {
    let s = Scratch::new();
    let store = Arc::new(s.open());
    for f in 0..30 {
        let p = s.maildir.join(format!(".F{f}"));
        make_folder(&p);
        for i in 0..60 {
            put_file(
                &p,
                "cur",
                &format!("17000000{i:02}.M{i}P{f}Q1.h:2,S"),
                &message("m"),
            );
        }
    }
    let st = Arc::clone(&store);
    let t = std::thread::spawn(move || st.sync_all().unwrap());
    std::thread::sleep(Duration::from_millis(100));
    let late = s.maildir.join(".Late");
    make_folder(&late);
    put_file(&late, "cur", "1700000000.M1P1Q1.h:2,S", &message("late"));
    store.sync_mailbox("Late").unwrap();
    let report = t.join().unwrap();
    assert!(
        !report.deleted_mailboxes.contains(&"Late".to_string()),
        "{:?}",
        report.deleted_mailboxes
    );
    assert_eq!(count(&store, "Late"), 1);
}

/// While another tool keeps renaming files (flag changes), a sync that would compact
/// dovecot-uidlist must never drop the record of a file it failed to see: that file would
/// be renumbered.
#[test]
fn uidlist_compaction_never_drops_a_file_renamed_during_the_listing() {
    let s = Scratch::new();
    let store = s.open();
    let cur = s.maildir.join("cur");
    for i in 0..3000 {
        put_file(
            &s.maildir,
            "cur",
            &format!("1700000000.M{i}P1Q1.host:2,"),
            &message("m"),
        );
    }
    store.sync_mailbox("INBOX").unwrap();
    let orig = Uidlist::read(&s.maildir).unwrap().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let toggler = {
        let (stop, cur) = (Arc::clone(&stop), cur.clone());
        std::thread::spawn(move || {
            let mut seen = [false; 300];
            while !stop.load(Ordering::Relaxed) {
                for (i, s) in seen.iter_mut().enumerate() {
                    let base = format!("1700000000.M{i}P1Q1.host");
                    let (a, b) = if *s { (":2,S", ":2,") } else { (":2,", ":2,S") };
                    fs::rename(
                        cur.join(format!("{base}{a}")),
                        cur.join(format!("{base}{b}")),
                    )
                    .unwrap();
                    *s = !*s;
                }
            }
        })
    };
    let start = Instant::now();
    let mut round = 0u32;
    let mut lost = None;
    while start.elapsed() < Duration::from_secs(6) && lost.is_none() {
        // enough stale records that the next sync wants to rewrite the list
        let mut lock = UidlistLock::acquire(&s.maildir, Duration::from_secs(5)).unwrap();
        let list = lock.read().unwrap().unwrap();
        let recs: Vec<UidRecord> = (0..1100)
            .map(|k| UidRecord::new(list.next_uid + k, format!("gone{round}_{k}")))
            .collect();
        round += 1;
        lock.append(&recs, list.next_uid + 1100).unwrap();
        drop(lock);
        let _ = store.sync_mailbox("INBOX");
        let now = Uidlist::read(&s.maildir).unwrap().unwrap();
        lost = orig
            .records
            .iter()
            .find(|r| now.find_base(r.base()).is_none_or(|n| n.uid != r.uid))
            .cloned();
    }
    stop.store(true, Ordering::Relaxed);
    toggler.join().unwrap();
    assert!(round > 1, "the race was not exercised");
    assert_eq!(
        lost, None,
        "a file lost or changed its UID after {round} rounds"
    );
}

/// Regression (found by tests/it/imap/concurrency.rs): a delivery, COPY, STORE or sync wrote the
/// keyword table it had read from dovecot-keywords at its start over the index's, so a name
/// another operation added meanwhile was dropped, and each message with that keyword showed
/// without it (FETCH FLAGS, SEARCH KEYWORD) until the table was written again, with no
/// modseq change to make sessions announce the flags again. Deliveries with a keyword race
/// STOREs that add new ones; the index's table must only ever grow.
#[test]
fn the_keyword_table_never_loses_a_name_added_meanwhile() {
    use maildex_store::{DeliverOptions, FlagOp};
    let s = Scratch::new();
    let store = Arc::new(s.open());
    let first = store
        .deliver(
            "INBOX",
            &mut &message("first")[..],
            &DeliverOptions::default(),
        )
        .unwrap();
    let table = |store: &maildex_store::UserStore| -> Vec<String> {
        store
            .index()
            .read(|r| {
                Ok(r.mailbox(r.mailbox_id("INBOX")?.unwrap())?
                    .unwrap()
                    .keywords)
            })
            .unwrap()
    };
    let done = Arc::new(AtomicBool::new(false));
    let deliverer = {
        let (store, done) = (Arc::clone(&store), Arc::clone(&done));
        std::thread::spawn(move || {
            let opts = DeliverOptions {
                keywords: vec!["$old".into()],
                ..DeliverOptions::default()
            };
            let mut n = 0;
            while !done.load(Ordering::SeqCst) {
                store
                    .deliver("INBOX", &mut &message("m")[..], &opts)
                    .unwrap();
                n += 1;
            }
            n
        })
    };
    let watcher = {
        let (store, done) = (Arc::clone(&store), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut seen: Vec<String> = Vec::new();
            while !done.load(Ordering::SeqCst) {
                let now = table(&store);
                assert!(
                    now.starts_with(&seen),
                    "the keyword table went from {seen:?} to {now:?}"
                );
                seen = now;
            }
        })
    };
    // 24 new names, one STORE each, while deliveries go on (26 letters at most)
    for k in 0..24 {
        store
            .set_flags(
                "INBOX",
                &[first.uid],
                FlagOp::Add,
                maildex_maildir::Flags::default(),
                &[format!("$new{k}")],
                None,
            )
            .unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    done.store(true, Ordering::SeqCst);
    watcher.join().unwrap();
    assert!(deliverer.join().unwrap() > 0);
    let last = table(&store);
    assert_eq!(last.len(), 25, "{last:?}");
}

/// Regression (found by tests/it/imap/concurrency.rs): between a delivery's rename into the
/// Maildir and its index commit, a sync found the file numbered in dovecot-uidlist but not
/// indexed, and indexed it; a session then expunged it, and the delivery's commit, landing
/// after, wrote the record back: a message expunged (or moved away) reappeared as a record
/// whose file is gone, and flags set meanwhile were undone. Deliveries race a loop that
/// syncs and expunges every message it finds; afterwards every record must name a file.
#[test]
fn a_delivery_never_brings_back_a_message_expunged_meanwhile() {
    use maildex_store::{DeliverOptions, FlagOp};
    let s = Scratch::new();
    let store = Arc::new(s.open());
    store.sync_mailbox("INBOX").unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let deliverers: Vec<_> = (0..2)
        .map(|_| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for i in 0..150 {
                    let msg = message(&format!("m{i}"));
                    store
                        .deliver("INBOX", &mut &msg[..], &DeliverOptions::default())
                        .unwrap();
                }
            })
        })
        .collect();
    let reaper = {
        let (store, done) = (Arc::clone(&store), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut expunged = 0;
            while !done.load(Ordering::SeqCst) {
                // a sync that lists the folder every time (as a new file keeps it unsettled)
                store.sync_mailbox("INBOX").unwrap();
                let uids: Vec<maildex_store::Uid> = store
                    .index()
                    .read(|r| r.uids(r.mailbox_id("INBOX")?.unwrap()))
                    .unwrap();
                if uids.is_empty() {
                    continue;
                }
                let deleted = maildex_maildir::Flags::DELETED;
                store
                    .set_flags("INBOX", &uids, FlagOp::Add, deleted, &[], None)
                    .unwrap();
                expunged += store.expunge("INBOX", Some(&uids)).unwrap().len();
            }
            expunged
        })
    };
    for d in deliverers {
        d.join().unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let expunged = reaper.join().unwrap();
    assert!(expunged > 0, "the race never ran");
    let differences = store.check().unwrap();
    assert!(
        differences.is_empty(),
        "records of messages expunged meanwhile came back: {differences:?}"
    );
}

/// Issue 15 #34 (same kind): every DELETE goes through the one `.DOVECOT-TRASHED` folder,
/// and one that wiped or replaced another's trash made that DELETE fail (its folder
/// renamed away under it, or a rename onto a non-empty trash) although the mailbox was
/// being removed. Concurrent DELETEs of different mailboxes all succeed and leave no trash.
#[test]
fn concurrent_deletes_of_different_mailboxes_all_succeed() {
    let s = Scratch::new();
    let store = Arc::new(s.open());
    for round in 0..4 {
        let names: Vec<String> = (0..6).map(|i| format!("Del{round}x{i}")).collect();
        for name in &names {
            store.create_mailbox(name).unwrap();
            let dir = store.mailbox_path(name).unwrap();
            for j in 0..40 {
                put_file(&dir, "cur", &format!("{j}.m{j}.host:2,S"), &message("x"));
            }
        }
        let threads: Vec<_> = names
            .iter()
            .map(|name| {
                let (store, name) = (Arc::clone(&store), name.clone());
                std::thread::spawn(move || store.delete_mailbox(&name).map_err(|e| e.to_string()))
            })
            .collect();
        for (t, name) in threads.into_iter().zip(&names) {
            assert_eq!(t.join().unwrap(), Ok(()), "DELETE {name}, round {round}");
            assert!(!store.mailbox_path(name).unwrap().exists(), "{name}");
        }
        assert!(!s.folder(".DOVECOT-TRASHED").exists(), "round {round}");
    }
}

/// A message whose file STOREs keep renaming is always found by a reader holding a name
/// from the index, never taken for expunged. A STORE renames the file before it commits
/// the new name, so a name read from the index can be stale, and another STORE can rename
/// the file again before a name read afresh is opened. (FETCH answered NO [EXPUNGEISSUED]
/// for a message still there, and SEARCH BODY could miss one: found by
/// tests/it/imap/concurrency.rs.)
#[test]
fn a_message_renamed_by_stores_while_read_is_never_taken_for_gone() {
    use maildex_store::{FlagOp, SnapshotRequest, SyncFirst};
    let s = Scratch::new();
    let store = Arc::new(s.open());
    crate::support::deliver_many(&store, "INBOX", 1);
    let req = SnapshotRequest {
        sync: SyncFirst::Always,
        since: None,
        claim_recent: false,
        first_unseen: false,
    };
    let mailbox = store.snapshot("INBOX", &req).unwrap().unwrap().mailbox;
    let uid = crate::support::inbox_states(&store)[0].0;
    let done = Arc::new(AtomicBool::new(false));
    // two writers, each toggling its own keyword: the file is renamed all the time
    let togglers: Vec<_> = (0..2)
        .map(|k| {
            let (store, done) = (Arc::clone(&store), Arc::clone(&done));
            std::thread::spawn(move || {
                let kw = vec![format!("$t{k}")];
                let flags = maildex_maildir::Flags::default();
                let mut n = 0u64;
                while !done.load(Ordering::SeqCst) {
                    let op = if n % 2 == 0 {
                        FlagOp::Add
                    } else {
                        FlagOp::Remove
                    };
                    if let Err(e) = store.set_flags("INBOX", &[uid], op, flags, &kw, None) {
                        return Err(format!("STORE {n} of ${k}: {e}"));
                    }
                    n += 1;
                }
                Ok(n)
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut reads = 0;
    let mut lost = Vec::new();
    while reads < 3000 && Instant::now() < deadline {
        let state = crate::support::inbox_states(&store)[0].1.clone();
        match store.open_message(&mailbox, uid, &state) {
            Ok(Some(_)) => {}
            Ok(None) => lost.push(format!("open_message of {}", state.file_name)),
            Err(e) => lost.push(format!("open_message of {}: {e}", state.file_name)),
        }
        if store.read_message(&mailbox, uid, &state).is_none() {
            lost.push(format!("read_message of {}", state.file_name));
        }
        reads += 1;
    }
    done.store(true, Ordering::SeqCst);
    let stores: u64 = togglers
        .into_iter()
        .map(|t| {
            t.join()
                .unwrap()
                .unwrap_or_else(|e| panic!("{e}; reads: {lost:?}"))
        })
        .sum();
    assert!(
        lost.is_empty(),
        "{} of {reads} reads found no file ({stores} STOREs meanwhile): {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    assert!(stores > 0);
}

/// A STORE names the keywords a message has at its commit, including one another STORE
/// added after this one read the keyword table: a STORE of `\Answered` racing one that
/// added a new keyword answered FLAGS without that keyword (found by
/// tests/it/imap/concurrency.rs). One thread adds 24 new keywords to a message, one at a
/// time; three others toggle `\Answered`, `\Flagged` and `\Draft` on it. Every answer of
/// theirs must name exactly the keywords committed before its own modseq.
#[test]
fn a_store_names_a_keyword_added_by_a_store_meanwhile() {
    use maildex_maildir::Flags;
    use maildex_store::{FlagOp, ModSeq};
    let s = Scratch::new();
    let store = Arc::new(s.open());
    crate::support::deliver_many(&store, "INBOX", 1);
    let uid = crate::support::inbox_states(&store)[0].0;
    let done = Arc::new(AtomicBool::new(false));
    let togglers: Vec<_> = [Flags::ANSWERED, Flags::FLAGGED, Flags::DRAFT]
        .into_iter()
        .map(|flag| {
            let (store, done) = (Arc::clone(&store), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut seen: Vec<(ModSeq, Vec<String>)> = Vec::new();
                let mut add = true;
                while !done.load(Ordering::SeqCst) {
                    let op = if add { FlagOp::Add } else { FlagOp::Remove };
                    let out = store.set_flags("INBOX", &[uid], op, flag, &[], None);
                    let m = out.unwrap().messages.remove(0);
                    let mut names = m.keywords;
                    names.sort();
                    seen.push((m.modseq, names));
                    add = !add;
                }
                seen
            })
        })
        .collect();
    let mut added: Vec<(ModSeq, String)> = Vec::new();
    for k in 0..24 {
        let name = format!("$k{k:02}");
        let none = Flags::default();
        let out = store.set_flags(
            "INBOX",
            &[uid],
            FlagOp::Add,
            none,
            std::slice::from_ref(&name),
            None,
        );
        added.push((out.unwrap().messages[0].modseq, name));
    }
    done.store(true, Ordering::SeqCst);
    let seen: Vec<_> = togglers
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert!(!seen.is_empty());
    for (modseq, names) in seen {
        let want: Vec<String> = added
            .iter()
            .filter(|(m, _)| *m < modseq)
            .map(|(_, n)| n.clone())
            .collect();
        assert_eq!(names, want, "the STORE that committed modseq {modseq:?}");
    }
}
