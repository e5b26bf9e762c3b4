//! The `fts-words` column: for each word of a mailbox's stored text parts, the UIDs of the
//! messages that hold it (issue 18 #2). With it SEARCH BODY answers a needle made of word
//! characters from the words alone, exactly, and narrows any other needle to the messages
//! holding its words before their stored texts are compared; TEXT takes the messages the
//! body words find, and compares the rest as before.
//!
//! **Why a needle of word characters is answered exactly.** A word is a maximal run of
//! word bytes ([`is_word_byte`]: ASCII letters and digits, and every byte of a non-ASCII
//! character) in one text part of a [`TextRecord`] (already lower-cased as SEARCH
//! compares). An occurrence of a needle made only of word bytes lies inside one run, so a
//! text part holds the needle exactly when one of its words does: the answer is the union
//! of the postings of the words that contain the needle, found by a substring test over
//! the mailbox's distinct words. No token rule of a natural language is involved, so
//! IMAP's substring semantics (RFC 3501 §6.4.4) hold: `igrat` finds `migration`, and a run
//! of Japanese with `postpone` inside is one word that contains it. A needle with other
//! bytes (`next week`, `example.net`) needs each of its word runs in a word (the inner
//! ones whole, the first as a word's end, the last as a word's start): the messages
//! holding all of them are the candidates, whose text is then compared.
//!
//! **Why the header blocks have no words.** On a generated 30,000-message mailbox the
//! header blocks held 1.13 million distinct words, 95% of them in one message only
//! (Message-ID, MIME boundaries, DKIM and ARC signatures, relay IDs): 36 MB of keys, ten
//! times the text parts' words, and every search would pass over them. TEXT is BODY or a
//! header match, so the words answer its "found in a text part" and the candidate
//! signatures (which do cover the header text) narrow what is left to compare.
//!
//! **What a message that is not in the words is.** Two lists under empty words say which
//! answers the words can give: `covered` holds the messages whose words are all here (a
//! message whose text is not indexed yet, or whose file could not be read, is not, and is
//! compared by its text or is still pending: [`crate::Reader::words_covered`]);
//! `overflow` holds messages with a word longer than [`MAX_WORD`] bytes or more than
//! [`MAX_WORDS`] distinct words (a base64 blob pasted into a body): none of their words is
//! stored, so every needle compares their text.
//!
//! **Expunged messages** stay in the postings (removing them would need their words), and
//! their UIDs are never asked for: a SEARCH looks up the UIDs of its view, and UIDs are
//! not given twice in a mailbox (a new UIDVALIDITY clears the mailbox's words with the
//! rest of its records). `index rebuild --fts-only` writes the lists afresh.
//!
//! **Stored form.** Key: mailbox id (u32 big-endian), a kind byte ([`WordKind`]), the
//! word. Value: the UIDs ascending, each as the LEB128 varint of its distance from the one
//! before (the first from 0): one byte per posting in a dense list. A batch of texts reads,
//! merges and writes the list of each word it holds once.

use std::collections::BTreeMap;
use std::ops::{Bound, ControlFlow};

use heed::types::Bytes;
use heed::{Database, RoTxn, RwTxn, WithoutTls};

use crate::{IndexError, TextRecord, Uid};

/// Longest word stored, in bytes (a key stays well under LMDB's 511): a message with a
/// longer one is in the `overflow` list.
pub const MAX_WORD: usize = 240;
/// Most distinct words stored for one message: a message with more is in the `overflow`
/// list.
pub const MAX_WORDS: usize = 4096;

/// The kinds of key under a mailbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WordKind {
    /// Messages whose words are all stored (the key's word is empty).
    Covered,
    /// Messages whose words are not stored (a word too long, or too many).
    Overflow,
    /// A word of a text part.
    Body,
}

impl WordKind {
    fn byte(self) -> u8 {
        match self {
            WordKind::Covered => b'A',
            WordKind::Overflow => b'L',
            WordKind::Body => b'B',
        }
    }
}

