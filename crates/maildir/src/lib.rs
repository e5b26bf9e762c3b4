//! maildex-maildir: the filesystem-only Maildir++ layer of maildex.
//!
//! Layout and control files as Dovecot and Courier keep them, so maildex, Dovecot and
//! Courier can share a Maildir: INBOX is the root (`cur/ new/ tmp/`), folders are
//! `.Name` directories, flags live in the `:2,` file name suffix, keywords map to
//! letters through `dovecot-keywords`, and UIDs live in `dovecot-uidlist` (written
//! under Dovecot's `dovecot-uidlist.lock` dotlock). `courierimapuiddb` and Courier's
//! keyword files are read for migration.
//!
//! No LMDB, no MIME parsing, no async: every function here does blocking file I/O.

pub mod courier;
pub mod deliver;
mod error;
pub mod filename;
pub mod files;
pub mod flags;
pub mod folder;
/// Invariant checks run by the fuzz targets and `tests/fuzz_corpus.rs`.
#[doc(hidden)]
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod keywords;
pub mod maildirsize;
pub mod mutf7;
pub mod own_writes;
pub mod scan;
pub mod transfer;
pub mod uidlist;
mod util;

pub use deliver::{Delivered, RenameOutcome, TmpFile};
pub use error::MaildirError;
pub use filename::MaildirName;
pub use files::{ensure_regular, explain_denied, open_message, open_message_with_metadata};
pub use flags::{Flags, Keywords};
pub use folder::Folder;
pub use keywords::KeywordMap;
pub use mutf7::Mutf7Error;
pub use scan::{DirStamp, Entry, Scan, Sub};
pub use uidlist::{UidRecord, Uidlist, UidlistLock};
