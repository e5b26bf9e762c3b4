//! Receiver behaviour: literals, APPEND streaming, refusal and skipping,
//! raw lines, and split input.

use maildex_imap_proto::*;
use proptest::prelude::*;

/// Feeds `chunks` one at a time and drains after each, as a session does.
/// APPENDs to a mailbox named `nosuch` are rejected at AppendBegin.
/// Consecutive AppendData pieces are joined so chunkings compare equal.
fn drive(rx: &mut Receiver, chunks: &[&[u8]]) -> Vec<Input> {
    let mut out: Vec<Input> = Vec::new();
    for c in chunks {
        rx.feed(c);
        while let Some(i) = rx.next() {
            if let Input::AppendBegin { mailbox, .. } = &i {
                if mailbox.as_bytes() == b"nosuch" {
                    out.push(i);
                    rx.reject_append();
                    continue;
                }
            }
            match (out.last_mut(), i) {
                (Some(Input::AppendData(prev)), Input::AppendData(d)) => prev.extend_from_slice(&d),
                (_, i) => out.push(i),
            }
        }
    }
    out
}

fn run(input: &[u8]) -> Vec<Input> {
    drive(&mut Receiver::new(Limits::default()), &[input])
}

fn cmd(tag: &str, command: Command) -> Input {
    Input::Command {
        tag: Tag::new(tag).unwrap(),
        command,
    }
}

fn bad(tag: Option<&str>, code: Option<ResponseCode>, text: &str) -> Input {
    Input::Bad {
        tag: tag.map(|t| Tag::new(t).unwrap()),
        code,
        text: text.into(),
    }
}

fn msg(len: u64, sync: bool) -> AppendMessage {
    AppendMessage {
        flags: vec![],
        date: None,
        len,
        binary: false,
        sync,
    }
}

fn begin(tag: &str, mailbox: &str) -> Input {
    Input::AppendBegin {
        tag: Tag::new(tag).unwrap(),
        mailbox: Mailbox::new(mailbox),
    }
}

fn login(u: &str, p: &str) -> Command {
    Command::Login {
        username: u.into(),
        password: p.into(),
    }
}

#[test]
fn literals_sync_and_non_sync() {
    assert_eq!(
        run(b"a LOGIN {3}\r\njoe {2+}\r\npw\r\nb NOOP\n"),
        vec![
            Input::Continue,
            cmd("a", login("joe", "pw")),
            cmd("b", Command::Noop)
        ]
    );
}

#[test]
fn line_ends_nul_and_cr() {
    assert_eq!(
        run(b"\r\na NOOP\nb NO\rOP\r\nc NO\0OP\r\nd NOOP\r\n"),
        vec![
            cmd("a", Command::Noop),
            bad(Some("b"), None, "CR without LF in command line"),
            bad(Some("c"), None, "NUL in command line"),
            cmd("d", Command::Noop),
        ]
    );
}

#[test]
fn bad_line_skips_its_literals() {
    // A sync literal on a bad line is never continued; the client sends
    // nothing more for it.
    assert_eq!(
        run(b"a FROB {5}\r\nb NOOP\r\n"),
        vec![
            bad(Some("a"), None, "Unknown command FROB"),
            cmd("b", Command::Noop)
        ]
    );
    // Non-sync literals on a bad line are read and dropped, all of them.
    assert_eq!(
        run(b"a FROB {5+}\r\nhello {3+}\r\nb N\r\nc NOOP\r\n"),
        vec![
            bad(Some("a"), None, "Unknown command FROB"),
            cmd("c", Command::Noop)
        ]
    );
    // A command wrong before its literal is refused before the continuation.
    assert_eq!(
        run(b"a LOGIN \"joe {3}\r\nb NOOP\r\n"),
        vec![
            bad(Some("a"), None, "Unterminated quoted string"),
            cmd("b", Command::Noop)
        ]
    );
    assert_eq!(
        run(b"a NOOP {3}\r\nb NOOP\r\n"),
        vec![
            bad(Some("a"), None, "Unexpected extra arguments"),
            cmd("b", Command::Noop)
        ]
    );
}

