//! The change log: every indexed message keyed by (mailbox, modseq of its last change), and
//! expunge tombstones keyed by (mailbox, modseq of the expunge). "What changed in this
//! mailbox since MODSEQ m" (RFC 7162 §3.1.4 CHANGEDSINCE, §3.2.5 QRESYNC, a session woken
//! by a commit) is then a range scan over the changes since m, not a scan of the mailbox:
//! after one delivery, a session on a 30,000-message mailbox reads one record.
//!
//! The [`crate::Writer`] keeps it: a message has exactly one `changes` entry, at its current
//! modseq (an insert adds it, a flag change moves it, an expunge removes it and adds a
//! tombstone). Tombstones are bounded per mailbox ([`MAX_TOMBSTONES`]): the oldest go, and
//! [`MailboxRecord::expunge_floor`] records the modseq below which the expunge history is
//! no longer complete, as it does for a mailbox indexed afresh (rebuild, a new record).

use std::ops::Bound;

use heed::{RoTxn, RwTxn, WithoutTls};

use crate::env::Dbs;
use crate::schema::{MailboxRecord, MessageState};
use crate::{IndexError, MailboxId, ModSeq, Uid};

/// Most expunge tombstones kept per mailbox; beyond it the oldest tenth is dropped and the
/// floor raised. A client that last synced before the floor gets the full UID list
/// instead of the expunges (RFC 7162 §3.2.5.2 allows either).
pub const MAX_TOMBSTONES: u32 = 100_000;

/// Key of a change-log or tombstone entry: mailbox id then modseq, both big-endian, so a
/// range scan over one mailbox runs in modseq order.
pub fn change_key(mailbox: MailboxId, modseq: ModSeq) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..4].copy_from_slice(&mailbox.to_be_bytes());
    k[4..].copy_from_slice(&modseq.to_be_bytes());
    k
}

/// Splits a [`change_key`] back into (mailbox id, modseq).
pub fn split_change_key(key: &[u8]) -> Option<(MailboxId, ModSeq)> {
    let k: [u8; 12] = key.try_into().ok()?;
    let (mbox, modseq) = k.split_at(4);
    Some((
        MailboxId(u32::from_be_bytes(mbox.try_into().ok()?)),
        ModSeq(u64::from_be_bytes(modseq.try_into().ok()?)),
    ))
}

fn lmdb(e: heed::Error) -> IndexError {
    IndexError::from_heed(e)
}

fn uid_of(key: &[u8], value: &[u8]) -> Result<(ModSeq, Uid), IndexError> {
    let (_, modseq) = split_change_key(key)
        .ok_or_else(|| IndexError::Corrupt(format!("change key of {} bytes", key.len())))?;
    let uid = value
        .try_into()
        .map(|b| Uid(u32::from_be_bytes(b)))
        .map_err(|_| IndexError::Corrupt(format!("change value of {} bytes", value.len())))?;
    Ok((modseq, uid))
}

/// What changed in a mailbox since a modseq.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeSet {
    /// Messages whose last change is above the modseq (added or flags changed), in UID
    /// order, with their state now.
    pub changed: Vec<(Uid, MessageState)>,
    /// UIDs expunged above the modseq, ascending; `None` when the tombstones no longer
    /// reach back that far (the caller compares full UID lists instead).
    pub expunged: Option<Vec<Uid>>,
    /// Index records read to answer (change-log entries, tombstones, message states): what
    /// the answer cost, for tests and benchmarks.
    pub records_read: usize,
}

/// Entries of `db` for `mailbox` with a modseq above `since`, as (modseq, uid).
fn scan(
    db: heed::Database<heed::types::Bytes, heed::types::Bytes>,
    txn: &RoTxn<'_, WithoutTls>,
    mailbox: MailboxId,
    since: ModSeq,
) -> Result<Vec<(ModSeq, Uid)>, IndexError> {
    if since == ModSeq::MAX {
        return Ok(Vec::new());
    }
    let lo = change_key(mailbox, since.next());
    let hi = change_key(mailbox, ModSeq::MAX);
    let range = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
    let mut out = Vec::new();
    for item in db.range(txn, &range).map_err(lmdb)? {
        let (k, v) = item.map_err(lmdb)?;
        out.push(uid_of(k, v)?);
    }
    Ok(out)
}

