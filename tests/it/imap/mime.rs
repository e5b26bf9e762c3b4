//! MIME through the daemon, against Dovecot's answers: BODYSTRUCTURE, ENVELOPE and BODY[n]
//! of Mailman-style digests and broken Content-Types (the golden messages of crates/mime,
//! APPENDed and fetched over IMAP, compared with what Dovecot 2.3.19 answered for the same
//! bytes), BINARY of a `binary` part sent as a literal8 (RFC 3516), and SEARCH FROM/TO/CC/BCC
//! on the envelope address (RFC 3501 §6.4.4). Every response is parsed by imap-codec
//! (tests/support/imap).

use std::path::PathBuf;

use crate::support::daemon::Server;
use crate::support::imap::Client;

fn golden(name: &str, ext: &str) -> Vec<u8> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crates/mime/tests/golden");
    std::fs::read(dir.join(format!("{name}.{ext}"))).unwrap()
}

/// The records of a golden `.expected` file: (key, value); see its README for the format.
fn records(data: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let nl = rest.iter().position(|&b| b == b'\n').unwrap();
        let head = std::str::from_utf8(&rest[..nl]).unwrap();
        let (key, len) = head.strip_prefix("== ").unwrap().rsplit_once(' ').unwrap();
        let len: usize = len.parse().unwrap();
        out.push((key.to_string(), rest[nl + 1..nl + 1 + len].to_vec()));
        rest = &rest[nl + 1 + len + 1..];
    }
    out
}

