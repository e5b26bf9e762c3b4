//! The `fts-text` column: what SEARCH BODY and TEXT compare, one record per message,
//! written when the message is indexed, so a SEARCH reads no message file.
//!
//! The record is a [`TextRecord`] (the message's header blocks and text parts, decoded and
//! normalised by maildex-text, each part apart so a match never spans two), postcard,
//! stored in segments of sixteen messages as the listing columns are ([`crate::segment`]):
//! zstd over sixteen neighbours' texts, which share most of their HTML and quoting, takes
//! about a third less than one frame per message (docs/INDEX-FORMAT.md has the figures).
//! The index crate stores and returns it; it does not know the text rules.

use serde::{Deserialize, Serialize};

use crate::IndexError;

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
    /// The stored form: postcard (compressed with its segment).
    pub fn encode(&self) -> Result<Vec<u8>, IndexError> {
        crate::schema::encode(self)
    }

    /// Reads a stored record; `what` names it in an error.
    pub fn decode(stored: &[u8], what: &dyn std::fmt::Display) -> Result<TextRecord, IndexError> {
        crate::schema::decode(stored, what)
    }
}

/// Bits of a signature per distinct trigram of its message (a Bloom filter with one hash:
/// about 1 - e^(-1/2) = 39% of the bits set, so a needle of n distinct trigrams passes a
/// message that lacks them with a probability of about 0.39^n).
const SIG_BITS_PER_GRAM: f64 = 2.0;
/// Bounds of a signature's size, as log2 of its bits: 256 bits to 1 KiB, so a signature
/// (with its length byte and key) always fits in an LMDB leaf page, never an overflow page
/// of its own. A message with more than about 4,000 distinct trigrams gets a fuller filter.
const SIG_MIN_LOG2: u32 = 8;
const SIG_MAX_LOG2: u32 = 13;
/// log2 of the bits of the first pass, which estimates the distinct trigrams (linear
/// counting) and is then folded down to the signature's size.
const EST_LOG2: u32 = 16;

/// The byte trigrams of `s` as 24-bit numbers.
fn grams(s: &[u8]) -> impl Iterator<Item = u32> + '_ {
    s.windows(3)
        .map(|w| u32::from(w[0]) << 16 | u32::from(w[1]) << 8 | u32::from(w[2]))
}

/// The bit of trigram `g` in a signature of 2^`log2` bits (Fibonacci hashing: the top
/// `log2` bits of the product, so the bit in a filter half the size is this one halved).
fn bit(g: u32, log2: u32) -> usize {
    (g.wrapping_mul(0x9E37_79B1) >> (32 - log2)) as usize
}

/// The candidate signature of a message (the `fts-sig` column): a Bloom filter of the byte
/// trigrams of each string of its [`TextRecord`] (within one string: a match never spans
/// two), one hash, sized to its distinct trigrams. Stored as one byte (log2 of the bits),
/// then the bits. Every trigram of every substring of the text is in it, so a message whose
/// signature lacks one trigram of a needle cannot contain the needle: SEARCH BODY/TEXT
/// decompress and compare only the messages whose signature has all of them.
///
/// One pass over the text: the trigrams are set in a filter of 2^16 bits, whose share of
/// set bits estimates the number of distinct trigrams (linear counting), which sizes the
/// signature; the 2^16 bits are then folded down to it (bit b becomes bit b >> k).
pub fn signature(r: &TextRecord) -> Vec<u8> {
    let mut est = Box::new([0u64; (1 << EST_LOG2) / 64]);
    for s in r.headers.iter().chain(&r.bodies) {
        set_grams(s.as_bytes(), &mut est);
    }
    fold(&est)
}

/// The estimating filter sized and folded into a stored signature.
fn fold(est: &[u64; (1 << EST_LOG2) / 64]) -> Vec<u8> {
    let ones: u32 = est.iter().map(|w| w.count_ones()).sum();
    let m = f64::from(1u32 << EST_LOG2);
    let distinct = if f64::from(ones) >= m {
        m * 8.0
    } else {
        -m * (1.0 - f64::from(ones) / m).ln()
    };
    let want = (distinct * SIG_BITS_PER_GRAM).ceil().max(1.0) as usize;
    let log2 = want
        .next_power_of_two()
        .trailing_zeros()
        .clamp(SIG_MIN_LOG2, SIG_MAX_LOG2);
    let shift = EST_LOG2 - log2;
    let mut out = vec![0u8; 1 + (1usize << log2) / 8];
    out[0] = log2 as u8;
    for (w, &word) in est.iter().enumerate() {
        let mut word = word;
        while word != 0 {
            let b = (w * 64 + word.trailing_zeros() as usize) >> shift;
            out[1 + b / 8] |= 1 << (b % 8);
            word &= word - 1;
        }
    }
    out
}

/// Sets the bit of every trigram of `s` in the estimating filter. Each trigram is read as
/// the top three bytes of a big-endian load of four (the last one alone), so no trigram
/// waits on the one before it: a third faster than three loads of a window, or a trigram
/// rolled along the bytes (issue 18, the full text's cost at delivery).
fn set_grams(s: &[u8], est: &mut [u64; (1 << EST_LOG2) / 64]) {
    let mut set = |g: u32| {
        let b = bit(g, EST_LOG2);
        est[b >> 6] |= 1 << (b & 63);
    };
    let Some(last) = s.len().checked_sub(3) else {
        return;
    };
    for w in s.windows(4) {
        set(u32::from_be_bytes([w[0], w[1], w[2], w[3]]) >> 8);
    }
    set(u32::from(s[last]) << 16 | u32::from(s[last + 1]) << 8 | u32::from(s[last + 2]));
}

