//! The on-disk schema: database names, key encodings and the records stored in them.
//!
//! docs/INDEX-FORMAT.md describes the same layout for people; keep the two in step and bump
//! [`SCHEMA_VERSION`] whenever an encoding changes (rebuild is the migration path).

use serde::{Deserialize, Serialize};

use crate::{IndexError, MailboxId, ModSeq, Uid};

/// Version of the layout below, stored under [`META_SCHEMA`] in the `meta` database.
pub const SCHEMA_VERSION: u32 = 13;

/// `meta`: string keys to small values (schema version, id counters).
pub const DB_META: &str = "meta";
/// `mailbox-names`: IMAP mailbox name (UTF-8) to mailbox id (u32 big-endian).
pub const DB_MAILBOX_NAMES: &str = "mailbox-names";
/// `mailboxes`: mailbox id (u32 big-endian) to a postcard [`MailboxRecord`].
pub const DB_MAILBOXES: &str = "mailboxes";
/// `messages`: [`msg_key`] to a postcard [`MessageState`] (what changes: flags, name, modseq).
pub const DB_MESSAGES: &str = "messages";
/// `flags`: segments of each message's flags, keywords, modseq, RFC822.SIZE and
/// INTERNALDATE, repeated from its [`MessageState`] in the same transaction
/// ([`crate::flag_column`]): what SEARCH's keys on the state and SELECT's first unseen
/// message walk.
pub const DB_FLAGS: &str = "flags";
/// `cache-hot`: segments (see [`crate::segment`]) of [`Cached::hot_headers`], raw. The
/// three `cache-*` databases are the columns of [`Cached`]: what a listing fetches,
/// immutable once written, kept apart so that a listing decompresses only what it sends.
pub const DB_CACHE_HOT: &str = "cache-hot";
/// `cache-envelope`: segments of [`Cached::envelope`], raw.
pub const DB_CACHE_ENVELOPE: &str = "cache-envelope";
/// `cache-structure`: segments of postcard [`Structure`] records (BODY, BODYSTRUCTURE, parts).
pub const DB_CACHE_STRUCTURE: &str = "cache-structure";
/// `cache-sort`: segments of postcard [`SortKeys`] records (what SORT and THREAD compare).
pub const DB_CACHE_SORT: &str = "cache-sort";
/// `cache-search`: segments of postcard [`SearchFields`]: what SEARCH FROM/TO/CC/BCC/
/// SUBJECT and SENT* compare, decoded and normalised at indexing time.
pub const DB_CACHE_SEARCH: &str = "cache-search";
/// `fts-text`: segments (see [`crate::segment`]) of postcard [`crate::TextRecord`]s (what
/// SEARCH BODY and TEXT compare).
pub const DB_FTS_TEXT: &str = "fts-text";
/// `fts-sig`: [`msg_key`] to the candidate signature of the message's text
/// ([`crate::signature`]), one per message.
pub const DB_FTS_SIG: &str = "fts-sig";
/// `fts-words`: (mailbox id u32 big-endian, kind byte, word) to the UIDs of the messages
/// holding the word, delta varints ([`crate::words`]).
pub const DB_FTS_WORDS: &str = "fts-words";
/// `headers`: segments of the raw header blocks of each message (see
/// [`MessageRecord::parts`] for how to find each part's header inside them).
pub const DB_HEADERS: &str = "headers";
/// `changes`: [`crate::changes::change_key`] (mailbox, modseq) to the UID (u32 big-endian)
/// whose last change has that modseq: one entry per indexed message (the change log).
pub const DB_CHANGES: &str = "changes";
/// `expunged`: [`crate::changes::change_key`] (mailbox, modseq of the expunge) to the
/// expunged UID (u32 big-endian): the tombstones.
pub const DB_EXPUNGED: &str = "expunged";

/// `meta` key holding [`SCHEMA_VERSION`] as u32 big-endian.
pub const META_SCHEMA: &str = "schema-version";
/// `meta` key holding the next mailbox id to hand out, u32 big-endian.
pub const META_NEXT_MAILBOX_ID: &str = "next-mailbox-id";

/// Key of a message: mailbox id then UID, both big-endian, so that a range scan over one
/// mailbox runs in UID order.
pub fn msg_key(mailbox: MailboxId, uid: Uid) -> [u8; 8] {
    raw_msg_key(mailbox.get(), uid.get())
}

