//! Packed columns: small per-message entries, many messages to an LMDB value, stored
//! uncompressed so that they are read in place and any entry can be rewritten. Two
//! columns use it: `flags` (each message's flags, keywords, modseq, size and date, see
//! [`crate::flag_column`]) and `cache-search` (each message's [`crate::SearchFields`]
//! postcard, see [`crate::search_column`]).
//!
//! Why: one LMDB entry per message costs a cursor step per message on every walk (41% of
//! a `SEARCH SUBJECT` over `cache-search` was `mdb_cursor_next`), and about 16 bytes of
//! node and a page filled to about 60% when messages arrive in UID order (LMDB splits a
//! full leaf page in the middle). Segments of [`crate::segment`] would pack them, but
//! those are immutable once full and compressed, where these columns are walked far more
//! often than written and a few of their entries change after the fact (a flag change,
//! a learned header field).
//!
//! Layout (docs/INDEX-FORMAT.md, "Packed columns"): key = message key (mailbox, UID) of
//! the segment's first UID, which is at most its lowest entry's; value = the codec's
//! header, then per entry in UID order: the UID's distance from the previous one (from the
//! key's UID for the first, so that one may be 0), varint; the codec's payload. UIDs of a
//! segment are below the key of the next segment of the same mailbox, so the segment
//! holding a UID is the one with the greatest key at or below it.

use std::marker::PhantomData;
use std::ops::{Bound, ControlFlow, RangeInclusive};

use heed::types::Bytes;
use heed::{Database, RoTxn, RwTxn, WithoutTls};

use crate::schema::{put_varint, raw_msg_key, raw_split_msg_key, varint as take_varint};
use crate::IndexError;

/// What a packed column stores per entry, and how.
pub(crate) trait Codec {
    /// An entry's content while a segment is changed.
    type Item;
    /// An entry's content read from a stored value.
    type Ref<'a>;
    /// What a value stores before its entries.
    type Header: Copy;
    /// The column's name in errors.
    const NAME: &'static str;
    /// A segment takes no more entries at its end past this many...
    const SEG_ENTRIES: usize;
    /// ... nor one that would take its encoded size past this many bytes.
    const SEG_BYTES: usize;
    /// A value larger than this (after inserts below a segment's end) is split.
    const MAX_VALUE: usize;

    /// Writes the header of a value holding `entries` (not empty).
    fn put_header(entries: &[(u32, Self::Item)], out: &mut Vec<u8>) -> Self::Header;
    /// Reads a value's header.
    fn take_header(value: &[u8], at: &mut usize) -> Option<Self::Header>;
    /// Writes an entry's payload.
    fn put_payload(item: &Self::Item, header: Self::Header, out: &mut Vec<u8>);
    /// Reads an entry's payload.
    fn take_payload<'a>(
        value: &'a [u8],
        at: &mut usize,
        header: Self::Header,
    ) -> Option<Self::Ref<'a>>;
    /// The encoded size of `item`'s payload in a segment holding `entries`, about.
    fn payload_len(item: &Self::Item, entries: &[(u32, Self::Item)]) -> usize;
    /// The owned form of a read entry.
    fn to_item(r: Self::Ref<'_>) -> Self::Item;
}

/// A packed column's database.
pub(crate) struct Packed<'e, C> {
    pub db: Database<'e, Bytes, Bytes>,
    codec: PhantomData<C>,
}

impl<C> Clone for Packed<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<C> Copy for Packed<'_, C> {}

/// A segment decoded for a change.
struct Open<I> {
    /// Its key's UID: at most its lowest UID.
    first: u32,
    /// Whether it is stored under `first` (and must be replaced or deleted).
    stored: bool,
    entries: Vec<(u32, I)>,
    /// The encoded size, about.
    size: usize,
    /// The key UID of the mailbox's next segment: UIDs from there on belong to it.
    next: Option<u32>,
}

impl<I> Open<I> {
    /// Adds or replaces `uid`'s entry. Gives `item` back when `uid` comes after the last
    /// entry and the segment takes no more at its end: it starts the next segment.
    fn set<C: Codec<Item = I>>(&mut self, uid: u32, item: I) -> Result<(), I> {
        match self.entries.binary_search_by_key(&uid, |e| e.0) {
            Ok(i) => {
                let old = C::payload_len(&self.entries[i].1, &self.entries);
                let new = C::payload_len(&item, &self.entries);
                self.size = (self.size + new).saturating_sub(old);
                self.entries[i].1 = item;
            }
            Err(i) => {
                let prev = i.checked_sub(1).map_or(self.first, |p| self.entries[p].0);
                let len = varint_len(u64::from(uid - prev)) + C::payload_len(&item, &self.entries);
                if i == self.entries.len()
                    && !self.entries.is_empty()
                    && (self.entries.len() >= C::SEG_ENTRIES || self.size + len > C::SEG_BYTES)
                {
                    return Err(item);
                }
                self.size += len;
                self.entries.insert(i, (uid, item));
            }
        }
        Ok(())
    }
}

