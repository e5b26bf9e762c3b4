//! IMAP over real sockets: greeting, CAPABILITY per state, LOGIN/AUTHENTICATE, STARTTLS
//! and IMAPS, bad input. Every response is parsed by imap-codec (tests/support/imap).

use crate::support::daemon::Server;

#[test]
fn greeting_and_capabilities_per_state() {
    let s = Server::start();
    let mut c = s.connect();
    assert!(
        c.greeting.starts_with("* OK [CAPABILITY IMAP4rev1"),
        "{}",
        c.greeting
    );
    let r = c.ok("CAPABILITY");
    let caps = r.lines("* CAPABILITY").join(" ");
    for want in [
        "IMAP4rev1",
        "STARTTLS",
        "AUTH=PLAIN",
        "SASL-IR",
        "IDLE",
        "LITERAL+",
    ] {
        assert!(caps.split(' ').any(|w| w == want), "{want} missing: {caps}");
    }
    assert!(!caps.contains("UIDPLUS"), "{caps}");
    let r = c.ok("LOGIN alice pw");
    let text = r.done.text();
    assert!(text.contains("[CAPABILITY IMAP4rev1"), "{text}");
    let r = c.ok("CAPABILITY");
    let caps = r.lines("* CAPABILITY").join(" ");
    for want in [
        "UIDPLUS",
        "MOVE",
        "ESEARCH",
        "SEARCHRES",
        "LIST-EXTENDED",
        "SPECIAL-USE",
        "MULTIAPPEND",
        "STATUS=SIZE",
    ] {
        assert!(caps.split(' ').any(|w| w == want), "{want} missing: {caps}");
    }
    assert!(
        !caps.contains("STARTTLS") && !caps.contains("AUTH=PLAIN"),
        "{caps}"
    );
    c.ok("SELECT INBOX");
    let r = c.ok("CAPABILITY");
    assert!(r.all().contains("UIDPLUS"));
    let r = c.ok("LOGOUT");
    assert!(r.all().contains("* BYE"), "{}", r.all());
}

