//! Scenario tests: whole sessions fed at once, checked event by event.

mod common;

use common::{data, limits, replies, run, run_with, Seen, GREETING, LHLO_REPLY};
use maildex_lmtp_proto::{
    Event, Limits, MailFrom, ProtoError, RcptOutcome, RcptResult, Session, Status,
};

fn r(s: &str) -> Seen {
    Seen::Reply(s.to_string())
}

#[test]
fn pipelined_transaction_with_mixed_recipients() {
    // postfix sends MAIL, RCPT..., DATA in one write (RFC 2920).
    let seen = run(&[
        b"LHLO postfix\r\n\
        MAIL FROM:<s@a.example> SIZE=20 BODY=8BITMIME\r\n\
        RCPT TO:<one@mx.test>\r\nRCPT TO:<unknown@mx.test>\r\nRCPT TO:<full@mx.test>\r\n\
        DATA\r\n",
        b"Hello\r\n.\r\nQUIT\r\n",
    ]);
    let want = vec![
        r(GREETING),
        r(LHLO_REPLY),
        Seen::Mail(MailFrom {
            reverse_path: Some(maildex_lmtp_proto::Address {
                local_part: "s".into(),
                domain: Some("a.example".into()),
            }),
            size: Some(20),
            body_8bit: true,
        }),
        r("250 2.1.0 Ok\r\n"),
        Seen::Rcpt("one@mx.test".into()),
        r("250 2.1.5 Ok\r\n"),
        Seen::Rcpt("unknown@mx.test".into()),
        r("550 5.1.1 <unknown@mx.test> User unknown\r\n"),
        Seen::Rcpt("full@mx.test".into()),
        r("250 2.1.5 Ok\r\n"),
        r("354 Start mail input; end with <CRLF>.<CRLF>\r\n"),
        Seen::DataStart,
        Seen::Data(b"Hello\n".to_vec()),
        Seen::DataEnd(maildex_lmtp_proto::DataSummary {
            stored_size: 6,
            crlf_size: 7,
            long_lines: 0,
            chunked: false,
        }),
        // RFC 2033 §4.2: one reply per accepted recipient, RCPT order.
        r("250 2.0.0 <one@mx.test> Saved\r\n"),
        r("452 4.3.1 <full@mx.test> Insufficient system storage\r\n"),
        r("221 2.0.0 mx.test Bye\r\n"),
        Seen::Quit,
    ];
    assert_eq!(seen, want);
}

#[test]
fn second_transaction_after_data() {
    let seen = run(
        &[b"LHLO x\r\nMAIL FROM:<>\r\nRCPT TO:<a@x>\r\nDATA\r\n.\r\n\
        MAIL FROM:<>\r\nRCPT TO:<b@x>\r\nDATA\r\nb\r\n.\r\n"],
    );
    let rep = replies(&seen);
    assert!(
        rep.ends_with(
            "250 2.0.0 <a@x> Saved\r\n250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n\
        354 Start mail input; end with <CRLF>.<CRLF>\r\n250 2.0.0 <b@x> Saved\r\n"
        ),
        "{rep}"
    );
    // The empty message gives no Data event at all.
    let ends = seen
        .iter()
        .filter(|s| matches!(s, Seen::DataEnd(_)))
        .count();
    assert_eq!(ends, 2);
    assert_eq!(data(&seen), b"b\n");
}

#[test]
fn order_errors() {
    let seen = run(&[
        b"MAIL FROM:<>\r\nRCPT TO:<a@x>\r\nDATA\r\nVRFY a\r\nNOOP\r\nRSET\r\n\
        LHLO x\r\nRCPT TO:<a@x>\r\nDATA\r\nMAIL FROM:<>\r\nMAIL FROM:<>\r\nDATA\r\n\
        RCPT TO:<unknown@x>\r\nDATA\r\n",
    ]);
    let rep = replies(&seen);
    let want = format!(
        "{GREETING}503 Send LHLO first\r\n503 Send LHLO first\r\n503 Send LHLO first\r\n\
         503 Send LHLO first\r\n250 Ok\r\n250 Ok\r\n{LHLO_REPLY}\
         503 5.5.1 Need MAIL command\r\n503 5.5.1 Need MAIL command\r\n250 2.1.0 Ok\r\n\
         503 5.5.1 Nested MAIL command\r\n554 5.5.1 No valid recipients\r\n\
         550 5.1.1 <unknown@x> User unknown\r\n554 5.5.1 No valid recipients\r\n"
    );
    assert_eq!(rep, want);
}

