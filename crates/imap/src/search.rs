//! SEARCH evaluation over index data (RFC 3501 §6.4.4, RFC 9051 §6.4.4,
//! RFC 5032 WITHIN, RFC 5182 SEARCHRES, RFC 7162 §3.1.5 MODSEQ) and the
//! shaping of its answers (RFC 4731 ESEARCH, classic `* SEARCH`).
//!
//! Pure and synchronous. Evaluation runs in stages over what the index holds, cheapest
//! first (issue 18 #1): the session asks [`decide`] with the UID, sequence number and
//! `\Recent` of each message, and its state (flags, keywords, sizes, dates, MODSEQ) when
//! some key reads it; `decide` answers, or says it cannot yet (`None`: a key needs data not
//! loaded). Only for the messages left undecided the session loads the next [`Stage`]
//! that [`needs`] asks for and asks again: the stored search fields (FROM/TO/CC/BCC/
//! SUBJECT, SENT*, HEADER of one of [`SEARCH_HEADERS`]), then the hot header fields
//! (HEADER of another of [`HOT_HEADERS`]), then the header blocks (HEADER of any other field), and last the
//! message text (BODY/TEXT: the normalised text stored when the message was indexed, the
//! largest records). So `FLAGGED HEADER X-Mailer x` decompresses header blocks only for
//! flagged messages, and `SUBJECT x BODY y` decompresses only the text of messages whose
//! subject holds x. No stage opens a message file. The evaluator stays here, beside the
//! grammar it evaluates, because it is a pure function of the keys and of the data the
//! store hands out (`UserStore::load`, `visit_search_fields`, `visit_search_texts`): the
//! store stays the one door to mail. CHARSET is the session's job (US-ASCII and UTF-8 only,
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
//! base64 and quoted-printable decoded, HTML as written, as the store's
//! [`UserStore::visit_search_texts`] gives them. The text rules live in maildex-text
//! ([`maildex_store::text`]), applied once when the message is indexed.
//!
//! [`UserStore::visit_search_texts`]: maildex_store::UserStore::visit_search_texts
//!
//! Date rules: BEFORE/ON/SINCE compare the calendar day of INTERNALDATE as
//! seen in the server's zone ([`Context::tz_offset_secs`]); SENTBEFORE/
//! SENTON/SENTSINCE compare the calendar day written in the Date: header
//! (its own zone, i.e. time and zone disregarded as RFC 3501 asks), which is
//! what Dovecot does (`search_arg_match_cached`, `sent_time += tz*60`). The sent day is
//! computed when the message is indexed ([`maildex_store::records::SearchFields::sent_day`]).

mod response;

#[cfg(test)]
mod prop_tests;
#[cfg(test)]
mod tests;

use maildex_imap_proto::{SearchKey, SequenceSet};
use maildex_store::records::{
    flag, MessageState, SearchField, SearchView, HOT_HEADERS, SEARCH_HEADERS,
};
use maildex_store::text::{self, SearchText};
use maildex_store::{ModSeq, Uid};
use maildex_store::{TextAnswers, TextNeedle};

pub use response::{esearch, save_result, search};
pub(crate) use response::{numbers, wants};

/// One message as SEARCH sees it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// Message sequence number in the session's view.
    pub seq: u32,
    /// UID.
    pub uid: Uid,
    /// Flags, keywords, dates, sizes ([`Stage::State`]); `None` until loaded.
    pub state: Option<&'a MessageState>,
    /// The stored search fields ([`Stage::Search`]), read in place; `None` until loaded.
    pub search: Option<SearchView<'a>>,
    /// The hot header fields ([`Stage::Hot`]); `None` until loaded.
    pub hot: Option<&'a [u8]>,
    /// The header blocks, the root's first, raw as in the file (LF or CRLF)
    /// ([`Stage::Headers`]); `None` until loaded.
    pub headers: Option<&'a [u8]>,
    /// `\Recent` in this session (RFC 3501 §2.3.2).
    pub recent: bool,
}

impl Candidate<'_> {
    /// A message with no stage's data loaded: what decides the keys that need none (ALL,
    /// UID and sequence sets, RECENT).
    pub fn bare(seq: u32, uid: Uid, recent: bool) -> Candidate<'static> {
        Candidate {
            seq,
            uid,
            state: None,
            search: None,
            hot: None,
            headers: None,
            recent,
        }
    }
}

