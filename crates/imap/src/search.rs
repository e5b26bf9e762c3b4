//! SEARCH evaluation over index data (RFC 3501 §6.4.4, RFC 9051 §6.4.4,
//! RFC 5032 WITHIN, RFC 5182 SEARCHRES, RFC 7162 §3.1.5 MODSEQ) and the
//! shaping of its answers (RFC 4731 ESEARCH, classic `* SEARCH`).
//!
//! Pure and synchronous: the session decides with [`needs`] what to load
//! for each message (flags and sizes always; the cached record for
//! hot-header and Date: keys; the root header block for other HEADER
//! fields; the message file for BODY/TEXT), builds a [`Candidate`] and asks
//! [`matches`]. CHARSET is the session's job (US-ASCII and UTF-8 only,
//! otherwise `NO [BADCHARSET]`); key strings arrive here as UTF-8 bytes.
//!
//! Text rules (RFC 3501: "case-insensitive substring"; like Dovecot, on
//! decoded, normalised text): header values are unfolded, RFC 2047 encoded
//! words decoded (UTF-8, US-ASCII, ISO-8859-1, ISO-8859-15, Windows-1252,
//! UTF-7; other charsets are read as UTF-8 with invalid bytes replaced), then
//! both sides are lower-cased with Unicode simple lowercase
//! (`char::to_lowercase`) and compared as substrings. FROM/TO/CC/BCC see the
//! addresses as ENVELOPE parses them, written out with display names;
//! SUBJECT sees its white space compressed (both as Dovecot does). Bodies: text parts,
//! base64 and quoted-printable decoded, as the store's [`UserStore::message_text`] gives
//! them. The text rules live in maildex-text ([`maildex_store::text`]), shared with
//! full-text indexing.
//!
//! [`UserStore::message_text`]: maildex_store::UserStore::message_text
//!
//! Date rules: BEFORE/ON/SINCE compare the calendar day of INTERNALDATE as
//! seen in the server's zone ([`Context::tz_offset_secs`]); SENTBEFORE/
//! SENTON/SENTSINCE compare the calendar day written in the Date: header
//! (its own zone, i.e. time and zone disregarded as RFC 3501 asks), which is
//! what Dovecot does (`search_arg_match_cached`, `sent_time += tz*60`).

mod date;
mod response;

#[cfg(test)]
mod prop_tests;
#[cfg(test)]
mod tests;

use maildex_imap_proto::{Date, SearchKey, SequenceSet};
use maildex_store::records::{flag, Cached, MessageState, HOT_HEADERS};
use maildex_store::text::{self, MessageText, SearchText};

pub use response::{esearch, save_result, search};

/// One message as SEARCH sees it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// Message sequence number in the session's view.
    pub seq: u32,
    /// UID.
    pub uid: u32,
    /// Flags, keywords, dates, sizes.
    pub state: &'a MessageState,
    /// The cached record; the session loads it when [`Needs::cached`].
    pub cached: Option<&'a Cached>,
    /// The root header block, raw as in the file (LF or CRLF); the session
    /// loads it when [`Needs::headers`].
    pub headers: Option<&'a [u8]>,
    /// `\Recent` in this session (RFC 3501 §2.3.2).
    pub recent: bool,
}

/// The mailbox as SEARCH sees it.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// Number of messages in the view: the value of `*` in sequence sets.
    pub max_seq: u32,
    /// Largest UID in the view: the value of `*` in UID sets (RFC 3501
    /// §6.4.8). With an empty mailbox there is no candidate at all.
    pub max_uid: u32,
    /// The mailbox keyword table: bit i of [`MessageState::keywords`] is
    /// `keywords[i]`.
    pub keywords: &'a [String],
    /// The SEARCHRES result `$` as UIDs (RFC 5182 §2.1); `None` when no
    /// result was saved (then `$` matches nothing, RFC 5182 §2.1).
    pub saved: Option<&'a [u32]>,
    /// Now, in seconds since the epoch, for OLDER/YOUNGER (RFC 5032).
    pub now: i64,
    /// The server's offset from UTC in seconds: BEFORE/ON/SINCE take the
    /// calendar day of INTERNALDATE in this zone (RFC 3501 §6.4.4 "disregarding
    /// time and timezone"; Dovecot uses the server's local zone the same way).
    pub tz_offset_secs: i32,
}

/// What data a search needs per message, beyond [`MessageState`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// [`Candidate::cached`]: hot header fields (FROM, SUBJECT, Date: for
    /// SENT*, HEADER of a hot field).
    pub cached: bool,
    /// [`Candidate::headers`]: HEADER of a field outside [`HOT_HEADERS`].
    pub headers: bool,
    /// The message file, through the `body` callback of [`matches`]
    /// (BODY, TEXT).
    pub body: bool,
}

impl Needs {
    fn add(&mut self, other: Needs) {
        self.cached |= other.cached;
        self.headers |= other.headers;
        self.body |= other.body;
    }
}

