//! Receiver limits.

/// Bounds on what one connection may make the receiver hold or parse.
///
/// The receiver's buffer never holds more than about
/// `max(max_line, max_inline_literal) + max_command` plus the last chunk
/// given to [`crate::Receiver::feed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Longest command line in octets, without the line end and not counting
    /// literal data. Default 64 KiB, Dovecot's `imap_max_line_length`. A
    /// longer line is refused with `BAD [TOOBIG]` and skipped to its end
    /// (RFC 9051 §7.1 TOOBIG; Dovecot's lib-imap parser refuses it the
    /// same way, "IMAP command line too large").
    pub max_line: usize,
    /// Largest literal collected into a command (LOGIN passwords, SEARCH
    /// strings, mailbox names); default 64 KiB. APPEND message literals are
    /// streamed and bounded by `max_append` instead.
    pub max_inline_literal: usize,
    /// Largest whole command (all lines plus inline literals); default
    /// 256 KiB.
    pub max_command: usize,
    /// Largest APPEND message in octets (RFC 7889 APPENDLIMIT); default
    /// 64 MiB.
    pub max_append: u64,
    /// Deepest parenthesis nesting (SEARCH keys, lists); default 16.
    pub max_depth: usize,
    /// Most elements in one list, sequence set or SEARCH program; default
    /// 16384. A command with more is refused with `BAD [LIMIT]`.
    pub max_items: usize,
    /// Largest [`crate::Input::AppendData`] chunk; default 64 KiB.
    pub max_chunk: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_line: 64 * 1024,
            max_inline_literal: 64 * 1024,
            max_command: 256 * 1024,
            max_append: 64 * 1024 * 1024,
            max_depth: 16,
            max_items: 16 * 1024,
            max_chunk: 64 * 1024,
        }
    }
}
