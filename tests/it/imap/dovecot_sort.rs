//! SORT, ESORT and THREAD as Dovecot 2.3 answers them: the same generated messages are
//! APPENDed (with the same internal dates) to a private Dovecot and to maildex, then every
//! sort key alone, reversed and combined, the three threading algorithms and a few search
//! criteria run on both, and the answers must be identical, tie order included.
//!
//! The corpus has what sorting and threading get wrong: RFC 2047 subjects in UTF-8 and
//! ISO-8859-1, `Re:`/`Fwd:`/`[list]` prefixes and `(fwd)` trailers, `[fwd: ...]`, missing
//! and broken dates, equal dates, missing and broken References, In-Reply-To alone,
//! duplicate Message-IDs, Message-ID cycles, no From, display names with and without
//! encoding.
//!
//! Needs Dovecot (`dovecot-core dovecot-imapd`), so it is ignored by default:
//! `cargo test -p maildex-tests --test it dovecot_sort -- --ignored`.

use std::net::SocketAddr;

use maildex_dovecot_harness::{Dovecot, Options, User};

use crate::support::daemon::Server;
use crate::support::imap::Client;

/// A small deterministic generator (xorshift), so both servers get the same corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

const WORDS: &[&str] = &[
    "plans",
    "Plans",
    "budget 2021",
    "meeting notes",
    "lunch?",
    "Zebra crossing",
    "apple pie",
    "=?UTF-8?B?w6l0w6kgw6AgUGFyaXM=?=",
    "=?ISO-8859-1?Q?caf=E9_cr=E8me?=",
    "=?iso-8859-1?q?=C9cole?=",
    "=?utf-8?q?=C3=BCber_alles?=",
    "Ecole",
    "  spaced\tout  ",
    "",
];

const PREFIXES: &[&str] = &[
    "",
    "",
    "",
    "Re: ",
    "RE: re: ",
    "Fwd: ",
    "Fw: ",
    "[list] ",
    "Re: [list] ",
    "[list] Re: ",
    "Re[2]: ",
    "Re [x]: ",
];

const TRAILERS: &[&str] = &["", "", "", " (fwd)", " (FWD) (fwd) ", " "];

const FROMS: &[&str] = &[
    "Alice Smith <alice@example.org>",
    "\"Smith, Bob\" <bob@example.org>",
    "carol@example.org",
    "=?ISO-8859-1?Q?=C9mile_Zola?= <emile@example.fr>",
    "=?UTF-8?B?w5ZsYQ==?= <ola@example.se>",
    "<dave@example.net>",
    "Zed <ZED@example.com>",
    "alice@example.org (Alice in a comment)",
    "",
];

const DATES: &[&str] = &[
    "Mon, 6 Jan 2020 10:00:00 +0000",
    "Mon, 6 Jan 2020 10:00:00 +0000",
    "Mon, 6 Jan 2020 11:00:00 +0100",
    "6 Jan 20 09:00 -0500",
    "Tue, 07 Jan 2020 23:59:59 EST",
    "Wed, 8 Jan 2020 12:00 GMT",
    "Thu, 9 Jan 2020 08.30.00 +0200",
    "Fri, 31 Jan 2020 00:00:00 Z",
    "yesterday",
    "Sat, 32 Jan 2020 10:00:00 +0000",
    "Sun, 5 Jan 1970 00:00:00 +0000",
    "",
];

const ARRIVALS: &[&str] = &[
    "05-Jan-2020 10:00:00 +0000",
    "05-Jan-2020 10:00:00 +0000",
    "06-Jan-2020 09:30:00 +0000",
    "07-Jan-2020 12:00:00 +0000",
    "10-Jan-2020 00:00:00 +0000",
    "01-Feb-2020 00:00:00 +0000",
];