/// [`msg_key`] of bare numbers, for the segment and column code's own loops.
pub(crate) fn raw_msg_key(mailbox: u32, uid: u32) -> [u8; 8] {
    let mut k = [0u8; 8];
    k[..4].copy_from_slice(&mailbox.to_be_bytes());
    k[4..].copy_from_slice(&uid.to_be_bytes());
    k
}

/// Splits a [`msg_key`] back into (mailbox id, uid).
pub fn split_msg_key(key: &[u8]) -> Option<(MailboxId, Uid)> {
    raw_split_msg_key(key).map(|(m, u)| (MailboxId(m), Uid(u)))
}

/// [`split_msg_key`] to bare numbers (see [`raw_msg_key`]).
pub(crate) fn raw_split_msg_key(key: &[u8]) -> Option<(u32, u32)> {
    let k: [u8; 8] = key.try_into().ok()?;
    let mbox = u32::from_be_bytes([k[0], k[1], k[2], k[3]]);
    let uid = u32::from_be_bytes([k[4], k[5], k[6], k[7]]);
    Some((mbox, uid))
}

/// System flags as stored in [`MessageRecord::flags`] (one bit each).
pub mod flag {
    /// `\Seen` (Maildir `S`).
    pub const SEEN: u8 = 1 << 0;
    /// `\Answered` (Maildir `R`).
    pub const ANSWERED: u8 = 1 << 1;
    /// `\Flagged` (Maildir `F`).
    pub const FLAGGED: u8 = 1 << 2;
    /// `\Deleted` (Maildir `T`).
    pub const DELETED: u8 = 1 << 3;
    /// `\Draft` (Maildir `D`).
    pub const DRAFT: u8 = 1 << 4;
    /// Maildir `P` (passed/forwarded); kept so a rename never drops it.
    pub const PASSED: u8 = 1 << 5;
}

/// Per-mailbox counters kept exact on every change, so STATUS never scans.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Counts {
    /// Messages in the mailbox.
    pub messages: u32,
    /// Messages without `\Seen`.
    pub unseen: u32,
    /// Messages with a UID at or above [`MailboxRecord::first_recent_uid`].
    pub recent: u32,
    /// Messages with `\Deleted`.
    pub deleted: u32,
    /// Sum of the messages' RFC822.SIZE (STATUS SIZE, RFC 8438).
    pub vsize: u64,
}

impl Counts {
    /// Counts message `uid` in (the one rule for what each counter means).
    pub fn add(&mut self, uid: Uid, msg: &MessageState, first_recent_uid: Uid) {
        self.messages += 1;
        self.unseen += u32::from(msg.is_unseen());
        self.deleted += u32::from(msg.is_deleted());
        self.recent += u32::from(uid >= first_recent_uid);
        self.vsize += msg.vsize;
    }

    /// Counts message `uid` out again.
    pub fn remove(&mut self, uid: Uid, msg: &MessageState, first_recent_uid: Uid) {
        self.messages = self.messages.saturating_sub(1);
        self.unseen = self.unseen.saturating_sub(u32::from(msg.is_unseen()));
        self.deleted = self.deleted.saturating_sub(u32::from(msg.is_deleted()));
        self.recent = self
            .recent
            .saturating_sub(u32::from(uid >= first_recent_uid));
        self.vsize = self.vsize.saturating_sub(msg.vsize);
    }
}

/// A directory or file stamp: when it last changed, and which inode it is.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    /// Modification time in nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Inode number (a replaced directory or file gets a new one).
    pub ino: u64,
    /// Size in bytes (files only; 0 for directories).
    pub size: u64,
}

