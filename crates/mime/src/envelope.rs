//! ENVELOPE fields collected from a message header (RFC 3501 §7.4.2).

use crate::address::parse_address_list;
use crate::header::eq_ci;
use crate::{Address, Envelope};

/// Which ENVELOPE slot a header field fills.
#[derive(Clone, Copy)]
pub(crate) enum Slot {
    Date,
    Subject,
    From,
    Sender,
    ReplyTo,
    To,
    Cc,
    Bcc,
    InReplyTo,
    MessageId,
}

/// The ENVELOPE slot for a header name, if any (case-insensitive).
pub(crate) fn slot(name: &[u8]) -> Option<Slot> {
    let s = match name.len() {
        2 if eq_ci(name, b"to") => Slot::To,
        2 if eq_ci(name, b"cc") => Slot::Cc,
        3 if eq_ci(name, b"bcc") => Slot::Bcc,
        4 if eq_ci(name, b"date") => Slot::Date,
        4 if eq_ci(name, b"from") => Slot::From,
        6 if eq_ci(name, b"sender") => Slot::Sender,
        7 if eq_ci(name, b"subject") => Slot::Subject,
        8 if eq_ci(name, b"reply-to") => Slot::ReplyTo,
        10 if eq_ci(name, b"message-id") => Slot::MessageId,
        11 if eq_ci(name, b"in-reply-to") => Slot::InReplyTo,
        _ => return None,
    };
    Some(s)
}

/// NUL bytes become U+FFFD, as Dovecot stores header values.
fn replace_nul(mut value: Vec<u8>) -> Vec<u8> {
    if memchr::memchr(0, &value).is_none() {
        return value;
    }
    let mut out = Vec::with_capacity(value.len() + 8);
    for c in value.drain(..) {
        if c == 0 {
            out.extend_from_slice("\u{fffd}".as_bytes());
        } else {
            out.push(c);
        }
    }
    out
}

/// Adds one header field to the envelope: the last Date, Subject,
/// In-Reply-To and Message-ID win; address fields add up (as in Dovecot).
pub(crate) fn add(env: &mut Envelope, slot: Slot, value: Vec<u8>) {
    let value = replace_nul(value);
    let list: &mut Vec<Address> = match slot {
        Slot::Date => return env.date = Some(value),
        Slot::Subject => return env.subject = Some(value),
        Slot::InReplyTo => return env.in_reply_to = Some(value),
        Slot::MessageId => return env.message_id = Some(value),
        Slot::From => &mut env.from,
        Slot::Sender => &mut env.sender,
        Slot::ReplyTo => &mut env.reply_to,
        Slot::To => &mut env.to,
        Slot::Cc => &mut env.cc,
        Slot::Bcc => &mut env.bcc,
    };
    list.extend(parse_address_list(&value));
}

/// RFC 3501 §7.4.2: Sender and Reply-To default to From.
pub(crate) fn finish(env: &mut Envelope) {
    if env.sender.is_empty() {
        env.sender = env.from.clone();
    }
    if env.reply_to.is_empty() {
        env.reply_to = env.from.clone();
    }
}
