//! Response codes (RFC 3501 §7.1, RFC 5530, RFC 4315, RFC 7162, RFC 7889).

use crate::sequence::SequenceSet;
use crate::types::Flag;

/// A response code, written in brackets after OK/NO/BAD/BYE/PREAUTH
/// (RFC 3501 §7.1 `resp-text-code`). Render with
/// [`crate::encode::response_code`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseCode {
    /// `ALERT` (RFC 3501 §7.1)
    Alert,
    /// `BADCHARSET [(charsets)]` (RFC 3501 §7.1)
    BadCharset(Vec<String>),
    /// `CAPABILITY caps...` (RFC 3501 §7.1); names without `IMAP4rev1`
    /// added automatically: give the full list.
    Capability(Vec<String>),
    /// `PARSE` (RFC 3501 §7.1)
    Parse,
    /// `PERMANENTFLAGS (flags [\*])` (RFC 3501 §7.1); `allow_new` adds `\*`.
    PermanentFlags {
        /// Flags that can be changed permanently.
        flags: Vec<Flag>,
        /// Clients may create new keywords (`\*`).
        allow_new: bool,
    },
    /// `READ-ONLY` (RFC 3501 §7.1)
    ReadOnly,
    /// `READ-WRITE` (RFC 3501 §7.1)
    ReadWrite,
    /// `TRYCREATE` (RFC 3501 §7.1)
    TryCreate,
    /// `UIDNEXT n` (RFC 3501 §7.1)
    UidNext(u32),
    /// `UIDVALIDITY n` (RFC 3501 §7.1)
    UidValidity(u32),
    /// `UNSEEN n` (RFC 3501 §7.1)
    Unseen(u32),
    /// `APPENDUID uidvalidity uid-set` (RFC 4315 §3; MULTIAPPEND gives a set)
    AppendUid {
        /// Destination UIDVALIDITY.
        uidvalidity: u32,
        /// UIDs given to the appended messages.
        uids: SequenceSet,
    },
    /// `COPYUID uidvalidity source-set dest-set` (RFC 4315 §3)
    CopyUid {
        /// Destination UIDVALIDITY.
        uidvalidity: u32,
        /// Source UIDs.
        source: SequenceSet,
        /// Destination UIDs, in the same order.
        dest: SequenceSet,
    },
    /// `UIDNOTSTICKY` (RFC 4315 §3)
    UidNotSticky,
    /// `HIGHESTMODSEQ n` (RFC 7162 §3.1.2.1)
    HighestModSeq(u64),
    /// `NOMODSEQ` (RFC 7162 §3.1.2.2)
    NoModSeq,
    /// `MODIFIED set` (RFC 7162 §3.1.3)
    Modified(SequenceSet),
    /// `CLOSED` (RFC 7162 §3.2.11)
    Closed,
    /// `UNAVAILABLE` (RFC 5530 §3)
    Unavailable,
    /// `AUTHENTICATIONFAILED` (RFC 5530 §3)
    AuthenticationFailed,
    /// `AUTHORIZATIONFAILED` (RFC 5530 §3)
    AuthorizationFailed,
    /// `EXPIRED` (RFC 5530 §3)
    Expired,
    /// `PRIVACYREQUIRED` (RFC 5530 §3)
    PrivacyRequired,
    /// `CONTACTADMIN` (RFC 5530 §3)
    ContactAdmin,
    /// `NOPERM` (RFC 5530 §3)
    NoPerm,
    /// `INUSE` (RFC 5530 §3)
    InUse,
    /// `EXPUNGEISSUED` (RFC 5530 §3)
    ExpungeIssued,
    /// `CORRUPTION` (RFC 5530 §3)
    Corruption,
    /// `SERVERBUG` (RFC 5530 §3)
    ServerBug,
    /// `CLIENTBUG` (RFC 5530 §3)
    ClientBug,
    /// `CANNOT` (RFC 5530 §3)
    Cannot,
    /// `LIMIT` (RFC 5530 §3)
    Limit,
    /// `OVERQUOTA` (RFC 5530 §3)
    OverQuota,
    /// `ALREADYEXISTS` (RFC 5530 §3)
    AlreadyExists,
    /// `NONEXISTENT` (RFC 5530 §3)
    NonExistent,
    /// `TOOBIG` (RFC 7889 §4; RFC 4469 §5 for APPEND)
    TooBig,
    /// `USEATTR` (RFC 6154 §6)
    UseAttr,
    /// `UNKNOWN-CTE` (RFC 3516 §4.3): BINARY of a part whose
    /// Content-Transfer-Encoding the server cannot decode
    UnknownCte,
}
