//! The searchable text of a whole message for BODY and TEXT.
//!
//! A simple MIME walk over [`maildex_mime::summarize`]'s part tree: every
//! leaf part whose type is `text/*` (or untyped, which is text/plain, RFC
//! 2045 §5.2) has its body decoded from base64 or quoted-printable (RFC 2045
//! §6) and converted from its `charset` parameter to UTF-8; other leaves
//! (images, archives) are skipped, as Dovecot's message search skips
//! non-text parts. A multipart whose boundary never appears is searched as
//! text, so its content is not lost. Header blocks (the message's, each
//! part's MIME header, each encapsulated message's) count for TEXT only
//! (RFC 3501 §6.4.4: TEXT is "in the header or body"); their fields are
//! unfolded and RFC 2047 decoded. Each part is searched on its own: a
//! string never matches across two parts.

use maildex_mime::{Part, PartKind};

use super::text;

/// Normalised text of one message, split by part.
#[derive(Debug, Default)]
pub(crate) struct MessageText {
    /// Each header block as decoded `name: value` lines.
    pub headers: Vec<String>,
    /// Each text part's decoded body.
    pub bodies: Vec<String>,
}

fn slice(msg: &[u8], start: u64, end: u64) -> &[u8] {
    let len = msg.len();
    let s = usize::try_from(start).unwrap_or(len).min(len);
    let e = usize::try_from(end).unwrap_or(len).min(len).max(s);
    &msg[s..e]
}

impl MessageText {
    /// Walks `msg` (the whole file) once.
    pub(crate) fn new(msg: &[u8]) -> MessageText {
        let summary = maildex_mime::summarize(msg);
        let mut t = MessageText::default();
        t.walk(msg, &summary.root);
        t
    }

    fn walk(&mut self, msg: &[u8], part: &Part) {
        self.headers
            .push(header_text(slice(msg, part.header_start, part.body_start)));
        match &part.kind {
            PartKind::Multipart(children) if !children.is_empty() => {
                children.iter().for_each(|c| self.walk(msg, c));
            }
            PartKind::Message { root, .. } => self.walk(msg, root),
            PartKind::Multipart(_) | PartKind::Single => {
                let c = &part.content;
                let is_text = match &c.media_type {
                    None => true,
                    Some(t) => {
                        t.eq_ignore_ascii_case(b"text") || t.eq_ignore_ascii_case(b"multipart")
                    }
                };
                if !is_text {
                    return;
                }
                let raw = slice(msg, part.body_start, part.end);
                let decoded = match maildex_mime::Encoding::from_header(c.encoding.as_deref()) {
                    Some(
                        enc @ (maildex_mime::Encoding::Base64
                        | maildex_mime::Encoding::QuotedPrintable),
                    ) => maildex_mime::decode_all(enc, raw),
                    _ => raw.to_vec(),
                };
                let charset = c
                    .params
                    .iter()
                    .find(|p| p.name.eq_ignore_ascii_case(b"charset"))
                    .map_or(&b"utf-8"[..], |p| &p.value[..]);
                let s = text::to_utf8(&decoded, charset);
                self.bodies.push(text::normalize(&s));
            }
        }
    }
}

/// A header block as searchable text: one line per field, `name: value`
/// with the value unfolded and decoded.
fn header_text(block: &[u8]) -> String {
    let mut out = String::with_capacity(block.len());
    for (name, value) in text::fields(block) {
        out.push_str(&String::from_utf8_lossy(name));
        out.push_str(": ");
        out.push_str(&text::decode_header(&value));
        out.push('\n');
    }
    text::normalize(&out)
}
