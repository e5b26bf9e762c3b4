//! Bad input: unreadable, binary, truncated, huge or header-only files; names that are not
//! Maildir names; a corrupt or foreign dovecot-uidlist; an index folder that cannot exist.
//! Each gets a clear error or warning naming the file, and no message is lost or renumbered.

use std::fs;
use std::os::unix::ffi::OsStrExt;

use crate::support::{inbox_states, make_folder, message, put_file, Scratch};
use maildex_store::{StoreError, UserStore};

fn uids(store: &UserStore) -> Vec<(u32, String, u64)> {
    inbox_states(store)
        .into_iter()
        .map(|(u, h)| (u.get(), h.file_name, h.size))
        .collect()
}

#[test]
fn odd_message_files_are_all_indexed_with_their_real_sizes() {
    let s = Scratch::new();
    let inbox = s.folder("INBOX");
    make_folder(&inbox);
    let mut binary: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
    binary.extend_from_slice(b"\0\0\0");
    let truncated =
        b"Content-Type: multipart/mixed; boundary=x\n\n--x\nContent-Type: text/plain\n\nhalf a par"
            .to_vec();
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("1.M1P1.h:2,S", binary),
        ("2.M2P1.h:2,S", Vec::new()),
        ("3.M3P1.h:2,S", b"Subject: headers only\nFrom: a@b".to_vec()),
        ("4.M4P1.h:2,S", truncated),
        ("5.M5P1.h:2,S", b"\r\n\r\n".to_vec()),
    ];
    for (name, bytes) in &files {
        put_file(&inbox, "cur", name, bytes);
    }
    let store = s.open();
    let report = store.sync_all().unwrap();
    assert_eq!(report.added, files.len());
    let got = uids(&store);
    let sizes: Vec<u64> = got.iter().map(|(_, _, size)| *size).collect();
    let want: Vec<u64> = files.iter().map(|(_, b)| b.len() as u64).collect();
    assert_eq!(sizes, want);
    assert_eq!(store.check().unwrap(), vec![]);
}

#[test]
fn a_50_mb_message_is_indexed_without_trouble() {
    let s = Scratch::new();
    let store = s.open();
    let mut big = b"From: a@example.org\nSubject: big\nContent-Type: text/plain\n\n".to_vec();
    let line = b"0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz\n";
    while big.len() < 50 << 20 {
        big.extend_from_slice(line);
    }
    let d = store
        .deliver("INBOX", &mut &big[..], &Default::default())
        .unwrap();
    assert_eq!(d.size, big.len() as u64);
    let lines = big.iter().filter(|&&b| b == b'\n').count() as u64;
    assert_eq!(d.vsize, big.len() as u64 + lines);
    let rec = store
        .index()
        .read(|r| r.message(d.mailbox_id, d.uid))
        .unwrap()
        .unwrap();
    assert_eq!(rec.state.vsize, d.vsize);
    assert_eq!(store.check().unwrap(), vec![]);
}

#[test]
fn an_unreadable_file_is_named_and_keeps_its_uid() {
    let s = Scratch::new();
    let inbox = s.folder("INBOX");
    make_folder(&inbox);
    put_file(&inbox, "cur", "1.M1P1.h:2,S", &message("ok"));
    // a file that cannot be read as a message where one should be (a FIFO: symbolic
    // links are not listed at all since issue 15 #2)
    let made = std::process::Command::new("mkfifo")
        .arg(inbox.join("cur").join("2.M2P1.h:2,S"))
        .status();
    assert!(made.unwrap().success(), "mkfifo");
    let store = s.open();
    let report = store.sync_all().unwrap();
    assert_eq!(report.added, 1);
    assert_eq!(report.unreadable.len(), 1, "{report:?}");
    assert!(
        report.unreadable[0].ends_with("cur/2.M2P1.h:2,S"),
        "{report:?}"
    );
    let uidlist = fs::read_to_string(inbox.join("dovecot-uidlist")).unwrap();
    assert!(
        uidlist.contains(":2.M2P1.h"),
        "the unreadable file keeps a UID: {uidlist}"
    );
    // check names it as a difference until it is fixed
    let diffs = store.check().unwrap();
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert!(diffs[0].to_string().contains("2.M2P1.h"), "{}", diffs[0]);
}

#[test]
fn names_that_are_not_maildir_names_are_reported_and_left_alone() {
    let s = Scratch::new();
    let inbox = s.folder("INBOX");
    make_folder(&inbox);
    put_file(&inbox, "cur", "1.M1P1.h:2,S", &message("ok"));
    let odd = inbox
        .join("cur")
        .join(std::ffi::OsStr::from_bytes(b"\xff\xfe-not-utf8"));
    fs::write(&odd, b"x").unwrap();
    put_file(&inbox, "cur", ".hidden", b"x");
    let store = s.open();
    let report = store.sync_all().unwrap();
    assert_eq!(report.added, 1);
    assert_eq!(report.bad_names, vec![odd.clone()]);
    assert!(odd.exists() && inbox.join("cur/.hidden").exists());
}

#[test]
fn a_corrupt_uidlist_is_rebuilt_from_the_index_without_renumbering() {
    let s = Scratch::new();
    let store = s.open();
    for i in 0..5 {
        store
            .deliver(
                "INBOX",
                &mut &message(&format!("m{i}"))[..],
                &Default::default(),
            )
            .unwrap();
    }
    let before = uids(&store);
    let list = s.folder("INBOX").join("dovecot-uidlist");
    fs::write(&list, b"3 V1 N2\n\x00\x01garbage here\n7 9 :x\n").unwrap();
    // a new file arrives, so the next sync must read the uidlist
    put_file(
        &s.folder("INBOX"),
        "new",
        "1900000000.M1P1.h",
        &message("new"),
    );
    let report = store.sync_all().unwrap();
    assert_eq!(report.added, 1);
    let after = uids(&store);
    assert_eq!(&after[..5], &before[..]);
    assert!(after[5].0 > before[4].0);
    assert!(s.folder("INBOX").join("dovecot-uidlist.broken").exists());
    assert_eq!(store.check().unwrap(), vec![]);
}

#[test]
fn a_corrupt_uidlist_with_no_index_is_refused_not_renumbered() {
    let s = Scratch::new();
    let inbox = s.folder("INBOX");
    make_folder(&inbox);
    put_file(&inbox, "cur", "1.M1P1.h:2,S", &message("a"));
    let list = inbox.join("dovecot-uidlist");
    fs::write(&list, b"3 V1 N10\n5 :1.M1P1.h\n4 :decreasing\n").unwrap();
    let store = s.open();
    match store.sync_all() {
        Err(e @ StoreError::UidlistUnusable { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("dovecot-uidlist"), "{msg}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // nothing was changed on disk
    assert_eq!(
        fs::read(&list).unwrap(),
        b"3 V1 N10\n5 :1.M1P1.h\n4 :decreasing\n"
    );
    assert!(inbox.join("cur/1.M1P1.h:2,S").exists());
}

#[test]
fn an_index_folder_that_cannot_exist_is_a_clear_error() {
    let s = Scratch::new();
    fs::create_dir_all(s.dir.path()).unwrap();
    let blocker = s.dir.path().join("blocker");
    fs::write(&blocker, b"").unwrap();
    let err = UserStore::open(&s.maildir, &blocker.join("index"), Scratch::options())
        .err()
        .expect("must fail");
    assert!(err.to_string().contains("blocker"), "{err}");
}
