//! The `flags` column: each message's flags, keywords and modseq, packed many messages to
//! an LMDB value, so that what clients ask of every message of a mailbox most often
//! (`SEARCH UNSEEN`, `UNDELETED`, `FLAGGED`, `KEYWORD`, `MODSEQ`, the first unseen
//! message of SELECT) is a walk over a few hundred small values instead of one `messages`
//! entry (about 100 bytes, with the file name) per message. On 30,000 messages the walk
//! over `messages` took about 6 ms of a `SEARCH UNSEEN FLAGGED` (a fifth of it in LMDB's
//! cursor, a fifth decoding postcard), against Dovecot's 1.4 ms from its mmapped index.
//!
//! It is written by hand, not with [`crate::segment::Segments`]: those hold opaque byte
//! strings per UID, immutable once written, and a full segment is compressed. Here every
//! flag change rewrites its entry in place, so a segment stays uncompressed, and the
//! entries are small and fixed in shape, which a delta encoding packs to about 6 bytes.
//!
//! The `messages` table stays the record of a message's state; this column repeats three
//! of its fields and is written in the same transaction by every [`crate::Writer`] method
//! that writes a state (insert, flag change, removal, clearing). `maildex index check`
//! compares the two.
//!
//! Layout (docs/INDEX-FORMAT.md, "The flags column"): key = message key of the segment's
//! first UID; value = the lowest modseq of the entries (varint), then per entry in UID
//! order: the UID's distance from the previous one (from the key's UID for the first),
//! varint; the flags, one byte; the keywords, varint; the modseq's distance from the
//! lowest, varint.

use std::ops::{Bound, ControlFlow, RangeInclusive};

use heed::types::Bytes;
use heed::{Database, RoTxn, RwTxn, WithoutTls};

use crate::schema::{put_varint, raw_msg_key, raw_split_msg_key, varint as take_varint};
use crate::{IndexError, ModSeq};

/// What the column holds of one message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlagState {
    /// System flags, as [`crate::MessageState::flags`].
    pub flags: u8,
    /// Keyword bits, as [`crate::MessageState::keywords`].
    pub keywords: u32,
    /// The modseq of the message's last change.
    pub modseq: ModSeq,
}

impl FlagState {
    /// The column's part of a stored state.
    pub fn of(state: &crate::MessageState) -> FlagState {
        FlagState {
            flags: state.flags,
            keywords: state.keywords,
            modseq: state.modseq,
        }
    }

    /// True when the message lacks `\Seen`.
    pub fn is_unseen(&self) -> bool {
        self.flags & crate::flag::SEEN == 0
    }
}

/// A segment takes no more entries at its end past this many...
const SEG_ENTRIES: usize = 128;
/// ... or past this many bytes.
const SEG_BYTES: usize = 1024;
/// A segment that inserts below its end made larger than this is split: a value stays
/// inside what LMDB keeps on a 4 KiB leaf page (about 2,000 bytes with its key), so it
/// never takes an overflow page of its own, which every change would rewrite whole.
const MAX_VALUE: usize = 1536;

/// The `flags` database.
pub(crate) struct FlagColumn<'e> {
    pub db: Database<'e, Bytes, Bytes>,
}

/// A segment decoded for a change.
struct Open {
    /// Its key's UID: at most its lowest UID.
    first: u32,
    /// Whether it is stored under `first` (and must be replaced or deleted).
    stored: bool,
    entries: Vec<(u32, FlagState)>,
    /// The encoded size, about (what [`Open::closed`] compares).
    size: usize,
    /// The key UID of the mailbox's next segment: UIDs from there on belong to it.
    next: Option<u32>,
}

impl Open {
    /// Whether the segment takes no more entries at its end.
    fn closed(&self) -> bool {
        self.entries.len() >= SEG_ENTRIES || self.size >= SEG_BYTES
    }

    /// Adds or replaces `uid`'s entry. False when `uid` comes after a closed segment's
    /// last entry: it starts the next segment.
    fn set(&mut self, uid: u32, st: FlagState) -> bool {
        match self.entries.binary_search_by_key(&uid, |e| e.0) {
            Ok(i) => self.entries[i].1 = st,
            Err(i) if i == self.entries.len() && self.closed() => return false,
            Err(i) => {
                let prev = i.checked_sub(1).map_or(self.first, |p| self.entries[p].0);
                let base = self.entries.first().map_or(0, |e| e.1.modseq.0);
                self.size += entry_len(uid - prev, st, base);
                self.entries.insert(i, (uid, st));
            }
        }
        true
    }
}