/// The mailbox as SEARCH sees it.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// Number of messages in the view: the value of `*` in sequence sets.
    pub max_seq: u32,
    /// Largest UID in the view: the value of `*` in UID sets (RFC 3501
    /// §6.4.8). With an empty mailbox there is no candidate at all.
    pub max_uid: Uid,
    /// The mailbox keyword table: bit i of [`MessageState::keywords`] is
    /// `keywords[i]`.
    pub keywords: &'a [String],
    /// The SEARCHRES result `$` as UIDs (RFC 5182 §2.1); `None` when no
    /// result was saved (then `$` matches nothing, RFC 5182 §2.1).
    pub saved: Option<&'a [Uid]>,
    /// Now, in seconds since the epoch, for OLDER/YOUNGER (RFC 5032).
    pub now: i64,
    /// The server's offset from UTC in seconds: BEFORE/ON/SINCE take the
    /// calendar day of INTERNALDATE in this zone (RFC 3501 §6.4.4 "disregarding
    /// time and timezone"; Dovecot uses the server's local zone the same way).
    pub tz_offset_secs: i32,
    /// What the store's word lists decided of the BODY/TEXT keys, computed once per
    /// search for every message of the view; `None` when there is no such key.
    pub words: Option<&'a WordAnswers>,
}

/// The answers of the store's word lists to the BODY/TEXT keys of one search
/// ([`maildex_store::UserStore::text_answers`]): for each key and message, `Some` when
/// the words decide it (exactly as comparing the text would), `None` when the text must
/// be compared.
#[derive(Debug, Default)]
pub struct WordAnswers {
    needles: Vec<TextNeedle>,
    uids: Vec<Uid>,
    answers: TextAnswers,
}

impl WordAnswers {
    /// The store's `answers` to `needles` for `uids` (ascending).
    pub fn new(needles: Vec<TextNeedle>, uids: Vec<Uid>, answers: TextAnswers) -> WordAnswers {
        WordAnswers {
            needles,
            uids,
            answers,
        }
    }

    /// Where message `uid` is in the answers.
    fn slot(&self, uid: Uid) -> Option<usize> {
        self.uids.binary_search(&uid).ok()
    }

    /// Which of the needles `needle` (normalised) is: what [`WordAnswers::lacking`] takes,
    /// looked up once per search rather than once per message.
    pub fn needle_index(&self, needle: &TextNeedle) -> Option<usize> {
        self.needles.iter().position(|n| n == needle)
    }

    /// The answer for the key with `needle` (normalised) in the message `uid`.
    fn get(&self, needle: &str, headers: bool, uid: Uid) -> Option<bool> {
        let k = self
            .needles
            .iter()
            .position(|n| n.headers == headers && n.needle == needle)?;
        *self.answers.answers.get(k)?.get(self.slot(uid)?)?
    }

    /// Whether the words settled what the text parts of message `uid` hold for every
    /// needle: comparing its header text is enough.
    pub fn headers_only(&self, uid: Uid) -> bool {
        self.slot(uid)
            .and_then(|i| self.answers.headers_only.get(i))
            .copied()
            .unwrap_or(false)
    }

    /// Whether the words show that no text part of message `uid` holds needle `k`
    /// ([`WordAnswers::needle_index`]), so that a TEXT needle can only be in its header
    /// text.
    pub fn lacking(&self, k: usize, uid: Uid) -> bool {
        self.slot(uid)
            .and_then(|i| self.answers.lacking.get(k)?.get(i))
            .copied()
            .unwrap_or(false)
    }
}