/// One mailbox's header record (`mailboxes` database).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct MailboxRecord {
    /// IMAP name, UTF-8, `.` as separator (`INBOX` for the Maildir root).
    pub name: String,
    /// UIDVALIDITY, mirrored from dovecot-uidlist (the authority).
    pub uidvalidity: u32,
    /// Next UID to assign, mirrored from dovecot-uidlist.
    pub uid_next: Uid,
    /// Highest modseq given to any change in this mailbox (RFC 7162).
    pub highest_modseq: ModSeq,
    /// Messages with a UID at or above this are `\Recent` for the next session that claims them.
    pub first_recent_uid: Uid,
    /// Exact counters.
    pub counts: Counts,
    /// Stamp of `new/` when the index last matched it.
    pub new_stamp: Stamp,
    /// Stamp of `cur/` when the index last matched it.
    pub cur_stamp: Stamp,
    /// Stamp of `dovecot-uidlist` when the index last matched it.
    pub uidlist_stamp: Stamp,
    /// Keyword names by dovecot-keywords letter index (`a` = 0); mirror of that file.
    pub keywords: Vec<String>,
    /// The expunge tombstones (`expunged` database) hold every expunge with a modseq above
    /// this: the modseq at which the record was made or its messages cleared, raised when
    /// old tombstones are dropped ([`crate::changes::MAX_TOMBSTONES`]).
    pub expunge_floor: ModSeq,
    /// Tombstones of this mailbox in the `expunged` database.
    pub tombstones: u32,
    /// Header fields (lower-case names, at most [`MAX_LEARNED`]) whose values every message
    /// indexed into this mailbox gets in [`SearchFields::learned`], as Dovecot's cache
    /// decides to keep a field a client searched (see `maildex_store`'s `learned`).
    pub learned_headers: Vec<String>,
}

/// How many header fields a mailbox learns at most ([`MailboxRecord::learned_headers`]).
pub const MAX_LEARNED: usize = 8;

/// One MIME part's position in the file (offsets) and its CRLF sizes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct PartRecord {
    /// Offset of the part's header block in the file.
    pub header_start: u64,
    /// Offset of the part's body (just past the blank line).
    pub body_start: u64,
    /// Offset just past the part's body.
    pub end: u64,
    /// Header block size with CRLF line ends (BODY[n.MIME] / BODY[HEADER] size).
    pub header_vsize: u64,
    /// Body size with CRLF line ends.
    pub body_vsize: u64,
    /// Body lines.
    pub lines: u32,
    /// What is inside.
    pub kind: PartKindRecord,
}

/// Shape of a part.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub enum PartKindRecord {
    /// A leaf part.
    #[default]
    Single,
    /// A multipart with its children in order.
    Multipart(Vec<PartRecord>),
    /// A message/rfc822 part with the root part of the enclosed message.
    Message(Box<PartRecord>),
}

impl PartRecord {
    /// Visits this part and every part below it in pre-order (the order in which their
    /// header blocks are stored in the `headers` database).
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a PartRecord)) {
        f(self);
        match &self.kind {
            PartKindRecord::Single => {}
            PartKindRecord::Multipart(children) => children.iter().for_each(|c| c.walk(f)),
            PartKindRecord::Message(inner) => inner.walk(f),
        }
    }
}

/// Section numbers (RFC 3501 §6.4.5) are resolved over the stored tree by
/// [`maildex_mime::find_section`], the lookup the parsed tree uses too.
impl maildex_mime::PartTree for PartRecord {
    fn shape(&self) -> maildex_mime::PartShape<'_, PartRecord> {
        match &self.kind {
            PartKindRecord::Single => maildex_mime::PartShape::Single,
            PartKindRecord::Multipart(children) => maildex_mime::PartShape::Multipart(children),
            PartKindRecord::Message(inner) => maildex_mime::PartShape::Message(inner),
        }
    }
}

/// What changes about a message (`messages` database): small, rewritten in place by flag
/// changes, and all that sync and check read.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct MessageState {
    /// Current file name (with its `:2,` info), in `new/` or `cur/`.
    pub file_name: String,
    /// True while the file sits in `new/`.
    pub in_new: bool,
    /// System flags, bits from [`flag`].
    pub flags: u8,
    /// Keywords: bit i = dovecot-keywords letter `a`+i.
    pub keywords: u32,
    /// Modseq of the last change to this message (RFC 7162).
    pub modseq: ModSeq,
    /// INTERNALDATE, seconds since the epoch (the file's mtime, as Dovecot keeps it).
    pub internal_date: i64,
    /// When this message was saved into the mailbox, seconds since the epoch.
    pub save_date: i64,
    /// Physical size of the file.
    pub size: u64,
    /// RFC822.SIZE: size with CRLF line ends.
    pub vsize: u64,
}

/// A stored [`MessageState`] decoded without its file name, with nothing allocated: what
/// the migration to schema 13 reads of every message to refill the flags column
/// (`migrate.rs`). Fields in [`MessageState`]'s order.
#[derive(Deserialize)]
pub(crate) struct NamelessState<'a> {
    #[serde(borrow)]
    _file_name: &'a [u8],
    in_new: bool,
    flags: u8,
    keywords: u32,
    modseq: ModSeq,
    internal_date: i64,
    save_date: i64,
    size: u64,
    vsize: u64,
}