#[test]
fn helo_ehlo_unknown_and_syntax() {
    let seen = run(&[
        b"HELO x\r\nEHLO x\r\nLHLO x\r\nEHLO x\r\nFOO\r\nMAIL FROM:a@b\r\n\
        MAIL FROM:<a@b> AUTH=<>\r\nMAIL FROM:<a@b> SIZE=1001\r\nRCPT TO:<a@b>\r\n\
        MAIL FROM:<a@b>\r\nRCPT TO:<a@b> ORCPT=rfc822;a@b\r\nRCPT TO:<a b@c>\r\nVRFY x\r\n\
        HELP\r\nDATA now\r\n",
    ]);
    let rep = replies(&seen);
    let want = format!(
        "{GREETING}500 This is LMTP, use LHLO\r\n500 This is LMTP, use LHLO\r\n{LHLO_REPLY}\
         500 5.5.1 This is LMTP, use LHLO\r\n500 5.5.2 Unknown command\r\n\
         501 5.5.4 Address must be in angle brackets\r\n555 5.5.4 Unsupported parameter AUTH\r\n\
         552 5.3.4 Message size exceeds fixed maximum message size\r\n\
         503 5.5.1 Need MAIL command\r\n250 2.1.0 Ok\r\n555 5.5.4 Unsupported parameter ORCPT\r\n\
         501 5.5.4 Invalid local part\r\n\
         252 2.5.0 Cannot VRFY user, but will accept message and attempt delivery\r\n\
         214 2.0.0 Commands: LHLO MAIL RCPT DATA BDAT RSET NOOP QUIT VRFY HELP\r\n\
         501 5.5.4 No parameters allowed\r\n"
    );
    assert_eq!(rep, want);
}

#[test]
fn too_many_recipients() {
    let seen = run(&[
        b"LHLO x\r\nMAIL FROM:<>\r\nRCPT TO:<unknown1@x>\r\nRCPT TO:<a@x>\r\n\
        RCPT TO:<b@x>\r\nRCPT TO:<c@x>\r\nRCPT TO:<d@x>\r\n",
    ]);
    let rep = replies(&seen);
    // max_recipients = 3 counts accepted ones only (RFC 5321 §4.5.3.1.10).
    assert!(
        rep.ends_with(
            "250 2.1.5 Ok\r\n250 2.1.5 Ok\r\n250 2.1.5 Ok\r\n452 4.5.3 Too many recipients\r\n"
        ),
        "{rep}"
    );
    assert!(!seen.contains(&Seen::Rcpt("d@x".into())));
}

#[test]
fn rset_mid_transaction_and_between_chunks() {
    let seen = run(&[
        b"LHLO x\r\nMAIL FROM:<>\r\nRCPT TO:<a@x>\r\nRSET\r\nDATA\r\n\
        MAIL FROM:<>\r\nRCPT TO:<a@x>\r\nBDAT 3\r\nabcRSET\r\nBDAT 1 LAST\r\nx",
    ]);
    let rep = replies(&seen);
    assert!(rep.ends_with("250 2.0.0 Ok\r\n503 5.5.1 Need MAIL command\r\n250 2.1.0 Ok\r\n\
        250 2.1.5 Ok\r\n250 2.0.0 3 octets received\r\n250 2.0.0 Ok\r\n503 5.5.1 Need MAIL command\r\n"),
        "{rep}");
    assert_eq!(seen.iter().filter(|s| **s == Seen::Reset).count(), 2);
    // The refused BDAT consumed its byte: nothing left to parse as a command.
    assert!(!rep.contains("500"));
}

#[test]
fn quit_mid_transaction_resets_and_stops() {
    let seen = run(&[b"LHLO x\r\nMAIL FROM:<>\r\nQUIT\r\nNOOP\r\n", b"NOOP\r\n"]);
    let n = seen.len();
    assert_eq!(
        seen[n - 3..],
        [Seen::Reset, r("221 2.0.0 mx.test Bye\r\n"), Seen::Quit]
    );
}

#[test]
fn quit_before_lhlo_is_allowed() {
    let seen = run(&[b"QUIT\r\n"]);
    assert_eq!(
        seen,
        vec![r(GREETING), r("221 mx.test Bye\r\n"), Seen::Quit]
    );
}

