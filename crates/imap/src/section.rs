//! Where the bytes of a FETCH body section are (RFC 3501 §6.4.5), from the index's part
//! tree alone: header-like sections come out of the index's stored header blocks, the rest
//! are byte ranges of the message file that the session streams.

use maildex_store::records::{PartKindRecord, PartRecord};

/// What part of the addressed part a section asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// The whole part: `BODY[]`, `BODY[1.2]`.
    All,
    /// `HEADER`, `HEADER.FIELDS`, `HEADER.FIELDS.NOT` (only of a message or a
    /// message/rfc822 part).
    Header,
    /// `TEXT` (only of a message or a message/rfc822 part).
    Text,
    /// `MIME`: the part's own MIME header (only with a part number).
    Mime,
}

/// Where a section's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Located<'a> {
    /// A header block stored in the index: `block` is its position in pre-order (the order
    /// of [`PartRecord::walk`], in which the index keeps header blocks), `len` its raw length.
    HeaderBlock {
        /// Position among the stored header blocks.
        block: usize,
        /// Raw length in the file.
        len: u64,
        /// Length with CRLF line ends.
        vsize: u64,
    },
    /// Bytes `start..end` of the message file; `vsize` with CRLF line ends.
    File {
        /// First byte.
        start: u64,
        /// Just past the last byte.
        end: u64,
        /// CRLF size.
        vsize: u64,
        /// The part whose body or whole this is (for BINARY decoding).
        part: &'a PartRecord,
    },
    /// No such part: Dovecot answers an empty string (RFC 3501 leaves it open).
    Missing,
}

/// The part a section number path names, with its pre-order position (the order of
/// [`PartRecord::walk`], in which the index keeps header blocks): RFC 3501 §6.4.5 by the
/// lookup the parsed tree uses too.
pub use maildex_mime::find_section as find;

/// Locates section `path` + `want` in a message whose root part is `root`.
pub fn locate<'a>(root: &'a PartRecord, path: &[u32], want: Want) -> Located<'a> {
    let Some((part, pos)) = find(root, path) else {
        return Located::Missing;
    };
    // HEADER and TEXT address a message: the message itself, or the message inside a
    // message/rfc822 part (RFC 3501 §6.4.5)
    let message = |want_header: bool| -> Located<'a> {
        let (msg, msg_pos) = if path.is_empty() {
            (part, pos)
        } else {
            match &part.kind {
                PartKindRecord::Message(inner) => (&**inner, pos + 1),
                _ => return Located::Missing,
            }
        };
        if want_header {
            header_of(msg, msg_pos)
        } else {
            Located::File {
                start: msg.body_start,
                end: msg.end,
                vsize: msg.body_vsize,
                part: msg,
            }
        }
    };
    match want {
        Want::Header => message(true),
        Want::Text => message(false),
        Want::Mime => {
            if path.is_empty() {
                Located::Missing
            } else {
                header_of(part, pos)
            }
        }
        Want::All if path.is_empty() => Located::File {
            start: 0,
            end: part.end,
            vsize: part.header_vsize + part.body_vsize,
            part,
        },
        Want::All => Located::File {
            start: part.body_start,
            end: part.end,
            vsize: part.body_vsize,
            part,
        },
    }
}

fn header_of(p: &PartRecord, pos: usize) -> Located<'_> {
    Located::HeaderBlock {
        block: pos,
        len: p.body_start - p.header_start,
        vsize: p.header_vsize,
    }
}

/// Splits the index's concatenated header blocks (root first, then pre-order) and returns
/// block `n`.
pub fn header_block<'h>(root: &PartRecord, blocks: &'h [u8], n: usize) -> Option<&'h [u8]> {
    let mut at = 0usize;
    let mut i = 0usize;
    let mut found = None;
    root.walk(&mut |p| {
        let len = usize::try_from(p.body_start.saturating_sub(p.header_start)).unwrap_or(0);
        if i == n {
            found = blocks.get(at..at.saturating_add(len));
        }
        at = at.saturating_add(len);
        i += 1;
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks every located section against the parsed tree and the message bytes.
    fn check(msg: &[u8]) {
        let summary = maildex_mime::summarize(msg);
        let built =
            maildex_index::build(msg, &summary, maildex_index::MessageState::default()).unwrap();
        let root = &built.record.cached.parts;
        let blocks = &built.headers;
        let mut paths: Vec<Vec<u32>> = vec![vec![]];
        for a in 1..4 {
            paths.push(vec![a]);
            for b in 1..4 {
                paths.push(vec![a, b]);
                for c in 1..3 {
                    paths.push(vec![a, b, c]);
                }
            }
        }
        for path in &paths {
            for want in [Want::All, Want::Header, Want::Text, Want::Mime] {
                let got = match locate(root, path, want) {
                    Located::Missing => None,
                    Located::HeaderBlock { block, len, vsize } => {
                        let b = header_block(root, blocks, block).unwrap();
                        assert_eq!(b.len() as u64, len);
                        assert_eq!(maildex_mime::crlf_len(b), vsize);
                        Some(b.to_vec())
                    }
                    Located::File {
                        start, end, vsize, ..
                    } => {
                        let b = &msg[start as usize..end as usize];
                        assert_eq!(maildex_mime::crlf_len(b), vsize, "{path:?} {want:?}");
                        Some(b.to_vec())
                    }
                };
                let want_bytes = reference(&summary, msg, path, want);
                assert_eq!(got, want_bytes, "{path:?} {want:?}");
            }
        }
    }

    /// The same answer from the parsed tree (maildex_mime::find_part).
    fn reference(
        s: &maildex_mime::Summary,
        msg: &[u8],
        path: &[u32],
        want: Want,
    ) -> Option<Vec<u8>> {
        use maildex_mime::PartKind;
        let part = maildex_mime::find_part(&s.root, path)?;
        let slice = |a: u64, b: u64| msg[a as usize..b as usize].to_vec();
        let target = if path.is_empty() {
            Some(part)
        } else if let PartKind::Message { root, .. } = &part.kind {
            Some(&**root)
        } else {
            None
        };
        match want {
            Want::All if path.is_empty() => Some(slice(0, part.end)),
            Want::All => Some(slice(part.body_start, part.end)),
            Want::Mime if path.is_empty() => None,
            Want::Mime => Some(slice(part.header_start, part.body_start)),
            Want::Header => target.map(|m| slice(m.header_start, m.body_start)),
            Want::Text => target.map(|m| slice(m.body_start, m.end)),
        }
    }

    #[test]
    fn nested_multipart_and_message_parts() {
        check(
            b"From: a\nSubject: x\nContent-Type: multipart/mixed; boundary=b\n\npre\n--b\n\
Content-Type: text/plain\n\nhello\n--b\nContent-Type: message/rfc822\n\n\
Subject: inner\nContent-Type: multipart/alternative; boundary=c\n\n--c\n\
Content-Type: text/plain\n\ninner text\n--c\nContent-Type: text/html\n\n<p>x</p>\n--c--\n\
--b\nContent-Type: application/octet-stream\nContent-Transfer-Encoding: base64\n\nAAAA\n--b--\n",
        );
    }

    #[test]
    fn single_part_message_and_message_in_message() {
        check(b"Subject: plain\r\n\r\nbody\r\nline 2\r\n");
        check(b"Subject: outer\nContent-Type: message/rfc822\n\nSubject: in\n\nbody\n");
        check(b"no header separator at all");
    }

    #[test]
    fn corpus_messages_agree_with_the_parsed_tree() {
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(7);
        for i in 0..60 {
            check(&maildex_corpus::message(&mut rng, i, 0.05));
        }
    }
}
