//! The error of the operations an IMAP session asks for (STORE, EXPUNGE, COPY, MOVE,
//! CREATE, DELETE, RENAME, SUBSCRIBE). The variant decides the reply: every variant but
//! [`OpError::Store`] is a user-visible refusal, whose [`Refusal`] each protocol maps to its
//! own code in one place (IMAP `NO [CODE]`); `Store` is a server fault (`NO [SERVERBUG]`
//! plus an error log) or an I/O failure.

use maildex_index::IndexError;
use maildex_maildir::MaildirError;

use crate::StoreError;

/// What can go wrong in a session-level store operation.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The mailbox does not exist (`NO [NONEXISTENT]`, RFC 5530).
    #[error("no mailbox {0:?}")]
    NoMailbox(String),
    /// A mailbox of that name exists already (`NO [ALREADYEXISTS]`, RFC 5530).
    #[error("mailbox {0:?} already exists")]
    MailboxExists(String),
    /// The name cannot be a Maildir++ mailbox name (`NO [CANNOT]`): empty, an empty
    /// hierarchy level, `/`, NUL, too long.
    #[error("invalid mailbox name {name:?}: {reason}")]
    BadName {
        /// The name asked for.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The operation is not allowed on this mailbox (`NO [CANNOT]`): deleting INBOX,
    /// renaming a mailbox under itself.
    #[error("mailbox {mailbox:?}: {reason}")]
    Cannot {
        /// The mailbox.
        mailbox: String,
        /// Why.
        reason: &'static str,
    },
    /// A new keyword does not fit: a Maildir names at most 26 keywords
    /// (dovecot-keywords letters `a`..`z`). RFC 3501 §2.3.2 lets a server refuse new
    /// keywords (`NO [LIMIT]`, RFC 5530); nothing was changed.
    #[error("mailbox {mailbox:?}: no room for keyword {keyword:?} (26 keywords per Maildir)")]
    KeywordLimit {
        /// The mailbox.
        mailbox: String,
        /// The keyword that did not fit.
        keyword: String,
    },
    /// A keyword that cannot be stored in dovecot-keywords (empty, or with spaces or
    /// control characters); the IMAP grammar refuses these already (`NO [CANNOT]`).
    #[error("keyword {0:?} cannot be stored")]
    BadKeyword(String),
    /// The store failed: a server fault or an I/O error (names the file involved).
    #[error(transparent)]
    Store(StoreError),
}

/// Why the store refused an operation, in the store's terms; the IMAP crate turns it into
/// an RFC 5530 response code, and nothing else decides that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The mailbox does not exist.
    Nonexistent,
    /// A mailbox of that name exists already.
    AlreadyExists,
    /// The operation cannot be done on this name or mailbox.
    Cannot,
    /// A limit of the store is reached (keywords per Maildir).
    Limit,
}

impl OpError {
    /// Why the operation was refused, or None for a server fault.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            OpError::NoMailbox(_) => Some(Refusal::Nonexistent),
            OpError::MailboxExists(_) => Some(Refusal::AlreadyExists),
            OpError::BadName { .. } | OpError::Cannot { .. } | OpError::BadKeyword(_) => {
                Some(Refusal::Cannot)
            }
            OpError::KeywordLimit { .. } => Some(Refusal::Limit),
            OpError::Store(_) => None,
        }
    }
}

impl From<StoreError> for OpError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NoMailbox(name) => OpError::NoMailbox(name),
            StoreError::Maildir(m) => m.into(),
            other => OpError::Store(other),
        }
    }
}

impl From<MaildirError> for OpError {
    fn from(e: MaildirError) -> Self {
        match e {
            MaildirError::BadMailboxName { name, reason } => OpError::BadName { name, reason },
            other => OpError::Store(StoreError::Maildir(other)),
        }
    }
}

impl From<IndexError> for OpError {
    fn from(e: IndexError) -> Self {
        OpError::Store(StoreError::Index(e))
    }
}
