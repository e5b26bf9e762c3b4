//! The smaller advertised extensions over real sockets, each as a client uses it: ID,
//! NAMESPACE, ENABLE, UNSELECT, CHECK, WITHIN, BINARY (FETCH and APPEND of a literal8),
//! APPENDLIMIT in STATUS, and `*` where the mailbox has no message. Every response is parsed
//! by imap-codec (tests/support/imap).

use crate::support::daemon::Server;

/// A message with a base64 attachment whose decoded bytes are 00 01 02 FF.
const TWO_PARTS: &str = "MIME-Version: 1.0\r\nSubject: binary\r\n\
    Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n\
    --b\r\nContent-Type: text/plain\r\n\r\nhello\r\n\
    --b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n\
    AAEC/w==\r\n--b--\r\n";

fn append(c: &mut crate::support::imap::Client, extra: &str, msg: &str) {
    c.ok(&format!("APPEND INBOX {extra}{{{}}}\r\n{msg}", msg.len()));
}

#[test]
fn id_namespace_enable_and_check() {
    let s = Server::start();
    let mut c = s.connect();
    // RFC 2971 §3.1: allowed before login; the server names itself
    let r = c.ok("ID (\"name\" \"test-client\" \"version\" \"1\")");
    let id = r.lines("* ID").join("");
    assert!(id.contains("\"name\" \"maildex\""), "{}", r.all());
    let r = c.ok("ID NIL");
    assert_eq!(r.lines("* ID").len(), 1, "{}", r.all());
    // RFC 5161 §3.1: ENABLE is for the authenticated state
    assert_eq!(c.cmd("ENABLE CONDSTORE").status(), "BAD");
    c.ok("LOGIN alice pw");
    let r = c.ok("NAMESPACE");
    // RFC 2342 §5: one personal namespace with "." as the hierarchy separator
    assert_eq!(
        r.lines("* NAMESPACE"),
        vec!["* NAMESPACE ((\"\" \".\")) NIL NIL".to_string()]
    );
    // what was enabled, unknown names left out (RFC 5161 §3.1); CONDSTORE and QRESYNC
    // themselves are in tests/imap_condstore.rs
    let r = c.ok("ENABLE UTF8=ACCEPT CONDSTORE");
    assert_eq!(
        r.lines("* ENABLED"),
        vec!["* ENABLED CONDSTORE".to_string()]
    );
    // CHECK (RFC 3501 §6.4.1) only in the selected state
    assert_eq!(c.cmd("CHECK").status(), "BAD");
    c.ok("SELECT INBOX");
    c.ok("CHECK");
}

#[test]
fn unselect_leaves_deleted_messages_where_close_expunges_them() {
    let s = Server::start();
    let mut c = s.login("alice");
    // RFC 3691 §2: UNSELECT needs a selected mailbox
    assert_eq!(c.cmd("UNSELECT").status(), "BAD");
    for i in 0..2 {
        append(&mut c, "", &format!("Subject: {i}\r\n\r\nbody {i}\r\n"));
    }
    c.ok("SELECT INBOX");
    c.ok("STORE 1 +FLAGS (\\Deleted)");
    let r = c.ok("UNSELECT");
    assert!(r.lines("* 1 EXPUNGE").is_empty(), "{}", r.all());
    // back in the authenticated state: a FETCH is out of place
    assert_eq!(c.cmd("FETCH 1 FLAGS").status(), "BAD");
    let r = c.ok("SELECT INBOX");
    assert!(
        r.all().contains("* 2 EXISTS"),
        "UNSELECT expunged: {}",
        r.all()
    );
    c.ok("CLOSE");
    let r = c.ok("STATUS INBOX (MESSAGES)");
    assert_eq!(
        r.lines("* STATUS"),
        vec!["* STATUS INBOX (MESSAGES 1)".to_string()]
    );
}

#[test]
fn within_finds_messages_by_age() {
    let s = Server::start();
    let mut c = s.login("alice");
    // RFC 5032 §3: OLDER/YOUNGER compare the INTERNALDATE with now, in seconds
    append(
        &mut c,
        "\"01-Jan-2020 00:00:00 +0000\" ",
        "Subject: old\r\n\r\nold\r\n",
    );
    append(&mut c, "", "Subject: new\r\n\r\nnew\r\n");
    c.ok("SELECT INBOX");
    let r = c.ok("SEARCH YOUNGER 86400");
    assert_eq!(r.lines("* SEARCH"), vec!["* SEARCH 2".to_string()]);
    let r = c.ok("SEARCH OLDER 86400");
    assert_eq!(r.lines("* SEARCH"), vec!["* SEARCH 1".to_string()]);
    let r = c.ok("UID SEARCH YOUNGER 86400 OLDER 1000000000");
    assert_eq!(r.lines("* SEARCH"), vec!["* SEARCH".to_string()]);
    assert_eq!(c.cmd("SEARCH YOUNGER 0").status(), "BAD");
    assert_eq!(c.cmd("SEARCH OLDER x").status(), "BAD");
}