/// The first two fields of a stored [`MessageState`], borrowed (postcard leaves the rest
/// alone): what a sync compares with a listing.
#[derive(Deserialize)]
pub(crate) struct FileNameView<'a> {
    pub(crate) file_name: &'a str,
    pub(crate) in_new: bool,
}

impl From<NamelessState<'_>> for MessageState {
    fn from(s: NamelessState<'_>) -> MessageState {
        MessageState {
            file_name: String::new(),
            in_new: s.in_new,
            flags: s.flags,
            keywords: s.keywords,
            modseq: s.modseq,
            internal_date: s.internal_date,
            save_date: s.save_date,
            size: s.size,
            vsize: s.vsize,
        }
    }
}

impl MessageState {
    /// True when the message lacks `\Seen`.
    pub fn is_unseen(&self) -> bool {
        self.flags & flag::SEEN == 0
    }
    /// True when the message has `\Deleted`.
    pub fn is_deleted(&self) -> bool {
        self.flags & flag::DELETED != 0
    }
}

/// What a listing fetches and never changes, stored as three columns (the `cache-*`
/// databases, in segments; see [`crate::columns`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cached {
    /// The header fields clients list ([`crate::HOT_HEADERS`]), raw, CRLF, in file order,
    /// then the empty line. A hot field absent here is absent from the message.
    pub hot_headers: Vec<u8>,
    /// ENVELOPE, rendered in IMAP syntax.
    pub envelope: Vec<u8>,
    /// BODY (non-extensible BODYSTRUCTURE), rendered in IMAP syntax.
    pub body: Vec<u8>,
    /// BODYSTRUCTURE, rendered in IMAP syntax.
    pub body_structure: Vec<u8>,
    /// The MIME part tree with file offsets.
    pub parts: PartRecord,
    /// What SORT and THREAD compare, computed when the message is indexed.
    pub sort: SortKeys,
    /// What SEARCH's header criteria compare (the `cache-search` column).
    pub search: SearchFields,
    /// What SEARCH BODY and TEXT compare: a [`crate::TextRecord`], encoded (the `fts-text`
    /// column), kept encoded so COPY copies it without decoding.
    pub text: Vec<u8>,
    /// The candidate signature of that text ([`crate::signature`], the `fts-sig` column).
    pub text_sig: Vec<u8>,
}

/// The sort and thread keys of a message (RFC 5256, RFC 5957), computed once when it is
/// indexed (by the store, through `maildex_text::sort_keys`) so that SORT and THREAD read
/// no message file and parse no header. Strings are already in the form they are compared
/// in: RFC 2047 decoded and mapped by i;unicode-casemap (RFC 5051), as Dovecot 2.3 does.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct SortKeys {
    /// The first Date: field in seconds since the epoch (UTC); `None` when it is missing
    /// or unparsable (SORT DATE then uses INTERNALDATE, RFC 5256 §3).
    pub sent_date: Option<i64>,
    /// The base subject (RFC 5256 §2.1).
    pub subject: String,
    /// The subject had a reply or forward marker (RFC 5256 §2.1, THREAD REFERENCES §4).
    pub reply_or_forward: bool,
    /// addr-mailbox of the first From address (SORT FROM).
    pub from: String,
    /// addr-mailbox of the first To address (SORT TO).
    pub to: String,
    /// addr-mailbox of the first Cc address (SORT CC).
    pub cc: String,
    /// Display name of the first From address, else its addr-spec (RFC 5957 DISPLAYFROM).
    pub display_from: String,
    /// Display name of the first To address, else its addr-spec (RFC 5957 DISPLAYTO).
    pub display_to: String,
    /// The Message-ID's msg-id without its angle brackets (THREAD).
    pub message_id: Option<String>,
    /// The References msg-ids in order, or In-Reply-To's first one when References has
    /// none (THREAD REFERENCES, RFC 5256 §4 step 1).
    pub references: Vec<String>,
}