#[test]
fn bdat_with_lone_dot_and_crlf_across_chunks() {
    // RFC 3030 §2: BDAT data is not dot-stuffed; "." lines are data.
    let seen = run(&[
        b"LHLO x\r\nMAIL FROM:<>\r\nRCPT TO:<a@x>\r\nRCPT TO:<b@x>\r\n\
        BDAT 9\r\nA\r\n.\r\n..\rBDAT 5 LAST\r\n\nB\r\n\r",
    ]);
    assert_eq!(data(&seen), b"A\n.\n..\nB\n\r");
    let rep = replies(&seen);
    assert!(
        rep.ends_with(
            "250 2.0.0 9 octets received\r\n\
        250 2.0.0 <a@x> Saved\r\n250 2.0.0 <b@x> Saved\r\n"
        ),
        "{rep}"
    );
    assert!(seen
        .iter()
        .any(|s| matches!(s, Seen::DataEnd(d) if d.chunked && d.stored_size == 10)));
}

#[test]
fn bdat_zero_last_and_refusals() {
    let seen = run(&[
        b"LHLO x\r\nBDAT 6\r\nNOOP\r\nMAIL FROM:<>\r\nBDAT 4 LAST\r\nQUITRCPT TO:<a@x>\r\n\
        BDAT 2\r\nhiBDAT 0 LAST\r\nDATA\r\n",
    ]);
    let rep = replies(&seen);
    assert!(
        rep.ends_with(&format!(
            "{LHLO_REPLY}503 5.5.1 Need MAIL command\r\n250 2.1.0 Ok\r\n\
        554 5.5.1 No valid recipients\r\n250 2.1.5 Ok\r\n250 2.0.0 2 octets received\r\n\
        250 2.0.0 <a@x> Saved\r\n503 5.5.1 Need MAIL command\r\n"
        )),
        "{rep}"
    );
    assert_eq!(data(&seen), b"hi");
}

#[test]
fn data_after_bdat_and_rcpt_after_bdat_refused() {
    let seen =
        run(&[b"LHLO x\r\nMAIL FROM:<>\r\nRCPT TO:<a@x>\r\nBDAT 1\r\nxDATA\r\nRCPT TO:<b@x>\r\n"]);
    assert!(replies(&seen).ends_with("503 5.5.1 DATA after BDAT\r\n503 5.5.1 RCPT after BDAT\r\n"));
}

#[test]
fn bad_bdat_size_closes() {
    let seen = run(&[b"LHLO x\r\nMAIL FROM:<>\r\nBDAT lots\r\nNOOP\r\n"]);
    let n = seen.len();
    assert_eq!(
        seen[n - 3..],
        [
            Seen::Reset,
            r("501 5.5.4 Invalid BDAT chunk size\r\n"),
            Seen::Error(ProtoError::BadChunkSize)
        ]
    );
}

#[test]
fn message_too_big_read_to_end_then_552_each() {
    let mut msg = b"LHLO x\r\nMAIL FROM:<>\r\nRCPT TO:<a@x>\r\nRCPT TO:<b@x>\r\nDATA\r\n".to_vec();
    for _ in 0..40 {
        msg.extend_from_slice(b"0123456789012345678901234567890123456789\r\n");
    }
    msg.extend_from_slice(b".\r\nNOOP\r\n");
    let seen = run(&[&msg]);
    assert!(seen.contains(&Seen::TooBig));
    assert!(!seen.iter().any(|s| matches!(s, Seen::DataEnd(_))));
    assert!(replies(&seen).ends_with(
        "354 Start mail input; end with <CRLF>.<CRLF>\r\n\
        552 5.3.4 <a@x> Message too big\r\n552 5.3.4 <b@x> Message too big\r\n250 2.0.0 Ok\r\n"
    ));
}

#[test]
fn message_of_exactly_the_limit_fits() {
    // 998 octets + CRLF = 1000 = max_message_size, counted in CRLF form.
    let mut msg = b"LHLO x\r\nMAIL FROM:<>\r\nRCPT TO:<a@x>\r\nDATA\r\n".to_vec();
    msg.extend_from_slice(&[b'y'; 998]);
    msg.extend_from_slice(b"\n.\n");
    let seen = run(&[&msg]);
    assert!(!seen.contains(&Seen::TooBig));
    assert!(seen
        .iter()
        .any(|s| matches!(s, Seen::DataEnd(d) if d.crlf_size == 1000 && d.long_lines == 0)));
    // One more octet is too big.
    let mut msg = b"LHLO x\r\nMAIL FROM:<>\r\nRCPT TO:<a@x>\r\nBDAT 1001 LAST\r\n".to_vec();
    msg.extend_from_slice(&[b'y'; 1001]);
    let seen = run(&[&msg]);
    assert!(replies(&seen).ends_with("552 5.3.4 <a@x> Message too big\r\n"));
}

