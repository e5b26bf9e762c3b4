//! FETCH section helpers: part numbers (RFC 3501 §6.4.5) and
//! HEADER.FIELDS / HEADER.FIELDS.NOT.

use crate::header::{eq_ci, field_at, line_at};
use crate::{Part, PartKind};

/// Part `n` inside a message whose root part is `msg`: the n-th body part
/// of a multipart, or the body itself (n = 1) of a non-multipart message.
fn in_message(msg: &Part, n: u32) -> Option<&Part> {
    let i = usize::try_from(n.checked_sub(1)?).ok()?;
    match &msg.kind {
        PartKind::Multipart(children) => children.get(i),
        _ => (i == 0).then_some(msg),
    }
}

/// Finds the part a section part number names (RFC 3501 §6.4.5): `[]` is
/// the message itself; `[1]` of a non-multipart message is its body (the
/// returned part's body; its header is the message header, which is what
/// `1.MIME` returns in Dovecot); numbers inside a message/rfc822 part count
/// the parts of the encapsulated message.
///
/// `None` when there is no such part (Dovecot then answers an empty
/// string).
pub fn find_part<'a>(root: &'a Part, section: &[u32]) -> Option<&'a Part> {
    let Some((&first, rest)) = section.split_first() else {
        return Some(root);
    };
    let mut cur = in_message(root, first)?;
    for &n in rest {
        cur = match &cur.kind {
            PartKind::Multipart(children) => {
                children.get(usize::try_from(n.checked_sub(1)?).ok()?)?
            }
            PartKind::Message { root, .. } => in_message(root, n)?,
            PartKind::Single => return None,
        };
    }
    Some(cur)
}

/// Copies `bytes` to `out` as IMAP sends message text: bare LF as CRLF, NUL
/// as 0x80 (see [`crate::CrlfWriter`]).
fn push_crlf(out: &mut Vec<u8>, bytes: &[u8]) {
    crate::to_crlf(bytes, out);
}

/// Writes the fields of `header_block` that are (`not` = false) or are not
/// (`not` = true) in `names`, compared case-insensitively, each with its
/// continuation lines, in CRLF. The result ends with the blank line when
/// `header_block` has one, or always when `add_missing_blank`.
fn filter<N: AsRef<[u8]>>(
    header_block: &[u8],
    names: &[N],
    not: bool,
    add_missing_blank: bool,
    out: &mut Vec<u8>,
) {
    let mut pos = 0;
    let mut blank = false;
    while pos < header_block.len() {
        let line = line_at(header_block, pos);
        if line.is_blank() {
            blank = true;
            break;
        }
        let field = field_at(header_block, pos);
        let listed = names.iter().any(|n| eq_ci(n.as_ref(), field.name));
        if listed != not {
            push_crlf(out, &header_block[pos..field.next]);
        }
        pos = field.next;
    }
    if blank || add_missing_blank {
        out.extend_from_slice(b"\r\n");
    }
}

/// BODY[HEADER.FIELDS (names)] / BODY[HEADER.FIELDS.NOT (names)] of the
/// message itself (RFC 3501 §6.4.5): every matching field with its
/// continuation lines, in file order, in CRLF, then the blank line.
///
/// As in Dovecot, HEADER.FIELDS always ends with the blank line (even when
/// the message has none), HEADER.FIELDS.NOT only when the header has one;
/// a last line without line break is copied as it is. `header_block` is the
/// root part's `[header_start, body_start)`.
pub fn header_fields<N: AsRef<[u8]>>(
    header_block: &[u8],
    names: &[N],
    not: bool,
    out: &mut Vec<u8>,
) {
    filter(header_block, names, not, !not, out);
}

/// BODY[n.HEADER.FIELDS (names)] / [n.HEADER.FIELDS.NOT (names)] of an
/// encapsulated message: like [`header_fields`], but the blank line is
/// written only when the header block has one (RFC 3501 §6.4.5: "except in
/// the case of a message which has no body and no blank line"), as in
/// Dovecot.
pub fn header_fields_of_part<N: AsRef<[u8]>>(
    header_block: &[u8],
    names: &[N],
    not: bool,
    out: &mut Vec<u8>,
) {
    filter(header_block, names, not, false, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_continuations_in_crlf() {
        let h = b"From: a\nReceived: x\n y\nsubject: s\n\n";
        let mut out = Vec::new();
        header_fields(h, &[&b"Subject"[..], b"received"], false, &mut out);
        assert_eq!(out, b"Received: x\r\n y\r\nsubject: s\r\n\r\n");
        out.clear();
        header_fields(h, &[&b"Subject"[..], b"received"], true, &mut out);
        assert_eq!(out, b"From: a\r\n\r\n");
    }

    #[test]
    fn missing_blank_line() {
        let h = b"From: a\nTo: b";
        let mut out = Vec::new();
        header_fields(h, &[b"to"], false, &mut out);
        assert_eq!(out, b"To: b\r\n");
        out.clear();
        header_fields(h, &[b"to"], true, &mut out);
        assert_eq!(out, b"From: a\r\n");
        out.clear();
        header_fields_of_part(h, &[b"to"], false, &mut out);
        assert_eq!(out, b"To: b");
    }
}
