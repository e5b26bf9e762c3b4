//! The Maildir++ `maildirsize` of a user who has a storage quota (issue 20 #5), kept for
//! the other tools on the Maildir (Dovecot's `quota = maildir`, Courier, maildrop); maildex's
//! own quota counts come from the index. Written, as Dovecot writes it, only while a limit
//! is set ([`UserStore::set_quota_limit`], from the user directory): each delivery, APPEND
//! and COPY appends `<bytes> 1`, each expunge `-<bytes> -<n>` (a MOVE between two mailboxes
//! changes nothing; one within a mailbox appends both), after its index commit; DELETE of a
//! mailbox, a changed limit, a missing or broken file and a file that reached
//! [`maildirsize::RECALC_AT`] bytes are recalculated from the index (the file sizes of every
//! indexed message). Changes other tools make to the Maildir are theirs to record
//! (Maildir++); a sync does not write the file. A failure to write it is logged and never
//! fails the operation it follows: the file is advice to other tools.

use maildex_maildir::maildirsize;

use crate::{StoreError, UserStore};

impl UserStore {
    /// Sets the user's storage limit in bytes (`None`: no quota, no `maildirsize` written).
    /// A limit that the file does not state yet rewrites it from the index.
    pub fn set_quota_limit(&self, limit: Option<u64>) {
        let mut current = self.quota_limit.lock().unwrap_or_else(|p| p.into_inner());
        if *current == limit {
            return;
        }
        *current = limit;
        let Some(limit) = limit else { return };
        let up_to_date = matches!(
            maildirsize::read(&self.root),
            Ok(Some(s)) if s.definition == maildirsize::definition(limit)
                && s.len < maildirsize::RECALC_AT
                && s.bytes >= 0 && s.count >= 0
        );
        if !up_to_date {
            self.recalculate_quota_file(limit);
        }
    }

    /// Records a change of `bytes` and `count` messages in `maildirsize` (when a limit is
    /// set), recalculating it when it is missing or has grown long.
    pub(crate) fn quota_file_change(&self, bytes: i64, count: i64) {
        let current = self.quota_limit.lock().unwrap_or_else(|p| p.into_inner());
        let Some(limit) = *current else { return };
        if bytes == 0 && count == 0 {
            return;
        }
        match maildirsize::append(&self.root, bytes, count) {
            Ok(Some(len)) if len < maildirsize::RECALC_AT => {}
            Ok(_) => self.recalculate_quota_file(limit),
            Err(e) => tracing::warn!(error = %e, "maildirsize not updated"),
        }
    }

    /// Rewrites `maildirsize` from the index after a change the deltas do not describe
    /// (DELETE of a mailbox).
    pub(crate) fn quota_file_recalculate(&self) {
        let current = self.quota_limit.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(limit) = *current {
            self.recalculate_quota_file(limit);
        }
    }

    fn recalculate_quota_file(&self, limit: u64) {
        let written = self.quota_file_totals().and_then(|(bytes, count)| {
            maildirsize::write(&self.root, &maildirsize::definition(limit), bytes, count)
                .map_err(StoreError::from)
        });
        if let Err(e) = written {
            tracing::warn!(error = %e, "maildirsize not recalculated");
        }
    }

    /// What a Maildir++ recalculation counts, from the index: the file sizes of every
    /// indexed message and their number.
    pub fn quota_file_totals(&self) -> Result<(u64, u64), StoreError> {
        Ok(self.index.read(|r| {
            let (mut bytes, mut count) = (0u64, 0u64);
            for (id, _) in r.mailboxes()? {
                for (_, s) in r.states(id)? {
                    bytes += s.size;
                    count += 1;
                }
            }
            Ok((bytes, count))
        })?)
    }

    /// The RFC822.SIZE of the `\Deleted` messages of mailbox `name` (0 when it is not
    /// indexed): what EXPUNGE would take off the quota's use (RFC 9208 §4.2
    /// DELETED-STORAGE). Reads the mailbox's message states (no file).
    pub fn deleted_vsize(&self, name: &str) -> Result<u64, StoreError> {
        let Some((id, _)) = self.indexed_mailbox(Self::canonical(name))? else {
            return Ok(0);
        };
        Ok(self.index.read(move |r| {
            Ok(r.states(id)?
                .iter()
                .filter(|(_, s)| s.is_deleted())
                .map(|(_, s)| s.vsize)
                .sum())
        })?)
    }
}
