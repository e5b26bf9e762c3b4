//! CONDSTORE and QRESYNC as Dovecot 2.3 answers them: one script of commands runs against
//! a private Dovecot and against maildex, each on a Maildir of its own filled by the same
//! APPENDs, and the answers must agree once what legitimately differs is taken out
//! (modseq values, UIDVALIDITY, response texts, the order of FETCH items, `\Recent`).
//!
//! Needs Dovecot (`dovecot-core dovecot-imapd`, started through maildex-dovecot-harness),
//! so it is ignored by default: `cargo test -p maildex-tests --test it dovecot -- --ignored`.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use maildex_dovecot_harness::{Dovecot, Options, User};

use crate::support::daemon::Server;
use crate::support::imap::{Client, Reply};

/// A FETCH's items as a set of words, modseq values and `\Recent` left out.
fn fetch_items(line: &str) -> String {
    let inner = line
        .split_once("FETCH (")
        .map(|(_, r)| r.trim_end().trim_end_matches(')'))
        .unwrap_or("");
    let mut words: BTreeSet<String> = BTreeSet::new();
    let mut rest = inner;
    while !rest.is_empty() {
        let (name, after) = rest.split_once(' ').unwrap_or((rest, ""));
        let (value, tail) = if let Some(v) = after.strip_prefix('(') {
            let end = v.find(')').unwrap_or(v.len());
            (&v[..end], v.get(end + 1..).unwrap_or("").trim_start())
        } else {
            after.split_once(' ').unwrap_or((after, ""))
        };
        let value = match name {
            "MODSEQ" => "m".to_string(),
            "FLAGS" => {
                let f: BTreeSet<&str> = value
                    .split(' ')
                    .filter(|f| *f != "\\Recent" && !f.is_empty())
                    .collect();
                f.into_iter().collect::<Vec<_>>().join(" ")
            }
            _ => value.to_string(),
        };
        words.insert(format!("{name}={value}"));
        rest = tail;
    }
    words.into_iter().collect::<Vec<_>>().join(",")
}

/// What must agree in a reply: VANISHED, EXPUNGE, EXISTS, FETCH (normalised), ENABLED,
/// SEARCH (the MODSEQ value replaced), CLOSED and HIGHESTMODSEQ (present or not), and the
/// tagged status with its code's name and MODIFIED set.
fn essence(r: &Reply) -> Vec<String> {
    let mut out = Vec::new();
    for u in &r.untagged {
        let t = u.text().trim_end().to_string();
        let words: Vec<&str> = t.split(' ').collect();
        let told_as_is = t.starts_with("* VANISHED")
            || t.starts_with("* ENABLED")
            || words
                .get(2)
                .is_some_and(|w| *w == "EXPUNGE" || *w == "EXISTS");
        if told_as_is {
            out.push(t);
        } else if words.get(2) == Some(&"FETCH") {
            out.push(format!("* {} FETCH {}", words[1], fetch_items(&t)));
        } else if t.starts_with("* SEARCH") {
            let base = t.split(" (MODSEQ").next().unwrap_or(&t);
            let modseq = if t.contains("(MODSEQ ") {
                " (MODSEQ m)"
            } else {
                ""
            };
            out.push(format!("{base}{modseq}"));
        } else if t.starts_with("* OK [CLOSED]") {
            out.push("* OK [CLOSED]".into());
        } else if t.starts_with("* OK [HIGHESTMODSEQ") {
            out.push("* OK [HIGHESTMODSEQ m]".into());
        }
    }
    let done = r.done.text();
    let mut status = done.split(' ').nth(1).unwrap_or("").to_string();
    if let Some(m) = done.split("[MODIFIED ").nth(1) {
        status.push_str(&format!(
            " [MODIFIED {}]",
            m.split(']').next().unwrap_or("")
        ));
    }
    out.push(status);
    out
}

