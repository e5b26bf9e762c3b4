//! What SEARCH compares: both sides of a comparison go through [`normalize`].

use std::borrow::Cow;
use std::sync::OnceLock;

use maildex_index::{PartRecord, SearchFields, TextRecord, TextRecordRef};

use crate::{compress_lwsp, decode_header, field_values, MessageText};

/// Lower-cases for comparison: Unicode lowercase of each character (ASCII
/// case folding included), which is what "case-insensitive" means for the
/// UTF-8 strings SEARCH carries (RFC 9051 §6.4.4; Dovecot's normaliser goes
/// further with titlecase folding, which we leave out).
pub fn normalize(s: &str) -> String {
    if s.is_ascii() {
        s.to_ascii_lowercase()
    } else {
        lowercase(s)
    }
}

/// [`normalize`] in place where it can (ASCII text, most mail).
fn normalize_owned(mut s: String) -> String {
    if s.is_ascii() {
        s.make_ascii_lowercase();
        s
    } else {
        lowercase(&s)
    }
}

/// `str::to_lowercase`, with the ASCII runs between other characters lowered a run at a
/// time: after its first non-ASCII character `to_lowercase` looks every character up in
/// the Unicode table, ASCII included, and mail text that has one accent has thousands of
/// ASCII letters (a tenth of indexing its full text). Only a capital sigma lowers by its
/// context (final or not), so a string that has one is left to `to_lowercase` whole.
fn lowercase(s: &str) -> String {
    if s.contains('\u{3A3}') {
        return s.to_lowercase();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while !rest.is_empty() {
        let run = rest
            .bytes()
            .position(|b| !b.is_ascii())
            .unwrap_or(rest.len());
        let at = out.len();
        out.push_str(&rest[..run]);
        out[at..].make_ascii_lowercase();
        rest = &rest[run..];
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            out.extend(c.to_lowercase());
            rest = chars.as_str();
        }
    }
    out
}

/// An address field body written out as SEARCH FROM/TO/CC/BCC match it: the addresses as
/// ENVELOPE reads them, with display names, comments dropped (Dovecot's
/// `message_address_write`; see [`maildex_mime::address_search_text`]). Encoded words are
/// kept: decode the result with [`crate::decode_header`].
pub fn address_text(value: &[u8]) -> Vec<u8> {
    maildex_mime::address_search_text(value)
}

/// A header value (unfolded, as [`field_values`] gives it, then rendered by the criterion:
/// [`address_text`], [`compress_lwsp`] or as is) as SEARCH compares it: RFC 2047-decoded
/// and [`normalize`]d.
pub fn search_text(rendered: &[u8]) -> String {
    normalize_owned(decode_header(rendered))
}

/// What SEARCH FROM/TO/CC/BCC/SUBJECT and SENT* compare, from a message's root header
/// block (or its hot header fields, which hold the same fields), computed when the message
/// is indexed. The rules are the ones a scan applies (RFC 3501 §6.4.4, as Dovecot does):
/// every occurrence of the field, addresses as ENVELOPE reads them with their display
/// names, the subject with its white space compressed, the calendar day of the first
/// Date: field as written (0, i.e. 1970-01-01, when there is none or it cannot be read);
/// and the fields of [`maildex_index::SEARCH_HEADERS`] as HEADER compares them.
pub fn search_fields(header: &[u8]) -> SearchFields {
    const FIXED: [&[u8]; 6] = [b"date", b"from", b"to", b"cc", b"bcc", b"subject"];
    let mut names: Vec<&[u8]> = FIXED.to_vec();
    names.extend_from_slice(maildex_index::SEARCH_HEADERS);
    // one walk of the block for every field
    let mut values = crate::header::fields_values(header, &names).into_iter();
    let mut next = || values.next().unwrap_or_default();
    let texts = |raw: Vec<Vec<u8>>, render: fn(&[u8]) -> Vec<u8>| -> Vec<String> {
        raw.iter().map(|v| search_text(&render(v))).collect()
    };
    let sent_day = next().first().and_then(|v| crate::sent_day(v)).unwrap_or(0);
    SearchFields {
        sent_day,
        from: texts(next(), address_text),
        to: texts(next(), address_text),
        cc: texts(next(), address_text),
        bcc: texts(next(), address_text),
        subject: texts(next(), compress_lwsp),
        headers: maildex_index::SEARCH_HEADERS
            .iter()
            .map(|_| texts(next(), |v| v.to_vec()))
            .collect(),
        learned: Vec::new(),
    }
}

/// The occurrences of header field `name` in a root header block as HEADER compares them
/// (unfolded, RFC 2047-decoded, normalised), as [`search_fields`] keeps those of
/// [`maildex_index::SEARCH_HEADERS`]: what a mailbox's learned fields hold
/// ([`maildex_index::learned`]).
pub fn header_values(header: &[u8], name: &str) -> Vec<String> {
    field_values(header, name.as_bytes())
        .iter()
        .map(|v| search_text(v))
        .collect()
}