/// The corpus: `n` messages as (internal date, bytes), CRLF line ends.
fn corpus(n: usize, seed: u64) -> Vec<(String, String)> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for i in 1..=n {
        let mut h = String::new();
        let from = rng.pick(FROMS);
        if !from.is_empty() {
            h.push_str(&format!("From: {from}\r\n"));
        }
        if rng.below(4) != 0 {
            h.push_str(&format!(
                "To: {}\r\n",
                rng.pick(FROMS).replace("alice", "al")
            ));
        }
        if rng.below(3) == 0 {
            h.push_str(&format!("Cc: {}\r\n", rng.pick(FROMS)));
        }
        match rng.below(12) {
            0 => {}
            1 => h.push_str(&format!("Subject: [fwd: {}]\r\n", rng.pick(WORDS))),
            _ => h.push_str(&format!(
                "Subject: {}{}{}\r\n",
                rng.pick(PREFIXES),
                rng.pick(WORDS),
                rng.pick(TRAILERS)
            )),
        }
        let date = rng.pick(DATES);
        if !date.is_empty() {
            h.push_str(&format!("Date: {date}\r\n"));
        }
        // Message-IDs: mostly unique, some duplicated, missing or broken
        match rng.below(10) {
            0 => {}
            1 => h.push_str("Message-ID: no-brackets@example.org\r\n"),
            2 => h.push_str(&format!("Message-ID: <{}@gen>\r\n", rng.below(i))),
            _ => h.push_str(&format!("Message-ID: <{i}@gen>\r\n")),
        }
        // References to earlier, later (cycles) and missing messages; In-Reply-To alone
        let r = |x: usize| format!("<{x}@gen>");
        match rng.below(8) {
            0 | 1 => {}
            2 => h.push_str(&format!("In-Reply-To: {}\r\n", r(rng.below(i) + 1))),
            3 => h.push_str(&format!(
                "References: {} {}\r\n",
                r(rng.below(i) + 1),
                r(rng.below(i) + 1)
            )),
            4 => h.push_str(&format!("References: {}\r\n", r(i + 1 + rng.below(3)))),
            5 => h.push_str(&format!(
                "References: <missing{}@nowhere> {}\r\n",
                rng.below(5),
                r(rng.below(i) + 1)
            )),
            6 => h.push_str("References: broken <also broken\r\n"),
            _ => h.push_str(&format!(
                "In-Reply-To: {}\r\nReferences: {}\r\n",
                r(rng.below(i) + 1),
                r(rng.below(i) + 1)
            )),
        }
        let body = format!("Body of message {i}.\r\n{}", "x".repeat(rng.below(200)));
        out.push((rng.pick(ARRIVALS).to_string(), format!("{h}\r\n{body}\r\n")));
    }
    out
}

/// The commands compared.
fn commands() -> Vec<String> {
    let keys = [
        "ARRIVAL",
        "CC",
        "DATE",
        "FROM",
        "SIZE",
        "SUBJECT",
        "TO",
        "DISPLAYFROM",
        "DISPLAYTO",
    ];
    let mut out = Vec::new();
    for k in keys {
        out.push(format!("SORT ({k}) UTF-8 ALL"));
        out.push(format!("SORT (REVERSE {k}) UTF-8 ALL"));
        out.push(format!("UID SORT ({k}) UTF-8 ALL"));
    }
    for combo in [
        "SUBJECT DATE",
        "SUBJECT REVERSE DATE",
        "FROM SUBJECT",
        "REVERSE FROM REVERSE SIZE",
        "TO CC ARRIVAL",
        "DISPLAYFROM REVERSE ARRIVAL",
        "REVERSE DATE REVERSE SUBJECT",
    ] {
        out.push(format!("SORT ({combo}) UTF-8 ALL"));
    }
    for crit in [
        "NOT 1:10",
        "SUBJECT plans",
        "OR FROM alice LARGER 400",
        "UNSEEN",
        "HEADER References gen",
    ] {
        out.push(format!("SORT (DATE) UTF-8 {crit}"));
        out.push(format!("UID SORT (REVERSE SUBJECT) US-ASCII {crit}"));
        out.push(format!("THREAD REFERENCES UTF-8 {crit}"));
        out.push(format!("THREAD ORDEREDSUBJECT UTF-8 {crit}"));
        out.push(format!("THREAD REFS UTF-8 {crit}"));
    }
    out.push("SORT RETURN (MIN MAX COUNT ALL) (DATE) UTF-8 ALL".into());
    out.push("UID SORT RETURN (ALL) (REVERSE SUBJECT) UTF-8 ALL".into());
    out.push("SORT RETURN (COUNT) (SIZE) UTF-8 SUBJECT nothing-at-all".into());
    for alg in ["REFERENCES", "ORDEREDSUBJECT", "REFS"] {
        out.push(format!("THREAD {alg} UTF-8 ALL"));
        out.push(format!("UID THREAD {alg} UTF-8 ALL"));
    }
    out
}

