//! LIST, LSUB and STATUS arguments (RFC 3501 §6.3.8-§6.3.10, RFC 5258
//! LIST-EXTENDED, RFC 5819 LIST-STATUS, RFC 6154 SPECIAL-USE).

/// A LIST command (RFC 3501 §6.3.8 and RFC 5258 §3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListArgs {
    /// Selection options (RFC 5258 §3.1); empty for basic LIST.
    pub selection: Vec<ListSelect>,
    /// The reference name, raw (RFC 3501 §6.3.8; not INBOX-normalized).
    pub reference: Vec<u8>,
    /// One or more mailbox patterns with `*` and `%` wildcards, raw
    /// (RFC 5258 §3 allows a parenthesized list of patterns).
    pub patterns: Vec<Vec<u8>>,
    /// Return options (RFC 5258 §3.2); empty without RETURN.
    pub returns: Vec<ListReturn>,
    /// True when any LIST-EXTENDED syntax was used (selection options,
    /// several patterns or RETURN): RFC 5258 §3 then asks for extended
    /// answers (e.g. `\NonExistent`, CHILDINFO).
    pub extended: bool,
}

/// LIST selection options (RFC 5258 §3.1, RFC 6154 §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListSelect {
    /// `SUBSCRIBED`
    Subscribed,
    /// `REMOTE`
    Remote,
    /// `RECURSIVEMATCH` (needs another option, RFC 5258 §3.1)
    RecursiveMatch,
    /// `SPECIAL-USE` (RFC 6154 §5.1)
    SpecialUse,
}

/// LIST return options (RFC 5258 §3.2, RFC 5819 §2, RFC 6154 §5.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListReturn {
    /// `SUBSCRIBED`
    Subscribed,
    /// `CHILDREN`
    Children,
    /// `SPECIAL-USE`
    SpecialUse,
    /// `STATUS (items)` (RFC 5819 §2)
    Status(Vec<StatusItem>),
}

/// STATUS data items (RFC 3501 §6.3.10, RFC 8438 SIZE, RFC 7162
/// HIGHESTMODSEQ, RFC 9051 §6.3.11 DELETED, RFC 9208 §4.2 DELETED-STORAGE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusItem {
    /// `MESSAGES`
    Messages,
    /// `RECENT`
    Recent,
    /// `UIDNEXT`
    UidNext,
    /// `UIDVALIDITY`
    UidValidity,
    /// `UNSEEN`
    Unseen,
    /// `SIZE` (RFC 8438)
    Size,
    /// `HIGHESTMODSEQ` (RFC 7162 §3.1.6)
    HighestModSeq,
    /// `DELETED` (RFC 9051)
    Deleted,
    /// `DELETED-STORAGE` (RFC 9208 §4.2): what EXPUNGE would give back, in KiB
    DeletedStorage,
    /// `APPENDLIMIT` (RFC 7889 §3.2): the largest message APPEND takes into the mailbox
    AppendLimit,
}

impl StatusItem {
    /// The wire name (`MESSAGES`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            StatusItem::Messages => "MESSAGES",
            StatusItem::Recent => "RECENT",
            StatusItem::UidNext => "UIDNEXT",
            StatusItem::UidValidity => "UIDVALIDITY",
            StatusItem::Unseen => "UNSEEN",
            StatusItem::Size => "SIZE",
            StatusItem::HighestModSeq => "HIGHESTMODSEQ",
            StatusItem::Deleted => "DELETED",
            StatusItem::DeletedStorage => "DELETED-STORAGE",
            StatusItem::AppendLimit => "APPENDLIMIT",
        }
    }
}

/// SPECIAL-USE attributes a client may give to CREATE (RFC 6154 §2, §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpecialUse {
    /// `\All`
    All,
    /// `\Archive`
    Archive,
    /// `\Drafts`
    Drafts,
    /// `\Flagged`
    Flagged,
    /// `\Junk`
    Junk,
    /// `\Sent`
    Sent,
    /// `\Trash`
    Trash,
}

impl SpecialUse {
    /// Parses `\Drafts` etc. case-insensitively.
    pub fn from_name(name: &[u8]) -> Option<SpecialUse> {
        let u = match name.to_ascii_lowercase().as_slice() {
            b"\\all" => SpecialUse::All,
            b"\\archive" => SpecialUse::Archive,
            b"\\drafts" => SpecialUse::Drafts,
            b"\\flagged" => SpecialUse::Flagged,
            b"\\junk" => SpecialUse::Junk,
            b"\\sent" => SpecialUse::Sent,
            b"\\trash" => SpecialUse::Trash,
            _ => return None,
        };
        Some(u)
    }

    /// The wire form (`\Drafts`).
    pub fn as_str(self) -> &'static str {
        match self {
            SpecialUse::All => "\\All",
            SpecialUse::Archive => "\\Archive",
            SpecialUse::Drafts => "\\Drafts",
            SpecialUse::Flagged => "\\Flagged",
            SpecialUse::Junk => "\\Junk",
            SpecialUse::Sent => "\\Sent",
            SpecialUse::Trash => "\\Trash",
        }
    }
}
