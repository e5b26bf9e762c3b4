//! Migrations in place: an env of an older schema version that differs from the current
//! one only in how some of its data is laid out is brought up to date when it is opened,
//! in one write transaction, instead of being rebuilt from the Maildir (which would also
//! write every full text again). [`crate::Index`] runs them (`check_schema`); any other
//! older version is rebuilt.

use std::ops::{Bound, ControlFlow};

use crate::flag_column::FlagState;
use crate::schema::{raw_msg_key, raw_split_msg_key};
use crate::txn::Writer;
use crate::{IndexError, Uid};

impl Writer<'_, '_> {
    /// Brings an env of schema version `from` to the current one and stores the version.
    /// False when `from` has no migration in place.
    pub(crate) fn migrate(&mut self, from: u32) -> Result<bool, IndexError> {
        if !matches!(from, 11 | 12) {
            return Ok(false);
        }
        // version 11 lacked the flags column, version 12's lacked the sizes and dates
        self.fill_flag_column()?;
        // both stored a search record per LMDB value
        self.pack_search_column()?;
        self.init_schema()?;
        Ok(true)
    }

    /// Fills the `flags` column from the states of every mailbox (a rebuild
    /// from the Maildir would also write every full text again).
    pub(crate) fn fill_flag_column(&mut self) -> Result<(), IndexError> {
        let col = self.dbs.flag_column();
        for (id, _) in self.reader().mailboxes()? {
            col.clear(self.txn, id.get())?;
            let mut items = Vec::new();
            self.reader()
                .for_each_state_nameless(id, Uid::MIN..=Uid::MAX, |uid, st| {
                    items.push((uid.get(), FlagState::of(&st)));
                    Ok(ControlFlow::Continue(()))
                })?;
            col.put_many(self.txn, id.get(), items)?;
        }
        Ok(())
    }

    /// Packs the `cache-search` records of every mailbox, stored one per LMDB value under
    /// its message key up to version 12, into the packed column ([`crate::packed`]). Holds one mailbox's records in memory at a time.
    pub(crate) fn pack_search_column(&mut self) -> Result<(), IndexError> {
        let col = self.dbs.cache().search;
        for (id, _) in self.reader().mailboxes()? {
            let m = id.get();
            let (lo, hi) = (raw_msg_key(m, 0), raw_msg_key(m, u32::MAX));
            let range = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
            let mut items = Vec::new();
            for item in col
                .db
                .range(self.txn, &range)
                .map_err(IndexError::from_heed)?
            {
                let (k, v) = item.map_err(IndexError::from_heed)?;
                if let Some((_, uid)) = raw_split_msg_key(k) {
                    items.push((uid, v.to_vec()));
                }
            }
            col.clear(self.txn, m)?;
            col.put_many(self.txn, m, items)?;
        }
        Ok(())
    }
}
