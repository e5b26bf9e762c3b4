//! Content-Transfer-Encoding decoders (RFC 2045 §6) that work chunk by chunk, so a part of
//! any size is decoded with a bounded buffer (IMAP BINARY, RFC 3516, and body search).

/// Which decoder a part needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// `7bit`, `8bit` or no header: the bytes as they are, bare LF as CRLF (these are
    /// line-oriented, RFC 2045 §2.7/§2.8), NUL kept (BINARY sends it in a literal8).
    Identity,
    /// `binary` (RFC 2045 §2.9, §6.2): the stored octets exactly; no line ends are
    /// rewritten, since binary data has no lines (RFC 3516 §4.2 returns them as they are).
    Binary,
    /// `base64` (RFC 2045 §6.8).
    Base64,
    /// `quoted-printable` (RFC 2045 §6.7).
    QuotedPrintable,
}

impl Encoding {
    /// The encoding a Content-Transfer-Encoding value names; `None` for one we do not
    /// know (IMAP answers `NO [UNKNOWN-CTE]`, RFC 3516 §4.3). Case and surrounding
    /// whitespace do not matter; an absent header is `7bit` (RFC 2045 §6.1).
    pub fn from_header(value: Option<&[u8]>) -> Option<Encoding> {
        let Some(v) = value else {
            return Some(Encoding::Identity);
        };
        let v = v.trim_ascii();
        let is = |name: &str| v.eq_ignore_ascii_case(name.as_bytes());
        if v.is_empty() || is("7bit") || is("8bit") {
            Some(Encoding::Identity)
        } else if is("binary") {
            Some(Encoding::Binary)
        } else if is("base64") {
            Some(Encoding::Base64)
        } else if is("quoted-printable") {
            Some(Encoding::QuotedPrintable)
        } else {
            None
        }
    }
}

/// A streaming decoder for one part's body.
#[derive(Debug)]
pub enum Decoder {
    /// LF -> CRLF, nothing else.
    Identity(crate::CrlfWriter),
    /// The bytes unchanged.
    Binary,
    /// base64.
    Base64(Base64Decoder),
    /// quoted-printable.
    QuotedPrintable(QpDecoder),
}

impl Decoder {
    /// A decoder for `enc`.
    pub fn new(enc: Encoding) -> Decoder {
        match enc {
            Encoding::Identity => Decoder::Identity(crate::CrlfWriter::keeping_nul()),
            Encoding::Binary => Decoder::Binary,
            Encoding::Base64 => Decoder::Base64(Base64Decoder::default()),
            Encoding::QuotedPrintable => Decoder::QuotedPrintable(QpDecoder::default()),
        }
    }

    /// Decodes a chunk, appending to `out`.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        match self {
            Decoder::Identity(w) => w.write(input, out),
            Decoder::Binary => out.extend_from_slice(input),
            Decoder::Base64(d) => d.feed(input, out),
            Decoder::QuotedPrintable(d) => d.feed(input, out),
        }
    }

    /// Ends the input, appending what was held back.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if let Decoder::QuotedPrintable(d) = self {
            d.finish(out);
        }
    }
}

/// base64 (RFC 2045 §6.8): characters outside the alphabet (line breaks, spaces, stray
/// bytes) are ignored, as the RFC says decoders must; `=` ends the data.
#[derive(Debug, Default)]
pub struct Base64Decoder {
    acc: u32,
    bits: u8,
    ended: bool,
}

fn b64_value(c: u8) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    } as u32)
}

impl Base64Decoder {
    /// Decodes a chunk.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        out.reserve(input.len() / 4 * 3 + 3);
        for &c in input {
            if c == b'=' {
                self.ended = true;
                return;
            }
            let Some(v) = b64_value(c) else { continue };
            self.acc = (self.acc << 6) | v;
            self.bits += 6;
            if self.bits >= 8 {
                self.bits -= 8;
                out.push((self.acc >> self.bits) as u8);
                self.acc &= (1 << self.bits) - 1;
            }
        }
    }
}

/// Longest line a QP decoder holds before decoding it in pieces (QP lines are at most 76
/// octets, RFC 2045 §6.7 rule 5; this bounds memory on hostile input).
const QP_MAX_LINE: usize = 64 * 1024;

