//! SEARCH arguments (RFC 3501 §6.4.4, RFC 4731, RFC 5032, RFC 5182,
//! RFC 7162 §3.1.5).

use crate::sequence::SequenceSet;
use crate::types::Date;

/// A parsed SEARCH command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchArgs {
    /// `CHARSET x` as given (upper-cased), if any (RFC 3501 §6.4.4). The
    /// server answers `NO [BADCHARSET]` for charsets it does not support.
    pub charset: Option<String>,
    /// `RETURN (...)` options (RFC 4731 §3.1); `None` without RETURN
    /// (plain `* SEARCH` answer). `Some(empty)` is `RETURN ()`, which
    /// RFC 4731 §3.1 defines as `RETURN (ALL)` and is kept as given.
    pub returns: Option<Vec<SearchReturn>>,
    /// The keys, implicitly ANDed (RFC 3501 §6.4.4). Never empty.
    pub keys: Vec<SearchKey>,
}

/// ESEARCH result options (RFC 4731 §3.1, RFC 5182 §2.1 SAVE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SearchReturn {
    /// `MIN`
    Min,
    /// `MAX`
    Max,
    /// `ALL`
    All,
    /// `COUNT`
    Count,
    /// `SAVE` (RFC 5182)
    Save,
}

/// A search key (RFC 3501 §6.4.4 and §9 `search-key`). Strings are raw
/// bytes in the command's CHARSET (US-ASCII or UTF-8 in practice).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchKey {
    /// `ALL`
    All,
    /// `ANSWERED`
    Answered,
    /// `BCC string`
    Bcc(Vec<u8>),
    /// `BEFORE date` (internal date, ignoring time and zone)
    Before(Date),
    /// `BODY string`
    Body(Vec<u8>),
    /// `CC string`
    Cc(Vec<u8>),
    /// `DELETED`
    Deleted,
    /// `DRAFT`
    Draft,
    /// `FLAGGED`
    Flagged,
    /// `FROM string`
    From(Vec<u8>),
    /// `HEADER field-name string`
    Header(Vec<u8>, Vec<u8>),
    /// `KEYWORD flag-keyword` (an atom, case preserved)
    Keyword(String),
    /// `LARGER n`
    Larger(u32),
    /// `NEW` (RECENT UNSEEN)
    New,
    /// `NOT key`
    Not(Box<SearchKey>),
    /// `OLD` (NOT RECENT)
    Old,
    /// `ON date`
    On(Date),
    /// `OR key1 key2`
    Or(Box<SearchKey>, Box<SearchKey>),
    /// `RECENT`
    Recent,
    /// `SEEN`
    Seen,
    /// `SENTBEFORE date` (Date: header)
    SentBefore(Date),
    /// `SENTON date`
    SentOn(Date),
    /// `SENTSINCE date`
    SentSince(Date),
    /// `SINCE date`
    Since(Date),
    /// `SMALLER n`
    Smaller(u32),
    /// `SUBJECT string`
    Subject(Vec<u8>),
    /// `TEXT string` (header and body)
    Text(Vec<u8>),
    /// `TO string`
    To(Vec<u8>),
    /// `UID sequence-set` (UIDs; `$` allowed, RFC 5182)
    Uid(SequenceSet),
    /// `UNANSWERED`
    Unanswered,
    /// `UNDELETED`
    Undeleted,
    /// `UNDRAFT`
    Undraft,
    /// `UNFLAGGED`
    Unflagged,
    /// `UNKEYWORD flag-keyword`
    Unkeyword(String),
    /// `UNSEEN`
    Unseen,
    /// A bare sequence set: message sequence numbers (`$` allowed).
    SequenceSet(SequenceSet),
    /// `( key *(SP key) )`: all must match.
    And(Vec<SearchKey>),
    /// `OLDER n`: internal date at least n seconds ago (RFC 5032 §3).
    Older(u32),
    /// `YOUNGER n`: internal date at most n seconds ago (RFC 5032 §3).
    Younger(u32),
    /// `MODSEQ [entry-name entry-type] n` (RFC 7162 §3.1.5); the optional
    /// entry is parsed and dropped (maildex keeps no per-flag modseqs).
    ModSeq(u64),
}