/// Whether `b` is part of a word: an ASCII letter or digit, or a byte of a non-ASCII
/// UTF-8 character (so every script's letters are, and a run of CJK text is one word).
pub fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b >= 0x80
}

/// The distinct words of one message's text parts, sorted, as `fts-words` stores them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MessageWords {
    /// Words of the text parts.
    pub body: Vec<Vec<u8>>,
    /// A word longer than [`MAX_WORD`] or more than [`MAX_WORDS`]: no word is stored,
    /// the message goes in the `overflow` list.
    pub overflow: bool,
}

/// The words of the text parts of `text` (already normalised).
pub fn message_words(text: &TextRecord) -> MessageWords {
    let (body, long) = words_of(&text.bodies);
    if long || body.len() > MAX_WORDS {
        return MessageWords {
            body: Vec::new(),
            overflow: true,
        };
    }
    MessageWords {
        body,
        overflow: false,
    }
}

/// The distinct words of `strings`, sorted, and whether one was longer than [`MAX_WORD`].
fn words_of(strings: &[String]) -> (Vec<Vec<u8>>, bool) {
    let mut words: Vec<&[u8]> = Vec::new();
    for s in strings {
        for w in s.as_bytes().split(|&b| !is_word_byte(b)) {
            if w.len() > MAX_WORD {
                return (Vec::new(), true);
            }
            if !w.is_empty() {
                words.push(w);
            }
        }
    }
    words.sort_unstable();
    words.dedup();
    (words.into_iter().map(<[u8]>::to_vec).collect(), false)
}

/// One run of word bytes of a needle, and what a word holding it must look like.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeedleRun {
    /// The run.
    pub run: Vec<u8>,
    /// A non-word byte comes before it in the needle: the word must start with it.
    pub starts: bool,
    /// A non-word byte follows it in the needle: the word must end with it.
    pub ends: bool,
}

impl NeedleRun {
    /// Whether `word` can hold this run where the needle has it.
    pub fn fits(&self, word: &[u8]) -> bool {
        match (self.starts, self.ends) {
            (true, true) => word == self.run.as_slice(),
            (true, false) => word.starts_with(&self.run),
            (false, true) => word.ends_with(&self.run),
            (false, false) => memchr::memmem::find(word, &self.run).is_some(),
        }
    }
}

/// The word runs of a needle (normalised as the text is): one run without `starts` or
/// `ends` for a needle of word bytes only (answered exactly by the words), several for
/// one with other bytes (candidates only), none for a needle without a word byte.
pub fn needle_runs(needle: &[u8]) -> Vec<NeedleRun> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < needle.len() {
        if !is_word_byte(needle[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < needle.len() && is_word_byte(needle[i]) {
            i += 1;
        }
        runs.push(NeedleRun {
            run: needle[start..i].to_vec(),
            starts: start > 0,
            ends: i < needle.len(),
        });
    }
    runs
}

/// The `fts-words` key of `word` of `kind` in `mailbox`.
fn key(mailbox: u32, kind: WordKind, word: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(5 + word.len());
    k.extend_from_slice(&mailbox.to_be_bytes());
    k.push(kind.byte());
    k.extend_from_slice(word);
    k
}

/// Appends `uid`'s varint distance from `prev`.
fn push_delta(out: &mut Vec<u8>, prev: u32, uid: u32) {
    let mut d = uid - prev;
    while d >= 0x80 {
        out.push((d as u8) | 0x80);
        d >>= 7;
    }
    out.push(d as u8);
}

/// Calls `f` with each UID of a stored list, ascending; stops at a byte that does not
/// continue the list (a damaged value ends early rather than failing the search: `index
/// check` rewrites it).
pub fn for_each_posting(list: &[u8], mut f: impl FnMut(u32)) {
    let (mut uid, mut d, mut shift) = (0u32, 0u32, 0u32);
    for &b in list {
        if shift >= 32 {
            return;
        }
        d |= u32::from(b & 0x7f) << shift;
        if b & 0x80 != 0 {
            shift += 7;
            continue;
        }
        let Some(next) = uid.checked_add(d) else {
            return;
        };
        uid = next;
        f(uid);
        (d, shift) = (0, 0);
    }
}

/// The UIDs of a stored list.
pub fn decode_postings(list: &[u8]) -> Vec<u32> {
    let mut out = Vec::new();
    for_each_posting(list, |u| out.push(u));
    out
}

/// A stored list of `uids` (ascending, distinct).
pub fn encode_postings(uids: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(uids.len() + 4);
    let mut prev = 0;
    for &u in uids {
        push_delta(&mut out, prev, u);
        prev = u;
    }
    out
}

/// The `fts-words` database.
#[derive(Clone, Copy)]
pub(crate) struct Words<'e> {
    pub db: Database<'e, Bytes, Bytes>,
}

