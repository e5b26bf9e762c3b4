//! Commands that change mailboxes (EXPUNGE, COPY, MOVE, APPEND) and what other sessions
//! see of them: IDLE woken by another session and by LMTP, EXPUNGE held back during
//! FETCH/STORE/SEARCH (RFC 3501 §7.4.1), `\Recent` given to one session only.

use std::time::Duration;

use crate::support::daemon::Server;
use crate::support::imap::{crlf, simple, Reply, Resp};

/// How long a test waits for an owed untagged response (a bound, not a speed claim).
const WAKE: Duration = Duration::from_secs(15);

fn expunges(r: &Reply) -> Vec<u32> {
    r.lines("* ")
        .iter()
        .filter(|l| l.ends_with(" EXPUNGE"))
        .map(|l| l.split(' ').nth(1).unwrap().parse().unwrap())
        .collect()
}

fn uids(r: &Reply) -> Vec<(u32, u32)> {
    r.lines("* ")
        .iter()
        .filter(|l| l.contains(" FETCH (UID "))
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            (
                w[1].parse().unwrap(),
                w[4].trim_end_matches(')').parse().unwrap(),
            )
        })
        .collect()
}

/// Expands an IMAP set like `1:3,7` (ascending ranges).
fn expand(set: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for r in set.split(',') {
        let mut it = r.split(':').map(|n| n.parse::<u32>().unwrap());
        let a = it.next().unwrap();
        let b = it.next().unwrap_or(a);
        out.extend(a.min(b)..=a.max(b));
    }
    out
}

/// `(uidvalidity, source, dest)` of a COPYUID in `text`.
fn copyuid(text: &str) -> (u32, Vec<u32>, Vec<u32>) {
    let i = text
        .find("[COPYUID ")
        .unwrap_or_else(|| panic!("no COPYUID: {text}"));
    let rest = &text[i + 9..];
    let rest = &rest[..rest.find(']').unwrap()];
    let w: Vec<&str> = rest.split(' ').collect();
    (w[0].parse().unwrap(), expand(w[1]), expand(w[2]))
}

#[test]
fn expunge_and_uid_expunge_shift_sequence_numbers() {
    let s = Server::start();
    for i in 1..=6 {
        s.deliver("alice", &simple(&format!("m{i}"), "x"));
    }
    let mut c = s.select("alice", "INBOX");
    c.ok("STORE 2,3,5 +FLAGS.SILENT (\\Deleted)");
    let r = c.ok("EXPUNGE");
    // uid 2 is seq 2; then uid 3 is seq 2; then uid 5 is seq 3
    assert_eq!(expunges(&r), [2, 2, 3], "{}", r.all());
    let r = c.ok("FETCH 1:* UID");
    assert_eq!(uids(&r), [(1, 1), (2, 4), (3, 6)], "{}", r.all());
    // UID EXPUNGE (RFC 4315 §2.1) removes only the named \Deleted messages
    c.ok("STORE 2:3 +FLAGS.SILENT (\\Deleted)");
    let r = c.ok("UID EXPUNGE 6");
    assert_eq!(expunges(&r), [3], "{}", r.all());
    let r = c.ok("FETCH 1:* (UID FLAGS)");
    assert_eq!(uids(&r), [(1, 1), (2, 4)], "{}", r.all());
    assert!(r.all().contains("\\Deleted"), "uid 4 kept its flag");
    // CLOSE expunges silently
    let r = c.ok("CLOSE");
    assert!(expunges(&r).is_empty(), "{}", r.all());
    let r = c.ok("STATUS INBOX (MESSAGES)");
    assert!(r.all().contains("(MESSAGES 1)"), "{}", r.all());
    s.assert_clean("alice");
}

