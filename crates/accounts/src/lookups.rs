//! The two questions postfix's recipient maps ask (served by the daemon's socketmap,
//! `maildex-postfix`): is this address a user's mailbox, and what does this alias expand to.

use crate::{Accounts, Unavailable, User};

impl Accounts {
    /// The user whose mailbox `address` is, aliases left aside: the user the address names,
    /// else, when the local part holds a `recipient_delimiter`, the user the part before it
    /// names (`user+detail@domain`). BLOCKING for SQL.
    pub fn mailbox_user(&self, address: &str) -> Result<Option<User>, Unavailable> {
        let dir = self.dir();
        if let Some(u) = Self::user_cached(&dir.cache, &*dir.db, address)? {
            return Ok(Some(u));
        }
        match self.split_detail(address) {
            Some((base, _)) => Self::user_cached(&dir.cache, &*dir.db, &base),
            None => Ok(None),
        }
    }

    /// The targets of the alias `address`, as written (the aliases file's, else the
    /// directory's `alias_query`); `None` when it is no alias. BLOCKING for SQL.
    pub fn alias_targets(&self, address: &str) -> Result<Option<Vec<String>>, Unavailable> {
        let dir = self.dir();
        match dir.aliases.lookup(address) {
            Some(t) => Ok(Some(t.to_vec())),
            None => Self::directory_aliases(&dir.cache, &*dir.db, address),
        }
    }
}
