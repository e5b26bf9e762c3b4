//! maildex-mime: the summary of one message file that maildex's index keeps.
//!
//! [`summarize`] scans the bytes of a message once and returns a [`Summary`]:
//! the physical and CRLF sizes, the MIME part tree with byte offsets into the
//! file, what ENVELOPE and BODYSTRUCTURE need, so that IMAP FETCH of
//! ENVELOPE, BODY, BODYSTRUCTURE, RFC822.SIZE, BODY[HEADER],
//! BODY[HEADER.FIELDS], BODY[n.MIME] is answered from the index alone, and
//! BODY[section] reads exactly the byte range it needs.
//!
//! The rules follow RFC 2045/2046 (MIME), RFC 5322 (addresses) and RFC 3501 /
//! RFC 9051 (FETCH), and where those leave room, what Dovecot 2.3 does, so
//! that people moving between maildex and Dovecot see the same answers. The
//! golden tests in `tests/golden/` hold Dovecot's own answers.
//!
//! Why not mail-parser (pinned at 0.11.9): it truncates a part at a boundary
//! string found in the middle of a line, reports the body offset of
//! `parse_headers()` as the end of the input, gives base64-encoded
//! message/rfc822 parts offsets into decoded bytes, decodes every body
//! eagerly, and decodes RFC 2231 / RFC 2047 values that IMAP wants raw
//! (its parameter parsing is not raw enough to reproduce BODYSTRUCTURE). So
//! all scanning here is ours and this crate does not use mail-parser; bring
//! it back (behind this crate) when decoded text is needed, e.g. for SEARCH.

use serde::{Deserialize, Serialize};

mod address;
mod content;
mod crlf;
mod decode;
mod envelope;
/// Invariant checks run by the fuzz target and `tests/fuzz_corpus.rs`.
#[doc(hidden)]
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod header;
mod render;
mod rfc822;
mod section;
mod structure;

pub use address::address_search_text;
pub use crlf::{crlf_len, to_crlf, CrlfWriter};
pub use decode::{decode_all, Base64Decoder, Decoder, Encoding, QpDecoder};
pub use render::{write_body_structure, write_envelope};
pub use section::{
    find_part, find_section, header_fields, header_fields_of_part, PartShape, PartTree,
};

/// Nesting depth at which a multipart or message/rfc822 part is no longer
/// opened but kept as one opaque part (Dovecot's default
/// `MESSAGE_PARSER_DEFAULT_MAX_NESTED_MIME_PARTS`, 100 levels counting the
/// message itself).
pub const MAX_NESTING: u32 = 100;

/// Number of parts (the message itself included) after which no more parts
/// are made: the last one runs to the end of the file (Dovecot's default
/// `MESSAGE_PARSER_DEFAULT_MAX_TOTAL_MIME_PARTS`).
pub const MAX_PARTS: usize = 10_000;

/// Everything the index keeps about one message file. All summary types
/// derive serde's `Serialize`/`Deserialize` so the index can store them
/// (e.g. with postcard).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Physical size of the file in bytes.
    pub size: u64,
    /// RFC822.SIZE: the size after LF -> CRLF conversion (a LF not preceded
    /// by CR counts 2).
    pub vsize: u64,
    /// The message itself as the root of the MIME part tree.
    pub root: Part,
    /// The message's ENVELOPE (RFC 3501 §7.4.2).
    pub envelope: Envelope,
}

/// One MIME part (or the whole message) with its byte ranges in the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// Offset of the first header byte.
    pub header_start: u64,
    /// Offset of the first body byte. The header block is
    /// `[header_start, body_start)` and includes the blank line when there
    /// is one.
    pub body_start: u64,
    /// Offset just past the body. The body is `[body_start, end)`; for a
    /// part inside a multipart it stops before the line break that belongs
    /// to the next boundary delimiter (RFC 2046 §5.1.1).
    pub end: u64,
    /// CRLF size of the header block (BODY[n.MIME], BODY[HEADER] sizes).
    pub header_vsize: u64,
    /// CRLF size of the body: the size field of BODYSTRUCTURE.
    pub body_vsize: u64,
    /// Number of lines in the body (LF count), as BODYSTRUCTURE reports for
    /// text/* and message/rfc822 parts.
    pub body_lines: u32,
    /// The Content-* header values BODYSTRUCTURE reports.
    pub content: ContentInfo,
    /// Leaf, multipart or encapsulated message.
    pub kind: PartKind,
}

/// What a part holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartKind {
    /// A leaf part (also a multipart or message/rfc822 part beyond the
    /// nesting or part-count limits).
    Single,
    /// A multipart/* part and its body parts in order (possibly none, when
    /// the boundary is missing or never appears).
    Multipart(Vec<Part>),
    /// A message/rfc822 part (or a part of a multipart/digest without
    /// Content-Type, RFC 2046 §5.1.5): the encapsulated message's envelope
    /// and its root part.
    Message {
        /// ENVELOPE of the encapsulated message.
        envelope: Box<Envelope>,
        /// The encapsulated message; its header block starts at this part's
        /// `body_start` and it ends at this part's `end`, or one line break
        /// earlier when its header runs into a boundary delimiter.
        root: Box<Part>,
    },
}

