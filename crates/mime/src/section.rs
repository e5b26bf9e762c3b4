//! FETCH section helpers: part numbers (RFC 3501 §6.4.5) and
//! HEADER.FIELDS / HEADER.FIELDS.NOT.

use crate::header::{eq_ci, field_of, line_at};
use crate::{Part, PartKind};

/// The shape of a MIME part as section numbers walk it.
#[derive(Clone, Copy, Debug)]
pub enum PartShape<'a, P> {
    /// A leaf part.
    Single,
    /// A multipart and its body parts in order.
    Multipart(&'a [P]),
    /// A message/rfc822 part and the root part of the enclosed message.
    Message(&'a P),
}

/// A MIME part tree: this crate's parsed [`Part`] and the index's stored part records
/// both are one, so [`find_section`] is the one section-number lookup for both.
pub trait PartTree: Sized {
    /// What is inside this part.
    fn shape(&self) -> PartShape<'_, Self>;
}

impl PartTree for Part {
    fn shape(&self) -> PartShape<'_, Part> {
        match &self.kind {
            PartKind::Single => PartShape::Single,
            PartKind::Multipart(children) => PartShape::Multipart(children),
            PartKind::Message { root, .. } => PartShape::Message(root),
        }
    }
}

/// Number of parts in the subtree of `p`, itself included.
fn subtree_len<P: PartTree>(p: &P) -> usize {
    1 + match p.shape() {
        PartShape::Single => 0,
        PartShape::Multipart(children) => children.iter().map(subtree_len).sum(),
        PartShape::Message(inner) => subtree_len(inner),
    }
}

/// The n-th body part of multipart `p` (at pre-order position `pos`), with its position.
fn child<P: PartTree>(p: &P, pos: usize, n: u32) -> Option<(&P, usize)> {
    let PartShape::Multipart(children) = p.shape() else {
        return None;
    };
    let i = usize::try_from(n.checked_sub(1)?).ok()?;
    let at = pos + 1 + children.iter().take(i).map(subtree_len).sum::<usize>();
    children.get(i).map(|c| (c, at))
}

/// Part `n` inside a message whose root part is `msg` (at position `pos`): the n-th body
/// part of a multipart, or the body itself (n = 1) of a non-multipart message.
fn in_message<P: PartTree>(msg: &P, pos: usize, n: u32) -> Option<(&P, usize)> {
    match msg.shape() {
        PartShape::Multipart(_) => child(msg, pos, n),
        _ => (n == 1).then_some((msg, pos)),
    }
}

/// Finds the part a section part number names (RFC 3501 §6.4.5), with its position in
/// pre-order (a part before its children, a message/rfc822 part before the enclosed
/// message's root: the order in which the index stores header blocks). `[]` is the
/// message itself; `[1]` of a non-multipart message is its body (the returned part's
/// body; its header is the message header, which is what `1.MIME` returns in Dovecot);
/// numbers inside a message/rfc822 part count the parts of the encapsulated message.
///
/// `None` when there is no such part (Dovecot then answers an empty string).
pub fn find_section<'a, P: PartTree>(root: &'a P, section: &[u32]) -> Option<(&'a P, usize)> {
    let Some((&first, rest)) = section.split_first() else {
        return Some((root, 0));
    };
    let (mut cur, mut pos) = in_message(root, 0, first)?;
    for &n in rest {
        (cur, pos) = match cur.shape() {
            PartShape::Multipart(_) => child(cur, pos, n)?,
            PartShape::Message(inner) => in_message(inner, pos + 1, n)?,
            PartShape::Single => return None,
        };
    }
    Some((cur, pos))
}

/// [`find_section`] over a parsed message, without the position.
pub fn find_part<'a>(root: &'a Part, section: &[u32]) -> Option<&'a Part> {
    find_section(root, section).map(|(p, _)| p)
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
        let field = field_of(header_block, line);
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
