//! What SEARCH compares: both sides of a comparison go through [`normalize`].

use crate::MessageText;

/// Lower-cases for comparison: Unicode lowercase of each character (ASCII
/// case folding included), which is what "case-insensitive" means for the
/// UTF-8 strings SEARCH carries (RFC 9051 §6.4.4; Dovecot's normaliser goes
/// further with titlecase folding, which we leave out).
pub fn normalize(s: &str) -> String {
    if s.is_ascii() {
        s.to_ascii_lowercase()
    } else {
        s.to_lowercase()
    }
}

/// [`normalize`] in place where it can (ASCII text, most mail).
fn normalize_owned(mut s: String) -> String {
    if s.is_ascii() {
        s.make_ascii_lowercase();
        s
    } else {
        s.to_lowercase()
    }
}

/// An address field body written out as SEARCH FROM/TO/CC/BCC match it: the addresses as
/// ENVELOPE reads them, with display names, comments dropped (Dovecot's
/// `message_address_write`; see [`maildex_mime::address_search_text`]). Encoded words are
/// kept: decode the result with [`crate::decode_header`].
pub fn address_text(value: &[u8]) -> Vec<u8> {
    maildex_mime::address_search_text(value)
}

/// A message's text normalised for SEARCH BODY and TEXT (RFC 3501 §6.4.4).
#[derive(Debug, Clone, Default)]
pub struct SearchText {
    headers: Vec<String>,
    bodies: Vec<String>,
}

impl SearchText {
    /// Normalises every part of `text`.
    pub fn new(text: MessageText) -> SearchText {
        SearchText {
            headers: text.headers.into_iter().map(normalize_owned).collect(),
            bodies: text.bodies.into_iter().map(normalize_owned).collect(),
        }
    }

    /// BODY: some text part holds `needle` (already [`normalize`]d).
    pub fn body_contains(&self, needle: &str) -> bool {
        self.bodies.iter().any(|b| b.contains(needle))
    }

    /// TEXT ("in the header or body"): some header block or text part holds `needle`
    /// (already [`normalize`]d).
    pub fn text_contains(&self, needle: &str) -> bool {
        self.body_contains(needle) || self.headers.iter().any(|h| h.contains(needle))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_folds_unicode() {
        assert_eq!(normalize("ÉCOLE Straße"), "école straße");
        assert_eq!(normalize("MiXeD"), "mixed");
    }
}
