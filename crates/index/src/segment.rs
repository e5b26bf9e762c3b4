//! Segments: immutable per-message data stored in groups of consecutive UIDs.
//!
//! Why: the cached data of one message (listing fields, or header blocks) is 1-3 kB, the
//! worst size for LMDB's 4 KiB pages (one or two per leaf, or a whole overflow page each),
//! and a single message's header compresses poorly on its own. A segment holds up to
//! [`SEG`] messages of one mailbox under the key of its first UID; once full it is
//! compressed as a whole with zstd, which also shares the structure that similar headers
//! have in common. A message arriving above every stored UID gets a raw segment of its
//! own, so it costs one small write, not a rewrite of its neighbours; sixteen of those
//! are merged into one compressed segment (see [`Segments::append`]).
//!
//! Invariants: a segment's key (mailbox, uid) is at most the smallest UID in it; all UIDs
//! of a segment are below the key of the next segment of the same mailbox; entries are
//! sorted by UID. So the segment holding a UID is the one with the greatest key at or
//! below (mailbox, uid).

use std::ops::{Bound, ControlFlow, RangeInclusive};

use heed::types::Bytes;
use heed::{Database, RoTxn, RwTxn, WithoutTls};
use serde::{Deserialize, Serialize};

use crate::schema::{raw_msg_key, raw_split_msg_key};
use crate::IndexError;

mod fill;
use fill::{fill_pages, has_room, MAX_SEG};

/// Messages per segment before it is compressed and a new one is started.
pub const SEG: usize = 16;
/// zstd level for full segments of listing data (compressed once, read many times).
/// Level 1 rather than 3: on the 30,000-message rebuild corpus it took about a tenth off
/// the rebuild's CPU (most of the compression runs on the one thread that commits) for
/// an index without full text 0.8% larger (docs/BENCHMARKS.md, issue 19 #1); reading is
/// as fast at either level.
pub(crate) const LISTING_LEVEL: i32 = 1;
/// zstd level for full segments of full text, written off the delivery path: level 1
/// made the whole index 5.7% larger on the same corpus, so the text keeps level 3.
pub(crate) const TEXT_LEVEL: i32 = 3;

/// How a column stores its full segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Packing {
    /// Raw unless the postcard bytes are over [`RAW_MAX`] (then at [`LISTING_LEVEL`]).
    Raw,
    /// One zstd frame at this level.
    Zstd(i32),
}
const RAW: u8 = 0;
const ZSTD: u8 = 1;
/// A segment still filling (under [`SEG`] entries) whose data is over [`RAW_MAX`]: the
/// entry count (varint, so the raw tail is found without decompressing), then a zstd
/// frame as kind 1's.
const FILLING_ZSTD: u8 = 2;
/// Data of a segment still filling above this many bytes is compressed: a message's full
/// text (a few to hundreds of KiB) would otherwise sit uncompressed until fifteen more
/// arrive, and a full segment that lost a message to an expunge would be stored raw.
const RAW_MAX: usize = 32 * 1024;

/// Entries of one segment: (uid, data), sorted by uid.
///
/// Serialized by hand as a sequence of (uid, bytes) so that the data goes through
/// `serde_bytes`: postcard's wire format is the same as for the derived `Vec<u8>`, but a
/// derived one is decoded byte by byte, which was a third of a listing's time.
#[derive(Default, Debug, Clone, PartialEq, Eq)]
pub struct Entries(pub Vec<(u32, Vec<u8>)>);

/// Entries of a segment whose data is borrowed or owned (`D` is `&[u8]` or `Vec<u8>`),
/// encoded as [`Entries`] is: a batch of new messages is encoded from the records it was
/// handed, not from copies of them.
struct EntryRefs<'a, D>(&'a [(u32, D)]);

impl<D: AsRef<[u8]>> EntryRefs<'_, D> {
    /// At least the length of the postcard of these entries: a varint of at most five
    /// bytes for the count, and for each entry its UID's and its length's and its bytes.
    fn encoded_len_bound(&self) -> usize {
        5 + self
            .0
            .iter()
            .map(|(_, d)| 10 + d.as_ref().len())
            .sum::<usize>()
    }
}

impl<D: AsRef<[u8]>> Serialize for EntryRefs<'_, D> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for (uid, data) in self.0 {
            seq.serialize_element(&(uid, serde_bytes::Bytes::new(data.as_ref())))?;
        }
        seq.end()
    }
}

