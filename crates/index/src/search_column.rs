//! The `cache-search` column: each message's [`crate::SearchFields`] postcard, packed
//! ([`crate::packed`]) about 4 KiB of them to an LMDB value: a `SEARCH SUBJECT` over a
//! mailbox walks a value per fifteen messages or so, and reads each record in place.
//!
//! The records are not compressed: decompressing them cost a search more than reading
//! them did (docs/INDEX-FORMAT.md, `cache-search`). A value is kept to one overflow page
//! (4,080 bytes: a 4 KiB page less its header), so pages are nearly full; a record larger
//! than that (a message with hundreds of recipients, or learned `Received:` fields) is a
//! value of its own.

use crate::packed::{varint_len, Codec, Packed};
use crate::schema::{put_varint, varint as take_varint};

/// The `cache-search` column.
pub(crate) type SearchColumn<'e> = Packed<'e, RecordCodec>;

/// Byte strings as entries: an entry's payload is its length (varint) and its bytes.
pub(crate) struct RecordCodec;

impl Codec for RecordCodec {
    type Item = Vec<u8>;
    type Ref<'a> = &'a [u8];
    type Header = ();
    const NAME: &'static str = "cache-search";
    const SEG_ENTRIES: usize = 256;
    const SEG_BYTES: usize = 4080;
    const MAX_VALUE: usize = 4080;

    fn put_header(_: &[(u32, Vec<u8>)], _: &mut Vec<u8>) {}

    fn take_header(_: &[u8], _: &mut usize) -> Option<()> {
        Some(())
    }

    fn put_payload(item: &Vec<u8>, _: (), out: &mut Vec<u8>) {
        put_varint(out, item.len() as u64);
        out.extend_from_slice(item);
    }

    fn take_payload<'a>(value: &'a [u8], at: &mut usize, _: ()) -> Option<&'a [u8]> {
        let len = take_varint(value, at)?;
        let bytes = value.get(*at..at.checked_add(usize::try_from(len).ok()?)?)?;
        *at += bytes.len();
        Some(bytes)
    }

    fn payload_len(item: &Vec<u8>, _: &[(u32, Vec<u8>)]) -> usize {
        varint_len(item.len() as u64) + item.len()
    }

    fn to_item(r: &[u8]) -> Vec<u8> {
        r.to_vec()
    }
}

#[cfg(test)]
mod tests;
