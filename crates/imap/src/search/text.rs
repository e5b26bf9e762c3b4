//! Text helpers for SEARCH: header field lookup, RFC 2047 decoding, charset
//! conversion and the normalisation both sides of a comparison go through.

/// RFC 5322 WSP.
fn is_wsp(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Every field of `block` in order as (name, raw body): the body is the
/// text after the colon (leading white space skipped), continuation lines
/// joined with their line breaks (RFC 5322 §2.2.3), CR dropped. The block
/// ends at the first empty line; a line without a colon is skipped.
pub(crate) fn fields(block: &[u8]) -> Vec<(&[u8], Vec<u8>)> {
    let mut out: Vec<(&[u8], Vec<u8>)> = Vec::new();
    walk_fields(
        block,
        |_| true,
        |line| match line {
            Line::Start(n, v) => out.push((n, v.to_vec())),
            Line::More(more) => {
                if let Some((_, v)) = out.last_mut() {
                    v.push(b'\n');
                    v.extend_from_slice(more);
                }
            }
        },
    );
    out
}

/// A line of a kept field, as [`walk_fields`] hands it out.
enum Line<'b> {
    /// The field's name and the value on its first line (leading white space skipped).
    Start(&'b [u8], &'b [u8]),
    /// A continuation line, CR dropped.
    More(&'b [u8]),
}

/// Walks the fields of a header block: `want(name)` decides whether a field is kept; the
/// lines of kept fields go to `emit`. Stops at the blank line.
fn walk_fields<'b>(
    block: &'b [u8],
    mut want: impl FnMut(&[u8]) -> bool,
    mut emit: impl FnMut(Line<'b>),
) {
    let mut pos = 0;
    let mut in_field = false;
    while pos < block.len() {
        let end = memchr::memchr(b'\n', &block[pos..]).map_or(block.len(), |i| pos + i);
        let mut line = &block[pos..end];
        if let Some(stripped) = line.strip_suffix(b"\r") {
            line = stripped;
        }
        pos = end + 1;
        if line.is_empty() {
            break;
        }
        if is_wsp(line[0]) {
            if in_field {
                emit(Line::More(line));
            }
            continue;
        }
        let Some(colon) = memchr::memchr(b':', line) else {
            in_field = false;
            continue;
        };
        let mut n = &line[..colon];
        while let Some((&last, rest)) = n.split_last() {
            if !is_wsp(last) {
                break;
            }
            n = rest;
        }
        in_field = want(n);
        if in_field {
            let v = &line[colon + 1..];
            let skip = v.iter().position(|&b| !is_wsp(b)).unwrap_or(v.len());
            emit(Line::Start(n, &v[skip..]));
        }
    }
}

/// The unfolded raw values of every field called `name` (case-insensitive), in order.
/// Copies only those fields: a SEARCH runs this on every message.
pub(crate) fn field_values(block: &[u8], name: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    walk_fields(
        block,
        |n| n.eq_ignore_ascii_case(name),
        |line| match line {
            Line::Start(_, v) => out.push(v.to_vec()),
            Line::More(more) => {
                if let Some(v) = out.last_mut() {
                    v.push(b'\n');
                    v.extend_from_slice(more);
                }
            }
        },
    );
    out
}

/// Lower-cases for comparison: Unicode lowercase of each character (ASCII
/// case folding included), which is what "case-insensitive" means for the
/// UTF-8 strings SEARCH carries (RFC 9051 §6.4.4; Dovecot's normaliser goes
/// further with titlecase folding, which we leave out).
pub(crate) fn normalize(s: &str) -> String {
    if s.is_ascii() {
        s.to_ascii_lowercase()
    } else {
        s.to_lowercase()
    }
}

/// A Subject value for SUBJECT: unfolded, leading white space dropped and
/// every run of spaces and tabs made one space (Dovecot's `compress_lwsp`,
/// which SUBJECT uses and HEADER does not), so `a b` finds `a\tb`.
pub(crate) fn compress_lwsp(raw: &[u8]) -> Vec<u8> {
    let v = maildex_mime::unfold(raw);
    let mut out = Vec::with_capacity(v.len());
    let mut prev_wsp = true;
    for &c in &v {
        if is_wsp(c) {
            if !prev_wsp {
                out.push(b' ');
            }
            prev_wsp = true;
        } else {
            out.push(c);
            prev_wsp = false;
        }
    }
    out
}

/// A header value as text: unfolded (RFC 5322 §2.2.3) and with RFC 2047
/// encoded words decoded; white space between two adjacent encoded words
/// is dropped (RFC 2047 §6.2). Like Dovecot, encoded words are recognised
/// anywhere (not only as whole atoms), and a malformed one stays as written.
pub(crate) fn decode_header(raw: &[u8]) -> String {
    let v = maildex_mime::unfold(raw);
    let mut out = String::with_capacity(v.len());
    let mut i = 0;
    let mut plain_start = 0;
    let mut last_was_word = false;
    while i < v.len() {
        if v[i] == b'=' && v.get(i + 1) == Some(&b'?') {
            if let Some((text, end)) = encoded_word(&v, i) {
                let between = &v[plain_start..i];
                if !(last_was_word && between.iter().all(|&b| is_wsp(b))) {
                    out.push_str(&String::from_utf8_lossy(between));
                }
                out.push_str(&text);
                i = end;
                plain_start = end;
                last_was_word = true;
                continue;
            }
        }
        if !is_wsp(v[i]) {
            last_was_word = false;
        }
        i += 1;
    }
    out.push_str(&String::from_utf8_lossy(&v[plain_start..]));
    out
}

/// Decodes the encoded word `=?charset[*lang]?B|Q?text?=` starting at `start`
/// (RFC 2047 §2, RFC 2231 §5 language suffix); returns its text and the
/// offset just past it.
fn encoded_word(v: &[u8], start: usize) -> Option<(String, usize)> {
    let rest = &v[start + 2..];
    let q1 = rest.iter().position(|&b| b == b'?')?;
    let charset = &rest[..q1];
    if charset.is_empty() || charset.iter().any(|&b| b <= b' ') {
        return None;
    }
    let enc = *rest.get(q1 + 1)?;
    if rest.get(q1 + 2) != Some(&b'?') {
        return None;
    }
    let body = &rest[q1 + 3..];
    let close = body.windows(2).position(|w| w == b"?=")?;
    let payload = &body[..close];
    if payload.iter().any(|&b| b == b' ' || b == b'\t') {
        return None;
    }
    let bytes = match enc.to_ascii_uppercase() {
        b'B' => maildex_mime::decode_all(maildex_mime::Encoding::Base64, payload),
        b'Q' => quoted_printable(payload, true),
        _ => return None,
    };
    let charset = charset.split(|&b| b == b'*').next().unwrap_or(charset);
    let end = start + 2 + q1 + 3 + close + 2;
    Some((to_utf8(&bytes, charset), end))
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The Q encoding of RFC 2047 §4.2 when `q_word` (`_` is a space), or plain
/// quoted-printable decoding of a short string (message bodies go through
/// `maildex_mime::decode_all`, which streams). Soft line breaks (`=` at the
/// end of a line, trailing white space allowed) are removed; a malformed `=`
/// stays.
pub(crate) fn quoted_printable(input: &[u8], q_word: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        if b == b'=' {
            if let (Some(h), Some(l)) = (
                input.get(i + 1).copied().and_then(hex),
                input.get(i + 2).copied().and_then(hex),
            ) {
                out.push((h << 4) | l);
                i += 3;
                continue;
            }
            // Soft line break: "=" [WSP] (CRLF / LF).
            let mut j = i + 1;
            while j < input.len() && is_wsp(input[j]) {
                j += 1;
            }
            if input.get(j) == Some(&b'\r') && input.get(j + 1) == Some(&b'\n') {
                i = j + 2;
                continue;
            }
            if input.get(j) == Some(&b'\n') || j == input.len() {
                i = j + 1;
                continue;
            }
            out.push(b);
        } else if b == b'_' && q_word {
            out.push(b' ');
        } else {
            out.push(b);
        }
        i += 1;
    }
    out
}

/// Windows-1252 0x80..=0x9F (the rest of the high half is ISO-8859-1).
const CP1252_HIGH: [char; 32] = [
    '\u{20AC}', '\u{81}', '\u{201A}', '\u{0192}', '\u{201E}', '\u{2026}', '\u{2020}', '\u{2021}',
    '\u{02C6}', '\u{2030}', '\u{0160}', '\u{2039}', '\u{0152}', '\u{8D}', '\u{017D}', '\u{8F}',
    '\u{90}', '\u{2018}', '\u{2019}', '\u{201C}', '\u{201D}', '\u{2022}', '\u{2013}', '\u{2014}',
    '\u{02DC}', '\u{2122}', '\u{0161}', '\u{203A}', '\u{0153}', '\u{9D}', '\u{017E}', '\u{0178}',
];

/// ISO-8859-15's differences from ISO-8859-1.
fn latin9(b: u8) -> char {
    match b {
        0xA4 => '\u{20AC}',
        0xA6 => '\u{0160}',
        0xA8 => '\u{0161}',
        0xB4 => '\u{017D}',
        0xB8 => '\u{017E}',
        0xBC => '\u{0152}',
        0xBD => '\u{0153}',
        0xBE => '\u{0178}',
        _ => char::from(b),
    }
}

/// UTF-7 (RFC 2152): `+` starts base64 of UTF-16 code units, ended by any
/// byte outside the base64 alphabet (a `-` there is dropped); `+-` is `+`.
/// Broken sequences become U+FFFD.
fn utf7(bytes: &[u8]) -> String {
    let is_b64 = |c: &u8| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/';
    let mut out = String::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        i += 1;
        if c != b'+' {
            out.push(char::from(c));
            continue;
        }
        let run = bytes[i..].iter().take_while(|c| is_b64(c)).count();
        if run == 0 && bytes.get(i) == Some(&b'-') {
            out.push('+');
            i += 1;
            continue;
        }
        let octets = maildex_mime::decode_all(maildex_mime::Encoding::Base64, &bytes[i..i + run]);
        let units = octets
            .chunks_exact(2)
            .map(|p| u16::from_be_bytes([p[0], p[1]]));
        out.extend(char::decode_utf16(units).map(|r| r.unwrap_or('\u{FFFD}')));
        i += run;
        if bytes.get(i) == Some(&b'-') {
            i += 1;
        }
    }
    out
}

