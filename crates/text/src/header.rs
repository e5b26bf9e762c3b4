//! Header fields as text: field lookup in a raw header block, unfolding, RFC 2047
//! encoded words.

use crate::charset::{push_utf8_lossy, to_utf8};

/// RFC 5322 WSP.
fn is_wsp(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Every field of `block` in order as (name, raw body): the body is the
/// text after the colon (leading white space skipped), continuation lines
/// joined with their line breaks (RFC 5322 §2.2.3), CR dropped. The block
/// ends at the first empty line; a line without a colon is skipped.
pub fn fields(block: &[u8]) -> Vec<(&[u8], Vec<u8>)> {
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

/// [`fields`] handed out one at a time, each value in one buffer reused for every field
/// (a header block of twenty fields made twenty vectors).
pub(crate) fn for_each_field(block: &[u8], mut each: impl FnMut(&[u8], &[u8])) {
    let mut name: Option<&[u8]> = None;
    let mut value = Vec::new();
    walk_fields(
        block,
        |_| true,
        |line| match line {
            Line::Start(n, v) => {
                if let Some(done) = name.replace(n) {
                    each(done, &value);
                }
                value.clear();
                value.extend_from_slice(v);
            }
            Line::More(more) => {
                value.push(b'\n');
                value.extend_from_slice(more);
            }
        },
    );
    if let Some(done) = name {
        each(done, &value);
    }
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
pub fn field_values(block: &[u8], name: &[u8]) -> Vec<Vec<u8>> {
    fields_values(block, &[name]).pop().unwrap_or_default()
}

/// [`field_values`] of each of `names`, in one walk of the block: indexing a message
/// looks up about fifteen fields, and a walk per field was most of the time spent on
/// its search fields and sort keys (a header block is 2.5-6 KB of Received chains and
/// signatures). A name given twice gets its values at its first place only.
pub fn fields_values(block: &[u8], names: &[&[u8]]) -> Vec<Vec<Vec<u8>>> {
    let mut out: Vec<Vec<Vec<u8>>> = vec![Vec::new(); names.len()];
    // the field being kept, set by `want` before `emit` gets its lines
    let current = std::cell::Cell::new(0);
    walk_fields(
        block,
        |n| match names.iter().position(|w| n.eq_ignore_ascii_case(w)) {
            Some(i) => {
                current.set(i);
                true
            }
            None => false,
        },
        |line| {
            let values = &mut out[current.get()];
            match line {
                Line::Start(_, v) => values.push(v.to_vec()),
                Line::More(more) => {
                    if let Some(v) = values.last_mut() {
                        v.push(b'\n');
                        v.extend_from_slice(more);
                    }
                }
            }
        },
    );
    out
}

/// A Subject value for SUBJECT: unfolded, leading white space dropped and
/// every run of spaces and tabs made one space (Dovecot's `compress_lwsp`,
/// which SUBJECT uses and HEADER does not), so `a b` finds `a\tb`.
pub fn compress_lwsp(raw: &[u8]) -> Vec<u8> {
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
pub fn decode_header(raw: &[u8]) -> String {
    let mut out = String::new();
    decode_header_into(raw, &mut out);
    out
}

/// [`decode_header`] appended to `out`.
pub(crate) fn decode_header_into(raw: &[u8], out: &mut String) {
    let v = maildex_mime::unfold(raw);
    out.reserve(v.len());
    let starts = memchr::memmem::Finder::new(b"=?");
    let mut i = 0;
    let mut plain_start = 0;
    let mut had_word = false;
    // only where `=?` starts can a word start: the bytes between are plain text
    while let Some(at) = starts.find(&v[i..]) {
        i += at;
        if let Some((text, end)) = encoded_word(&v, i) {
            let between = &v[plain_start..i];
            // §6.2: white space alone between two encoded words is dropped
            if !(had_word && between.iter().all(|&b| is_wsp(b))) {
                push_utf8_lossy(out, between);
            }
            out.push_str(&text);
            i = end;
            plain_start = end;
            had_word = true;
        } else {
            i += 1;
        }
    }
    push_utf8_lossy(out, &v[plain_start..]);
}

/// Decodes the encoded word `=?charset[*lang]?B|Q?text?=` starting at `start`
/// (RFC 2047 §2, RFC 2231 §5 language suffix); returns its text and the
/// offset just past it. As in Dovecot (`message_header_decode_encoded`), the
/// word ends at the first `?` after the encoding, which must be followed by
/// `=`; white space inside the text does not end it (RFC 2047 §5 forbids it,
/// but mailers write it and Dovecot decodes it).
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
    let close = memchr::memchr(b'?', body)?;
    if body.get(close + 1) != Some(&b'=') {
        return None;
    }
    let payload = &body[..close];
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

    /// One walk for many names gives each name what a walk of its own gives.
    #[test]
    fn fields_of_many_names_in_one_walk_are_each_names_values() {
        let block = b"Subject: one\r\n two\r\nX-A : a\nTo: t\n\tmore\nx-a: b\nno colon\n more\n\nX-A: body\n";
        let names: [&[u8]; 4] = [b"x-a", b"SUBJECT", b"cc", b"to"];
        let all = fields_values(block, &names);
        assert_eq!(all.len(), names.len());
        for (name, got) in names.iter().zip(&all) {
            assert_eq!(*got, field_values(block, name), "{name:?}");
        }
        assert_eq!(all[0], vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(all[3], vec![b"t\n\tmore".to_vec()]);
        assert!(fields_values(block, &[]).is_empty());
    }

    #[test]
    fn fields_one_at_a_time_are_the_fields() {
        for block in [
            &b"Subject: one\r\n two\r\nX-A : a\nno colon\n more\nx-a: b\n\nX-A: body\n"[..],
            b" leading: continuation\nA: 1\n\tB\n\t C\nD:",
            b"",
            b"\n",
        ] {
            let mut got = Vec::new();
            for_each_field(block, |n, v| got.push((n.to_vec(), v.to_vec())));
            let want: Vec<_> = fields(block)
                .into_iter()
                .map(|(n, v)| (n.to_vec(), v))
                .collect();
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(block));
        }
    }

    #[test]
    fn encoded_words_decoded_and_joined() {
        assert_eq!(
            decode_header(b"=?UTF-8?B?SMOpbGxv?= =?ISO-8859-1?Q?w=F6rld?= !"),
            "Héllowörld !"
        );
        assert_eq!(decode_header(b"a =?utf-8?q?b_c?=\n d"), "a b c d");
        // White space inside the text is decoded, a `?` ends the word (Dovecot).
        assert_eq!(decode_header(b"=?utf-8?q?a b?=\tc"), "a b\tc");
        assert_eq!(decode_header(b"=?utf-8?q?a?b?="), "=?utf-8?q?a?b?=");
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

    /// `decode_header` a byte at a time, as it was before it jumped between `=?`.
    fn decode_bytewise(raw: &[u8]) -> String {
        let v = maildex_mime::unfold(raw);
        let mut out = String::new();
        let (mut i, mut plain_start, mut last_was_word) = (0, 0, false);
        while i < v.len() {
            if v[i] == b'=' && v.get(i + 1) == Some(&b'?') {
                if let Some((text, end)) = encoded_word(&v, i) {
                    let between = &v[plain_start..i];
                    if !(last_was_word && between.iter().all(|&b| is_wsp(b))) {
                        out.push_str(&String::from_utf8_lossy(between));
                    }
                    out.push_str(&text);
                    (i, plain_start, last_was_word) = (end, end, true);
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

    #[test]
    fn decoding_jumps_between_words_as_a_byte_at_a_time_would() {
        let pieces: [&[u8]; 12] = [
            b"=?utf-8?q?a_b?=",
            b"=?iso-8859-1?b?5A==?=",
            b" ",
            b"\t",
            b"\r\n ",
            b"=?",
            b"?=",
            b"x",
            b"=?=?utf-8?q?c?=",
            b"\xe9\xff",
            "\u{e9}".as_bytes(),
            b"=?utf-8?q?bad=zz?=",
        ];
        // every sequence of up to four pieces, and a pseudo-random sample of longer ones
        let mut seed = 0x2545_f491_u64;
        let mut inputs: Vec<Vec<u8>> = Vec::new();
        for a in 0..pieces.len() {
            for b in 0..pieces.len() {
                for c in 0..pieces.len() {
                    inputs.push([pieces[a], pieces[b], pieces[c]].concat());
                }
            }
        }
        for _ in 0..2_000 {
            let mut v = Vec::new();
            for _ in 0..8 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                v.extend_from_slice(pieces[(seed % pieces.len() as u64) as usize]);
            }
            inputs.push(v);
        }
        for v in &inputs {
            assert_eq!(
                decode_header(v),
                decode_bytewise(v),
                "{:?}",
                String::from_utf8_lossy(v)
            );
        }
    }

    #[test]
    fn qp_soft_breaks_and_base64_junk() {
        assert_eq!(quoted_printable(b"a=3Db=\r\nc= \nd=zz", false), b"a=bcd=zz");
    }
}
