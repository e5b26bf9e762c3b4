//! The header fields that mail clients list come from the index exactly as they are in the
//! files: the hot fields for the usual lists, the stored header blocks for any other field.

use crate::support::Scratch;
use maildex_store::DeliverOptions;
use rand::SeedableRng;

/// The HEADER.FIELDS lists of real clients' listing commands.
const CLIENT_LISTS: &[(&str, &[&str])] = &[
    (
        "mutt",
        &[
            "DATE",
            "FROM",
            "SUBJECT",
            "TO",
            "CC",
            "MESSAGE-ID",
            "REFERENCES",
            "CONTENT-TYPE",
            "CONTENT-DESCRIPTION",
            "IN-REPLY-TO",
            "REPLY-TO",
            "LINES",
            "LIST-POST",
            "X-LABEL",
        ],
    ),
    (
        "thunderbird",
        &[
            "From",
            "To",
            "Cc",
            "Bcc",
            "Subject",
            "Date",
            "Message-ID",
            "Priority",
            "X-Priority",
            "References",
            "Newsgroups",
            "In-Reply-To",
            "Content-Type",
            "Reply-To",
        ],
    ),
    (
        "apple mail",
        &[
            "date",
            "subject",
            "from",
            "to",
            "cc",
            "message-id",
            "in-reply-to",
            "references",
            "content-type",
            "x-priority",
            "x-uniform-type-identifier",
            "x-universally-unique-identifier",
            "list-id",
            "list-unsubscribe",
        ],
    ),
    (
        "k-9",
        &[
            "date",
            "subject",
            "from",
            "content-type",
            "to",
            "cc",
            "reply-to",
            "message-id",
            "references",
            "in-reply-to",
            "X-K9mail-Identity",
            "Chat-Version",
        ],
    ),
    (
        "roundcube",
        &[
            "DATE",
            "FROM",
            "TO",
            "SUBJECT",
            "CONTENT-TYPE",
            "CC",
            "REPLY-TO",
            "LIST-POST",
            "DISPOSITION-NOTIFICATION-TO",
            "X-PRIORITY",
            "MAIL-FOLLOWUP-TO",
            "MAIL-REPLY-TO",
            "MESSAGE-ID",
            "REFERENCES",
            "IN-REPLY-TO",
        ],
    ),
];

#[test]
fn every_client_listing_is_answered_from_the_index() {
    let s = Scratch::new();
    let store = s.open();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut files = Vec::new();
    for i in 0..60 {
        let msg = maildex_corpus::message(&mut rng, i, 0.2);
        let d = store
            .deliver("INBOX", &mut &msg[..], &DeliverOptions::default())
            .unwrap();
        files.push((d, msg));
    }
    for (d, file) in &files {
        let (rec, blocks) = store
            .index()
            .read(|r| {
                Ok((
                    r.message(d.mailbox_id, d.uid)?.unwrap(),
                    r.headers(d.mailbox_id, d.uid)?.unwrap(),
                ))
            })
            .unwrap();
        let summary = maildex_mime::summarize(file);
        let header = &file[..summary.root.body_start as usize];
        // the stored header blocks start with the file's own header block, byte for byte
        assert_eq!(&blocks[..header.len()], header, "uid {}", d.uid);
        for (client, names) in CLIENT_LISTS {
            let names: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
            for n in &names {
                assert!(
                    maildex_index::HOT_HEADERS
                        .iter()
                        .any(|h| h.eq_ignore_ascii_case(n)),
                    "{client} lists {} which is not a hot field",
                    String::from_utf8_lossy(n)
                );
            }
            let mut from_file = Vec::new();
            maildex_mime::header_fields(header, &names, false, &mut from_file);
            let mut from_index = Vec::new();
            maildex_mime::header_fields(&rec.cached.hot_headers, &names, false, &mut from_index);
            assert_eq!(
                String::from_utf8_lossy(&from_index),
                String::from_utf8_lossy(&from_file),
                "{client}, uid {}",
                d.uid
            );
        }
        // a field outside the hot set (Received, DKIM-Signature) is in the stored blocks
        for name in [&b"received"[..], b"dkim-signature"] {
            let mut from_file = Vec::new();
            maildex_mime::header_fields(header, &[name], false, &mut from_file);
            let mut from_blocks = Vec::new();
            maildex_mime::header_fields(&blocks[..header.len()], &[name], false, &mut from_blocks);
            assert_eq!(from_blocks, from_file);
        }
    }
}