/// The distinct BODY and TEXT needles of `keys` (at any depth), normalised: what
/// [`WordAnswers`] holds answers for.
pub fn text_needles(keys: &[SearchKey]) -> Vec<TextNeedle> {
    fn walk(k: &SearchKey, out: &mut Vec<TextNeedle>) {
        let n = match k {
            SearchKey::Body(s) => TextNeedle {
                needle: normalized(s).into_owned(),
                headers: false,
            },
            SearchKey::Text(s) => TextNeedle {
                needle: normalized(s).into_owned(),
                headers: true,
            },
            SearchKey::Not(k) => return walk(k, out),
            SearchKey::Or(a, b) => {
                walk(a, out);
                return walk(b, out);
            }
            SearchKey::And(ks) => return ks.iter().for_each(|k| walk(k, out)),
            _ => return,
        };
        if !n.needle.is_empty() && !out.contains(&n) {
            out.push(n);
        }
    }
    let mut out = Vec::new();
    keys.iter().for_each(|k| walk(k, &mut out));
    out
}

/// The data a key may need beyond the UID, sequence number and `\Recent`, in the order
/// the session loads it for the messages still undecided: cheapest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// [`Candidate::state`]: flags, keywords, sizes, INTERNALDATE, MODSEQ.
    State,
    /// [`Candidate::search`]: FROM, TO, CC, BCC, SUBJECT, SENTBEFORE/ON/SINCE, HEADER of
    /// a field in [`SEARCH_HEADERS`].
    Search,
    /// [`Candidate::hot`]: HEADER of another field in [`HOT_HEADERS`].
    Hot,
    /// [`Candidate::headers`]: HEADER of any other field.
    Headers,
    /// The message text, through the `body` callback of [`decide`] (BODY, TEXT).
    Body,
}

impl Stage {
    /// Every stage, in loading order.
    pub const ALL: [Stage; 5] = [
        Stage::State,
        Stage::Search,
        Stage::Hot,
        Stage::Headers,
        Stage::Body,
    ];
}

/// Which [`Stage`]s a search needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// [`Stage::State`]: what the store's flags column gives (flags, keywords, modseq,
    /// RFC822.SIZE, INTERNALDATE).
    pub state: bool,
    /// [`Stage::Search`].
    pub search: bool,
    /// [`Stage::Hot`].
    pub hot: bool,
    /// [`Stage::Headers`].
    pub headers: bool,
    /// [`Stage::Body`].
    pub body: bool,
}

impl Needs {
    fn add(&mut self, other: Needs) {
        self.state |= other.state;
        self.search |= other.search;
        self.hot |= other.hot;
        self.headers |= other.headers;
        self.body |= other.body;
    }

    /// Whether `stage` is needed.
    pub fn has(self, stage: Stage) -> bool {
        match stage {
            Stage::State => self.state,
            Stage::Search => self.search,
            Stage::Hot => self.hot,
            Stage::Headers => self.headers,
            Stage::Body => self.body,
        }
    }
}

/// A key's string as both sides are compared: [`text::normalize`]d, borrowed when it is
/// already (what [`prepare`] makes of every key string), so a search of many messages
/// normalises its strings once.
fn normalized(needle: &[u8]) -> std::borrow::Cow<'_, str> {
    // the common case, and what `prepare` leaves: lower-case ASCII, checked byte by byte
    if needle
        .iter()
        .all(|b| b.is_ascii() && !b.is_ascii_uppercase())
    {
        if let Ok(s) = std::str::from_utf8(needle) {
            return s.into();
        }
    }
    match std::str::from_utf8(needle) {
        Ok(s) if s.chars().all(|c| c.to_lowercase().eq(std::iter::once(c))) => s.into(),
        _ => text::normalize(&String::from_utf8_lossy(needle)).into(),
    }
}

/// Normalises the strings of `keys` (and of every key nested in them) once, before
/// they are evaluated on many messages.
pub fn prepare(keys: &mut [SearchKey]) {
    use SearchKey as K;
    for k in keys {
        match k {
            K::Bcc(s)
            | K::Cc(s)
            | K::From(s)
            | K::To(s)
            | K::Subject(s)
            | K::Body(s)
            | K::Text(s) => {
                *s = normalized(s).into_owned().into_bytes();
            }
            K::Header(_, s) => *s = normalized(s).into_owned().into_bytes(),
            K::Not(k) => prepare(std::slice::from_mut(k)),
            K::Or(a, b) => {
                prepare(std::slice::from_mut(a));
                prepare(std::slice::from_mut(b));
            }
            K::And(ks) => prepare(ks),
            _ => {}
        }
    }
}