impl Serialize for Entries {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        EntryRefs(&self.0).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sequence of (uid, bytes)")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Entries, A::Error> {
                // the hint comes from the input: cap it so a corrupt length cannot allocate
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4 * SEG));
                while let Some((uid, data)) = seq.next_element::<(u32, serde_bytes::ByteBuf)>()? {
                    out.push((uid, data.into_vec()));
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_seq(Visit)
    }
}

fn lmdb(e: heed::Error) -> IndexError {
    IndexError::from_heed(e)
}

/// Encodes a segment: a kind byte (0 raw, 1 zstd, 2 a filling segment compressed) then
/// the postcard of its entries. `packing` is the column's [`Segments::packing`]: when
/// [`Packing::Raw`], a full segment stays raw unless its data is over [`RAW_MAX`].
pub(crate) fn encode<D: AsRef<[u8]>>(
    entries: &[(u32, D)],
    packing: Packing,
) -> Result<Vec<u8>, IndexError> {
    let refs = EntryRefs(entries);
    let plain = crate::schema::encode_with_capacity(&refs, refs.encoded_len_bound())?;
    let full = entries.len() >= SEG;
    let level = match packing {
        Packing::Zstd(level) => level,
        Packing::Raw => LISTING_LEVEL,
    };
    if full && (packing != Packing::Raw || plain.len() > RAW_MAX) {
        return zstd_frame(ZSTD, &plain, level);
    }
    if plain.len() > RAW_MAX {
        // the postcard of the entries starts with their count, a varint
        let count = &plain[..plain
            .iter()
            .position(|b| b & 0x80 == 0)
            .map_or(0, |i| i + 1)];
        let framed = zstd_frame(FILLING_ZSTD, &plain, level)?;
        let mut out = Vec::with_capacity(framed.len() + count.len());
        out.push(FILLING_ZSTD);
        out.extend_from_slice(count);
        out.extend_from_slice(&framed[1..]);
        return Ok(out);
    }
    let mut out = Vec::with_capacity(plain.len() + 1);
    out.push(RAW);
    out.extend_from_slice(&plain);
    Ok(out)
}

/// `kind`, then the length of `plain` (u32 big-endian), then one zstd frame (at `level`)
/// of it: the compressed form of a full segment.
pub(crate) fn zstd_frame(kind: u8, plain: &[u8], level: i32) -> Result<Vec<u8>, IndexError> {
    let len =
        u32::try_from(plain.len()).map_err(|_| IndexError::Encode("value over 4 GiB".into()))?;
    let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(plain.len()) + 5);
    out.push(kind);
    out.extend_from_slice(&len.to_be_bytes());
    compress_into(plain, level, &mut out).map_err(|e| IndexError::Encode(e.to_string()))?;
    Ok(out)
}

thread_local! {
    /// One zstd compression context per thread and level, as [`DECOMPRESSOR`]: creating
    /// one per segment (what `zstd::bulk::compress` does) allocated and cleared a fresh
    /// context each time, ZSTD_createCCtx and its page faults about 5% of an `index
    /// rebuild`'s CPU (`perf record`), most of it on the thread that commits.
    static COMPRESSORS: std::cell::RefCell<Vec<(i32, zstd::bulk::Compressor<'static>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Appends one zstd frame (at `level`) of `plain` to `out`, whose spare capacity must
/// hold `compress_bound(plain.len())` bytes.
fn compress_into(plain: &[u8], level: i32, out: &mut Vec<u8>) -> std::io::Result<()> {
    COMPRESSORS.with(|cell| {
        let mut all = cell.borrow_mut();
        let at = match all.iter().position(|(l, _)| *l == level) {
            Some(at) => at,
            None => {
                all.push((level, zstd::bulk::Compressor::new(level)?));
                all.len() - 1
            }
        };
        let c = &mut all[at].1;
        // a cursor at the end, so the frame goes after what `out` holds (a Vec itself
        // would be written from its start)
        let end = out.len() as u64;
        let mut cursor = std::io::Cursor::new(out);
        cursor.set_position(end);
        c.compress_to_buffer(plain, &mut cursor).map(|_| ())
    })
}

/// The plain bytes of a [`zstd_frame`] after its kind byte; `what` names it in an error.
pub(crate) fn zstd_unframe(
    rest: &[u8],
    what: &dyn std::fmt::Display,
) -> Result<Vec<u8>, IndexError> {
    let (len, frame) = rest
        .split_first_chunk::<4>()
        .ok_or_else(|| IndexError::Corrupt(format!("{what}: truncated value")))?;
    let len = u32::from_be_bytes(*len) as usize;
    decompress(frame, len).map_err(|e| IndexError::Corrupt(format!("{what}: {e}")))
}

/// Decodes a segment.
pub(crate) fn decode(bytes: &[u8], what: &dyn std::fmt::Display) -> Result<Entries, IndexError> {
    match bytes.split_first() {
        Some((&RAW, rest)) => crate::schema::decode(rest, what),
        _ => crate::schema::decode(&plain_bytes(bytes, what)?, what),
    }
}

/// What follows the kind byte (and a filling segment's count) of a compressed segment
/// (kind 1 or 2): the length and the zstd frame, as [`zstd_unframe`] reads them.
fn framed<'b>(bytes: &'b [u8], what: &dyn std::fmt::Display) -> Result<&'b [u8], IndexError> {
    match bytes.split_first() {
        Some((&ZSTD, rest)) => Ok(rest),
        Some((&FILLING_ZSTD, rest)) => {
            let n = rest
                .iter()
                .position(|b| b & 0x80 == 0)
                .map_or(rest.len(), |i| i + 1);
            Ok(&rest[n..])
        }
        _ => Err(IndexError::Corrupt(format!("{what}: unknown segment kind"))),
    }
}

