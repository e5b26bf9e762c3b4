//! SEARCH arguments (RFC 3501 §6.4.4, RFC 4731, RFC 5032, RFC 5182,
//! RFC 7162 §3.1.5), and those of SORT and THREAD (RFC 5256, RFC 5267 ESORT,
//! RFC 5957 SORT=DISPLAY), which take the same search criteria.

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

/// A parsed SORT command (RFC 5256 §3, RFC 5267 §3 `RETURN`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortArgs {
    /// `RETURN (...)` options (ESORT, RFC 5267 §3); `None` without RETURN (plain
    /// `* SORT` answer).
    pub returns: Option<Vec<SearchReturn>>,
    /// The sort criteria in order of precedence. Never empty.
    pub criteria: Vec<SortCriterion>,
    /// The search charset (mandatory in SORT and THREAD), upper-cased.
    pub charset: String,
    /// The search keys, implicitly ANDed. Never empty.
    pub keys: Vec<SearchKey>,
}

/// One sort criterion: `["REVERSE" SP] sort-key` (RFC 5256 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SortCriterion {
    /// `REVERSE`: this key in descending order.
    pub reverse: bool,
    /// The key.
    pub key: SortKey,
}

/// A sort key (RFC 5256 §3, RFC 5957 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SortKey {
    /// `ARRIVAL`: INTERNALDATE.
    Arrival,
    /// `CC`: addr-mailbox of the first Cc address.
    Cc,
    /// `DATE`: the sent date (Date: header, else INTERNALDATE).
    Date,
    /// `FROM`: addr-mailbox of the first From address.
    From,
    /// `SIZE`: RFC822.SIZE.
    Size,
    /// `SUBJECT`: the base subject.
    Subject,
    /// `TO`: addr-mailbox of the first To address.
    To,
    /// `DISPLAYFROM` (RFC 5957): display name of the first From address.
    DisplayFrom,
    /// `DISPLAYTO` (RFC 5957): display name of the first To address.
    DisplayTo,
}

impl SortKey {
    /// The key's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            SortKey::Arrival => "ARRIVAL",
            SortKey::Cc => "CC",
            SortKey::Date => "DATE",
            SortKey::From => "FROM",
            SortKey::Size => "SIZE",
            SortKey::Subject => "SUBJECT",
            SortKey::To => "TO",
            SortKey::DisplayFrom => "DISPLAYFROM",
            SortKey::DisplayTo => "DISPLAYTO",
        }
    }
}

/// A parsed THREAD command (RFC 5256 §4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadArgs {
    /// The threading algorithm.
    pub algorithm: ThreadAlgorithm,
    /// The search charset, upper-cased.
    pub charset: String,
    /// The search keys, implicitly ANDed. Never empty.
    pub keys: Vec<SearchKey>,
}

/// A threading algorithm (RFC 5256 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThreadAlgorithm {
    /// `ORDEREDSUBJECT`
    OrderedSubject,
    /// `REFERENCES`
    References,
    /// `REFS`: Dovecot's REFERENCES without the subject merging (step 5), threads ordered by
    /// their latest message (draft-ietf-morg-inthread's REFS, as Dovecot 2.3 has it)
    Refs,
}

impl ThreadAlgorithm {
    /// The algorithm's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadAlgorithm::OrderedSubject => "ORDEREDSUBJECT",
            ThreadAlgorithm::References => "REFERENCES",
            ThreadAlgorithm::Refs => "REFS",
        }
    }
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
