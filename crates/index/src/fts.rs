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

/// A stored [`TextRecord`] read in place: its strings as the bytes stored, neither copied
/// nor checked as UTF-8 (a phrase SEARCH compares the texts of hundreds of messages, and
/// copying them into strings was a sixth of its time, `perf record`). Substring matching
/// of UTF-8 needles is the same on the bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextRecordRef<'a> {
    /// [`TextRecord::headers`].
    pub headers: Vec<&'a [u8]>,
    /// [`TextRecord::bodies`].
    pub bodies: Vec<&'a [u8]>,
}

impl<'a> TextRecordRef<'a> {
    /// Reads a stored record (postcard of two lists of strings: a count, then each length
    /// and bytes); `what` names it in an error.
    pub fn decode(
        stored: &'a [u8],
        what: &dyn std::fmt::Display,
    ) -> Result<TextRecordRef<'a>, IndexError> {
        let corrupt = || IndexError::Corrupt(format!("{what}: truncated text record"));
        let mut at = 0;
        let mut list = || -> Option<Vec<&'a [u8]>> {
            let n = crate::segment::take_varint(stored, &mut at)?;
            // a count no record of this length can hold is corrupt, not an allocation
            let mut out = Vec::with_capacity(n.min(stored.len()));
            for _ in 0..n {
                let len = crate::segment::take_varint(stored, &mut at)?;
                out.push(stored.get(at..at.checked_add(len)?)?);
                at += len;
            }
            Some(out)
        };
        let headers = list().ok_or_else(corrupt)?;
        let bodies = list().ok_or_else(corrupt)?;
        Ok(TextRecordRef { headers, bodies })
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
/// Bits a word pair of a text part sets (a Bloom filter with four hashes for the pairs:
/// one pair key of a needle passes a message that lacks it with a probability of about
/// the filter's share of set bits to the fourth, where one hash left it at that share).
/// On the 30,000-message INBOX of docs/BENCHMARKS.md, `next week` compared 1,364 texts
/// with two hashes, 774 with three, 565 with four and 466 with six, while `TEXT invoice`
/// (the header trigrams, in the same filter) compared 234 with four and 249 with six.
const PAIR_BITS: u32 = 4;
/// Bytes of a word's end, and of the next word's start, in a pair key.
const PAIR_EDGE: usize = 3;
/// The one separator whose pairs are kept: a single space, what a phrase typed in a
/// search box has between its words. Keeping every separator (HTML written as it is has
/// tags between most words) filled the signatures so much that `TEXT invoice` compared
/// 550 header texts instead of 234, and `next week` 924 texts instead of 774.
const PAIR_SEP: &[u8] = b" ";

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
/// trigrams of each header text of its [`TextRecord`] (one hash) and of the word pairs of
/// each text part ([`PAIR_BITS`] hashes), within one string (a match never spans two),
/// sized to what it holds. Stored as one byte (log2 of the bits), then the bits.
///
/// **Trigrams of the header text.** Every trigram of every substring of a header text is
/// in it, so a message whose signature lacks one trigram of a needle does not hold the
/// needle in its header text ([`SigProbe::in_headers`]): TEXT compares the header text of
/// the messages whose text parts and header words (`crate::words`) did not settle it.
///
/// **Word pairs of the text parts.** A text part is words (maximal runs of word bytes,
/// `crate::words::is_word_byte`) and the separators between them; each separator that is
/// a single space ([`PAIR_SEP`]) adds the key of (the last [`PAIR_EDGE`] bytes of the word
/// before it, the space, the first [`PAIR_EDGE`] bytes of the word after it). A needle with
/// a single space between two runs of word bytes (`next week`) has the same key there
/// wherever it occurs: the space is a whole separator of the text's (word bytes on both
/// sides), the run before it ends a word and the run after it starts one
/// ([`SigProbe::in_bodies`]); a needle with other separators is not narrowed. The text
/// parts' words already narrow such a needle to the messages holding each of its runs;
/// the pairs add that the runs are next to each other. Text parts have no trigrams: the
/// words answer every needle of word bytes exactly, and a pair is far more selective
/// than the trigrams around a space (`xt `, `t w`, ` we`), which passed 85% of the
/// messages that the words left for `next week`.
///
/// One pass over the text: the keys are set in a filter of 2^16 bits, whose share of
/// set bits estimates the number of distinct keys (linear counting), which sizes the
/// signature; the 2^16 bits are then folded down to it (bit b becomes bit b >> k).
pub fn signature(r: &TextRecord) -> Vec<u8> {
    let mut est = Box::new([0u64; (1 << EST_LOG2) / 64]);
    for s in &r.headers {
        set_grams(s.as_bytes(), &mut est);
    }
    for s in &r.bodies {
        for_each_pair(s.as_bytes(), |key| set_pair(key, &mut est));
    }
    fold(&est)
}