/// The postcard bytes of a compressed segment (kind 1 or 2).
fn plain_bytes(bytes: &[u8], what: &dyn std::fmt::Display) -> Result<Vec<u8>, IndexError> {
    zstd_unframe(framed(bytes, what)?, what)
}

/// The postcard bytes of any stored segment: in place for a raw one, decompressed into
/// `buf` (whatever it held) otherwise.
fn plain_into<'v>(
    bytes: &'v [u8],
    what: &dyn std::fmt::Display,
    buf: &'v mut Vec<u8>,
) -> Result<&'v [u8], IndexError> {
    if let Some((&RAW, rest)) = bytes.split_first() {
        return Ok(rest);
    }
    let (len, frame) = framed(bytes, what)?
        .split_first_chunk::<4>()
        .ok_or_else(|| IndexError::Corrupt(format!("{what}: truncated value")))?;
    decompress_into(frame, u32::from_be_bytes(*len) as usize, buf)
        .map_err(|e| IndexError::Corrupt(format!("{what}: {e}")))?;
    Ok(buf)
}

/// The entries of a segment's postcard bytes, read in place: the count (varint), then for
/// each entry its UID (varint) and its data (varint length, bytes), as [`Entries`] is
/// encoded. `None` for bytes that end early or a UID over 32 bits.
struct EntryIter<'a> {
    bytes: &'a [u8],
    left: usize,
}

impl<'a> EntryIter<'a> {
    fn new(bytes: &'a [u8]) -> EntryIter<'a> {
        let mut at = 0;
        match take_varint(bytes, &mut at) {
            Some(n) => EntryIter {
                bytes: &bytes[at..],
                left: n,
            },
            // reported by the first `next`
            None => EntryIter { bytes, left: 1 },
        }
    }
}

impl<'a> Iterator for EntryIter<'a> {
    type Item = Option<(u32, &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let mut at = 0;
        let entry = take_varint(self.bytes, &mut at).and_then(|uid| {
            let uid = u32::try_from(uid).ok()?;
            let len = take_varint(self.bytes, &mut at)?;
            let data = self.bytes.get(at..at.checked_add(len)?)?;
            Some((uid, data, at + len))
        });
        match entry {
            Some((uid, data, end)) => {
                self.bytes = &self.bytes[end..];
                Some(Some((uid, data)))
            }
            None => {
                self.left = 0;
                Some(None)
            }
        }
    }
}

/// The largest decoding buffer a thread keeps between reads of segments in place
/// ([`with_scratch`]): a fresh one of a segment's size cost a page fault per 4 KiB
/// touched, a tenth of a phrase search (`perf record`).
const SCRATCH_MAX: usize = 4 << 20;

/// Calls `f` with the thread's decoding buffer ([`SCRATCH_MAX`]), kept for its next read.
/// A read nested in `f` gets a buffer of its own.
fn with_scratch<T>(f: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    let mut buf = SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
    let out = f(&mut buf);
    if buf.capacity() <= SCRATCH_MAX {
        SCRATCH.with(|s| *s.borrow_mut() = buf);
    }
    out
}

thread_local! {
    /// The buffer of [`SCRATCH_MAX`].
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    /// One zstd decompression context per thread: creating one per segment (what
    /// `zstd::bulk::decompress` does) showed up as 7% of a listing.
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

fn decompress(frame: &[u8], len: usize) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    decompress_into(frame, len, &mut out)?;
    Ok(out)
}

/// Decompresses `frame`, whose plain length is `len`, into `buf` (whatever it held).
fn decompress_into(frame: &[u8], len: usize, buf: &mut Vec<u8>) -> std::io::Result<()> {
    buf.clear();
    buf.reserve(len);
    DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let d = match slot.as_mut() {
            Some(d) => d,
            None => slot.insert(zstd::bulk::Decompressor::new()?),
        };
        d.decompress_to_buffer(frame, &mut *buf)
    })?;
    if buf.len() != len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} bytes decompressed, {len} stored", buf.len()),
        ));
    }
    Ok(())
}