/// Whether some value (one of [`search_fields`]' lists, or [`search_text`]s) holds
/// `needle`, already [`normalize`]d; an empty needle asks only that the field exist
/// (Dovecot's `search_header_arg`).
pub fn any_contains(values: &[String], needle: &str) -> bool {
    if needle.is_empty() {
        return !values.is_empty();
    }
    values.iter().any(|v| v.contains(needle))
}

/// [`any_contains`] over values read in place (a stored
/// [`maildex_index::SearchView`]'s strings).
pub fn any_contains_bytes<'a>(mut values: impl Iterator<Item = &'a [u8]>, needle: &str) -> bool {
    if needle.is_empty() {
        return values.next().is_some();
    }
    // SEARCH calls this for every message, with values of a few dozen bytes: building a
    // memmem searcher cost more than the search (6% of a SEARCH SUBJECT), so short values
    // are searched from the needle's first byte, and a searcher is built only for a long
    // value.
    let n = needle.as_bytes();
    let mut finder = None;
    values.any(|v| {
        if v.len() < SHORT_VALUE {
            contains_short(v, n)
        } else {
            finder
                .get_or_insert_with(|| memchr::memmem::Finder::new(n))
                .find(v)
                .is_some()
        }
    })
}

/// Values shorter than this are searched by [`contains_short`].
const SHORT_VALUE: usize = 256;

/// Whether `hay` holds `needle` (not empty), found from the occurrences of its first byte.
fn contains_short(hay: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else {
        return true;
    };
    memchr::memchr_iter(first, hay).any(|i| hay[i + 1..].starts_with(rest))
}

/// A message's text normalised for SEARCH BODY and TEXT (RFC 3501 §6.4.4). Computed when
/// the message is indexed and stored as a [`TextRecord`] (the `fts-text` column), so a
/// SEARCH compares the stored record and reads no message file.
///
/// The text parts are bytes, borrowed from a stored record read in place
/// ([`SearchText::from_stored`]) or owned: UTF-8 as written, compared as bytes (a UTF-8
/// needle is a substring of the string exactly when it is one of its bytes).
#[derive(Debug, Clone, Default)]
pub struct SearchText<'a> {
    headers: Vec<String>,
    bodies: Vec<Cow<'a, [u8]>>,
    /// Header blocks not decoded yet ([`SearchText::with_header_blocks`]): TEXT decodes
    /// them the first time no body matched.
    blocks: Option<Box<(Vec<u8>, PartRecord)>>,
    decoded: OnceLock<Vec<String>>,
}

/// Equal texts compare the same: header blocks count as the header text they decode to.
impl PartialEq for SearchText<'_> {
    fn eq(&self, other: &SearchText) -> bool {
        self.bodies == other.bodies && self.header_texts() == other.header_texts()
    }
}

impl Eq for SearchText<'_> {}

