//! User name rules shared by loading and editing.

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

#[cfg(test)]
mod tests {
    use super::*;

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