#[test]
fn inline_literal_limits() {
    let limits = Limits {
        max_inline_literal: 10,
        ..Limits::default()
    };
    let toobig = Some(ResponseCode::TooBig);
    let mut rx = Receiver::new(limits.clone());
    assert_eq!(
        drive(
            &mut rx,
            &[b"a LOGIN joe {11}\r\nb LOGIN joe {11+}\r\n01234567890\r\nc NOOP\r\n"]
        ),
        vec![
            bad(Some("a"), toobig.clone(), "Literal too big"),
            bad(Some("b"), toobig, "Literal too big"),
            cmd("c", Command::Noop)
        ]
    );
    let mut rx = Receiver::new(limits);
    assert_eq!(
        drive(&mut rx, &[b"a LOGIN joe {4294967296}\r\nb NOOP\r\n"]),
        vec![
            bad(Some("a"), None, "Invalid literal size"),
            cmd("b", Command::Noop)
        ]
    );
    assert_eq!(
        drive(&mut rx, &[b"c LOGIN joe {4294967296+}\r\nxxxx"]),
        vec![
            bad(Some("c"), None, "Invalid literal size"),
            Input::Fatal {
                text: "Literal too big".into()
            }
        ]
    );
    assert_eq!(rx.next(), None);
    assert_eq!(rx.buffered(), 0);
}

#[test]
fn append_single_and_multi() {
    let date = DateTime::new(Date::new(1994, 2, 7).unwrap(), 21, 52, 25, -480).unwrap();
    assert_eq!(
        run(b"A003 APPEND saved-messages (\\Seen) \" 7-Feb-1994 21:52:25 -0800\" {5}\r\nhello\r\n"),
        vec![
            begin("A003", "saved-messages"),
            Input::AppendMessage(AppendMessage {
                flags: vec![Flag::Seen],
                date: Some(date),
                ..msg(5, true)
            }),
            Input::Continue,
            Input::AppendData(b"hello".to_vec()),
            Input::AppendEnd,
        ]
    );
    assert_eq!(
        run(b"a append Drafts {3+}\r\nabc (\\Draft $x) ~{2}\r\nx\0\r\nb NOOP\r\n"),
        vec![
            begin("a", "Drafts"),
            Input::AppendMessage(msg(3, false)),
            Input::AppendData(b"abc".to_vec()),
            Input::AppendMessage(AppendMessage {
                flags: vec![Flag::Draft, Flag::Keyword("$x".into())],
                binary: true,
                ..msg(2, true)
            }),
            Input::Continue,
            Input::AppendData(b"x\0".to_vec()),
            Input::AppendEnd,
            cmd("b", Command::Noop),
        ]
    );
    // A mailbox name sent as a literal, and an empty message.
    assert_eq!(
        run(b"a APPEND {4}\r\nSent {0}\r\n\r\n"),
        vec![
            Input::Continue,
            begin("a", "Sent"),
            Input::AppendMessage(msg(0, true)),
            Input::Continue,
            Input::AppendEnd,
        ]
    );
}

#[test]
fn append_errors() {
    assert_eq!(
        run(b"a APPEND INBOX (\\Recent) {3}\r\nb APPEND INBOX (\\Recent) {3+}\r\nabc\r\nc APPEND INBOX\r\nd NOOP\r\n"),
        vec![
            bad(Some("a"), None, "Invalid system flag \\Recent"),
            bad(Some("b"), None, "Invalid system flag \\Recent"),
            bad(Some("c"), None, "Missing message literal"),
            cmd("d", Command::Noop),
        ]
    );
    // A bad second message ends the APPEND after the first was streamed.
    assert_eq!(
        run(b"a APPEND INBOX {1+}\r\nx \"bad date\" {1+}\r\ny\r\nb NOOP\r\n"),
        vec![
            begin("a", "INBOX"),
            Input::AppendMessage(msg(1, false)),
            Input::AppendData(b"x".to_vec()),
            bad(Some("a"), None, "Invalid date-time"),
            cmd("b", Command::Noop),
        ]
    );
    let limits = Limits {
        max_append: 4,
        ..Limits::default()
    };
    let mut rx = Receiver::new(limits);
    assert_eq!(
        drive(&mut rx, &[b"a APPEND INBOX {5}\r\nb APPEND INBOX {4}\r\n"]),
        vec![
            begin("a", "INBOX"),
            Input::No {
                tag: Tag::new("a").unwrap(),
                code: Some(ResponseCode::TooBig),
                text: "Message too big".into()
            },
            begin("b", "INBOX"),
            Input::AppendMessage(msg(4, true)),
            Input::Continue,
        ]
    );
    let mut rx = Receiver::new(Limits {
        max_append: 4,
        ..Limits::default()
    });
    assert_eq!(
        drive(&mut rx, &[b"a APPEND INBOX {5+}\r\nhello\r\n"]),
        vec![
            begin("a", "INBOX"),
            Input::Fatal {
                text: "Message too big".into()
            }
        ]
    );
}

