//! maildex-text: the decoded text of a message, below the IMAP sessions, so that SEARCH
//! and a full-text index share one reading of it.
//!
//! - [`MessageText::extract`]: from the message bytes and the part tree the index already
//!   stores ([`maildex_index::PartRecord`]), every header block unfolded and RFC 2047
//!   decoded, every text part's body transfer-decoded (base64, quoted-printable) and
//!   converted to UTF-8. The message is not MIME-parsed again: each leaf's own header block
//!   is read for its Content-* fields exactly as the summary read it
//!   ([`maildex_mime::part_content`]). Every index record carries its part tree (written
//!   by `maildex_index::build` at delivery, APPEND, COPY and sync; a schema change is a
//!   rebuild), so there is no record without one to fall back from.
//! - Header fields: [`field_values`], [`fields`], [`decode_header`] (RFC 2047),
//!   [`compress_lwsp`] (SUBJECT), [`address_text`] (FROM/TO/CC/BCC).
//! - SORT and THREAD keys: [`sort_keys`] (RFC 5256 sent date and base subject, RFC 5957
//!   display names, i;unicode-casemap through [`casemap`], msg-ids), computed at indexing.
//! - SEARCH's comparison: [`normalize`] on both sides, [`search_fields`] (what FROM/TO/CC/
//!   BCC/SUBJECT and SENT* compare, stored in the index when a message is indexed),
//!   [`sent_day`] (the Date: field), [`SearchText`] for BODY and TEXT.
//!
//! No I/O and no tokio: the caller (the store) reads the file.
//!
//! # Rules, as Dovecot 2.3 applies them (checked by `tests/dovecot.rs`)
//!
//! - **Case**: "case-insensitive" is Unicode lowercase of each character ([`normalize`]).
//! - **Encoded words** (RFC 2047) are recognised anywhere in a header value, not only as
//!   whole atoms; white space between two adjacent encoded words is dropped (§6.2); white
//!   space inside a word's text does not end it, a `?` does; a malformed word stays as
//!   written, and a bad `=XX` in Q text stays while the rest of the word is decoded.
//! - **Charsets**: UTF-8, US-ASCII and ASCII are read as UTF-8 with invalid sequences
//!   replaced (Dovecot's `charset_is_utf8`: 8-bit text labelled US-ASCII is usually UTF-8);
//!   ISO-8859-1 maps each byte to the code point of its value (iconv's ISO-8859-1, so 0x80
//!   is U+0080, not the euro sign of Windows-1252); other charsets (ISO-8859-2, KOI8-R,
//!   Windows-1251, ...) are converted as iconv converts them ([`to_utf8`]). An unknown
//!   charset is read as UTF-8.
//! - **Non-text parts** (images, archives: anything but `text/*`, untyped parts and
//!   unparsed multiparts) are not searched.
//! - **HTML**: Dovecot 2.3's SEARCH BODY and TEXT without an fts plugin search a `text/html`
//!   part as written: `BODY "<b>"` and `BODY "&eacute;"` match the markup, and a word split
//!   by a tag (`wor<i>ld</i>`) is not found as `world`. SEARCH therefore uses
//!   [`Html::AsWritten`]; [`Html::ToText`] (tags dropped, entities decoded, through
//!   mail-parser's `html_to_text`) is for a full-text index.
//!
//! mail-parser (0.11.9) is used where its decoding is right for this: the charset
//! decoders (all but UTF-8, US-ASCII, ISO-8859-1 and UTF-7, where it differs from iconv)
//! and HTML to text. Its
//! RFC 2047 decoder is not (it drops a whole word for one bad `=XX` where Dovecot keeps the
//! rest, and takes `?` inside the encoded text), so that one is ours.

mod casemap;
mod charset;
mod date;
mod header;
mod message;
mod search;
mod sort;

pub use casemap::casemap;
pub use charset::to_utf8;
pub use date::sent_day;
pub use header::{compress_lwsp, decode_header, field_values, fields};
pub use message::{Html, MessageText};
pub use search::{
    address_text, any_contains, any_contains_bytes, header_values, normalize, search_fields,
    search_text, SearchText,
};
pub use sort::{base_subject, message_ids, sent_date, sort_keys};