/// The script, run against the server at `addr` (user alice, password pw): every reply's
/// essence, labelled with its command.
fn script(addr: SocketAddr) -> Vec<(String, Vec<String>)> {
    let mut log = Vec::new();
    let mut run = |c: &mut Client, cmd: &str| -> Reply {
        let r = c.cmd(cmd);
        log.push((cmd.to_string(), essence(&r)));
        r
    };
    let mut c = Client::connect(addr);
    c.ok("LOGIN alice pw");
    for i in 1..=6 {
        let m = format!("Subject: m{i}\r\n\r\nbody {i}\r\n");
        c.ok(&format!("APPEND INBOX {{{}}}\r\n{m}", m.len()));
    }
    let r = run(&mut c, "SELECT INBOX (CONDSTORE)");
    let (v, h) = (r.expect_code("UIDVALIDITY"), r.expect_code("HIGHESTMODSEQ"));
    run(&mut c, "STORE 1 +FLAGS (\\Seen)");
    run(&mut c, "FETCH 1:* (FLAGS) (CHANGEDSINCE 1)");
    run(&mut c, &format!("FETCH 1:* (FLAGS) (CHANGEDSINCE {h})"));
    run(
        &mut c,
        &format!("STORE 2:3 (UNCHANGEDSINCE {h}) +FLAGS (\\Answered)"),
    );
    run(
        &mut c,
        &format!("STORE 1:3 (UNCHANGEDSINCE {h}) +FLAGS.SILENT (\\Flagged)"),
    );
    run(&mut c, &format!("SEARCH MODSEQ {}", h + 1));
    run(&mut c, "SEARCH MODSEQ 1 UNSEEN");
    run(&mut c, "ENABLE CONDSTORE");
    c.ok("LOGOUT");
    // another client changes the folder while the first is away
    let mut other = Client::connect(addr);
    other.ok("LOGIN alice pw");
    other.ok("SELECT INBOX");
    other.ok("STORE 4 +FLAGS (\\Flagged)");
    other.ok("STORE 5 +FLAGS (\\Deleted)");
    other.ok("EXPUNGE");
    let m = "Subject: m7\r\n\r\nbody 7\r\n";
    other.ok(&format!("APPEND INBOX {{{}}}\r\n{m}", m.len()));
    // the first comes back with QRESYNC
    let mut c = Client::connect(addr);
    c.ok("LOGIN alice pw");
    run(&mut c, &format!("SELECT INBOX (QRESYNC ({v} {h}))"));
    run(&mut c, "ENABLE QRESYNC");
    run(&mut c, &format!("SELECT INBOX (QRESYNC ({v} {h} 1:6))"));
    run(&mut c, &format!("SELECT INBOX (QRESYNC ({v} {h}))"));
    run(
        &mut c,
        &format!("UID FETCH 1:* (FLAGS) (CHANGEDSINCE {h} VANISHED)"),
    );
    run(
        &mut c,
        &format!("FETCH 1:* (FLAGS) (CHANGEDSINCE {h} VANISHED)"),
    );
    run(&mut c, "STORE 1 +FLAGS.SILENT (\\Deleted)");
    run(&mut c, "EXPUNGE");
    other.ok("STORE 1 +FLAGS.SILENT (\\Deleted)");
    other.ok("EXPUNGE");
    run(&mut c, "NOOP");
    run(&mut c, "EXAMINE INBOX");
    log
}

/// A private Dovecot under `dir` with user alice (password pw) and an empty Maildir.
pub(crate) fn start_dovecot(dir: &std::path::Path) -> Dovecot {
    let mail = dir.join("mail");
    std::fs::create_dir_all(&mail).unwrap();
    Dovecot::start(
        &dir.join("dc"),
        Options {
            mail_location: format!("maildir:{}/%n/Maildir", mail.display()),
            users: vec![User::new("alice", "pw")],
            mail_root: Some(mail.clone()),
            ..Options::default()
        },
    )
    .expect("Dovecot starts")
}

#[test]
#[ignore = "needs Dovecot (dovecot-core, dovecot-imapd)"]
fn condstore_and_qresync_answers_are_dovecots() {
    let dir = tempfile::tempdir().unwrap();
    let mut dc = start_dovecot(dir.path());
    let dovecot = script(dc.imap_addr());
    dc.stop();
    let s = Server::start();
    let maildex = script(s.imap);
    for ((cmd, d), (_, m)) in dovecot.iter().zip(&maildex) {
        assert_eq!(m, d, "{cmd}: maildex (left) against Dovecot (right)");
    }
    assert_eq!(dovecot.len(), maildex.len());
}
