//! maildex-imap-proto: the sans-IO IMAP grammar of maildex.
//!
//! No socket, task or file: the session that owns the connection feeds the
//! bytes it reads into a [`Receiver`] and acts on each [`Input`] it yields;
//! responses are written into a `Vec<u8>` with the [`encode`] helpers.
//!
//! ```
//! use maildex_imap_proto::{Command, Input, Limits, Receiver};
//!
//! let mut rx = Receiver::new(Limits::default());
//! rx.feed(b"a1 LOGIN joe {6}\r\n");
//! assert_eq!(rx.next(), Some(Input::Continue)); // write "+ OK\r\n"
//! assert_eq!(rx.next(), None); // read more
//! rx.feed(b"s3cret\r\na2 SELECT inbox\r\n");
//! match rx.next() {
//!     Some(Input::Command { tag, command: Command::Login { username, password } }) => {
//!         assert_eq!((tag.as_str(), &username[..], &password[..]), ("a1", &b"joe"[..], &b"s3cret"[..]));
//!     }
//!     other => panic!("{other:?}"),
//! }
//! match rx.next() {
//!     Some(Input::Command { command: Command::Select { mailbox, .. }, .. }) => assert!(mailbox.is_inbox()),
//!     other => panic!("{other:?}"),
//! }
//! ```
//!
//! Grammar: RFC 3501 §9 and RFC 9051 §9, with the extensions named on each
//! type. See `API.md` in the crate folder for an overview.

#![warn(missing_docs)]

mod code;
mod command;
pub mod encode;
mod error;
mod fetch;
/// Invariant checks run by the fuzz targets and `tests/fuzz_corpus.rs`.
#[doc(hidden)]
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod input;
mod limits;
mod list;
mod parse;
mod receiver;
mod search;
mod sequence;
mod types;

pub use code::ResponseCode;
pub use command::{Command, IdParams, Qresync, SelectParams, StoreArgs, StoreMode};
pub use encode::Status;
pub use error::ParseError;
pub use fetch::{FetchArgs, FetchItem, FetchMacro, Partial, Section, SectionText};
pub use input::{AppendMessage, Input, LineTooLong};
pub use limits::Limits;
pub use list::{ListArgs, ListReturn, ListSelect, SpecialUse, StatusItem};
pub use parse::{parse_command, CommandError};
pub use receiver::{Receiver, MAX_LITERALS};
pub use search::{
    SearchArgs, SearchKey, SearchReturn, SortArgs, SortCriterion, SortKey, ThreadAlgorithm,
    ThreadArgs,
};
pub use sequence::{SeqNum, SeqRange, SequenceSet};
pub use types::{Date, DateTime, Flag, Mailbox, Tag};

/// True when a line read during IDLE is `DONE`, in any case (RFC 2177 §3;
/// RFC 9051 §6.3.13 grammar `idle = "IDLE" CRLF "DONE"` is case-insensitive
/// like all IMAP keywords). `line` is without its line end.
pub fn is_done(line: &[u8]) -> bool {
    line.eq_ignore_ascii_case(b"DONE")
}

/// A client line during AUTHENTICATE (RFC 3501 §6.2.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthLine {
    /// `*`: the client cancels; answer `tag BAD` (RFC 3501 §6.2.2).
    Cancel,
    /// A base64 response, undecoded (may be empty).
    Response(Vec<u8>),
}

/// Classifies a line read with [`Receiver::next_line`] during
/// AUTHENTICATE (RFC 3501 §6.2.2, RFC 4959 §3).
pub fn auth_line(line: &[u8]) -> AuthLine {
    if line == b"*" {
        AuthLine::Cancel
    } else {
        AuthLine::Response(line.to_vec())
    }
}
