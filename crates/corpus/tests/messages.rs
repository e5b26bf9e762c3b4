//! Structure and header realism of generated messages.

mod common;

use std::collections::HashSet;

use maildex_corpus::{message, Generated, Generator, Role};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const ROLES: [Role; 9] = [
    Role::Inbox,
    Role::Inbox,
    Role::Inbox,
    Role::Sent,
    Role::Drafts,
    Role::Junk,
    Role::Meetings,
    Role::List(0),
    Role::List(1),
];

fn corpus(n: usize, scale: f64) -> Vec<(Role, Generated)> {
    let mut out = Vec::with_capacity(n);
    for user in 0..3 {
        let mut g = Generator::for_user(99, user, scale);
        for i in 0..n / 3 {
            let role = ROLES[i % ROLES.len()];
            out.push((role, g.next_message(role)));
        }
    }
    out
}

#[test]
fn header_blocks_are_well_formed() {
    for (_, m) in corpus(1500, 0.5) {
        let (head, body) = common::split(&m.bytes).expect("header/body separator");
        assert!(!body.is_empty());
        let text = std::str::from_utf8(head).expect("headers are UTF-8");
        assert!(
            text.is_ascii(),
            "non-ASCII header (must be RFC 2047 encoded):\n{text}"
        );
        for line in text.lines() {
            assert!(!line.is_empty());
            assert!(line.len() <= 998, "RFC 5322 §2.1.1 line limit");
            if !line.starts_with([' ', '\t']) {
                let (name, _) = line
                    .split_once(':')
                    .unwrap_or_else(|| panic!("not a field: {line:?}"));
                assert!(
                    !name.is_empty() && name.bytes().all(|b| (33..=126).contains(&b) && b != b':'),
                    "{name:?}"
                );
            }
        }
        let f = common::fields(head);
        for required in [
            "Date",
            "From",
            "Message-ID",
            "MIME-Version",
            "Content-Type",
            "Subject",
        ] {
            assert!(common::get(&f, required).is_some(), "missing {required}");
        }
        assert_eq!(common::get(&f, "Message-ID"), Some(m.message_id.as_str()));
    }
}

#[test]
fn message_ids_are_unique_and_threads_refer_to_earlier_mail() {
    let all = corpus(3000, 0.2);
    let mut ids = HashSet::new();
    let mut replies = 0;
    let mut in_stream = 0;
    for (_, m) in &all {
        let (head, _) = common::split(&m.bytes).unwrap();
        let f = common::fields(head);
        if let Some(parent) = common::get(&f, "In-Reply-To") {
            replies += 1;
            let refs = common::get(&f, "References").expect("replies carry References");
            assert!(
                refs.split_whitespace().last() == Some(parent),
                "References must end with In-Reply-To"
            );
            if ids.contains(parent) {
                in_stream += 1;
            }
        }
        assert!(
            ids.insert(m.message_id.clone()),
            "duplicate Message-ID {}",
            m.message_id
        );
    }
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for i in 0..300 {
        let msg = message(&mut rng, i, 0.2);
        let f = common::fields(common::split(&msg).unwrap().0);
        assert!(ids.insert(common::get(&f, "Message-ID").unwrap().to_owned()));
    }
    assert!(replies > all.len() / 5, "{replies} replies");
    // Most replies continue a thread of the same mailbox.
    assert!(
        in_stream * 2 > replies,
        "{in_stream} of {replies} replies refer to earlier messages"
    );
}

#[test]
fn multiparts_are_closed_with_unique_boundaries() {
    let mut types = HashSet::new();
    let mut encodings = HashSet::new();
    for (_, m) in corpus(2400, 0.3) {
        let mut w = common::Walk::default();
        common::walk(&m.bytes, 0, &mut w);
        assert!(
            w.errors.is_empty(),
            "{:?} in\n{}",
            w.errors,
            String::from_utf8_lossy(&m.bytes[..m.bytes.len().min(6000)])
        );
        let unique: HashSet<_> = w.boundaries.iter().collect();
        assert_eq!(
            unique.len(),
            w.boundaries.len(),
            "boundary reused: {:?}",
            w.boundaries
        );
        for (i, b) in w.boundaries.iter().enumerate() {
            assert!(
                !b.is_empty() && b.len() <= 70,
                "RFC 2046 §5.1.1 boundary length: {b}"
            );
            // No boundary may be a prefix of another one in the same message.
            for (j, c) in w.boundaries.iter().enumerate() {
                assert!(i == j || !c.starts_with(b.as_str()), "{b} prefixes {c}");
            }
        }
        types.extend(w.content_types);
        encodings.extend(w.encodings);
    }
    for t in [
        "text/plain",
        "text/html",
        "multipart/alternative",
        "multipart/mixed",
        "multipart/related",
        "multipart/signed",
        "message/rfc822",
        "application/pdf",
        "text/calendar",
        "text/x-patch",
    ] {
        assert!(types.contains(t), "no {t} in {types:?}");
    }
    for e in ["7bit", "8bit", "quoted-printable", "base64"] {
        assert!(encodings.contains(e), "no {e} in {encodings:?}");
    }
}

