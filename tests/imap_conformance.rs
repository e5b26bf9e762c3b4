//! Protocol deviations a conformance suite found (issue 15 #14-#20, #34), each as a raw
//! IMAP transcript against the in-process daemon; every response is parsed by imap-codec
//! (tests/imap_support). The expected answers are Dovecot 2.3's where it has one.

mod imap_support;

use imap_support::Server;

/// Issue 15 #14: `~` is an ATOM-CHAR (RFC 3501 §9); only `~{` starts a literal8 (RFC 3516).
#[test]
fn tilde_is_an_atom_char() {
    let s = Server::start();
    s.deliver(
        "alice",
        "From: a@example.net\nSubject: a ~tilde here\n~x: tilde field\n\nbody\n",
    );
    let mut c = s.login("alice");
    let r = c.ok("LIST \"\" ~foo");
    assert!(r.lines("* LIST").is_empty(), "{}", r.all());
    let r = c.cmd("SELECT ~x");
    assert_eq!(r.status(), "NO", "{}", r.all());
    assert!(r.done.text().contains("[NONEXISTENT]"), "{}", r.all());
    c.ok("CREATE ~x");
    let r = c.ok("LIST \"\" ~%");
    assert_eq!(r.lines("* LIST"), ["* LIST (\\HasNoChildren) \".\" ~x"]);
    c.ok("SELECT ~x");
    c.ok("SELECT INBOX");
    let r = c.ok("SEARCH SUBJECT ~tilde");
    assert_eq!(r.lines("* SEARCH"), ["* SEARCH 1"]);
    let r = c.ok("FETCH 1 BODY.PEEK[HEADER.FIELDS (~x)]");
    assert_eq!(
        r.untagged[0].body_sections(),
        [Some(b"~x: tilde field\r\n\r\n".to_vec())],
        "{}",
        r.all()
    );
    // a literal8 where only a string may stand is still refused
    let r = c.cmd("SELECT ~{1+}\r\nx");
    assert_eq!(r.status(), "BAD", "{}", r.all());
}

/// Issue 15 #14: a mailbox name that is not valid modified UTF-7 is a refusal (NO), as
/// Dovecot answers, not a syntax error.
#[test]
fn invalid_modified_utf7_name_is_no() {
    let s = Server::start();
    let mut c = s.login("alice");
    for cmd in ["SELECT &Jjo", "CREATE &Jjo", "STATUS &AGE- (MESSAGES)"] {
        let r = c.cmd(cmd);
        assert_eq!(r.status(), "NO", "{cmd}: {}", r.all());
        assert!(r.done.text().contains("modified UTF-7"), "{}", r.all());
    }
}

/// Issue 15 #15, RFC 3501 §6.3.9: `a.b` subscribed and `a` not, `LSUB "" %` returns
/// `a` with `\Noselect` (Dovecot 2.3: `* LSUB (\Noselect) "." a`, whether `a` exists or not).
#[test]
fn lsub_percent_reports_the_level_above_a_subscribed_child() {
    let s = Server::start();
    let mut c = s.login("alice");
    c.ok("CREATE a.b");
    c.ok("SUBSCRIBE a.b");
    let r = c.ok("LSUB \"\" %");
    assert_eq!(r.lines("* LSUB"), ["* LSUB (\\Noselect) \".\" a"]);
    let r = c.ok("LSUB \"\" *");
    assert_eq!(r.lines("* LSUB"), ["* LSUB () \".\" a.b"]);
    let r = c.ok("LSUB \"\" a.%");
    assert_eq!(r.lines("* LSUB"), ["* LSUB () \".\" a.b"]);
    c.ok("CREATE a");
    let r = c.ok("LSUB \"\" %");
    assert_eq!(r.lines("* LSUB"), ["* LSUB (\\Noselect) \".\" a"]);
    c.ok("SUBSCRIBE a");
    let r = c.ok("LSUB \"\" %");
    assert_eq!(r.lines("* LSUB"), ["* LSUB () \".\" a"]);
}
