//! The `fts-words` column: for each word of a mailbox's stored text parts, the UIDs of the
//! messages that hold it (issue 18 #2). With it SEARCH BODY answers a needle made of word
//! characters from the words alone, exactly, and narrows any other needle to the messages
//! holding its words before their stored texts are compared; TEXT takes the messages the
//! body words and the root header's address and subject words find, and compares the rest
//! as before.
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
//! **Header words find, never rule out.** The words of the root header's Subject, From,
//! To and Cc lines, as TEXT compares them (the header text maildex-text makes: unfolded,
//! RFC 2047-decoded, lower-cased), are kept apart ([`WordKind::Header`]). A needle of word
//! bytes inside one of them is in the message's header text, so TEXT holds: on a
//! 30,000-message INBOX about 1,000 of `TEXT invoice`'s 8,990 hits were messages whose
//! text parts lack it and whose subject holds it, and each cost decompressing its
//! segment of header blocks (1,300 header texts compared then, 250 with these). The lists
//! are read only for such positive answers, so they need no `covered` list and may lack
//! words: a message's longest words (over [`MAX_WORD`]) and those past
//! [`MAX_HEADER_WORDS`] are not stored, and a copied message (whose stored record has no
//! header text) has none. A message they do not find is compared as before.
//!
//! **What a message that is not in the words is.** Two lists under empty words say which
//! answers the words can give: `covered` holds the messages whose words are all here (a
//! message whose text is not indexed yet, or whose file could not be read, is not, and is
//! compared by its text or is still pending: [`crate::Reader::words_covered`]);
//! `overflow` holds messages with a word longer than [`MAX_WORD`] bytes or more than
//! [`MAX_WORDS`] distinct words (a base64 blob pasted into a body): none of their words is
//! stored, so every needle compares their text.
//!
//! **Recent words.** A message's words are first stored as one value of their own
//! ([`WordKind::Recent`], and [`WordKind::RecentHeader`] for its header words), and
//! merged into the lists once [`FOLD_AT`] messages of the mailbox wait: indexing one
//! delivered message then writes one value, not a leaf page per word, and a search reads
//! the waiting values' words as well as the lists.
//!
//! **Expunged messages** stay in the postings (removing them would need their words), and
//! their UIDs are never asked for: a SEARCH looks up the UIDs of its view, and UIDs are
//! not given twice in a mailbox (a new UIDVALIDITY clears the mailbox's words with the
//! rest of its records). `index rebuild --fts-only` writes the lists afresh.
//!
//! **Stored form.** Key: mailbox id (u32 big-endian), a kind byte ([`WordKind`]), the
//! word, a 0 byte, the first UID of the chunk (u32 big-endian). Value: a chunk of the
//! word's list, about [`CHUNK`] bytes at most: its UIDs ascending, each as the LEB128
//! varint of its distance from the one before (the first from 0), one byte per posting in
//! a dense list. A merge of recent words adds to the last chunk of each word they hold (or
//! starts one), so it writes a few hundred bytes per word, whatever the mailbox's size.

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
/// Most header words stored for one message (the rest are left out: see the module
/// comment).
pub const MAX_HEADER_WORDS: usize = 256;
/// The lines of the root header text whose words are stored as [`WordKind::Header`]
/// (the header text's field names are lower-cased, each line `name: value`).
const HEADER_FIELDS: [&[u8]; 4] = [b"subject: ", b"from: ", b"to: ", b"cc: "];

/// The kinds of key under a mailbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WordKind {
    /// Messages whose words are all stored (the key's word is empty).
    Covered,
    /// Messages whose words are not stored (a word too long, or too many).
    Overflow,
    /// A word of a text part.
    Body,
    /// A word of the root header's Subject, From, To or Cc line (found, never ruled out:
    /// see the module comment).
    Header,
    /// The words of one message not merged into the `Body` lists yet (the key's word is
    /// empty, its "first UID" the message's UID; the value the words, each followed by a
    /// 0 byte).
    Recent,
    /// The same for the `Header` lists (a value of its own: every word of a `Recent`
    /// value is a body word).
    RecentHeader,
}

