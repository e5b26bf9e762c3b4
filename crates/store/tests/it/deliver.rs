//! The delivery path: where files land, what the index records, concurrency, and failures.

use std::fs;
use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use crate::support::{message, Scratch};
use maildex_index::flag;
use maildex_maildir::Flags;
use maildex_store::DeliverOptions;

fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn flags_keywords_and_date_land_in_the_file_name_and_the_index() {
    let s = Scratch::new();
    let store = s.open();
    let plain = store
        .deliver(
            "INBOX",
            &mut &message("plain")[..],
            &DeliverOptions::default(),
        )
        .unwrap();
    let date = UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    let opts = DeliverOptions {
        flags: Flags::SEEN | Flags::FLAGGED,
        keywords: vec!["$Junk".into(), "work".into()],
        internal_date: Some(date),
    };
    let flagged = store
        .deliver("INBOX", &mut &message("flagged")[..], &opts)
        .unwrap();
    assert_eq!((plain.uid.get(), flagged.uid.get()), (1, 2));

    assert_eq!(
        names_in(&s.maildir.join("new")),
        vec![plain.file_name.clone()]
    );
    assert_eq!(
        names_in(&s.maildir.join("cur")),
        vec![flagged.file_name.clone()]
    );
    assert!(
        flagged.file_name.ends_with(":2,FSab"),
        "{}",
        flagged.file_name
    );
    assert!(
        flagged
            .file_name
            .contains(&format!(",S={},W={}", flagged.size, flagged.vsize)),
        "{}",
        flagged.file_name
    );
    assert_eq!(
        fs::read_to_string(s.maildir.join("dovecot-keywords")).unwrap(),
        "0 $Junk\n1 work\n"
    );
    let mtime = fs::metadata(s.maildir.join("cur").join(&flagged.file_name))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(mtime, date);

    let (rec, mbox) = store
        .index()
        .read(|r| {
            Ok((
                r.message(flagged.mailbox_id, flagged.uid)?.unwrap(),
                r.require_mailbox(flagged.mailbox_id)?,
            ))
        })
        .unwrap();
    assert_eq!(rec.state.flags, flag::SEEN | flag::FLAGGED);
    assert_eq!(rec.state.keywords, 0b11);
    assert_eq!(rec.state.internal_date, 1_600_000_000);
    assert_eq!(mbox.keywords, vec!["$Junk".to_string(), "work".to_string()]);
    assert_eq!((mbox.counts.messages, mbox.counts.unseen), (2, 1));
    // a keyword already known is not added twice
    let again = DeliverOptions {
        keywords: vec!["WORK".into()],
        ..DeliverOptions::default()
    };
    let third = store
        .deliver("INBOX", &mut &message("third")[..], &again)
        .unwrap();
    assert!(third.file_name.ends_with(":2,b"), "{}", third.file_name);
    assert_eq!(store.check().unwrap(), vec![]);
}

/// Delivers `per_thread` messages from each of `threads` threads at once; returns the UIDs.
fn deliver_in_threads(
    store: &Arc<maildex_store::UserStore>,
    threads: usize,
    per_thread: usize,
) -> Vec<u32> {
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let store = Arc::clone(store);
            std::thread::spawn(move || {
                (0..per_thread)
                    .map(|i| {
                        let msg = message(&format!("t{t}m{i}"));
                        store
                            .deliver("INBOX", &mut &msg[..], &DeliverOptions::default())
                            .unwrap()
                            .uid
                            .get()
                    })
                    .collect::<Vec<u32>>()
            })
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect()
}

#[test]
fn concurrent_deliveries_get_distinct_uids_and_exact_counts() {
    let s = Scratch::new();
    let store = Arc::new(s.open());
    let mut uids = deliver_in_threads(&store, 8, 25);
    uids.sort();
    assert_eq!(uids, (1..=200).collect::<Vec<u32>>());
    let counts = store
        .index()
        .read(|r| Ok(r.require_mailbox(r.mailbox_id("INBOX")?.unwrap())?.counts))
        .unwrap();
    assert_eq!(
        (counts.messages, counts.unseen, counts.recent),
        (200, 200, 200)
    );
    assert_eq!(store.check().unwrap(), vec![]);
}

/// A reader that fails after some bytes, like a client that disconnects mid-message.
struct Broken(usize);

impl Read for Broken {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.0 == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "peer went away",
            ));
        }
        let n = buf.len().min(self.0);
        buf[..n].fill(b'x');
        self.0 -= n;
        Ok(n)
    }
}

#[test]
fn a_delivery_that_fails_mid_stream_leaves_nothing_behind() {
    let s = Scratch::new();
    let store = s.open();
    let err = store
        .deliver("INBOX", &mut Broken(100_000), &DeliverOptions::default())
        .unwrap_err();
    assert!(
        err.to_string().contains("tmp"),
        "the error names the file: {err}"
    );
    for sub in ["tmp", "new", "cur"] {
        assert!(
            names_in(&s.maildir.join(sub)).is_empty(),
            "{sub}/ is not empty"
        );
    }
    // and the next delivery is UID 1: nothing was numbered
    let d = store
        .deliver(
            "INBOX",
            &mut &message("after")[..],
            &DeliverOptions::default(),
        )
        .unwrap();
    assert_eq!(d.uid.get(), 1);
}

#[test]
fn delivery_to_a_missing_mailbox_is_refused() {
    let s = Scratch::new();
    let store = s.open();
    let err = store
        .deliver("Nope", &mut &message("x")[..], &DeliverOptions::default())
        .unwrap_err();
    assert!(
        matches!(err, maildex_store::StoreError::NoMailbox(ref n) if n == "Nope"),
        "{err}"
    );
    let err = store
        .deliver(
            "../escape",
            &mut &message("x")[..],
            &DeliverOptions::default(),
        )
        .unwrap_err();
    assert!(err.to_string().contains("escape"), "{err}");
}

#[test]
fn syncs_racing_deliveries_never_drop_a_message() {
    let s = Scratch::new();
    let store = Arc::new(s.open());
    store.sync_mailbox("INBOX").unwrap();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let syncer = {
        let (store, done) = (Arc::clone(&store), Arc::clone(&done));
        std::thread::spawn(move || {
            let (mut syncs, mut removed) = (0, 0);
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let r = store.sync_mailbox("INBOX").unwrap();
                syncs += 1;
                removed += r.removed;
            }
            (syncs, removed)
        })
    };
    let mut uids = deliver_in_threads(&store, 6, 30);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let (syncs, removed) = syncer.join().unwrap();
    assert!(syncs > 0);
    assert_eq!(
        removed, 0,
        "a sync removed a message that was never expunged ({syncs} syncs)"
    );
    uids.sort();
    assert_eq!(uids, (1..=180).collect::<Vec<u32>>());
    let indexed = store
        .index()
        .read(|r| Ok(r.states(r.mailbox_id("INBOX")?.unwrap())?.len()))
        .unwrap();
    assert_eq!(indexed, 180);
    assert_eq!(store.check().unwrap(), vec![]);
}
