//! Protocol deviations a conformance suite found (issue 15 #14-#20, #34), each as a raw
//! IMAP transcript against the in-process daemon; every response is parsed by imap-codec
//! (tests/support/imap). The expected answers are Dovecot 2.3's where it has one.

use crate::support::daemon::Server;
use crate::support::imap::{simple, Reply};

/// The `prefix` lines of a reply are `want`, in any order.
fn assert_lines(r: &Reply, prefix: &str, want: &[&str]) {
    let mut got = r.lines(prefix);
    got.sort();
    let mut want: Vec<String> = want.iter().map(|w| w.to_string()).collect();
    want.sort();
    assert_eq!(got, want, "{}", r.all());
}

/// Position of the first untagged response starting with `prefix`.
fn position(r: &Reply, prefix: &str) -> usize {
    r.untagged
        .iter()
        .position(|u| u.text().starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix}: {}", r.all()))
}

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

/// Issue 15 #18, RFC 5258 §3.5: a parent whose subscribed children are all listed
/// themselves is not listed again with CHILDINFO; a listed subscribed mailbox with
/// subscribed children carries CHILDINFO. The expected lines are Dovecot 2.3's.
#[test]
fn recursivematch_childinfo_only_where_children_are_not_listed() {
    let s = Server::start();
    let mut c = s.login("alice");
    for name in ["x", "x.y", "p", "p.q", "p.q.r", "m.n"] {
        c.ok(&format!("CREATE {name}"));
    }
    for name in ["x", "x.y", "p.q", "p.q.r", "m.n"] {
        c.ok(&format!("SUBSCRIBE {name}"));
    }
    let r = c.ok("LIST (SUBSCRIBED RECURSIVEMATCH) \"\" *");
    assert_lines(
        &r,
        "* LIST",
        &[
            "* LIST (\\Subscribed \\HasNoChildren) \".\" m.n",
            "* LIST (\\Subscribed \\HasChildren) \".\" p.q (CHILDINFO (\"SUBSCRIBED\"))",
            "* LIST (\\Subscribed \\HasNoChildren) \".\" p.q.r",
            "* LIST (\\Subscribed \\HasChildren) \".\" x (CHILDINFO (\"SUBSCRIBED\"))",
            "* LIST (\\Subscribed \\HasNoChildren) \".\" x.y",
        ],
    );
    let r = c.ok("LIST (SUBSCRIBED RECURSIVEMATCH) \"\" %");
    assert_lines(
        &r,
        "* LIST",
        &[
            "* LIST (\\HasChildren) \".\" p (CHILDINFO (\"SUBSCRIBED\"))",
            "* LIST (\\NonExistent \\HasChildren) \".\" m (CHILDINFO (\"SUBSCRIBED\"))",
            "* LIST (\\Subscribed \\HasChildren) \".\" x (CHILDINFO (\"SUBSCRIBED\"))",
        ],
    );
    // without RECURSIVEMATCH, no CHILDINFO and no parents
    let r = c.ok("LIST (SUBSCRIBED) \"\" %");
    assert_eq!(
        r.lines("* LIST"),
        ["* LIST (\\Subscribed \\HasChildren) \".\" x"]
    );
}

/// Issue 15 #16, RFC 3501 §2.3.2: EXAMINE reports the real RECENT count and shows
/// `\Recent` without claiming it; a later SELECT still gets the messages as recent.
#[test]
fn examine_shows_recent_without_claiming_it() {
    let s = Server::start();
    s.deliver("alice", &simple("one", "1"));
    s.deliver("alice", &simple("two", "2"));
    let mut e = s.login("alice");
    let r = e.ok("EXAMINE INBOX");
    assert!(r.all().contains("* 2 RECENT\r\n"), "{}", r.all());
    let r = e.ok("FETCH 1:* FLAGS");
    assert_eq!(r.fetches().len(), 2, "{}", r.all());
    for (_, f) in r.fetches() {
        assert!(f.text().contains("\\Recent"), "{}", r.all());
    }
    let r = e.ok("SEARCH RECENT");
    assert_eq!(r.lines("* SEARCH"), ["* SEARCH 1 2"]);
    let r = e.ok("STATUS INBOX (RECENT)");
    assert!(r.all().contains("(RECENT 2)"), "{}", r.all());
    // a message arriving meanwhile is recent too
    s.deliver("alice", &simple("three", "3"));
    let r = e.ok("NOOP");
    assert!(
        r.all().contains("* 3 EXISTS\r\n* 3 RECENT\r\n"),
        "{}",
        r.all()
    );
    // the first SELECT claims them
    let mut c = s.login("alice");
    let r = c.ok("SELECT INBOX");
    assert!(r.all().contains("* 3 RECENT\r\n"), "{}", r.all());
    let r = c.ok("FETCH 1 FLAGS");
    assert!(r.all().contains("\\Recent"), "{}", r.all());
    // ... and from then on nobody sees them as recent
    let mut d = s.login("alice");
    let r = d.ok("EXAMINE INBOX");
    assert!(r.all().contains("* 0 RECENT\r\n"), "{}", r.all());
    let r = d.ok("FETCH 1:* FLAGS");
    assert!(!r.all().contains("\\Recent"), "{}", r.all());
}