/// What SEARCH FROM, TO, CC, BCC, SUBJECT and SENTBEFORE/ON/SINCE compare (RFC 3501
/// §6.4.4), computed once when the message is indexed (by the store, through maildex-text)
/// so that a SEARCH neither decompresses header blocks nor decodes RFC 2047 words per
/// message. One string per occurrence of the field (a substring never spans two), each
/// unfolded, RFC 2047-decoded and lower-cased as maildex-text's `normalize` does: the
/// addresses as ENVELOPE reads them with their display names (`address_text`), the
/// subject with its white space compressed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchFields {
    /// Calendar day of the first Date: field as written (in the sender's zone), in days
    /// since 1970-01-01; 0 (1970-01-01) without a readable one, as Dovecot takes it.
    pub sent_day: i64,
    /// The From: fields.
    pub from: Vec<String>,
    /// The To: fields.
    pub to: Vec<String>,
    /// The Cc: fields.
    pub cc: Vec<String>,
    /// The Bcc: fields.
    pub bcc: Vec<String>,
    /// The Subject: fields.
    pub subject: Vec<String>,
    /// For each field of [`SEARCH_HEADERS`] in order, its occurrences as HEADER compares
    /// them (unfolded, RFC 2047-decoded, lower-cased; nothing else rendered).
    pub headers: Vec<Vec<String>>,
    /// Fields the mailbox learned ([`MailboxRecord::learned_headers`]) when this record
    /// was written or filled: (lower-case name, occurrences as in `headers`). A field not
    /// listed here is unknown to this record, not absent from the message.
    pub learned: Vec<(String, Vec<String>)>,
}

/// Header fields whose HEADER criterion is answered from [`SearchFields::headers`] (a
/// lookup by Message-ID, a mailing-list filter) rather than from the hot header fields;
/// short values, about a tenth of the hot header bytes. Changing the list changes what a
/// record means: bump the schema version.
pub const SEARCH_HEADERS: &[&[u8]] = &[b"message-id", b"in-reply-to", b"list-id"];

impl SearchFields {
    /// The stored encoding (postcard), what [`SearchView::parse`] reads.
    pub fn encode(&self) -> Result<Vec<u8>, IndexError> {
        encode(self)
    }
}

/// The field lists of [`SearchFields`], in their stored order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchField {
    /// [`SearchFields::from`].
    From = 0,
    /// [`SearchFields::to`].
    To = 1,
    /// [`SearchFields::cc`].
    Cc = 2,
    /// [`SearchFields::bcc`].
    Bcc = 3,
    /// [`SearchFields::subject`].
    Subject = 4,
}

/// A stored [`SearchFields`] read in place, without allocating: SEARCH reads one per
/// message of the mailbox, and decoding them into strings cost more than the matching.
///
/// Read lazily: [`SearchView::parse`] reads the sent day only, and each accessor walks
/// the lists before the one it asks for. Locating every list up front was a quarter of
/// a `SEARCH CC` on 30,000 messages (`perf record`), where the criterion reads three.
/// An accessor answers `None` when the record is unreadable up to the end of its list.
#[derive(Clone, Copy, Debug)]
pub struct SearchView<'a> {
    bytes: &'a [u8],
    sent_day: i64,
    /// Where the first field list (`from`) starts: after the sent day.
    lists_at: usize,
}

/// Moves `at` past the list of strings (count, then each length and bytes) at
/// `bytes[*at..]`; `None` when it runs past the end.
fn list_end(bytes: &[u8], at: &mut usize) -> Option<()> {
    let n = varint(bytes, at)?;
    for _ in 0..n {
        let len = usize::try_from(varint(bytes, at)?).ok()?;
        *at = at.checked_add(len).filter(|&e| e <= bytes.len())?;
    }
    Some(())
}

/// The LEB128 varint at `bytes[*at..]`, moving `at` past it.
pub(crate) fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Appends `n` as a LEB128 varint (what [`varint`] reads).
pub(crate) fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// The address and subject lists before [`SearchFields::headers`].
const FIELD_LISTS: usize = 5;