impl FlagColumn<'_> {
    /// Calls `f` with each message of `mailbox` in `uids` and its [`FlagState`], in UID
    /// order, until it breaks.
    pub fn for_each(
        &self,
        txn: &RoTxn<WithoutTls>,
        mailbox: u32,
        uids: RangeInclusive<u32>,
        mut f: impl FnMut(u32, FlagState) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        let (lo_uid, hi_uid) = (*uids.start(), *uids.end());
        // the segment holding the first UID may start below it
        let start = match self.floor(txn, mailbox, lo_uid)? {
            Some((first, _)) => first,
            None => lo_uid,
        };
        let lo = raw_msg_key(mailbox, start);
        let hi = raw_msg_key(mailbox, hi_uid);
        let range = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
        for item in self.db.range(txn, &range).map_err(IndexError::from_heed)? {
            let (key, value) = item.map_err(IndexError::from_heed)?;
            let first = key_uid(key, mailbox)?;
            for entry in Entries::new(value, first, mailbox)? {
                let (uid, st) = entry?;
                if uid > hi_uid {
                    return Ok(());
                }
                if uid >= lo_uid && f(uid, st)?.is_break() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// The [`FlagState`] of one message.
    pub fn get(
        &self,
        txn: &RoTxn<WithoutTls>,
        mailbox: u32,
        uid: u32,
    ) -> Result<Option<FlagState>, IndexError> {
        let Some((first, value)) = self.floor(txn, mailbox, uid)? else {
            return Ok(None);
        };
        for entry in Entries::new(value, first, mailbox)? {
            let (u, st) = entry?;
            if u >= uid {
                return Ok((u == uid).then_some(st));
            }
        }
        Ok(None)
    }

    /// Stores (adds or replaces) the entries of `mailbox`, in ascending UID order: each
    /// segment they touch is decoded and written once. Of a UID given twice in a row, the
    /// later entry stays.
    pub fn put_many(
        &self,
        txn: &mut RwTxn,
        mailbox: u32,
        entries: &[(u32, FlagState)],
    ) -> Result<(), IndexError> {
        let mut open: Option<Open> = None;
        for &(uid, st) in entries {
            let fits = open
                .as_ref()
                .is_some_and(|o| uid >= o.first && o.next.is_none_or(|n| uid < n));
            if !fits {
                if let Some(o) = open.take() {
                    self.flush(txn, mailbox, o)?;
                }
                open = Some(self.open(txn, mailbox, uid)?);
            }
            let Some(o) = open.as_mut() else {
                return Err(IndexError::Internal("flags column: no segment".into()));
            };
            if !o.set(uid, st) {
                // a full segment ends here: the UID starts the next one
                let next = o.next;
                if let Some(full) = open.take() {
                    self.flush(txn, mailbox, full)?;
                }
                open = Some(Open {
                    first: uid,
                    stored: false,
                    entries: vec![(uid, st)],
                    size: entry_len(0, st, 0),
                    next,
                });
            }
        }
        if let Some(o) = open {
            self.flush(txn, mailbox, o)?;
        }
        Ok(())
    }

    /// Removes `uid` of `mailbox`. Returns whether it was there.
    pub fn remove(&self, txn: &mut RwTxn, mailbox: u32, uid: u32) -> Result<bool, IndexError> {
        let mut o = self.open(txn, mailbox, uid)?;
        let Ok(i) = o.entries.binary_search_by_key(&uid, |e| e.0) else {
            return Ok(false);
        };
        o.entries.remove(i);
        self.flush(txn, mailbox, o)?;
        Ok(true)
    }

    /// Removes every entry of `mailbox`.
    pub fn clear(&self, txn: &mut RwTxn, mailbox: u32) -> Result<(), IndexError> {
        let (lo, hi) = (raw_msg_key(mailbox, 0), raw_msg_key(mailbox, u32::MAX));
        let range = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
        self.db
            .delete_range(txn, &range)
            .map_err(IndexError::from_heed)?;
        Ok(())
    }

    /// The stored segment that holds (or would hold) `uid`: its key's UID and its value.
    fn floor<'t>(
        &self,
        txn: &'t RoTxn<WithoutTls>,
        mailbox: u32,
        uid: u32,
    ) -> Result<Option<(u32, &'t [u8])>, IndexError> {
        let key = raw_msg_key(mailbox, uid);
        match self
            .db
            .get_lower_than_or_equal_to(txn, &key[..])
            .map_err(IndexError::from_heed)?
        {
            Some((k, v)) => match raw_split_msg_key(k) {
                Some((m, first)) if m == mailbox => Ok(Some((first, v))),
                _ => Ok(None),
            },
            None => Ok(None),
        }
    }

    /// The segment `uid` belongs in, decoded (a new, empty one keyed by `uid` when no
    /// stored segment starts at or below it).
    fn open(&self, txn: &RwTxn, mailbox: u32, uid: u32) -> Result<Open, IndexError> {
        let (first, stored, entries, size) = match self.floor(txn, mailbox, uid)? {
            Some((first, value)) => {
                let entries = Entries::new(value, first, mailbox)?.collect::<Result<_, _>>()?;
                (first, true, entries, value.len())
            }
            None => (uid, false, Vec::new(), 0),
        };
        let after = raw_msg_key(mailbox, first);
        let next = match self
            .db
            .get_greater_than(txn, &after[..])
            .map_err(IndexError::from_heed)?
        {
            Some((k, _)) => raw_split_msg_key(k)
                .filter(|&(m, _)| m == mailbox)
                .map(|(_, u)| u),
            None => None,
        };
        Ok(Open {
            first,
            stored,
            entries,
            size,
            next,
        })
    }

    /// Writes a changed segment back: deleted when empty, split when inserts below its
    /// end made it larger than [`MAX_VALUE`] or twice [`SEG_ENTRIES`].
    fn flush(&self, txn: &mut RwTxn, mailbox: u32, o: Open) -> Result<(), IndexError> {
        if o.entries.is_empty() {
            if o.stored {
                self.db
                    .delete(txn, &raw_msg_key(mailbox, o.first)[..])
                    .map_err(IndexError::from_heed)?;
            }
            return Ok(());
        }
        self.write(txn, mailbox, o.first, &o.entries)
    }

    /// Stores `entries` (not empty, all at or above `first`) under `first`, in halves
    /// (the second keyed by its lowest UID) while they are too large for one value.
    fn write(
        &self,
        txn: &mut RwTxn,
        mailbox: u32,
        first: u32,
        entries: &[(u32, FlagState)],
    ) -> Result<(), IndexError> {
        let value = encode(entries, first);
        if entries.len() < 2 || (value.len() <= MAX_VALUE && entries.len() <= 2 * SEG_ENTRIES) {
            return self
                .db
                .put(txn, &raw_msg_key(mailbox, first)[..], &value)
                .map_err(IndexError::from_heed);
        }
        let (a, b) = entries.split_at(entries.len() / 2);
        self.write(txn, mailbox, first, a)?;
        let second = b.first().map_or(first, |e| e.0);
        self.write(txn, mailbox, second, b)
    }
}

/// The encoded size of an entry `step` UIDs after the one before it, about: its modseq
/// is stored as its distance from the segment's lowest, taken here as the distance from
/// `base` (for [`Open::closed`]).
fn entry_len(step: u32, st: FlagState, base: u64) -> usize {
    let len = |n: u64| (64 - n.max(1).leading_zeros() as usize).div_ceil(7);
    len(u64::from(step)) + 1 + len(u64::from(st.keywords)) + len(st.modseq.0.abs_diff(base))
}

/// The UID of a segment key of `mailbox`.
fn key_uid(key: &[u8], mailbox: u32) -> Result<u32, IndexError> {
    match raw_split_msg_key(key) {
        Some((m, first)) if m == mailbox => Ok(first),
        _ => Err(IndexError::Corrupt(format!(
            "flags column: key of {} bytes in mailbox {mailbox}'s range",
            key.len()
        ))),
    }
}

/// A segment's value: entries in ascending UID order, all at or above `first`.
fn encode(entries: &[(u32, FlagState)], first: u32) -> Vec<u8> {
    let base = entries.iter().map(|e| e.1.modseq.0).min().unwrap_or(0);
    let mut out = Vec::with_capacity(10 + entries.len() * 6);
    put_varint(&mut out, base);
    let mut prev = first;
    for &(uid, st) in entries {
        put_varint(&mut out, u64::from(uid - prev));
        out.push(st.flags);
        put_varint(&mut out, u64::from(st.keywords));
        put_varint(&mut out, st.modseq.0 - base);
        prev = uid;
    }
    out
}

/// The entries of a stored segment, decoded as they are read.
struct Entries<'a> {
    bytes: &'a [u8],
    at: usize,
    base: u64,
    uid: u32,
    mailbox: u32,
    /// Whether the next entry is the first (its distance is from the key's UID, and may
    /// be 0).
    started: bool,
}