/// quoted-printable (RFC 2045 §6.7): `=XX` is an octet, `=` at the end of a line is a soft
/// line break, trailing whitespace on a line is dropped (rule 3), hard line breaks come out
/// as CRLF. A malformed `=` is kept as it is, as Dovecot does.
#[derive(Debug, Default)]
pub struct QpDecoder {
    line: Vec<u8>,
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

impl QpDecoder {
    /// Decodes a chunk.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let mut rest = input;
        while let Some(i) = memchr::memchr(b'\n', rest) {
            if self.line.is_empty() {
                // a whole line in this chunk: decoded where it is, not copied first
                decode_qp_line(&rest[..i], true, out);
            } else {
                self.line.extend_from_slice(&rest[..i]);
                self.end_line(true, out);
            }
            rest = &rest[i + 1..];
        }
        self.line.extend_from_slice(rest);
        if self.line.len() > QP_MAX_LINE {
            // decode all but a tail that may hold "=X" or trailing whitespace: the split
            // never falls inside an escape or a run of blanks
            let mut keep = self.line.len() - 2;
            while keep > 0 && matches!(self.line[keep - 1], b'=' | b' ' | b'\t' | b'\r') {
                keep -= 1;
            }
            while keep > 1 && self.line[keep - 2] == b'=' {
                keep -= 2;
            }
            if keep == 0 {
                return; // a line of blanks and '=': held until its end (bounded by input)
            }
            let tail = self.line.split_off(keep);
            decode_qp_text(&self.line, out);
            self.line = tail;
        }
    }

    /// Ends the input: a last line without a line break gets none.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if !self.line.is_empty() {
            self.end_line(false, out);
        }
    }

    fn end_line(&mut self, hard_break: bool, out: &mut Vec<u8>) {
        decode_qp_line(&self.line, hard_break, out);
        self.line.clear();
    }
}

