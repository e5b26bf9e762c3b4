//! SELECT/EXAMINE, FETCH of every item (bytes compared with the message file as CRLF,
//! sections cut by plain slicing here, not by our mime crate), implicit `\Seen`, STORE,
//! SEARCH / ESEARCH / SEARCHRES, over real sockets with imap-codec parsing every response.

use crate::support::daemon::Server;
use crate::support::imap::{crlf, esearch_item, simple, Client, Reply};
use imap_codec::imap_types::body::{BodyStructure, SpecificFields};
use imap_codec::imap_types::fetch::MessageDataItem;

/// A multipart message with a text part and a message/rfc822 part.
const MULTI: &str = "From: \"Sender Name\" <sender@example.net>\n\
To: Alice <alice@example.org>, bob@example.org\n\
Cc: carol@example.org\n\
Subject: Multipart test\n\
Date: Mon, 7 Feb 1994 21:52:25 -0800\n\
Message-ID: <multi@example.net>\n\
X-Custom: custom value\n\
MIME-Version: 1.0\n\
Content-Type: multipart/mixed; boundary=\"outer\"\n\
\n\
Preamble text.\n\
--outer\n\
Content-Type: text/plain; charset=us-ascii\n\
\n\
First part body.\n\
Line two.\n\
--outer\n\
Content-Type: message/rfc822\n\
\n\
From: inner@example.com\n\
To: someone@example.com\n\
Subject: Inner message\n\
Date: Tue, 8 Feb 1994 10:00:00 +0000\n\
\n\
Inner body text.\n\
--outer--\n\
Epilogue.\n";

