//! What the receiver yields ([`Input`]) and its parts.

use crate::code::ResponseCode;
use crate::command::Command;
use crate::types::{DateTime, Flag, Mailbox, Tag};

/// What the receiver yields, in wire order. See [`crate::Receiver`] for the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A complete, parsed command (any literals in it collected inline).
    Command {
        /// The tag to answer with.
        tag: Tag,
        /// The command.
        command: Command,
    },
    /// The client announced a synchronizing literal that the receiver will
    /// take: write `+ OK\r\n` now (RFC 3501 §7.5), then read more input.
    Continue,
    /// An APPEND (or MULTIAPPEND, RFC 3502) starts. Check the mailbox; to
    /// refuse, write the tagged NO and call [`crate::Receiver::reject_append`].
    AppendBegin {
        /// The APPEND's tag.
        tag: Tag,
        /// The destination.
        mailbox: Mailbox,
    },
    /// One message of the APPEND follows (before the [`Input::Continue`]
    /// of a synchronizing literal). Open a `tmp/` file; to refuse (quota,
    /// size), write the tagged NO and call [`crate::Receiver::reject_append`].
    AppendMessage(AppendMessage),
    /// A piece of the current message (never empty, at most
    /// [`crate::Limits::max_chunk`] octets); the pieces add up to `len`.
    AppendData(Vec<u8>),
    /// The APPEND command is complete: commit all its messages and answer
    /// `OK [APPENDUID ...]`.
    AppendEnd,
    /// Answer `tag BAD [code] text` (untagged `* BAD` without a tag). The
    /// rest of the line, including literals announced on it, has been or
    /// will be skipped silently. If an APPEND with this tag was under way,
    /// it is over: discard what was stored for it.
    Bad {
        /// The command's tag if it could be read.
        tag: Option<Tag>,
        /// Response code (`LIMIT`, `TOOBIG`, ...).
        code: Option<ResponseCode>,
        /// Human-readable text.
        text: String,
    },
    /// Answer `tag NO [code] text`: a synchronizing literal too large
    /// (`NO [TOOBIG]`, RFC 7889 §4). Like `Bad`, it ends an APPEND in
    /// progress.
    No {
        /// The command's tag.
        tag: Tag,
        /// Response code.
        code: Option<ResponseCode>,
        /// Human-readable text.
        text: String,
    },
    /// The connection cannot go on: write `* BYE text` and close.
    Fatal {
        /// Human-readable text.
        text: String,
    },
}

/// One APPEND message announcement (RFC 3501 §6.3.11, RFC 3516 §4.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendMessage {
    /// Flags and keywords to set (`\Recent` is refused by the parser).
    pub flags: Vec<Flag>,
    /// The internal date, if given.
    pub date: Option<DateTime>,
    /// The message size in octets.
    pub len: u64,
    /// `~{n}`: a literal8 (RFC 3516 §4.4); the data may contain NUL.
    pub binary: bool,
    /// A synchronizing literal: [`Input::Continue`] follows.
    pub sync: bool,
}

/// A raw line read with [`crate::Receiver::next_line`] was longer than
/// [`crate::Limits::max_line`]; close the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("Line too long")]
pub struct LineTooLong;
