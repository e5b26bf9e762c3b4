//! Message text for SEARCH BODY/TEXT (and a later full-text index): the store reads the
//! file and hands it, with the part tree the index keeps, to maildex-text, so the IMAP
//! crate does no MIME work and never opens a message file for it.

use maildex_index::{Built, MessageState, PartRecord};
use maildex_text::{Html, MessageText};

use crate::{StoreError, UserStore};

/// The index record of a message from its bytes, built as delivery builds it (for tests
/// and tools that need a record, and so its part tree, without a Maildir).
pub fn build_record(bytes: &[u8], state: MessageState) -> Result<Built, StoreError> {
    crate::convert::build(bytes, state)
}

impl UserStore {
    /// The decoded text of the message `state` (its index state) in mailbox `mailbox`, whose
    /// part tree is `parts` (the index's [`maildex_index::Cached::parts`]), read with
    /// [`UserStore::read_message`]. `None` when it cannot be read (removed or renamed by
    /// another tool since the index saw it): SEARCH takes that as no match.
    pub fn message_text(
        &self,
        mailbox: &crate::Mailbox,
        state: &MessageState,
        parts: &PartRecord,
        html: Html,
    ) -> Option<MessageText> {
        let bytes = self.read_message(mailbox, state)?;
        Some(MessageText::extract(&bytes, parts, html))
    }
}
