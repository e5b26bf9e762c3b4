//! A full disk: the delivery fails with an error naming the file, nothing half-written is
//! left behind, nothing already delivered is touched, and delivery works again once there
//! is room. Uses a real small filesystem (a 2 MiB tmpfs), so it needs root; elsewhere it
//! says so and does nothing.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{message, Scratch};
use maildex_store::{DeliverOptions, StoreError, UserStore};

struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn small_fs(at: &Path) -> Option<Mount> {
    fs::create_dir_all(at).ok()?;
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs"])
        .arg(at)
        .status()
        .ok()?
        .success();
    ok.then(|| Mount(at.to_path_buf()))
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_full_disk_fails_the_delivery_cleanly() {
    let s = Scratch::new();
    let spool = s.dir.path().join("spool");
    let Some(_mount) = small_fs(&spool) else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root)");
        return;
    };
    let maildir = spool.join("Maildir");
    let store = UserStore::open(&maildir, &s.index, Scratch::options()).unwrap();
    let first = store
        .deliver(
            "INBOX",
            &mut &message("before")[..],
            &DeliverOptions::default(),
        )
        .unwrap();
    let uidlist_before = fs::read(maildir.join("dovecot-uidlist")).unwrap();

    // fill the filesystem, leaving less room than the next message needs
    let filler = spool.join("filler");
    let _ = fs::write(&filler, vec![0u8; 2 << 20]);
    let big = {
        let mut m = message("too big for the room left");
        m.extend(std::iter::repeat_n(b'x', 64 * 1024));
        m
    };
    let err = store
        .deliver("INBOX", &mut &big[..], &DeliverOptions::default())
        .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, StoreError::Maildir(_) | StoreError::Io { .. }),
        "{text}"
    );
    assert!(
        text.contains(&maildir.display().to_string()),
        "the error names the file: {text}"
    );
    assert!(
        text.to_lowercase().contains("space"),
        "the error says why: {text}"
    );
    assert!(
        names(&maildir.join("tmp")).is_empty(),
        "a partial file was left in tmp/"
    );
    assert_eq!(names(&maildir.join("new")), vec![first.file_name.clone()]);
    assert_eq!(
        fs::read(maildir.join("dovecot-uidlist")).unwrap(),
        uidlist_before
    );
    assert_eq!(store.check().unwrap(), vec![]);

    // room again: the next delivery works and gets the next UID
    fs::remove_file(&filler).unwrap();
    let next = store
        .deliver("INBOX", &mut &big[..], &DeliverOptions::default())
        .unwrap();
    assert_eq!(next.uid, first.uid.next());
    assert_eq!(store.check().unwrap(), vec![]);
}
