//! The command parser: works on one complete command (its lines and inline
//! literals, as assembled by the receiver).

use crate::command::Command;
use crate::error::ParseError;
use crate::limits::Limits;
use crate::types::Tag;

/// A command that could not be parsed: the tag when it was read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandError {
    /// The tag, if the line started with a valid one.
    pub tag: Option<Tag>,
    /// What was wrong.
    pub error: ParseError,
}

/// Parses one complete command (`tag SP command CRLF`, literals inline as
/// `{n}\r\n<n octets>`; a missing final CRLF is accepted). APPEND is refused
/// here: it only streams through [`crate::Receiver`].
pub fn parse_command(input: &[u8], limits: &Limits) -> Result<(Tag, Command), CommandError> {
    let _ = (input, limits);
    Err(CommandError {
        tag: None,
        error: ParseError::syntax("Not implemented"),
    })
}
