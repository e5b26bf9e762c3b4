//! SORT, ESORT, SORT=DISPLAY and THREAD (RFC 5256, RFC 5267, RFC 5957) on the in-process
//! daemon: the orders and threads of a few hand-made messages, every answer parsed by
//! imap-codec (the client does), and the error cases. The comparison with Dovecot's
//! answers on a generated corpus is `dovecot_sort.rs`.

use crate::support::daemon::Server;
use crate::support::imap::Client;

/// (arrival, header lines) of the messages, UIDs 1-5 in this order.
const MESSAGES: &[(&str, &str)] = &[
    (
        "05-Jan-2020 10:00:00 +0000",
        "From: Zed <zed@example.org>\r\nTo: bob@example.org\r\nSubject: Re: [list] Plans\r\n\
         Date: Fri, 3 Jan 2020 10:00:00 +0000\r\nMessage-ID: <2@x>\r\nReferences: <1@x>\r\n",
    ),
    (
        "02-Jan-2020 10:00:00 +0000",
        "From: =?iso-8859-1?q?=C9mile?= <emile@example.org>\r\nTo: Al <al@example.org>\r\n\
         Cc: cc@example.org\r\nSubject: plans\r\nDate: Thu, 2 Jan 2020 10:00:00 +0000\r\n\
         Message-ID: <1@x>\r\n",
    ),
    (
        "01-Jan-2020 10:00:00 +0000",
        "From: adam@example.org\r\nTo: Zoe <zoe@example.org>\r\nSubject: =?utf-8?q?=C3=A9t=C3=A9?=\r\n\
         Message-ID: <3@x>\r\n",
    ),
    (
        "04-Jan-2020 10:00:00 +0000",
        "From: Bea <bea@example.org>\r\nSubject: Fwd: plans (fwd)\r\n\
         Date: broken\r\nMessage-ID: <4@x>\r\nIn-Reply-To: <2@x>\r\n",
    ),
    (
        "03-Jan-2020 10:00:00 +0000",
        "Subject: another\r\nDate: Fri, 3 Jan 2020 10:00:00 +0000\r\n",
    ),
];

fn filled() -> (Server, Client) {
    let s = Server::start();
    let mut c = Client::connect(s.imap);
    c.ok("LOGIN alice pw");
    for (i, (arrival, head)) in MESSAGES.iter().enumerate() {
        let m = format!("{head}\r\nbody {i} {}\r\n", "x".repeat(i * 10));
        c.ok(&format!(
            "APPEND INBOX \"{arrival}\" {{{}}}\r\n{m}",
            m.len()
        ));
    }
    c.ok("SELECT INBOX");
    (s, c)
}

/// The numbers of the one `* SORT` line of a reply.
fn sorted(c: &mut Client, cmd: &str) -> String {
    let r = c.ok(cmd);
    let lines = r.lines("* SORT");
    assert_eq!(lines.len(), 1, "{}", r.all());
    lines[0]
        .trim_end()
        .trim_start_matches("* SORT")
        .trim()
        .to_string()
}

fn threads(c: &mut Client, cmd: &str) -> String {
    let r = c.ok(cmd);
    let lines = r.lines("* THREAD");
    assert_eq!(lines.len(), 1, "{}", r.all());
    lines[0]
        .trim_end()
        .trim_start_matches("* THREAD")
        .trim()
        .to_string()
}

