//! `maildex index rebuild`: re-index every message from the files, keeping every UID (they
//! come from dovecot-uidlist) and never letting a modseq go backwards.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use maildex_index::IndexError;
use maildex_maildir::folder;

use crate::{StoreError, StoreOptions, SyncReport, UserStore};

/// Mailboxes of one user rebuilt at once ([`UserStore::rebuild`]).
const MAILBOXES_AT_ONCE: usize = 2;

/// Progress of a rebuild, reported after each mailbox.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Mailbox just finished.
    pub mailbox: String,
    /// Mailboxes done so far.
    pub done: usize,
    /// Mailboxes in all.
    pub total: usize,
    /// Messages indexed so far.
    pub messages: usize,
}

/// What a rebuild did.
#[derive(Clone, Debug, Default)]
pub struct RebuildReport {
    /// The sync work it did (added = messages indexed).
    pub sync: SyncReport,
    /// Wall time.
    pub elapsed: Duration,
    /// Where an unusable index was moved aside, if it was.
    pub moved_aside: Option<PathBuf>,
}

impl UserStore {
    /// Opens a store for rebuilding: an index that cannot be opened (another schema version,
    /// a corrupt file) is moved aside and a new one created. Safe because UIDs live in
    /// dovecot-uidlist, not in the index.
    pub fn open_for_rebuild(
        maildir: &Path,
        index_dir: &Path,
        opts: StoreOptions,
    ) -> Result<(UserStore, Option<PathBuf>), StoreError> {
        match UserStore::open(maildir, index_dir, opts.clone()) {
            Ok(s) => Ok((s, None)),
            Err(StoreError::Index(
                e @ (IndexError::SchemaMismatch { .. }
                | IndexError::Unusable { .. }
                | IndexError::Corrupt(_)),
            )) => {
                // Only when no process has it open: a daemon (of another version, say) would
                // go on writing into the moved folder. Modseqs of the new index start above
                // the old ones (they start from the clock).
                let _alone = maildex_index::lock_exclusive(index_dir)?;
                let stamp = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let aside = index_dir.with_extension(format!("broken-{stamp}"));
                tracing::warn!(index = %index_dir.display(), error = %e, aside = %aside.display(), "index unusable; moving it aside and rebuilding");
                std::fs::rename(index_dir, &aside).map_err(|err| StoreError::io(index_dir, err))?;
                Ok((UserStore::open(maildir, index_dir, opts)?, Some(aside)))
            }
            Err(e) => Err(e),
        }
    }

    /// Opens a store, replacing an index written by another schema version (an upgrade of
    /// maildex) with a new, empty one that the next sync fills from the Maildir, as Dovecot
    /// rebuilds its caches. Nothing is lost: UIDs, UIDVALIDITY and keywords live in the
    /// Maildir's own files. The old index is deleted; other damage is still an error (the
    /// admin runs `maildex index rebuild`, which keeps the old one aside).
    pub fn open_upgrading(
        maildir: &Path,
        index_dir: &Path,
        opts: StoreOptions,
    ) -> Result<UserStore, StoreError> {
        match UserStore::open(maildir, index_dir, opts.clone()) {
            Err(StoreError::Index(IndexError::SchemaMismatch { found, .. })) => {
                tracing::warn!(
                    index = %index_dir.display(),
                    found,
                    "index of another schema version; rebuilding it from the Maildir"
                );
                let (store, aside) = UserStore::open_for_rebuild(maildir, index_dir, opts)?;
                if let Some(aside) = aside {
                    if let Err(e) = std::fs::remove_dir_all(&aside) {
                        tracing::warn!(old = %aside.display(), error = %e, "could not delete the old index");
                    }
                }
                Ok(store)
            }
            other => other,
        }
    }

    /// Re-indexes every mailbox from its files. UIDs, UIDVALIDITY and the highest modseq are
    /// kept; counters are recomputed.
    ///
    /// The index's commits are not synced meanwhile, and it is made durable once at the
    /// end ([`maildex_index::Index::defer_syncs`]): three or four commits a mailbox, each
    /// an fdatasync, were most of the time of a rebuild of many small users (1,000 users
    /// of ten folders: 40,000 fdatasyncs). A crash meanwhile leaves the index marked, and
    /// the next open deletes it and indexes the Maildir afresh, as the rebuild was doing.
    pub fn rebuild(
        &self,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<RebuildReport, StoreError> {
        let deferred = self.opts.fsync && self.opts.index.durable;
        if deferred {
            self.index.defer_syncs()?;
        }
        let rebuilt = self.rebuild_mailboxes(progress);
        // made durable whatever happened: a mailbox the error cut short is indexed again
        // by its next sync (its stamps were cleared with its records)
        let finished = if deferred {
            self.index.finish_deferred().map_err(StoreError::from)
        } else {
            Ok(())
        };
        let report = rebuilt?;
        finished?;
        Ok(report)
    }

    fn rebuild_mailboxes(
        &self,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<RebuildReport, StoreError> {
        let started = Instant::now();
        let folders = folder::list_folders(&self.root)?;
        let mut report = RebuildReport::default();
        // Two mailboxes at a time: each one's parse and commit pipeline fills and drains
        // (its first batch parsed while nothing commits, its last committed while nothing
        // parses), and a mailbox of a few messages is parsed on one thread; another
        // mailbox's work fills those gaps. Results are taken here, in the order they come.
        let mut failed = None;
        let mut finished = 0;
        crate::parallel::for_each_in_parallel(
            &folders,
            MAILBOXES_AT_ONCE,
            |_: &mut (), f| self.rebuild_mailbox(&f.name),
            |i, done| {
                match done {
                    Ok(r) => report.sync.merge(r),
                    Err(e) => {
                        failed.get_or_insert(e);
                    }
                }
                finished += 1;
                progress(&Progress {
                    mailbox: folders[i].name.clone(),
                    done: finished,
                    total: folders.len(),
                    messages: report.sync.added,
                });
                failed.is_none()
            },
        );
        if let Some(e) = failed {
            return Err(e);
        }
        let all = self.sync_all()?;
        report.sync.deleted_mailboxes.extend(all.deleted_mailboxes);
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// Re-indexes mailbox `name` from its files, keeping its UIDs.
    fn rebuild_mailbox(&self, name: &str) -> Result<SyncReport, StoreError> {
        // first make sure dovecot-uidlist is complete (a lost one is recreated from the
        // index here, while the index still knows every UID)
        self.sync_mailbox(name)?;
        if let Some((id, _)) = self.indexed_mailbox(name)? {
            // records go, the mailbox record (uidvalidity, uid_next, modseq) stays; the
            // forced sync below recreates every record from its file with its UID
            let lock = self.mailbox_lock(name);
            let _serial = lock.hold();
            self.index.write(move |w| {
                w.clear_messages(id)?;
                let mut m = w.reader().require_mailbox(id)?;
                m.new_stamp = Default::default();
                m.cur_stamp = Default::default();
                m.uidlist_stamp = Default::default();
                w.put_mailbox(id, &m)
            })?;
        }
        self.sync_mailbox_with(name, true, false)
    }
}
