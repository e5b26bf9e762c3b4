//! Content encoders used by the generator: base64 (RFC 2045 §6.8), quoted-printable
//! (RFC 2045 §6.7), RFC 2047 encoded-words and IMAP modified UTF-7 (RFC 3501 §5.1.3).
//!
//! Only encoders live here; the tests carry their own decoders so that an encoder bug
//! cannot hide behind a matching decoder bug.

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Appends standard base64 of `data` (with `=` padding) to `out`, no line breaks.
pub(crate) fn base64_into(data: &[u8], out: &mut Vec<u8>) {
    base64_alphabet_into(data, out, B64, true);
}

fn base64_alphabet_into(data: &[u8], out: &mut Vec<u8>, alphabet: &[u8; 64], pad: bool) {
    out.reserve(data.len().div_ceil(3) * 4);
    let mut chunks = data.chunks_exact(3);
    for c in &mut chunks {
        let n = (u32::from(c[0]) << 16) | (u32::from(c[1]) << 8) | u32::from(c[2]);
        out.extend_from_slice(&[
            alphabet[(n >> 18) as usize & 63],
            alphabet[(n >> 12) as usize & 63],
            alphabet[(n >> 6) as usize & 63],
            alphabet[n as usize & 63],
        ]);
    }
    match *chunks.remainder() {
        [a] => {
            let n = u32::from(a) << 16;
            out.push(alphabet[(n >> 18) as usize & 63]);
            out.push(alphabet[(n >> 12) as usize & 63]);
            if pad {
                out.extend_from_slice(b"==");
            }
        }
        [a, b] => {
            let n = (u32::from(a) << 16) | (u32::from(b) << 8);
            out.push(alphabet[(n >> 18) as usize & 63]);
            out.push(alphabet[(n >> 12) as usize & 63]);
            out.push(alphabet[(n >> 6) as usize & 63]);
            if pad {
                out.push(b'=');
            }
        }
        _ => {}
    }
}

/// Standard base64 of `data` as a `String`.
pub(crate) fn base64(data: &[u8]) -> String {
    let mut out = Vec::new();
    base64_into(data, &mut out);
    // Base64 output is ASCII by construction.
    String::from_utf8_lossy(&out).into_owned()
}

/// Appends base64 of `data` broken into lines of 76 characters, each ended by LF.
/// RFC 2045 §6.8: "The encoded output stream must be represented in lines of no more than
/// 76 characters each."
pub(crate) fn base64_lines_into(data: &[u8], out: &mut Vec<u8>) {
    // 57 input bytes encode to exactly 76 output characters.
    for chunk in data.chunks(57) {
        base64_into(chunk, out);
        out.push(b'\n');
    }
}

/// Quoted-printable encoding of LF-separated text (RFC 2045 §6.7): rule 1 (=XX for
/// non-printables and `=`), rule 2 (literal printables), rule 3 (trailing white space
/// encoded), rule 4 (line breaks kept as line breaks) and rule 5 (soft line breaks so no
/// encoded line exceeds 76 characters, the `=` included).
pub(crate) fn quoted_printable(text: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut lines = text.split('\n').peekable();
    while let Some(line) = lines.next() {
        let bytes = line.as_bytes();
        let mut col = 0usize;
        for (i, &b) in bytes.iter().enumerate() {
            let last = i + 1 == bytes.len();
            let literal = match b {
                b'=' => false,
                b' ' | b'\t' => !last,
                33..=126 => true,
                _ => false,
            };
            let width = if literal { 1 } else { 3 };
            // Keep room for the soft break '=' unless this is the line's last token.
            let limit = if last { 76 } else { 75 };
            if col + width > limit {
                out.push_str("=\n");
                col = 0;
            }
            if literal {
                out.push(char::from(b));
            } else {
                out.push('=');
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 15)]));
            }
            col += width;
        }
        if lines.peek().is_some() {
            out.push('\n');
        }
    }
    out
}

/// Which RFC 2047 §4 encoding an encoded-word uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WordEncoding {
    /// "B" encoding (RFC 2047 §4.1), base64.
    B,
    /// "Q" encoding (RFC 2047 §4.2), quoted-printable-like with `_` for space.
    Q,
}