fn append_bytes(c: &mut Client, literal8: bool, msg: &[u8]) {
    let mut cmd = format!(
        "APPEND INBOX {}{{{}}}\r\n",
        if literal8 { "~" } else { "" },
        msg.len()
    )
    .into_bytes();
    cmd.extend_from_slice(msg);
    let r = c.cmd_bytes(&cmd);
    assert_eq!(r.status(), "OK", "{}", r.all());
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Issue 15 #21: a digest whose boundary ends in `--` (`__--__--`), one nested in a mixed
/// message whose boundary is its prefix, nested digests, and Content-Types without a
/// subtype. The part tree comes from the index: every section, size and envelope must be
/// what Dovecot answered for the same file.
#[test]
fn digests_and_broken_content_types_answer_as_dovecot() {
    const NAMES: [&str; 6] = [
        "digest_boundary_dashes",
        "boundary_dash_variants",
        "boundary_prefix_dashes_crlf",
        "digest_nested",
        "text_no_subtype_params",
        "type_no_subtype_variants",
    ];
    let s = Server::start();
    let mut c = s.login("alice");
    for name in NAMES {
        append_bytes(&mut c, false, &golden(name, "eml"));
    }
    c.ok("EXAMINE INBOX");
    let mut checked = 0;
    for (i, name) in NAMES.iter().enumerate() {
        let seq = i + 1;
        for (key, want) in records(&golden(name, "expected")) {
            let what = format!("{name} {key}");
            if let Some(spec) = key.strip_prefix("SECTION ") {
                let r = c.ok(&format!("FETCH {seq} (BODY.PEEK[{spec}])"));
                let got = r.fetches()[0].1.body_sections();
                let got = got[0].clone().unwrap_or_default();
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&want),
                    "{what}"
                );
            } else if let Some(spec) = key.strip_prefix("NIL ") {
                let r = c.ok(&format!("FETCH {seq} (BODY.PEEK[{spec}])"));
                let got = r.fetches()[0].1.body_sections();
                assert!(got[0].as_deref().is_none_or(<[u8]>::is_empty), "{what}");
            } else {
                // RFC822.SIZE, ENVELOPE, BODY, BODYSTRUCTURE: the same text as Dovecot's
                let r = c.ok(&format!("FETCH {seq} ({key})"));
                let mut item = format!("{key} ").into_bytes();
                item.extend_from_slice(&want);
                let raw = &r.fetches()[0].1.raw;
                assert!(
                    contains(raw, &item),
                    "{what}\n  want: {}\n  got:  {}",
                    String::from_utf8_lossy(&want),
                    String::from_utf8_lossy(raw)
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} records");
}

/// Issue 15 #13: RFC 3516 §4.3 — the decoded content of a `binary` part is the stored
/// octets, in a literal8 when they hold NUL; 7bit/8bit parts keep NUL too (literal8) and
/// get CRLF line ends. Dovecot answers the same (it stores such a part as base64 and
/// decodes it back).
#[test]
fn binary_part_appended_as_literal8_comes_back_as_stored() {
    const PART: &[u8] = b"\x00\x2d\xe4\x0a\x0d\x0a\x0a";
    let mut msg = b"From: a@example.org\r\nSubject: bin\r\nMIME-Version: 1.0\r\n\
Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: binary\r\n\r\n"
        .to_vec();
    msg.extend_from_slice(PART);
    let s = Server::start();
    let mut c = s.login("alice");
    append_bytes(&mut c, true, &msg);
    append_bytes(&mut c, true, b"Subject: nul\r\n\r\na\x00b\nc\n");
    c.ok("EXAMINE INBOX");
    // a file holds exactly what was appended (which of the two names sorts first is not
    // the order of the APPENDs: the microseconds in a unique name are not zero-padded)
    let files = s.files("alice", "INBOX");
    assert!(
        files.iter().any(|f| std::fs::read(f).unwrap() == msg),
        "{files:?}"
    );

    let r = c.ok("FETCH 1 (BINARY.SIZE[1])");
    assert!(r.all().contains("BINARY.SIZE[1] 7)"), "{}", r.all());
    let r = c.ok("FETCH 1 (BINARY.PEEK[1])");
    let mut want = b"BINARY[1] ~{7}\r\n".to_vec();
    want.extend_from_slice(PART);
    want.extend_from_slice(b")\r\n");
    let raw = &r.fetches()[0].1.raw;
    assert!(contains(raw, &want), "{:?}", String::from_utf8_lossy(raw));

    let r = c.ok("FETCH 2 (BINARY.SIZE[1] BINARY.PEEK[1])");
    let raw = &r.fetches()[0].1.raw;
    let want = b"BINARY.SIZE[1] 8 BINARY[1] ~{8}\r\na\x00b\r\nc\r\n)";
    assert!(contains(raw, want), "{:?}", String::from_utf8_lossy(raw));
    // BODY[] is a plain literal, which cannot hold NUL (RFC 3501 §4.3): 0x80 as Dovecot
    let r = c.ok("FETCH 2 (BODY.PEEK[TEXT])");
    let got = r.fetches()[0].1.body_sections();
    assert_eq!(got, vec![Some(b"a\x80b\r\nc\r\n".to_vec())]);

    // the same seven bytes as a whole message: its first line is a header, and Dovecot
    // answers BINARY.SIZE[1] 2 and BINARY[] ~{9} (CRLF line ends, NUL kept)
    append_bytes(&mut c, true, PART);
    c.ok("NOOP");
    let r = c.ok("FETCH 3 (BINARY.SIZE[1] BINARY.PEEK[])");
    let raw = &r.fetches()[0].1.raw;
    let want = b"BINARY.SIZE[1] 2 BINARY[] ~{9}\r\n\x00\x2d\xe4\r\n\r\n\r\n)";
    assert!(contains(raw, want), "{:?}", String::from_utf8_lossy(raw));
}

/// Issue 15 #17: the headers and the answers are Dovecot 2.3.19's for the same messages
/// and keys: addresses as ENVELOPE reads them, with display names, comments dropped,
/// RFC 2047 names decoded, names and local parts quoted where they need it.
#[test]
fn search_address_keys_match_the_envelope_as_dovecot() {
    const HEADERS: [&str; 14] = [
        "From: <user-from (comment)@ (comment) domain.org>",
        "From: =?UTF-8?Q?J=C3=B6rg_M=C3=BCller?= <joerg@example.org>",
        "To: Team: ann@example.org, \"Bob B.\" <bob@example.org>;",
        "From: \"quoted local\"@example.org",
        "From: joe@example.org (Joe Bloggs)",
        "Cc: \"Doe, Jane\" <jane@example.org>",
        "Bcc: undisclosed-recipients:;",
        "From: Ann <ann@EXAMPLE.org>",
        "From: \"=?ISO-8859-1?Q?Ren=E9?=\" <rene@example.org>",
        "From: broken@",
        "From: bare@example.org",
        "From: \"a\\\"b\" <ab@example.org>",
        "From: <@route.example:routed@example.org>",
        "To: a@example.org, b@example.org",
    ];
    const SEARCHES: [(&str, &str, &str); 24] = [
        ("FROM", "user-from@domain.org", "1"),
        ("FROM", "<user-from@domain.org>", "1"),
        ("FROM", "comment", ""),
        ("FROM", "Jörg Müller <joerg@", "2"),
        ("FROM", "=?UTF-8?Q", ""),
        (
            "TO",
            "Team: <ann@example.org>, \"Bob B.\" <bob@example.org>;",
            "3",
        ),
        ("TO", "Bob B. <bob", ""),
        ("TO", "a@example.org, b@", ""),
        ("TO", "<a@example.org>, <b@", "14"),
        ("FROM", "\"quoted local\"@example", "4"),
        ("FROM", "quoted local@example.org", ""),
        ("FROM", "\"Joe Bloggs\" <joe@", "5"),
        ("FROM", "(Joe", ""),
        ("CC", "\"Doe, Jane\" <jane", "6"),
        ("CC", "Doe, Jane <jane", ""),
        ("BCC", "undisclosed-recipients:;", "7"),
        ("FROM", "ann@example.org", "8"),
        ("FROM", "René", "9"),
        ("FROM", "broken@MISSING_DOMAIN", "10"),
        ("FROM", "\"a\\\"b\"", "12"),
        ("FROM", "a\"b", ""),
        ("FROM", "<@route.example:routed@example.org>", "13"),
        ("FROM", "<bare@example.org>", "11"),
        ("FROM", "@", "1 2 4 5 8 9 10 11 12 13"),
    ];
    let s = Server::start();
    let mut c = s.login("alice");
    for (i, h) in HEADERS.iter().enumerate() {
        let msg = format!("{h}\r\nSubject: m{}\r\n\r\nbody\r\n", i + 1);
        append_bytes(&mut c, false, msg.as_bytes());
    }
    c.ok("SELECT INBOX");
    for (key, value, want) in SEARCHES {
        let r = c.ok(&format!(
            "SEARCH CHARSET UTF-8 {key} {{{}}}\r\n{value}",
            value.len()
        ));
        let got = r.lines("* SEARCH").join("");
        assert_eq!(
            got.trim_end(),
            format!("* SEARCH {want}").trim_end(),
            "{key} {value}"
        );
    }
}
