//! maildex-lmtp-proto: a sans-IO LMTP server session (RFC 2033).
//!
//! The session owns no socket, file or task. The server that owns the
//! socket feeds the bytes it reads into [`Session::feed`], then drains
//! [`Session::next_event`] until it returns `Ok(None)`, acting on each
//! [`Event`] in order: it writes [`Event::Reply`] bytes to the socket,
//! decides on each recipient ([`Session::rcpt_result`]), streams
//! [`Event::Data`] into its `tmp/` files and reports one outcome per
//! accepted recipient after [`Event::DataEnd`] ([`Session::data_results`]).
//!
//! Pipelined commands (RFC 2920; postfix sends MAIL, RCPT..., DATA in one
//! write) are handled one at a time, each reply in command order. Replies
//! may be written as they come or gathered and written once `next_event`
//! returns `Ok(None)` (RFC 2920 §3.2 lets the server batch replies).
//!
//! ```
//! use maildex_lmtp_proto::{Event, Limits, RcptOutcome, RcptResult, Session, Status};
//!
//! let mut s = Session::new(Limits::new("mx.example"));
//! let mut wire = Vec::new();
//! let mut stored = Vec::new();
//! s.feed(b"LHLO client\r\nMAIL FROM:<a@b.example>\r\nRCPT TO:<u@mx.example>\r\n\
//!          RCPT TO:<nobody@mx.example>\r\nDATA\r\n");
//! s.feed(b"Subject: hi\r\n\r\n..dot\r\n.\r\nQUIT\r\n");
//! while let Some(event) = s.next_event()? {
//!     match event {
//!         Event::Reply(bytes) => wire.extend_from_slice(&bytes),
//!         Event::RcptTo(addr) if addr.local_part == "u" => s.rcpt_result(RcptResult::Accepted)?,
//!         Event::RcptTo(_) => s.rcpt_result(RcptResult::Rejected(Status::unknown_user()))?,
//!         Event::Data(chunk) => stored.extend_from_slice(&chunk),
//!         Event::DataEnd(_) => s.data_results(vec![RcptOutcome::Delivered])?,
//!         Event::Quit => break,
//!         _ => {}
//!     }
//! }
//! assert_eq!(stored, b"Subject: hi\n\n.dot\n");
//! let wire = String::from_utf8(wire).unwrap();
//! assert!(wire.contains("550 5.1.1 <nobody@mx.example> User unknown\r\n"));
//! assert!(wire.ends_with("250 2.0.0 <u@mx.example> Saved\r\n221 2.0.0 mx.example Bye\r\n"));
//! # Ok::<(), maildex_lmtp_proto::ProtoError>(())
//! ```
//!
//! Memory stays bounded: message data is handed out in chunks as it is fed
//! and never gathered; a command line is held only up to
//! [`Limits::max_line`] octets. Bytes fed but not yet drained stay buffered,
//! so feed one socket read, then drain.
//!
//! # Message data
//!
//! [`Event::Data`] carries the message as maildex stores it (Maildir
//! files with LF line ends):
//! - CRLF becomes LF. A bare LF is taken as a line end too (RFC 5321 §2.3.8
//!   forbids it; postfix and Dovecot accept it), also in command lines and
//!   in the DATA terminator (`LF "." LF` ends the message). A bare CR not
//!   followed by LF is kept as is.
//! - DATA: one leading "." of a line is removed (RFC 5321 §4.5.2), the line
//!   "." ends the message and is not passed on; the line end before it is
//!   part of the message (§4.1.1.4).
//! - BDAT (RFC 3030): no dot handling; a lone "." is data; a CRLF split
//!   between two chunks is one line end; a final bare CR is kept.
//! - NUL and 8-bit bytes pass through.
//! - Lines longer than [`Limits::max_line`] are accepted (as Dovecot and
//!   postfix do) and counted in [`DataSummary::long_lines`].
//! - Size is counted in CRLF form; past [`Limits::max_message_size`] the
//!   session sends [`Event::MessageTooBig`], reads the message to its end
//!   and answers `552 5.3.4` for each recipient (RFC 1870 §6). BDAT
//!   chunks before the LAST one are still answered `250`.
//!
//! Other rules (command order, reply codes) are listed on [`Session`].

mod address;
mod body;
mod command;
/// Invariant checks run by the fuzz targets and `tests/fuzz_corpus.rs`.
#[doc(hidden)]
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod reply;
mod session;

pub use address::Address;
pub use reply::{Enhanced, Status};
pub use session::Session;

/// Limits of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest message accepted, in octets with CRLF line ends (the size
    /// RFC 1870 SIZE speaks of). Advertised as `SIZE <n>` in the LHLO reply;
    /// 0 means no limit (RFC 1870 §3).
    pub max_message_size: u64,
    /// Most accepted recipients per transaction; more get `452 4.5.3`
    /// (RFC 5321 §4.5.3.1.8 asks for at least 100).
    pub max_recipients: usize,
    /// Longest text line in octets including CRLF (RFC 5321 §4.5.3.1.6:
    /// 1000). Longer message lines are accepted and counted. Also the hard
    /// cap on a command line: one longer than this without a line end closes
    /// the session ([`ProtoError::LineTooLong`]). Values below 512 are
    /// treated as 512.
    pub max_line: usize,
    /// Name used in the greeting, the LHLO reply and the QUIT reply.
    pub hostname: String,
}