#[test]
fn lf_only_session() {
    let seen = run(&[b"LHLO x\nMAIL FROM:<>\nRCPT TO:<a@x>\nDATA\nSubject: x\n\n..y\n.\nQUIT\n"]);
    assert_eq!(data(&seen), b"Subject: x\n\n.y\n");
    assert!(replies(&seen).ends_with("250 2.0.0 <a@x> Saved\r\n221 2.0.0 mx.test Bye\r\n"));
}

#[test]
fn long_body_lines_are_accepted_and_counted() {
    let mut l = limits();
    l.max_message_size = 0; // no limit (RFC 1870 §3)
    let mut msg = b"LHLO x\r\nMAIL FROM:<>\r\nRCPT TO:<a@x>\r\nDATA\r\n".to_vec();
    msg.extend_from_slice(&[b'z'; 5000]);
    msg.extend_from_slice(b"\r\nshort\r\n.\r\n");
    let seen = run_with(l, &[&msg]);
    assert!(seen
        .iter()
        .any(|s| matches!(s, Seen::DataEnd(d) if d.long_lines == 1 && d.stored_size == 5007)));
    assert!(replies(&seen).contains("SIZE 0\r\n"));
}

#[test]
fn command_line_limits() {
    let mut long = b"NOOP ".to_vec();
    long.extend_from_slice(&[b'a'; 600]);
    long.extend_from_slice(b"\r\nNOOP\r\n");
    let seen = run(&[&long]);
    assert_eq!(
        replies(&seen),
        format!("{GREETING}500 Line too long\r\n250 Ok\r\n")
    );
    // Past max_line with no line end: reply, then close.
    let seen = run(&[&[b'a'; 700], &[b'a'; 700], b"\r\n"]);
    assert_eq!(
        seen,
        vec![
            r(GREETING),
            r("500 Line too long\r\n"),
            Seen::Error(ProtoError::LineTooLong { limit: 1000 })
        ]
    );
}

#[test]
fn api_misuse_is_reported() {
    let mut s = Session::new(limits());
    assert_eq!(
        s.rcpt_result(RcptResult::Accepted),
        Err(ProtoError::UnexpectedResult("rcpt_result"))
    );
    assert_eq!(
        s.data_results(vec![]),
        Err(ProtoError::UnexpectedResult("data_results"))
    );
    s.feed(b"LHLO x\r\nMAIL FROM:<>\r\nRCPT TO:<a@x>\r\n");
    let mut rcpt = None;
    while let Ok(Some(ev)) = s.next_event() {
        if let Event::RcptTo(a) = ev {
            rcpt = Some(a);
            break;
        }
    }
    assert!(rcpt.is_some());
    assert_eq!(s.next_event(), Err(ProtoError::ResultDue("rcpt_result")));
    s.rcpt_result(RcptResult::Accepted).expect("due");
    s.feed(b"DATA\r\n.\r\n");
    while let Ok(Some(ev)) = s.next_event() {
        if matches!(ev, Event::DataEnd(_)) {
            break;
        }
    }
    assert_eq!(
        s.data_results(vec![]),
        Err(ProtoError::OutcomeCount {
            expected: 1,
            got: 0
        })
    );
    s.data_results(vec![RcptOutcome::Failed(Status::temporary("index busy"))])
        .expect("due");
    assert_eq!(
        s.next_event(),
        Ok(Some(Event::Reply(
            b"451 4.3.0 <a@x> index busy\r\n".to_vec()
        )))
    );
    assert!(!s.in_transaction());
}

#[test]
fn helpers_and_accessors() {
    let l = Limits::new("h.example");
    assert_eq!((l.max_line, l.max_recipients), (1000, 100));
    let mut s = Session::new(l);
    assert_eq!(
        s.shutdown_reply(),
        b"421 h.example Service shutting down\r\n"
    );
    s.feed(b"LHLO client.example\r\n");
    while let Ok(Some(_)) = s.next_event() {}
    assert_eq!(s.client_name(), Some("client.example"));
    assert_eq!(
        s.timeout_reply(),
        b"421 4.4.2 h.example Timeout, closing connection\r\n"
    );
}