fn b64(s: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn login_and_authenticate_plain() {
    let s = Server::start();
    let mut c = s.connect();
    let r = c.cmd("LOGIN alice wrong");
    assert_eq!(r.status(), "NO");
    assert!(
        r.done.text().contains("[AUTHENTICATIONFAILED]"),
        "{}",
        r.all()
    );
    let r = c.cmd("LOGIN nobody pw");
    assert!(
        r.done.text().contains("NO [AUTHENTICATIONFAILED]"),
        "{}",
        r.all()
    );
    // still not logged in
    assert_eq!(c.cmd("SELECT INBOX").status(), "BAD");
    c.ok("LOGIN \"alice\" {2+}\r\npw");
    assert_eq!(c.cmd("LOGIN alice pw").status(), "BAD", "already logged in");

    // SASL-IR (RFC 4959)
    let mut c = s.connect();
    c.ok(&format!("AUTHENTICATE PLAIN {}", b64(b"\0alice\0pw")));
    assert_eq!(c.ok("SELECT INBOX").status(), "OK");
    // with a continuation (RFC 3501 §6.2.2)
    let mut c = s.connect();
    let tag = c.tag();
    c.send(format!("{tag} AUTHENTICATE PLAIN\r\n"));
    let cont = c.read();
    assert!(cont.is_continuation(), "{}", cont.text());
    c.send(format!("{}\r\n", b64(b"alice\0alice\0pw")));
    let r = c.until(&tag);
    assert_eq!(r.status(), "OK", "{}", r.all());
    // cancelled with "*": BAD, and the session goes on
    let mut c = s.connect();
    let tag = c.tag();
    c.send(format!("{tag} AUTHENTICATE PLAIN\r\n"));
    assert!(c.read().is_continuation());
    c.send("*\r\n");
    let r = c.until(&tag);
    assert_eq!(r.status(), "BAD", "{}", r.all());
    c.ok("NOOP");
    // garbage base64, malformed PLAIN, wrong password, another authzid, unknown mechanism
    let r = c.cmd("AUTHENTICATE PLAIN !!!not-base64!!!");
    assert!(matches!(r.status().as_str(), "BAD" | "NO"), "{}", r.all());
    let r = c.cmd(&format!("AUTHENTICATE PLAIN {}", b64(b"no-nul-bytes")));
    assert!(matches!(r.status().as_str(), "BAD" | "NO"), "{}", r.all());
    let r = c.cmd(&format!("AUTHENTICATE PLAIN {}", b64(b"\0alice\0bad")));
    assert!(
        r.done.text().contains("NO [AUTHENTICATIONFAILED]"),
        "{}",
        r.all()
    );
    let r = c.cmd(&format!("AUTHENTICATE PLAIN {}", b64(b"bob\0alice\0pw")));
    assert_eq!(r.status(), "NO", "{}", r.all());
    let r = c.cmd("AUTHENTICATE X-UNKNOWN");
    assert_eq!(r.status(), "NO", "{}", r.all());
    c.ok(&format!("AUTHENTICATE PLAIN {}", b64(b"\0bob\0pw")));
    c.ok("SELECT INBOX");
}

#[test]
fn login_needs_tls_when_plaintext_is_off_and_starttls_drops_pipelined_bytes() {
    let s = Server::start_with(crate::support::daemon::Opts {
        plaintext_on_loopback: false,
        tls: true,
        ..Default::default()
    });
    let mut c = s.connect();
    assert!(
        c.greeting.contains("STARTTLS") && c.greeting.contains("LOGINDISABLED"),
        "{}",
        c.greeting
    );
    assert!(!c.greeting.contains("AUTH=PLAIN"), "{}", c.greeting);
    let r = c.cmd("LOGIN alice pw");
    assert!(
        r.done.text().contains("NO [PRIVACYREQUIRED]"),
        "{}",
        r.all()
    );
    let r = c.cmd(&format!("AUTHENTICATE PLAIN {}", b64(b"\0alice\0pw")));
    assert!(
        r.done.text().contains("NO [PRIVACYREQUIRED]"),
        "{}",
        r.all()
    );
    // a LOGIN pipelined in the same packet as STARTTLS travels in the clear: dropped
    c.starttls(&s.cert, "X1 LOGIN alice pw\r\nX2 SELECT INBOX\r\n");
    let r = c.ok("CAPABILITY");
    let caps = r.lines("* CAPABILITY").join(" ");
    assert!(caps.contains("AUTH=PLAIN"), "{caps}");
    assert!(
        !caps.contains("STARTTLS") && !caps.contains("LOGINDISABLED"),
        "{caps}"
    );
    // not logged in: the pipelined LOGIN never ran (and `until` fails on an X1 answer)
    assert_eq!(c.cmd("SELECT INBOX").status(), "BAD");
    assert_eq!(c.cmd("STARTTLS").status(), "BAD", "TLS is already active");
    c.ok("LOGIN alice pw");
    c.ok("SELECT INBOX");
    c.ok("LOGOUT");

    // implicit TLS: login allowed at once
    let mut t = s.connect_tls();
    assert!(!t.greeting.contains("STARTTLS"), "{}", t.greeting);
    assert!(t.greeting.contains("AUTH=PLAIN"), "{}", t.greeting);
    t.ok("LOGIN alice pw");
    t.ok("SELECT INBOX");
    t.ok("LOGOUT");
}

#[test]
fn starttls_without_certificates_is_refused() {
    let s = Server::start_with(crate::support::daemon::Opts {
        plaintext_on_loopback: true,
        tls: false,
        ..Default::default()
    });
    let mut c = s.connect();
    assert!(!c.greeting.contains("STARTTLS"), "{}", c.greeting);
    assert_eq!(c.cmd("STARTTLS").status(), "BAD");
    c.ok("LOGIN alice pw");
}

/// What the server did with a hostile command.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// A BAD or NO, and the session still works.
    Refused,
    /// `* BYE` and the connection closed.
    Bye,
}

