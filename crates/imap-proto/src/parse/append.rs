//! APPEND heads (RFC 3501 §6.3.11, RFC 3502 MULTIAPPEND, RFC 3516 §4.4):
//! everything but the message literals, which the receiver streams.

use super::core::Parser;
use super::{fail, PErr, PResult};
use crate::input::AppendMessage;
use crate::limits::Limits;
use crate::types::{Mailbox, Tag};

/// The start of an APPEND up to its first message literal announcement.
#[derive(Debug)]
pub(crate) struct AppendHead {
    pub(crate) tag: Tag,
    pub(crate) mailbox: Mailbox,
    pub(crate) message: AppendMessage,
}

/// Parses `tag SP "APPEND" SP mailbox SP [flag-list SP] [date-time SP]
/// literal-announcement CRLF` where the input ends right after the
/// announcement. `Incomplete` means the mailbox name is a literal whose
/// octets have not arrived.
pub(crate) fn parse_append_head(
    input: &[u8],
    limits: &Limits,
) -> Result<AppendHead, (Option<Tag>, PErr)> {
    // The input always ends with a literal announcement whose octets are
    // not in it: the message's, or the mailbox name's (then `Incomplete`).
    let mut p = Parser::new_prefix(input, limits);
    let tag = p.tag().map_err(|e| (None, e))?;
    let inner = |p: &mut Parser<'_>| -> PResult<(Mailbox, AppendMessage)> {
        if !p.eat_word(b"APPEND") {
            return fail("Expected APPEND");
        }
        p.sp()?;
        let mailbox = p.mailbox()?;
        let message = message(p)?.map_or_else(|| fail("Missing message literal"), Ok)?;
        Ok((mailbox, message))
    };
    let (mailbox, message) = inner(&mut p).map_err(|e| (Some(tag.clone()), e))?;
    Ok(AppendHead {
        tag,
        mailbox,
        message,
    })
}

/// Parses the line that follows a message literal: empty (the APPEND is
/// complete: `None`) or ` [flag-list SP] [date-time SP] literal` for the
/// next message of a MULTIAPPEND (RFC 3502 §6).
pub(crate) fn parse_append_more(input: &[u8], limits: &Limits) -> PResult<Option<AppendMessage>> {
    let mut p = Parser::new(input, limits);
    if p.at_end() {
        return Ok(None);
    }
    message(&mut p)
}

/// `SP [flag-list SP] [date-time SP] ("{" n ["+"] "}" / "~{" n ["+"] "}")`
/// at the end of the input; `None` at the end of the command.
fn message(p: &mut Parser<'_>) -> PResult<Option<AppendMessage>> {
    if p.at_end() {
        return Ok(None);
    }
    p.sp()?;
    let mut flags = Vec::new();
    if p.peek() == Some(b'(') {
        flags = p.flag_list()?;
        p.sp()?;
    }
    let mut date = None;
    if p.peek() == Some(b'"') {
        date = Some(p.date_time()?);
        p.sp()?;
    }
    let binary = p.eat(b'~');
    if !p.eat(b'{') {
        if p.eat_word(b"CATENATE") || p.eat_word(b"UTF8") {
            return fail("APPEND extension not supported");
        }
        return fail("Missing message literal");
    }
    let len = p.number64().or_else(|_| fail("Invalid literal size"))?;
    if len > u64::from(u32::MAX) {
        // RFC 3501 §9: literal sizes are `number`, at most 4294967295.
        return fail("Invalid literal size");
    }
    let sync = !p.eat(b'+');
    p.expect(b'}', "}")?;
    if !p.at_end() {
        return fail("Unexpected data after literal");
    }
    Ok(Some(AppendMessage {
        flags,
        date,
        len,
        binary,
        sync,
    }))
}
