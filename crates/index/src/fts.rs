//! The `fts-text` column: what SEARCH BODY and TEXT compare, one record per message,
//! written when the message is indexed, so a SEARCH reads no message file.
//!
//! The record is a [`TextRecord`] (the message's header blocks and text parts, decoded and
//! normalised by maildex-text, each part apart so a match never spans two), postcard, then
//! stored as one kind byte and the bytes: kind 0 raw (records that zstd does not shrink),
//! kind 1 a u32 big-endian length of the postcard bytes and one zstd frame (level 3) of
//! them. The index crate stores and returns it; it does not know the text rules.

use serde::{Deserialize, Serialize};

use crate::IndexError;

const RAW: u8 = 0;
const ZSTD: u8 = 1;
/// zstd level, as for segments (compressed once, read by every BODY/TEXT search).
const ZSTD_LEVEL: i32 = 3;
/// Below this many postcard bytes a record is stored raw: a zstd frame does not pay.
const MIN_COMPRESS: usize = 64;

/// What SEARCH BODY and TEXT compare of one message (RFC 3501 §6.4.4), already in the form
/// they compare it (decoded, lower-cased: maildex-text's `SearchText`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct TextRecord {
    /// Each header block (the message's, then every part's in pre-order).
    pub headers: Vec<String>,
    /// Each text part's body, in order.
    pub bodies: Vec<String>,
}

impl TextRecord {
    /// The stored form (see the module docs).
    pub fn encode(&self) -> Result<Vec<u8>, IndexError> {
        let plain = crate::schema::encode(self)?;
        if plain.len() >= MIN_COMPRESS {
            let len = u32::try_from(plain.len())
                .map_err(|_| IndexError::Encode("text record over 4 GiB".into()))?;
            let frame = zstd::bulk::compress(&plain, ZSTD_LEVEL)
                .map_err(|e| IndexError::Encode(e.to_string()))?;
            if frame.len() + 4 < plain.len() {
                let mut out = Vec::with_capacity(frame.len() + 5);
                out.push(ZSTD);
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&frame);
                return Ok(out);
            }
        }
        let mut out = Vec::with_capacity(plain.len() + 1);
        out.push(RAW);
        out.extend_from_slice(&plain);
        Ok(out)
    }

    /// The length of the postcard bytes of a stored record (its uncompressed size).
    pub fn plain_len(stored: &[u8]) -> usize {
        match stored.split_first() {
            Some((&ZSTD, rest)) => rest
                .first_chunk::<4>()
                .map_or(0, |l| u32::from_be_bytes(*l) as usize),
            Some((_, rest)) => rest.len(),
            None => 0,
        }
    }

    /// Reads a stored record; `what` names it in an error.
    pub fn decode(stored: &[u8], what: &dyn std::fmt::Display) -> Result<TextRecord, IndexError> {
        match stored.split_first() {
            Some((&RAW, rest)) => crate::schema::decode(rest, what),
            Some((&ZSTD, rest)) => {
                let (len, frame) = rest
                    .split_first_chunk::<4>()
                    .ok_or_else(|| IndexError::Corrupt(format!("{what}: truncated text")))?;
                let len = u32::from_be_bytes(*len) as usize;
                let plain = crate::segment::decompress(frame, len)
                    .map_err(|e| IndexError::Corrupt(format!("{what}: {e}")))?;
                crate::schema::decode(&plain, what)
            }
            _ => Err(IndexError::Corrupt(format!("{what}: unknown text kind"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_records_stay_raw_large_ones_are_compressed_and_both_read_back() {
        let small = TextRecord {
            headers: vec!["subject: hi\n".into()],
            bodies: vec!["hello".into()],
        };
        let large = TextRecord {
            headers: vec!["subject: report\n".repeat(20)],
            bodies: vec!["the same line again\n".repeat(200), String::new()],
        };
        let s = small.encode().unwrap();
        assert_eq!(s[0], RAW);
        let l = large.encode().unwrap();
        assert_eq!(l[0], ZSTD);
        assert!(l.len() < 400, "{}", l.len());
        assert_eq!(TextRecord::plain_len(&s), s.len() - 1);
        assert_eq!(
            TextRecord::plain_len(&l),
            crate::schema::encode(&large).unwrap().len()
        );
        assert_eq!(TextRecord::decode(&s, &"t").unwrap(), small);
        assert_eq!(TextRecord::decode(&l, &"t").unwrap(), large);
        let err = TextRecord::decode(&l[..3], &"fts-text 1/2").unwrap_err();
        assert!(err.to_string().contains("fts-text 1/2"), "{err}");
        assert!(TextRecord::decode(&[7], &"t").is_err());
        assert!(TextRecord::decode(&[], &"t").is_err());
    }
}
