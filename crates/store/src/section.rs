//! Message sections for FETCH (RFC 3501 §6.4.5, RFC 3516): where a section's bytes are,
//! from the index's part tree alone (header-like sections come out of the index's stored
//! header blocks, the rest are byte ranges of the message file that a session streams),
//! and the bytes as they go out: header fields filtered, line ends as CRLF, a BINARY part's
//! Content-Transfer-Encoding undone. The sessions read and send; the MIME rules live here
//! and in `maildex_mime`, below the store.

use maildex_index::{Cached, PartKindRecord, PartRecord};
pub use maildex_mime::Encoding;
use maildex_mime::{CrlfWriter, Decoder};

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

/// Which fields of a header block a section keeps.
#[derive(Clone, Copy, Debug)]
pub enum Fields<'a> {
    /// Every field and the blank line: `HEADER`, `MIME`.
    All,
    /// `HEADER.FIELDS (names)`.
    Only(&'a [String]),
    /// `HEADER.FIELDS.NOT (names)`.
    Not(&'a [String]),
}

/// A header section's bytes, CRLF line ends, into `out`: the header block `raw` of the
/// message (`of_part` false) or of a MIME part (true: a part header has no message
/// fields, so the filtered form ends as Dovecot's does for parts).
pub fn header_section(raw: &[u8], fields: Fields<'_>, of_part: bool, out: &mut Vec<u8>) {
    match (fields, of_part) {
        (Fields::All, _) => maildex_mime::to_crlf(raw, out),
        (Fields::Only(names), false) => maildex_mime::header_fields(raw, names, false, out),
        (Fields::Not(names), false) => maildex_mime::header_fields(raw, names, true, out),
        (Fields::Only(names), true) => maildex_mime::header_fields_of_part(raw, names, false, out),
        (Fields::Not(names), true) => maildex_mime::header_fields_of_part(raw, names, true, out),
    }
}

/// Turns a section's bytes from the file into what goes out, chunk by chunk: CRLF line
/// ends (and NUL as 0x80, as Dovecot does) for BODY[], or a BINARY part decoded.
pub struct Converter(Conv);

enum Conv {
    Crlf(CrlfWriter),
    Decode(Decoder),
}

impl Converter {
    /// For BODY sections: bare LF becomes CRLF.
    pub fn crlf() -> Converter {
        Converter(Conv::Crlf(CrlfWriter::new()))
    }

    /// Converts the next chunk, appending to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        match &mut self.0 {
            Conv::Crlf(w) => w.write(chunk, out),
            Conv::Decode(d) => d.feed(chunk, out),
        }
    }

    /// After the last chunk: what a decoder still holds.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if let Conv::Decode(d) = &mut self.0 {
            d.finish(out);
        }
    }
}

/// Where a BINARY section's encoded bytes are (RFC 3516 §4.2).
pub enum BinaryPart {
    /// Bytes `start..end` of the file; `decoder()` undoes their encoding.
    Range {
        /// First byte.
        start: u64,
        /// Just past the last byte.
        end: u64,
        /// The part's transfer encoding.
        encoding: Encoding,
    },
    /// No such part: an empty string.
    Missing,
    /// A Content-Transfer-Encoding this server cannot undo (`NO [UNKNOWN-CTE]`).
    UnknownEncoding,
}

impl BinaryPart {
    /// A converter that decodes this part (identity for a missing one).
    pub fn decoder(&self) -> Converter {
        let enc = match self {
            BinaryPart::Range { encoding, .. } => *encoding,
            _ => Encoding::Identity,
        };
        Converter(Conv::Decode(Decoder::new(enc)))
    }
}

/// Locates `BINARY[path]` (RFC 3516 §4.2): `[]` is the whole message, a leaf part is its
/// body decoded per its Content-Transfer-Encoding (from the part's MIME header, kept in the
/// index as `headers`), a multipart or message part is its body as it is. `None` when the
/// index lacks the part's header block (a damaged record).
pub fn locate_binary(cached: &Cached, headers: &[u8], path: &[u32]) -> Option<BinaryPart> {
    let root = &cached.parts;
    if path.is_empty() {
        return Some(BinaryPart::Range {
            start: 0,
            end: root.end,
            encoding: Encoding::Identity,
        });
    }
    let Some((part, pos)) = find(root, path) else {
        return Some(BinaryPart::Missing);
    };
    let encoding = match part.kind {
        PartKindRecord::Single => {
            let block = header_block(root, headers, pos)?;
            let mut field = Vec::new();
            maildex_mime::header_fields(block, &[b"Content-Transfer-Encoding"], false, &mut field);
            let value = field
                .iter()
                .position(|&b| b == b':')
                .map(|i| maildex_mime::unfold(&field[i + 1..]));
            let value = value.filter(|v| !v.trim_ascii().is_empty());
            match Encoding::from_header(value.as_deref()) {
                Some(e) => e,
                None => return Some(BinaryPart::UnknownEncoding),
            }
        }
        _ => Encoding::Identity,
    };
    Some(BinaryPart::Range {
        start: part.body_start,
        end: part.end,
        encoding,
    })
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
    fn binary_encodings_come_from_each_part_header() {
        let msg = b"Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\
Content-Transfer-Encoding: quoted-printable\n\ncaf=C3=A9\n--b\nContent-Type: application/x\n\
Content-Transfer-Encoding: BASE64\n\nAAEC\n--b\nContent-Transfer-Encoding: x-uue\n\nzz\n--b\n\
Content-Transfer-Encoding: Binary\n\n\0\n--b--\n";
        let b = crate::build_record(msg, Default::default()).unwrap();
        let c = &b.record.cached;
        let enc = |p: &[u32]| match locate_binary(c, &b.headers, p) {
            Some(BinaryPart::Range { encoding, .. }) => Some(encoding),
            _ => None,
        };
        assert_eq!(enc(&[1]), Some(Encoding::QuotedPrintable));
        assert_eq!(enc(&[2]), Some(Encoding::Base64));
        assert!(matches!(
            locate_binary(c, &b.headers, &[3]),
            Some(BinaryPart::UnknownEncoding)
        ));
        // RFC 2045 §6.2: binary is decoded as the octets themselves, not as 7bit text
        assert_eq!(enc(&[4]), Some(Encoding::Binary));
        assert!(matches!(
            locate_binary(c, &b.headers, &[5]),
            Some(BinaryPart::Missing)
        ));
        assert_eq!(enc(&[]), Some(Encoding::Identity));
        // and the decoder undoes them
        let mut out = Vec::new();
        let part = locate_binary(c, &b.headers, &[1]).unwrap();
        let BinaryPart::Range { start, end, .. } = part else {
            unreachable!()
        };
        let mut d = part.decoder();
        d.feed(&msg[start as usize..end as usize], &mut out);
        d.finish(&mut out);
        assert!(out.starts_with("café".as_bytes()), "{out:?}");
    }

    #[test]
    fn corpus_messages_agree_with_the_parsed_tree() {
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(7);
        for i in 0..60 {
            check(&maildex_corpus::message(&mut rng, i, 0.05));
        }
    }
}
