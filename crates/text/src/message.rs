//! The text of a whole message, part by part, from its bytes and the part tree the index
//! stores (so the message is not MIME-parsed again: only each leaf's own header block is
//! read for its Content-Type, Content-Transfer-Encoding and charset).
//!
//! Every leaf part whose type is `text/*` (or untyped, which is text/plain, RFC 2045 §5.2)
//! has its body decoded from base64 or quoted-printable (RFC 2045 §6) and converted from
//! its `charset` parameter to UTF-8; other leaves (images, archives) are skipped, as
//! Dovecot's message search skips non-text parts. A multipart whose boundary never appears
//! is taken as text, so its content is not lost. Header blocks (the message's, each part's
//! MIME header, each encapsulated message's) are kept apart from bodies, as `name: value`
//! lines unfolded and RFC 2047 decoded. Each part's text stands alone: a string never runs
//! across two parts.

use std::borrow::Cow;

use maildex_index::{PartKindRecord, PartRecord};
use maildex_mime::Encoding;

use crate::charset::{push_utf8_lossy, to_utf8};
use crate::header::{decode_header_into, for_each_field};

/// What to do with `text/html` bodies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Html {
    /// The markup as written, tags and entities included: what Dovecot 2.3's SEARCH
    /// BODY/TEXT (without an fts plugin) matches against (see the crate docs).
    #[default]
    AsWritten,
    /// Reduced to its text (tags, comments, `<head>`, `<style>` and `<script>` dropped,
    /// entities decoded), for a full-text index.
    ToText,
}

/// The decoded text of one message, split by part. Not normalised: see
/// [`crate::SearchText`] for what SEARCH compares.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MessageText {
    /// Each header block (the message's first, then every part's in pre-order) as
    /// decoded `name: value` lines.
    pub headers: Vec<String>,
    /// Each text part's decoded body, in order.
    pub bodies: Vec<String>,
}

fn slice(msg: &[u8], start: u64, end: u64) -> &[u8] {
    let len = msg.len();
    let s = usize::try_from(start).unwrap_or(len).min(len);
    let e = usize::try_from(end).unwrap_or(len).min(len).max(s);
    &msg[s..e]
}

impl MessageText {
    /// The text of `msg` (the whole file) whose part tree is `root` (the index's
    /// [`maildex_index::Cached::parts`] of this file).
    pub fn extract(msg: &[u8], root: &PartRecord, html: Html) -> MessageText {
        let mut t = MessageText::default();
        t.walk(msg, root, false, html);
        t
    }

    /// The header texts of a message ([`MessageText::headers`] as [`MessageText::extract`]
    /// gives them) from its header blocks as the index keeps them (root, then every part
    /// in pre-order, concatenated: the `headers` column) and its part tree, without the
    /// file. A block cut short at the end of the file is cut short in `blocks` too.
    pub fn header_texts(blocks: &[u8], root: &PartRecord) -> Vec<String> {
        let mut out = Vec::new();
        let mut at = 0usize;
        root.walk(&mut |p| {
            let len =
                usize::try_from(p.body_start.saturating_sub(p.header_start)).unwrap_or(usize::MAX);
            let end = at.saturating_add(len).min(blocks.len());
            out.push(header_text(&blocks[at.min(end)..end]));
            at = end;
        });
        out
    }