fn lmdb(e: heed::Error) -> IndexError {
    IndexError::from_heed(e)
}

impl Words<'_> {
    /// The list under the empty word of `kind` (`Covered`, `Overflow`).
    pub fn list<'t>(
        &self,
        txn: &'t RoTxn<WithoutTls>,
        mailbox: u32,
        kind: WordKind,
    ) -> Result<Option<&'t [u8]>, IndexError> {
        self.db.get(txn, &key(mailbox, kind, b"")).map_err(lmdb)
    }

    /// Calls `f` with (word, list) of each word of `kind` in `mailbox`, in byte order.
    pub fn for_each<'t>(
        &self,
        txn: &'t RoTxn<WithoutTls>,
        mailbox: u32,
        kind: WordKind,
        mut f: impl FnMut(&'t [u8], &'t [u8]) -> ControlFlow<()>,
    ) -> Result<(), IndexError> {
        let prefix = key(mailbox, kind, b"");
        for item in self.db.prefix_iter(txn, &prefix).map_err(lmdb)? {
            let (k, v) = item.map_err(lmdb)?;
            let word = &k[prefix.len()..];
            if !word.is_empty() && f(word, v).is_break() {
                break;
            }
        }
        Ok(())
    }

    /// Adds the words of `items` (uid, words) to `mailbox`'s lists, each list read and
    /// written once, and the UIDs to `covered` (or `overflow`).
    pub fn put(
        &self,
        txn: &mut RwTxn,
        mailbox: u32,
        items: &[(u32, &MessageWords)],
    ) -> Result<(), IndexError> {
        let mut lists: BTreeMap<Vec<u8>, Vec<u32>> = BTreeMap::new();
        for &(uid, w) in items {
            let mut add = |kind, word: &[u8]| {
                lists.entry(key(mailbox, kind, word)).or_default().push(uid);
            };
            add(WordKind::Covered, b"");
            if w.overflow {
                add(WordKind::Overflow, b"");
            }
            for word in &w.body {
                add(WordKind::Body, word);
            }
        }
        for (k, mut uids) in lists {
            uids.sort_unstable();
            uids.dedup();
            let merged = match self.db.get(txn, &k).map_err(lmdb)? {
                None => encode_postings(&uids),
                Some(old) => merge(old, &uids),
            };
            self.db.put(txn, &k, &merged).map_err(lmdb)?;
        }
        Ok(())
    }

    /// Removes `uids` from `mailbox`'s `covered` list (their text is rewritten without
    /// words: `index check --repair` of a record with no words at hand).
    pub fn uncover(&self, txn: &mut RwTxn, mailbox: u32, uids: &[u32]) -> Result<(), IndexError> {
        let k = key(mailbox, WordKind::Covered, b"");
        let Some(old) = self.db.get(txn, &k).map_err(lmdb)? else {
            return Ok(());
        };
        let kept: Vec<u32> = decode_postings(old)
            .into_iter()
            .filter(|u| uids.binary_search(u).is_err())
            .collect();
        let v = encode_postings(&kept);
        self.db.put(txn, &k, &v).map_err(lmdb)
    }

    /// Removes every list of `mailbox`.
    pub fn clear(&self, txn: &mut RwTxn, mailbox: u32) -> Result<(), IndexError> {
        let (lo, hi) = (
            mailbox.to_be_bytes(),
            (u64::from(mailbox) + 1).to_be_bytes(),
        );
        let hi = &hi[4..];
        let range = if mailbox == u32::MAX {
            (Bound::Included(&lo[..]), Bound::Unbounded)
        } else {
            (Bound::Included(&lo[..]), Bound::Excluded(hi))
        };
        self.db.delete_range(txn, &range).map_err(lmdb)?;
        Ok(())
    }
}