impl WordKind {
    fn byte(self) -> u8 {
        match self {
            WordKind::Covered => b'A',
            WordKind::Recent => b'R',
            WordKind::RecentHeader => b'S',
            WordKind::Overflow => b'L',
            WordKind::Body => b'B',
            WordKind::Header => b'H',
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
    /// Words of the root header's Subject, From, To and Cc lines (kept whatever
    /// `overflow` says).
    pub header: Vec<Vec<u8>>,
    /// A word longer than [`MAX_WORD`] or more than [`MAX_WORDS`]: no word is stored,
    /// the message goes in the `overflow` list.
    pub overflow: bool,
}

/// The words of the text parts of `text` (already normalised), and of its root header's
/// address and subject lines.
pub fn message_words(text: &TextRecord) -> MessageWords {
    let header = header_words(text.headers.first().map_or("", String::as_str));
    let (body, long) = words_of(&text.bodies);
    if long || body.len() > MAX_WORDS {
        return MessageWords {
            body: Vec::new(),
            header,
            overflow: true,
        };
    }
    MessageWords {
        body,
        header,
        overflow: false,
    }
}

/// The distinct words of the [`HEADER_FIELDS`] lines of a root header text, sorted, at
/// most [`MAX_HEADER_WORDS`], none longer than [`MAX_WORD`]. A decoded value holding a
/// line break starts a line of its own here: its words are still words of the header
/// text, which is all a header word promises.
fn header_words(block: &str) -> Vec<Vec<u8>> {
    let mut words: Vec<&[u8]> = Vec::new();
    for line in block.as_bytes().split(|&b| b == b'\n') {
        let Some(value) = HEADER_FIELDS.iter().find_map(|f| line.strip_prefix(*f)) else {
            continue;
        };
        words.extend(
            value
                .split(|&b| !is_word_byte(b))
                .filter(|w| !w.is_empty() && w.len() <= MAX_WORD),
        );
    }
    words.sort_unstable();
    words.dedup();
    words.truncate(MAX_HEADER_WORDS);
    words.into_iter().map(<[u8]>::to_vec).collect()
}

/// The kind of the values holding the words of `kind` (`Body`, `Header`) not merged yet.
fn recent_of(kind: WordKind) -> WordKind {
    match kind {
        WordKind::Header => WordKind::RecentHeader,
        _ => WordKind::Recent,
    }
}

/// The lists of the words of `kind` and the values holding those not merged yet.
const MERGED: [WordKind; 2] = [WordKind::Body, WordKind::Header];

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
    word_spans(needle)
        .map(|(start, end)| NeedleRun {
            run: needle[start..end].to_vec(),
            starts: start > 0,
            ends: end < needle.len(),
        })
        .collect()
}

/// The (start, end) of each word of `s` (each maximal run of [`is_word_byte`]s), in order.
pub(crate) fn word_spans(s: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < s.len() && !is_word_byte(s[i]) {
            i += 1;
        }
        let start = i;
        while i < s.len() && is_word_byte(s[i]) {
            i += 1;
        }
        (i > start).then_some((start, i))
    })
}

/// Bytes of UIDs a value holds at most (and a little over): a word's list is kept in
/// chunks of about this size, each keyed by its first UID, so that indexing a message
/// rewrites the last chunk of each of its words, never a long list (a list of 28 KB
/// rewritten for each delivered message made the daemon write 13 MB per delivery into a
/// 30,000-message mailbox), and a chunk always fits in an LMDB leaf page.
pub const CHUNK: usize = 512;

/// Messages whose words wait in `Recent` values before they are merged into the lists: a
/// message indexed alone writes one value (its words, about 2 KB) instead of touching a
/// leaf page per word (200 words, 200 pages: 1.2 MB written by the daemon per delivery
/// into a 30,000-message INBOX), and a merge of 256 touches each page about once.
pub const FOLD_AT: usize = 256;

/// The key prefix of every chunk of `word` of `kind` in `mailbox`: mailbox id, kind
/// byte, the word, a 0 byte (never in a word, so a word's chunks sort together and before
/// a longer word's).
fn word_prefix(mailbox: u32, kind: WordKind, word: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(10 + word.len());
    k.extend_from_slice(&mailbox.to_be_bytes());
    k.push(kind.byte());
    k.extend_from_slice(word);
    k.push(0);
    k
}

/// The key of the chunk starting at UID `first` under `prefix` ([`word_prefix`]).
fn chunk_key(prefix: &[u8], first: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + 4);
    k.extend_from_slice(prefix);
    k.extend_from_slice(&first.to_be_bytes());
    k
}

/// (word, first UID) of a key, given the length of its mailbox-and-kind prefix.
fn split_key(key: &[u8], head: usize) -> Option<(&[u8], u32)> {
    let rest = key.get(head..)?;
    let cut = rest.len().checked_sub(5)?;
    let (word, tail) = rest.split_at(cut);
    if tail[0] != 0 {
        return None;
    }
    Some((
        word,
        u32::from_be_bytes([tail[1], tail[2], tail[3], tail[4]]),
    ))
}