impl<'e, C: Codec> Packed<'e, C> {
    pub fn new(db: Database<'e, Bytes, Bytes>) -> Self {
        Packed {
            db,
            codec: PhantomData,
        }
    }

    /// Calls `f` with each entry of `mailbox` in `uids`, in UID order, until it breaks.
    pub fn for_each<'t>(
        &self,
        txn: &'t RoTxn<WithoutTls>,
        mailbox: u32,
        uids: RangeInclusive<u32>,
        mut f: impl FnMut(u32, C::Ref<'t>) -> Result<ControlFlow<()>, IndexError>,
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
        // UIDs rise across segments too: a damaged value that breaks that is an error
        let mut last = None;
        for item in self.db.range(txn, &range).map_err(IndexError::from_heed)? {
            let (key, value) = item.map_err(IndexError::from_heed)?;
            let first = key_uid::<C>(key, mailbox)?;
            for entry in Entries::<C>::new(value, first, mailbox)? {
                let (uid, r) = entry?;
                if last.is_some_and(|l| uid <= l) {
                    return Err(corrupt::<C>(mailbox, uid));
                }
                last = Some(uid);
                if uid > hi_uid {
                    return Ok(());
                }
                if uid >= lo_uid && f(uid, r)?.is_break() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// The entry of one message.
    pub fn get<'t>(
        &self,
        txn: &'t RoTxn<WithoutTls>,
        mailbox: u32,
        uid: u32,
    ) -> Result<Option<C::Ref<'t>>, IndexError> {
        let Some((first, value)) = self.floor(txn, mailbox, uid)? else {
            return Ok(None);
        };
        for entry in Entries::<C>::new(value, first, mailbox)? {
            let (u, r) = entry?;
            if u >= uid {
                return Ok((u == uid).then_some(r));
            }
        }
        Ok(None)
    }

    /// Stores (adds or replaces) entries of `mailbox`, in any order: they are put in UID
    /// order, so each segment they touch is decoded and written once. Of a UID given
    /// twice, the later entry stays (the sort is stable).
    pub fn put_many(
        &self,
        txn: &mut RwTxn,
        mailbox: u32,
        entries: impl IntoIterator<Item = (u32, C::Item)>,
    ) -> Result<(), IndexError> {
        let mut entries: Vec<(u32, C::Item)> = entries.into_iter().collect();
        entries.sort_by_key(|e| e.0);
        let mut open: Option<Open<C::Item>> = None;
        for (uid, item) in entries {
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
                return Err(IndexError::Internal(format!("{}: no segment", C::NAME)));
            };
            let Err(item) = o.set::<C>(uid, item) else {
                continue;
            };
            // a full segment ends here: the UID starts the next one
            let next = o.next;
            if let Some(full) = open.take() {
                self.flush(txn, mailbox, full)?;
            }
            let size = varint_len(0) + C::payload_len(&item, &[]);
            open = Some(Open {
                first: uid,
                stored: false,
                entries: vec![(uid, item)],
                size,
                next,
            });
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
                Some(_) => Ok(None),
                None => Err(bad_key::<C>(k, mailbox)),
            },
            None => Ok(None),
        }
    }

    /// The segment `uid` belongs in, decoded (a new, empty one keyed by `uid` when no
    /// stored segment starts at or below it).
    fn open(&self, txn: &RwTxn, mailbox: u32, uid: u32) -> Result<Open<C::Item>, IndexError> {
        let (first, stored, entries, size) = match self.floor(txn, mailbox, uid)? {
            Some((first, value)) => {
                let entries = Entries::<C>::new(value, first, mailbox)?
                    .map(|e| e.map(|(u, r)| (u, C::to_item(r))))
                    .collect::<Result<_, _>>()?;
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
    /// end (or entries that grew) made it larger than [`Codec::MAX_VALUE`] or twice
    /// [`Codec::SEG_ENTRIES`].
    fn flush(&self, txn: &mut RwTxn, mailbox: u32, o: Open<C::Item>) -> Result<(), IndexError> {
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

    /// Stores `entries` (not empty, all at or above `first`) under `first`; when they are
    /// too large for one value, as runs that each fill a segment as far as an append
    /// would ([`Codec::SEG_ENTRIES`], [`Codec::SEG_BYTES`]), each after the first keyed by
    /// its lowest UID. Halves would leave a column whose records all grew (a learned
    /// header field fills every search record) with values half full, each taking a
    /// whole overflow page.
    fn write(
        &self,
        txn: &mut RwTxn,
        mailbox: u32,
        first: u32,
        entries: &[(u32, C::Item)],
    ) -> Result<(), IndexError> {
        let value = encode::<C>(entries, first);
        if entries.len() < 2 || (value.len() <= C::MAX_VALUE && entries.len() <= 2 * C::SEG_ENTRIES)
        {
            return self
                .db
                .put(txn, &raw_msg_key(mailbox, first)[..], &value)
                .map_err(IndexError::from_heed);
        }
        let runs = runs::<C>(entries, first);
        if runs.len() < 2 {
            // the estimate put them all in one run: halves, which always end
            let (a, b) = entries.split_at(entries.len() / 2);
            self.write(txn, mailbox, first, a)?;
            let second = b.first().map_or(first, |e| e.0);
            return self.write(txn, mailbox, second, b);
        }
        for (i, run) in runs.into_iter().enumerate() {
            let key = if i == 0 {
                first
            } else {
                run.first().map_or(first, |e| e.0)
            };
            self.write(txn, mailbox, key, run)?;
        }
        Ok(())
    }
}

/// `entries` cut where an append would start a new segment (by the codec's size
/// estimate); each run but the first starts a value keyed by its own first UID.
fn runs<C: Codec>(entries: &[(u32, C::Item)], first: u32) -> Vec<&[(u32, C::Item)]> {
    let mut out = Vec::new();
    let (mut start, mut size, mut prev) = (0, 0, first);
    for (i, (uid, item)) in entries.iter().enumerate() {
        let mut len = varint_len(u64::from(uid - prev)) + C::payload_len(item, &entries[start..i]);
        if i > start && (i - start >= C::SEG_ENTRIES || size + len > C::SEG_BYTES) {
            out.push(&entries[start..i]);
            start = i;
            size = 0;
            len = varint_len(0) + C::payload_len(item, &[]);
        }
        size += len;
        prev = *uid;
    }
    out.push(&entries[start..]);
    out
}

/// The bytes of `n` as a varint.
pub(crate) fn varint_len(n: u64) -> usize {
    (64 - n.max(1).leading_zeros() as usize).div_ceil(7)
}

/// The UID of a segment key of `mailbox`.
fn key_uid<C: Codec>(key: &[u8], mailbox: u32) -> Result<u32, IndexError> {
    match raw_split_msg_key(key) {
        Some((m, first)) if m == mailbox => Ok(first),
        _ => Err(bad_key::<C>(key, mailbox)),
    }
}

fn bad_key<C: Codec>(key: &[u8], mailbox: u32) -> IndexError {
    IndexError::Corrupt(format!(
        "{}: key of {} bytes in mailbox {mailbox}'s range",
        C::NAME,
        key.len()
    ))
}

/// A segment's value: entries (not empty) in ascending UID order, all at or above `first`.
fn encode<C: Codec>(entries: &[(u32, C::Item)], first: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + entries.len() * 8);
    let header = C::put_header(entries, &mut out);
    let mut prev = first;
    for (uid, item) in entries {
        put_varint(&mut out, u64::from(uid - prev));
        C::put_payload(item, header, &mut out);
        prev = *uid;
    }
    out
}

/// The entries of a stored segment, decoded as they are read.
struct Entries<'a, C: Codec> {
    bytes: &'a [u8],
    at: usize,
    header: C::Header,
    uid: u32,
    mailbox: u32,
    /// Whether the next entry is the first (its distance is from the key's UID, and may
    /// be 0).
    started: bool,
}

impl<'a, C: Codec> Entries<'a, C> {
    fn new(bytes: &'a [u8], first: u32, mailbox: u32) -> Result<Entries<'a, C>, IndexError> {
        let mut at = 0;
        let header = C::take_header(bytes, &mut at).ok_or_else(|| corrupt::<C>(mailbox, first))?;
        Ok(Entries {
            bytes,
            at,
            header,
            uid: first,
            mailbox,
            started: false,
        })
    }

    fn entry(&mut self) -> Option<(u32, C::Ref<'a>)> {
        let step = u32::try_from(take_varint(self.bytes, &mut self.at)?).ok()?;
        if self.started && step == 0 {
            return None;
        }
        let uid = self.uid.checked_add(step)?;
        let r = C::take_payload(self.bytes, &mut self.at, self.header)?;
        self.uid = uid;
        self.started = true;
        Some((uid, r))
    }
}

impl<'a, C: Codec> Iterator for Entries<'a, C> {
    type Item = Result<(u32, C::Ref<'a>), IndexError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.bytes.len() {
            return None;
        }
        Some(
            self.entry()
                .ok_or_else(|| corrupt::<C>(self.mailbox, self.uid)),
        )
    }
}

fn corrupt<C: Codec>(mailbox: u32, uid: u32) -> IndexError {
    IndexError::Corrupt(format!(
        "{}: unreadable segment of mailbox {mailbox} at UID {uid}",
        C::NAME
    ))
}

#[cfg(test)]
pub(crate) mod testing;