/// Sections of the stored message, cut from its CRLF form by searching for markers.
struct Cut {
    full: Vec<u8>,
    header: Vec<u8>,
    text: Vec<u8>,
    p1_mime: Vec<u8>,
    p1: Vec<u8>,
    p2: Vec<u8>,
    p2_header: Vec<u8>,
    p2_text: Vec<u8>,
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> usize {
    from + hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap_or_else(|| panic!("{:?} not found", String::from_utf8_lossy(needle)))
}

fn cut(file: &[u8]) -> Cut {
    let full = crlf(std::str::from_utf8(file).unwrap());
    let hend = find(&full, b"\r\n\r\n", 0) + 4;
    // RFC 2046 §5.1.1: the CRLF before a boundary belongs to the boundary
    let b1 = find(&full, b"--outer\r\n", hend) + 9;
    let b1_body = find(&full, b"\r\n\r\n", b1) + 4;
    let b1_end = find(&full, b"\r\n--outer", b1_body);
    let b2 = find(&full, b"--outer\r\n", b1_end) + 9;
    let b2_body = find(&full, b"\r\n\r\n", b2) + 4;
    let b2_end = find(&full, b"\r\n--outer--", b2_body);
    let inner = full[b2_body..b2_end].to_vec();
    let ihend = find(&inner, b"\r\n\r\n", 0) + 4;
    Cut {
        header: full[..hend].to_vec(),
        text: full[hend..].to_vec(),
        p1_mime: full[b1..b1_body].to_vec(),
        p1: full[b1_body..b1_end].to_vec(),
        p2_header: inner[..ihend].to_vec(),
        p2_text: inner[ihend..].to_vec(),
        p2: inner,
        full,
    }
}

/// Header lines of `header` (CRLF block) whose names are (or, with `not`, are not) in
/// `names`, plus the closing blank line.
fn fields(header: &[u8], names: &[&str], not: bool) -> Vec<u8> {
    let text = std::str::from_utf8(header).unwrap();
    let mut out = String::new();
    for line in text.split_inclusive("\r\n") {
        if line == "\r\n" {
            break;
        }
        let name = line.split(':').next().unwrap();
        let hit = names.iter().any(|n| n.eq_ignore_ascii_case(name));
        if hit != not {
            out.push_str(line);
        }
    }
    out.push_str("\r\n");
    out.into_bytes()
}

fn lf_count(b: &[u8]) -> usize {
    b.iter().filter(|&&c| c == b'\n').count()
}

fn one_fetch(r: &Reply) -> &crate::support::imap::Resp {
    let f = r.fetches();
    assert_eq!(f.len(), 1, "{}", r.all());
    f[0].1
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn assert_bytes(got: &Option<Vec<u8>>, want: &[u8], what: &str) {
    let got = got.as_deref().unwrap_or_else(|| panic!("{what}: NIL"));
    assert_eq!(show(got), show(want), "{what}");
}

#[test]
fn fetch_body_sections_are_the_file_bytes_as_crlf() {
    let s = Server::start();
    s.deliver("alice", MULTI);
    let files = s.files("alice", "INBOX");
    let c_ = cut(&std::fs::read(&files[0]).unwrap());
    let mut c = s.login("alice");
    c.ok("EXAMINE INBOX");
    let r = c.ok(
        "FETCH 1 (BODY.PEEK[] BODY.PEEK[HEADER] BODY.PEEK[TEXT] BODY.PEEK[1] BODY.PEEK[1.MIME] \
         BODY.PEEK[2] BODY.PEEK[2.HEADER] BODY.PEEK[2.TEXT] \
         BODY.PEEK[HEADER.FIELDS (Subject FROM x-custom)] \
         BODY.PEEK[HEADER.FIELDS.NOT (Subject From Return-Path Delivered-To)] \
         BODY.PEEK[]<10.20> BODY.PEEK[TEXT]<0.7> BODY.PEEK[1]<5.100000> BODY.PEEK[3])",
    );
    let f = one_fetch(&r);
    let got = f.body_sections();
    assert_eq!(got.len(), 14, "{}", f.text());
    assert_bytes(&got[0], &c_.full, "BODY[]");
    assert_bytes(&got[1], &c_.header, "BODY[HEADER]");
    assert_bytes(&got[2], &c_.text, "BODY[TEXT]");
    assert_bytes(&got[3], &c_.p1, "BODY[1]");
    assert_eq!(show(&c_.p1), "First part body.\r\nLine two.");
    assert_bytes(&got[4], &c_.p1_mime, "BODY[1.MIME]");
    assert_bytes(&got[5], &c_.p2, "BODY[2]");
    assert_bytes(&got[6], &c_.p2_header, "BODY[2.HEADER]");
    assert_bytes(&got[7], &c_.p2_text, "BODY[2.TEXT]");
    assert_bytes(
        &got[8],
        &fields(&c_.header, &["subject", "from", "X-CUSTOM"], false),
        "HEADER.FIELDS",
    );
    assert_bytes(
        &got[9],
        &fields(
            &c_.header,
            &["Subject", "From", "Return-Path", "Delivered-To"],
            true,
        ),
        "HEADER.FIELDS.NOT",
    );
    assert_bytes(&got[10], &c_.full[10..30], "BODY[]<10.20>");
    assert_bytes(&got[11], &c_.text[..7], "BODY[TEXT]<0.7>");
    assert_bytes(&got[12], &c_.p1[5..], "BODY[1]<5.100000>");
    // RFC 3501 §6.4.5 leaves a missing part open; Dovecot answers an empty string
    assert!(
        got[13].as_deref().is_none_or(|b| b.is_empty()),
        "{:?}",
        got[13]
    );
    let t = f.text();
    for label in [
        "BODY[] {",
        "BODY[]<10> {20}",
        "BODY[TEXT]<0> {7}",
        "BODY[1]<5> {",
        "BODY[2.HEADER] {",
        "BODY[1.MIME] {",
    ] {
        assert!(t.contains(label), "{label} missing: {t}");
    }
    // RFC822, RFC822.HEADER, RFC822.TEXT, RFC822.SIZE
    let r = c.ok("FETCH 1 (RFC822.SIZE RFC822.HEADER RFC822.TEXT RFC822)");
    let (_, items) = one_fetch(&r).fetch().unwrap();
    let mut n = 0;
    for item in items {
        match item {
            MessageDataItem::Rfc822Size(size) => {
                assert_eq!(size as usize, c_.full.len());
                n += 1;
            }
            MessageDataItem::Rfc822Header(h) => {
                assert_bytes(
                    &h.into_option().map(|c| c.to_vec()),
                    &c_.header,
                    "RFC822.HEADER",
                );
                n += 1;
            }
            MessageDataItem::Rfc822Text(h) => {
                assert_bytes(
                    &h.into_option().map(|c| c.to_vec()),
                    &c_.text,
                    "RFC822.TEXT",
                );
                n += 1;
            }
            MessageDataItem::Rfc822(h) => {
                assert_bytes(&h.into_option().map(|c| c.to_vec()), &c_.full, "RFC822");
                n += 1;
            }
            _ => {}
        }
    }
    assert_eq!(n, 4, "{}", r.all());
}

#[test]
fn envelope_bodystructure_and_dates_from_the_index() {
    let s = Server::start();
    s.deliver("alice", MULTI);
    let c_ = cut(&std::fs::read(&s.files("alice", "INBOX")[0]).unwrap());
    let mut c = s.select("alice", "INBOX");
    let r = c.ok("FETCH 1 (UID FLAGS INTERNALDATE ENVELOPE BODYSTRUCTURE BODY)");
    let (seq, items) = one_fetch(&r).fetch().unwrap();
    assert_eq!(seq, 1);
    let mut seen = 0;
    for item in items {
        match item {
            MessageDataItem::Uid(u) => {
                assert_eq!(u.get(), 1);
                seen += 1;
            }
            MessageDataItem::Flags(f) => {
                let f = format!("{f:?}");
                assert!(f.contains("Recent") && !f.contains("Seen"), "{f}");
                seen += 1;
            }
            MessageDataItem::InternalDate(_) => seen += 1,
            MessageDataItem::Envelope(e) => {
                let s = |n: &imap_codec::imap_types::core::NString| {
                    n.0.as_ref().map(|v| show(v.as_ref()))
                };
                assert_eq!(s(&e.subject).as_deref(), Some("Multipart test"));
                assert_eq!(
                    s(&e.date).as_deref(),
                    Some("Mon, 7 Feb 1994 21:52:25 -0800")
                );
                assert_eq!(s(&e.message_id).as_deref(), Some("<multi@example.net>"));
                assert_eq!(e.from.len(), 1);
                assert_eq!(s(&e.from[0].name).as_deref(), Some("Sender Name"));
                assert_eq!(s(&e.from[0].mailbox).as_deref(), Some("sender"));
                assert_eq!(s(&e.from[0].host).as_deref(), Some("example.net"));
                // RFC 3501 §7.4.2: sender and reply-to default to from
                assert_eq!(e.sender, e.from);
                assert_eq!(e.reply_to, e.from);
                assert_eq!(e.to.len(), 2);
                assert_eq!(s(&e.to[1].mailbox).as_deref(), Some("bob"));
                assert_eq!(e.cc.len(), 1);
                assert!(e.bcc.is_empty());
                assert_eq!(s(&e.in_reply_to), None);
                seen += 1;
            }
            MessageDataItem::BodyStructure(b) | MessageDataItem::Body(b) => {
                let BodyStructure::Multi {
                    bodies, subtype, ..
                } = b
                else {
                    panic!("not multipart: {b:?}")
                };
                assert!(subtype.as_ref().eq_ignore_ascii_case(b"mixed"));
                let parts = bodies.as_ref();
                assert_eq!(parts.len(), 2);
                let BodyStructure::Single { body, .. } = &parts[0] else {
                    panic!("{parts:?}")
                };
                assert_eq!(body.basic.size as usize, c_.p1.len());
                match &body.specific {
                    SpecificFields::Text {
                        subtype,
                        number_of_lines,
                    } => {
                        assert!(subtype.as_ref().eq_ignore_ascii_case(b"plain"));
                        // lines counted as Dovecot does: the LFs of the part's body
                        // (the last line's CRLF belongs to the boundary)
                        assert_eq!(*number_of_lines as usize, lf_count(&c_.p1));
                        assert_eq!(*number_of_lines, 1);
                    }
                    other => panic!("{other:?}"),
                }
                let BodyStructure::Single { body, .. } = &parts[1] else {
                    panic!("{parts:?}")
                };
                assert_eq!(body.basic.size as usize, c_.p2.len());
                match &body.specific {
                    SpecificFields::Message {
                        envelope,
                        number_of_lines,
                        ..
                    } => {
                        let subject = envelope.subject.0.as_ref().map(|v| show(v.as_ref()));
                        assert_eq!(subject.as_deref(), Some("Inner message"));
                        assert_eq!(*number_of_lines as usize, lf_count(&c_.p2));
                    }
                    other => panic!("{other:?}"),
                }
                seen += 1;
            }
            other => panic!("unasked item {other:?}"),
        }
    }
    assert_eq!(seen, 6, "{}", r.all());
    // INTERNALDATE of an APPEND is the date given
    c.ok("APPEND INBOX (\\Seen) \"07-Feb-1994 21:52:25 -0800\" {12}\r\nSubject: x\r\n");
    let r = c.ok("FETCH 2 INTERNALDATE");
    let t = r.all();
    assert!(
        // RFC 3501 §9 date-day-fixed: " 8" or "08"
        t.contains("INTERNALDATE \" 8-Feb-1994 05:52:25 +0000\"")
            || t.contains("INTERNALDATE \"08-Feb-1994 05:52:25 +0000\"")
            || t.contains("INTERNALDATE \"07-Feb-1994 21:52:25 -0800\""),
        "{t}"
    );
}

#[test]
fn select_and_examine_report_the_mailbox() {
    let s = Server::start();
    s.deliver("alice", &simple("one", "1"));
    s.deliver("alice", &simple("two", "2"));
    let mut c = s.login("alice");
    let r = c.ok("SELECT INBOX");
    let t = r.all();
    for want in [
        "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)",
        "* OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft \\*)]",
        "* 2 EXISTS",
        "* 2 RECENT",
        "* OK [UNSEEN 1]",
        "* OK [UIDVALIDITY ",
        "* OK [UIDNEXT 3]",
    ] {
        assert!(t.contains(want), "{want} missing: {t}");
    }
    assert!(r.done.text().contains("OK [READ-WRITE]"), "{t}");
    c.ok("STORE 1 +FLAGS (\\Seen)");
    // a second session: EXAMINE is read-only, and \Recent went to the first session
    let mut d = s.login("alice");
    let r = d.ok("EXAMINE INBOX");
    let t = r.all();
    assert!(t.contains("* OK [PERMANENTFLAGS ()]"), "{t}");
    assert!(t.contains("* 2 EXISTS") && t.contains("* 0 RECENT"), "{t}");
    assert!(t.contains("* OK [UNSEEN 2]"), "{t}");
    assert!(r.done.text().contains("OK [READ-ONLY]"), "{t}");
    let r = d.cmd("STORE 1 +FLAGS (\\Flagged)");
    assert_eq!(r.status(), "NO", "{}", r.all());
    // a missing mailbox; the failed SELECT leaves nothing selected (RFC 3501 §6.3.1)
    let r = d.cmd("SELECT Nope");
    assert_eq!(r.status(), "NO", "{}", r.all());
    assert!(r.done.text().contains("[NONEXISTENT]"), "{}", r.all());
    assert_eq!(d.cmd("FETCH 1 FLAGS").status(), "BAD");
}

fn flags_of(r: &Reply, seq: u32) -> String {
    let f: Vec<_> = r.fetches().into_iter().filter(|(s, _)| *s == seq).collect();
    assert_eq!(f.len(), 1, "seq {seq}: {}", r.all());
    let (_, items) = f[0].1.fetch().unwrap();
    items
        .iter()
        .find_map(|i| match i {
            MessageDataItem::Flags(f) => Some(format!("{f:?}")),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no FLAGS: {}", r.all()))
}

#[test]
fn body_sets_seen_and_peek_does_not() {
    let s = Server::start();
    s.deliver("alice", &simple("one", "body one"));
    s.deliver("alice", &simple("two", "body two"));
    let mut c = s.select("alice", "INBOX");
    let r = c.ok("FETCH 1 (BODY.PEEK[TEXT])");
    assert!(!r.all().contains("FLAGS"), "{}", r.all());
    assert!(!flags_of(&c.ok("FETCH 1 FLAGS"), 1).contains("Seen"));
    // RFC 3501 §6.4.5: BODY[] sets \Seen, and the changed FLAGS come with the answer
    let r = c.ok("FETCH 1 (BODY[TEXT])");
    assert!(flags_of(&r, 1).contains("Seen"), "{}", r.all());
    assert!(flags_of(&c.ok("FETCH 1 FLAGS"), 1).contains("Seen"));
    let r = c.ok("FETCH 2 RFC822.TEXT");
    assert!(flags_of(&r, 2).contains("Seen"), "{}", r.all());
    // already seen: no implicit FLAGS again
    let r = c.ok("FETCH 1 (BODY[TEXT])");
    assert!(!r.all().contains("FLAGS"), "{}", r.all());
    // EXAMINE never sets \Seen
    s.deliver("alice", &simple("three", "body three"));
    let mut d = s.login("alice");
    d.ok("EXAMINE INBOX");
    d.ok("FETCH 3 BODY[]");
    assert!(!flags_of(&d.ok("FETCH 3 FLAGS"), 3).contains("Seen"));
}

#[test]
fn store_flags_silent_and_keywords() {
    let s = Server::start();
    for i in 1..=3 {
        s.deliver("alice", &simple(&format!("m{i}"), "x"));
    }
    let mut c = s.select("alice", "INBOX");
    let r = c.ok("STORE 1:2 +FLAGS (\\Flagged \\Answered)");
    for seq in [1, 2] {
        let f = flags_of(&r, seq);
        assert!(f.contains("Flagged") && f.contains("Answered"), "{f}");
    }
    let r = c.ok("STORE 2 -FLAGS (\\Answered)");
    let f = flags_of(&r, 2);
    assert!(f.contains("Flagged") && !f.contains("Answered"), "{f}");
    let r = c.ok("STORE 1 FLAGS.SILENT (\\Seen)");
    assert!(r.fetches().is_empty(), "{}", r.all());
    let f = flags_of(&c.ok("FETCH 1 FLAGS"), 1);
    assert!(f.contains("Seen") && !f.contains("Flagged"), "{f}");
    // keywords: a new FLAGS list announces them (RFC 3501 §7.2.6)
    let r = c.ok("STORE 3 +FLAGS ($Junk Work)");
    let f = flags_of(&r, 3);
    assert!(f.contains("$Junk") && f.contains("Work"), "{f}");
    let mut d = s.select("alice", "INBOX");
    let r = d.ok("FETCH 3 FLAGS");
    let f = flags_of(&r, 3);
    assert!(f.contains("$Junk") && f.contains("Work"), "{f}");
    let r = d.ok("UID STORE 3 -FLAGS.SILENT (Work)");
    assert!(r.fetches().is_empty(), "{}", r.all());
    let r = d.ok("UID STORE 3 +FLAGS (\\Deleted)");
    assert!(
        r.all().contains("UID 3"),
        "UID STORE answers with UID: {}",
        r.all()
    );
    // the first session learns of the other's changes at its next command
    let r = c.ok("NOOP");
    let f = flags_of(&r, 3);
    assert!(f.contains("Deleted") && !f.contains("Work"), "{}", r.all());
    // \Recent cannot be stored
    assert_eq!(c.cmd("STORE 1 +FLAGS (\\Recent)").status(), "BAD");
    assert_eq!(c.cmd("STORE 9 +FLAGS (\\Seen)").status(), "BAD");
    s.assert_clean("alice");
}

fn search_nums(r: &Reply) -> Vec<u32> {
    let lines = r.lines("* SEARCH");
    assert_eq!(lines.len(), 1, "{}", r.all());
    lines[0]
        .split(' ')
        .skip(2)
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect()
}

fn searching() -> (Server, Client) {
    let s = Server::start();
    let msgs = [
        ("alpha", "Alice <alice@example.org>", "plain words"),
        ("beta", "Bob <bob@example.net>", "a needle in here"),
        (
            "gamma",
            "Carol <carol@example.com>",
            &"long line\n".repeat(200),
        ),
        ("beta two", "bob@example.net", "nothing"),
        ("delta", "Dave <dave@example.org>", "NEEDLE upper"),
    ];
    for (subject, from, body) in msgs {
        let m = format!("From: {from}\nTo: alice@example.org\nSubject: {subject}\n\n{body}\n");
        s.deliver("alice", &m);
    }
    let mut c = s.select("alice", "INBOX");
    c.ok("STORE 1,3 +FLAGS.SILENT (\\Seen)");
    c.ok("STORE 2 +FLAGS.SILENT (\\Flagged)");
    (s, c)
}

#[test]
fn search_keys_and_uid_search() {
    let (_s, mut c) = searching();
    let mut q = |cmd: &str| search_nums(&c.ok(cmd));
    assert_eq!(q("SEARCH ALL"), [1, 2, 3, 4, 5]);
    assert_eq!(q("SEARCH SEEN"), [1, 3]);
    assert_eq!(q("SEARCH UNSEEN"), [2, 4, 5]);
    assert_eq!(q("SEARCH FLAGGED"), [2]);
    assert_eq!(q("SEARCH FROM bob"), [2, 4]);
    assert_eq!(q("SEARCH FROM \"example.org\""), [1, 5]);
    assert_eq!(q("SEARCH SUBJECT beta"), [2, 4]);
    assert_eq!(q("SEARCH BODY needle"), [2, 5]);
    assert_eq!(q("SEARCH TEXT needle"), [2, 5]);
    assert_eq!(q("SEARCH LARGER 1000"), [3]);
    assert_eq!(q("SEARCH SMALLER 1000"), [1, 2, 4, 5]);
    assert_eq!(q("SEARCH OR SUBJECT alpha SUBJECT gamma"), [1, 3]);
    assert_eq!(q("SEARCH NOT SEEN NOT FLAGGED"), [4, 5]);
    assert_eq!(q("SEARCH 2:4 UNSEEN"), [2, 4]);
    assert_eq!(q("SEARCH UID 2:3"), [2, 3]);
    assert_eq!(q("SEARCH SUBJECT nothing-matches"), Vec::<u32>::new());
    assert_eq!(q("UID SEARCH UID 4:*"), [4, 5]);
    assert_eq!(q("UID SEARCH CHARSET UTF-8 SUBJECT beta"), [2, 4]);
    assert_eq!(q("SEARCH HEADER Subject delta"), [5]);
    assert_eq!(c.cmd("SEARCH CHARSET KOI9-X ALL").status(), "NO");
    assert_eq!(c.cmd("SEARCH FROB").status(), "BAD");
}

#[test]
fn esearch_returns_and_searchres() {
    let (_s, mut c) = searching();
    let r = c.ok("SEARCH RETURN (MIN MAX COUNT ALL) UNSEEN");
    let l = r.lines("* ESEARCH");
    assert_eq!(l.len(), 1, "{}", r.all());
    let tag = r.done.tag().unwrap();
    assert!(
        l[0].starts_with(&format!("* ESEARCH (TAG \"{tag}\")")),
        "{}",
        l[0]
    );
    assert!(!l[0].contains(" UID "), "{}", l[0]);
    assert_eq!(esearch_item(&l[0], "MIN").as_deref(), Some("2"));
    assert_eq!(esearch_item(&l[0], "MAX").as_deref(), Some("5"));
    assert_eq!(esearch_item(&l[0], "COUNT").as_deref(), Some("3"));
    assert_eq!(esearch_item(&l[0], "ALL").as_deref(), Some("2,4:5"));
    let r = c.ok("UID SEARCH RETURN (COUNT) SEEN");
    let l = r.lines("* ESEARCH");
    assert!(l[0].contains(") UID COUNT 2"), "{}", l[0]);
    // RFC 4731 §3.1: no match gives no MIN/MAX/ALL
    let r = c.ok("SEARCH RETURN (MIN MAX ALL) SUBJECT nomatch");
    let l = r.lines("* ESEARCH");
    assert!(esearch_item(&l[0], "MIN").is_none(), "{}", l[0]);
    // RETURN () is ALL
    let r = c.ok("SEARCH RETURN () FLAGGED");
    assert_eq!(
        esearch_item(&r.lines("* ESEARCH")[0], "ALL").as_deref(),
        Some("2")
    );
    // SEARCHRES (RFC 5182): SAVE alone answers nothing, $ names the result after
    let r = c.ok("SEARCH RETURN (SAVE) SUBJECT beta");
    assert!(
        r.lines("* ESEARCH").is_empty() && r.lines("* SEARCH").is_empty(),
        "{}",
        r.all()
    );
    let r = c.ok("FETCH $ (UID)");
    let seqs: Vec<u32> = r.fetches().iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, [2, 4], "{}", r.all());
    assert_eq!(search_nums(&c.ok("SEARCH $ UNSEEN")), [2, 4]);
    c.ok("STORE $ +FLAGS.SILENT (\\Answered)");
    assert_eq!(search_nums(&c.ok("SEARCH ANSWERED")), [2, 4]);
    let r = c.ok("SEARCH RETURN (SAVE MIN) SUBJECT gamma");
    assert_eq!(
        esearch_item(&r.lines("* ESEARCH")[0], "MIN").as_deref(),
        Some("3")
    );
    assert_eq!(search_nums(&c.ok("UID SEARCH UID $")), [3]);
}