/// A database of segments.
#[derive(Clone, Copy)]
pub(crate) struct Segments<'e> {
    pub db: Database<'e, Bytes, Bytes>,
    pub name: &'static str,
    /// How full segments are stored, and at which zstd level. `cache-sort` stores them raw: its
    /// records are small (about 190 bytes), a SORT decodes every one of a folder, and
    /// building zstd's decoding tables for each sixteen messages was a fifth of a first
    /// SORT's CPU, while a raw segment is read in place ([`Segments::for_each_ref`]).
    /// On disk it costs little: a compressed segment of them half fills a leaf page
    /// (docs/INDEX-FORMAT.md). `fts-sig` stores them raw too: Bloom filters about 39%
    /// full barely compress, and every BODY/TEXT search reads all of a mailbox's.
    pub packing: Packing,
}

impl Segments<'_> {
    /// The segment that holds (or would hold) `uid`: its key's uid and its entries.
    fn floor(
        &self,
        txn: &RoTxn<WithoutTls>,
        mailbox: u32,
        uid: u32,
    ) -> Result<Option<(u32, Entries)>, IndexError> {
        match self.floor_value(txn, mailbox, uid)? {
            Some((first, v)) => Ok(Some((
                first,
                decode(v, &format_args!("{} {mailbox}/{first}", self.name))?,
            ))),
            None => Ok(None),
        }
    }

    /// As [`Segments::floor`], the stored value undecoded.
    fn floor_value<'t>(
        &self,
        txn: &'t RoTxn<WithoutTls>,
        mailbox: u32,
        uid: u32,
    ) -> Result<Option<(u32, &'t [u8])>, IndexError> {
        let key = raw_msg_key(mailbox, uid);
        let Some((k, v)) = self
            .db
            .get_lower_than_or_equal_to(txn, &key[..])
            .map_err(lmdb)?
        else {
            return Ok(None);
        };
        Ok(raw_split_msg_key(k)
            .filter(|(m, _)| *m == mailbox)
            .map(|(_, first)| (first, v)))
    }

    /// The data stored for `uid`.
    pub fn get(
        &self,
        txn: &RoTxn<WithoutTls>,
        mailbox: u32,
        uid: u32,
    ) -> Result<Option<Vec<u8>>, IndexError> {
        let Some((_, mut entries)) = self.floor(txn, mailbox, uid)? else {
            return Ok(None);
        };
        Ok(entries
            .0
            .binary_search_by_key(&uid, |e| e.0)
            .ok()
            .map(|i| std::mem::take(&mut entries.0[i].1)))
    }

    /// Calls `f` with the stored (uid, data) of each of `uids` (ascending) of `mailbox`
    /// that has data, decoding each segment once however many of them it holds (for
    /// sparse sets, where walking the whole range would decode segments none of them is
    /// in). The data is borrowed, as [`Segments::for_each_ref`] lends it: a segment's
    /// entries are not copied out (copying them took a fifth of a phrase search's time).
    pub fn for_uids(
        &self,
        txn: &RoTxn<WithoutTls>,
        mailbox: u32,
        uids: &[crate::Uid],
        mut f: impl FnMut(u32, &[u8]) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        with_scratch(|buf| self.for_uids_in(txn, mailbox, uids, buf, &mut f))
    }

    /// [`Segments::for_uids`], decoding into `buf`.
    fn for_uids_in(
        &self,
        txn: &RoTxn<WithoutTls>,
        mailbox: u32,
        uids: &[crate::Uid],
        buf: &mut Vec<u8>,
        f: &mut impl FnMut(u32, &[u8]) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        let mut i = 0;
        while let Some(uid) = uids.get(i).map(|u| u.get()) {
            let key = raw_msg_key(mailbox, uid);
            let found = self
                .db
                .get_lower_than_or_equal_to(txn, &key[..])
                .map_err(lmdb)?
                .and_then(|(k, v)| Some((raw_split_msg_key(k)?, v)));
            let Some(((m, first), v)) = found.filter(|((m, _), _)| *m == mailbox) else {
                i += 1;
                continue;
            };
            // the asked UIDs this segment would hold are those below the next one's key
            let next = self
                .db
                .get_greater_than(txn, &raw_msg_key(mailbox, first)[..])
                .map_err(lmdb)?
                .and_then(|(k, _)| raw_split_msg_key(k))
                .filter(|(m, _)| *m == mailbox)
                .map(|(_, u)| u);
            let held = |u: &crate::Uid| next.is_none_or(|n| u.get() < n);
            let what = format_args!("{} {m}/{first}", self.name);
            let plain = plain_into(v, &what, buf)?;
            // every asked UID this segment holds, both walks ascending
            for entry in EntryIter::new(plain) {
                if !uids.get(i).is_some_and(held) {
                    break;
                }
                let (at, data) = entry
                    .ok_or_else(|| IndexError::Corrupt(format!("{what}: truncated segment")))?;
                while uids.get(i).is_some_and(|u| u.get() < at) {
                    i += 1;
                }
                if uids.get(i).is_some_and(|u| u.get() == at) {
                    if f(at, data)?.is_break() {
                        return Ok(());
                    }
                    i += 1;
                }
            }
            // asked UIDs in this segment's range that it does not hold are not stored
            while uids.get(i).is_some_and(held) {
                i += 1;
            }
        }
        Ok(())
    }

    /// Calls `f` with each stored (uid, data) of `mailbox` in `uids`, in UID order.
    pub fn for_each(
        &self,
        txn: &RoTxn<WithoutTls>,
        mailbox: u32,
        uids: RangeInclusive<u32>,
        mut f: impl FnMut(u32, Vec<u8>) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        self.for_each_ref(txn, mailbox, uids, |uid, data| f(uid, data.to_vec()))
    }

    /// Calls `f` with each stored (uid, data) of `mailbox` in `uids`, in UID order, the
    /// data borrowed: from the map itself for a raw segment (nothing is copied or
    /// allocated per message), from one buffer per segment for a compressed one.
    pub fn for_each_ref(
        &self,
        txn: &RoTxn<WithoutTls>,
        mailbox: u32,
        uids: RangeInclusive<u32>,
        mut f: impl FnMut(u32, &[u8]) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        // the segment holding the first UID may start below it
        let key = raw_msg_key(mailbox, *uids.start());
        let start = match self
            .db
            .get_lower_than_or_equal_to(txn, &key[..])
            .map_err(lmdb)?
            .and_then(|(k, _)| raw_split_msg_key(k))
        {
            Some((m, first)) if m == mailbox => first,
            _ => *uids.start(),
        };
        let (lo, hi) = (
            raw_msg_key(mailbox, start),
            raw_msg_key(mailbox, *uids.end()),
        );
        let range = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
        with_scratch(|buf| {
            for item in self.db.range(txn, &range).map_err(lmdb)? {
                let (k, v) = item.map_err(lmdb)?;
                let first = raw_split_msg_key(k).map_or(0, |(_, u)| u);
                let what = format_args!("{} {mailbox}/{first}", self.name);
                for entry in EntryIter::new(plain_into(v, &what, buf)?) {
                    let (uid, data) = entry
                        .ok_or_else(|| IndexError::Corrupt(format!("{what}: truncated segment")))?;
                    if uids.contains(&uid) && f(uid, data)?.is_break() {
                        return Ok(());
                    }
                }
            }
            Ok(())
        })
    }

    /// Stores many (uid, data), each segment touched being read and written once: a batch
    /// of new messages costs one write (and one compression) per segment, not per message.
    /// Items above every UID stored go through [`Segments::append`].
    pub fn put_many<D: AsRef<[u8]> + Into<Vec<u8>>>(
        &self,
        txn: &mut RwTxn,
        mailbox: u32,
        mut items: Vec<(u32, D)>,
    ) -> Result<(), IndexError> {
        items.sort_by_key(|(uid, _)| *uid);
        // of two items for one UID the later one wins, as when stored one after the other
        items.reverse();
        items.dedup_by_key(|(uid, _)| *uid);
        items.reverse();
        if let Some(&(first, _)) = items.first() {
            if self.last_uid(txn, mailbox)?.is_none_or(|last| last < first) {
                return self.append(txn, mailbox, items);
            }
        }
        let mut open: Option<Open> = None;
        for (uid, data) in items {
            let fits = open.as_ref().is_some_and(|o| o.takes(uid));
            if !fits {
                if let Some(o) = open.take() {
                    self.flush(txn, mailbox, o)?;
                }
                open = Some(self.open_for(txn, mailbox, uid)?);
            }
            if let Some(o) = open.as_mut() {
                match o.entries.binary_search_by_key(&uid, |e| e.0) {
                    Ok(i) => o.entries[i].1 = data.into(),
                    Err(i) => o.entries.insert(i, (uid, data.into())),
                }
            }
        }
        match open {
            Some(o) => self.flush(txn, mailbox, o),
            None => Ok(()),
        }
    }

    /// The highest UID stored for `mailbox`, if any.
    fn last_uid(&self, txn: &RoTxn<WithoutTls>, mailbox: u32) -> Result<Option<u32>, IndexError> {
        Ok(self
            .floor(txn, mailbox, u32::MAX)?
            .and_then(|(_, entries)| entries.0.last().map(|e| e.0)))
    }

    /// Adds `items` (sorted, every UID above those stored) at the end of the mailbox
    /// without rewriting what is there: each item becomes a raw segment of its own, until
    /// the raw segments at the end of the mailbox and the items hold [`SEG`] entries or
    /// more; then those are merged into compressed segments of [`SEG`], and what is left
    /// over is again one raw segment per item.
    ///
    /// Why: growing the last raw segment instead, as the other writes do, rewrote up to
    /// fifteen messages' data in all four databases for every delivered message (decoded,
    /// encoded, and copied to new LMDB pages), so a delivery's index commit grew with how
    /// full that segment was. Under LMTP load this writes a fifth fewer bytes to the disk
    /// per message (docs/BENCHMARKS.md).
    fn append<D: AsRef<[u8]> + Into<Vec<u8>>>(
        &self,
        txn: &mut RwTxn,
        mailbox: u32,
        items: Vec<(u32, D)>,
    ) -> Result<(), IndexError> {
        let tail = self.raw_tail(txn, mailbox)?;
        let held: usize = tail.iter().map(|(_, n)| n).sum();
        if held == 0 || held + items.len() < SEG {
            // nothing to merge with (a rebuild's batches, or a few deliveries): written
            // from the items themselves
            return self.write_in_segments(txn, mailbox, &items);
        }
        let mut entries = Vec::with_capacity(held + items.len());
        for &(first, _) in tail.iter().rev() {
            let key = raw_msg_key(mailbox, first);
            let bytes = self.db.get(txn, &key[..]).map_err(lmdb)?.ok_or_else(|| {
                IndexError::Corrupt(format!("{} {mailbox}/{first}: segment vanished", self.name))
            })?;
            entries.extend(decode(bytes, &format_args!("{} {mailbox}/{first}", self.name))?.0);
            self.db.delete(txn, &key[..]).map_err(lmdb)?;
        }
        entries.extend(items.into_iter().map(|(uid, d)| (uid, d.into())));
        if let Some(rest) = self.grow_last_full(txn, mailbox, &mut entries)? {
            return self.write_in_segments(txn, mailbox, &entries[rest..]);
        }
        self.write_in_segments(txn, mailbox, &entries)
    }

    /// Moves the first of `entries` (sorted, above every UID stored, the raw tail already
    /// taken out) into the last full segment of `mailbox` while its pages have room, as
    /// [`fill_pages`] grows a segment: messages delivered one at a time then fill their
    /// pages as a rebuild's do. Returns how many entries went in, `None` for none (the
    /// segment is left as it was).
    fn grow_last_full(
        &self,
        txn: &mut RwTxn,
        mailbox: u32,
        entries: &mut [(u32, Vec<u8>)],
    ) -> Result<Option<usize>, IndexError> {
        let Some(&(first_new, _)) = entries.first() else {
            return Ok(None);
        };
        let Some((first, v)) = self.floor_value(txn, mailbox, first_new.saturating_sub(1))? else {
            return Ok(None);
        };
        if !has_room(v) {
            return Ok(None);
        }
        let mut all = decode(v, &format_args!("{} {mailbox}/{first}", self.name))?.0;
        let held = all.len();
        if !(SEG..MAX_SEG).contains(&held) {
            return Ok(None);
        }
        all.extend(entries.iter_mut().map(|(u, d)| (*u, std::mem::take(d))));
        let (n, value) = fill_pages(&all, held, self.packing, self.name)?;
        // what did not go in is handed back
        for (slot, (_, d)) in entries.iter_mut().zip(all.drain(held..)) {
            slot.1 = d;
        }
        if n == held {
            return Ok(None);
        }
        let key = raw_msg_key(mailbox, first);
        // deleted first, as in `flush`
        self.db.delete(txn, &key[..]).map_err(lmdb)?;
        self.db.put(txn, &key[..], &value).map_err(lmdb)?;
        Ok(Some(n - held))
    }

    /// Writes `entries` (sorted, above every UID stored, no raw segments before them to
    /// merge with) as full segments of [`SEG`] or more that fill their pages
    /// ([`fill_pages`]), then what is left over (fewer than [`SEG`]) as one raw segment
    /// per entry.
    fn write_in_segments<D: AsRef<[u8]>>(
        &self,
        txn: &mut RwTxn,
        mailbox: u32,
        entries: &[(u32, D)],
    ) -> Result<(), IndexError> {
        let mut rest = entries;
        while rest.len() >= SEG {
            let (n, value) = fill_pages(rest, SEG, self.packing, self.name)?;
            self.db
                .put(txn, &raw_msg_key(mailbox, rest[0].0)[..], &value)
                .map_err(lmdb)?;
            rest = &rest[n..];
        }
        for one in rest.chunks(1) {
            self.write(txn, mailbox, one[0].0, one)?;
        }
        Ok(())
    }

    /// The raw segments at the end of `mailbox` (after its last compressed one), last
    /// first: each one's key UID and number of entries, read from the value's first bytes
    /// without decoding it.
    fn raw_tail(
        &self,
        txn: &RoTxn<WithoutTls>,
        mailbox: u32,
    ) -> Result<Vec<(u32, usize)>, IndexError> {
        let (lo, hi) = (raw_msg_key(mailbox, 0), raw_msg_key(mailbox, u32::MAX));
        let range = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
        let mut tail = Vec::new();
        for item in self.db.rev_range(txn, &range).map_err(lmdb)? {
            let (k, v) = item.map_err(lmdb)?;
            let first = raw_split_msg_key(k).map_or(0, |(_, u)| u);
            match v.split_first() {
                Some((&RAW | &FILLING_ZSTD, rest)) => {
                    let n = read_varint(rest).ok_or_else(|| {
                        IndexError::Corrupt(format!("{} {mailbox}/{first}: bad count", self.name))
                    })?;
                    // a full segment of a column that keeps them raw ends the tail, as a
                    // compressed one does
                    if n >= SEG {
                        break;
                    }
                    tail.push((first, n));
                }
                _ => break,
            }
        }
        Ok(tail)
    }

    /// The segment that `uid` goes into: the one holding it, or a new one starting at it
    /// (before the first segment, or past the end of a full one).
    fn open_for(
        &self,
        txn: &RoTxn<WithoutTls>,
        mailbox: u32,
        uid: u32,
    ) -> Result<Open, IndexError> {
        let next = self.next_key(txn, mailbox, uid)?;
        match self.floor(txn, mailbox, uid)? {
            Some((first, entries)) if !closed_before(&entries.0, uid) => Ok(Open {
                first,
                stored: true,
                entries: entries.0,
                next,
            }),
            Some((_, _)) | None => Ok(Open {
                first: uid,
                stored: false,
                entries: Vec::new(),
                next,
            }),
        }
    }

    /// First UID of the segment after the one holding `uid`, if any.
    fn next_key(
        &self,
        txn: &RoTxn<WithoutTls>,
        mailbox: u32,
        uid: u32,
    ) -> Result<Option<u32>, IndexError> {
        let key = raw_msg_key(mailbox, uid);
        match self.db.get_greater_than(txn, &key[..]).map_err(lmdb)? {
            Some((k, _)) => Ok(raw_split_msg_key(k)
                .filter(|(m, _)| *m == mailbox)
                .map(|(_, u)| u)),
            None => Ok(None),
        }
    }

    /// Writes an open segment back, split into segments of [`SEG`] when it grew past that by
    /// more than a segment (an old gap filled in).
    fn flush(&self, txn: &mut RwTxn, mailbox: u32, o: Open) -> Result<(), IndexError> {
        if o.stored {
            // delete first: LMDB rewrites a value in place when its old pages are big enough
            // and never shrinks them, so a segment that got compressed would keep the pages
            // of its raw size
            self.db
                .delete(txn, &raw_msg_key(mailbox, o.first)[..])
                .map_err(lmdb)?;
        }
        let mut entries = o.entries;
        let mut first = o.first;
        while entries.len() > 2 * SEG {
            let rest = entries.split_off(SEG);
            self.write(txn, mailbox, first, &entries)?;
            entries = rest;
            first = entries[0].0;
        }
        if entries.is_empty() {
            return Ok(());
        }
        self.write(txn, mailbox, first, &entries)
    }

    /// Removes `uid`. Returns whether it was there.
    pub fn remove(&self, txn: &mut RwTxn, mailbox: u32, uid: u32) -> Result<bool, IndexError> {
        let Some((first, mut entries)) = self.floor(txn, mailbox, uid)? else {
            return Ok(false);
        };
        let Ok(i) = entries.0.binary_search_by_key(&uid, |e| e.0) else {
            return Ok(false);
        };
        entries.0.remove(i);
        // deleted before it is put again, as in `flush`: the smaller value would keep the
        // old one's overflow pages
        self.db
            .delete(txn, &raw_msg_key(mailbox, first)[..])
            .map_err(lmdb)?;
        if !entries.0.is_empty() {
            self.write(txn, mailbox, first, &entries.0)?;
        }
        Ok(true)
    }

    /// Removes every segment of `mailbox`.
    pub fn clear(&self, txn: &mut RwTxn, mailbox: u32) -> Result<(), IndexError> {
        let (lo, hi) = (raw_msg_key(mailbox, 0), raw_msg_key(mailbox, u32::MAX));
        let range = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
        self.db.delete_range(txn, &range).map_err(lmdb)?;
        Ok(())
    }

    fn write<D: AsRef<[u8]>>(
        &self,
        txn: &mut RwTxn,
        mailbox: u32,
        first: u32,
        entries: &[(u32, D)],
    ) -> Result<(), IndexError> {
        self.db
            .put(
                txn,
                &raw_msg_key(mailbox, first)[..],
                &encode(entries, self.packing)?,
            )
            .map_err(lmdb)
    }
}

