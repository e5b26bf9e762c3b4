//! User name rules shared by loading and editing.

use std::fmt;

use crate::AuthError;

/// Longest accepted user name in bytes. RFC 5321 §4.5.3.1.3 limits a path to 256
/// octets including the angle brackets, so no real address is longer; it also keeps a
/// name usable as one path component (`NAME_MAX` is 255 on Linux).
pub const MAX_NAME_LEN: usize = 254;

/// Checks that `name` can be stored in a passwd-file line and later expanded into a
/// mail path without surprises.
///
/// Rules: non-empty, at most [`MAX_NAME_LEN`] bytes, no `:` (the passwd-file field
/// separator), no whitespace or control characters, no `/` and no `..` (path
/// safety), does not start with `.` or `#` (a `#` line is a comment), and at most one
/// `@` with a non-empty local part and domain on either side.
pub fn validate_name(name: &str) -> Result<(), AuthError> {
    let bad = |reason| {
        Err(AuthError::InvalidName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("name is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return bad("name is longer than 254 bytes");
    }
    if name.contains(':') {
        return bad("':' separates passwd-file fields");
    }
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("whitespace and control characters are not allowed");
    }
    if name.contains('/') {
        return bad("'/' is not allowed");
    }
    if name.contains("..") {
        return bad("'..' is not allowed");
    }
    if name.starts_with('#') {
        return bad("a line starting with '#' is a comment");
    }
    match name.split_once('@') {
        None => {
            if name.starts_with('.') {
                return bad("name must not start with '.'");
            }
        }
        Some((local, domain)) => {
            if domain.contains('@') {
                return bad("at most one '@' is allowed");
            }
            if local.is_empty() || domain.is_empty() {
                return bad("local part and domain around '@' must not be empty");
            }
            if local.starts_with('.') || domain.starts_with('.') {
                return bad("local part and domain must not start with '.'");
            }
        }
    }
    Ok(())
}

/// Most bytes of a user-supplied name that [`LogName`] writes into a log line.
pub const LOG_NAME_MAX: usize = 256;

/// A name a client sent (a login, an LMTP recipient), made safe for one log line:
/// control characters and `\\` are escaped (`\\n`, `\\u{1b}`), bytes that are not
/// UTF-8 are written as `\\xNN`, and only the first [`LOG_NAME_MAX`] bytes are written,
/// followed by `...(N bytes)`. So a name cannot forge a line (`\\r\\nlogged in
/// user=admin`), drive a terminal with escape codes, or fill the log (a 60 KB name).
#[derive(Clone, Copy)]
pub struct LogName<'a>(pub &'a [u8]);

impl<'a> LogName<'a> {
    /// Wraps a name given as text or bytes.
    pub fn new(name: &'a (impl AsRef<[u8]> + ?Sized)) -> LogName<'a> {
        LogName(name.as_ref())
    }
}

impl fmt::Display for LogName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = &self.0[..self.0.len().min(LOG_NAME_MAX)];
        for chunk in shown.utf8_chunks() {
            for c in chunk.valid().chars() {
                if c.is_control() || c == '\\' {
                    write!(f, "{}", c.escape_default())?;
                } else {
                    write!(f, "{c}")?;
                }
            }
            for b in chunk.invalid() {
                write!(f, "\\x{b:02x}")?;
            }
        }
        if shown.len() < self.0.len() {
            write!(f, "...({} bytes)", self.0.len())?;
        }
        Ok(())
    }
}

impl fmt::Debug for LogName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_names_are_escaped_and_cut() {
        let forged = "x\r\n2026-01-01 INFO logged in user=admin\u{1b}[2J\\";
        let shown = LogName::new(forged).to_string();
        assert_eq!(
            shown,
            "x\\r\\n2026-01-01 INFO logged in user=admin\\u{1b}[2J\\\\"
        );
        assert_eq!(LogName(b"a\xffb").to_string(), "a\\xffb");
        let long = "n".repeat(60_000);
        let shown = LogName::new(&long).to_string();
        assert_eq!(
            shown,
            format!("{}...(60000 bytes)", "n".repeat(LOG_NAME_MAX))
        );
        assert_eq!(
            LogName::new("alice@example.org").to_string(),
            "alice@example.org"
        );
    }

    #[test]
    fn accepts_ordinary_names() {
        for ok in [
            "alice",
            "alice@example.org",
            "Bob.Smith+tag@sub.example.org",
            "x",
        ] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        assert!(validate_name(&"a".repeat(MAX_NAME_LEN)).is_ok());
    }

    #[test]
    fn rejects_each_rule() {
        let long = "a".repeat(MAX_NAME_LEN + 1);
        for bad in [
            "",
            long.as_str(),
            "al:ice",
            "al ice",
            "al\tice",
            "al\u{7f}ice",
            "al\nice",
            "a/b",
            "a..b",
            "..",
            ".hidden",
            "#alice",
            "a@b@c",
            "@example.org",
            "alice@",
            "alice@.example.org",
            ".alice@example.org",
            "alice@exa/mple.org",
            "alice@example..org",
        ] {
            assert!(
                matches!(validate_name(bad), Err(AuthError::InvalidName { .. })),
                "{bad:?} should be rejected"
            );
        }
    }
}