impl<'a> Entries<'a> {
    fn new(bytes: &'a [u8], first: u32, mailbox: u32) -> Result<Entries<'a>, IndexError> {
        let mut at = 0;
        let base = take_varint(bytes, &mut at).ok_or_else(|| corrupt(mailbox, first))?;
        Ok(Entries {
            bytes,
            at,
            base,
            uid: first,
            mailbox,
            started: false,
        })
    }

    fn entry(&mut self) -> Option<(u32, FlagState)> {
        let step = u32::try_from(take_varint(self.bytes, &mut self.at)?).ok()?;
        if self.started && step == 0 {
            return None;
        }
        let uid = self.uid.checked_add(step)?;
        let flags = *self.bytes.get(self.at)?;
        self.at += 1;
        let keywords = u32::try_from(take_varint(self.bytes, &mut self.at)?).ok()?;
        let modseq = self
            .base
            .checked_add(take_varint(self.bytes, &mut self.at)?)?;
        self.uid = uid;
        self.started = true;
        Some((
            uid,
            FlagState {
                flags,
                keywords,
                modseq: ModSeq(modseq),
            },
        ))
    }
}

impl Iterator for Entries<'_> {
    type Item = Result<(u32, FlagState), IndexError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.bytes.len() {
            return None;
        }
        Some(self.entry().ok_or_else(|| corrupt(self.mailbox, self.uid)))
    }
}

fn corrupt(mailbox: u32, uid: u32) -> IndexError {
    IndexError::Corrupt(format!(
        "flags column: unreadable segment of mailbox {mailbox} at UID {uid}"
    ))
}

#[cfg(test)]
mod tests;