/// Fills INBOX at `addr` (user alice, password pw) and runs the commands: each one's
/// SORT/THREAD/ESEARCH lines (the ESEARCH tag left out) and the tagged status.
fn run<S: AsRef<str>>(
    addr: SocketAddr,
    msgs: &[(String, String)],
    cmds: &[S],
) -> Vec<(String, String)> {
    let mut c = Client::connect(addr);
    c.ok("LOGIN alice pw");
    for (date, m) in msgs {
        c.ok(&format!("APPEND INBOX \"{date}\" {{{}}}\r\n{m}", m.len()));
    }
    c.ok("SELECT INBOX");
    c.ok("STORE 1:20 +FLAGS.SILENT (\\Seen)");
    let mut out = Vec::new();
    for cmd in cmds {
        let cmd = cmd.as_ref();
        let r = c.cmd(cmd);
        let mut lines: Vec<String> = r
            .untagged
            .iter()
            .map(|u| u.text().trim_end().to_string())
            .filter(|t| {
                t.starts_with("* SORT") || t.starts_with("* THREAD") || t.starts_with("* ESEARCH")
            })
            .map(|t| match t.split_once(") ") {
                Some((_, rest)) if t.starts_with("* ESEARCH (TAG") => format!("* ESEARCH {rest}"),
                _ => t,
            })
            .collect();
        lines.push(r.status());
        out.push((cmd.to_string(), lines.join("\n")));
    }
    c.ok("LOGOUT");
    out
}

#[test]
#[ignore = "needs Dovecot (dovecot-core, dovecot-imapd)"]
fn sort_and_thread_answers_are_dovecots() {
    for seed in [0x9E37_79B9_7F4A_7C15, 0xDEAD_BEEF_CAFE_F00D] {
        same_answers(&corpus(300, seed));
    }
}

fn same_answers(msgs: &[(String, String)]) {
    same_answers_for(msgs, &commands());
}

/// Runs `cmds` on `msgs` in a private Dovecot and in maildex; every answer must be equal.
fn same_answers_for<S: AsRef<str>>(msgs: &[(String, String)], cmds: &[S]) {
    let dir = tempfile::tempdir().unwrap();
    let mail = dir.path().join("mail");
    std::fs::create_dir_all(&mail).unwrap();
    let mut dc = Dovecot::start(
        &dir.path().join("dc"),
        Options {
            mail_location: format!("maildir:{}/%n/Maildir", mail.display()),
            users: vec![User::new("alice", "pw")],
            mail_root: Some(mail.clone()),
            ..Options::default()
        },
    )
    .expect("Dovecot starts");
    let dovecot = run(dc.imap_addr(), msgs, cmds);
    dc.stop();
    let s = Server::start();
    let maildex = run(s.imap, msgs, cmds);
    let mut differ = Vec::new();
    for ((cmd, d), (_, m)) in dovecot.iter().zip(&maildex) {
        if m != d {
            differ.push(format!("{cmd}\n  maildex: {m}\n  dovecot: {d}"));
        }
    }
    assert_eq!(dovecot.len(), maildex.len());
    assert!(
        differ.is_empty(),
        "{} of {} answers differ:\n{}",
        differ.len(),
        dovecot.len(),
        differ.join("\n")
    );
}