/// True when `name` is one of the header fields kept in
/// [`Cached::hot_headers`].
fn is_hot(name: &[u8]) -> bool {
    HOT_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// What data `keys` (and every key nested in them) require.
pub fn needs(keys: &[SearchKey]) -> Needs {
    let mut n = Needs::default();
    for k in keys {
        n.add(key_needs(k));
    }
    n
}

fn key_needs(key: &SearchKey) -> Needs {
    use SearchKey as K;
    let mut n = Needs::default();
    match key {
        K::Bcc(_)
        | K::Cc(_)
        | K::From(_)
        | K::To(_)
        | K::Subject(_)
        | K::SentBefore(_)
        | K::SentOn(_)
        | K::SentSince(_) => n.cached = true,
        K::Header(name, _) => {
            if is_hot(name) {
                n.cached = true;
            } else {
                n.headers = true;
            }
        }
        K::Body(_) | K::Text(_) => n.body = true,
        K::Not(k) => n = key_needs(k),
        K::Or(a, b) => {
            n = key_needs(a);
            n.add(key_needs(b));
        }
        K::And(ks) => n = needs(ks),
        _ => {}
    }
    n
}

/// Evaluates the AND of `keys` for one message (RFC 3501 §6.4.4: "multiple
/// search keys ... are the intersection (AND function)").
///
/// `body` returns the message's decoded text ([`UserStore::message_text`]) for
/// BODY/TEXT keys; it is called lazily, at most once, and only when such a key
/// is reached. `None` (file gone) makes those keys fail.
///
/// [`UserStore::message_text`]: maildex_store::UserStore::message_text
pub fn matches(
    keys: &[SearchKey],
    c: &Candidate,
    ctx: &Context,
    body: &mut dyn FnMut() -> Option<MessageText>,
) -> bool {
    let mut ev = Eval {
        c,
        ctx,
        body,
        text: None,
    };
    keys.iter().all(|k| ev.key(k))
}

/// One evaluation: the message, the mailbox and the lazily built body text.
struct Eval<'e, 'a> {
    c: &'e Candidate<'a>,
    ctx: &'e Context<'a>,
    body: &'e mut dyn FnMut() -> Option<MessageText>,
    /// The message text, once asked for (`Some(None)`: unavailable).
    text: Option<Option<SearchText>>,
}

impl Eval<'_, '_> {
    fn flag(&self, bit: u8) -> bool {
        self.c.state.flags & bit != 0
    }

    fn key(&mut self, key: &SearchKey) -> bool {
        use SearchKey as K;
        let st = self.c.state;
        match key {
            K::All => true,
            K::Answered => self.flag(flag::ANSWERED),
            K::Deleted => self.flag(flag::DELETED),
            K::Draft => self.flag(flag::DRAFT),
            K::Flagged => self.flag(flag::FLAGGED),
            K::Seen => self.flag(flag::SEEN),
            K::Unanswered => !self.flag(flag::ANSWERED),
            K::Undeleted => !self.flag(flag::DELETED),
            K::Undraft => !self.flag(flag::DRAFT),
            K::Unflagged => !self.flag(flag::FLAGGED),
            K::Unseen => !self.flag(flag::SEEN),
            K::Recent => self.c.recent,
            // RFC 3501 §6.4.4: NEW is "(RECENT UNSEEN)", OLD is "NOT RECENT".
            K::New => self.c.recent && !self.flag(flag::SEEN),
            K::Old => !self.c.recent,
            K::Keyword(kw) => self.has_keyword(kw),
            K::Unkeyword(kw) => !self.has_keyword(kw),
            // RFC 3501 §6.4.4: sizes are RFC822.SIZE; strictly larger/smaller.
            K::Larger(n) => st.vsize > u64::from(*n),
            K::Smaller(n) => st.vsize < u64::from(*n),
            K::Before(d) => self.internal_day() < d.days_since_epoch(),
            K::On(d) => self.internal_day() == d.days_since_epoch(),
            K::Since(d) => self.internal_day() >= d.days_since_epoch(),
            K::SentBefore(d) => self.sent_day() < d.days_since_epoch(),
            K::SentOn(d) => self.sent_day() == d.days_since_epoch(),
            K::SentSince(d) => self.sent_day() >= d.days_since_epoch(),
            // RFC 5032 §3: OLDER n: internal date at least n seconds before
            // now; YOUNGER n: at most n seconds before now (Dovecot turns
            // them into BEFORE now-n+1 / SINCE now-n on exact times).
            K::Older(n) => st.internal_date <= self.ctx.now - i64::from(*n),
            K::Younger(n) => st.internal_date >= self.ctx.now - i64::from(*n),
            // RFC 7162 §3.1.5: modseq at or above the value.
            K::ModSeq(n) => st.modseq >= *n,
            K::Uid(set) => self.in_set(set, self.c.uid, self.ctx.max_uid),
            K::SequenceSet(set) => self.in_set(set, self.c.seq, self.ctx.max_seq),
            K::From(s) => self.address(b"from", s),
            K::To(s) => self.address(b"to", s),
            K::Cc(s) => self.address(b"cc", s),
            K::Bcc(s) => self.address(b"bcc", s),
            K::Subject(s) => self.field_matches(b"subject", s, text::compress_lwsp),
            K::Header(name, s) => self.header(name, s),
            K::Body(s) => self.body_text(s, false),
            K::Text(s) => self.body_text(s, true),
            K::Not(k) => !self.key(k),
            K::Or(a, b) => self.key(a) || self.key(b),
            K::And(ks) => ks.iter().all(|k| self.key(k)),
        }
    }

    /// KEYWORD through the mailbox table; a keyword the table does not know
    /// is set on no message (so UNKEYWORD matches every message). Keywords
    /// compare case-insensitively, as Dovecot's keyword table does.
    fn has_keyword(&self, kw: &str) -> bool {
        self.ctx
            .keywords
            .iter()
            .position(|k| k.eq_ignore_ascii_case(kw))
            .and_then(|i| u32::try_from(i).ok())
            .and_then(|i| 1u32.checked_shl(i))
            .is_some_and(|bit| self.c.state.keywords & bit != 0)
    }

    /// A sequence or UID set, `*` being `largest` (RFC 3501 §6.4.8); `$` is
    /// the saved result, which holds UIDs (RFC 5182 §2.1), for both kinds.
    fn in_set(&self, set: &SequenceSet, n: u32, largest: u32) -> bool {
        match set {
            SequenceSet::Saved => self.ctx.saved.is_some_and(|s| s.contains(&self.c.uid)),
            SequenceSet::Ranges(_) => set.contains(n, largest),
        }
    }

    /// Calendar day of INTERNALDATE in the server's zone.
    fn internal_day(&self) -> i64 {
        (self.c.state.internal_date + i64::from(self.ctx.tz_offset_secs)).div_euclid(86_400)
    }

    /// Calendar day written in the first Date: header. Without a parsable
    /// one, Dovecot takes the sent date as 0 (1970-01-01, `index_mail_get_date`
    /// "0 = not found / invalid") and SEARCH compares that: SENTBEFORE
    /// matches, SENTSINCE (after 1970) and SENTON do not. We do the same.
    fn sent_day(&self) -> i64 {
        self.hot_block()
            .and_then(|block| text::field_values(block, b"date").into_iter().next())
            .and_then(|v| date::parse_rfc5322(&v))
            .map_or(0, |d: Date| d.days_since_epoch())
    }

    fn hot_block(&self) -> Option<&[u8]> {
        match self.c.cached {
            Some(c) => Some(&c.hot_headers),
            None => self.c.headers,
        }
    }

    /// HEADER (and SUBJECT, with its white space compressed): a
    /// case-insensitive substring of some occurrence of the field, unfolded
    /// and decoded; an empty string only asks for the field to exist
    /// (Dovecot `search_header_arg`).
    fn header(&self, name: &[u8], needle: &[u8]) -> bool {
        self.field_matches(name, needle, |v| v.to_vec())
    }

    /// FROM/TO/CC/BCC (RFC 3501 §6.4.4): matched against the addresses as
    /// ENVELOPE reads them, written out with their display names
    /// ([`text::address_text`]), as Dovecot does: comments and
    /// folding inside an address do not hide it. From the hot header fields of
    /// the index, never the message file.
    fn address(&self, name: &[u8], needle: &[u8]) -> bool {
        self.field_matches(name, needle, text::address_text)
    }

    /// Whether some occurrence of field `name`, turned into text by `render`,
    /// then RFC 2047-decoded and lower-cased, holds `needle`.
    fn field_matches(&self, name: &[u8], needle: &[u8], render: impl Fn(&[u8]) -> Vec<u8>) -> bool {
        let block = if is_hot(name) {
            self.hot_block()
        } else {
            self.c.headers
        };
        let Some(block) = block else {
            return false;
        };
        let values = text::field_values(block, name);
        if needle.is_empty() {
            return !values.is_empty();
        }
        let needle = text::normalize(&String::from_utf8_lossy(needle));
        values.iter().any(|v| {
            let decoded = text::decode_header(&render(v));
            text::normalize(&decoded).contains(&needle)
        })
    }

    /// BODY (text parts) or TEXT (text parts and every header block).
    fn body_text(&mut self, needle: &[u8], with_headers: bool) -> bool {
        if self.text.is_none() {
            let t = (self.body)().map(SearchText::new);
            self.text = Some(t);
        }
        let Some(Some(t)) = &self.text else {
            return false;
        };
        if needle.is_empty() {
            return true;
        }
        let needle = text::normalize(&String::from_utf8_lossy(needle));
        if with_headers {
            t.text_contains(&needle)
        } else {
            t.body_contains(&needle)
        }
    }
}
