//! CONDSTORE and QRESYNC (RFC 7162) over real sockets, as a desktop client uses them to
//! resynchronise a folder without fetching it whole: ENABLE, the implicit enabling
//! commands, HIGHESTMODSEQ, MODSEQ in FETCH and STORE answers, CHANGEDSINCE,
//! UNCHANGEDSINCE, SEARCH MODSEQ, SELECT (QRESYNC ...) with VANISHED (EARLIER), VANISHED
//! instead of EXPUNGE, CLOSED. Every response is parsed by imap-codec (tests/support/imap).

use crate::support::daemon::Server;
use crate::support::imap::{Client, Reply};

fn msg(i: u32) -> String {
    format!("From: a@example.net\nSubject: message {i}\n\nbody {i}\n")
}

/// The MODSEQ of every FETCH: (seq, uid text, modseq).
fn modseqs(r: &Reply) -> Vec<(u32, Option<u32>, u64)> {
    r.fetches()
        .iter()
        .filter_map(|(seq, resp)| {
            let t = resp.text();
            let m = t
                .split("MODSEQ (")
                .nth(1)?
                .split(')')
                .next()?
                .parse()
                .ok()?;
            let uid = t
                .split("UID ")
                .nth(1)
                .and_then(|u| u.split([' ', ')']).next()?.parse().ok());
            Some((*seq, uid, m))
        })
        .collect()
}

fn uidvalidity(r: &Reply) -> u32 {
    r.code_value("UIDVALIDITY").expect("UIDVALIDITY") as u32
}

fn setup(s: &Server, n: u32) {
    for i in 1..=n {
        s.deliver("alice", &msg(i));
    }
}

#[test]
fn condstore_answers_with_modseqs_once_enabled() {
    let s = Server::start();
    setup(&s, 3);
    let mut c = s.login("alice");
    let caps = c.ok("CAPABILITY").all();
    assert!(
        caps.contains(" CONDSTORE") && caps.contains(" QRESYNC"),
        "{caps}"
    );
    // before any enabling command: no HIGHESTMODSEQ, no MODSEQ in flag answers
    let r = c.ok("SELECT INBOX");
    assert_eq!(r.code_value("HIGHESTMODSEQ"), None, "{}", r.all());
    let r = c.ok("STORE 1 +FLAGS (\\Seen)");
    assert!(modseqs(&r).is_empty(), "{}", r.all());
    // RFC 5161: ENABLED names what was enabled
    let r = c.ok("ENABLE CONDSTORE X-UNKNOWN");
    assert_eq!(r.lines("* ENABLED"), ["* ENABLED CONDSTORE"]);
    let r = c.ok("SELECT INBOX");
    let highest = r
        .code_value("HIGHESTMODSEQ")
        .expect("HIGHESTMODSEQ after ENABLE");
    // a STORE answers with the new modseq, above the mailbox's highest before it
    let r = c.ok("STORE 2 +FLAGS (\\Flagged)");
    let m = modseqs(&r);
    assert_eq!(m.len(), 1, "{}", r.all());
    assert!(m[0].2 > highest, "{}", r.all());
    let flagged = m[0].2;
    // CHANGEDSINCE: only message 2, with MODSEQ although not asked for
    let r = c.ok(&format!("FETCH 1:* (FLAGS) (CHANGEDSINCE {highest})"));
    assert_eq!(
        modseqs(&r).iter().map(|x| (x.0, x.2)).collect::<Vec<_>>(),
        [(2, flagged)],
        "{}",
        r.all()
    );
    // UNCHANGEDSINCE below message 2's modseq: refused for 2 with MODIFIED, done for 3,
    // whose FETCH (MODSEQ) goes out although .SILENT
    let r = c.ok(&format!(
        "STORE 2:3 (UNCHANGEDSINCE {highest}) +FLAGS.SILENT (\\Answered)"
    ));
    assert!(r.done.text().contains("[MODIFIED 2]"), "{}", r.all());
    let m = modseqs(&r);
    assert_eq!(
        m.iter().map(|x| x.0).collect::<Vec<_>>(),
        [3],
        "{}",
        r.all()
    );
    let answered = m[0].2;
    // SEARCH MODSEQ: the highest modseq of what matched (RFC 7162 §3.1.5)
    let r = c.ok(&format!("SEARCH MODSEQ {}", highest + 1));
    assert_eq!(
        r.lines("* SEARCH"),
        [format!("* SEARCH 2 3 (MODSEQ {answered})")],
        "{}",
        r.all()
    );
    let r = c.ok(&format!("SEARCH RETURN (MIN) MODSEQ {}", highest + 1));
    assert!(
        r.all().contains(&format!("MIN 2 MODSEQ {flagged}")),
        "{}",
        r.all()
    );
    // another session's change reaches this one with its MODSEQ
    let mut other = s.select("alice", "INBOX");
    let r = other.ok("STORE 1 -FLAGS (\\Seen)");
    assert!(modseqs(&r).is_empty(), "not enabled there: {}", r.all());
    let r = c.ok("NOOP");
    let m = modseqs(&r);
    assert_eq!(m.len(), 1, "{}", r.all());
    assert_eq!((m[0].0, m[0].1), (1, Some(1)));
    assert!(m[0].2 > answered);
}