/// `old` (a stored list) with `new` (ascending, distinct) added: appended when all of
/// `new` is above it (the usual case: texts are indexed in UID order), merged otherwise.
fn merge(old: &[u8], new: &[u32]) -> Vec<u8> {
    let mut last = None;
    for_each_posting(old, |u| last = Some(u));
    match (last, new.first()) {
        (Some(l), Some(&f)) if f > l => {
            let mut out = Vec::with_capacity(old.len() + new.len());
            out.extend_from_slice(old);
            let mut prev = l;
            for &u in new {
                push_delta(&mut out, prev, u);
                prev = u;
            }
            out
        }
        _ => {
            let mut all = decode_postings(old);
            all.extend_from_slice(new);
            all.sort_unstable();
            all.dedup();
            encode_postings(&all)
        }
    }
}

/// The covered UIDs of a mailbox as a sorted list ([`Uid`]s), for the pending walk.
pub(crate) fn uids_of(list: Option<&[u8]>) -> Vec<Uid> {
    let mut out = Vec::new();
    if let Some(l) = list {
        for_each_posting(l, |u| out.push(Uid(u)));
    }
    out
}

impl crate::Reader<'_> {
    /// The messages of `mailbox` whose words are all in `fts-words` (ascending): for
    /// them a word answer is exact; any other message is compared by its text, or is
    /// still pending (no text record written since its listing records).
    pub fn words_covered(&self, mailbox: crate::MailboxId) -> Result<Vec<Uid>, IndexError> {
        let w = self.dbs.words();
        Ok(uids_of(w.list(
            self.txn,
            mailbox.get(),
            WordKind::Covered,
        )?))
    }

    /// The messages of `mailbox` whose words are not stored (a word too long, or too
    /// many words), ascending: every needle compares their text.
    pub fn words_overflow(&self, mailbox: crate::MailboxId) -> Result<Vec<Uid>, IndexError> {
        let w = self.dbs.words();
        Ok(uids_of(w.list(
            self.txn,
            mailbox.get(),
            WordKind::Overflow,
        )?))
    }

    /// Calls `f` with (word, stored list) of each word of `kind` (`Body`) of `mailbox`, in
    /// byte order, until it breaks; [`for_each_posting`] reads a list.
    pub fn for_each_word(
        &self,
        mailbox: crate::MailboxId,
        kind: WordKind,
        f: impl FnMut(&[u8], &[u8]) -> ControlFlow<()>,
    ) -> Result<(), IndexError> {
        self.dbs.words().for_each(self.txn, mailbox.get(), kind, f)
    }
}

impl crate::Writer<'_, '_> {
    /// Adds the words of messages whose text records were written with their listing
    /// records (a COPY copies the source's text: its words are computed from it).
    pub fn put_words(
        &mut self,
        mailbox: crate::MailboxId,
        items: &[(Uid, &MessageWords)],
    ) -> Result<(), IndexError> {
        let items: Vec<(u32, &MessageWords)> = items.iter().map(|(u, w)| (u.get(), *w)).collect();
        self.dbs.words().put(self.txn, mailbox.get(), &items)
    }