/// The UIDs of `mailbox` whose last change is above `since`, ascending.
pub(crate) fn changed_uids(
    dbs: &Dbs<'_>,
    txn: &RoTxn<'_, WithoutTls>,
    mailbox: MailboxId,
    since: ModSeq,
) -> Result<Vec<Uid>, IndexError> {
    let mut uids: Vec<Uid> = scan(dbs.changes, txn, mailbox, since)?
        .into_iter()
        .map(|(_, uid)| uid)
        .collect();
    uids.sort_unstable();
    Ok(uids)
}

/// The UIDs of `mailbox` expunged above `since`, ascending; `None` when the tombstones do
/// not reach back to `since` (see [`ChangeSet::expunged`]).
pub(crate) fn expunged_uids(
    dbs: &Dbs<'_>,
    txn: &RoTxn<'_, WithoutTls>,
    mailbox: MailboxId,
    rec: &MailboxRecord,
    since: ModSeq,
) -> Result<Option<Vec<Uid>>, IndexError> {
    if since < rec.expunge_floor {
        return Ok(None);
    }
    let mut uids: Vec<Uid> = scan(dbs.expunged, txn, mailbox, since)?
        .into_iter()
        .map(|(_, uid)| uid)
        .collect();
    uids.sort_unstable();
    uids.dedup();
    Ok(Some(uids))
}

/// Moves message `uid`'s change-log entry from `old` (if it had one) to `new`.
pub(crate) fn log_change(
    dbs: &Dbs<'_>,
    txn: &mut RwTxn<'_>,
    mailbox: MailboxId,
    uid: Uid,
    old: Option<ModSeq>,
    new: ModSeq,
) -> Result<(), IndexError> {
    if let Some(old) = old.filter(|&o| o != new) {
        dbs.changes
            .delete(txn, &change_key(mailbox, old))
            .map_err(lmdb)?;
    }
    dbs.changes
        .put(txn, &change_key(mailbox, new), &uid.to_be_bytes())
        .map_err(lmdb)
}

/// Records the expunge of `uid` (whose last change had modseq `old`) at modseq `at`, and
/// drops the oldest tombstones of the mailbox when it has more than [`MAX_TOMBSTONES`].
pub(crate) fn log_expunge(
    dbs: &Dbs<'_>,
    txn: &mut RwTxn<'_>,
    mailbox: MailboxId,
    uid: Uid,
    old: ModSeq,
    at: ModSeq,
    rec: &mut MailboxRecord,
) -> Result<(), IndexError> {
    dbs.changes
        .delete(txn, &change_key(mailbox, old))
        .map_err(lmdb)?;
    dbs.expunged
        .put(txn, &change_key(mailbox, at), &uid.to_be_bytes())
        .map_err(lmdb)?;
    rec.tombstones += 1;
    prune(dbs, txn, mailbox, rec, MAX_TOMBSTONES)
}

/// Drops the oldest tenth of the mailbox's tombstones when it has more than `max`, and
/// raises the floor to the last one dropped.
fn prune(
    dbs: &Dbs<'_>,
    txn: &mut RwTxn<'_>,
    mailbox: MailboxId,
    rec: &mut MailboxRecord,
    max: u32,
) -> Result<(), IndexError> {
    if rec.tombstones > max {
        let drop = (max / 10).max(1) as usize;
        let oldest = scan(dbs.expunged, txn, mailbox, ModSeq(0))?;
        let Some(&(cut, _)) = oldest.get(drop - 1).or(oldest.last()) else {
            rec.tombstones = 0;
            return Ok(());
        };
        let lo = change_key(mailbox, ModSeq(0));
        let hi = change_key(mailbox, cut);
        let range = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
        let gone = dbs.expunged.delete_range(txn, &range).map_err(lmdb)?;
        rec.tombstones = rec.tombstones.saturating_sub(gone as u32);
        rec.expunge_floor = rec.expunge_floor.max(cut);
    }
    Ok(())
}