/// The key of a word pair: FNV-1a of the three parts, each after its length (a stored
/// signature depends on it: changing it changes the schema).
fn pair_key(tail: &[u8], sep: &[u8], head: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    let mut eat = |b: u8| {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    };
    for part in [tail, sep, head] {
        eat(part.len().min(255) as u8);
        part.iter().for_each(|&b| eat(b));
    }
    h
}

/// The [`PAIR_BITS`] numbers whose bits ([`bit`]) a pair key sets (double hashing).
fn pair_bits(key: u32) -> impl Iterator<Item = u32> {
    let step = key.rotate_left(16) | 1;
    (0..PAIR_BITS).map(move |i| key.wrapping_add(i.wrapping_mul(step)))
}

fn set_pair(key: u32, est: &mut [u64; (1 << EST_LOG2) / 64]) {
    for g in pair_bits(key) {
        let b = bit(g, EST_LOG2);
        est[b >> 6] |= 1 << (b & 63);
    }
}

/// Calls `f` with the key of each word pair of the text part `s` (two words with a single
/// space between them).
fn for_each_pair(s: &[u8], mut f: impl FnMut(u32)) {
    // the word before the one being read: (start, end)
    let mut prev: Option<(usize, usize)> = None;
    for (start, end) in crate::words::word_spans(s) {
        if let Some((ps, pe)) = prev.filter(|&(_, pe)| &s[pe..start] == PAIR_SEP) {
            let tail = &s[pe - (pe - ps).min(PAIR_EDGE)..pe];
            let head = &s[start..start + (end - start).min(PAIR_EDGE)];
            f(pair_key(tail, PAIR_SEP, head));
        }
        prev = Some((start, end));
    }
}