/// The LEB128 varint at the start of `bytes` (postcard's length prefix of a sequence).
fn read_varint(bytes: &[u8]) -> Option<usize> {
    take_varint(bytes, &mut 0)
}

/// The LEB128 varint at `bytes[*at..]`, moving `at` past it.
pub(crate) fn take_varint(bytes: &[u8], at: &mut usize) -> Option<usize> {
    let mut n: u64 = 0;
    for (i, &b) in bytes.get(*at..)?.iter().enumerate().take(10) {
        n |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            *at += i + 1;
            return usize::try_from(n).ok();
        }
    }
    None
}

/// True when `uid` comes after a full segment: it starts the next one.
fn closed_before(entries: &[(u32, Vec<u8>)], uid: u32) -> bool {
    entries.len() >= SEG && entries.last().is_some_and(|e| e.0 < uid)
}

/// A segment being changed in memory.
struct Open {
    /// Its key's UID.
    first: u32,
    /// Whether it exists in the database (and must be replaced).
    stored: bool,
    entries: Vec<(u32, Vec<u8>)>,
    /// Key UID of the following segment: UIDs from there on belong to it.
    next: Option<u32>,
}

impl Open {
    fn takes(&self, uid: u32) -> bool {
        if self.next.is_some_and(|n| uid >= n) || uid < self.first {
            return false;
        }
        !closed_before(&self.entries, uid)
    }
}

#[cfg(test)]
mod tests;