impl<'a> SearchView<'a> {
    /// Reads the sent day of the postcard encoding of a [`SearchFields`]; `None` when
    /// the bytes do not start with one. The lists are read when asked for.
    pub fn parse(bytes: &'a [u8]) -> Option<SearchView<'a>> {
        let mut at = 0;
        let z = varint(bytes, &mut at)?;
        // zigzag (postcard's signed integers)
        let sent_day = (z >> 1) as i64 ^ -((z & 1) as i64);
        Some(SearchView {
            bytes,
            sent_day,
            lists_at: at,
        })
    }

    /// [`SearchFields::sent_day`].
    pub fn sent_day(&self) -> i64 {
        self.sent_day
    }

    /// The strings of one field list; `None` when the record is unreadable up to it.
    pub fn values(&self, field: SearchField) -> Option<impl Iterator<Item = &'a [u8]> + 'a> {
        let mut at = self.lists_at;
        for _ in 0..field as usize {
            list_end(self.bytes, &mut at)?;
        }
        self.checked_list(at)
    }

    /// The occurrences of header field `name` when it is one of [`SEARCH_HEADERS`] or of
    /// the record's [`SearchFields::learned`] fields (case-insensitive); `None` for another
    /// field (this record cannot tell), or when the record is unreadable up to it.
    pub fn header(&self, name: &[u8]) -> Option<impl Iterator<Item = &'a [u8]> + 'a> {
        let bytes = self.bytes;
        let mut at = self.lists_at;
        for _ in 0..FIELD_LISTS {
            list_end(bytes, &mut at)?;
        }
        // the count of `headers`: one list per SEARCH_HEADERS field
        if varint(bytes, &mut at)? != SEARCH_HEADERS.len() as u64 {
            return None;
        }
        let stored = SEARCH_HEADERS
            .iter()
            .position(|h| h.eq_ignore_ascii_case(name));
        for i in 0..SEARCH_HEADERS.len() {
            if stored == Some(i) {
                return self.checked_list(at);
            }
            list_end(bytes, &mut at)?;
        }
        let n = varint(bytes, &mut at)?;
        for _ in 0..n {
            let len = usize::try_from(varint(bytes, &mut at)?).ok()?;
            let field = bytes.get(at..at.checked_add(len)?)?;
            at += len;
            if field.eq_ignore_ascii_case(name) {
                return self.checked_list(at);
            }
            list_end(bytes, &mut at)?;
        }
        None
    }

    /// The strings of the list whose count is at `bytes[at..]`, once the whole list is
    /// known to lie inside the record.
    fn checked_list(&self, at: usize) -> Option<impl Iterator<Item = &'a [u8]> + 'a> {
        let bytes = self.bytes;
        list_end(bytes, &mut at.clone())?;
        let mut at = at;
        let n = varint(bytes, &mut at)?;
        Some((0..n).map_while(move |_| {
            let len = usize::try_from(varint(bytes, &mut at)?).ok()?;
            let v = bytes.get(at..at.checked_add(len)?)?;
            at += len;
            Some(v)
        }))
    }
}

/// Which fields of a [`SortKeys`] record a SORT or THREAD needs decoded: a set, so that a
/// SORT by SUBJECT allocates the subject of each message and nothing else (the first
/// SORT of a large folder spent most of its time allocating, validating and freeing the
/// eight strings of every record).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SortNeed(u16);

impl SortNeed {
    /// Nothing (ARRIVAL, SIZE: the state has them).
    pub const NOTHING: SortNeed = SortNeed(0);
    /// [`SortKeys::sent_date`] (DATE).
    pub const SENT_DATE: SortNeed = SortNeed(1);
    /// [`SortKeys::subject`].
    pub const SUBJECT: SortNeed = SortNeed(1 << 1);
    /// [`SortKeys::from`].
    pub const FROM: SortNeed = SortNeed(1 << 2);
    /// [`SortKeys::to`].
    pub const TO: SortNeed = SortNeed(1 << 3);
    /// [`SortKeys::cc`].
    pub const CC: SortNeed = SortNeed(1 << 4);
    /// [`SortKeys::display_from`].
    pub const DISPLAY_FROM: SortNeed = SortNeed(1 << 5);
    /// [`SortKeys::display_to`].
    pub const DISPLAY_TO: SortNeed = SortNeed(1 << 6);
    /// Every field (THREAD: the message ids too).
    pub const ALL: SortNeed = SortNeed(u16::MAX);

    /// Both sets.
    pub const fn union(self, other: SortNeed) -> SortNeed {
        SortNeed(self.0 | other.0)
    }

    /// Whether every field of `other` is in this set.
    pub const fn contains(self, other: SortNeed) -> bool {
        self.0 & other.0 == other.0
    }
}

/// The first field of a [`SortKeys`] encoding (postcard leaves the rest alone).
#[derive(Deserialize)]
struct SentDateView {
    sent_date: Option<i64>,
}

/// The [`SortKeys`] fields a SORT compares, borrowed from the encoding (postcard writes a
/// string as its length and bytes, which a byte slice reads in place); the message ids
/// after them are left alone.
#[derive(Deserialize)]
struct SortView<'a> {
    sent_date: Option<i64>,
    subject: &'a [u8],
    reply_or_forward: bool,
    from: &'a [u8],
    to: &'a [u8],
    cc: &'a [u8],
    display_from: &'a [u8],
    display_to: &'a [u8],
}