#[test]
fn mail_parser_reads_every_message() {
    for (_, m) in corpus(600, 0.3) {
        let parsed = mail_parser::MessageParser::default()
            .parse(&m.bytes[..])
            .expect("parses");
        assert_eq!(
            parsed.message_id().map(|id| format!("<{id}>")),
            Some(m.message_id.clone())
        );
        assert!(parsed.date().is_some(), "Date parses");
        assert!(parsed.from().is_some(), "From parses");
        assert!(
            parsed
                .subject()
                .is_some_and(|s| !s.is_empty() && !s.contains("=?")),
            "Subject decodes: {:?}",
            parsed.subject()
        );
    }
}

#[test]
fn incoming_headers_look_like_real_mail() {
    let all = corpus(1800, 1.0);
    let mut head_sizes = Vec::new();
    let (mut arc, mut encoded_names, mut lists, mut spam_headers) = (0, 0, 0, 0);
    for (role, m) in &all {
        let (head, _) = common::split(&m.bytes).unwrap();
        let f = common::fields(head);
        let received = f.iter().filter(|(n, _)| n == "Received").count();
        if matches!(role, Role::Sent | Role::Drafts) {
            assert_eq!(received, 0, "saved copies have no trace");
            continue;
        }
        head_sizes.push(head.len());
        assert!((2..=6).contains(&received), "{received} Received headers");
        assert!(common::get(&f, "Return-Path").is_some_and(|v| v.starts_with('<')));
        assert!(common::get(&f, "Delivered-To").is_some_and(|v| v.ends_with("@example.org")));
        for (n, v) in &f {
            if n == "Received" {
                // Every hop carries a date after ';' (RFC 5322 §3.6.7).
                let date = v.rsplit(';').next().unwrap();
                assert!(
                    mail_parser::MessageParser::default()
                        .parse(format!("Date: {date}\n\nx").as_bytes())
                        .unwrap()
                        .date()
                        .is_some(),
                    "{v}"
                );
            }
            if n == "DKIM-Signature" || n == "ARC-Seal" || n == "ARC-Message-Signature" {
                let b: String = v
                    .split("b=")
                    .last()
                    .unwrap()
                    .chars()
                    .filter(|c| !c.is_whitespace())
                    .collect();
                assert!(
                    b.len() == 344 || b.len() == 88,
                    "{n} b= of {} chars",
                    b.len()
                );
            }
            if n == "DKIM-Signature" {
                let bh = v.split("bh=").nth(1).unwrap().split(';').next().unwrap();
                assert_eq!(bh.len(), 44, "bh= is a base64 SHA-256");
            }
        }
        arc += usize::from(common::get(&f, "ARC-Seal").is_some());
        lists += usize::from(common::get(&f, "List-Id").is_some());
        spam_headers += usize::from(f.iter().any(|(n, _)| n.starts_with("X-Spam")));
        let from = common::get(&f, "From").unwrap();
        encoded_names += usize::from(from.contains("=?UTF-8?B?") || from.contains("=?UTF-8?Q?"));
        if *role == Role::Junk {
            assert!(f
                .iter()
                .any(|(n, v)| (n == "X-Spam-Flag" && v == "YES") || (n == "X-Spam" && v == "Yes")));
        }
        if let Role::List(_) = role {
            for h in ["List-Id", "List-Post", "List-Unsubscribe", "Precedence"] {
                assert!(common::get(&f, h).is_some(), "list mail without {h}");
            }
        }
    }
    head_sizes.sort_unstable();
    let p50 = common::quantile(&head_sizes, 0.5);
    assert!(
        (2_000..=5_000).contains(&p50),
        "median incoming header block {p50} B"
    );
    let n = head_sizes.len();
    assert!(arc * 10 > n, "{arc} of {n} with ARC");
    assert!(lists * 5 > n, "{lists} of {n} list mails");
    assert!(spam_headers * 2 > n, "{spam_headers} with spam verdicts");
    assert!(
        encoded_names * 50 > n,
        "{encoded_names} RFC 2047 From names"
    );
}

#[test]
fn lmtp_data_strips_only_what_final_delivery_adds() {
    for (role, m) in corpus(300, 0.2) {
        let full = common::fields(common::split(&m.bytes).unwrap().0);
        let wire = m.lmtp_data();
        let wf = common::fields(common::split(wire).unwrap().0);
        match (&m.lmtp, role) {
            (None, Role::Sent | Role::Drafts) => assert_eq!(wire, &m.bytes[..]),
            (Some((sender, off)), _) => {
                assert!(m.bytes.ends_with(wire) && wire.len() + off == m.bytes.len());
                assert_eq!(
                    common::get(&full, "Return-Path"),
                    Some(format!("<{sender}>").as_str())
                );
                assert!(
                    common::get(&wf, "Return-Path").is_none()
                        && common::get(&wf, "Delivered-To").is_none()
                );
                let received =
                    |f: &[(String, String)]| f.iter().filter(|(n, _)| n == "Received").count();
                assert_eq!(received(&wf) + 1, received(&full));
                assert!(!full.iter().any(|(n, v)| n == "Received"
                    && v.contains("LMTP")
                    && wf.iter().any(|(_, w)| w == v)));
            }
            (None, r) => panic!("incoming {r:?} mail without envelope"),
        }
    }
}
