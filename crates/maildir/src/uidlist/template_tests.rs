use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::{LockTemplate, PREFIX};
use crate::uidlist::{UidRecord, Uidlist, UidlistLock};
use crate::MaildirError;

const LOCK: &str = "dovecot-uidlist.lock";

fn via(dir: &Path, t: &Arc<LockTemplate>) -> UidlistLock {
    UidlistLock::acquire_via(dir, Duration::from_secs(5), t).unwrap()
}

fn templates(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(PREFIX))
        .collect();
    v.sort();
    v
}

/// Three mailbox folders and a template folder, as a user's Maildir and index.
fn setup() -> (
    tempfile::TempDir,
    Vec<std::path::PathBuf>,
    Arc<LockTemplate>,
) {
    let d = tempfile::tempdir().unwrap();
    let boxes: Vec<_> = ["INBOX", ".a", ".b", "index"]
        .iter()
        .map(|n| {
            let p = d.path().join(n);
            fs::create_dir(&p).unwrap();
            p
        })
        .collect();
    let t = Arc::new(LockTemplate::new(&boxes[3]));
    (d, boxes, t)
}

#[test]
fn every_lock_is_a_link_to_one_file_with_the_owner_in_it() {
    let (_d, b, t) = setup();
    assert!(templates(&b[3]).is_empty(), "nothing before the first lock");
    let (l0, l1) = (via(&b[0], &t), via(&b[1], &t));
    let (m0, m1) = (
        fs::metadata(b[0].join(LOCK)).unwrap(),
        fs::metadata(b[1].join(LOCK)).unwrap(),
    );
    assert_eq!((m0.dev(), m0.ino()), (m1.dev(), m1.ino()), "one inode");
    assert_eq!(m0.nlink(), 3, "the template and two locks");
    assert_eq!(
        fs::read_to_string(b[0].join(LOCK)).unwrap(),
        format!("{}:{}", std::process::id(), crate::util::raw_hostname())
    );
    assert!(l0.is_held() && l1.is_held());
    // the same folder again waits, as with a lock of its own
    let e = UidlistLock::acquire_via(&b[0], Duration::from_millis(100), &t).unwrap_err();
    assert!(matches!(e, MaildirError::LockTimeout { .. }), "{e}");
    l0.release().unwrap();
    drop(l1);
    assert!(!b[0].join(LOCK).exists() && !b[1].join(LOCK).exists());
    // taken again and again: still the one template, no new file
    for _ in 0..50 {
        drop(via(&b[2], &t));
    }
    assert_eq!(templates(&b[3]).len(), 1);
    assert_eq!(
        fs::metadata(b[3].join(&templates(&b[3])[0])).unwrap().ino(),
        m0.ino()
    );
    drop(t);
    assert!(
        templates(&b[3]).is_empty(),
        "dropping the template removes its file"
    );
}

#[test]
fn an_overridden_lock_is_not_ours_even_when_we_lock_the_folder_again() {
    let (_d, b, t) = setup();
    let mut first = via(&b[0], &t);
    // another process judges it stale and removes it; then another thread of ours
    // takes the folder: the same inode is linked there again
    fs::remove_file(b[0].join(LOCK)).unwrap();
    let second = via(&b[0], &t);
    assert!(!first.is_held(), "the first holder must see it lost");
    assert!(second.is_held());
    assert!(matches!(
        first.write(&Uidlist::new(1)),
        Err(MaildirError::LockLost { .. })
    ));
    drop(first);
    assert!(
        b[0].join(LOCK).exists(),
        "the lost holder left the lock alone"
    );
    assert!(second.is_held());
    second.release().unwrap();
    // a foreign lock in its place is not ours either
    let held = via(&b[1], &t);
    fs::remove_file(b[1].join(LOCK)).unwrap();
    fs::write(b[1].join(LOCK), "1:other").unwrap();
    assert!(!held.is_held());
    drop(held);
    assert_eq!(fs::read_to_string(b[1].join(LOCK)).unwrap(), "1:other");
}

#[test]
fn a_template_removed_by_hand_is_made_again() {
    let (_d, b, t) = setup();
    drop(via(&b[0], &t));
    let name = templates(&b[3]).remove(0);
    fs::remove_file(b[3].join(name)).unwrap();
    let l = via(&b[0], &t);
    assert!(l.is_held());
    assert_eq!(templates(&b[3]).len(), 1);
}

#[test]
fn without_a_usable_template_folder_locks_are_files_of_their_own() {
    let (d, b, _) = setup();
    let t = Arc::new(LockTemplate::new(&d.path().join("missing")));
    let mut l = via(&b[0], &t);
    assert!(l.is_held());
    assert_eq!(fs::metadata(b[0].join(LOCK)).unwrap().nlink(), 1);
    l.append(&[UidRecord::new(1, "a")], 2).unwrap();
    l.release().unwrap();
    assert!(!b[0].join(LOCK).exists());
}

#[test]
fn templates_of_dead_processes_are_cleaned() {
    let (_d, b, t) = setup();
    drop(via(&b[0], &t));
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let host = crate::util::escaped_hostname();
    let dead_name = format!("{PREFIX}1700000000.M1P{dead}Q1.{host}");
    let other_host = format!("{PREFIX}1700000000.M1P{dead}Q1.elsewhere.example");
    for n in [&dead_name, &other_host, &"notes.txt".to_string()] {
        fs::write(b[3].join(n), "x").unwrap();
    }
    assert_eq!(LockTemplate::clean_stale(&b[3]), 1);
    assert!(!b[3].join(&dead_name).exists());
    assert!(
        b[3].join(&other_host).exists(),
        "another host's pid means nothing here"
    );
    assert!(b[3].join("notes.txt").exists());
    assert_eq!(
        templates(&b[3]).len(),
        2,
        "ours (alive) and the other host's stay"
    );
}

#[test]
fn concurrent_lockers_through_one_template_never_share_a_uid() {
    let (_d, b, t) = setup();
    let dir = b[0].clone();
    UidlistLock::acquire_via(&dir, Duration::from_secs(5), &t)
        .unwrap()
        .rewrite(&Uidlist::new(3))
        .unwrap();
    std::thread::scope(|s| {
        for n in 0..4 {
            let (dir, t) = (&dir, &t);
            s.spawn(move || {
                for i in 0..10 {
                    let mut l = UidlistLock::acquire_via(dir, Duration::from_secs(20), t).unwrap();
                    let uid = l.read().unwrap().unwrap().next_uid;
                    l.append(&[UidRecord::new(uid, format!("t{n}-{i}"))], uid + 1)
                        .unwrap();
                }
            });
        }
    });
    let back = Uidlist::read(&dir).unwrap().unwrap();
    assert_eq!(back.records.len(), 40);
    assert_eq!(back.next_uid, 41);
    assert!(!dir.join(LOCK).exists());
}