#[test]
fn append_rejected_by_the_session() {
    // Sync: the continuation is never sent; the next line is a command.
    assert_eq!(
        run(b"a APPEND nosuch {5}\r\nb NOOP\r\n"),
        vec![begin("a", "nosuch"), cmd("b", Command::Noop)]
    );
    // Non-sync: every literal of the command is skipped.
    assert_eq!(
        run(b"a APPEND nosuch {5+}\r\nhello {3+}\r\nabc\r\nb NOOP\r\n"),
        vec![begin("a", "nosuch"), cmd("b", Command::Noop)]
    );
    // Rejected in the middle of the data (e.g. disk full).
    let mut rx = Receiver::new(Limits::default());
    rx.feed(b"a APPEND INBOX {10}\r\n");
    assert!(matches!(rx.next(), Some(Input::AppendBegin { .. })));
    assert!(matches!(rx.next(), Some(Input::AppendMessage(_))));
    assert_eq!(rx.next(), Some(Input::Continue));
    assert_eq!(rx.next(), None);
    rx.feed(b"0123");
    assert_eq!(rx.next(), Some(Input::AppendData(b"0123".to_vec())));
    rx.reject_append();
    rx.feed(b"456789 {2+}\r\nxy\r\nb NOOP\r\n");
    assert_eq!(rx.next(), Some(cmd("b", Command::Noop)));
    assert!(rx.is_idle());
}

#[test]
fn overlong_lines_are_refused_and_skipped() {
    let limits = Limits {
        max_line: 100,
        ..Limits::default()
    };
    let toobig = Some(ResponseCode::TooBig);
    let long = format!("a LOGIN {} {{3+}}\r\nabc\r\nb NOOP\r\n", "x".repeat(200));
    let mut rx = Receiver::new(limits.clone());
    assert_eq!(
        drive(&mut rx, &[long.as_bytes()]),
        vec![
            bad(Some("a"), toobig.clone(), "Line too long"),
            cmd("b", Command::Noop)
        ]
    );
    // Byte by byte, the BAD comes before the line ends, and the trailing
    // non-sync literal is still skipped.
    let mut rx = Receiver::new(limits);
    let chunks: Vec<&[u8]> = long.as_bytes().chunks(1).collect();
    assert_eq!(
        drive(&mut rx, &chunks),
        vec![
            bad(Some("a"), toobig, "Line too long"),
            cmd("b", Command::Noop)
        ]
    );
}

#[test]
fn raw_lines_for_idle_and_authenticate() {
    let mut rx = Receiver::new(Limits::default());
    rx.feed(b"a IDLE\r\ndOnE\r\nb AUTHENTICATE PLAIN\r\n*\r\nc NOOP\r\n");
    assert_eq!(rx.next(), Some(cmd("a", Command::Idle)));
    let line = rx.next_line().unwrap().unwrap();
    assert!(is_done(&line));
    assert!(matches!(
        rx.next(),
        Some(Input::Command {
            command: Command::Authenticate { .. },
            ..
        })
    ));
    assert_eq!(
        auth_line(&rx.next_line().unwrap().unwrap()),
        AuthLine::Cancel
    );
    assert_eq!(rx.next(), Some(cmd("c", Command::Noop)));
    assert_eq!(rx.next_line(), None);
    let mut rx = Receiver::new(Limits {
        max_line: 10,
        ..Limits::default()
    });
    rx.feed(b"0123456789abc");
    assert_eq!(rx.next_line(), Some(Err(LineTooLong)));
}