    /// Removes every word list of `mailbox` (`index rebuild --fts-only` writes them
    /// afresh): its messages are compared by their texts until they are covered again.
    pub fn clear_words(&mut self, mailbox: crate::MailboxId) -> Result<(), IndexError> {
        self.dbs.words().clear(self.txn, mailbox.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn words_are_runs_of_letters_digits_and_non_ascii() {
        let r = TextRecord {
            headers: vec!["subject: re: q3 invoice\n".into()],
            bodies: vec![
                "the migration, next week.\n…メールpostpone会議 grüße".into(),
                "<p>next</p>".into(),
            ],
        };
        let w = message_words(&r);
        let body: Vec<&str> = w
            .body
            .iter()
            .map(|b| std::str::from_utf8(b).unwrap())
            .collect();
        assert_eq!(
            body,
            [
                "grüße",
                "migration",
                "next",
                "p",
                "the",
                "week",
                "…メールpostpone会議"
            ]
        );
        assert!(!w.overflow);
        let long = TextRecord {
            bodies: vec![format!("short {}", "x".repeat(MAX_WORD + 1))],
            ..TextRecord::default()
        };
        assert_eq!(
            message_words(&long),
            MessageWords {
                overflow: true,
                ..MessageWords::default()
            }
        );
    }

    #[test]
    fn needle_runs_say_where_each_run_sits() {
        assert_eq!(
            needle_runs(b"igrat"),
            [NeedleRun {
                run: b"igrat".to_vec(),
                starts: false,
                ends: false
            }]
        );
        let runs = needle_runs(b"xt week ago.");
        assert_eq!(runs.len(), 3);
        assert!(!runs[0].starts && runs[0].ends && runs[0].fits(b"next"));
        assert!(!runs[0].fits(b"xtra"));
        assert!(runs[1].starts && runs[1].ends && runs[1].fits(b"week"));
        assert!(!runs[1].fits(b"weeks"));
        assert!(runs[2].starts && runs[2].ends && runs[2].fits(b"ago"));
        assert!(needle_runs(b" -- ").is_empty());
    }

    #[test]
    fn lists_append_merge_and_survive_damage() {
        let l = encode_postings(&[1, 2, 300, 70_000]);
        assert_eq!(decode_postings(&l), [1, 2, 300, 70_000]);
        assert_eq!(
            decode_postings(&merge(&l, &[70_001, 80_000])),
            [1, 2, 300, 70_000, 70_001, 80_000]
        );
        assert_eq!(decode_postings(&merge(&l, &[2, 5])), [1, 2, 5, 300, 70_000]);
        assert_eq!(decode_postings(&[0x81]), Vec::<u32>::new());
        assert_eq!(decode_postings(&[0xff; 9]), Vec::<u32>::new());
        assert_eq!(decode_postings(&encode_postings(&[u32::MAX])), [u32::MAX]);
    }

    proptest! {
        /// The rule the module's exact answers stand on: a needle of word bytes is in a
        /// text exactly when one of the text's words contains it, and a needle with other
        /// bytes is only in a text whose words fit each of its runs.
        #[test]
        fn words_answer_as_a_substring_scan(
            bodies in proptest::collection::vec("[a-c .\n-]{0,40}|[aé日 ]{0,20}", 0..3),
            needle in "[a-c]{1,3}|[a-c .-]{1,6}|[é日a]{1,2}",
        ) {
            let r = TextRecord { headers: Vec::new(), bodies };
            let w = message_words(&r);
            let scan = r.bodies.iter().any(|b| b.contains(needle.as_str()));
            let runs = needle_runs(needle.as_bytes());
            let fits = runs.iter().all(|run| w.body.iter().any(|word| run.fits(word)));
            if runs.len() == 1 && !runs[0].starts && !runs[0].ends {
                prop_assert_eq!(fits, scan);
            } else if scan {
                prop_assert!(fits);
            }
        }
    }
}