/// True when `key` (not NOT/OR/AND) is decided by [`Candidate::state`]: by its flags,
/// keywords, modseq, RFC822.SIZE or INTERNALDATE, which the store's flags column holds
/// ([`maildex_store::records::FlagState`]).
fn on_state(key: &SearchKey) -> bool {
    use SearchKey as K;
    matches!(
        key,
        K::Answered
            | K::Deleted
            | K::Draft
            | K::Flagged
            | K::Seen
            | K::Unanswered
            | K::Undeleted
            | K::Undraft
            | K::Unflagged
            | K::Unseen
            | K::New
            | K::Keyword(_)
            | K::Unkeyword(_)
            | K::ModSeq(_)
            | K::Larger(_)
            | K::Smaller(_)
            | K::Before(_)
            | K::On(_)
            | K::Since(_)
            | K::Older(_)
            | K::Younger(_)
    )
}

/// Stands for the state of a message whose state is not loaded: never read, as every
/// key on the state answers `None` first.
static NO_STATE: MessageState = MessageState {
    file_name: String::new(),
    in_new: false,
    flags: 0,
    keywords: 0,
    modseq: ModSeq(0),
    internal_date: 0,
    save_date: 0,
    size: 0,
    vsize: 0,
};

/// True when HEADER of `name` is answered from the stored search fields
/// ([`SEARCH_HEADERS`]).
fn is_stored(name: &[u8]) -> bool {
    SEARCH_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// True when `name` is one of the header fields kept in
/// [`Cached::hot_headers`].
fn is_hot(name: &[u8]) -> bool {
    HOT_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// The strings (normalised) that the text of every message matching all of `keys` must
/// contain: those of BODY and TEXT keys the match cannot do without (at the top, or inside
/// a parenthesised AND; not under NOT or OR). The store's candidate signatures rule out,
/// before any text is read, the messages that certainly lack one
/// ([`maildex_store::UserStore::text_candidates`]); the answer stays the comparison's.
pub fn required_texts(keys: &[SearchKey]) -> Vec<TextNeedle> {
    let mut out = Vec::new();
    for k in keys {
        let (s, headers) = match k {
            SearchKey::Body(s) => (s, false),
            SearchKey::Text(s) => (s, true),
            SearchKey::And(ks) => {
                out.extend(required_texts(ks));
                continue;
            }
            _ => continue,
        };
        out.push(TextNeedle {
            needle: normalized(s).into_owned(),
            headers,
        });
    }
    out
}

/// Whether some TEXT key is among `keys` (at any depth): only TEXT compares the header
/// text, which the store then decodes from the header blocks.
pub fn has_text_key(keys: &[SearchKey]) -> bool {
    keys.iter().any(|k| match k {
        SearchKey::Text(_) => true,
        SearchKey::Not(k) => has_text_key(std::slice::from_ref(k)),
        SearchKey::Or(a, b) => {
            has_text_key(std::slice::from_ref(a)) || has_text_key(std::slice::from_ref(b))
        }
        SearchKey::And(ks) => has_text_key(ks),
        _ => false,
    })
}

/// The fields of HEADER keys in `keys` (nested ones too) that are neither stored nor hot:
/// those a mailbox may learn ([`maildex_store::UserStore::learn_headers`]) after a search
/// had to read header blocks for them.
pub fn learnable_headers(keys: &[SearchKey]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for k in keys {
        let found = match k {
            SearchKey::Header(name, _) if !is_stored(name) && !is_hot(name) => {
                vec![String::from_utf8_lossy(name).to_ascii_lowercase()]
            }
            SearchKey::Not(k) => learnable_headers(std::slice::from_ref(k)),
            SearchKey::Or(a, b) => {
                let mut v = learnable_headers(std::slice::from_ref(a));
                v.extend(learnable_headers(std::slice::from_ref(b)));
                v
            }
            SearchKey::And(ks) => learnable_headers(ks),
            _ => Vec::new(),
        };
        for name in found {
            if !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
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
        | K::SentSince(_) => n.search = true,
        K::Header(name, _) => {
            if is_stored(name) {
                n.search = true;
            } else if is_hot(name) {
                n.hot = true;
            } else {
                // a field the mailbox learned is in the search fields of the messages
                // indexed since (maildex_index::learned); the others read header blocks
                n.search = true;
                n.headers = true;
            }
        }
        K::Body(_) | K::Text(_) => n.body = true,
        k if on_state(k) => n.state = true,
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
/// search keys ... are the intersection (AND function)") on the data `c` holds:
/// `Some(answer)`, or `None` when the answer depends on a key whose data is not
/// loaded (a [`Stage`] not in `c`, or BODY/TEXT without `body`). NOT, OR and AND
/// follow three-valued logic: `OR` of a true key is true, `AND` of a false key is
/// false, whatever the unknown ones would say.
///
/// `body` returns the message's normalised text, as the index stores it
/// ([`UserStore::visit_search_texts`]), for BODY/TEXT keys; it is called lazily, at
/// most once, and only when such a key is reached. `None` from it (no text record)
/// makes those keys fail.
///
/// [`UserStore::visit_search_texts`]: maildex_store::UserStore::visit_search_texts
pub fn decide<'b, 't>(
    keys: &[SearchKey],
    c: &Candidate,
    ctx: &Context,
    body: Option<&mut (dyn FnMut() -> Option<SearchText<'t>> + 'b)>,
) -> Option<bool> {
    let mut ev = Eval {
        c,
        ctx,
        body,
        text: None,
    };
    ev.all(keys)
}

/// [`decide`] with every stage's data at hand: a missing [`Candidate`] field is
/// taken as a message without that data (no match for keys on it).
pub fn matches<'t>(
    keys: &[SearchKey],
    c: &Candidate,
    ctx: &Context,
    body: &mut dyn FnMut() -> Option<SearchText<'t>>,
) -> bool {
    decide(keys, c, ctx, Some(body)).unwrap_or(false)
}

/// One evaluation: the message, the mailbox and the lazily built body text.
struct Eval<'e, 'a, 'b, 't> {
    c: &'e Candidate<'a>,
    ctx: &'e Context<'a>,
    body: Option<&'e mut (dyn FnMut() -> Option<SearchText<'t>> + 'b)>,
    /// The message text, once asked for (`Some(None)`: unavailable).
    text: Option<Option<SearchText<'t>>>,
}

impl Eval<'_, '_, '_, '_> {
    fn flag(&self, bit: u8) -> bool {
        self.state().flags & bit != 0
    }

    /// The message's state; only called for keys [`on_state`] accepts, once it is loaded.
    fn state(&self) -> &MessageState {
        self.c.state.unwrap_or(&NO_STATE)
    }

    /// The AND of `keys`: false as soon as one is, unknown if one is and none is false.
    fn all(&mut self, keys: &[SearchKey]) -> Option<bool> {
        let mut unknown = false;
        for k in keys {
            match self.key(k) {
                Some(false) => return Some(false),
                Some(true) => {}
                None => unknown = true,
            }
        }
        (!unknown).then_some(true)
    }

    fn key(&mut self, key: &SearchKey) -> Option<bool> {
        use SearchKey as K;
        if self.c.state.is_none() && on_state(key) {
            return None;
        }
        let st = self.state();
        let known = match key {
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
            K::SentBefore(d) => return self.sent_day().map(|s| s < d.days_since_epoch()),
            K::SentOn(d) => return self.sent_day().map(|s| s == d.days_since_epoch()),
            K::SentSince(d) => return self.sent_day().map(|s| s >= d.days_since_epoch()),
            // RFC 5032 §3: OLDER n: internal date at least n seconds before
            // now; YOUNGER n: at most n seconds before now (Dovecot turns
            // them into BEFORE now-n+1 / SINCE now-n on exact times).
            K::Older(n) => st.internal_date <= self.ctx.now - i64::from(*n),
            K::Younger(n) => st.internal_date >= self.ctx.now - i64::from(*n),
            // RFC 7162 §3.1.5: modseq at or above the value.
            K::ModSeq(n) => st.modseq >= ModSeq(*n),
            K::Uid(set) => self.in_set(set, self.c.uid.get(), self.ctx.max_uid.get()),
            K::SequenceSet(set) => self.in_set(set, self.c.seq, self.ctx.max_seq),
            K::From(s) => return self.stored(SearchField::From, s),
            K::To(s) => return self.stored(SearchField::To, s),
            K::Cc(s) => return self.stored(SearchField::Cc, s),
            K::Bcc(s) => return self.stored(SearchField::Bcc, s),
            K::Subject(s) => return self.stored(SearchField::Subject, s),
            K::Header(name, s) => return self.header(name, s),
            K::Body(s) => return self.body_text(s, false),
            K::Text(s) => return self.body_text(s, true),
            K::Not(k) => return self.key(k).map(|b| !b),
            K::Or(a, b) => {
                let a = self.key(a);
                if a == Some(true) {
                    return a;
                }
                return match (a, self.key(b)) {
                    (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                };
            }
            K::And(ks) => return self.all(ks),
        };
        Some(known)
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
            .is_some_and(|bit| self.state().keywords & bit != 0)
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
        (self.state().internal_date + i64::from(self.ctx.tz_offset_secs)).div_euclid(86_400)
    }

    /// Calendar day written in the first Date: header, stored at indexing time.
    /// Without a parsable one, Dovecot takes the sent date as 0 (1970-01-01,
    /// `index_mail_get_date` "0 = not found / invalid") and SEARCH compares that:
    /// SENTBEFORE matches, SENTSINCE (after 1970) and SENTON do not. So does
    /// [`maildex_store::records::SearchFields::sent_day`].
    fn sent_day(&self) -> Option<i64> {
        self.c.search.map(|f| f.sent_day())
    }

    /// FROM/TO/CC/BCC/SUBJECT (RFC 3501 §6.4.4): a case-insensitive substring of
    /// some occurrence of the field, decoded, from the search fields stored at
    /// indexing time ([`text::search_fields`] says how each is written out: the
    /// addresses as ENVELOPE reads them with their display names, as Dovecot
    /// does, so comments and folding inside an address do not hide it; the
    /// subject with its white space compressed). An empty string only asks for
    /// the field to exist.
    fn stored(&self, field: SearchField, needle: &[u8]) -> Option<bool> {
        let values = self.c.search?.values(field)?;
        let needle = normalized(needle);
        Some(text::any_contains_bytes(values, &needle))
    }

    /// HEADER: a case-insensitive substring of some occurrence of the field,
    /// unfolded and decoded; an empty string only asks for the field to exist
    /// (Dovecot `search_header_arg`). A hot field from the hot header fields,
    /// any other from the header blocks.
    fn header(&self, name: &[u8], needle: &[u8]) -> Option<bool> {
        if is_stored(name) {
            let values = self.c.search?.header(name)?;
            return Some(text::any_contains_bytes(values, &normalized(needle)));
        }
        // a learned field, when this message's search fields hold it (a mailbox learns
        // no hot field, see `learnable_headers`), asked before the list of hot fields is
        // walked: this runs once per message
        if let Some(values) = self.c.search.as_ref().and_then(|s| s.header(name)) {
            return Some(text::any_contains_bytes(values, &normalized(needle)));
        }
        let block = if is_hot(name) {
            self.c.hot?
        } else {
            self.c.headers?
        };
        let values: Vec<String> = text::field_values(block, name)
            .iter()
            .map(|v| text::search_text(v))
            .collect();
        let needle = normalized(needle);
        Some(text::any_contains(&values, &needle))
    }

    /// BODY (text parts) or TEXT (text parts and every header block): from the
    /// store's word lists when they decide it, else by comparing the stored text.
    fn body_text(&mut self, needle: &[u8], with_headers: bool) -> Option<bool> {
        if let Some(w) = self.ctx.words {
            if !needle.is_empty() {
                if let Some(a) = w.get(&normalized(needle), with_headers, self.c.uid) {
                    return Some(a);
                }
            }
        }
        if self.text.is_none() {
            let body = self.body.as_mut()?;
            let t = body();
            self.text = Some(t);
        }
        let Some(Some(t)) = &self.text else {
            return Some(false);
        };
        if needle.is_empty() {
            return Some(true);
        }
        let needle = normalized(needle);
        Some(if with_headers {
            t.text_contains(&needle)
        } else {
            t.body_contains(&needle)
        })
    }
}