    /// `in_multipart`: `part` is a body part of a multipart (its Content-* fields count
    /// without MIME-Version).
    fn walk(&mut self, msg: &[u8], part: &PartRecord, in_multipart: bool, html: Html) {
        let header = slice(msg, part.header_start, part.body_start);
        self.headers.push(header_text(header));
        match &part.kind {
            PartKindRecord::Multipart(children) if !children.is_empty() => {
                children.iter().for_each(|c| self.walk(msg, c, true, html));
            }
            PartKindRecord::Message(root) => self.walk(msg, root, false, html),
            PartKindRecord::Multipart(_) | PartKindRecord::Single => {
                let c = maildex_mime::part_content(header, in_multipart);
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
                let decoded = match Encoding::from_header(c.encoding.as_deref()) {
                    Some(enc @ (Encoding::Base64 | Encoding::QuotedPrintable)) => {
                        Cow::Owned(maildex_mime::decode_all(enc, raw))
                    }
                    _ => Cow::Borrowed(raw),
                };
                let charset = c
                    .params
                    .iter()
                    .find(|p| p.name.eq_ignore_ascii_case(b"charset"))
                    .map_or(&b"utf-8"[..], |p| &p.value[..]);
                let mut s = to_utf8(&decoded, charset);
                let is_html = c
                    .subtype
                    .as_deref()
                    .is_some_and(|s| s.eq_ignore_ascii_case(b"html"));
                if html == Html::ToText && is_html {
                    s = mail_parser::decoders::html::html_to_text(&s);
                }
                self.bodies.push(s);
            }
        }
    }
}

/// A header block as text: one line per field, `name: value` with the value unfolded
/// and decoded.
fn header_text(block: &[u8]) -> String {
    let mut out = String::with_capacity(block.len());
    for_each_field(block, |name, value| {
        push_utf8_lossy(&mut out, name);
        out.push_str(": ");
        decode_header_into(value, &mut out);
        out.push('\n');
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(msg: &[u8], html: Html) -> MessageText {
        let summary = maildex_mime::summarize(msg);
        let built = maildex_index::build(msg, &summary, Default::default()).expect("build");
        MessageText::extract(msg, &built.record.cached.parts, html)
    }

    const ALTERNATIVE: &[u8] = b"Subject: =?utf-8?q?caf=C3=A9?=\n\
MIME-Version: 1.0\n\
Content-Type: multipart/alternative; boundary=b\n\
\n\
--b\n\
Content-Type: text/plain; charset=iso-8859-1\n\
Content-Transfer-Encoding: quoted-printable\n\
\n\
Caf=E9 wor=\n\
ld\n\
--b\n\
Content-Type: text/html\n\
\n\
<p>Hello <b>wor</b>ld &amp; caf&eacute;</p>\n\
--b\n\
Content-Type: image/png\n\
Content-Transfer-Encoding: base64\n\
\n\
aGlkZGVu\n\
--b--\n";

    #[test]
    fn parts_decoded_headers_apart_images_skipped() {
        let t = text(ALTERNATIVE, Html::AsWritten);
        assert_eq!(t.headers.len(), 4, "message and three parts");
        assert!(t.headers[0].starts_with("Subject: café\n"));
        assert_eq!(t.bodies.len(), 2, "the image is not text");
        assert_eq!(t.bodies[0], "Café world");
        assert_eq!(t.bodies[1], "<p>Hello <b>wor</b>ld &amp; caf&eacute;</p>");
    }

    #[test]
    fn header_texts_from_the_stored_blocks_equal_the_files() {
        let cut = &ALTERNATIVE[..ALTERNATIVE.len() - 40];
        for msg in [ALTERNATIVE, cut, b"Subject: x\n" as &[u8], b""] {
            let summary = maildex_mime::summarize(msg);
            let built = maildex_index::build(msg, &summary, Default::default()).expect("build");
            let parts = &built.record.cached.parts;
            let from_file = MessageText::extract(msg, parts, Html::AsWritten).headers;
            assert_eq!(MessageText::header_texts(&built.headers, parts), from_file);
        }
    }

    #[test]
    fn html_to_text_only_when_asked() {
        let t = text(ALTERNATIVE, Html::ToText);
        assert_eq!(t.bodies[0], "Café world", "text/plain untouched");
        let html = &t.bodies[1];
        assert!(html.contains("Hello world & café"), "{html:?}");
        assert!(!html.contains('<'), "{html:?}");
    }
}