/// Issue 15 #19, RFC 3501 §7.2.6: the session that stores a new keyword is told the new
/// FLAGS and PERMANENTFLAGS before the FETCH that carries it.
#[test]
fn new_keyword_is_announced_before_the_fetch_that_uses_it() {
    let s = Server::start();
    s.deliver("alice", &simple("one", "1"));
    s.deliver("alice", &simple("two", "2"));
    let mut c = s.select("alice", "INBOX");
    for (cmd, kw) in [
        ("STORE 1 +FLAGS (Kw1)", "Kw1"),
        ("UID STORE 2 +FLAGS (Kw2)", "Kw2"),
    ] {
        let r = c.ok(cmd);
        let flags = position(&r, "* FLAGS");
        let perm = position(&r, "* OK [PERMANENTFLAGS");
        let fetch = r
            .untagged
            .iter()
            .position(|u| u.fetch().is_some())
            .unwrap_or_else(|| panic!("{cmd}: no FETCH: {}", r.all()));
        assert!(flags < fetch && perm < fetch, "{cmd}: {}", r.all());
        assert!(r.untagged[flags].text().contains(kw), "{}", r.all());
        assert!(r.untagged[perm].text().contains(kw), "{}", r.all());
        // announced once
        assert_eq!(r.lines("* FLAGS").len(), 1, "{}", r.all());
    }
    // a keyword the mailbox knows already is not announced again
    let r = c.ok("STORE 2 +FLAGS (Kw1)");
    assert!(r.lines("* FLAGS").is_empty(), "{}", r.all());
}

/// Issue 15 #20, RFC 3501 §6.4.8 and RFC 2180 §4.1.2: UID FETCH of a UID another session
/// expunged answers the rest and OK; FETCH of an expunged sequence number keeps
/// `NO [EXPUNGEISSUED]`, saying the message no longer exists.
#[test]
fn uid_fetch_of_an_expunged_uid_is_not_an_error() {
    let s = Server::start();
    for i in 1..=3 {
        s.deliver("alice", &simple(&format!("m{i}"), "body"));
    }
    let mut a = s.select("alice", "INBOX");
    let mut b = s.select("alice", "INBOX");
    let mut e = s.select("alice", "INBOX");
    e.ok("STORE 2 +FLAGS.SILENT (\\Deleted)");
    e.ok("EXPUNGE");
    let r = a.ok("UID FETCH 1:3 (FLAGS BODY.PEEK[HEADER.FIELDS (Subject)])");
    let mut uids: Vec<String> = r.fetches().iter().map(|(_, f)| f.text()).collect();
    uids.retain(|t| t.contains("Subject"));
    assert_eq!(uids.len(), 2, "{}", r.all());
    assert!(
        uids[0].contains("UID 1 ") && uids[1].contains("UID 3 "),
        "{}",
        r.all()
    );
    assert!(!r.done.text().contains("EXPUNGEISSUED"), "{}", r.all());
    let r = b.cmd("FETCH 2 FLAGS");
    assert_eq!(r.status(), "NO", "{}", r.all());
    assert!(r.done.text().contains("[EXPUNGEISSUED]"), "{}", r.all());
    assert!(r.done.text().contains("no longer exist"), "{}", r.all());
}

/// Issue 15 #34: `DOVECOT-TRASHED` is where DELETE puts a mailbox while removing it (and
/// wipes whatever it finds there), so it cannot be created, renamed to or selected.
#[test]
fn reserved_maildir_names_are_refused() {
    let s = Server::start();
    let mut c = s.login("alice");
    c.ok("CREATE Keep");
    for cmd in [
        "CREATE DOVECOT-TRASHED",
        "RENAME Keep DOVECOT-TRASHED",
        "SELECT DOVECOT-TRASHED",
        "STATUS DOVECOT-TRASHED (MESSAGES)",
    ] {
        let r = c.cmd(cmd);
        assert_eq!(r.status(), "NO", "{cmd}: {}", r.all());
        assert!(r.done.text().contains("[CANNOT]"), "{cmd}: {}", r.all());
    }
    // a leftover trash folder on disk (an interrupted DELETE) is not a mailbox either
    let trash = s.maildir("alice").join(".DOVECOT-TRASHED");
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(trash.join(sub)).unwrap();
    }
    let r = c.cmd("SELECT DOVECOT-TRASHED");
    assert_eq!(r.status(), "NO", "{}", r.all());
    // only the top level is Dovecot's: a child of that name is an ordinary mailbox
    c.ok("CREATE Keep.DOVECOT-TRASHED");
    c.ok("SELECT Keep.DOVECOT-TRASHED");
    let r = c.ok("LIST \"\" *");
    assert!(!r.all().contains("\" DOVECOT-TRASHED"), "{}", r.all());
}

/// Issue 15 #20, the same rule for UID COPY (RFC 3501 §6.4.8): UIDs another session
/// expunged are skipped, so a UID COPY naming only those copies nothing and answers OK,
/// as UID COPY of a UID the view no longer has does. COPY of an expunged sequence number
/// keeps `NO [EXPUNGEISSUED]` (RFC 2180 §4.4.1).
#[test]
fn uid_copy_of_only_expunged_uids_is_not_an_error() {
    let s = Server::start();
    for i in 1..=3 {
        s.deliver("alice", &simple(&format!("m{i}"), "body"));
    }
    let mut a = s.login("alice");
    a.ok("CREATE Dest");
    a.ok("SELECT INBOX");
    let mut b = s.select("alice", "INBOX");
    let mut e = s.select("alice", "INBOX");
    e.ok("STORE 2 +FLAGS.SILENT (\\Deleted)");
    e.ok("EXPUNGE");
    let r = a.ok("UID COPY 2 Dest");
    assert!(!r.done.text().contains("COPYUID"), "{}", r.all());
    let r = b.cmd("COPY 2 Dest");
    assert_eq!(r.status(), "NO", "{}", r.all());
    assert!(r.done.text().contains("[EXPUNGEISSUED]"), "{}", r.all());
    let r = a.ok("STATUS Dest (MESSAGES)");
    assert!(r.all().contains("(MESSAGES 0)"), "{}", r.all());
}