/// Forgets the change log and tombstones of `mailbox` (its messages are being cleared or
/// the mailbox deleted); expunges before now can no longer be told.
pub(crate) fn clear(
    dbs: &Dbs<'_>,
    txn: &mut RwTxn<'_>,
    mailbox: MailboxId,
    rec: Option<&mut MailboxRecord>,
) -> Result<(), IndexError> {
    let lo = change_key(mailbox, ModSeq(0));
    let hi = change_key(mailbox, ModSeq::MAX);
    let range = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
    dbs.changes.delete_range(txn, &range).map_err(lmdb)?;
    dbs.expunged.delete_range(txn, &range).map_err(lmdb)?;
    if let Some(rec) = rec {
        rec.tombstones = 0;
        rec.expunge_floor = rec.highest_modseq;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Index, MessageRecord, OpenOptions};

    #[test]
    fn the_oldest_tombstones_go_and_the_floor_follows() {
        let dir = tempfile::tempdir().unwrap();
        let opts = OpenOptions {
            map_size: 1 << 20,
            durable: false,
            sync_delay: None,
        };
        let index = Index::open(dir.path(), &opts).unwrap();
        let (id, start) = index
            .write(|w| {
                let id = w.create_mailbox("INBOX", 1)?;
                let batch = (1..=30)
                    .map(|uid| (Uid(uid), MessageRecord::default(), Vec::new()))
                    .collect();
                w.insert_messages(id, batch)?;
                Ok((id, w.reader().require_mailbox(id)?.highest_modseq))
            })
            .unwrap();
        // 25 expunges with room for 20: the oldest tenth (2) goes each time over 20
        let (rec, kept) = index
            .write(move |w| {
                for uid in 1..=25 {
                    w.remove_message(id, Uid(uid))?;
                    let mut rec = w.reader().require_mailbox(id)?;
                    prune(w.dbs, w.txn, id, &mut rec, 20)?;
                    w.put_mailbox(id, &rec)?;
                }
                let rec = w.reader().require_mailbox(id)?;
                let kept = scan(w.dbs.expunged, w.txn, id, ModSeq(0))?;
                Ok((rec, kept))
            })
            .unwrap();
        assert_eq!(rec.tombstones as usize, kept.len());
        assert!(kept.len() <= 20, "{kept:?}");
        let kept_uids: Vec<Uid> = kept.iter().map(|&(_, u)| u).collect();
        let first_kept = 25 - kept.len() as u32 + 1;
        assert_eq!(kept_uids, (first_kept..=25).map(Uid).collect::<Vec<_>>());
        // the floor is the modseq of the last tombstone dropped
        assert_eq!(rec.expunge_floor.get(), kept[0].0.get() - 1);
        let set = index.read(|r| r.changes_since(id, start)).unwrap();
        assert_eq!(set.expunged, None, "history before the floor is gone");
        let set = index
            .read(|r| r.changes_since(id, rec.expunge_floor))
            .unwrap();
        assert_eq!(set.expunged, Some(kept_uids));
    }

    #[test]
    fn keys_sort_by_mailbox_then_modseq() {
        let key = |m, s| change_key(MailboxId(m), ModSeq(s));
        let mut keys = [key(2, 1), key(1, 1 << 40), key(1, 7), key(1, 256)];
        keys.sort();
        let split: Vec<_> = keys
            .iter()
            .map(|k| {
                split_change_key(k)
                    .map(|(m, s)| (m.get(), s.get()))
                    .unwrap()
            })
            .collect();
        assert_eq!(split, vec![(1, 7), (1, 256), (1, 1 << 40), (2, 1)]);
        assert_eq!(split_change_key(&[0; 8]), None);
    }
}
