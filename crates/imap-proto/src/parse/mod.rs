//! The command parser: works on one complete command (its lines and inline
//! literals, as assembled by the receiver: lines end in CRLF, a literal's
//! octets follow its `{n}` CRLF).

mod append;
mod command;
mod core;
mod fetch;
mod list;
mod search;

pub(crate) use append::{parse_append_head, parse_append_more};
pub(crate) use core::tag_of;
use core::Parser;

use crate::command::Command;
use crate::error::ParseError;
use crate::limits::Limits;
use crate::types::Tag;

/// A parser failure: either the input ended inside a literal whose octets
/// have not arrived yet (only the receiver sees this), or a real error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PErr {
    /// The input ends where literal octets should be.
    Incomplete,
    /// The command is wrong.
    Fail(ParseError),
}

impl From<ParseError> for PErr {
    fn from(e: ParseError) -> PErr {
        PErr::Fail(e)
    }
}

pub(crate) type PResult<T> = Result<T, PErr>;

/// A syntax error result.
pub(crate) fn fail<T>(text: impl Into<String>) -> PResult<T> {
    Err(PErr::Fail(ParseError::Syntax(text.into())))
}

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
/// here ("APPEND must be streamed"): it only goes through
/// [`crate::Receiver`].
pub fn parse_command(input: &[u8], limits: &Limits) -> Result<(Tag, Command), CommandError> {
    match parse_partial(input, limits) {
        Ok(ok) => Ok(ok),
        Err((tag, PErr::Fail(error))) => Err(CommandError { tag, error }),
        Err((tag, PErr::Incomplete)) => Err(CommandError {
            tag,
            error: ParseError::syntax("Literal data missing"),
        }),
    }
}

/// Like [`parse_command`] but tells an input cut inside a literal apart.
pub(crate) fn parse_partial(
    input: &[u8],
    limits: &Limits,
) -> Result<(Tag, Command), (Option<Tag>, PErr)> {
    parse_with(Parser::new(input, limits))
}

/// Checks a command cut right after a literal announcement: `Incomplete`
/// means it is right so far (RFC 3501 §7.5: continue it).
pub(crate) fn check_prefix(input: &[u8], limits: &Limits) -> Result<(), (Option<Tag>, PErr)> {
    parse_with(Parser::new_prefix(input, limits)).map(|_| ())
}

fn parse_with(mut p: Parser<'_>) -> Result<(Tag, Command), (Option<Tag>, PErr)> {
    let tag = p.tag().map_err(|e| (None, e))?;
    let cmd = command::command(&mut p).map_err(|e| (Some(tag.clone()), e))?;
    Ok((tag, cmd))
}
