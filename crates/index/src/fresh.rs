//! A new user's index, made durable once (issue 19 #4). Creating a user's store commits
//! the index several times (the databases, the schema, one record per default folder);
//! each durable commit is an fdatasync, a journal commit of the filesystem. An env made
//! by [`Index::create_deferred`] commits without syncing until [`Index::finish_deferred`]
//! forces it to disk once.
//!
//! An LMDB env whose commits were not synced can be damaged by a power loss (its meta
//! page may reach the disk before the pages it names). So the env is created beside a
//! marker, [`PENDING_FILE`], made durable before the env's first byte is written and
//! removed after the final sync: an env found with its marker was cut short by a crash
//! before it held anything the Maildir does not, and [`crate::Index::open`] deletes it
//! (the store rebuilds it from the Maildir, whose dovecot-uidlist keeps the UIDs).

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::env::{flock, open_lock_file};
use crate::{Index, IndexError, OpenOptions, DATA_FILE, LOCK_FILE};

/// The marker of an env being created without synced commits.
pub const PENDING_FILE: &str = "create.pending";

pub(crate) fn sync_dir(dir: &Path) -> Result<(), IndexError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| IndexError::io(dir, e))
}

pub(crate) fn remove_if_there(path: &Path) -> Result<(), IndexError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(IndexError::io(path, e)),
    }
}

/// Deletes the env in `dir` when its creation was cut short (see the module docs), unless
/// a process has it open (the one creating it). An env left with unsynced commits is
/// dealt with here too (`crate::lazy::inspect`).
pub(crate) fn discard_unfinished(dir: &Path) -> Result<(), IndexError> {
    let pending = dir.join(PENDING_FILE).exists();
    if !pending && !dir.join(crate::UNSYNCED_FILE).exists() {
        return Ok(());
    }
    let _alone = match crate::lock_exclusive(dir) {
        Ok(lock) => lock,
        // being created (or written) by another process right now
        Err(IndexError::InUse { .. }) => return Ok(()),
        Err(e) => return Err(e),
    };
    crate::lazy::inspect(dir)?;
    if !pending {
        return Ok(());
    }
    tracing::warn!(index = %dir.display(), "index whose creation a crash cut short; deleting it (the Maildir holds everything it held)");
    remove_if_there(&dir.join(DATA_FILE))?;
    remove_if_there(&dir.join(LOCK_FILE))?;
    remove_if_there(&dir.join(PENDING_FILE))
}

impl Index {
    /// Opens the index in `dir` as [`Index::open`], except that when `dir` holds no env yet
    /// (or one whose creation was cut short) and `opts.durable`, the new env's commits are
    /// not synced until [`Index::finish_deferred`] (see the module docs). `note` is kept
    /// in the marker meanwhile ([`Index::pending_note`]): what the caller must make
    /// durable if this creation is cut short and made again.
    pub fn create_deferred(
        dir: &Path,
        opts: &OpenOptions,
        note: &[u8],
    ) -> Result<Arc<Index>, IndexError> {
        if !opts.durable {
            return Index::open(dir, opts);
        }
        let (key, mut reg, open) = Index::lookup(dir)?;
        if let Some(index) = open {
            return Ok(index);
        }
        discard_unfinished(&key)?;
        if key.join(DATA_FILE).exists() {
            drop(reg);
            return Index::open(dir, opts);
        }
        // held shared before the marker exists, so that no other process takes the
        // marker for a crash's and deletes the env under us
        let shared = open_lock_file(&key)?;
        flock(&shared, libc::LOCK_SH).map_err(|e| IndexError::io(&key, e))?;
        let marker = key.join(PENDING_FILE);
        File::create(&marker)
            .and_then(|mut f| {
                f.write_all(note)?;
                f.sync_all()
            })
            .map_err(|e| IndexError::io(&marker, e))?;
        sync_dir(&key)?;
        let unsynced = OpenOptions {
            durable: false,
            ..opts.clone()
        };
        let mut index = Index::open_uncached(&key, &unsynced)?;
        // unsynced now, and after `finish_deferred` as `opts` ask
        index.lazy = crate::lazy::Lazy::new(opts);
        let index = Arc::new(index);
        index.deferred.store(true, Ordering::SeqCst);
        Index::register(&mut reg, key, &index);
        Ok(index)
    }