impl SortKeys {
    /// Decodes what `need` asks for of an encoded record (`what` names it in an error);
    /// the other fields are left empty.
    pub fn decode(
        raw: &[u8],
        need: SortNeed,
        what: &dyn std::fmt::Display,
    ) -> Result<SortKeys, IndexError> {
        if need == SortNeed::NOTHING {
            return Ok(SortKeys::default());
        }
        if need == SortNeed::SENT_DATE {
            let v: SentDateView = decode(raw, what)?;
            return Ok(SortKeys {
                sent_date: v.sent_date,
                ..SortKeys::default()
            });
        }
        let sort_fields = SortNeed(0x7f);
        if !sort_fields.contains(need) {
            return decode(raw, what);
        }
        let v: SortView<'_> = decode(raw, what)?;
        let text = |field: SortNeed, bytes: &[u8]| -> Result<String, IndexError> {
            if !need.contains(field) {
                return Ok(String::new());
            }
            std::str::from_utf8(bytes)
                .map(str::to_owned)
                .map_err(|e| IndexError::Corrupt(format!("{what}: {e}")))
        };
        Ok(SortKeys {
            sent_date: v.sent_date.filter(|_| need.contains(SortNeed::SENT_DATE)),
            subject: text(SortNeed::SUBJECT, v.subject)?,
            reply_or_forward: v.reply_or_forward && need.contains(SortNeed::SUBJECT),
            from: text(SortNeed::FROM, v.from)?,
            to: text(SortNeed::TO, v.to)?,
            cc: text(SortNeed::CC, v.cc)?,
            display_from: text(SortNeed::DISPLAY_FROM, v.display_from)?,
            display_to: text(SortNeed::DISPLAY_TO, v.display_to)?,
            message_id: None,
            references: Vec::new(),
        })
    }
}

/// Which fields of a [`Cached`] record to decode; the others are left empty. A listing
/// that asks for ENVELOPE need not allocate the part tree and three other byte strings of
/// every message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CachedFields {
    /// [`Cached::hot_headers`].
    pub hot_headers: bool,
    /// [`Cached::envelope`].
    pub envelope: bool,
    /// [`Cached::body`].
    pub body: bool,
    /// [`Cached::body_structure`].
    pub body_structure: bool,
    /// [`Cached::parts`].
    pub parts: bool,
    /// [`Cached::sort`].
    pub sort: bool,
    /// [`Cached::search`].
    pub search: bool,
    /// [`Cached::text`] and [`Cached::text_sig`].
    pub text: bool,
}

impl CachedFields {
    /// Every field.
    pub const ALL: CachedFields = CachedFields {
        hot_headers: true,
        envelope: true,
        body: true,
        body_structure: true,
        parts: true,
        sort: true,
        search: true,
        text: true,
    };

    /// Whether any field is wanted.
    pub fn any(self) -> bool {
        self != CachedFields::default()
    }

    /// Both sets' fields.
    pub fn union(self, o: CachedFields) -> CachedFields {
        CachedFields {
            hot_headers: self.hot_headers || o.hot_headers,
            envelope: self.envelope || o.envelope,
            body: self.body || o.body,
            body_structure: self.body_structure || o.body_structure,
            parts: self.parts || o.parts,
            sort: self.sort || o.sort,
            search: self.search || o.search,
            text: self.text || o.text,
        }
    }
}

/// The `cache-structure` column of a [`Cached`] record.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Structure {
    /// [`Cached::body`].
    #[serde(with = "serde_bytes")]
    pub body: Vec<u8>,
    /// [`Cached::body_structure`].
    #[serde(with = "serde_bytes")]
    pub body_structure: Vec<u8>,
    /// [`Cached::parts`].
    pub parts: PartRecord,
}

/// A whole message as the API hands it out: what is stored in `messages` and in `cache`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MessageRecord {
    /// Flags, name, sizes, dates, modseq.
    pub state: MessageState,
    /// What a listing fetches.
    pub cached: Cached,
}