#[test]
fn sort_orders_by_every_key_with_ties_by_sequence() {
    let (_s, mut c) = filled();
    assert!(c
        .ok("CAPABILITY")
        .all()
        .contains("SORT SORT=DISPLAY ESORT THREAD=ORDEREDSUBJECT THREAD=REFERENCES THREAD=REFS"));
    assert_eq!(sorted(&mut c, "SORT (ARRIVAL) UTF-8 ALL"), "3 2 5 4 1");
    // DATE: 3 has no Date and 4 a broken one, so their arrival counts; 1 and 5 tie
    assert_eq!(sorted(&mut c, "SORT (DATE) UTF-8 ALL"), "3 2 1 5 4");
    assert_eq!(sorted(&mut c, "SORT (REVERSE DATE) UTF-8 ALL"), "4 1 5 2 3");
    assert_eq!(sorted(&mut c, "SORT (SIZE) UTF-8 ALL"), "5 3 4 1 2");
    // base subjects: PLANS (1, 2, 4), E\u{301}TE\u{301} (3), ANOTHER (5)
    assert_eq!(sorted(&mut c, "SORT (SUBJECT) UTF-8 ALL"), "5 3 1 2 4");
    assert_eq!(
        sorted(&mut c, "SORT (SUBJECT REVERSE ARRIVAL) UTF-8 ALL"),
        "5 3 1 4 2"
    );
    // FROM: "" (5), ADAM, BEA, EMILE, ZED
    assert_eq!(sorted(&mut c, "SORT (FROM) UTF-8 ALL"), "5 3 4 2 1");
    assert_eq!(sorted(&mut c, "SORT (TO) UTF-8 ALL"), "4 5 2 1 3");
    assert_eq!(sorted(&mut c, "SORT (CC) UTF-8 ALL"), "1 3 4 5 2");
    // DISPLAYFROM: "", ADAM@EXAMPLE.ORG, BEA, E\u{301}MILE, ZED
    assert_eq!(sorted(&mut c, "SORT (DISPLAYFROM) UTF-8 ALL"), "5 3 4 2 1");
    assert_eq!(sorted(&mut c, "SORT (DISPLAYTO) UTF-8 ALL"), "4 5 2 1 3");
    // with search criteria, as UIDs
    assert_eq!(
        sorted(&mut c, "UID SORT (DATE) US-ASCII NOT FROM zed"),
        "3 2 5 4"
    );
    assert_eq!(sorted(&mut c, "SORT (DATE) UTF-8 SUBJECT nothing"), "");
}

#[test]
fn esort_answers_with_esearch_in_sort_order() {
    let (_s, mut c) = filled();
    let r = c.ok("SORT RETURN (MIN MAX COUNT ALL) (DATE) UTF-8 ALL");
    let lines = r.lines("* ESEARCH");
    assert_eq!(lines.len(), 1, "{}", r.all());
    assert!(
        lines[0].contains(" MIN 3 MAX 4 ALL 3,2,1,5,4 COUNT 5"),
        "{}",
        lines[0]
    );
    let r = c.ok("UID SORT RETURN () (REVERSE ARRIVAL) UTF-8 1:4");
    assert!(
        r.lines("* ESEARCH")[0].contains(" UID ALL 1,4,2:3"),
        "{}",
        r.all()
    );
    let r = c.ok("SORT RETURN (COUNT) (DATE) UTF-8 SUBJECT nothing");
    assert!(
        r.lines("* ESEARCH")[0].trim_end().ends_with(" COUNT 0"),
        "{}",
        r.all()
    );
}

#[test]
fn thread_by_subject_and_by_references() {
    let (_s, mut c) = filled();
    assert_eq!(
        threads(&mut c, "THREAD ORDEREDSUBJECT UTF-8 ALL"),
        "(3)(2 (1)(4))(5)"
    );
    // 2 <- 1 <- 4 by References and In-Reply-To
    assert_eq!(
        threads(&mut c, "THREAD REFERENCES UTF-8 ALL"),
        "(3)(2 1 4)(5)"
    );
    // without 1, 4's parent is a dummy (a root with one child: 4 itself), which then
    // joins 2 by base subject as a reply
    assert_eq!(
        threads(&mut c, "UID THREAD REFERENCES UTF-8 NOT UID 1"),
        "(3)(2 4)(5)"
    );
    assert_eq!(
        threads(&mut c, "THREAD REFERENCES UTF-8 SUBJECT nothing"),
        ""
    );
}

#[test]
fn sort_and_thread_errors() {
    let (_s, mut c) = filled();
    let r = c.cmd("SORT (FOO) UTF-8 ALL");
    assert!(r.status().starts_with("BAD"), "{}", r.all());
    let r = c.cmd("SORT (DATE) KOI8-R ALL");
    assert!(r.done.text().contains("NO [BADCHARSET"), "{}", r.all());
    let r = c.cmd("THREAD REFERENCES KOI8-R ALL");
    assert!(r.done.text().contains("NO [BADCHARSET"), "{}", r.all());
    let r = c.cmd("THREAD FOO UTF-8 ALL");
    assert!(r.status().starts_with("BAD"), "{}", r.all());
    c.ok("UNSELECT");
    let r = c.cmd("SORT (DATE) UTF-8 ALL");
    assert!(r.status().starts_with("BAD"), "{}", r.all());
}

/// The numbers of the `* SORT` answer, parsed.
fn numbers(c: &mut Client, command: &str) -> Vec<u32> {
    sorted(c, command)
        .split_whitespace()
        .map(|n| n.parse::<u32>().unwrap())
        .collect()
}

