//! Bytes in a MIME charset to UTF-8, for bodies (the `charset` parameter) and RFC 2047
//! encoded words alike.

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

/// Converts `bytes` in `charset` (MIME charset name, any case) to UTF-8, as Dovecot's
/// iconv-based conversion does:
/// - UTF-8, US-ASCII and ASCII are read as UTF-8, invalid sequences replaced (Dovecot's
///   `charset_is_utf8`: 8-bit text labelled US-ASCII is usually UTF-8);
/// - ISO-8859-1 and its aliases map each byte to the code point of its value (iconv's
///   ISO-8859-1: 0x80 is U+0080; mail-parser reads it as Windows-1252, as browsers do);
/// - UTF-7 (RFC 2152) is ours (mail-parser keeps `+-` instead of reading `+`);
/// - every other charset mail-parser knows goes through its decoder (the ISO-8859 and
///   Windows code pages, KOI8, IBM 850/866, Mac; multi-byte Asian charsets need its
///   `full_encoding` feature, not enabled, and are read as UTF-8 like an unknown charset).
pub fn to_utf8(bytes: &[u8], charset: &[u8]) -> String {
    let cs = charset.trim_ascii();
    let is = |names: &[&str]| names.iter().any(|n| cs.eq_ignore_ascii_case(n.as_bytes()));
    if is(&["utf-8", "utf8", "us-ascii", "ascii"]) {
        utf8_lossy(bytes)
    } else if is(&[
        "iso-8859-1",
        "iso8859-1",
        "iso_8859-1",
        "latin1",
        "latin-1",
        "l1",
    ]) {
        bytes.iter().map(|&b| char::from(b)).collect()
    } else if is(&["utf-7", "utf7", "unicode-1-1-utf-7"]) {
        utf7(bytes)
    } else if let Some(decode) = mail_parser::decoders::charsets::map::charset_decoder(cs) {
        decode(bytes)
    } else {
        utf8_lossy(bytes)
    }
}

/// `bytes` as UTF-8, invalid sequences replaced (`String::from_utf8_lossy`), checked first
/// by `str::from_utf8`, which reads ASCII a word at a time where the lossy reader goes a
/// byte at a time (a fifteenth of indexing a message's full text, nearly all of it valid).
pub(crate) fn utf8_lossy(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// [`utf8_lossy`] appended to `out`.
pub(crate) fn push_utf8_lossy(out: &mut String, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(s) => out.push_str(s),
        Err(_) => out.push_str(&String::from_utf8_lossy(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charsets_as_iconv_reads_them() {
        assert_eq!(to_utf8(b"\x80 \xe9", b"ISO-8859-1"), "\u{80} \u{e9}");
        assert_eq!(to_utf8(b"\x80 \xe9", b"windows-1252"), "\u{20ac} \u{e9}");
        assert_eq!(to_utf8(b"\xa4", b"iso-8859-15"), "\u{20ac}");
        assert_eq!(to_utf8("café".as_bytes(), b"us-ascii"), "café");
        assert_eq!(to_utf8(b"Za\xbf\xf3\xb3\xe6", b"ISO-8859-2"), "Zażółć");
        assert_eq!(to_utf8(b"\xf0\xd2\xc9\xd7\xc5\xd4", b"koi8-r"), "Привет");
        assert_eq!(to_utf8(b"a+-b", b"utf-7"), "a+b");
        assert_eq!(to_utf8(b"caf\xc3\xa9", b"x-unknown"), "café");
    }
}