/// Converts `bytes` in `charset` (MIME charset name, any case) to UTF-8.
/// Known: UTF-8, US-ASCII, ISO-8859-1 (and its aliases), ISO-8859-15,
/// Windows-1252, UTF-7. Anything else is read as UTF-8, invalid sequences
/// replaced, so its ASCII text still matches.
pub(crate) fn to_utf8(bytes: &[u8], charset: &[u8]) -> String {
    let cs = String::from_utf8_lossy(charset).to_ascii_lowercase();
    match cs.as_str() {
        "iso-8859-1" | "iso8859-1" | "latin1" | "latin-1" | "l1" | "iso_8859-1" => {
            bytes.iter().map(|&b| char::from(b)).collect()
        }
        "iso-8859-15" | "iso8859-15" | "latin9" | "latin-9" => {
            bytes.iter().map(|&b| latin9(b)).collect()
        }
        "windows-1252" | "cp1252" | "x-cp1252" => bytes
            .iter()
            .map(|&b| match b {
                0x80..=0x9F => CP1252_HIGH[usize::from(b - 0x80)],
                _ => char::from(b),
            })
            .collect(),
        "utf-7" | "utf7" | "unicode-1-1-utf-7" => utf7(bytes),
        _ => String::from_utf8_lossy(bytes).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_continuations_and_repeats() {
        let block = b"Subject: one\r\n two\r\nX-A : a\nx-a: b\n\nX-A: body\n";
        assert_eq!(field_values(block, b"subject"), vec![b"one\n two".to_vec()]);
        assert_eq!(
            field_values(block, b"X-a"),
            vec![b"a".to_vec(), b"b".to_vec()]
        );
        assert!(field_values(block, b"to").is_empty());
    }

    #[test]
    fn encoded_words_decoded_and_joined() {
        assert_eq!(
            decode_header(b"=?UTF-8?B?SMOpbGxv?= =?ISO-8859-1?Q?w=F6rld?= !"),
            "Héllowörld !"
        );
        assert_eq!(decode_header(b"a =?utf-8?q?b_c?=\n d"), "a b c d");
        // Malformed words stay as written.
        assert_eq!(
            decode_header(b"=?utf-8?X?abc?= =?oops"),
            "=?utf-8?X?abc?= =?oops"
        );
        assert_eq!(
            decode_header(b"=?windows-1252?Q?=80_price?="),
            "\u{20AC} price"
        );
        // UTF-7 (RFC 2152), as Dovecot decodes it: not searchable in its raw form
        assert_eq!(
            decode_header(b"=?utf-7?Q?Heinz_M+APw-ller?= +- =?UTF-7?B?KzJEM2VBQS0=?="),
            "Heinz M\u{fc}ller +- \u{1F600}"
        );
    }

    #[test]
    fn qp_soft_breaks_and_base64_junk() {
        assert_eq!(quoted_printable(b"a=3Db=\r\nc= \nd=zz", false), b"a=bcd=zz");
    }

    #[test]
    fn normalize_folds_unicode() {
        assert_eq!(normalize("ÉCOLE Straße"), "école straße");
        assert_eq!(normalize("MiXeD"), "mixed");
    }
}