#[test]
fn starttls_drops_pipelined_bytes() {
    let mut rx = Receiver::new(Limits::default());
    rx.feed(b"a STARTTLS\r\nb LOGIN joe pw\r\n");
    assert_eq!(rx.next(), Some(cmd("a", Command::StartTls)));
    rx.discard_buffered();
    assert_eq!(rx.next(), None);
    assert_eq!(rx.buffered(), 0);
}

/// A stream exercising every receiver path with a fixed session policy.
const STREAM: &[u8] = b"a1 LOGIN {3}\r\njoe {2+}\r\npw\r\n\
a2 SELECT inbox\n\
a3 APPEND Drafts (\\Seen) {5}\r\nhello (\\Draft) {3+}\r\nabc ~{4}\r\nx\0yz\r\n\
a4 APPEND nosuch {5+}\r\nhello {3+}\r\nabc\r\n\
a5 FROB {4+}\r\nskip\r\n\
a6 UID FETCH 1:* (FLAGS BODY.PEEK[HEADER.FIELDS (From)])\r\n\
a7 SEARCH OR FROM {5}\r\nsmith TO x\r\n\
a8 APPEND INBOX {0}\r\n\r\n\
a9 IDLE\r\n";

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any chunking yields the same inputs as feeding the stream whole.
    #[test]
    fn any_chunking_gives_the_same_inputs(cuts in prop::collection::vec(0..STREAM.len(), 0..40)) {
        let mut cuts = cuts;
        cuts.sort_unstable();
        cuts.dedup();
        let mut chunks = Vec::new();
        let mut last = 0;
        for c in cuts {
            chunks.push(&STREAM[last..c]);
            last = c;
        }
        chunks.push(&STREAM[last..]);
        let whole = run(STREAM);
        let split = drive(&mut Receiver::new(Limits::default()), &chunks);
        prop_assert_eq!(&split, &whole);
        prop_assert_eq!(whole.len(), 23);
    }
}

#[test]
fn empty_literals() {
    assert_eq!(
        run(b"a LOGIN {0}\r\n {0+}\r\n\r\nb LOGIN \"\" {0+}\r\n\r\n"),
        vec![
            Input::Continue,
            cmd("a", login("", "")),
            cmd("b", login("", ""))
        ]
    );
}

/// Found by fuzzing: the tag in `BAD [TOOBIG] Line too long` depended on
/// how much of an overlong first token had arrived.
#[test]
fn regression_overlong_tag_does_not_depend_on_chunking() {
    let limits = Limits {
        max_line: 200,
        ..Limits::default()
    };
    let mut line = b"PEND".to_vec();
    line.extend_from_slice(&[b'K'; 300]);
    line.extend_from_slice(b" nosuch {5+}\r\nhello\r\nb NOOP\r\n");
    let whole = drive(&mut Receiver::new(limits.clone()), &[&line]);
    let chunks: Vec<&[u8]> = line.chunks(7).collect();
    let split = drive(&mut Receiver::new(limits.clone()), &chunks);
    assert_eq!(split, whole);
    assert_eq!(
        whole,
        vec![
            bad(None, Some(ResponseCode::TooBig), "Line too long"),
            cmd("b", Command::Noop)
        ]
    );
    // A short tag is still found.
    let mut line = b"t1 NOOP ".to_vec();
    line.extend_from_slice(&[b'x'; 300]);
    line.extend_from_slice(b"\r\n");
    let chunks: Vec<&[u8]> = line.chunks(5).collect();
    assert_eq!(
        drive(&mut Receiver::new(limits), &chunks),
        vec![bad(Some("t1"), Some(ResponseCode::TooBig), "Line too long")]
    );
}

/// What STARTTLS drops is only what follows it: the STARTTLS line itself, consumed
/// already, is not counted (issue 15 #8: a false "dropped plaintext" line on every
/// STARTTLS).
#[test]
fn unread_counts_only_what_follows_the_command() {
    let mut rx = Receiver::new(Limits::default());
    rx.feed(b"a STARTTLS\r\n");
    assert_eq!(rx.next(), Some(cmd("a", Command::StartTls)));
    assert_eq!(rx.unread(), 0);
    rx.feed(b"b STARTTLS\r\nc NOOP\r\nd LOG");
    assert_eq!(rx.next(), Some(cmd("b", Command::StartTls)));
    assert_eq!(rx.unread(), b"c NOOP\r\nd LOG".len());
}