/// Whether a message with signature `sig` may contain `needle` (already normalised as the
/// text is): false only when it certainly does not. A needle under 3 bytes, or a signature
/// that cannot be read, may match anything.
pub fn may_contain(sig: &[u8], needle: &[u8]) -> bool {
    let Some((&log2, bits)) = sig.split_first() else {
        return true;
    };
    let log2 = u32::from(log2);
    if !(SIG_MIN_LOG2..=SIG_MAX_LOG2).contains(&log2) || bits.len() != (1usize << log2) / 8 {
        return true;
    }
    grams(needle).all(|g| {
        let b = bit(g, log2);
        bits[b / 8] & (1 << (b % 8)) != 0
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The signature as schema 7 first made it (a window of three bytes at a time): the
    /// faster pass must give the very same bytes, since stored signatures are not rebuilt
    /// (and `index check` compares them).
    fn windowed_signature(r: &TextRecord) -> Vec<u8> {
        let mut est = Box::new([0u64; (1 << EST_LOG2) / 64]);
        for s in r.headers.iter().chain(&r.bodies) {
            for g in grams(s.as_bytes()) {
                let b = bit(g, EST_LOG2);
                est[b / 64] |= 1 << (b % 64);
            }
        }
        fold(&est)
    }

    proptest! {
        #[test]
        fn the_fast_pass_gives_the_windowed_signature(
            headers in proptest::collection::vec("(?s).{0,40}", 0..3),
            bodies in proptest::collection::vec("(?s)[a-e é\n]{0,300}|(?s).{0,200}", 0..4),
        ) {
            let r = TextRecord { headers, bodies };
            prop_assert_eq!(signature(&r), windowed_signature(&r));
        }
    }

    #[test]
    fn the_fast_pass_agrees_at_every_signature_size() {
        let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
        let mut sizes = std::collections::BTreeSet::new();
        for len in [
            0, 1, 2, 3, 4, 50, 100, 150, 200, 300, 400, 600, 800, 1_000, 2_500, 5_000, 10_000,
            40_000,
        ] {
            let text: String = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    char::from(b"abcdefghijklmnopqrstuvwxyz \n\xe9"[(seed % 29) as usize])
                })
                .collect();
            let r = TextRecord {
                headers: vec![text.clone()],
                bodies: vec![text.to_uppercase(), String::new()],
            };
            let sig = signature(&r);
            assert_eq!(sig, windowed_signature(&r), "{len} characters");
            sizes.insert(sig[0]);
        }
        assert_eq!(
            sizes.into_iter().collect::<Vec<_>>(),
            (SIG_MIN_LOG2 as u8..=SIG_MAX_LOG2 as u8).collect::<Vec<_>>(),
            "every size was made"
        );
    }

    #[test]
    fn records_read_back_and_corrupt_ones_are_errors() {
        let r = TextRecord {
            headers: vec!["subject: report\n".repeat(20)],
            bodies: vec!["the same line again\n".repeat(200), String::new()],
        };
        let s = r.encode().unwrap();
        assert_eq!(TextRecord::decode(&s, &"t").unwrap(), r);
        let err = TextRecord::decode(&s[..3], &"fts-text 1/2").unwrap_err();
        assert!(err.to_string().contains("fts-text 1/2"), "{err}");
        assert!(TextRecord::decode(&[], &"t").is_err());
    }

    #[test]
    fn a_signature_passes_every_substring_and_rejects_most_absent_words() {
        let r = TextRecord {
            headers: vec!["subject: quarterly report\nfrom: alice@example.org\n".into()],
            bodies: vec![
                "please find the numbers attached. grüße aus köln\n".repeat(3),
                "<p>second part</p>".into(),
            ],
        };
        let sig = signature(&r);
        let text: Vec<&str> = r
            .headers
            .iter()
            .chain(&r.bodies)
            .map(String::as_str)
            .collect();
        for t in &text {
            let b = t.as_bytes();
            for i in 0..b.len() {
                for j in i..b.len().min(i + 20) {
                    assert!(may_contain(&sig, &b[i..=j]), "{:?}", &b[i..=j]);
                }
            }
        }
        // short needles and unreadable signatures never exclude
        assert!(may_contain(&sig, b"zz"));
        assert!(may_contain(&[], b"absent"));
        assert!(may_contain(&[40, 1, 2], b"absent"));
        // a word spanning two strings is not in the text: the signature may exclude it
        let absent = [
            "invoice",
            "deadline",
            "meeting",
            "zebra",
            "postpone",
            "migration",
            "kernel",
            "überweisung",
            "roadmap",
            "customer",
        ];
        let passed = absent
            .iter()
            .filter(|w| may_contain(&sig, w.as_bytes()))
            .count();
        assert!(
            passed <= 2,
            "{passed} of {} absent words passed",
            absent.len()
        );
    }
}
