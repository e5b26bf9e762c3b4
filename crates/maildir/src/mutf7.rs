//! Modified UTF-7 for mailbox names (RFC 3501 §5.1.3), as Dovecot and Courier use it
//! for Maildir++ folder directory names.
//!
//! Printable US-ASCII (0x20..=0x7e) stands for itself except `&`, which is written
//! `&-`. Everything else is UTF-16BE in modified base64 (`,` instead of `/`, no `=`
//! padding) between `&` and `-`.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,";

/// Why a string is not valid modified UTF-7. `pos` is a byte offset into the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mutf7Error {
    /// A byte outside printable US-ASCII appears unencoded.
    #[error("byte {pos}: character outside printable US-ASCII must be encoded")]
    InvalidChar {
        /// Byte offset.
        pos: usize,
    },
    /// A `&` shift has no closing `-`.
    #[error("byte {pos}: '&' shift is not terminated by '-'")]
    Unterminated {
        /// Byte offset of the `&`.
        pos: usize,
    },
    /// A character that is not in the modified base64 alphabet.
    #[error("byte {pos}: invalid modified base64 character")]
    BadBase64 {
        /// Byte offset.
        pos: usize,
    },
    /// Leftover bits that are not zero or too many of them (RFC 3501 §5.1.3 / RFC
    /// 2152: the encoding must end on a 16-bit boundary with zero padding bits).
    #[error("byte {pos}: base64 section does not end on a UTF-16 boundary")]
    BadPadding {
        /// Byte offset of the closing `-`.
        pos: usize,
    },
    /// A UTF-16 surrogate without its partner.
    #[error("byte {pos}: unpaired UTF-16 surrogate")]
    UnpairedSurrogate {
        /// Byte offset of the shift's `&`.
        pos: usize,
    },
    /// Valid but not the one canonical encoding (e.g. `&AGE-` for `a`, an empty shift,
    /// or two adjacent shifts); RFC 3501 §5.1.3 says printable US-ASCII must represent
    /// itself and a shifted sequence must not encode it.
    #[error("byte {pos}: not the canonical modified UTF-7 encoding")]
    NonCanonical {
        /// Byte offset where the non-canonical part starts.
        pos: usize,
    },
}

fn is_direct(c: char) -> bool {
    ('\x20'..='\x7e').contains(&c)
}

fn flush(out: &mut String, units: &mut Vec<u16>) {
    let mut bits: u32 = 0;
    let mut nbits = 0;
    for u in units.drain(..) {
        bits = (bits << 16) | u32::from(u);
        nbits += 16;
        while nbits >= 6 {
            nbits -= 6;
            out.push(char::from(ALPHABET[((bits >> nbits) & 0x3f) as usize]));
        }
        bits &= (1 << nbits) - 1;
    }
    if nbits > 0 {
        out.push(char::from(
            ALPHABET[((bits << (6 - nbits)) & 0x3f) as usize],
        ));
    }
    out.push('-');
}

/// Encodes a UTF-8 mailbox name into modified UTF-7.
pub fn encode(utf8: &str) -> String {
    let mut out = String::with_capacity(utf8.len());
    let mut units: Vec<u16> = Vec::new();
    let mut shifted = false;
    for c in utf8.chars() {
        if is_direct(c) {
            if shifted {
                flush(&mut out, &mut units);
                shifted = false;
            }
            if c == '&' {
                out.push_str("&-");
            } else {
                out.push(c);
            }
        } else {
            if !shifted {
                out.push('&');
                shifted = true;
            }
            let mut buf = [0u16; 2];
            units.extend_from_slice(c.encode_utf16(&mut buf));
        }
    }
    if shifted {
        flush(&mut out, &mut units);
    }
    out
}

fn b64_value(b: u8) -> Option<u32> {
    ALPHABET.iter().position(|&a| a == b).map(|v| v as u32)
}