impl Limits {
    /// Defaults: 50 MiB messages, 100 recipients, 1000-octet lines.
    pub fn new(hostname: impl Into<String>) -> Self {
        Limits {
            max_message_size: 50 * 1024 * 1024,
            max_recipients: 100,
            max_line: 1000,
            hostname: hostname.into(),
        }
    }
}

/// Longest command line, including CRLF (RFC 5321 §4.5.3.1.4). A longer
/// one (up to [`Limits::max_line`]) gets `500 5.5.2 Line too long` and the
/// session goes on.
pub const MAX_COMMAND_LINE: usize = 512;

/// What happened, in the order it happened. See each variant for what the
/// server must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Bytes to write to the client: one complete reply (possibly
    /// multi-line), CRLF-terminated. The first event of a session is the
    /// `220` greeting.
    Reply(Vec<u8>),
    /// A MAIL command was accepted and a transaction began; the `250` reply
    /// follows. Informational (keep the sender for `Return-Path:`).
    MailFrom(MailFrom),
    /// A RCPT command asks for this recipient. The session waits: the server
    /// must call [`Session::rcpt_result`] before the next `next_event`.
    /// Unknown users get `550 5.1.1` here (RFC 2033 §4.2).
    RcptTo(Address),
    /// Message data starts (DATA got its `354`, or the first BDAT chunk of
    /// the transaction begins). Open the delivery files now.
    DataStart,
    /// A piece of the message, dot-unstuffed (DATA only) and with LF line
    /// ends (see "Message data" above); the pieces together are the message.
    /// Never empty; an empty message gives no `Data` at all.
    Data(Vec<u8>),
    /// The whole message was received. Deliver it to every accepted
    /// recipient, then call [`Session::data_results`] with one outcome per
    /// recipient, in RCPT order ([`Session::accepted_recipients`]).
    DataEnd(DataSummary),
    /// The message passed [`Limits::max_message_size`]: discard what was
    /// written. No more `Data` and no `DataEnd` follow for this transaction;
    /// the session reads the rest of the message and answers `552 5.3.4` for
    /// every recipient by itself (RFC 1870 §6).
    MessageTooBig,
    /// The open transaction was abandoned (RSET, LHLO, QUIT, or just before
    /// a [`ProtoError`]): forget its recipients and delete anything written
    /// for it.
    Reset,
    /// QUIT was answered (the `221` reply came just before). Close the
    /// connection; the session yields nothing more.
    Quit,
}

/// A MAIL FROM command (RFC 5321 §4.1.1.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailFrom {
    /// The sender; `None` for the null reverse-path `<>` (bounces).
    pub reverse_path: Option<Address>,
    /// The `SIZE=` declared by the client (RFC 1870), already checked
    /// against the limit.
    pub size: Option<u64>,
    /// `BODY=8BITMIME` was given (RFC 6152). 8-bit data is accepted either way.
    pub body_8bit: bool,
}

/// Facts about a received message, given with [`Event::DataEnd`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataSummary {
    /// Octets handed out in `Data` events (LF line ends).
    pub stored_size: u64,
    /// Size with CRLF line ends (stored size plus one per LF), as IMAP
    /// RFC822.SIZE counts it.
    pub crlf_size: u64,
    /// Lines longer than [`Limits::max_line`]; accepted, reported for logs.
    pub long_lines: u64,
    /// The message came by BDAT (RFC 3030) rather than DATA.
    pub chunked: bool,
}

/// The server's answer to [`Event::RcptTo`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RcptResult {
    /// The recipient exists and can take mail: `250 2.1.5`.
    Accepted,
    /// Refused with this status (e.g. [`Status::unknown_user`],
    /// [`Status::over_quota`]); the reply names the recipient.
    Rejected(Status),
}

/// The server's delivery result for one accepted recipient (RFC 2033 §4.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RcptOutcome {
    /// Stored and committed: `250 2.0.0 <addr> Saved`.
    Delivered,
    /// Not stored; e.g. `452 4.3.1` when the disk is full, `451 4.3.0` for
    /// index trouble (the client keeps the message and retries).
    Failed(Status),
}

/// Conditions that end the session. After one is returned, the server
/// writes any reply already handed out and closes the connection;
/// `next_event` then yields `Ok(None)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// A command line ran past this many octets with no line end; the
    /// `500 5.5.2` reply was handed out just before.
    #[error("LMTP command line longer than {limit} octets without a line end")]
    LineTooLong {
        /// The limit in octets ([`Limits::max_line`]).
        limit: usize,
    },
    /// A BDAT command whose chunk size could not be read: the rest of the
    /// stream cannot be split into commands and data any more (RFC 3030 §2).
    /// The `501 5.5.4` reply was handed out just before.
    #[error("LMTP BDAT command without a valid chunk size")]
    BadChunkSize,
    /// Caller bug: `next_event` while a [`Session::rcpt_result`] or
    /// [`Session::data_results`] call is due.
    #[error("LMTP session is waiting for {0} from the server")]
    ResultDue(&'static str),
    /// Caller bug: `rcpt_result` or `data_results` when the session did not
    /// ask for it.
    #[error("LMTP {0} called while the session was not waiting for it")]
    UnexpectedResult(&'static str),
    /// Caller bug: `data_results` with the wrong number of outcomes.
    #[error("LMTP data_results got {got} outcomes for {expected} accepted recipients")]
    OutcomeCount {
        /// Accepted recipients in the transaction.
        expected: usize,
        /// Outcomes given.
        got: usize,
    },
}
