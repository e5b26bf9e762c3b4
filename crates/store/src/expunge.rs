//! EXPUNGE and UID EXPUNGE (RFC 3501 §6.4.3, RFC 4315 §2.1).
//!
//! Files first (unlink), then one index commit that removes the records (messages, cache
//! and headers segments), fixes the counters and raises HIGHESTMODSEQ. dovecot-uidlist is
//! not touched: its next UID stays (UIDs are never reused) and the records of removed files
//! are dropped when the sync next compacts it on a complete listing (`uids::assign`).
//! Expunged UIDs are not kept with their modseq (no QRESYNC VANISHED (EARLIER) history yet):
//! a QRESYNC client whose modseq is older than the mailbox's must be sent the full
//! VANISHED from its known UIDs, which RFC 7162 §3.2.5.2 allows.

use maildex_index::MessageState;
use maildex_maildir::deliver::{fsync_dir, remove};
use maildex_maildir::filename::base_of;
use maildex_maildir::transfer::find_base;
use maildex_maildir::{own_writes, MaildirName, Sub};

use crate::opctx::Target;
use crate::{MailboxId, Uid};
use crate::{OpError, StoreError, UserStore};

impl UserStore {
    /// Removes the messages of `mailbox` that have `\Deleted`: all of them, or only those
    /// among `uids` (UID EXPUNGE, RFC 4315 §2.1). Unlinks the files, then removes the index
    /// records in one commit (counters fixed, HIGHESTMODSEQ raised). Returns the UIDs
    /// expunged, ascending. A message another tool renamed meanwhile is found by its base
    /// and expunged only if it still has `\Deleted` (T) on disk; one whose file is gone
    /// already is left for the sync to remove (it removes only on a complete listing).
    pub fn expunge(&self, mailbox: &str, uids: Option<&[Uid]>) -> Result<Vec<Uid>, OpError> {
        let t = self.target(mailbox)?;
        let chosen: Option<Vec<Uid>> = uids.map(<[Uid]>::to_vec);
        // Shared with the mailbox's STOREs, APPENDs and other EXPUNGEs (see `MailboxSerial`):
        // the messages that have \Deleted are claimed against STOREs of them, then read
        // again, so that one a STORE took \Deleted from meanwhile stays.
        let serial = self.mailbox_lock(&t.name);
        let shared = serial.share();
        let candidates: Vec<Uid> = self
            .deleted_states(t.id, chosen)?
            .into_iter()
            .map(|(uid, _)| uid)
            .collect();
        let _claim = serial.claim(&shared, &candidates);
        let states = self.deleted_states(t.id, Some(candidates))?;
        // the unlinks count as this process's for the sync once the index has them
        // (sync_watch.rs), confirmed while the mailbox is still held
        let scope = own_writes::Scope::begin();
        let removed = self.remove_messages(&t, states, true)?;
        scope.confirm();
        Ok(removed)
    }

    /// The messages of mailbox `id` that have `\Deleted`, among `chosen` or all, in UID
    /// order.
    fn deleted_states(
        &self,
        id: MailboxId,
        chosen: Option<Vec<Uid>>,
    ) -> Result<Vec<(Uid, MessageState)>, StoreError> {
        let mut states: Vec<(Uid, MessageState)> = self.index.read(move |r| {
            let all = match chosen {
                None => r.states(id)?,
                Some(list) => {
                    let mut out = Vec::with_capacity(list.len());
                    for uid in list {
                        if let Some(s) = r.state(id, uid)? {
                            out.push((uid, s));
                        }
                    }
                    out
                }
            };
            Ok(all.into_iter().filter(|(_, s)| s.is_deleted()).collect())
        })?;
        states.sort_by_key(|(u, _)| *u);
        states.dedup_by_key(|(u, _)| *u);
        Ok(states)
    }

    /// Unlinks the files of `states` and removes their records in one commit. With
    /// `require_deleted`, a message renamed by another tool meanwhile goes only if its
    /// current name still carries T. The caller holds the mailbox's serial lock, or holds
    /// it shared with `states` claimed ([`crate::MailboxSerial::claim`]).
    pub(crate) fn remove_messages(
        &self,
        t: &Target,
        mut states: Vec<(Uid, MessageState)>,
        require_deleted: bool,
    ) -> Result<Vec<Uid>, OpError> {
        states.sort_by_key(|(u, _)| *u);
        states.dedup_by_key(|(u, _)| *u);
        let mut gone = Vec::with_capacity(states.len());
        for (uid, s) in &states {
            let sub = if s.in_new { Sub::New } else { Sub::Cur };
            maildex_faults::hit(maildex_faults::Point::Unlink)
                .map_err(|e| StoreError::io(sub.path(&t.path).join(&s.file_name), e))?;
            if remove(&t.path, sub, &s.file_name)? {
                gone.push(*uid);
                continue;
            }
            // renamed by another tool since we read the index: find it by its base
            let base = base_of(&s.file_name);
            match find_base(&t.path, base)? {
                Some((sub, name)) => {
                    let still_deleted = MaildirName::parse(&name)
                        .is_ok_and(|n| n.flags.contains(maildex_maildir::Flags::DELETED));
                    if (!require_deleted || still_deleted) && remove(&t.path, sub, &name)? {
                        gone.push(*uid);
                    }
                }
                None => {
                    tracing::debug!(mailbox = %t.name, uid = uid.get(), "file gone before expunge; left for the sync")
                }
            }
        }
        if gone.is_empty() {
            return Ok(gone);
        }
        if self.opts.fsync {
            // an unlink lost in a crash would bring an expunged message back under its UID
            fsync_dir(&Sub::Cur.path(&t.path))?;
            fsync_dir(&Sub::New.path(&t.path))?;
        }
        let id = t.id;
        let list = gone.clone();
        let removed = self.index.write_retrying(move |w| {
            let mut removed = Vec::with_capacity(list.len());
            for &uid in &list {
                if w.remove_message(id, uid)?.is_some() {
                    removed.push(uid);
                }
            }
            Ok(removed)
        })?;
        let bytes: u64 = states
            .iter()
            .filter(|(uid, _)| removed.binary_search(uid).is_ok())
            .map(|(_, s)| s.size)
            .sum();
        let count = i64::try_from(removed.len()).unwrap_or(i64::MAX);
        self.quota_file_change(-i64::try_from(bytes).unwrap_or(i64::MAX), -count);
        Ok(removed)
    }
}