/// One line of quoted-printable (without its LF): trailing CR and blanks dropped, a final
/// `=` a soft break, otherwise CRLF when `hard_break`.
fn decode_qp_line(line: &[u8], hard_break: bool, out: &mut Vec<u8>) {
    let mut l = line;
    if let Some(stripped) = l.strip_suffix(b"\r") {
        l = stripped;
    }
    while let Some((&last, init)) = l.split_last() {
        if last == b' ' || last == b'\t' {
            l = init;
        } else {
            break;
        }
    }
    if let Some(soft) = l.strip_suffix(b"=") {
        decode_qp_text(soft, out);
    } else {
        decode_qp_text(l, out);
        if hard_break {
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// `=XX` escapes decoded, everything else (a malformed `=` included) copied: the runs
/// between two `=` are copied whole (a byte at a time, this was a tenth of indexing a
/// message's full text).
fn decode_qp_text(text: &[u8], out: &mut Vec<u8>) {
    let mut rest = text;
    while let Some(i) = memchr::memchr(b'=', rest) {
        out.extend_from_slice(&rest[..i]);
        if let (Some(&h), Some(&l)) = (rest.get(i + 1), rest.get(i + 2)) {
            if let (Some(h), Some(l)) = (hex(h), hex(l)) {
                out.push(h << 4 | l);
                rest = &rest[i + 3..];
                continue;
            }
        }
        out.push(b'=');
        rest = &rest[i + 1..];
    }
    out.extend_from_slice(rest);
}

/// Decodes a whole body at once.
pub fn decode_all(enc: Encoding, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    let mut d = Decoder::new(enc);
    d.feed(body, &mut out);
    d.finish(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn base64_ignores_line_breaks_and_stops_at_padding() {
        assert_eq!(
            decode_all(Encoding::Base64, b"aGVs\nbG8g\r\nd29y bGQ=\nignored"),
            b"hello world"
        );
        assert_eq!(decode_all(Encoding::Base64, b"AAEC"), [0, 1, 2]);
    }

    #[test]
    fn qp_soft_breaks_hex_and_trailing_space() {
        let got = decode_all(
            Encoding::QuotedPrintable,
            b"caf=C3=A9 =\nau lait  \nx=3Dy\n=ZZ bad\nlast",
        );
        assert_eq!(got, "café au lait\r\nx=y\r\n=ZZ bad\r\nlast".as_bytes());
    }

    #[test]
    fn identity_converts_line_ends_only() {
        assert_eq!(
            decode_all(Encoding::Identity, b"a\0\nb\r\n"),
            b"a\0\r\nb\r\n"
        );
    }

    #[test]
    fn binary_is_the_bytes_as_stored() {
        let stored = b"\x00\x2d\xe4\x0a\x0d\x0a\x0a";
        assert_eq!(decode_all(Encoding::Binary, stored), stored);
        assert_eq!(
            Encoding::from_header(Some(b"Binary")),
            Some(Encoding::Binary)
        );
    }

    #[test]
    fn encodings_from_headers() {
        assert_eq!(Encoding::from_header(None), Some(Encoding::Identity));
        assert_eq!(
            Encoding::from_header(Some(b" BASE64 ")),
            Some(Encoding::Base64)
        );
        assert_eq!(
            Encoding::from_header(Some(b"Quoted-Printable")),
            Some(Encoding::QuotedPrintable)
        );
        assert_eq!(Encoding::from_header(Some(b"x-uuencode")), None);
    }

    #[test]
    fn long_lines_decode_in_pieces_like_whole() {
        let mut body = Vec::new();
        for i in 0..40_000u32 {
            body.extend_from_slice(if i % 7 == 0 {
                b"=3D"
            } else if i % 5 == 0 {
                b"  "
            } else {
                b"ab"
            });
        }
        body.extend_from_slice(b"   \nend");
        let whole = decode_all(Encoding::QuotedPrintable, &body);
        let mut d = Decoder::new(Encoding::QuotedPrintable);
        let mut out = Vec::new();
        for chunk in body.chunks(4093) {
            d.feed(chunk, &mut out);
        }
        d.finish(&mut out);
        assert_eq!(out, whole);
        assert!(whole.ends_with(b"ab\r\nend"));
    }

    /// Quoted-printable a line and a byte at a time, as the decoder was before it copied
    /// runs: the decoder's output must not change.
    fn qp_bytewise(body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let lines: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
        for (n, line) in lines.iter().enumerate() {
            let hard = n + 1 < lines.len();
            let mut l = line.strip_suffix(b"\r").unwrap_or(line);
            while let Some((b' ' | b'\t', init)) = l.split_last() {
                l = init;
            }
            let (text, soft) = match l.strip_suffix(b"=") {
                Some(t) => (t, true),
                None => (l, false),
            };
            let mut i = 0;
            while i < text.len() {
                let c = text[i];
                if c == b'=' && i + 2 < text.len() {
                    if let (Some(h), Some(l)) = (hex(text[i + 1]), hex(text[i + 2])) {
                        out.push(h << 4 | l);
                        i += 3;
                        continue;
                    }
                }
                out.push(c);
                i += 1;
            }
            if hard && !soft {
                out.extend_from_slice(b"\r\n");
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn qp_runs_decode_as_bytes_one_at_a_time(body in proptest::collection::vec(
            prop_oneof![Just(b'='), Just(b'\n'), Just(b' '), Just(b'\t'), Just(b'A'), Just(b'3'), Just(b'f'), Just(b'\r'), any::<u8>()], 0..400)) {
            prop_assert_eq!(decode_all(Encoding::QuotedPrintable, &body), qp_bytewise(&body));
        }

        /// Any chunking of the input decodes to the same bytes as the whole input.
        #[test]
        fn chunking_does_not_matter(body in proptest::collection::vec(
            prop_oneof![Just(b'='), Just(b'\n'), Just(b' '), Just(b'A'), Just(b'3'), Just(b'D'), Just(b'\r'), any::<u8>()], 0..400),
            cuts in proptest::collection::vec(0usize..400, 0..8),
            enc in prop_oneof![Just(Encoding::Base64), Just(Encoding::QuotedPrintable), Just(Encoding::Identity), Just(Encoding::Binary)]) {
            let whole = decode_all(enc, &body);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(body.len())).collect();
            cuts.sort_unstable();
            let mut d = Decoder::new(enc);
            let mut out = Vec::new();
            let mut at = 0;
            for c in cuts.into_iter().chain([body.len()]) {
                d.feed(&body[at..c], &mut out);
                at = c;
            }
            d.finish(&mut out);
            prop_assert_eq!(out, whole);
        }
    }
}
