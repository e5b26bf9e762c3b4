//! Small per-message records, one LMDB value each under the message key, uncompressed:
//! for data read for every message of a mailbox and small enough (under a few hundred
//! bytes) that LMDB packs many values into a page, where a segment's zstd frame costs
//! more to decompress than the records cost to read (see `cache-search` in
//! docs/INDEX-FORMAT.md for the measurement). Same operations as [`crate::segment`].

use std::ops::{Bound, ControlFlow, RangeInclusive};

use heed::types::Bytes;
use heed::{Database, RoTxn, RwTxn, WithoutTls};

use crate::schema::{raw_msg_key, raw_split_msg_key};
use crate::IndexError;

fn lmdb(e: heed::Error) -> IndexError {
    IndexError::from_heed(e)
}

/// A database of one record per message.
#[derive(Clone, Copy)]
pub(crate) struct Plain<'e> {
    pub db: Database<'e, Bytes, Bytes>,
}

impl Plain<'_> {
    /// The record of `uid`.
    pub fn get<'t>(
        &self,
        txn: &'t RoTxn<WithoutTls>,
        mailbox: u32,
        uid: u32,
    ) -> Result<Option<&'t [u8]>, IndexError> {
        self.db
            .get(txn, &raw_msg_key(mailbox, uid)[..])
            .map_err(lmdb)
    }

    /// Calls `f` with each stored (uid, record) of `mailbox` in `uids`, in UID order.
    pub fn for_each<'t>(
        &self,
        txn: &'t RoTxn<WithoutTls>,
        mailbox: u32,
        uids: RangeInclusive<u32>,
        mut f: impl FnMut(u32, &'t [u8]) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        let (lo, hi) = (
            raw_msg_key(mailbox, *uids.start()),
            raw_msg_key(mailbox, *uids.end()),
        );
        let range = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
        for item in self.db.range(txn, &range).map_err(lmdb)? {
            let (k, v) = item.map_err(lmdb)?;
            let uid = raw_split_msg_key(k).map_or(0, |(_, u)| u);
            if f(uid, v)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    /// Stores many (uid, record).
    pub fn put_many(
        &self,
        txn: &mut RwTxn,
        mailbox: u32,
        items: Vec<(u32, Vec<u8>)>,
    ) -> Result<(), IndexError> {
        for (uid, data) in items {
            self.db
                .put(txn, &raw_msg_key(mailbox, uid)[..], &data)
                .map_err(lmdb)?;
        }
        Ok(())
    }

    /// Removes `uid`'s record.
    pub fn remove(&self, txn: &mut RwTxn, mailbox: u32, uid: u32) -> Result<bool, IndexError> {
        self.db
            .delete(txn, &raw_msg_key(mailbox, uid)[..])
            .map_err(lmdb)
    }

    /// Removes every record of `mailbox`.
    pub fn clear(&self, txn: &mut RwTxn, mailbox: u32) -> Result<(), IndexError> {
        let (lo, hi) = (raw_msg_key(mailbox, 0), raw_msg_key(mailbox, u32::MAX));
        let range = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
        self.db.delete_range(txn, &range).map_err(lmdb)?;
        Ok(())
    }
}