#[test]
fn copy_and_move_with_copyuid_and_trycreate() {
    let s = Server::start();
    for i in 1..=4 {
        s.deliver("alice", &simple(&format!("m{i}"), &format!("body {i}")));
    }
    let mut c = s.select("alice", "INBOX");
    let r = c.cmd("COPY 1 Nowhere");
    assert!(r.done.text().contains("NO [TRYCREATE]"), "{}", r.all());
    c.ok("CREATE Archive");
    let r = c.ok("COPY 1:2 Archive");
    let (v, src, dst) = copyuid(&r.done.text());
    assert_eq!((src.as_slice(), dst.as_slice()), (&[1, 2][..], &[1, 2][..]));
    let r = c.ok("STATUS Archive (MESSAGES UIDVALIDITY)");
    assert!(r.all().contains(&format!("UIDVALIDITY {v}")), "{}", r.all());
    // MOVE (RFC 6851 §4.3): COPYUID in an untagged OK, then EXPUNGEs
    let r = c.ok("MOVE 2:3 Archive");
    let ok = r
        .untagged
        .iter()
        .map(Resp::text)
        .find(|t| t.starts_with("* OK [COPYUID"))
        .unwrap_or_else(|| panic!("{}", r.all()));
    let (_, src, dst) = copyuid(&ok);
    assert_eq!((src.as_slice(), dst.as_slice()), (&[2, 3][..], &[3, 4][..]));
    assert_eq!(expunges(&r), [2, 2], "{}", r.all());
    let r = c.ok("UID MOVE 4 Archive");
    assert_eq!(expunges(&r), [2], "{}", r.all());
    let r = c.ok("FETCH 1:* UID");
    assert_eq!(uids(&r), [(1, 1)], "{}", r.all());
    let r = c.cmd("MOVE 1 Nowhere");
    assert!(r.done.text().contains("NO [TRYCREATE]"), "{}", r.all());
    // the moved bodies are intact
    let mut d = s.login("alice");
    d.ok("EXAMINE Archive");
    let r = d.ok("FETCH 1:* (UID BODY.PEEK[TEXT])");
    let bodies: Vec<Vec<u8>> = r
        .fetches()
        .iter()
        .map(|(_, f)| f.body_sections()[0].clone().unwrap())
        .collect();
    let want: Vec<Vec<u8>> = [1, 2, 2, 3, 4]
        .iter()
        .map(|i| format!("body {i}\r\n").into_bytes())
        .collect();
    assert_eq!(bodies, want);
    s.assert_clean("alice");
}

#[test]
fn append_sync_nonsync_multiappend_trycreate_and_empty() {
    let s = Server::start();
    let mut c = s.select("alice", "INBOX");
    let m1 = crlf(&simple("first", "one"));
    let m2 = crlf(&simple("second", "two"));
    let m3 = crlf(&simple("third", "three"));
    // synchronizing literal
    let mut cmd = format!("APPEND INBOX (\\Seen) {{{}}}\r\n", m1.len()).into_bytes();
    cmd.extend_from_slice(&m1);
    let r = c.cmd_bytes(&cmd);
    assert_eq!(r.status(), "OK", "{}", r.all());
    let t = r.done.text();
    assert!(t.contains("[APPENDUID ") && t.contains(" 1]"), "{t}");
    assert!(r.all().contains("* 1 EXISTS"), "{}", r.all());
    // non-synchronizing literal (LITERAL+): no continuation
    let mut cmd = format!("APPEND INBOX {{{}+}}\r\n", m2.len()).into_bytes();
    cmd.extend_from_slice(&m2);
    let tag = c.tag();
    let mut line = format!("{tag} ").into_bytes();
    line.extend_from_slice(&cmd);
    line.extend_from_slice(b"\r\n");
    c.send(&line);
    let r = c.until(&tag);
    assert!(
        r.done.text().contains("[APPENDUID ") && r.done.text().contains(" 2]"),
        "{}",
        r.all()
    );
    // MULTIAPPEND (RFC 3502): one command, two messages, one APPENDUID
    let mut cmd = format!("APPEND INBOX (\\Flagged) {{{}}}\r\n", m3.len()).into_bytes();
    cmd.extend_from_slice(&m3);
    cmd.extend_from_slice(
        format!(" () \"01-Jan-2020 10:00:00 +0000\" {{{}}}\r\n", m1.len()).as_bytes(),
    );
    cmd.extend_from_slice(&m1);
    let r = c.cmd_bytes(&cmd);
    assert_eq!(r.status(), "OK", "{}", r.all());
    assert!(r.done.text().contains(" 3:4]"), "{}", r.all());
    let r = c.ok("FETCH 1:4 (FLAGS BODY.PEEK[])");
    let f = r.fetches();
    assert_eq!(f.len(), 4, "{}", r.all());
    for ((_, resp), want) in f.iter().zip([&m1, &m2, &m3, &m1]) {
        assert_eq!(resp.body_sections()[0].as_deref(), Some(&want[..]));
    }
    assert!(f[0].1.text().contains("\\Seen") && f[2].1.text().contains("\\Flagged"));
    // TRYCREATE, before any continuation
    let r = c.cmd("APPEND Nowhere {5}\r\nhello");
    assert!(r.done.text().contains("NO [TRYCREATE]"), "{}", r.all());
    c.ok("NOOP");
    // zero-length messages are refused (RFC 3501 §6.3.11 lets the server refuse)
    let r = c.cmd("APPEND INBOX {0}\r\n");
    assert_eq!(r.status(), "NO", "{}", r.all());
    c.ok("NOOP");
    let r = c.ok("STATUS INBOX (MESSAGES)");
    assert!(r.all().contains("(MESSAGES 4)"), "{}", r.all());
    s.assert_clean("alice");
}