/// One parameter of Content-Type or Content-Disposition, raw bytes.
///
/// RFC 2231 continuations (`name*0`, `name*1*`, ...) are joined but not
/// decoded, as Dovecot reports them: `("name*" "utf-8''a%20b")`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    /// Attribute name as written (case kept).
    pub name: Vec<u8>,
    /// Value with quoting removed.
    pub value: Vec<u8>,
}

/// The Content-* values BODYSTRUCTURE needs (RFC 3501 §7.4.2), raw bytes.
///
/// Values come from the first occurrence of each header. They are ignored
/// (left empty) in a message or encapsulated message header that has neither
/// MIME-Version nor Content-Type.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentInfo {
    /// Media type as written (`None` without a Content-Type: text/plain,
    /// RFC 2045 §5.2).
    pub media_type: Option<Vec<u8>>,
    /// Subtype as written (`None` when Content-Type has no `/`).
    pub subtype: Option<Vec<u8>>,
    /// Content-Type parameters in order, RFC 2231 groups joined at the end.
    pub params: Vec<Param>,
    /// Content-ID raw field body (folded lines joined by LF, as in
    /// [`Envelope`]; rendering unfolds).
    pub id: Option<Vec<u8>>,
    /// Content-Description value.
    pub description: Option<Vec<u8>>,
    /// Content-Transfer-Encoding token (`None`: 7bit).
    pub encoding: Option<Vec<u8>>,
    /// Content-MD5 value.
    pub md5: Option<Vec<u8>>,
    /// Content-Disposition type token.
    pub disposition: Option<Vec<u8>>,
    /// Content-Disposition parameters.
    pub disposition_params: Vec<Param>,
    /// Content-Language tags (empty: none).
    pub language: Vec<Vec<u8>>,
    /// Content-Location value.
    pub location: Option<Vec<u8>>,
}

/// One entry of an ENVELOPE address list, as IMAP renders it
/// (RFC 3501 §7.4.2): `(name adl mailbox host)`.
///
/// A group is rendered as a start marker `(NIL NIL "group name" NIL)`, its
/// members, and an end marker `(NIL NIL NIL NIL)`; see
/// [`Address::is_group_start`] and [`Address::is_group_end`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Address {
    /// Display name, raw (quotes removed, encoded words kept).
    pub name: Option<Vec<u8>>,
    /// Source route (`@a,@b`), obsolete syntax.
    pub route: Option<Vec<u8>>,
    /// Local part, or the group name in a group start marker.
    pub mailbox: Option<Vec<u8>>,
    /// Domain; `None` only in group markers.
    pub host: Option<Vec<u8>>,
}

impl Address {
    /// True for a group start marker.
    pub fn is_group_start(&self) -> bool {
        self.host.is_none() && self.mailbox.is_some()
    }

    /// True for a group end marker.
    pub fn is_group_end(&self) -> bool {
        self.host.is_none() && self.mailbox.is_none()
    }
}

/// What ENVELOPE reports (RFC 3501 §7.4.2, RFC 9051 §7.5.2).
///
/// String fields are the raw field body: the text after the colon with the
/// leading white space skipped, folded lines joined by LF with CR dropped,
/// NUL replaced by U+FFFD, encoded words not decoded. Rendering unfolds them
/// the way Dovecot does (see [`write_envelope`]); [`unfold`] gives the
/// one-line form. The last Date/Subject/In-Reply-To/Message-ID header wins;
/// repeated address headers add up. Sender and Reply-To default to From.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// Date field body.
    pub date: Option<Vec<u8>>,
    /// Subject field body.
    pub subject: Option<Vec<u8>>,
    /// From addresses.
    pub from: Vec<Address>,
    /// Sender addresses (From when absent).
    pub sender: Vec<Address>,
    /// Reply-To addresses (From when absent).
    pub reply_to: Vec<Address>,
    /// To addresses.
    pub to: Vec<Address>,
    /// Cc addresses.
    pub cc: Vec<Address>,
    /// Bcc addresses.
    pub bcc: Vec<Address>,
    /// In-Reply-To field body.
    pub in_reply_to: Option<Vec<u8>>,
    /// Message-ID field body.
    pub message_id: Option<Vec<u8>>,
}

/// Unfolds a raw field body: removes CR and LF, putting a space in their
/// place only when the next line does not start with white space (RFC 5322
/// §2.2.3; Dovecot's "nolf" rendering).
pub fn unfold(value: &[u8]) -> Vec<u8> {
    render::remove_newlines(value)
}

/// The Content-* values of the part whose header block is `block` (the bytes
/// `header_start..body_start` of a [`Part`], or of the index's part record), read exactly
/// as [`summarize`] reads them, so a caller holding the part tree need not summarize the
/// message again. `in_multipart`: the part is a body part of a multipart (MIME applies
/// without MIME-Version, RFC 2046 §5.1); otherwise (the message, an encapsulated message)
/// the values count only with MIME-Version or Content-Type, as in Dovecot.
pub fn part_content(block: &[u8], in_multipart: bool) -> ContentInfo {
    structure::part_content(block, in_multipart)
}

/// Summarizes one message file. Never fails: any bytes (binary, NULs,
/// truncated, broken MIME, no header/body separator, empty) give a summary,
/// the way Dovecot still serves such messages. Bodies are never decoded.
pub fn summarize(msg: &[u8]) -> Summary {
    let (root, envelope) = structure::build(msg);
    Summary {
        size: msg.len() as u64,
        vsize: root.header_vsize + root.body_vsize,
        root,
        envelope,
    }
}
