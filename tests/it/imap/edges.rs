//! Edge cases over real sockets: bodies streamed across chunk boundaries, UID ranges
//! beyond the last UID, empty mailboxes, literals and pipelining in ordinary commands,
//! clients that vanish mid-literal or mid-FETCH, commands on vanished messages, a
//! selected mailbox deleted elsewhere, and IDLE woken by another Maildir tool.

use std::time::Duration;

use crate::support::daemon::Server;
use crate::support::imap::{crlf, simple, Reply, Resp};

fn uids(r: &Reply) -> Vec<u32> {
    r.fetches()
        .iter()
        .map(|(_, f)| {
            let t = f.text();
            let i = t.find("UID ").unwrap_or_else(|| panic!("{t}"));
            t[i + 4..]
                .split([' ', ')'])
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect()
}

fn search(r: &Reply) -> Vec<u32> {
    let l = r.lines("* SEARCH");
    assert_eq!(l.len(), 1, "{}", r.all());
    l[0].split(' ')
        .skip(2)
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect()
}

#[test]
fn big_bodies_and_partials_across_read_chunks() {
    let s = Server::start();
    // lines of growing length, so line ends fall on and around every 64 KiB boundary
    let mut body = String::new();
    let mut n = 0;
    while body.len() < 300_000 {
        body.push_str(&"x".repeat(n % 97));
        body.push('\n');
        n += 1;
    }
    s.deliver("alice", &simple("big", &body));
    let file = std::fs::read(&s.files("alice", "INBOX")[0]).unwrap();
    let full = crlf(std::str::from_utf8(&file).unwrap());
    let text_at = full.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut c = s.login("alice");
    c.ok("EXAMINE INBOX");
    let r = c.ok("FETCH 1 (RFC822.SIZE BODY.PEEK[] BODY.PEEK[TEXT])");
    let f = r.fetches()[0].1;
    assert!(f.text().contains(&format!("RFC822.SIZE {}", full.len())));
    let got = f.body_sections();
    assert!(got[0].as_deref() == Some(&full[..]), "BODY[] differs");
    assert!(
        got[1].as_deref() == Some(&full[text_at..]),
        "BODY[TEXT] differs"
    );
    for (origin, count) in [
        (0usize, 1usize),
        (65_530, 20),
        (65_535, 2),
        (65_536, 1),
        (131_060, 40),
        (full.len() - 5, 100),
        (full.len(), 10),
        (full.len() + 1000, 10),
    ] {
        let r = c.ok(&format!("FETCH 1 BODY.PEEK[]<{origin}.{count}>"));
        let got = r.fetches()[0].1.body_sections();
        let lo = origin.min(full.len());
        let hi = (origin + count).min(full.len());
        assert!(
            got[0].as_deref() == Some(&full[lo..hi]),
            "<{origin}.{count}>: {:?}",
            got[0]
                .as_ref()
                .map(|g| String::from_utf8_lossy(g).into_owned())
        );
        let r = c.ok(&format!("FETCH 1 BODY.PEEK[TEXT]<{origin}.{count}>"));
        let text = &full[text_at..];
        let (lo, hi) = (origin.min(text.len()), (origin + count).min(text.len()));
        assert!(
            r.fetches()[0].1.body_sections()[0].as_deref() == Some(&text[lo..hi]),
            "TEXT<{origin}.{count}>"
        );
    }
}

#[test]
fn single_part_sections_and_header_field_details() {
    let s = Server::start();
    let m = "From: a@example.org\nSubject: folded\n  over two lines\nX-Empty:\n\
             Content-Type: text/plain\n\nonly body\n";
    s.deliver("alice", m);
    let mut c = s.login("alice");
    c.ok("EXAMINE INBOX");
    let r = c.ok(
        "FETCH 1 (BODY.PEEK[1] BODY.PEEK[TEXT] BODY.PEEK[HEADER.FIELDS (subject)] \
         BODY.PEEK[HEADER.FIELDS (X-Missing)] BODY.PEEK[HEADER.FIELDS (X-Empty)])",
    );
    let got = r.fetches()[0].1.body_sections();
    let show = |i: usize| String::from_utf8_lossy(got[i].as_deref().unwrap_or(b"NIL")).into_owned();
    // RFC 3501 §6.4.5: a non-multipart message has part 1, its body
    assert_eq!(show(0), "only body\r\n");
    assert_eq!(show(1), "only body\r\n");
    assert_eq!(show(2), "Subject: folded\r\n  over two lines\r\n\r\n");
    assert_eq!(show(3), "\r\n");
    assert_eq!(show(4), "X-Empty:\r\n\r\n");
}

#[test]
fn uid_ranges_beyond_the_last_uid_and_empty_mailboxes() {
    let s = Server::start();
    let mut c = s.login("alice");
    c.ok("CREATE Empty");
    let r = c.ok("SELECT Empty");
    assert!(r.all().contains("* 0 EXISTS"), "{}", r.all());
    // clients send these on empty folders all the time
    let r = c.ok("UID FETCH 1:* (FLAGS)");
    assert!(r.fetches().is_empty());
    assert!(search(&c.ok("SEARCH ALL")).is_empty());
    assert!(search(&c.ok("UID SEARCH UID 1:*")).is_empty());
    let r = c.ok("SEARCH RETURN (MIN MAX COUNT) ALL");
    let l = r.lines("* ESEARCH");
    assert!(
        l[0].contains("COUNT 0") && !l[0].contains("MIN"),
        "{}",
        r.all()
    );
    c.ok("UID STORE 1:* +FLAGS (\\Seen)");
    c.ok("UID EXPUNGE 1:*");
    for i in 1..=3 {
        s.deliver("alice", &simple(&format!("m{i}"), "x"));
    }
    c.ok("SELECT INBOX");
    // RFC 3501 §6.4.8: 100:* always includes the last message
    assert_eq!(uids(&c.ok("UID FETCH 100:* UID")), [3]);
    assert_eq!(search(&c.ok("UID SEARCH UID 100:*")), [3]);
    let r = c.ok("UID STORE 100:* +FLAGS (\\Flagged)");
    assert_eq!(uids(&r), [3], "{}", r.all());
    assert_eq!(uids(&c.ok("UID FETCH 2:1 UID")), [1, 2]);
    assert_eq!(uids(&c.ok("FETCH *:2 UID")), [2, 3]);
    assert_eq!(uids(&c.ok("UID FETCH 4:5 UID")), Vec::<u32>::new());
    assert_eq!(c.cmd("FETCH 4 UID").status(), "BAD");
    assert_eq!(c.cmd("FETCH 0:1 UID").status(), "BAD");
}

#[test]
fn literals_and_pipelining_in_ordinary_commands() {
    let s = Server::start();
    s.deliver("alice", &simple("one", "x"));
    let mut c = s.connect();
    c.ok("LOGIN {5}\r\nalice {2}\r\npw");
    c.ok("SELECT {5+}\r\nINBOX");
    c.ok("CREATE {4}\r\nA\"B\\");
    let r = c.ok("LIST \"\" *");
    assert!(r.all().contains("\"A\\\"B\\\\\""), "{}", r.all());
    // 30 commands in one write, answered in order
    let mut batch = String::new();
    for i in 0..30 {
        batch.push_str(&format!("P{i} FETCH 1 (UID FLAGS)\r\n"));
    }
    batch.push_str("P30 IDLE\r\n");
    c.send(&batch);
    for i in 0..30 {
        let r = c.until(&format!("P{i}"));
        assert_eq!(r.status(), "OK", "{}", r.all());
    }
    let got = c.read_until(Duration::from_secs(15), Resp::is_continuation);
    assert!(got.last().is_some_and(Resp::is_continuation));
    // DONE and the next command in one packet
    c.send("DONE\r\nQ1 NOOP\r\n");
    assert_eq!(c.until("P30").status(), "OK");
    assert_eq!(c.until("Q1").status(), "OK");
}

#[test]
fn clients_vanishing_mid_literal_or_mid_fetch_leave_nothing_behind() {
    let s = Server::start();
    let big = "y".repeat(2_000_000);
    for i in 0..3 {
        s.deliver("alice", &simple(&format!("big {i}"), &big));
    }
    // mid-literal: an APPEND that never finishes
    {
        let mut c = s.select("alice", "INBOX");
        c.send("A1 APPEND INBOX {100000+}\r\nSubject: half\r\n\r\n");
        c.send(vec![b'z'; 5000]);
    }
    // mid-FETCH: asks for 6 MB and hangs up without reading
    {
        let mut c = s.select("alice", "INBOX");
        c.send("F1 FETCH 1:* BODY.PEEK[]\r\n");
    }
    let mut c = s.select("alice", "INBOX");
    let r = c.ok("STATUS INBOX (MESSAGES)");
    assert!(r.all().contains("(MESSAGES 3)"), "{}", r.all());
    let r = c.ok("FETCH 1 (BODY.PEEK[]<0.10>)");
    assert_eq!(r.fetches().len(), 1);
    // the half APPEND's temporary file is removed (bounded wait)
    let tmp = s.maildir("alice").join("tmp");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "left in tmp/: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    s.assert_clean("alice");
}

#[test]
fn commands_on_messages_another_session_expunged() {
    let s = Server::start();
    for i in 1..=3 {
        s.deliver("alice", &simple(&format!("m{i}"), "body"));
    }
    let mut a = s.select("alice", "INBOX");
    let mut b = s.select("alice", "INBOX");
    b.ok("STORE 2 +FLAGS.SILENT (\\Deleted)");
    b.ok("EXPUNGE");
    for cmd in [
        "STORE 2 +FLAGS (\\Seen)",
        "FETCH 2 BODY[]",
        "FETCH 2 (ENVELOPE FLAGS)",
        "COPY 2 INBOX",
    ] {
        let r = a.cmd(cmd);
        // RFC 3501 §7.4.1 keeps seq 2 valid until told; a NO [EXPUNGEISSUED] (RFC 5530)
        // or an OK without data are both fine, BAD is not
        assert!(
            matches!(r.status().as_str(), "OK" | "NO"),
            "{cmd}: {}",
            r.all()
        );
        assert!(!r.all().contains("EXPUNGE\r\n"), "{cmd}: {}", r.all());
    }
    let r = a.ok("NOOP");
    assert!(r.all().contains("* 2 EXPUNGE"), "{}", r.all());
    let r = a.ok("FETCH 1:* (UID FLAGS)");
    assert_eq!(uids(&r), [1, 3], "{}", r.all());
    assert!(!r.all().contains("\\Seen"), "{}", r.all());
}

#[test]
fn selected_mailbox_deleted_or_renamed_elsewhere() {
    let s = Server::start();
    let mut a = s.login("alice");
    a.ok("CREATE Work");
    a.ok("SELECT Work");
    let mut b = s.login("alice");
    b.ok("DELETE Work");
    // the session cannot go on with a mailbox that is gone: BYE (as Dovecot) or NO
    a.send("N1 NOOP\r\n");
    let r = a.read();
    let t = r.text();
    if t.starts_with("* BYE") {
        assert!(a.closed_within(Duration::from_secs(10)));
    } else {
        let mut rest = vec![r];
        if rest[0].tag().is_none() {
            rest.push(a.until("N1").done);
        }
        let last = rest.last().unwrap().text();
        assert!(last.starts_with("N1 "), "{last}");
    }
    // the server goes on for everyone
    let mut c = s.login("alice");
    c.ok("SELECT INBOX");
}

#[test]
fn idle_sees_a_message_another_maildir_tool_dropped_in_new() {
    idle_sees_another_tools_message(true);
}

/// Without inotify (some filesystems, exhausted instances) the periodic sync of an IDLE
/// session is what finds the message.
#[test]
fn idle_without_inotify_still_sees_another_tools_message() {
    idle_sees_another_tools_message(false);
}

fn idle_sees_another_tools_message(inotify: bool) {
    let s = Server::start_with(crate::support::daemon::Opts {
        inotify,
        ..Default::default()
    });
    s.deliver("alice", &simple("m1", "x"));
    let mut a = s.select("alice", "INBOX");
    let tag = a.tag();
    a.send(format!("{tag} IDLE\r\n"));
    let got = a.read_until(Duration::from_secs(15), Resp::is_continuation);
    assert!(got.last().is_some_and(Resp::is_continuation));
    // what procmail or a cron job does: write in tmp/, rename into new/
    let md = s.maildir("alice");
    let tmp = md.join("tmp/1700000000.P1Q1.tool");
    std::fs::write(&tmp, "Subject: dropped in\n\nby another tool\n").unwrap();
    std::fs::rename(&tmp, md.join("new/1700000000.P1Q1.tool")).unwrap();
    let got = a.read_until(Duration::from_secs(20), |r| r.text() == "* 2 EXISTS\r\n");
    assert!(
        got.last().is_some_and(|r| r.text() == "* 2 EXISTS\r\n"),
        "{:?}",
        got.iter().map(Resp::text).collect::<Vec<_>>()
    );
    a.send("DONE\r\n");
    assert_eq!(a.until(&tag).status(), "OK");
    let r = a.ok("FETCH 2 (BODY.PEEK[HEADER.FIELDS (SUBJECT)])");
    assert!(r.all().contains("Subject: dropped in"), "{}", r.all());
    s.assert_clean("alice");
}

#[test]
fn search_decodes_encoded_words_and_takes_utf8_literals() {
    let s = Server::start();
    s.deliver(
        "alice",
        "From: =?UTF-8?Q?Andr=C3=A9?= <andre@example.fr>\nSubject: =?UTF-8?B?w6l0w6k=?= report\n\ncaf\u{e9} au lait\n",
    );
    s.deliver("alice", &simple("plain", "nothing"));
    let mut c = s.select("alice", "INBOX");
    // RFC 3501 §6.4.4 with CHARSET UTF-8: the decoded header text matches
    let mut q = |key: &str, value: &str| {
        search(&c.ok(&format!(
            "SEARCH CHARSET UTF-8 {key} {{{}}}\r\n{value}",
            value.len()
        )))
    };
    assert_eq!(q("SUBJECT", "\u{e9}t"), [1]);
    assert_eq!(q("FROM", "Andr\u{e9}"), [1]);
    assert_eq!(q("BODY", "caf\u{e9}"), [1]);
    assert_eq!(
        search(&c.ok("SEARCH SUBJECT REPORT")),
        [1],
        "case-insensitive"
    );
}