/// Starts IDLE on `c`; returns the tag.
fn idle(c: &mut crate::support::imap::Client) -> String {
    let tag = c.tag();
    c.send(format!("{tag} IDLE\r\n"));
    let r = c.read_until(WAKE, Resp::is_continuation);
    assert!(r.last().is_some_and(Resp::is_continuation), "{r:?}");
    tag
}

fn wait_for(
    c: &mut crate::support::imap::Client,
    what: &str,
    pred: impl Fn(&str) -> bool,
) -> Vec<Resp> {
    let got = c.read_until(WAKE, |r| pred(&r.text()));
    assert!(
        got.last().is_some_and(|r| pred(&r.text())),
        "{what} did not arrive within {WAKE:?}: {:?}",
        got.iter().map(Resp::text).collect::<Vec<_>>()
    );
    got
}

#[test]
fn idle_wakes_on_other_sessions_and_on_lmtp_delivery() {
    let s = Server::start();
    s.deliver("alice", &simple("m1", "x"));
    s.deliver("alice", &simple("m2", "x"));
    let mut a = s.select("alice", "INBOX");
    let tag = idle(&mut a);
    // another session's STORE
    let mut b = s.select("alice", "INBOX");
    b.ok("STORE 2 +FLAGS (\\Flagged)");
    let got = wait_for(&mut a, "FETCH FLAGS", |t| t.starts_with("* 2 FETCH"));
    assert!(got.last().unwrap().text().contains("\\Flagged"), "{got:?}");
    // an LMTP delivery
    s.deliver("alice", &simple("m3", "x"));
    wait_for(&mut a, "EXISTS", |t| t == "* 3 EXISTS\r\n");
    // an APPEND by another session
    b.ok("APPEND INBOX {11}\r\nSubject: a\r\n");
    wait_for(&mut a, "EXISTS", |t| t == "* 4 EXISTS\r\n");
    // an EXPUNGE by another session
    b.ok("STORE 1 +FLAGS.SILENT (\\Deleted)");
    b.ok("EXPUNGE");
    wait_for(&mut a, "EXPUNGE", |t| t == "* 1 EXPUNGE\r\n");
    // DONE, in any case, ends it
    a.send("done\r\n");
    let r = a.until(&tag);
    assert_eq!(r.status(), "OK", "{}", r.all());
    let r = a.ok("FETCH 1:* UID");
    assert_eq!(uids(&r), [(1, 2), (2, 3), (3, 4)], "{}", r.all());
}

#[test]
fn expunge_from_another_session_waits_for_a_command_that_allows_it() {
    let s = Server::start();
    for i in 1..=3 {
        s.deliver("alice", &simple(&format!("m{i}"), "x"));
    }
    let mut a = s.select("alice", "INBOX");
    let mut b = s.select("alice", "INBOX");
    b.ok("STORE 2 +FLAGS.SILENT (\\Deleted)");
    let r = b.ok("EXPUNGE");
    assert_eq!(expunges(&r), [2]);
    // RFC 3501 §7.4.1: not during FETCH, STORE or SEARCH
    let r = a.cmd("FETCH 1:3 (FLAGS)");
    assert!(expunges(&r).is_empty(), "FETCH: {}", r.all());
    // the expunged message is still 2 for this session; it may be answered or omitted
    let seqs: Vec<u32> = r.fetches().iter().map(|(s, _)| *s).collect();
    assert!(seqs.contains(&1) && seqs.contains(&3), "{}", r.all());
    let r = a.ok("STORE 3 +FLAGS (\\Flagged)");
    assert!(expunges(&r).is_empty(), "STORE: {}", r.all());
    assert!(
        r.all().contains("* 3 FETCH"),
        "seq 3 still names uid 3: {}",
        r.all()
    );
    let r = a.ok("SEARCH ALL");
    assert!(expunges(&r).is_empty(), "SEARCH: {}", r.all());
    // NOOP may send it
    let r = a.ok("NOOP");
    assert_eq!(expunges(&r), [2], "NOOP: {}", r.all());
    let r = a.ok("FETCH 1:* UID");
    assert_eq!(uids(&r), [(1, 1), (2, 3)], "{}", r.all());
}