/// The pair keys that every text part holding `needle` has: one for each single space
/// between two runs of word bytes of the needle, where both sides are known (the run
/// before it is at least [`PAIR_EDGE`] bytes or a whole word, the run after it likewise).
fn needle_pairs(needle: &[u8]) -> Vec<u32> {
    let runs: Vec<(usize, usize)> = crate::words::word_spans(needle).collect();
    runs.windows(2)
        .filter_map(|w| {
            let ((ps, pe), (ns, ne)) = (w[0], w[1]);
            // a run at the needle's start may be the end of a longer word, one at its end
            // the start of one: only their edge bytes are known
            let tail_known = pe - ps >= PAIR_EDGE || ps > 0;
            let head_known = ne - ns >= PAIR_EDGE || ne < needle.len();
            (tail_known && head_known && &needle[pe..ns] == PAIR_SEP).then(|| {
                let tail = &needle[pe - (pe - ps).min(PAIR_EDGE)..pe];
                let head = &needle[ns..ns + (ne - ns).min(PAIR_EDGE)];
                pair_key(tail, &needle[pe..ns], head)
            })
        })
        .collect()
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

/// The bits of a stored signature and their log2, or `None` when it cannot be read.
fn sig_bits(sig: &[u8]) -> Option<(u32, &[u8])> {
    let (&log2, bits) = sig.split_first()?;
    let log2 = u32::from(log2);
    ((SIG_MIN_LOG2..=SIG_MAX_LOG2).contains(&log2) && bits.len() == (1usize << log2) / 8)
        .then_some((log2, bits))
}

fn has_bit(bits: &[u8], log2: u32, g: u32) -> bool {
    let b = bit(g, log2);
    bits[b / 8] & (1 << (b % 8)) != 0
}

/// What signatures are asked of one BODY or TEXT needle (already normalised as the text
/// is), worked out once for a search: its trigrams and its word pairs.
#[derive(Clone, Debug)]
pub struct SigProbe {
    grams: Vec<u32>,
    pairs: Vec<u32>,
}

impl SigProbe {
    pub fn new(needle: &[u8]) -> SigProbe {
        let mut grams: Vec<u32> = grams(needle).collect();
        grams.sort_unstable();
        grams.dedup();
        SigProbe {
            grams,
            pairs: needle_pairs(needle),
        }
    }

    /// Whether a message with signature `sig` may hold the needle in a header text: false
    /// only when it certainly does not. A needle under 3 bytes, or a signature that
    /// cannot be read, may be anywhere.
    pub fn in_headers(&self, sig: &[u8]) -> bool {
        let Some((log2, bits)) = sig_bits(sig) else {
            return true;
        };
        self.grams.iter().all(|&g| has_bit(bits, log2, g))
    }

    /// Whether a message with signature `sig` may hold the needle in a text part: false
    /// only when it certainly does not. A needle without a known word pair (no separator
    /// between two runs of word bytes: those are the words' to answer), or a signature
    /// that cannot be read, may be anywhere.
    pub fn in_bodies(&self, sig: &[u8]) -> bool {
        let Some((log2, bits)) = sig_bits(sig) else {
            return true;
        };
        self.pairs
            .iter()
            .all(|&key| pair_bits(key).all(|g| has_bit(bits, log2, g)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn records_read_in_place_are_the_records_decoded(
            headers in proptest::collection::vec(".{0,40}", 0..4),
            bodies in proptest::collection::vec(".{0,300}", 0..6),
        ) {
            let r = TextRecord { headers, bodies };
            let stored = r.encode().unwrap();
            let v = TextRecordRef::decode(&stored, &"test").unwrap();
            let bytes = |l: &[String]| l.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
            let seen = |l: &[&[u8]]| l.iter().map(|s| s.to_vec()).collect::<Vec<_>>();
            prop_assert_eq!(seen(&v.headers), bytes(&r.headers));
            prop_assert_eq!(seen(&v.bodies), bytes(&r.bodies));
            // cut anywhere: an error, never a panic or a shorter text
            for cut in [0, stored.len() / 2, stored.len() - 1] {
                prop_assert!(TextRecordRef::decode(&stored[..cut], &"test").is_err());
            }
        }
    }

    /// The signature made the plain way (a window of three bytes at a time over the
    /// header texts; each text part cut into words by `split` and paired): the one-pass
    /// filter and the folding must give the very same bytes (`index check` compares
    /// stored signatures with freshly made ones).
    fn plain_signature(r: &TextRecord) -> Vec<u8> {
        let mut est = Box::new([0u64; (1 << EST_LOG2) / 64]);
        for s in &r.headers {
            for g in grams(s.as_bytes()) {
                let b = bit(g, EST_LOG2);
                est[b / 64] |= 1 << (b % 64);
            }
        }
        for s in &r.bodies {
            let b = s.as_bytes();
            // (start, end) of each word
            let mut words = Vec::new();
            let mut at = 0;
            for piece in b.split(|&c| !crate::words::is_word_byte(c)) {
                if !piece.is_empty() {
                    words.push((at, at + piece.len()));
                }
                at += piece.len() + 1;
            }
            for w in words.windows(2) {
                let ((ps, pe), (ns, ne)) = (w[0], w[1]);
                if &b[pe..ns] != PAIR_SEP {
                    continue;
                }
                let tail = &b[ps.max(pe.saturating_sub(PAIR_EDGE))..pe];
                let head = &b[ns..ne.min(ns + PAIR_EDGE)];
                set_pair(pair_key(tail, PAIR_SEP, head), &mut est);
            }
        }
        fold(&est)
    }

    proptest! {
        #[test]
        fn the_fast_pass_gives_the_plain_signature(
            headers in proptest::collection::vec("(?s).{0,40}", 0..3),
            bodies in proptest::collection::vec("(?s)[a-e é\n.,-]{0,300}|(?s).{0,200}", 0..4),
        ) {
            let r = TextRecord { headers, bodies };
            prop_assert_eq!(signature(&r), plain_signature(&r));
        }

        /// Never a false "no": a needle cut from a header text passes `in_headers`, one
        /// cut from a text part passes `in_bodies`.
        #[test]
        fn a_needle_cut_from_the_text_always_passes(
            header in "(?s)[a-c .:-]{0,60}",
            body in "(?s)[a-c é.,\n-]{0,120}",
            from in 0usize..120,
            len in 1usize..14,
        ) {
            let r = TextRecord { headers: vec![header.clone()], bodies: vec![body.clone()] };
            let sig = signature(&r);
            for (text, in_body) in [(header.as_bytes(), false), (body.as_bytes(), true)] {
                let start = from.min(text.len());
                let end = (start + len).min(text.len());
                let needle = &text[start..end];
                let p = SigProbe::new(needle);
                if in_body {
                    prop_assert!(p.in_bodies(&sig), "{:?} in {:?}", needle, body);
                } else {
                    prop_assert!(p.in_headers(&sig), "{:?} in {:?}", needle, header);
                }
            }
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
            assert_eq!(sig, plain_signature(&r), "{len} characters");
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
                "please find the numbers attached. grüße aus köln, next month\n".repeat(3),
                "<p>second part</p> the week".into(),
            ],
        };
        let sig = signature(&r);
        for (texts, in_body) in [(&r.headers, false), (&r.bodies, true)] {
            for t in texts {
                let b = t.as_bytes();
                for i in 0..b.len() {
                    for j in i..b.len().min(i + 20) {
                        let p = SigProbe::new(&b[i..=j]);
                        let passes = if in_body {
                            p.in_bodies(&sig)
                        } else {
                            p.in_headers(&sig)
                        };
                        assert!(passes, "{:?}", &b[i..=j]);
                    }
                }
            }
        }
        // short needles, needles the words answer, and unreadable signatures never exclude
        assert!(SigProbe::new(b"zz").in_headers(&sig));
        assert!(SigProbe::new(b"absent").in_bodies(&sig));
        assert!(SigProbe::new(b"absent").in_headers(&[]));
        assert!(SigProbe::new(b"absent words").in_bodies(&[40, 1, 2]));
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
            .filter(|w| SigProbe::new(w.as_bytes()).in_headers(&sig))
            .count();
        assert!(
            passed <= 2,
            "{passed} of {} absent words passed",
            absent.len()
        );
        // phrases of words the text parts hold, but not next to each other
        let apart = [
            "next week",
            "numbers please",
            "find attached",
            "second month",
            "aus grüße",
            "part the",
            "köln next",
            "report.",
        ];
        let passed: Vec<_> = apart
            .iter()
            .filter(|w| SigProbe::new(w.as_bytes()).in_bodies(&sig))
            .collect();
        // "report." has no pair: the words answer it
        assert!(passed.len() <= 2, "{passed:?} passed");
        assert!(SigProbe::new(b"find the numbers").in_bodies(&sig));
        // no pair with both sides known, or a separator other than one space: not
        // narrowed
        assert!(SigProbe::new(b"xt month").in_bodies(&sig));
        assert!(SigProbe::new("köln, nex".as_bytes()).in_bodies(&sig));
        assert!(SigProbe::new(b"numbers,  please").in_bodies(&sig));
    }
}