/// Encodes a record with postcard.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, IndexError> {
    postcard::to_stdvec(value).map_err(|e| IndexError::Encode(e.to_string()))
}

/// [`encode`] into a vector made with room for `capacity` bytes first: a segment of
/// sixteen messages' header blocks (about 60 KB) grown from nothing was copied through a
/// dozen reallocations, several percent of a rebuild's CPU (`perf record`, issue 19 #1).
pub fn encode_with_capacity<T: Serialize>(
    value: &T,
    capacity: usize,
) -> Result<Vec<u8>, IndexError> {
    postcard::to_extend(value, Vec::with_capacity(capacity))
        .map_err(|e| IndexError::Encode(e.to_string()))
}

/// Decodes a record with postcard; `what` names the record in the error (formatted only
/// then: a listing decodes thousands of records).
pub fn decode<'a, T: Deserialize<'a>>(
    bytes: &'a [u8],
    what: &dyn std::fmt::Display,
) -> Result<T, IndexError> {
    postcard::from_bytes(bytes).map_err(|e| IndexError::Corrupt(format!("{what}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_mailbox_then_uid() {
        let key = |m, u| msg_key(MailboxId(m), Uid(u));
        let mut keys = [key(2, 1), key(1, 300), key(1, 2), key(1, 256)];
        keys.sort();
        let split: Vec<_> = keys
            .iter()
            .map(|k| split_msg_key(k).map(|(m, u)| (m.get(), u.get())).unwrap())
            .collect();
        assert_eq!(split, vec![(1, 2), (1, 256), (1, 300), (2, 1)]);
    }

    #[test]
    fn split_rejects_wrong_length() {
        assert_eq!(split_msg_key(&[0; 7]), None);
    }

    #[test]
    fn search_views_read_the_stored_fields() {
        let f = SearchFields {
            sent_day: -3,
            from: vec!["a b <a@x>".into(), String::new()],
            to: vec![],
            cc: vec!["c".repeat(300)],
            bcc: vec![],
            subject: vec!["grüße".into()],
            headers: vec![vec!["<id@x>".into()], vec![], vec!["a".into(), "b".into()]],
            learned: vec![
                ("x-mailer".into(), vec!["mutt".into()]),
                ("x-spam".into(), vec![]),
            ],
        };
        let raw = f.encode().unwrap();
        let v = SearchView::parse(&raw).unwrap();
        assert_eq!(v.sent_day(), -3);
        let all = |k| v.values(k).unwrap().map(|s| s.to_vec()).collect::<Vec<_>>();
        assert_eq!(
            all(SearchField::From),
            vec![b"a b <a@x>".to_vec(), Vec::new()]
        );
        assert!(all(SearchField::To).is_empty());
        assert_eq!(all(SearchField::Cc), vec![b"c".repeat(300)]);
        assert_eq!(all(SearchField::Subject), vec!["grüße".as_bytes().to_vec()]);
        let h = |n: &[u8]| {
            v.header(n)
                .map(|i| i.map(|s| s.to_vec()).collect::<Vec<_>>())
        };
        assert_eq!(h(b"Message-ID"), Some(vec![b"<id@x>".to_vec()]));
        assert_eq!(h(b"in-reply-to"), Some(vec![]));
        assert_eq!(h(b"LIST-ID"), Some(vec![b"a".to_vec(), b"b".to_vec()]));
        assert_eq!(h(b"X-Mailer"), Some(vec![b"mutt".to_vec()]));
        assert_eq!(h(b"x-spam"), Some(vec![]));
        assert_eq!(h(b"x-other"), None);
        // a record cut short answers what lies before the cut, and nothing after it
        let cut = SearchView::parse(&raw[..raw.len() - 1]).unwrap();
        assert!(cut.values(SearchField::Subject).is_some());
        assert!(cut.header(b"x-spam").is_none());
        let cut = SearchView::parse(&raw[..raw.len() / 2]).unwrap();
        assert!(cut.values(SearchField::From).is_some());
        assert!(cut.values(SearchField::Subject).is_none());
        assert!(cut.header(b"list-id").is_none());
        assert!(SearchView::parse(&[]).is_none());
    }

    #[test]
    fn corrupt_record_is_an_error_not_a_panic() {
        let err = decode::<MessageState>(&[0xff, 0xff, 0xff], &"message 1/1").unwrap_err();
        assert!(err.to_string().contains("message 1/1"), "{err}");
    }
}
