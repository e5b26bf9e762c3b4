//! The `flags` column: each message's flags, keywords, modseq, RFC822.SIZE and
//! INTERNALDATE, packed many messages to an LMDB value, so that what SEARCH asks of every
//! message of a mailbox (`UNSEEN`, `UNDELETED`, `FLAGGED`, `KEYWORD`, `MODSEQ`, `LARGER`,
//! `SINCE`, `OLDER`..., and the first unseen message of SELECT) is a walk over a few
//! hundred small values instead of one `messages` entry (about 100 bytes, with the file
//! name) per message. On 30,000 messages the walk
//! over `messages` took about 6 ms of a `SEARCH UNSEEN FLAGGED` (a fifth of it in LMDB's
//! cursor, a fifth decoding postcard), against Dovecot's 1.4 ms from its mmapped index.
//!
//! It is a packed column ([`crate::packed`]), not [`crate::segment::Segments`]: those
//! hold opaque byte strings per UID, immutable once written, and a full segment is
//! compressed. Here every flag change rewrites its entry in place, so a segment stays
//! uncompressed, and the entries are small and fixed in shape, which a delta encoding
//! packs to about 12 bytes.
//!
//! The `messages` table stays the record of a message's state; this column repeats five
//! of its fields and is written in the same transaction by every [`crate::Writer`] method
//! that writes a state (insert, flag change, removal, clearing). `maildex index check`
//! compares the two.
//!
//! Layout (docs/INDEX-FORMAT.md, "The flags column"): the packed layout, with the lowest
//! modseq (varint) and the lowest INTERNALDATE (zigzag varint) of the entries as the
//! header, and as each entry's payload: the flags, one byte; the keywords, varint; the
//! modseq's distance from the lowest, varint; RFC822.SIZE, varint; the INTERNALDATE's
//! distance from the lowest, varint.

use crate::packed::{varint_len, Codec, Packed};
use crate::schema::{put_varint, varint as take_varint};
use crate::ModSeq;

/// What the column holds of one message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlagState {
    /// System flags, as [`crate::MessageState::flags`].
    pub flags: u8,
    /// Keyword bits, as [`crate::MessageState::keywords`].
    pub keywords: u32,
    /// The modseq of the message's last change.
    pub modseq: ModSeq,
    /// RFC822.SIZE, as [`crate::MessageState::vsize`].
    pub vsize: u64,
    /// INTERNALDATE, as [`crate::MessageState::internal_date`].
    pub internal_date: i64,
}

impl FlagState {
    /// The column's part of a stored state.
    pub fn of(state: &crate::MessageState) -> FlagState {
        FlagState {
            flags: state.flags,
            keywords: state.keywords,
            modseq: state.modseq,
            vsize: state.vsize,
            internal_date: state.internal_date,
        }
    }

    /// True when the message lacks `\Seen`.
    pub fn is_unseen(&self) -> bool {
        self.flags & crate::flag::SEEN == 0
    }
}

/// The `flags` column ([`Packed`] with [`FlagCodec`]).
pub(crate) type FlagColumn<'e> = Packed<'e, FlagCodec>;

/// How the `flags` column packs a [`FlagState`]: the value's header is its entries'
/// lowest modseq and lowest INTERNALDATE; an entry's payload its flags byte, its keywords
/// and its modseq's distance from the lowest, its RFC822.SIZE and its INTERNALDATE's
/// distance from the lowest (varints), about 12 bytes in all with its UID step.
pub(crate) struct FlagCodec;

impl Codec for FlagCodec {
    type Item = FlagState;
    type Ref<'a> = FlagState;
    type Header = (u64, i64);
    const NAME: &'static str = "flags column";
    const SEG_ENTRIES: usize = 128;
    const SEG_BYTES: usize = 1024;
    /// A value stays inside what LMDB keeps on a 4 KiB leaf page (about 2,000 bytes with
    /// its key), so it never takes an overflow page of its own, which every flag change
    /// would rewrite whole.
    const MAX_VALUE: usize = 1536;

    fn put_header(entries: &[(u32, FlagState)], out: &mut Vec<u8>) -> (u64, i64) {
        let base = entries.iter().map(|e| e.1.modseq.0).min().unwrap_or(0);
        let date = entries.iter().map(|e| e.1.internal_date).min().unwrap_or(0);
        put_varint(out, base);
        put_varint(out, zigzag(date));
        (base, date)
    }

    fn take_header(value: &[u8], at: &mut usize) -> Option<(u64, i64)> {
        let base = take_varint(value, at)?;
        let date = unzigzag(take_varint(value, at)?);
        Some((base, date))
    }

    fn put_payload(st: &FlagState, (base, date): (u64, i64), out: &mut Vec<u8>) {
        out.push(st.flags);
        put_varint(out, u64::from(st.keywords));
        put_varint(out, st.modseq.0 - base);
        put_varint(out, st.vsize);
        put_varint(out, st.internal_date.abs_diff(date));
    }

    fn take_payload(value: &[u8], at: &mut usize, (base, date): (u64, i64)) -> Option<FlagState> {
        let flags = *value.get(*at)?;
        *at += 1;
        let keywords = u32::try_from(take_varint(value, at)?).ok()?;
        let modseq = base.checked_add(take_varint(value, at)?)?;
        let vsize = take_varint(value, at)?;
        let internal_date = date.checked_add_unsigned(take_varint(value, at)?)?;
        Some(FlagState {
            flags,
            keywords,
            modseq: ModSeq(modseq),
            vsize,
            internal_date,
        })
    }

    /// About: the modseq and the date are stored as their distances from the segment's
    /// lowest, taken here as the distances from the first entry's.
    fn payload_len(st: &FlagState, entries: &[(u32, FlagState)]) -> usize {
        let first = entries.first().map(|e| e.1);
        let base = first.map_or(0, |f| f.modseq.0);
        let date = first.map_or(st.internal_date, |f| f.internal_date);
        1 + varint_len(u64::from(st.keywords))
            + varint_len(st.modseq.0.abs_diff(base))
            + varint_len(st.vsize)
            + varint_len(st.internal_date.abs_diff(date))
    }

    fn to_item(st: FlagState) -> FlagState {
        st
    }
}

/// A signed number as an unsigned one small for small magnitudes (as protobuf's sint).
fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

#[cfg(test)]
mod tests;
