//! A new user's Maildir, default folders (when a login makes the store; a delivery makes
//! INBOX alone) and index, made durable once (issue 19 #4).
//!
//! Made one step at a time, a new user's skeleton cost 29 synchronous writes before the
//! first delivery (each folder's dovecot-uidlist written, synced and its folder synced,
//! one index commit per folder, the subscriptions file per folder), each a journal commit
//! of the filesystem. [`UserStore::create_new`] makes everything without syncing, then
//! syncs each new file and directory once, children before parents, so the journal
//! commits once or twice for the lot. Nothing of the user's is shown to anyone before
//! that: the store is returned only afterwards.
//!
//! A crash in between leaves some of it: the Maildir parts are made again by the next
//! open (every step is idempotent, a lost dovecot-uidlist of an empty folder is made with
//! a new UIDVALIDITY that no client has seen), and an index whose creation was cut short
//! is deleted at the next open and rebuilt from the Maildir (`maildex_index` `fresh.rs`).

use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use maildex_index::Index;

use maildex_maildir::{folder, Sub};

use crate::subscriptions::SUBSCRIPTIONS_FILE;
use crate::{OpError, StoreError, StoreOptions, UserStore};

/// The directories `dir` needs made (deepest first), then the existing one holding the
/// topmost of them, whose new entry must be made durable too. Empty when `dir` exists.
fn missing_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in dir.ancestors() {
        out.push(d.to_path_buf());
        if d.exists() {
            break;
        }
    }
    if out.len() == 1 {
        out.clear();
    }
    out
}

/// A directory's fsync, through the fault point every directory sync has (`dir_fsync`).
fn sync_path(path: &Path) -> Result<(), StoreError> {
    Ok(maildex_maildir::deliver::fsync_dir(path)?)
}

fn sync_if_there(path: &Path) -> Result<(), StoreError> {
    match File::open(path) {
        Ok(f) => f.sync_all().map_err(|e| StoreError::io(path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(path, e)),
    }
}

/// The directories a creation must make durable, as the index's marker keeps them: one
/// path a line.
fn note_of(dirs: &[PathBuf]) -> Vec<u8> {
    let mut out = Vec::new();
    for d in dirs {
        out.extend_from_slice(d.as_os_str().as_bytes());
        out.push(b'\n');
    }
    out
}

fn dirs_of(note: &[u8]) -> Vec<PathBuf> {
    note.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| PathBuf::from(OsStr::from_bytes(l)))
        .collect()
}

impl UserStore {
    /// Whether [`UserStore::create_new`] applies: the Maildir does not exist yet, or the
    /// creation of the user's store did not finish (an error or a crash cut it short).
    pub fn is_new(maildir: &Path, index_dir: &Path) -> bool {
        !maildir.exists() || Index::pending_note(index_dir).is_some()
    }

    /// Opens the store of a new user ([`UserStore::is_new`]) and, with `folders`, creates
    /// the configured folders ([`UserStore::create_special_folders`]), making all of it
    /// durable at the end instead of step by step (see the module docs). The second value
    /// is the outcome of the folders' creation, which the caller logs (the store is usable
    /// without them); without `folders` it is an empty list.
    pub fn create_new(
        maildir: &Path,
        index_dir: &Path,
        opts: StoreOptions,
        folders: bool,
    ) -> Result<(UserStore, Result<Vec<String>, OpError>), StoreError> {
        let durable = opts.fsync && opts.index.durable;
        // what this creation makes, and what one cut short before it made
        let mut made = missing_dirs(maildir);
        made.extend(missing_dirs(index_dir));
        made.extend(Index::pending_note(index_dir).map_or_else(Vec::new, |n| dirs_of(&n)));
        made.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        made.dedup();
        let note = note_of(&made);
        let deferred = StoreOptions {
            fsync: false,
            ..opts.clone()
        };
        let mut store =
            UserStore::open_with(maildir, index_dir, deferred, durable.then_some(&note[..]))?;
        let folders = if folders {
            store.create_special_folders()
        } else {
            Ok(Vec::new())
        };
        // INBOX too (its dovecot-uidlist and index record), or the first delivery would
        // make them, synced one by one
        store.sync_mailbox("INBOX")?;
        store.opts.fsync = opts.fsync;
        store.deferring = false;
        if durable {
            store.make_skeleton_durable(&made)?;
        }
        Ok((store, folders))
    }

    /// Syncs each file and directory of the new skeleton once, children first: the
    /// folders' dovecot-uidlist and `tmp/ new/ cur/`, the folders, the subscriptions, the
    /// Maildir root; the index (one sync of its data file, then its folder); then the
    /// directories made above either, deepest first (`made`, in that order).
    fn make_skeleton_durable(&self, made: &[PathBuf]) -> Result<(), StoreError> {
        for f in folder::list_folders(&self.root)? {
            sync_if_there(&f.path.join(maildex_maildir::uidlist::UIDLIST_NAME))?;
            sync_path(&f.path.join("tmp"))?;
            for sub in [Sub::New, Sub::Cur] {
                sync_path(&sub.path(&f.path))?;
            }
            if f.path != self.root {
                sync_path(&f.path)?;
            }
        }
        sync_if_there(&self.root.join(SUBSCRIPTIONS_FILE))?;
        sync_path(&self.root)?;
        self.index.finish_deferred()?;
        for d in made {
            if *d != self.root && d != self.index.path() && d.is_dir() {
                sync_path(d)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_dirs_lists_what_is_made_and_the_parent_that_gets_the_entry() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        assert!(missing_dirs(root).is_empty());
        let deep = root.join("a/b/Maildir");
        assert_eq!(
            missing_dirs(&deep),
            vec![
                deep.clone(),
                root.join("a/b"),
                root.join("a"),
                root.to_path_buf()
            ]
        );
        std::fs::create_dir_all(root.join("a")).unwrap();
        assert_eq!(
            missing_dirs(&deep),
            vec![deep.clone(), root.join("a/b"), root.join("a")]
        );
    }
}