/// A folder large enough for the order the store keeps between queries
/// (`UserStore::sort_order`): the kept order answers as sorting the matches does, stays
/// valid across flag changes, is made again when a message comes or goes, and a match it
/// does not hold (a message this session still shows, expunged by another) is sorted
/// directly.
#[test]
fn kept_orders_of_a_large_folder_answer_as_sorting_does() {
    const N: u32 = 1100;
    let s = Server::start();
    // subject and date keys in scrambled orders, each unique
    let subject = |i: u32| (i * 7919) % N;
    let minute = |i: u32| (i * 31) % N;
    for i in 0..N {
        let m = minute(i);
        s.deliver(
            "alice",
            &format!(
                "From: a@example.org\nSubject: s{:04}\nDate: Mon, 5 Jan 2026 {:02}:{:02}:00 +0000\n\nbody\n",
                subject(i),
                m / 60,
                m % 60
            ),
        );
    }
    let by = |key: &dyn Fn(u32) -> u32, seqs: &[u32]| {
        let mut v = seqs.to_vec();
        v.sort_by_key(|&seq| key(seq - 1));
        v
    };
    let all: Vec<u32> = (1..=N).collect();
    let mut c = s.select("alice", "INBOX");
    for _ in 0..2 {
        // the second time from the kept order
        assert_eq!(
            numbers(&mut c, "SORT (SUBJECT) UTF-8 ALL"),
            by(&subject, &all)
        );
        let mut rev = by(&minute, &all);
        rev.reverse();
        assert_eq!(numbers(&mut c, "SORT (REVERSE DATE) UTF-8 ALL"), rev);
    }
    // THREAD of the whole folder from the kept threads answers as threading the matches
    // directly does (UNDELETED matches every message here, and is not a lone ALL)
    for algorithm in ["REFERENCES", "ORDEREDSUBJECT"] {
        for uid in ["", "UID "] {
            let kept = c.ok(&format!("{uid}THREAD {algorithm} UTF-8 ALL")).all();
            let again = c.ok(&format!("{uid}THREAD {algorithm} UTF-8 ALL")).all();
            let direct = c
                .ok(&format!("{uid}THREAD {algorithm} UTF-8 UNDELETED"))
                .all();
            let line = |r: &str| {
                r.lines()
                    .find(|l| l.starts_with("* THREAD"))
                    .map(String::from)
            };
            assert!(line(&kept).is_some_and(|l| l.len() > 1000));
            assert_eq!(line(&kept), line(&direct), "{uid}THREAD {algorithm}");
            assert_eq!(line(&kept), line(&again));
        }
    }
    // criteria keep the matches of the kept order; flag changes keep it valid
    c.ok("STORE 1:500 +FLAGS.SILENT (\\Seen)");
    let unseen: Vec<u32> = (501..=N).collect();
    assert_eq!(
        numbers(&mut c, "SORT (SUBJECT) UTF-8 UNSEEN"),
        by(&subject, &unseen)
    );
    // another session expunges 10 messages this one still shows (UID SORT may not tell
    // the expunges yet, RFC 3501 §7.4.1): the matches include them, sorted directly
    let mut other = s.select("alice", "INBOX");
    other.ok("STORE 1:10 +FLAGS.SILENT (\\Deleted)");
    other.ok("EXPUNGE");
    let uids = numbers(&mut c, "UID SORT (SUBJECT) UTF-8 ALL");
    assert_eq!(uids.len(), N as usize);
    // the gone ones are answered (their keys are gone with them: they sort as empty),
    // the others in order; UIDs are the sequence numbers before the expunge
    let kept: Vec<u32> = uids.iter().copied().filter(|&u| u > 10).collect();
    let rest: Vec<u32> = (11..=N).collect();
    assert_eq!(kept, by(&subject, &rest));
    // after the expunges are told, and with a new message, the order is made again
    c.ok("NOOP");
    s.deliver(
        "alice",
        "From: a@example.org\nSubject: s0000a\nDate: Mon, 5 Jan 2026 00:00:30 +0000\n\nnew\n",
    );
    c.ok("NOOP");
    let got = numbers(&mut c, "SORT (SUBJECT) UTF-8 ALL");
    assert_eq!(got.len(), N as usize - 10 + 1);
    // sequence numbers after the 10 expunges: message i (0-based) is now i - 9; the new
    // one is last and sorts right after "s0000"
    let mut want: Vec<(String, u32)> = (10..N)
        .map(|i| (format!("s{:04}", subject(i)), i - 9))
        .collect();
    want.push(("s0000a".into(), N - 10 + 1));
    want.sort();
    assert_eq!(got, want.iter().map(|w| w.1).collect::<Vec<_>>());
}