#[test]
fn binary_decodes_parts_and_takes_literal8_appends() {
    let s = Server::start();
    let mut c = s.login("alice");
    append(&mut c, "", TWO_PARTS);
    // RFC 3516 §4.3: APPEND of a literal8
    let eight = "Subject: eight\r\nContent-Transfer-Encoding: 8bit\r\n\r\nGr\u{fc}\u{df}e\r\n";
    c.ok(&format!("APPEND INBOX ~{{{}}}\r\n{eight}", eight.len()));
    c.ok("SELECT INBOX");
    // RFC 3516 §4.2: the decoded size and the decoded bytes of a part, in a literal8
    let r = c.ok("FETCH 1 (BINARY.SIZE[2])");
    assert!(
        r.all().contains("BINARY.SIZE[2] 4"),
        "decoded size: {}",
        r.all()
    );
    let r = c.ok("FETCH 1 (BINARY.PEEK[2])");
    let raw = &r.fetches()[0].1.raw;
    let want: &[u8] = b"BINARY[2] ~{4}\r\n\x00\x01\x02\xff";
    assert!(
        raw.windows(want.len()).any(|w| w == want),
        "decoded bytes: {:?}",
        String::from_utf8_lossy(raw)
    );
    // a partial range of the decoded bytes
    let r = c.ok("FETCH 1 (BINARY.PEEK[2]<1.2>)");
    let raw = &r.fetches()[0].1.raw;
    let want: &[u8] = b"BINARY[2]<1> ~{2}\r\n\x01\x02";
    assert!(
        raw.windows(want.len()).any(|w| w == want),
        "partial: {:?}",
        String::from_utf8_lossy(raw)
    );
    // a text part comes back as it is
    let r = c.ok("FETCH 1 (BINARY.PEEK[1])");
    assert!(r.all().contains("hello"), "{}", r.all());
    // PEEK left \Seen alone; BINARY[] sets it (RFC 3516 §4.2, as BODY[])
    let r = c.ok("FETCH 1 (FLAGS)");
    assert!(!r.all().contains("\\Seen"), "{}", r.all());
    c.ok("FETCH 1 (BINARY[2])");
    let r = c.ok("FETCH 1 (FLAGS)");
    assert!(r.all().contains("\\Seen"), "{}", r.all());
    // the literal8 message is stored byte for byte
    let r = c.ok("FETCH 2 (BODY.PEEK[TEXT])");
    let sections = r.fetches()[0].1.body_sections();
    assert_eq!(
        sections,
        vec![Some("Gr\u{fc}\u{df}e\r\n".as_bytes().to_vec())]
    );
    // a part number that is not there reads as empty, as BODY[7] does
    let r = c.ok("FETCH 1 (BINARY.PEEK[7])");
    assert!(r.all().contains("BINARY[7] \"\""), "{}", r.all());
}

#[test]
fn status_appendlimit_is_the_capabilitys_limit() {
    let s = Server::start();
    let mut c = s.login("alice");
    let caps = c.ok("CAPABILITY").lines("* CAPABILITY").join(" ");
    let limit = caps
        .split(' ')
        .find_map(|w| w.strip_prefix("APPENDLIMIT="))
        .unwrap_or_else(|| panic!("no APPENDLIMIT=: {caps}"))
        .to_string();
    // RFC 7889 §3.2: STATUS reports the limit per mailbox, here the same everywhere
    let r = c.ok("STATUS INBOX (MESSAGES APPENDLIMIT)");
    assert_eq!(
        r.lines("* STATUS"),
        vec![format!("* STATUS INBOX (MESSAGES 0 APPENDLIMIT {limit})")]
    );
    c.ok("CREATE Archive");
    let r = c.ok("LIST \"\" \"Archive\" RETURN (STATUS (APPENDLIMIT))");
    assert_eq!(
        r.lines("* STATUS"),
        vec![format!("* STATUS Archive (APPENDLIMIT {limit})")]
    );
}

#[test]
fn star_in_an_empty_mailbox() {
    let s = Server::start();
    let mut c = s.select("alice", "INBOX");
    // RFC 9051 §6.4.4.1 / RFC 3501 §6.4.8: a UID range with * on an empty mailbox is
    // valid and matches nothing
    let r = c.ok("UID FETCH 1:* (FLAGS)");
    assert!(r.fetches().is_empty(), "{}", r.all());
    let r = c.ok("UID SEARCH 1:*");
    assert_eq!(r.lines("* SEARCH"), vec!["* SEARCH".to_string()]);
    // a message sequence number * names no message here: refused, the session goes on
    let r = c.cmd("FETCH * (FLAGS)");
    assert_ne!(r.status(), "OK", "{}", r.all());
    let r = c.cmd("STORE 1:* +FLAGS (\\Seen)");
    assert_ne!(r.status(), "OK", "{}", r.all());
    c.ok("NOOP");
}
