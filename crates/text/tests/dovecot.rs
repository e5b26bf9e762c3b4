//! The text rules of the crate docs, checked against Dovecot 2.3: each message is put in a
//! Maildir that a private Dovecot (no fts plugin) serves, each search is run there with
//! `doveadm search` (lib-storage's SEARCH, as IMAP uses it) and here through the functions
//! SEARCH uses, and both must give the expected answer.
//!
//! Needs Dovecot (`dovecot-core dovecot-imapd dovecot-lmtpd`, started through
//! maildex-dovecot-harness, which hands the Maildir to uid 65534 when run as root), so it is
//! ignored by default: `cargo test -p maildex-text --test dovecot -- --ignored`.

use std::path::Path;

use maildex_dovecot_harness::{Dovecot, Options, User};
use maildex_text::{
    compress_lwsp, decode_header, field_values, normalize, Html, MessageText, SearchText,
};

/// Which SEARCH key a case uses.
#[derive(Clone, Copy, Debug)]
enum Key {
    Body,
    Text,
    Subject,
}

impl Key {
    fn doveadm(self) -> &'static str {
        match self {
            Key::Body => "body",
            Key::Text => "text",
            Key::Subject => "subject",
        }
    }
}

/// A message, a search on it and whether it matches (Dovecot's answer).
struct Case {
    msg: &'static str,
    key: Key,
    needle: &'static str,
    matches: bool,
}

const HTML: &str =
    "Content-Type: text/html\n\n<p>Hello <b>bold</b> wor<i>ld</i> caf&eacute; &amp; x</p>\n";

const LATIN1: &str = "MIME-Version: 1.0\nContent-Type: text/plain; charset=iso-8859-1\n\
                      Content-Transfer-Encoding: quoted-printable\n\nprice =80 five =E9t=E9\n";

const CASES: &[Case] = &[
    // HTML is searched as written: markup and entities match, a word split by a tag does not
    Case {
        msg: HTML,
        key: Key::Body,
        needle: "<b>",
        matches: true,
    },
    Case {
        msg: HTML,
        key: Key::Body,
        needle: "&eacute;",
        matches: true,
    },
    Case {
        msg: HTML,
        key: Key::Body,
        needle: "world",
        matches: false,
    },
    Case {
        msg: HTML,
        key: Key::Body,
        needle: "hello bold",
        matches: false,
    },
    Case {
        msg: HTML,
        key: Key::Body,
        needle: "café",
        matches: false,
    },
    // US-ASCII labelled 8-bit text is read as UTF-8
    Case {
        msg: "MIME-Version: 1.0\nContent-Type: text/plain; charset=us-ascii\n\nna\u{ef}ve café\n",
        key: Key::Body,
        needle: "CAFÉ",
        matches: true,
    },
    // ISO-8859-1 is not Windows-1252: 0x80 is U+0080, not the euro sign
    Case {
        msg: LATIN1,
        key: Key::Body,
        needle: "€",
        matches: false,
    },
    Case {
        msg: LATIN1,
        key: Key::Body,
        needle: "ÉTÉ",
        matches: true,
    },
    // other charsets are converted (iconv in Dovecot, mail-parser's decoders here)
    Case {
        msg: "MIME-Version: 1.0\nContent-Type: text/plain; charset=iso-8859-2\n\
              Content-Transfer-Encoding: quoted-printable\n\nZa=BF=F3=B3=E6 g=EA=B6l=B1\n",
        key: Key::Body,
        needle: "zażółć gęślą",
        matches: true,
    },
    Case {
        msg: "MIME-Version: 1.0\nContent-Type: text/plain; charset=koi8-r\n\
              Content-Transfer-Encoding: base64\n\n8NLJ18XUCg==\n",
        key: Key::Body,
        needle: "ПРИВЕТ",
        matches: true,
    },
    Case {
        msg: "Subject: =?windows-1251?B?z/Do4uXy?=\n\nx\n",
        key: Key::Subject,
        needle: "привет",
        matches: true,
    },
    // a non-text part is not searched; TEXT sees the headers too
    Case {
        msg: "MIME-Version: 1.0\nContent-Type: application/octet-stream\n\nfind me\n",
        key: Key::Body,
        needle: "find me",
        matches: false,
    },
    Case {
        msg: "Subject: about\n =?utf-8?q?caf=C3=A9?=\n\nplain\n",
        key: Key::Text,
        needle: "subject: about café",
        matches: true,
    },
    // encoded words: decoded anywhere, adjacent ones joined, a malformed =XX kept
    Case {
        msg: "Subject: x=?utf-8?q?mid?=y\n\nx\n",
        key: Key::Subject,
        needle: "xmidy",
        matches: true,
    },
    Case {
        msg: "Subject: =?utf-8?q?fo?=\n =?utf-8?q?ld?=\n\nx\n",
        key: Key::Subject,
        needle: "fold",
        matches: true,
    },
    Case {
        msg: "Subject: =?utf-8?q?a=ZZb?=\n\nx\n",
        key: Key::Subject,
        needle: "a=zzb",
        matches: true,
    },
    Case {
        msg: "Subject: =?utf-8?q?a=ZZb?=\n\nx\n",
        key: Key::Subject,
        needle: "=?utf-8",
        matches: false,
    },
    // white space inside the encoded text does not stop a word; a `?` in it does
    Case {
        msg: "Subject: =?utf-8?q?space inside?=\n\nx\n",
        key: Key::Subject,
        needle: "q?space",
        matches: false,
    },
    Case {
        msg: "Subject: =?utf-8?q?tab\there?=\n\nx\n",
        key: Key::Subject,
        needle: "tab here",
        matches: true,
    },
    Case {
        msg: "Subject: =?utf-8?q?a?b?=\n\nx\n",
        key: Key::Subject,
        needle: "=?utf-8?q?a?b",
        matches: true,
    },
    // SUBJECT compresses white space before decoding: an encoded tab stays a tab
    Case {
        msg: "Subject: =?utf-8?q?tab=09here?=\n\nx\n",
        key: Key::Subject,
        needle: "tab here",
        matches: false,
    },
];