fn hostile(s: &Server, bytes: &[u8], login: bool) -> Outcome {
    let mut c = if login { s.login("alice") } else { s.connect() };
    c.send(bytes);
    let r = c.read();
    let t = r.text();
    if t.starts_with("* BYE") {
        assert!(
            c.closed_within(std::time::Duration::from_secs(10)),
            "open after BYE"
        );
        return Outcome::Bye;
    }
    assert!(
        t.contains(" BAD ") || t.contains(" NO "),
        "wanted BAD/NO/BYE for {:?}: {t}",
        String::from_utf8_lossy(&bytes[..bytes.len().min(60)])
    );
    assert!(!t.starts_with("+"), "{t}");
    // the rest of the bad command (if any) is skipped; the session answers again
    let r = c.cmd("NOOP");
    if r.status() != "OK" {
        // a second BAD for the skipped remainder is acceptable; the next NOOP must work
        c.ok("NOOP");
    }
    Outcome::Refused
}

#[test]
fn bad_input_gets_bad_no_or_bye_and_others_are_served() {
    let s = Server::start();
    s.deliver("alice", &crate::support::imap::simple("hello", "body"));
    // a session that stays open all along must keep working
    let mut bystander = s.select("alice", "INBOX");
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        ("unknown command", b"T1 FROBNICATE\r\n".to_vec(), false),
        (
            "wrong state: SELECT before login",
            b"T1 SELECT INBOX\r\n".to_vec(),
            false,
        ),
        (
            "wrong state: FETCH unselected",
            b"T1 FETCH 1 FLAGS\r\n".to_vec(),
            true,
        ),
        ("missing arguments", b"T1 LOGIN\r\n".to_vec(), false),
        ("NUL byte", b"T1 LOGIN al\0ice pw\r\n".to_vec(), false),
        (
            "overlong line",
            {
                let mut v = b"T1 LOGIN ".to_vec();
                v.extend(std::iter::repeat_n(b'a', 200_000));
                v.extend_from_slice(b" pw\r\n");
                v
            },
            false,
        ),
        (
            "4 GB literal",
            b"T1 APPEND INBOX {4294967296}\r\n".to_vec(),
            true,
        ),
        (
            "4 GB literal in LOGIN",
            b"T1 LOGIN {4000000000}\r\n".to_vec(),
            false,
        ),
        (
            "100,000 sequence items",
            {
                let mut v = b"T1 FETCH ".to_vec();
                for i in 0..100_000 {
                    if i > 0 {
                        v.push(b',');
                    }
                    v.push(b'1');
                }
                v.extend_from_slice(b" FLAGS\r\n");
                v
            },
            true,
        ),
        (
            "sequence number 0",
            b"T1 UID FETCH 0:* FLAGS\r\n".to_vec(),
            true,
        ),
        ("bad mailbox name", b"T1 CREATE \"a\\\"\r\n".to_vec(), true),
    ];
    for (what, bytes, login) in cases {
        let mut bytes = bytes;
        if what == "sequence number 0" {
            // needs a selected mailbox
            bytes = b"T0 SELECT INBOX\r\nT1 FETCH 0 FLAGS\r\n".to_vec();
            let mut c = s.login("alice");
            c.send(&bytes);
            let r = c.until("T0");
            assert_eq!(r.status(), "OK");
            let r = c.until("T1");
            assert_eq!(r.status(), "BAD", "{what}: {}", r.all());
            continue;
        }
        let outcome = hostile(&s, &bytes, login);
        eprintln!("{what}: {outcome:?}");
        if what == "4 GB literal" {
            let mut c = s.login("alice");
            c.send(&bytes);
            let r = c.read();
            assert!(!r.is_continuation(), "{what}: continued a 4 GB literal");
        }
        let r = bystander.ok("NOOP");
        assert_eq!(r.status(), "OK", "{what}");
        let mut other = s.select("alice", "INBOX");
        let r = other.ok("FETCH 1 (FLAGS BODY.PEEK[HEADER.FIELDS (SUBJECT)])");
        assert!(r.all().contains("Subject: hello"), "{what}: {}", r.all());
    }
}