/// Encodes `text` as one or more RFC 2047 encoded-words in UTF-8, joined by `sep` (a
/// folding "\n " or a plain space). RFC 2047 §2: an encoded-word is at most 75 characters;
/// §5 (3): each encoded-word holds whole characters, so multi-byte UTF-8 sequences are never
/// split; §5 (3) also restricts Q-encoded words in a phrase to letters, digits and `!*+-/`.
pub(crate) fn encoded_words(text: &str, enc: WordEncoding, charset: &str, sep: &str) -> String {
    let prefix_len = charset.len() + 5; // "=?" charset "?X?"
    let budget = 75usize.saturating_sub(prefix_len + 2).max(8);
    let mut words: Vec<String> = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    let mut cur_len = 0usize;
    let mut buf = [0u8; 4];
    for ch in text.chars() {
        let bytes = ch.encode_utf8(&mut buf).as_bytes();
        let add = match enc {
            WordEncoding::B => (cur.len() + bytes.len()).div_ceil(3) * 4 - cur_len,
            WordEncoding::Q => bytes.iter().map(|&b| q_width(b)).sum(),
        };
        if cur_len + add > budget && !cur.is_empty() {
            words.push(finish_word(&cur, enc, charset));
            cur.clear();
            cur_len = 0;
        }
        cur.extend_from_slice(bytes);
        cur_len = match enc {
            WordEncoding::B => cur.len().div_ceil(3) * 4,
            WordEncoding::Q => cur_len + add,
        };
    }
    if !cur.is_empty() {
        words.push(finish_word(&cur, enc, charset));
    }
    words.join(sep)
}

fn q_width(b: u8) -> usize {
    if b.is_ascii_alphanumeric() || b" !*+-/".contains(&b) {
        1
    } else {
        3
    }
}

fn finish_word(bytes: &[u8], enc: WordEncoding, charset: &str) -> String {
    let mut out = String::with_capacity(bytes.len() * 2 + 12);
    out.push_str("=?");
    out.push_str(charset);
    match enc {
        WordEncoding::B => {
            out.push_str("?B?");
            out.push_str(&base64(bytes));
        }
        WordEncoding::Q => {
            out.push_str("?Q?");
            for &b in bytes {
                match b {
                    b' ' => out.push('_'),
                    _ if q_width(b) == 1 => out.push(char::from(b)),
                    _ => {
                        out.push('=');
                        out.push_str(&format!("{b:02X}"));
                    }
                }
            }
        }
    }
    out.push_str("?=");
    out
}

