//! Envelope addresses: `Reverse-path` and `Forward-path` of RFC 5321 §4.1.2.

use std::fmt;

/// One envelope mailbox, as given in `MAIL FROM:<...>` or `RCPT TO:<...>`.
///
/// `local_part` is decoded: a quoted local part (`"john doe"@x`) is stored
/// without quotes and backslash escapes (`john doe`), so it can be compared
/// with user names directly. [`fmt::Display`] writes it back in RFC 5321
/// form (quoting it when it is not a dot-string).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Address {
    /// Local part, decoded, as the client wrote it (case kept; RFC 5321 §2.4
    /// lets the receiving host decide on case).
    pub local_part: String,
    /// Domain (or address literal with its brackets, e.g. `[192.0.2.1]`).
    /// `None` only for the special recipient `<Postmaster>` (RFC 5321 §4.1.1.3).
    pub domain: Option<String>,
}

impl Address {
    /// Splits a sub-address ("detail", e.g. `user+folder`) off the local
    /// part at the first of `delimiters` (Dovecot's `recipient_delimiter`):
    /// returns `(user, Some(detail))`, or `(local_part, None)` when no
    /// delimiter occurs or `delimiters` is empty.
    pub fn split_detail(&self, delimiters: &str) -> (&str, Option<&str>) {
        match self.local_part.find(|c| delimiters.contains(c)) {
            Some(i) => {
                let delim_len = self.local_part[i..]
                    .chars()
                    .next()
                    .map_or(1, char::len_utf8);
                (
                    &self.local_part[..i],
                    Some(&self.local_part[i + delim_len..]),
                )
            }
            None => (&self.local_part, None),
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if is_dot_string(self.local_part.as_bytes()) {
            f.write_str(&self.local_part)?;
        } else {
            f.write_str("\"")?;
            for c in self.local_part.chars() {
                if c == '"' || c == '\\' {
                    f.write_str("\\")?;
                }
                write!(f, "{c}")?;
            }
            f.write_str("\"")?;
        }
        if let Some(d) = &self.domain {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// Why a path did not parse; the session answers `501 5.5.4` (or
/// `501 5.1.7`/`5.1.3` style texts) with this text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PathError(pub &'static str);

/// RFC 5322 §3.2.3 atext, plus 8-bit bytes (liberal: UTF-8 local parts
/// as postfix passes them; the whole path must still be valid UTF-8).
fn is_atext(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~".contains(&b) || b >= 0x80
}

/// RFC 5321 §4.1.2 Dot-string, liberal about empty atoms (`a..b`, `.a`)
/// because real mail has them and nothing here depends on it; only the
/// characters are checked.
fn is_dot_string(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_atext(b) || b == b'.')
}

/// Parses a path starting at `<` and returns it with the rest of the line
/// after `>`. `Ok((None, rest))` is the null path `<>`.
///
/// RFC 5321 §4.1.2: `Path = "<" [ A-d-l ":" ] Mailbox ">"`; the source
/// route (A-d-l) is accepted and ignored (RFC 5321 §4.1.1.3, Appendix C).
/// `<Postmaster>` without a domain is accepted when `allow_postmaster`
/// (RCPT only, RFC 5321 §4.1.1.3).
pub(crate) fn parse_path(
    s: &[u8],
    allow_postmaster: bool,
) -> Result<(Option<Address>, &[u8]), PathError> {
    let Some(rest) = s.strip_prefix(b"<") else {
        return Err(PathError("Address must be in angle brackets"));
    };
    if let Some(after) = rest.strip_prefix(b">") {
        return Ok((None, after));
    }
    let mut rest = rest;
    // A-d-l: "@one,@two:" (RFC 5321 §4.1.2), skipped.
    if rest.first() == Some(&b'@') {
        let Some(colon) = rest.iter().position(|&b| b == b':') else {
            return Err(PathError("Invalid source route"));
        };
        rest = &rest[colon + 1..];
    }
    let (local, after_local) = parse_local_part(rest)?;
    match after_local.first() {
        Some(b'@') => {
            let after_at = &after_local[1..];
            let Some(end) = after_at.iter().position(|&b| b == b'>') else {
                return Err(PathError("Missing '>'"));
            };
            let domain = &after_at[..end];
            if !is_domain(domain) {
                return Err(PathError("Invalid domain"));
            }
            let domain =
                String::from_utf8(domain.to_vec()).map_err(|_| PathError("Domain is not UTF-8"))?;
            Ok((
                Some(Address {
                    local_part: local,
                    domain: Some(domain),
                }),
                &after_at[end + 1..],
            ))
        }
        Some(b'>') if allow_postmaster && local.eq_ignore_ascii_case("postmaster") => Ok((
            Some(Address {
                local_part: local,
                domain: None,
            }),
            &after_local[1..],
        )),
        Some(b'>') => Err(PathError("Address needs a domain")),
        _ => Err(PathError("Invalid local part")),
    }
}

/// Local-part = Dot-string / Quoted-string (RFC 5321 §4.1.2). Returns the
/// decoded local part and the rest, which starts at `@` or `>` on success.
fn parse_local_part(s: &[u8]) -> Result<(String, &[u8]), PathError> {
    let (bytes, rest) = if s.first() == Some(&b'"') {
        // Quoted-string: qtextSMTP / quoted-pairSMTP ("\" and any printable).
        let mut out = Vec::new();
        let mut i = 1;
        loop {
            match s.get(i) {
                None => return Err(PathError("Unterminated quoted local part")),
                Some(b'"') => break,
                Some(b'\\') => match s.get(i + 1) {
                    Some(&c) if (0x20..0x7f).contains(&c) || c >= 0x80 => {
                        out.push(c);
                        i += 2;
                    }
                    _ => return Err(PathError("Invalid quoted pair")),
                },
                Some(&c) if (0x20..0x7f).contains(&c) || c >= 0x80 => {
                    out.push(c);
                    i += 1;
                }
                Some(_) => return Err(PathError("Control character in local part")),
            }
        }
        (out, &s[i + 1..])
    } else {
        let end = s
            .iter()
            .position(|&b| b == b'@' || b == b'>')
            .unwrap_or(s.len());
        let local = &s[..end];
        if !is_dot_string(local) {
            return Err(PathError("Invalid local part"));
        }
        (local.to_vec(), &s[end..])
    };
    let local = String::from_utf8(bytes).map_err(|_| PathError("Local part is not UTF-8"))?;
    Ok((local, rest))
}

/// Domain = sub-domain *("." sub-domain) / address-literal (RFC 5321
/// §4.1.2, §4.1.3). Liberal: `_` and 8-bit bytes allowed in labels.
fn is_domain(d: &[u8]) -> bool {
    if let Some(inner) = d.strip_prefix(b"[").and_then(|r| r.strip_suffix(b"]")) {
        // address-literal: dtext (RFC 5321 §4.1.3 General-address-literal).
        return !inner.is_empty()
            && inner
                .iter()
                .all(|&b| (33..=126).contains(&b) && b != b'[' && b != b']' && b != b'\\');
    }
    !d.is_empty()
        && d.split(|&b| b == b'.').all(|label| {
            !label.is_empty()
                && label
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b >= 0x80)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> (Option<Address>, String) {
        let (a, rest) = parse_path(s.as_bytes(), true).expect(s);
        (a, String::from_utf8_lossy(rest).into_owned())
    }

    #[test]
    fn plain_null_and_params() {
        let (a, rest) = ok("<u@example.org> SIZE=1");
        let a = a.expect("address");
        assert_eq!(a.local_part, "u");
        assert_eq!(a.domain.as_deref(), Some("example.org"));
        assert_eq!(rest, " SIZE=1");
        assert_eq!(ok("<>"), (None, String::new()));
    }

    #[test]
    fn quoted_local_part_decoded_and_requoted() {
        let (a, _) = ok(r#"<"john \"j\" doe"@x.org>"#);
        let a = a.expect("address");
        assert_eq!(a.local_part, r#"john "j" doe"#);
        assert_eq!(a.to_string(), r#""john \"j\" doe"@x.org"#);
        let (a, _) = ok(r#"<"a>b"@x>"#);
        assert_eq!(a.expect("address").local_part, "a>b");
    }

    #[test]
    fn source_route_ignored_and_postmaster() {
        let (a, _) = ok("<@relay.example,@b.example:u@x.org>");
        assert_eq!(a.expect("address").to_string(), "u@x.org");
        let (a, _) = ok("<PostMaster>");
        assert_eq!(a.expect("address").domain, None);
        assert!(parse_path(b"<postmaster>", false).is_err());
        assert!(parse_path(b"<bob>", true).is_err());
    }

    #[test]
    fn rejects_bad_paths() {
        for bad in [
            "u@x.org",
            "<u@x.org",
            "<u@>",
            "<@x.org>",
            "<u v@x.org>",
            "<u@x..org>",
            "<\"unterminated@x>",
            "<u@[]>",
            "<u@x y>",
        ] {
            assert!(parse_path(bad.as_bytes(), true).is_err(), "{bad}");
        }
    }

    #[test]
    fn address_literal_and_utf8() {
        let (a, _) = ok("<u@[192.0.2.1]>");
        assert_eq!(a.expect("address").domain.as_deref(), Some("[192.0.2.1]"));
        let (a, _) = ok("<jürgen@bücher.example>");
        assert_eq!(a.expect("address").local_part, "jürgen");
        assert!(parse_path(b"<\xff@x>", true).is_err());
    }

    #[test]
    fn detail_split() {
        let a = Address {
            local_part: "bob+lists+rust".into(),
            domain: Some("x".into()),
        };
        assert_eq!(a.split_detail("+-"), ("bob", Some("lists+rust")));
        assert_eq!(a.split_detail(""), ("bob+lists+rust", None));
        assert_eq!(a.split_detail("§"), ("bob+lists+rust", None));
    }
}