fn recent_count(r: &Reply) -> u32 {
    let l = r.lines("* ");
    let line = l
        .iter()
        .find(|l| l.ends_with(" RECENT"))
        .unwrap_or_else(|| panic!("{}", r.all()));
    line.split(' ').nth(1).unwrap().parse().unwrap()
}

#[test]
fn recent_goes_to_exactly_one_session() {
    let s = Server::start();
    s.deliver("alice", &simple("m1", "x"));
    let mut a = s.login("alice");
    let mut b = s.login("alice");
    // both SELECTs on the wire before either answer is read
    let (ta, tb) = (a.tag(), b.tag());
    a.send(format!("{ta} SELECT INBOX\r\n"));
    b.send(format!("{tb} SELECT INBOX\r\n"));
    let (ra, rb) = (a.until(&ta), b.until(&tb));
    assert_eq!(
        recent_count(&ra) + recent_count(&rb),
        1,
        "{}\n{}",
        ra.all(),
        rb.all()
    );
    // a new message while both are selected
    s.deliver("alice", &simple("m2", "x"));
    let (na, nb) = (a.ok("NOOP"), b.ok("NOOP"));
    assert!(na.all().contains("* 2 EXISTS") && nb.all().contains("* 2 EXISTS"));
    let fa = a.ok("FETCH 2 FLAGS").all().contains("\\Recent");
    let fb = b.ok("FETCH 2 FLAGS").all().contains("\\Recent");
    assert!(fa != fb, "exactly one session holds \\Recent: {fa} {fb}");
    // a later session gets none
    let mut c = s.login("alice");
    assert_eq!(recent_count(&c.ok("SELECT INBOX")), 0);
}

/// Issue 15 #22: under load every command listed the Maildir (each flag change leaves
/// `cur/` "unsettled" for a second), holding the mailbox against every other session's
/// writes. After FETCH, STORE, SEARCH, COPY, APPEND and EXPUNGE a session now reads only
/// the index when the Maildir was looked at in the last seconds (Dovecot's
/// `MAILBOX_SYNC_FLAG_FAST`): changes made through maildex are there already. Another
/// tool's file waits for the next NOOP (or IDLE, CHECK, SELECT, STATUS), which always looks.
#[test]
fn another_tools_file_waits_for_noop_after_fast_commands() {
    let srv = Server::start();
    srv.deliver("alice", &simple("first", "one"));
    // the SELECTs' syncs begin after this; a command that returns within the interval of
    // it ran inside the interval (on a machine too loaded for that, only NOOP is checked)
    let selected = std::time::Instant::now();
    let mut c = srv.select("alice", "INBOX");
    let mut other = srv.select("alice", "INBOX");
    std::fs::write(
        srv.maildir("alice").join("new/1900000000.M1P1.othertool"),
        crlf(&simple("dropped", "by procmail")),
    )
    .unwrap();
    // a change made through maildex is in the index: seen at once
    other.ok("STORE 1 +FLAGS (\\Flagged)");
    let mut announced = false;
    for cmd in [
        "FETCH 1 (FLAGS)",
        "STORE 1 +FLAGS (\\Seen)",
        "SEARCH FLAGGED",
    ] {
        let r = c.ok(cmd);
        let inside = selected.elapsed() < maildex_store::FAST_SYNC_INTERVAL;
        announced |= r.lines("* ").iter().any(|l| l.ends_with(" EXISTS"));
        assert!(!(inside && announced), "{cmd}: {}", r.all());
        assert!(
            r.all().contains("\\Flagged") || cmd.starts_with("SEARCH"),
            "{}",
            r.all()
        );
        if cmd.starts_with("SEARCH") {
            assert!(
                r.lines("* SEARCH").iter().any(|l| l == "* SEARCH 1"),
                "{}",
                r.all()
            );
        }
    }
    let r = c.ok("NOOP");
    assert!(
        announced || r.lines("* ").iter().any(|l| l == "* 2 EXISTS"),
        "{}",
        r.all()
    );
}