/// Decodes a modified UTF-7 mailbox name, strictly: only the canonical encoding that
/// [`encode`] produces is accepted.
pub fn decode(mutf7: &str) -> Result<String, Mutf7Error> {
    let bytes = mutf7.as_bytes();
    let mut out = String::with_capacity(bytes.len());
    let mut i = 0;
    // End of the previous base64 section (its '-' + 1), to detect adjacent shifts.
    let mut prev_shift_end: Option<usize> = None;
    while i < bytes.len() {
        let b = bytes[i];
        if !(0x20..=0x7e).contains(&b) {
            return Err(Mutf7Error::InvalidChar { pos: i });
        }
        if b != b'&' {
            out.push(char::from(b));
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        if bytes.get(i) == Some(&b'-') {
            out.push('&');
            i += 1;
            continue;
        }
        if prev_shift_end == Some(start) {
            return Err(Mutf7Error::NonCanonical { pos: start });
        }
        let mut bits: u32 = 0;
        let mut nbits = 0;
        let mut units: Vec<u16> = Vec::new();
        loop {
            let Some(&c) = bytes.get(i) else {
                return Err(Mutf7Error::Unterminated { pos: start });
            };
            if c == b'-' {
                break;
            }
            let v = b64_value(c).ok_or(Mutf7Error::BadBase64 { pos: i })?;
            bits = (bits << 6) | v;
            nbits += 6;
            if nbits >= 16 {
                nbits -= 16;
                units.push(((bits >> nbits) & 0xffff) as u16);
                bits &= (1 << nbits) - 1;
            }
            i += 1;
        }
        // RFC 2152 (which §5.1.3 modifies): at most 5 padding bits, all zero.
        if nbits >= 6 || bits != 0 {
            return Err(Mutf7Error::BadPadding { pos: i });
        }
        if units.is_empty() {
            return Err(Mutf7Error::NonCanonical { pos: start });
        }
        for r in char::decode_utf16(units.iter().copied()) {
            let c = r.map_err(|_| Mutf7Error::UnpairedSurrogate { pos: start })?;
            if is_direct(c) {
                return Err(Mutf7Error::NonCanonical { pos: start });
            }
            out.push(c);
        }
        i += 1; // the '-'
        prev_shift_end = Some(i);
    }
    // Belt and braces: the canonical form is unique, so it must re-encode to the input.
    if encode(&out) != mutf7 {
        return Err(Mutf7Error::NonCanonical { pos: 0 });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc3501_example() {
        // RFC 3501 §5.1.3: "~peter/mail/日本語/台北"
        let name = "~peter/mail/\u{65e5}\u{672c}\u{8a9e}/\u{53f0}\u{5317}";
        let enc = "~peter/mail/&ZeVnLIqe-/&U,BTFw-";
        assert_eq!(encode(name), enc);
        assert_eq!(decode(enc).unwrap(), name);
    }

    #[test]
    fn ampersand_and_ascii() {
        assert_eq!(encode("Tom & Jerry"), "Tom &- Jerry");
        assert_eq!(decode("Tom &- Jerry").unwrap(), "Tom & Jerry");
        assert_eq!(decode("&-&-").unwrap(), "&&");
        assert_eq!(encode("plain.Name"), "plain.Name");
        assert_eq!(encode("Entwürfe"), "Entw&APw-rfe");
        assert_eq!(decode("Entw&APw-rfe").unwrap(), "Entwürfe");
        // Non-BMP: a surrogate pair.
        assert_eq!(decode(&encode("x\u{1F600}y")).unwrap(), "x\u{1F600}y");
        // Control characters are encoded too.
        assert_eq!(decode(&encode("a\tb")).unwrap(), "a\tb");
    }

    #[test]
    fn rejects_non_canonical_and_broken_input() {
        use Mutf7Error::*;
        let cases: &[(&str, Mutf7Error)] = &[
            ("&AGE-", NonCanonical { pos: 0 }),      // 'a' encoded
            ("&AGEA6Q-", NonCanonical { pos: 0 }),   // 'a' then 'é'
            ("&AOk-&AOk-", NonCanonical { pos: 5 }), // adjacent shifts
            ("&AOk", Unterminated { pos: 0 }),
            ("a&", Unterminated { pos: 1 }),
            ("&A*k-", BadBase64 { pos: 2 }),
            ("&AOk=-", BadBase64 { pos: 4 }),
            ("&AOl-", BadPadding { pos: 4 }), // nonzero padding bits
            ("&AOkA-", BadPadding { pos: 5 }), // 6 extra bits
            ("&A-", BadPadding { pos: 2 }),
            ("&2D0-", UnpairedSurrogate { pos: 0 }), // lone high surrogate
            ("&3gA-", UnpairedSurrogate { pos: 0 }), // lone low surrogate
            ("caf\u{e9}", InvalidChar { pos: 3 }),
            ("a\tb", InvalidChar { pos: 1 }),
        ];
        for (input, want) in cases {
            assert_eq!(decode(input).as_ref(), Err(want), "{input:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn round_trip(s in "\\PC{0,24}|[ -~\u{80}-\u{ffff}\u{10000}-\u{10ffff}]{0,12}") {
            let enc = encode(&s);
            prop_assert!(enc.bytes().all(|b| (0x20..=0x7e).contains(&b)));
            prop_assert_eq!(decode(&enc).unwrap(), s);
        }

        #[test]
        fn decode_accepts_only_canonical(s in "[ -~]{0,16}") {
            if let Ok(d) = decode(&s) {
                prop_assert_eq!(encode(&d), s);
            }
        }
    }
}