#[test]
fn commands_that_enable_condstore_by_themselves() {
    let s = Server::start();
    setup(&s, 1);
    for enabling in [
        "SELECT INBOX (CONDSTORE)",
        "STATUS INBOX (HIGHESTMODSEQ)",
        "LIST \"\" INBOX RETURN (STATUS (HIGHESTMODSEQ))",
        "FETCH 1 (MODSEQ)",
        "SEARCH MODSEQ 1",
        "STORE 1 (UNCHANGEDSINCE 9223372036854775807) +FLAGS (\\Seen)",
    ] {
        let mut c = s.login("alice");
        if !["SELECT", "STATUS", "LIST"]
            .iter()
            .any(|c| enabling.starts_with(c))
        {
            c.ok("SELECT INBOX");
        }
        c.ok(enabling);
        let r = c.ok("EXAMINE INBOX");
        assert!(
            r.code_value("HIGHESTMODSEQ").is_some(),
            "{enabling} did not enable CONDSTORE: {}",
            r.all()
        );
    }
}

/// A client that was away: it knows UIDVALIDITY, its last HIGHESTMODSEQ and UIDs 1:5;
/// meanwhile message 2 got a flag, message 3 was expunged and message 6 arrived.
fn away(s: &Server) -> (u32, u64) {
    setup(s, 5);
    let mut c = s.login("alice");
    let r = c.ok("SELECT INBOX (CONDSTORE)");
    let (v, h) = (
        uidvalidity(&r),
        r.code_value("HIGHESTMODSEQ").expect("HIGHESTMODSEQ"),
    );
    c.ok("LOGOUT");
    let mut other = s.select("alice", "INBOX");
    other.ok("STORE 2 +FLAGS (\\Flagged)");
    other.ok("STORE 3 +FLAGS (\\Deleted)");
    other.ok("EXPUNGE");
    s.deliver("alice", &msg(6));
    (v, h)
}

fn qresync_client(s: &Server) -> Client {
    let mut c = s.login("alice");
    // RFC 7162 §3.2.5: the parameter without ENABLE QRESYNC is a BAD command
    assert_eq!(c.cmd("SELECT INBOX (QRESYNC (1 1))").status(), "BAD");
    let r = c.ok("ENABLE QRESYNC");
    assert_eq!(r.lines("* ENABLED"), ["* ENABLED QRESYNC"]);
    c
}

