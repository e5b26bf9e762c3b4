//! Typed IMAP commands (RFC 3501 §6, RFC 9051 §6 and the extensions named
//! at each variant).

use crate::fetch::FetchArgs;
use crate::list::{ListArgs, SpecialUse, StatusItem};
use crate::search::{SearchArgs, SortArgs, ThreadArgs};
use crate::sequence::SequenceSet;
use crate::types::{Flag, Mailbox};

/// A complete command other than APPEND (which streams, see
/// [`crate::Input::AppendBegin`]). `UID` forms carry `uid: true`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `CAPABILITY` (RFC 3501 §6.1.1)
    Capability,
    /// `NOOP` (RFC 3501 §6.1.2)
    Noop,
    /// `LOGOUT` (RFC 3501 §6.1.3)
    Logout,
    /// `STARTTLS` (RFC 3501 §6.2.1)
    StartTls,
    /// `AUTHENTICATE mechanism [initial-response]` (RFC 3501 §6.2.2,
    /// RFC 4959 SASL-IR).
    Authenticate {
        /// The SASL mechanism name, upper-cased (`PLAIN`).
        mechanism: String,
        /// The initial response as base64 text, undecoded; `Some(empty)`
        /// for `=` (RFC 4959 §3: an empty response), `None` without one.
        initial_response: Option<Vec<u8>>,
    },
    /// `LOGIN user password` (RFC 3501 §6.2.3); raw astring bytes.
    Login {
        /// User name.
        username: Vec<u8>,
        /// Password (never log it).
        password: Vec<u8>,
    },
    /// `SELECT mailbox [(params)]` (RFC 3501 §6.3.1, RFC 7162 §3.1.8).
    Select {
        /// The mailbox.
        mailbox: Mailbox,
        /// Parameters.
        params: SelectParams,
    },
    /// `EXAMINE mailbox [(params)]` (RFC 3501 §6.3.2).
    Examine {
        /// The mailbox.
        mailbox: Mailbox,
        /// Parameters.
        params: SelectParams,
    },
    /// `CREATE mailbox [(USE (attrs))]` (RFC 3501 §6.3.3, RFC 6154 §3).
    Create {
        /// The new mailbox.
        mailbox: Mailbox,
        /// Special-use attributes requested with `USE` (RFC 6154 §3).
        special_use: Vec<SpecialUse>,
    },
    /// `DELETE mailbox` (RFC 3501 §6.3.4)
    Delete {
        /// The mailbox.
        mailbox: Mailbox,
    },
    /// `RENAME from to` (RFC 3501 §6.3.5)
    Rename {
        /// Existing name.
        from: Mailbox,
        /// New name.
        to: Mailbox,
    },
    /// `SUBSCRIBE mailbox` (RFC 3501 §6.3.6)
    Subscribe {
        /// The mailbox.
        mailbox: Mailbox,
    },
    /// `UNSUBSCRIBE mailbox` (RFC 3501 §6.3.7)
    Unsubscribe {
        /// The mailbox.
        mailbox: Mailbox,
    },
    /// `LIST ...` (RFC 3501 §6.3.8, RFC 5258)
    List(ListArgs),
    /// `LSUB reference pattern` (RFC 3501 §6.3.9)
    Lsub {
        /// Reference, raw.
        reference: Vec<u8>,
        /// Pattern, raw.
        pattern: Vec<u8>,
    },
    /// `STATUS mailbox (items)` (RFC 3501 §6.3.10)
    Status {
        /// The mailbox.
        mailbox: Mailbox,
        /// Items in request order (never empty).
        items: Vec<StatusItem>,
    },
    /// `CHECK` (RFC 3501 §6.4.1)
    Check,
    /// `CLOSE` (RFC 3501 §6.4.2)
    Close,
    /// `EXPUNGE` (RFC 3501 §6.4.3) or `UID EXPUNGE set` (RFC 4315 §2.1).
    Expunge {
        /// UIDs to limit the expunge to (`UID EXPUNGE`); `None` for EXPUNGE.
        uids: Option<SequenceSet>,
    },
    /// `[UID] SEARCH` (RFC 3501 §6.4.4, §6.4.8)
    Search {
        /// `UID SEARCH`
        uid: bool,
        /// Arguments.
        args: SearchArgs,
    },
    /// `[UID] SORT` (RFC 5256 §3; ESORT RETURN, RFC 5267 §3)
    Sort {
        /// `UID SORT`
        uid: bool,
        /// Arguments.
        args: SortArgs,
    },
    /// `[UID] THREAD` (RFC 5256 §4)
    Thread {
        /// `UID THREAD`
        uid: bool,
        /// Arguments.
        args: ThreadArgs,
    },
    /// `[UID] FETCH set items [modifiers]` (RFC 3501 §6.4.5)
    Fetch {
        /// `UID FETCH`: `set` holds UIDs, and UID is always returned.
        uid: bool,
        /// Messages.
        set: SequenceSet,
        /// Items and modifiers.
        args: FetchArgs,
    },
    /// `[UID] STORE set [(UNCHANGEDSINCE n)] [+|-]FLAGS[.SILENT] flags`
    /// (RFC 3501 §6.4.6, RFC 7162 §3.1.3)
    Store {
        /// `UID STORE`
        uid: bool,
        /// Messages.
        set: SequenceSet,
        /// What to do.
        args: StoreArgs,
    },
    /// `[UID] COPY set mailbox` (RFC 3501 §6.4.7)
    Copy {
        /// `UID COPY`
        uid: bool,
        /// Messages.
        set: SequenceSet,
        /// Destination.
        mailbox: Mailbox,
    },
    /// `[UID] MOVE set mailbox` (RFC 6851 §3.1)
    Move {
        /// `UID MOVE`
        uid: bool,
        /// Messages.
        set: SequenceSet,
        /// Destination.
        mailbox: Mailbox,
    },
    /// `IDLE` (RFC 2177): after `+ idling`, read lines with
    /// [`crate::Receiver::next_line`] until `DONE` ([`crate::is_done`]).
    Idle,
    /// `NAMESPACE` (RFC 2342)
    Namespace,
    /// `GETQUOTA quota-root` (RFC 9208 §4.2)
    GetQuota {
        /// The quota root's name.
        root: Vec<u8>,
    },
    /// `GETQUOTAROOT mailbox` (RFC 9208 §4.3)
    GetQuotaRoot {
        /// The mailbox whose quota roots are asked for.
        mailbox: Mailbox,
    },
    /// `SETQUOTA quota-root (resource limit ...)` (RFC 9208 §4.1); names upper-cased.
    SetQuota {
        /// The quota root's name.
        root: Vec<u8>,
        /// Resource names and limits (possibly none: remove every limit).
        limits: Vec<(String, u64)>,
    },
    /// `ENABLE cap...` (RFC 5161 §3.1); names upper-cased.
    Enable {
        /// Capability names (at least one).
        capabilities: Vec<String>,
    },
    /// `ID NIL` or `ID (key value ...)` (RFC 2971 §3.1); `None` for NIL.
    Id {
        /// Field/value pairs; a NIL value is `None`.
        params: Option<IdParams>,
    },
    /// `UNSELECT` (RFC 3691)
    Unselect,
}

