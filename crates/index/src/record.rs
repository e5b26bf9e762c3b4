//! Building a [`MessageRecord`] from a message file's bytes and its MIME summary.

use maildex_mime::{Part, PartKind, Summary};

use crate::schema::{Cached, MessageRecord, MessageState, PartKindRecord, PartRecord};
use crate::IndexError;

/// Header fields kept uncompressed in every record, because the clients we serve list them
/// (the union of the HEADER.FIELDS lists of mutt, Thunderbird, Evolution, Apple Mail, K-9 and
/// Roundcube). Changing this list changes what a record means: bump the schema version.
/// A FETCH of HEADER.FIELDS naming only these is answered from the record alone; any other
/// field comes from the compressed header blocks, so no header fetch ever opens the file.
pub const HOT_HEADERS: &[&[u8]] = &[
    b"date",
    b"from",
    b"sender",
    b"reply-to",
    b"to",
    b"cc",
    b"bcc",
    b"subject",
    b"message-id",
    b"in-reply-to",
    b"references",
    b"content-type",
    b"content-description",
    b"lines",
    b"list-post",
    b"list-id",
    b"list-unsubscribe",
    b"x-label",
    b"priority",
    b"x-priority",
    b"importance",
    b"newsgroups",
    b"disposition-notification-to",
    b"mail-followup-to",
    b"mail-reply-to",
    b"x-uniform-type-identifier",
    b"x-universally-unique-identifier",
    b"chat-version",
    b"x-k9mail-identity",
    // mutt 2.x
    b"list-subscribe",
    b"x-original-to",
    // Evolution (camel-imapx)
    b"mime-version",
    b"content-class",
    b"x-calendar-attachment",
    b"return-path",
    b"x-mailing-list",
    b"mailing-list",
    b"x-loop",
    b"x-list",
    b"originator",
    b"x-beenthere",
];

/// A record ready for [`crate::Writer::insert_message`].
#[derive(Clone, Debug)]
pub struct Built {
    /// The record.
    pub record: MessageRecord,
    /// The raw header blocks (root, then every part in pre-order).
    pub headers: Vec<u8>,
}

fn part_record(part: &Part) -> PartRecord {
    PartRecord {
        header_start: part.header_start,
        body_start: part.body_start,
        end: part.end,
        header_vsize: part.header_vsize,
        body_vsize: part.body_vsize,
        lines: part.body_lines,
        kind: match &part.kind {
            PartKind::Single => PartKindRecord::Single,
            PartKind::Multipart(children) => {
                PartKindRecord::Multipart(children.iter().map(part_record).collect())
            }
            PartKind::Message { root, .. } => PartKindRecord::Message(Box::new(part_record(root))),
        },
    }
}

fn slice(bytes: &[u8], start: u64, end: u64) -> &[u8] {
    let len = bytes.len() as u64;
    let (s, e) = (start.min(len) as usize, end.min(len) as usize);
    bytes.get(s..e.max(s)).unwrap_or_default()
}

/// Builds the record of one message from the file's bytes and its summary. `state` carries
/// what the caller knows (name, flags, dates); the sizes come from the summary.
pub fn build(file: &[u8], summary: &Summary, state: MessageState) -> Result<Built, IndexError> {
    let parts = part_record(&summary.root);
    let root_header = slice(file, summary.root.header_start, summary.root.body_start);

    let mut hot_headers = Vec::with_capacity(512);
    maildex_mime::header_fields(root_header, HOT_HEADERS, false, &mut hot_headers);
    let mut envelope = Vec::with_capacity(256);
    maildex_mime::write_envelope(&summary.envelope, &mut envelope);
    let mut body = Vec::with_capacity(128);
    maildex_mime::write_body_structure(&summary.root, false, &mut body);
    let mut body_structure = Vec::with_capacity(192);
    maildex_mime::write_body_structure(&summary.root, true, &mut body_structure);

    let mut blocks = Vec::with_capacity(root_header.len() + 256);
    parts.walk(&mut |p| blocks.extend_from_slice(slice(file, p.header_start, p.body_start)));

    let record = MessageRecord {
        state: MessageState {
            size: summary.size,
            vsize: summary.vsize,
            ..state
        },
        cached: Cached {
            hot_headers,
            envelope,
            body,
            body_structure,
            parts,
            // the store fills these in (maildex_text::sort_keys: RFC 2047, casemap)
            sort: Default::default(),
            // filled by the store, which owns the text rules (maildex-text)
            search: Default::default(),
            // and this (the text rules are maildex-text's)
            text: Vec::new(),
            text_sig: Vec::new(),
        },
    };
    Ok(Built {
        record,
        headers: blocks,
    })
}