#[test]
fn qresync_select_tells_what_changed_while_away() {
    let s = Server::start();
    let (v, h) = away(&s);
    let mut c = qresync_client(&s);
    let r = c.ok(&format!("SELECT INBOX (QRESYNC ({v} {h} 1:5))"));
    assert_eq!(
        r.lines("* VANISHED"),
        ["* VANISHED (EARLIER) 3"],
        "{}",
        r.all()
    );
    // the flag change of a known message, with UID and MODSEQ; the new message (UID 6,
    // not among the known 1:5) is told by EXISTS, as Dovecot does
    let m = modseqs(&r);
    assert_eq!(
        m.iter().map(|x| (x.0, x.1)).collect::<Vec<_>>(),
        [(2, Some(2))],
        "{}",
        r.all()
    );
    let highest = r.code_value("HIGHESTMODSEQ").expect("HIGHESTMODSEQ");
    assert!(m.iter().all(|x| x.2 > h && x.2 <= highest));
    // a UIDVALIDITY that is not the mailbox's: an ordinary SELECT (after CLOSED)
    let r = c.ok(&format!(
        "SELECT INBOX (QRESYNC ({} {h}))",
        v.wrapping_add(1)
    ));
    assert!(r.lines("* OK [CLOSED]").len() == 1, "{}", r.all());
    assert!(
        r.lines("* VANISHED").is_empty() && r.fetches().is_empty(),
        "{}",
        r.all()
    );
    // UID FETCH (CHANGEDSINCE m VANISHED), and its refusal without UID
    let r = c.ok(&format!(
        "UID FETCH 1:* (FLAGS) (CHANGEDSINCE {h} VANISHED)"
    ));
    assert_eq!(
        r.lines("* VANISHED"),
        ["* VANISHED (EARLIER) 3"],
        "{}",
        r.all()
    );
    assert_eq!(r.fetches().len(), 2, "{}", r.all());
    assert_eq!(
        c.cmd(&format!("FETCH 1:* (FLAGS) (CHANGEDSINCE {h} VANISHED)"))
            .status(),
        "BAD"
    );
}

#[test]
fn qresync_from_before_the_change_log_lists_what_is_missing() {
    let s = Server::start();
    let (v, _) = away(&s);
    let mut c = qresync_client(&s);
    // modseq 1 is older than anything the change log holds: the server names every
    // known UID that is gone
    let r = c.ok(&format!("SELECT INBOX (QRESYNC ({v} 1 1:5))"));
    assert_eq!(
        r.lines("* VANISHED"),
        ["* VANISHED (EARLIER) 3"],
        "{}",
        r.all()
    );
    // every known message still there changed since 1
    assert_eq!(
        r.fetches().len(),
        4,
        "every known message changed since 1: {}",
        r.all()
    );
}

#[test]
fn expunges_are_vanished_once_qresync_is_enabled() {
    let s = Server::start();
    setup(&s, 4);
    let mut c = qresync_client(&s);
    let r = c.ok("SELECT INBOX");
    let highest = r.code_value("HIGHESTMODSEQ").expect("HIGHESTMODSEQ");
    c.ok("STORE 2 +FLAGS.SILENT (\\Deleted)");
    let r = c.ok("EXPUNGE");
    assert_eq!(r.lines("* VANISHED"), ["* VANISHED 2"], "{}", r.all());
    assert!(r.lines("* 2 EXPUNGE").is_empty(), "{}", r.all());
    // another session's expunge: VANISHED and the new HIGHESTMODSEQ at the next NOOP
    let mut other = s.select("alice", "INBOX");
    other.ok("STORE 1 +FLAGS.SILENT (\\Deleted)");
    other.ok("EXPUNGE");
    let r = c.ok("NOOP");
    assert_eq!(r.lines("* VANISHED"), ["* VANISHED 1"], "{}", r.all());
    let after = r
        .code_value("HIGHESTMODSEQ")
        .expect("HIGHESTMODSEQ after VANISHED");
    assert!(after > highest);
    let r = c.ok("UID SEARCH ALL");
    assert_eq!(r.lines("* SEARCH"), ["* SEARCH 3 4"]);
}