    /// Stops syncing this env's commits until [`Index::finish_deferred`], for a pass
    /// that rewrites most of it (`maildex index rebuild`, issue 19 #1), as
    /// [`Index::create_deferred`] does for a new env: the marker is made durable first,
    /// so an env that a crash leaves unfinished is deleted by the next open, and the
    /// store indexes the Maildir afresh, which is what the pass was doing. Only for an
    /// env whose commits are synced (the caller's `durable`); a second call while
    /// deferred does nothing.
    pub fn defer_syncs(&self) -> Result<(), IndexError> {
        if self.deferred.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let marker = self.path().join(PENDING_FILE);
        let made = File::create(&marker)
            .and_then(|f| f.sync_all())
            .map_err(|e| IndexError::io(&marker, e))
            .and_then(|()| sync_dir(self.path()))
            .and_then(|()| self.set_synced(false));
        if made.is_err() {
            self.deferred.store(false, Ordering::SeqCst);
        }
        made
    }

    /// The note of an env in `dir` whose creation ([`Index::create_deferred`]) has not
    /// finished, or was cut short by a crash; None otherwise.
    pub fn pending_note(dir: &Path) -> Option<Vec<u8>> {
        fs::read(dir.join(PENDING_FILE)).ok()
    }

    /// Makes everything an env from [`Index::create_deferred`] committed so far durable (one
    /// fdatasync), removes its marker, and syncs its commits from now on as a durable env
    /// does. Nothing to do for an env opened otherwise. The folder's own entry in its
    /// parent is the caller's to make durable.
    pub fn finish_deferred(&self) -> Result<(), IndexError> {
        if !self.deferred.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.set_synced(true)?;
        self.deferred.store(false, Ordering::SeqCst);
        remove_if_there(&self.path().join(PENDING_FILE))?;
        sync_dir(self.path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> OpenOptions {
        OpenOptions {
            map_size: 1 << 20,
            durable: true,
            sync_delay: None,
        }
    }

    #[test]
    fn a_deferred_env_keeps_its_marker_until_finished() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("idx");
        let index = Index::create_deferred(&dir, &opts(), b"note").unwrap();
        assert_eq!(Index::pending_note(&dir).as_deref(), Some(&b"note"[..]));
        index.write(|w| w.create_mailbox("INBOX", 7)).unwrap();
        index.finish_deferred().unwrap();
        assert_eq!(Index::pending_note(&dir), None);
        assert!(!dir.join(PENDING_FILE).exists());
        // a second finish, and an env that exists, are no-ops
        index.finish_deferred().unwrap();
        drop(index);
        let again = Index::create_deferred(&dir, &opts(), b"note").unwrap();
        assert!(!dir.join(PENDING_FILE).exists());
        again.finish_deferred().unwrap();
        assert_eq!(again.read(|r| r.mailboxes()).unwrap().len(), 1);
    }

    #[test]
    fn an_env_left_with_its_marker_is_deleted_at_open_unless_in_use() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("idx");
        let index = Index::create_deferred(&dir, &opts(), b"note").unwrap();
        index.write(|w| w.create_mailbox("INBOX", 7)).unwrap();
        // open in this process while it is being created: the same env, nothing deleted
        let same = Index::open(&dir, &opts()).unwrap();
        assert!(Arc::ptr_eq(&index, &same));
        drop((index, same));
        // what a crash before finish_deferred leaves: the env and its marker
        assert!(dir.join(DATA_FILE).exists() && dir.join(PENDING_FILE).exists());
        let reopened = Index::open(&dir, &opts()).unwrap();
        assert!(!dir.join(PENDING_FILE).exists());
        assert_eq!(reopened.read(|r| r.mailboxes()).unwrap().len(), 0);
    }

    #[test]
    fn an_existing_env_whose_syncs_are_deferred_is_marked_until_finished() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("idx");
        let index = Index::open(&dir, &opts()).unwrap();
        index.write(|w| w.create_mailbox("INBOX", 7)).unwrap();
        index.defer_syncs().unwrap();
        index.defer_syncs().unwrap();
        assert_eq!(Index::pending_note(&dir).as_deref(), Some(&b""[..]));
        index.write(|w| w.create_mailbox("Sent", 8)).unwrap();
        index.finish_deferred().unwrap();
        assert!(!dir.join(PENDING_FILE).exists());
        // deferred again and left so (a crash): the next open starts afresh
        index.defer_syncs().unwrap();
        index.write(|w| w.create_mailbox("Trash", 9)).unwrap();
        drop(index);
        let reopened = Index::open(&dir, &opts()).unwrap();
        assert!(!dir.join(PENDING_FILE).exists());
        assert_eq!(reopened.read(|r| r.mailboxes()).unwrap().len(), 0);
    }
}
