//! Bytes in a MIME charset to UTF-8, for bodies (the `charset` parameter) and RFC 2047
//! encoded words alike.

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
pub fn to_utf8(bytes: &[u8], charset: &[u8]) -> String {
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
