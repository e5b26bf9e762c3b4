//! maildex's persistent per-user index: one LMDB environment per user holding, for every
//! message, what a mail client lists (flags, sizes, dates, the header fields clients ask for,
//! ENVELOPE, BODYSTRUCTURE, the MIME part offsets) so that listings never open message files.
//!
//! - [`Index`] is one user's env, opened once per process ([`Index::open`]); reads are
//!   closures over short transactions, writes are group-committed ([`Index::write`]).
//! - [`schema`] is the on-disk layout (docs/INDEX-FORMAT.md says the same for people).
//! - [`record`] builds a message record from a message file and its MIME summary.
//! - [`changes`] is the change log: what changed in a mailbox since a modseq, without a
//!   scan of the mailbox.
//! - [`dump`] renders records for `maildex index dump`.

pub mod changes;
mod columns;
pub mod dump;
mod env;
mod flag_column;
mod fresh;
mod fts;
mod ids;
mod lazy;
pub mod learned;
mod migrate;
mod packed;
pub mod record;
pub mod schema;
mod search_column;
pub mod segment;
mod txn;
pub mod words;

use std::path::{Path, PathBuf};

pub use changes::ChangeSet;
pub use env::{
    compact, keep_large_allocations_lazy, lock_exclusive, page_size, CommitListener, Index,
    OpenOptions, DATA_FILE, LOCK_FILE, OPEN_LOCK_FILE,
};
pub use flag_column::FlagState;
pub use fresh::PENDING_FILE;
pub use fts::{signature, SigProbe, TextRecord, TextRecordRef};
pub use ids::{MailboxId, ModSeq, Uid};
pub use lazy::{sync_unsynced, UNSYNCED_FILE};
pub use record::{build, Built, HOT_HEADERS};
pub use schema::{
    flag, Cached, CachedFields, Counts, MailboxRecord, MessageRecord, MessageState, PartKindRecord,
    PartRecord, SearchField, SearchFields, SearchView, SortKeys, SortNeed, Stamp, MAX_LEARNED,
    SEARCH_HEADERS,
};
pub use txn::{Fts, PageStats, Reader, Writer};
pub use words::{message_words, needle_runs, MessageWords, NeedleRun, WordKind};

/// What can go wrong in the index. Every variant that concerns a file names it.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// A filesystem operation on the index folder failed.
    #[error("{path}: {error}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What the OS said (in the message; not a `source()`).
        error: std::io::Error,
    },
    /// LMDB reported an error.
    #[error("LMDB error in {path}: {message}")]
    Lmdb {
        /// The env folder or file.
        path: PathBuf,
        /// LMDB's message.
        message: String,
    },
    /// The env's files are damaged or not an LMDB env of a version we read: rebuild it
    /// (`maildex index rebuild` moves it aside and builds a new one from the Maildir).
    #[error("{path}: index unusable ({message}); run `maildex index rebuild`")]
    Unusable {
        /// The env folder.
        path: PathBuf,
        /// LMDB's message.
        message: String,
    },
    /// The map is full; it has been grown, and the operation may be retried.
    #[error("index map full in {path} (grown; retry)")]
    MapFull {
        /// The env folder.
        path: PathBuf,
    },
    /// The env was written by another schema version: rebuild it (`maildex index rebuild`).
    #[error(
        "{path}: index schema version {found}, this maildex uses {}; run `maildex index rebuild`",
        schema::SCHEMA_VERSION
    )]
    SchemaMismatch {
        /// The env folder.
        path: PathBuf,
        /// The version found.
        found: u32,
    },
    /// A stored record cannot be decoded.
    #[error("corrupt index record: {0}")]
    Corrupt(String),
    /// A record cannot be encoded (a bug).
    #[error("cannot encode index record: {0}")]
    Encode(String),
    /// The operation needs the env closed by every process (compact).
    #[error("{path}: index is open in a running process; stop the sessions of this user (or the daemon) and retry")]
    InUse {
        /// The env folder.
        path: PathBuf,
    },
    /// A mailbox id with no record.
    #[error("no mailbox with id {0} in the index")]
    NoMailbox(MailboxId),
    /// A lock was poisoned by a panic in another thread.
    #[error("index lock poisoned by an earlier panic")]
    Poisoned,
    /// An internal invariant failed (a bug).
    #[error("internal index error: {0}")]
    Internal(String),
}

impl IndexError {
    pub(crate) fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        IndexError::Io {
            path: path.as_ref().to_path_buf(),
            error: source,
        }
    }

    pub(crate) fn lmdb(path: impl AsRef<Path>, e: heed::Error) -> Self {
        let path = path.as_ref().to_path_buf();
        match e {
            heed::Error::Mdb(heed::MdbError::MapFull) => IndexError::MapFull { path },
            heed::Error::Io(error) => IndexError::Io { path, error },
            heed::Error::Mdb(
                e @ (heed::MdbError::Invalid
                | heed::MdbError::Corrupted
                | heed::MdbError::VersionMismatch
                | heed::MdbError::PageNotFound
                | heed::MdbError::Panic),
            ) => IndexError::Unusable {
                path,
                message: e.to_string(),
            },
            other => IndexError::Lmdb {
                path,
                message: other.to_string(),
            },
        }
    }

    /// For errors raised inside a transaction, where the env path is not at hand.
    pub(crate) fn from_heed(e: heed::Error) -> Self {
        IndexError::lmdb("(index)", e)
    }

    /// True when retrying the same operation may succeed (the map was grown).
    pub fn is_retryable(&self) -> bool {
        matches!(self, IndexError::MapFull { .. })
    }

    /// A copy for fanning one failure out to every writer of a batch.
    pub(crate) fn duplicate(&self) -> Self {
        match self {
            IndexError::Io { path, error } => IndexError::Io {
                path: path.clone(),
                // the errno survives (ENOSPC decides an LMTP 452 over a 451)
                error: match error.raw_os_error() {
                    Some(code) => std::io::Error::from_raw_os_error(code),
                    None => std::io::Error::new(error.kind(), error.to_string()),
                },
            },
            IndexError::Lmdb { path, message } => IndexError::Lmdb {
                path: path.clone(),
                message: message.clone(),
            },
            IndexError::MapFull { path } => IndexError::MapFull { path: path.clone() },
            IndexError::Unusable { path, message } => IndexError::Unusable {
                path: path.clone(),
                message: message.clone(),
            },
            IndexError::SchemaMismatch { path, found } => IndexError::SchemaMismatch {
                path: path.clone(),
                found: *found,
            },
            IndexError::Corrupt(s) => IndexError::Corrupt(s.clone()),
            IndexError::Encode(s) => IndexError::Encode(s.clone()),
            IndexError::InUse { path } => IndexError::InUse { path: path.clone() },
            IndexError::NoMailbox(id) => IndexError::NoMailbox(*id),
            IndexError::Poisoned => IndexError::Poisoned,
            IndexError::Internal(s) => IndexError::Internal(s.clone()),
        }
    }
}