impl Command {
    /// The command name as written on the wire (`UID FETCH`, `SELECT`),
    /// for logs and for `OK FETCH completed`-style texts.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Capability => "CAPABILITY",
            Command::Noop => "NOOP",
            Command::Logout => "LOGOUT",
            Command::StartTls => "STARTTLS",
            Command::Authenticate { .. } => "AUTHENTICATE",
            Command::Login { .. } => "LOGIN",
            Command::Select { .. } => "SELECT",
            Command::Examine { .. } => "EXAMINE",
            Command::Create { .. } => "CREATE",
            Command::Delete { .. } => "DELETE",
            Command::Rename { .. } => "RENAME",
            Command::Subscribe { .. } => "SUBSCRIBE",
            Command::Unsubscribe { .. } => "UNSUBSCRIBE",
            Command::List(_) => "LIST",
            Command::Lsub { .. } => "LSUB",
            Command::Status { .. } => "STATUS",
            Command::Check => "CHECK",
            Command::Close => "CLOSE",
            Command::Expunge { uids: None } => "EXPUNGE",
            Command::Expunge { uids: Some(_) } => "UID EXPUNGE",
            Command::Search { uid: false, .. } => "SEARCH",
            Command::Search { uid: true, .. } => "UID SEARCH",
            Command::Sort { uid: false, .. } => "SORT",
            Command::Sort { uid: true, .. } => "UID SORT",
            Command::Thread { uid: false, .. } => "THREAD",
            Command::Thread { uid: true, .. } => "UID THREAD",
            Command::Fetch { uid: false, .. } => "FETCH",
            Command::Fetch { uid: true, .. } => "UID FETCH",
            Command::Store { uid: false, .. } => "STORE",
            Command::Store { uid: true, .. } => "UID STORE",
            Command::Copy { uid: false, .. } => "COPY",
            Command::Copy { uid: true, .. } => "UID COPY",
            Command::Move { uid: false, .. } => "MOVE",
            Command::Move { uid: true, .. } => "UID MOVE",
            Command::Idle => "IDLE",
            Command::Namespace => "NAMESPACE",
            Command::GetQuota { .. } => "GETQUOTA",
            Command::GetQuotaRoot { .. } => "GETQUOTAROOT",
            Command::SetQuota { .. } => "SETQUOTA",
            Command::Enable { .. } => "ENABLE",
            Command::Id { .. } => "ID",
            Command::Unselect => "UNSELECT",
        }
    }
}

/// ID field/value pairs (RFC 2971 §3.1); a NIL value is `None`.
pub type IdParams = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// SELECT/EXAMINE parameters (RFC 4466 §2.1 `select-params`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectParams {
    /// `(CONDSTORE)` (RFC 7162 §3.1.8)
    pub condstore: bool,
    /// `(QRESYNC (uidvalidity modseq [known-uids [seq-match]]))`
    /// (RFC 7162 §3.2.5), parsed so the server can refuse or honour it.
    pub qresync: Option<Qresync>,
}

/// The QRESYNC select parameter (RFC 7162 §3.2.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qresync {
    /// Last known UIDVALIDITY.
    pub uidvalidity: u32,
    /// Last known modseq.
    pub modseq: u64,
    /// Known UIDs, if given.
    pub known_uids: Option<SequenceSet>,
    /// `(seq-set uid-set)` of sequence match data, if given.
    pub seq_match: Option<(SequenceSet, SequenceSet)>,
}

/// STORE arguments (RFC 3501 §6.4.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreArgs {
    /// Replace, add or remove.
    pub mode: StoreMode,
    /// `.SILENT`: no untagged FETCH for the change.
    pub silent: bool,
    /// The flags (may be empty: `FLAGS ()` clears all).
    pub flags: Vec<Flag>,
    /// `(UNCHANGEDSINCE n)` (RFC 7162 §3.1.3).
    pub unchanged_since: Option<u64>,
}

/// How STORE changes flags (RFC 3501 §6.4.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMode {
    /// `FLAGS`: replace.
    Replace,
    /// `+FLAGS`: add.
    Add,
    /// `-FLAGS`: remove.
    Remove,
}