/// Subjects in many scripts, each compared by i;unicode-casemap (RFC 5051): Dovecot maps a
/// character to its titlecase, then replaces it by its decomposition. Pairs that collate
/// equal tie, and ties go by sequence number, so the order shows each mapping.
const SCRIPTS: &[&str] = &[
    "Apple",
    "\u{FF21}pple",
    "apple",
    "\u{00C9}t\u{00E9}",
    "Ete",
    "E\u{0301}te",
    "etE",
    "\u{FB01}sh",
    "fish",
    "FISH",
    "\u{2126}mega",
    "\u{03A9}mega",
    "\u{03C9}mega",
    "\u{03AC}\u{03BB}\u{03C6}\u{03B1}",
    "\u{0391}\u{03BB}\u{03C6}\u{03B1}",
    "\u{0386}lpha",
    "\u{0451}\u{043B}\u{043A}\u{0430}",
    "\u{0415}\u{043B}\u{043A}\u{0430}",
    "\u{0415}\u{0308}\u{043B}\u{043A}\u{0430}",
    "\u{1EC6}m",
    "\u{00CA}m",
    "E\u{0323}\u{0302}m",
    "Stra\u{00DF}e",
    "STRASSE",
    "\u{D55C}\u{AD6D}",
    "\u{1112}\u{1161}\u{11AB}\u{1100}",
    "\u{216B} roman",
    "XII roman",
    "\u{217B} roman",
    "\u{00B2} squared",
    "2 squared",
    "\u{24D0} circled",
    "\u{24B6} circled",
    "A circled",
    "\u{0132}sselmeer",
    "IJsselmeer",
    "\u{0131}stanbul",
    "Istanbul",
    "\u{0130}stanbul",
    "I\u{0307}stanbul",
    "\u{01C6}ungla",
    "\u{01C4}UNGLA",
    "D\u{017D}ungla",
    "DZ\u{030C}ungla",
    "\u{FEFB} lam",
    "\u{0644}\u{0627} lam",
    "\u{FF76}ana",
    "\u{30AB}ana",
    "x\u{00A0}nbsp",
    "x nbsp",
    "wait\u{2026}",
    "wait...",
    "\u{00C5}ngstr\u{00F6}m",
    "\u{212B}ngstr\u{00F6}m",
    "A\u{030A}ngstrom",
    "\u{00F1}and\u{00FA}",
    "N\u{0303}andu",
    "\u{0149}ame",
    "\u{02BC}name",
    "\u{1F600} smile",
    "\u{1D400}bold",
    "Abold",
    "\u{00BD} half",
    "1\u{2044}2 half",
    "\u{00AA} ord",
    "a ord",
    "\u{00B5} micro",
    "\u{039C} micro",
    "\u{03BC} micro",
    "\u{0587} arm",
    "\u{0535}\u{0582} arm",
    "\u{1E9E} sharp",
    "\u{00DF} sharp",
    "\u{0345} ypo",
    "\u{0399} ypo",
    "\u{01C5} title",
];

#[test]
#[ignore = "needs Dovecot (dovecot-core, dovecot-imapd)"]
fn collation_of_many_scripts_is_dovecots() {
    use base64::Engine;
    let msgs: Vec<(String, String)> = SCRIPTS
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let b64 = base64::engine::general_purpose::STANDARD.encode(s);
            let m = format!(
                "From: =?UTF-8?B?{b64}?= <x{i}@example.org>\r\nSubject: =?UTF-8?B?{b64}?=\r\n\
                 Message-ID: <{i}@scripts>\r\n\r\nbody {i}\r\n"
            );
            ("05-Jan-2020 10:00:00 +0000".to_string(), m)
        })
        .collect();
    same_answers_for(
        &msgs,
        &[
            "SORT (SUBJECT) UTF-8 ALL",
            "SORT (REVERSE SUBJECT) UTF-8 ALL",
            "SORT (DISPLAYFROM) UTF-8 ALL",
            "THREAD ORDEREDSUBJECT UTF-8 ALL",
        ],
    );
}
