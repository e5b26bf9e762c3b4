//! Shared helpers of the store's tests: a scratch user with a Maildir and an index,
//! and ways to change the Maildir behind the store's back as other tools do.

use std::fs;
use std::path::{Path, PathBuf};

use maildex_store::{StoreOptions, UserStore};

/// A scratch user: a Maildir and an index folder in one temporary directory.
pub struct Scratch {
    /// Keeps the directory alive.
    pub dir: tempfile::TempDir,
    /// The Maildir root (INBOX).
    pub maildir: PathBuf,
    /// The index folder.
    pub index: PathBuf,
}

impl Scratch {
    /// A new, empty scratch user.
    pub fn new() -> Scratch {
        let dir = tempfile::tempdir().expect("tempdir");
        let maildir = dir.path().join("Maildir");
        let index = dir.path().join("index");
        Scratch {
            dir,
            maildir,
            index,
        }
    }

    /// Store options for tests: no fsync (tests do not crash the machine).
    pub fn options() -> StoreOptions {
        let mut o = StoreOptions {
            fsync: false,
            ..StoreOptions::default()
        };
        o.index.durable = false;
        o.index.map_size = 4 << 20;
        o
    }

    /// Opens the user's store.
    pub fn open(&self) -> UserStore {
        UserStore::open(&self.maildir, &self.index, Self::options()).expect("open store")
    }

    /// Path of mailbox folder `name` (`INBOX` or a Maildir++ folder name as on disk, e.g. `.Sent`).
    pub fn folder(&self, on_disk: &str) -> PathBuf {
        if on_disk == "INBOX" {
            self.maildir.clone()
        } else {
            self.maildir.join(on_disk)
        }
    }
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch::new()
    }
}

/// Creates a Maildir folder (cur, new, tmp) as another tool would.
pub fn make_folder(path: &Path) {
    for sub in ["cur", "new", "tmp"] {
        fs::create_dir_all(path.join(sub)).expect("mkdir");
    }
}

/// A small message with a distinct subject.
pub fn message(subject: &str) -> Vec<u8> {
    format!(
        "From: Alice <alice@example.org>\nTo: bob@example.org\nSubject: {subject}\n\
         Date: Mon, 2 Nov 2026 10:00:00 +0000\nMessage-ID: <{subject}@example.org>\n\n\
         Hello, {subject}.\n"
    )
    .into_bytes()
}

/// Delivers `n` small messages (subjects `m0`, `m1`, ...) to `mailbox` through the store.
pub fn deliver_many(store: &UserStore, mailbox: &str, n: usize) {
    for i in 0..n {
        store
            .deliver(
                mailbox,
                &mut &message(&format!("m{i}"))[..],
                &Default::default(),
            )
            .expect("deliver");
    }
}

/// Puts a message file into `folder/sub/name` as procmail or a sync tool would: written
/// aside, then renamed in whole.
pub fn put_file(folder: &Path, sub: &str, name: &str, bytes: &[u8]) -> PathBuf {
    let p = folder.join(sub).join(name);
    // written aside and renamed in whole, as a Maildir writer does (a dotfile, which
    // listings skip): a sync running meanwhile must not index the file half written
    let aside = folder.join(sub).join(format!(".put-{name}"));
    fs::write(&aside, bytes).expect("write message file");
    fs::rename(&aside, &p).expect("rename message file into place");
    p
}

/// The states of INBOX's messages in the index, in UID order.
pub fn inbox_states(store: &UserStore) -> Vec<(maildex_index::Uid, maildex_index::MessageState)> {
    store
        .index()
        .read(|r| {
            let id = r.mailbox_id("INBOX")?.expect("INBOX indexed");
            r.states(id)
        })
        .unwrap()
}