/// Appends `uid`'s varint distance from `prev`.
fn push_delta(out: &mut Vec<u8>, prev: u32, uid: u32) {
    crate::schema::put_varint(out, u64::from(uid - prev));
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
    /// The UIDs of the list under the empty word of `kind` (`Covered`, `Overflow`).
    pub fn list(
        &self,
        txn: &RoTxn<WithoutTls>,
        mailbox: u32,
        kind: WordKind,
    ) -> Result<Vec<Uid>, IndexError> {
        let mut out = Vec::new();
        let prefix = word_prefix(mailbox, kind, b"");
        for item in self.db.prefix_iter(txn, &prefix).map_err(lmdb)? {
            let (_, v) = item.map_err(lmdb)?;
            for_each_posting(v, |u| out.push(Uid(u)));
        }
        Ok(out)
    }

    /// Calls `f` with (word, chunk) of each chunk of each word of `kind` in `mailbox`, in
    /// byte order (a word's chunks one after the other, by UID).
    pub fn for_each<'t>(
        &self,
        txn: &'t RoTxn<WithoutTls>,
        mailbox: u32,
        kind: WordKind,
        mut f: impl FnMut(&'t [u8], &'t [u8]) -> ControlFlow<()>,
    ) -> Result<(), IndexError> {
        let mut head = mailbox.to_be_bytes().to_vec();
        head.push(kind.byte());
        for item in self.db.prefix_iter(txn, &head).map_err(lmdb)? {
            let (k, v) = item.map_err(lmdb)?;
            if let Some((word, _)) = split_key(k, head.len()) {
                if !word.is_empty() && f(word, v).is_break() {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Adds the words of `items` (uid, words) to `mailbox`: each message's words as one
    /// `Recent` value, and its UID to `covered` (and `overflow`); once [`FOLD_AT`]
    /// messages are recent, their words are merged into the `Body` lists.
    pub fn put(
        &self,
        txn: &mut RwTxn,
        mailbox: u32,
        items: &[(u32, &MessageWords)],
    ) -> Result<(), IndexError> {
        let mut covered: Vec<u32> = items.iter().map(|(u, _)| *u).collect();
        let mut overflow: Vec<u32> = items
            .iter()
            .filter(|(_, w)| w.overflow)
            .map(|(u, _)| *u)
            .collect();
        for ids in [&mut covered, &mut overflow] {
            ids.sort_unstable();
            ids.dedup();
        }
        self.add(txn, &word_prefix(mailbox, WordKind::Covered, b""), &covered)?;
        self.add(
            txn,
            &word_prefix(mailbox, WordKind::Overflow, b""),
            &overflow,
        )?;
        let mut waiting = 0;
        for kind in MERGED {
            let recent = word_prefix(mailbox, recent_of(kind), b"");
            for &(uid, w) in items {
                let words = if kind == WordKind::Header {
                    &w.header
                } else {
                    &w.body
                };
                if words.is_empty() {
                    continue;
                }
                let mut v = Vec::with_capacity(words.iter().map(|b| b.len() + 1).sum());
                for word in words {
                    v.extend_from_slice(word);
                    v.push(0);
                }
                self.db
                    .put(txn, &chunk_key(&recent, uid), &v)
                    .map_err(lmdb)?;
            }
            let n = self.db.prefix_iter(txn, &recent).map_err(lmdb)?.count();
            waiting = waiting.max(n);
        }
        if waiting >= FOLD_AT {
            self.fold(txn, mailbox)?;
        }
        Ok(())
    }

    /// Merges the `Recent` and `RecentHeader` words of `mailbox` into its `Body` and
    /// `Header` lists, each list's last chunk read and written once, and removes them.
    pub fn fold(&self, txn: &mut RwTxn, mailbox: u32) -> Result<(), IndexError> {
        for kind in MERGED {
            let recent = word_prefix(mailbox, recent_of(kind), b"");
            let mut lists: BTreeMap<Vec<u8>, Vec<u32>> = BTreeMap::new();
            for item in self.db.prefix_iter(txn, &recent).map_err(lmdb)? {
                let (k, v) = item.map_err(lmdb)?;
                let Some((_, uid)) = split_key(k, 5) else {
                    continue;
                };
                for word in v.split(|&b| b == 0).filter(|w| !w.is_empty()) {
                    lists.entry(word.to_vec()).or_default().push(uid);
                }
            }
            if lists.is_empty() {
                continue;
            }
            for (word, mut uids) in lists {
                uids.sort_unstable();
                uids.dedup();
                self.add(txn, &word_prefix(mailbox, kind, &word), &uids)?;
            }
            self.delete_prefix(txn, &recent)?;
        }
        Ok(())
    }

    /// Calls `f` with (uid, words) of each message of `mailbox` whose words of `kind`
    /// (`Body`, `Header`) are not merged yet; the words are each followed by a 0 byte.
    pub fn for_each_recent<'t>(
        &self,
        txn: &'t RoTxn<WithoutTls>,
        mailbox: u32,
        kind: WordKind,
        mut f: impl FnMut(u32, &'t [u8]),
    ) -> Result<(), IndexError> {
        let recent = word_prefix(mailbox, recent_of(kind), b"");
        for item in self.db.prefix_iter(txn, &recent).map_err(lmdb)? {
            let (k, v) = item.map_err(lmdb)?;
            if let Some((_, uid)) = split_key(k, 5) {
                f(uid, v);
            }
        }
        Ok(())
    }

    /// Adds `new` (ascending, distinct) to the list under `prefix`: into its last chunk
    /// while there is room and then into new chunks when all of `new` is above it (the
    /// usual case: texts are indexed in UID order), the whole list merged and written
    /// again otherwise.
    fn add(&self, txn: &mut RwTxn, prefix: &[u8], new: &[u32]) -> Result<(), IndexError> {
        let Some(&lowest) = new.first() else {
            return Ok(());
        };
        let last = self
            .db
            .get_lower_than_or_equal_to(txn, &chunk_key(prefix, u32::MAX))
            .map_err(lmdb)?
            .filter(|(k, _)| k.len() == prefix.len() + 4 && k.starts_with(prefix))
            .map(|(k, v)| (k.to_vec(), v.to_vec()));
        let Some((key, mut chunk)) = last else {
            return self.write_chunks(txn, prefix, new);
        };
        let mut top = None;
        for_each_posting(&chunk, |u| top = Some(u));
        match top {
            Some(top) if lowest > top => {
                let mut prev = top;
                let mut i = 0;
                while i < new.len() && chunk.len() < CHUNK {
                    push_delta(&mut chunk, prev, new[i]);
                    prev = new[i];
                    i += 1;
                }
                if i > 0 {
                    self.db.put(txn, &key, &chunk).map_err(lmdb)?;
                }
                self.write_chunks(txn, prefix, &new[i..])
            }
            _ => {
                let mut all = Vec::new();
                for item in self.db.prefix_iter(txn, prefix).map_err(lmdb)? {
                    let (_, v) = item.map_err(lmdb)?;
                    for_each_posting(v, |u| all.push(u));
                }
                all.extend_from_slice(new);
                all.sort_unstable();
                all.dedup();
                self.delete_prefix(txn, prefix)?;
                self.write_chunks(txn, prefix, &all)
            }
        }
    }

    /// Removes every key starting with `prefix` (which ends in a 0 byte).
    fn delete_prefix(&self, txn: &mut RwTxn, prefix: &[u8]) -> Result<(), IndexError> {
        let mut hi = prefix.to_vec();
        if let Some(last) = hi.last_mut() {
            *last += 1;
        }
        let range = (Bound::Included(prefix), Bound::Excluded(&hi[..]));
        self.db.delete_range(txn, &range).map_err(lmdb)?;
        Ok(())
    }

    /// Writes `uids` (ascending, distinct) as new chunks under `prefix`.
    fn write_chunks(&self, txn: &mut RwTxn, prefix: &[u8], uids: &[u32]) -> Result<(), IndexError> {
        let mut rest = uids;
        while let Some(&first) = rest.first() {
            let mut chunk = Vec::with_capacity(CHUNK + 5);
            let mut prev = 0;
            let mut n = 0;
            while n < rest.len() && chunk.len() < CHUNK {
                push_delta(&mut chunk, prev, rest[n]);
                prev = rest[n];
                n += 1;
            }
            self.db
                .put(txn, &chunk_key(prefix, first), &chunk)
                .map_err(lmdb)?;
            rest = &rest[n..];
        }
        Ok(())
    }

    /// Removes `uids` from `mailbox`'s `covered` list (their text removed: `index
    /// rebuild --fts-only` with `full_text` off, the tests of `index check`).
    pub fn uncover(&self, txn: &mut RwTxn, mailbox: u32, uids: &[u32]) -> Result<(), IndexError> {
        let prefix = word_prefix(mailbox, WordKind::Covered, b"");
        let old = self.list(txn, mailbox, WordKind::Covered)?;
        if old.is_empty() {
            return Ok(());
        }
        let kept: Vec<u32> = old
            .into_iter()
            .map(Uid::get)
            .filter(|u| uids.binary_search(u).is_err())
            .collect();
        self.delete_prefix(txn, &prefix)?;
        self.write_chunks(txn, &prefix, &kept)
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

impl<'t> crate::Reader<'t> {
    /// The messages of `mailbox` whose words are all in `fts-words` (ascending): for
    /// them a word answer is exact; any other message is compared by its text, or is
    /// still pending (no text record written since its listing records).
    pub fn words_covered(&self, mailbox: crate::MailboxId) -> Result<Vec<Uid>, IndexError> {
        self.dbs
            .words()
            .list(self.txn, mailbox.get(), WordKind::Covered)
    }

    /// The messages of `mailbox` whose words are not stored (a word too long, or too
    /// many words), ascending: every needle compares their text.
    pub fn words_overflow(&self, mailbox: crate::MailboxId) -> Result<Vec<Uid>, IndexError> {
        self.dbs
            .words()
            .list(self.txn, mailbox.get(), WordKind::Overflow)
    }

    /// Calls `f` with (word, chunk of its list) of each word of `kind` (`Body`, `Header`) of
    /// `mailbox`, in byte order, until it breaks: a word with a long list comes once per
    /// chunk ([`CHUNK`]), the chunks one after the other; [`for_each_posting`] reads one.
    pub fn for_each_word(
        &self,
        mailbox: crate::MailboxId,
        kind: WordKind,
        f: impl FnMut(&'t [u8], &'t [u8]) -> ControlFlow<()>,
    ) -> Result<(), IndexError> {
        self.dbs.words().for_each(self.txn, mailbox.get(), kind, f)
    }
}

impl<'t> crate::Reader<'t> {
    /// Calls `f` with (uid, words) of each message of `mailbox` whose words of `kind`
    /// (`Body`, `Header`) are not merged into the lists yet (at most [`FOLD_AT`]): each
    /// word followed by a 0 byte.
    pub fn for_each_recent_words(
        &self,
        mailbox: crate::MailboxId,
        kind: WordKind,
        f: impl FnMut(u32, &'t [u8]),
    ) -> Result<(), IndexError> {
        self.dbs
            .words()
            .for_each_recent(self.txn, mailbox.get(), kind, f)
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

    /// Merges the words of `mailbox`'s messages indexed since the last merge into its
    /// lists now (a rebuild at its end, so the index it leaves is compact; tests).
    pub fn fold_words(&mut self, mailbox: crate::MailboxId) -> Result<(), IndexError> {
        self.dbs.words().fold(self.txn, mailbox.get())
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
        assert_eq!(w.header, [&b"invoice"[..], b"q3", b"re"]);
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
    fn header_words_are_those_of_the_address_and_subject_lines() {
        let block = "received: from mx.example (relay)\nfrom: \"müller, jo\" <jo@example.net>\n\
                     subject: q3 invoice\nx-subject: nothing\ncc: ann@example.org\n\
                     message-id: <abc123@example.net>\n";
        let found = header_words(block);
        let words: Vec<&[u8]> = found.iter().map(Vec::as_slice).collect();
        assert_eq!(
            words,
            [
                &b"ann"[..],
                b"example",
                b"invoice",
                b"jo",
                b"m\xc3\xbcller",
                b"net",
                b"org",
                b"q3"
            ]
        );
        let many: String = (0..MAX_HEADER_WORDS + 10)
            .map(|i| format!("w{i} "))
            .collect();
        assert_eq!(
            header_words(&format!("to: {many}\n")).len(),
            MAX_HEADER_WORDS
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
    fn lists_read_back_and_survive_damage() {
        let l = encode_postings(&[1, 2, 300, 70_000]);
        assert_eq!(decode_postings(&l), [1, 2, 300, 70_000]);
        assert_eq!(decode_postings(&[0x81]), Vec::<u32>::new());
        assert_eq!(decode_postings(&[0xff; 9]), Vec::<u32>::new());
        assert_eq!(decode_postings(&encode_postings(&[u32::MAX])), [u32::MAX]);
    }

    #[test]
    fn keys_split_back_into_word_and_first_uid() {
        let prefix = word_prefix(7, WordKind::Body, b"week");
        let k = chunk_key(&prefix, 300);
        assert_eq!(split_key(&k, 5), Some((&b"week"[..], 300)));
        assert_eq!(split_key(&k[..6], 5), None);
        // a word's chunks sort before a longer word's
        let longer = chunk_key(&word_prefix(7, WordKind::Body, b"weeks"), 0);
        assert!(chunk_key(&prefix, u32::MAX) < longer);
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
