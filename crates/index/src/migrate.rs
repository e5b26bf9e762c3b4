//! Migrations in place: an env of an older schema version that differs from the current
//! one only in how some of its data is laid out is brought up to date when it is opened,
//! in one write transaction, instead of being rebuilt from the Maildir (which would also
//! write every full text again). [`crate::Index`] runs them (`check_schema`); any other
//! older version is rebuilt.

use std::ops::{Bound, ControlFlow};

use crate::flag_column::FlagState;
use crate::schema::{raw_msg_key, raw_split_msg_key, SCHEMA_VERSION};
use crate::txn::Writer;
use crate::{IndexError, Uid};

impl Writer<'_, '_> {
    /// Brings an env of schema version `from` to the current one and stores the version.
    /// False when `from` has no migration in place.
    pub(crate) fn migrate(&mut self, from: u32) -> Result<bool, IndexError> {
        if !matches!(from, 11 | 12) {
            return Ok(false);
        }
        // another process (the daemon and an admin command) may have opened the env at the
        // same time and migrated it in the write queued before this one: packing packed
        // records again would lose them
        match self.reader().schema_version()? {
            Some(v) if v == SCHEMA_VERSION => return Ok(true),
            Some(v) if v == from => {}
            _ => return Ok(false),
        }
        // version 11 lacked the flags column, version 12's lacked the sizes and dates
        self.fill_flag_column()?;
        // both stored a search record per LMDB value
        self.pack_search_column()?;
        self.init_schema()?;
        Ok(true)
    }

    /// Fills the `flags` column from the states of every mailbox (a rebuild
    /// from the Maildir would also write every full text again); whatever it held before
    /// goes, a mailbox no longer listed included.
    pub(crate) fn fill_flag_column(&mut self) -> Result<(), IndexError> {
        let col = self.dbs.flag_column();
        col.db.clear(self.txn).map_err(IndexError::from_heed)?;
        for (id, _) in self.reader().mailboxes()? {
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
    /// its message key up to version 12, into the packed column ([`crate::packed`]):
    /// each mailbox id the database holds records of, listed or not. Holds one
    /// mailbox's records in memory at a time.
    pub(crate) fn pack_search_column(&mut self) -> Result<(), IndexError> {
        let col = self.dbs.cache().search;
        let split = |key: &[u8]| {
            raw_split_msg_key(key).ok_or_else(|| {
                IndexError::Corrupt(format!("cache-search: a key of {} bytes", key.len()))
            })
        };
        let mut from = 0u32;
        loop {
            let start = raw_msg_key(from, 0);
            let found = col
                .db
                .get_greater_than_or_equal_to(self.txn, &start[..])
                .map_err(IndexError::from_heed)?;
            let Some((key, _)) = found else {
                return Ok(());
            };
            let (m, _) = split(key)?;
            let (lo, hi) = (raw_msg_key(m, 0), raw_msg_key(m, u32::MAX));
            let range = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
            let mut items = Vec::new();
            for item in col
                .db
                .range(self.txn, &range)
                .map_err(IndexError::from_heed)?
            {
                let (k, v) = item.map_err(IndexError::from_heed)?;
                let (_, uid) = split(k)?;
                items.push((uid, v.to_vec()));
            }
            col.clear(self.txn, m)?;
            col.put_many(self.txn, m, items)?;
            match m.checked_add(1) {
                Some(next) => from = next,
                None => return Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ops::ControlFlow;

    use crate::{Index, MessageRecord, OpenOptions, Uid};

    /// The daemon and an admin command may both open an env of version 12 and queue its
    /// migration: the second finds version 13 and leaves the packed records alone.
    #[test]
    fn a_migration_queued_twice_runs_once() {
        let dir = tempfile::tempdir().unwrap();
        let opts = OpenOptions {
            map_size: 1 << 20,
            durable: false,
            sync_delay: None,
        };
        let index = Index::open(dir.path(), &opts).unwrap();
        let id = index
            .write(|w| {
                let id = w.create_mailbox("INBOX", 1)?;
                for u in 1..=40 {
                    let mut m = MessageRecord::default();
                    m.cached.search.subject = vec![format!("subject {u}")];
                    w.insert_message(id, Uid(u), m, Vec::new())?;
                }
                Ok(id)
            })
            .unwrap();
        let records = |index: &Index| {
            index
                .read(|r| {
                    let mut out = Vec::new();
                    r.for_each_search(id, Uid::MIN..=Uid::MAX, |u, d| {
                        out.push((u, d.to_vec()));
                        Ok(ControlFlow::Continue(()))
                    })?;
                    Ok(out)
                })
                .unwrap()
        };
        let before = records(&index);
        assert_eq!(before.len(), 40);
        for from in [11, 12] {
            assert!(index.write(move |w| w.migrate(from)).unwrap());
        }
        assert!(!index.write(|w| w.migrate(10)).unwrap());
        assert_eq!(records(&index), before);
    }
}