/// What SEARCH here answers for `case` (the functions `maildex_imap::search` calls).
fn ours(case: &Case, raw: &[u8]) -> bool {
    let needle = normalize(case.needle);
    match case.key {
        Key::Body | Key::Text => {
            let summary = maildex_mime::summarize(raw);
            let built = maildex_index::build(raw, &summary, Default::default()).expect("build");
            let parts = &built.record.cached.parts;
            let text = SearchText::new(MessageText::extract(raw, parts, Html::AsWritten));
            match case.key {
                Key::Body => text.body_contains(&needle),
                _ => text.text_contains(&needle),
            }
        }
        Key::Subject => field_values(raw, b"subject")
            .iter()
            .any(|v| normalize(&decode_header(&compress_lwsp(v))).contains(&needle)),
    }
}

/// The message file of case `i`: its text with an `X-Case` header in front.
fn message(i: usize, case: &Case) -> Vec<u8> {
    format!("X-Case: {i}\n{}", case.msg).into_bytes()
}

fn put(maildir: &Path, i: usize, bytes: &[u8]) {
    let name = format!("{}.M{i}P1.test:2,", 1_700_000_000 + i);
    std::fs::write(maildir.join("cur").join(name), bytes).expect("write message");
}

/// The `X-Case` numbers of the messages Dovecot finds for `key needle`.
fn dovecot_hits(dc: &Dovecot, key: Key, needle: &str) -> Vec<usize> {
    let out = dc
        .doveadm(&[
            "fetch",
            "-u",
            "u",
            "hdr.x-case",
            "mailbox",
            "INBOX",
            key.doveadm(),
            needle,
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut hits: Vec<usize> = out
        .lines()
        .filter_map(|l| l.strip_prefix("hdr.x-case: "))
        .map(|n| n.trim().parse().expect("case number"))
        .collect();
    hits.sort_unstable();
    hits
}

#[test]
#[ignore = "needs dovecot-core, dovecot-imapd, dovecot-lmtpd"]
fn search_text_rules_are_dovecots() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("mail");
    let maildir = root.join("u/Maildir");
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(maildir.join(sub)).expect("mkdir");
    }
    for (i, case) in CASES.iter().enumerate() {
        put(&maildir, i, &message(i, case));
    }
    let opts = Options {
        mail_location: format!("maildir:{}/%n/Maildir", root.display()),
        users: vec![User::new("u", "unused")],
        mail_root: Some(root.clone()),
        ..Options::default()
    };
    let dc = Dovecot::start(&tmp.path().join("dc"), opts).unwrap_or_else(|e| panic!("{e}"));
    let mut wrong = Vec::new();
    for (i, case) in CASES.iter().enumerate() {
        let theirs = dovecot_hits(&dc, case.key, case.needle).contains(&i);
        let here = ours(case, &message(i, case));
        if theirs != case.matches || here != case.matches {
            wrong.push(format!(
                "case {i}: {:?} {:?}: expected {}, Dovecot {theirs}, maildex {here}",
                case.key, case.needle, case.matches
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
