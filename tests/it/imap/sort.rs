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
        .contains("SORT SORT=DISPLAY ESORT THREAD=ORDEREDSUBJECT THREAD=REFERENCES"));
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