impl<'a> SearchText<'a> {
    /// Normalises every part of `text`.
    pub fn new(text: MessageText) -> SearchText<'static> {
        SearchText {
            headers: text.headers.into_iter().map(normalize_owned).collect(),
            bodies: text
                .bodies
                .into_iter()
                .map(|b| Cow::Owned(normalize_owned(b).into_bytes()))
                .collect(),
            ..SearchText::default()
        }
    }

    /// The record the index stores.
    pub fn into_record(self) -> TextRecord {
        let headers = match self.blocks {
            None => self.headers,
            Some(_) => self.header_texts().to_vec(),
        };
        TextRecord {
            headers,
            bodies: self
                .bodies
                .into_iter()
                .map(|b| match String::from_utf8(b.into_owned()) {
                    Ok(s) => s,
                    Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
                })
                .collect(),
        }
    }

    /// The same text with `headers` (header texts as [`MessageText::headers`], not yet
    /// normalised) in place of its own: a stored record holds only the bodies, and TEXT
    /// takes the header text from the index's header blocks
    /// ([`MessageText::header_texts`]).
    pub fn with_headers(mut self, headers: Vec<String>) -> SearchText<'a> {
        self.headers = headers.into_iter().map(normalize_owned).collect();
        self.blocks = None;
        self.decoded = OnceLock::new();
        self
    }

    /// [`SearchText::with_headers`] of the header text of `blocks` (the index's header
    /// blocks of the message whose part tree is `root`), decoded only when asked for: a
    /// TEXT key whose needle is in a body never decodes them (decoding the header blocks
    /// made TEXT three times as slow as BODY).
    pub fn with_header_blocks(mut self, blocks: Vec<u8>, root: PartRecord) -> SearchText<'a> {
        self.headers = Vec::new();
        self.blocks = Some(Box::new((blocks, root)));
        self.decoded = OnceLock::new();
        self
    }

    /// The normalised header texts, decoded from the header blocks the first time.
    fn header_texts(&self) -> &[String] {
        match &self.blocks {
            None => &self.headers,
            Some(b) => self.decoded.get_or_init(|| {
                MessageText::header_texts(&b.0, &b.1)
                    .into_iter()
                    .map(normalize_owned)
                    .collect()
            }),
        }
    }

    /// The text of a stored record (already normalised when it was made).
    pub fn from_record(r: TextRecord) -> SearchText<'static> {
        SearchText {
            headers: r.headers,
            bodies: r
                .bodies
                .into_iter()
                .map(|b| Cow::Owned(b.into_bytes()))
                .collect(),
            ..SearchText::default()
        }
    }

    /// The text of a stored record read in place, its text parts borrowed. Its header
    /// texts (records written before the header blocks were stored apart) are copied.
    pub fn from_stored(r: TextRecordRef<'a>) -> SearchText<'a> {
        SearchText {
            headers: r
                .headers
                .into_iter()
                .map(|h| String::from_utf8_lossy(h).into_owned())
                .collect(),
            bodies: r.bodies.into_iter().map(Cow::Borrowed).collect(),
            ..SearchText::default()
        }
    }

    /// The same text owning its parts, to keep past the record it was read from.
    pub fn into_owned(self) -> SearchText<'static> {
        SearchText {
            headers: self.headers,
            bodies: self
                .bodies
                .into_iter()
                .map(|b| Cow::Owned(b.into_owned()))
                .collect(),
            blocks: self.blocks,
            decoded: self.decoded,
        }
    }

    /// BODY: some text part holds `needle` (already [`normalize`]d).
    pub fn body_contains(&self, needle: &str) -> bool {
        // an empty needle is found in any part, as `str::contains` finds it
        let finder = memchr::memmem::Finder::new(needle.as_bytes());
        self.bodies.iter().any(|b| finder.find(b).is_some())
    }

    /// TEXT ("in the header or body"): some header block or text part holds `needle`
    /// (already [`normalize`]d).
    pub fn text_contains(&self, needle: &str) -> bool {
        self.body_contains(needle) || self.header_texts().iter().any(|h| h.contains(needle))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_contains_bytes_finds_what_a_plain_search_finds_in_short_and_long_values() {
        let long = format!("{}needle at the end", "x".repeat(300));
        let values: [&[u8]; 6] = [
            b"",
            b"n",
            b"nneedlx",
            b"a needle",
            b"needle",
            long.as_bytes(),
        ];
        for needle in [
            "n",
            "ne",
            "needle",
            "needlx",
            "eedl",
            "e at the end",
            "zz",
            "x",
        ] {
            for v in values {
                let want = v.windows(needle.len()).any(|w| w == needle.as_bytes());
                assert_eq!(
                    any_contains_bytes(std::iter::once(v), needle),
                    want,
                    "{needle:?} in {:?}",
                    String::from_utf8_lossy(v)
                );
            }
        }
        assert!(any_contains_bytes(values.iter().copied(), "e at the end"));
        assert!(!any_contains_bytes(std::iter::empty(), "x"));
        assert!(any_contains_bytes(std::iter::once(&b""[..]), ""));
    }

    #[test]
    fn lowering_by_runs_is_to_lowercase() {
        for s in [
            "ÉCOLE Straße",
            "Grüße AUS KÖLN, MfG",
            "İstanbul IŞIK",
            "ΟΔΥΣΣΕΥΣ Σ ΑΣ",
            "ǅ ǈ ǋ Ａ Ω K Å",
            "日本語 ABC テキスト DEF",
            "\u{10400}\u{10401}X",
            "a\u{0}B\u{7f}C\u{80}D",
            "",
        ] {
            assert_eq!(normalize(s), s.to_lowercase(), "{s:?}");
            assert_eq!(normalize_owned(s.to_owned()), s.to_lowercase(), "{s:?}");
        }
    }

    #[test]
    fn text_decodes_the_header_blocks_only_when_no_body_matched() {
        let msg = b"Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?= aus K\xc3\xb6ln\r\n\
MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n\
--b\r\nContent-Type: text/plain\r\nX-Part: Marker\r\n\r\nThe Body\r\n--b--\r\n";
        let summary = maildex_mime::summarize(msg);
        let built = maildex_index::build(msg, &summary, Default::default()).expect("build");
        let parts = built.record.cached.parts;
        let eager = SearchText::new(MessageText::extract(msg, &parts, crate::Html::AsWritten));
        let mut stored = eager.clone().into_record();
        stored.headers.clear();
        let lazy = SearchText::from_record(stored).with_header_blocks(built.headers, parts);
        assert!(lazy.text_contains("the body"));
        assert!(
            lazy.decoded.get().is_none(),
            "a body matched: no header decoded"
        );
        assert!(!lazy.body_contains("grüße"));
        assert!(lazy.text_contains("grüße aus köln"));
        assert!(lazy.text_contains("x-part: marker"));
        assert!(!lazy.text_contains("absent"));
        assert_eq!(lazy, eager);
        assert_eq!(lazy.into_record(), eager.into_record());
    }

    #[test]
    fn normalize_folds_unicode() {
        assert_eq!(normalize("ÉCOLE Straße"), "école straße");
        assert_eq!(normalize("MiXeD"), "mixed");
    }
}
