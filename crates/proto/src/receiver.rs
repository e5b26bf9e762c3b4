//! The byte-fed command receiver (RFC 3501 §2.2, §4.3, §7.5; RFC 7888).

use crate::code::ResponseCode;
use crate::command::Command;
use crate::limits::Limits;
use crate::types::{DateTime, Flag, Mailbox, Tag};

/// What the receiver yields, in wire order. See [`Receiver`] for the rules.
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
    /// refuse, write the tagged NO and call [`Receiver::reject_append`].
    AppendBegin {
        /// The APPEND's tag.
        tag: Tag,
        /// The destination.
        mailbox: Mailbox,
    },
    /// One message of the APPEND follows (before the [`Input::Continue`]
    /// of a synchronizing literal). Open a `tmp/` file; to refuse (quota,
    /// size), write the tagged NO and call [`Receiver::reject_append`].
    AppendMessage(AppendMessage),
    /// A piece of the current message (never empty, at most
    /// [`Limits::max_chunk`] octets); the pieces add up to `len`.
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

/// A raw line read with [`Receiver::next_line`] was longer than
/// [`Limits::max_line`]; close the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("Line too long")]
pub struct LineTooLong;

/// A byte-fed IMAP command receiver.
#[derive(Debug)]
pub struct Receiver {
    limits: Limits,
    buf: Vec<u8>,
}

impl Receiver {
    /// A receiver with these limits.
    pub fn new(limits: Limits) -> Receiver {
        Receiver {
            limits,
            buf: Vec::new(),
        }
    }

    /// Appends bytes read from the socket.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next input, or `None` when more bytes are needed.
    pub fn next(&mut self) -> Option<Input> {
        None
    }

    /// The next raw line without its line end, for AUTHENTICATE responses
    /// and IDLE's DONE.
    pub fn next_line(&mut self) -> Option<Result<Vec<u8>, LineTooLong>> {
        None
    }

    /// Abandons the APPEND under way.
    pub fn reject_append(&mut self) {}

    /// Octets held by the receiver.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Drops all buffered input (after STARTTLS).
    pub fn discard_buffered(&mut self) {
        self.buf.clear();
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
}