/// Encodes one mailbox name level in IMAP modified UTF-7 (RFC 3501 §5.1.3): printable
/// US-ASCII except `&` stands for itself, `&` becomes `&-`, and runs of other characters
/// become `&` + modified base64 of their UTF-16 (`,` for `/`, no padding) + `-`.
pub fn mutf7_encode(name: &str) -> String {
    const MB64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,";
    let mut out = String::with_capacity(name.len() + 8);
    let mut pending: Vec<u8> = Vec::new();
    let flush = |pending: &mut Vec<u8>, out: &mut String| {
        if !pending.is_empty() {
            let mut enc = Vec::new();
            base64_alphabet_into(pending, &mut enc, MB64, false);
            out.push('&');
            out.push_str(&String::from_utf8_lossy(&enc));
            out.push('-');
            pending.clear();
        }
    };
    for ch in name.chars() {
        if ('\x20'..='\x7e').contains(&ch) {
            flush(&mut pending, &mut out);
            if ch == '&' {
                out.push_str("&-");
            } else {
                out.push(ch);
            }
        } else {
            let mut units = [0u16; 2];
            for u in ch.encode_utf16(&mut units) {
                pending.extend_from_slice(&u.to_be_bytes());
            }
        }
    }
    flush(&mut pending, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_known_answers() {
        // RFC 4648 §10 test vectors.
        for (plain, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), enc);
        }
    }

    #[test]
    fn base64_lines_are_76_wide() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let mut out = Vec::new();
        base64_lines_into(&data, &mut out);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[..lines.len() - 1].iter().all(|l| l.len() == 76));
        assert!(lines.last().unwrap().len() <= 76);
    }

    #[test]
    fn qp_encodes_specials_and_trailing_space() {
        assert_eq!(quoted_printable("a=b"), "a=3Db");
        assert_eq!(quoted_printable("café"), "caf=C3=A9");
        assert_eq!(quoted_printable("end \nnext"), "end=20\nnext");
        let long = "x".repeat(200);
        let enc = quoted_printable(&long);
        assert!(enc.lines().all(|l| l.len() <= 76), "{enc}");
        assert_eq!(enc.replace("=\n", ""), long);
    }

    #[test]
    fn encoded_words_known_answers() {
        assert_eq!(
            encoded_words("Zoë", WordEncoding::Q, "UTF-8", " "),
            "=?UTF-8?Q?Zo=C3=AB?="
        );
        assert_eq!(
            encoded_words("Zoë", WordEncoding::B, "UTF-8", " "),
            "=?UTF-8?B?Wm/Dqw==?="
        );
        let long = "Réunion générale à propos du budget prévisionnel de l'année prochaine";
        let enc = encoded_words(long, WordEncoding::Q, "UTF-8", "\n ");
        assert!(enc.split("\n ").count() > 1);
        assert!(enc.split("\n ").all(|w| w.len() <= 75), "{enc}");
    }

    #[test]
    fn mutf7_known_answers() {
        // RFC 3501 §5.1.3 example.
        assert_eq!(
            mutf7_encode("~peter/mail/台北/日本語"),
            "~peter/mail/&U,BTFw-/&ZeVnLIqe-"
        );
        assert_eq!(mutf7_encode("Réunions"), "R&AOk-unions");
        assert_eq!(mutf7_encode("A&B"), "A&-B");
        assert_eq!(mutf7_encode("plain"), "plain");
    }

    fn b64_value(c: u8, alphabet: &[u8]) -> Option<u32> {
        alphabet.iter().position(|&a| a == c).map(|p| p as u32)
    }

    /// Independent decoder for the round-trip properties (RFC 4648 §4 / RFC 3501 §5.1.3).
    fn b64_decode(s: &str, alphabet: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let (mut bits, mut n) = (0u32, 0);
        for c in s.bytes().filter(|&c| c != b'=' && c != b'\n') {
            bits = (bits << 6) | b64_value(c, alphabet)?;
            n += 6;
            if n >= 8 {
                n -= 8;
                out.push((bits >> n) as u8);
                bits &= (1 << n) - 1;
            }
        }
        Some(out)
    }

    const STD: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    fn qp_decode(s: &str) -> Vec<u8> {
        let b = s.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'=' {
                if b.get(i + 1) == Some(&b'\n') {
                    i += 2;
                    continue;
                }
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        out
    }

    fn word_decode(w: &str) -> Vec<u8> {
        let inner = w
            .strip_prefix("=?")
            .and_then(|w| w.strip_suffix("?="))
            .unwrap();
        let mut it = inner.splitn(3, '?');
        let (_, enc, text) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
        match enc {
            "B" => b64_decode(text, STD).unwrap(),
            _ => qp_decode(&text.replace('_', " ")),
        }
    }

    fn mutf7_decode(s: &str) -> String {
        let mut out = String::new();
        let mut rest = s;
        while let Some(p) = rest.find('&') {
            out.push_str(&rest[..p]);
            let end = rest[p..].find('-').unwrap() + p;
            let enc = &rest[p + 1..end];
            if enc.is_empty() {
                out.push('&');
            } else {
                let bytes = b64_decode(
                    enc,
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,",
                )
                .unwrap();
                let units: Vec<u16> = bytes
                    .chunks(2)
                    .map(|c| u16::from_be_bytes([c[0], c[1]]))
                    .collect();
                out.push_str(&String::from_utf16(&units).unwrap());
            }
            rest = &rest[end + 1..];
        }
        out + rest
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        #[test]
        fn qp_round_trips_with_short_lines(text in "[ a-z=\t\n\u{e9}\u{4e2d}.]{0,300}") {
            let enc = quoted_printable(&text);
            proptest::prop_assert!(enc.is_ascii());
            proptest::prop_assert!(enc.lines().all(|l| l.len() <= 76), "{}", enc);
            proptest::prop_assert!(enc.lines().all(|l| !l.ends_with(' ') && !l.ends_with('\t')));
            proptest::prop_assert_eq!(qp_decode(&enc), text.as_bytes().to_vec());
        }

        #[test]
        fn encoded_words_round_trip(text in "\\PC{1,80}", b in proptest::bool::ANY) {
            let enc = if b { WordEncoding::B } else { WordEncoding::Q };
            let out = encoded_words(&text, enc, "UTF-8", " ");
            let mut decoded = Vec::new();
            for w in out.split(' ') {
                proptest::prop_assert!(w.len() <= 75, "{}", w);
                // Each word holds whole characters (RFC 2047 §5 (3)).
                let part = word_decode(w);
                proptest::prop_assert!(std::str::from_utf8(&part).is_ok());
                decoded.extend(part);
            }
            proptest::prop_assert_eq!(decoded, text.as_bytes().to_vec());
        }

        #[test]
        fn mutf7_round_trips(name in "\\PC{0,40}") {
            let enc = mutf7_encode(&name);
            proptest::prop_assert!(enc.bytes().all(|b| (0x20..0x7f).contains(&b)));
            proptest::prop_assert_eq!(mutf7_decode(&enc), name);
        }

        #[test]
        fn base64_lines_round_trip(data in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let mut out = Vec::new();
            base64_lines_into(&data, &mut out);
            let text = String::from_utf8(out).unwrap();
            proptest::prop_assert!(text.lines().all(|l| l.len() <= 76));
            proptest::prop_assert_eq!(b64_decode(&text, STD).unwrap(), data);
        }
    }
}
