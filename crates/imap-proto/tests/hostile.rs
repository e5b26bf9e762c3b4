//! Hostile input is refused cheaply: the receiver's buffer stays bounded
//! and nothing recurses or allocates without bound.

use maildex_imap_proto::*;

const READ: usize = 64 * 1024;

/// Feeds `input` in socket-sized reads, draining after each, and returns
/// the inputs plus the largest buffered size seen after a drain.
fn pump(rx: &mut Receiver, input: &[u8]) -> (Vec<Input>, usize) {
    let mut out = Vec::new();
    let mut peak = 0;
    for c in input.chunks(READ) {
        rx.feed(c);
        while let Some(i) = rx.next() {
            out.push(i);
        }
        peak = peak.max(rx.buffered());
    }
    (out, peak)
}

/// What `Receiver::next` promises to hold at most after returning `None`.
fn bound(l: &Limits) -> usize {
    (l.max_line + 1).max(l.max_inline_literal) + l.max_command + 32
}

fn texts(v: &[Input]) -> Vec<String> {
    v.iter()
        .map(|i| match i {
            Input::Command { tag, command } => format!("{tag} {}", command.name()),
            Input::Bad { tag, code, text } => format!("BAD {tag:?} {code:?} {text}"),
            Input::No { text, .. } => format!("NO {text}"),
            Input::Fatal { text } => format!("FATAL {text}"),
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn a_million_sequence_items() {
    let mut line = b"a FETCH ".to_vec();
    for i in 0..1_000_000u32 {
        line.extend_from_slice(format!("{},", 2 * i + 1).as_bytes());
    }
    line.extend_from_slice(b"1 FLAGS\r\nb NOOP\r\n");
    let limits = Limits::default();
    let mut rx = Receiver::new(limits.clone());
    let (out, peak) = pump(&mut rx, &line);
    assert!(peak <= limits.max_line + 1 + 32, "peak {peak}");
    assert_eq!(
        texts(&out),
        vec!["BAD Some(Tag(\"a\")) Some(TooBig) Line too long", "b NOOP"]
    );
    // With a larger line limit the item limit refuses it instead.
    let big = Limits {
        max_line: 16 << 20,
        max_command: 17 << 20,
        ..Limits::default()
    };
    let e = parse_command(&line[..line.len() - 8], &big).unwrap_err();
    assert_eq!(e.error, ParseError::Limit("Too many items".into()));
}

#[test]
fn ten_thousand_nested_parentheses() {
    let line = format!(
        "a SEARCH {}SEEN{}\r\nb NOOP\r\n",
        "(".repeat(10_000),
        ")".repeat(10_000)
    );
    let (out, _) = pump(&mut Receiver::new(Limits::default()), line.as_bytes());
    assert_eq!(
        texts(&out),
        vec![
            "BAD Some(Tag(\"a\")) Some(Limit) Too deeply nested",
            "b NOOP"
        ]
    );
    let nots = format!("a SEARCH {}SEEN\r\n", "NOT ".repeat(10_000));
    let (out, _) = pump(&mut Receiver::new(Limits::default()), nots.as_bytes());
    assert_eq!(
        texts(&out),
        vec!["BAD Some(Tag(\"a\")) Some(Limit) Search key too deeply nested"]
    );
}

#[test]
fn literals_announced_at_four_gigabytes() {
    let limits = Limits::default();
    for (input, want) in [
        (
            &b"a LOGIN joe {4294967296}\r\n"[..],
            "BAD Some(Tag(\"a\")) None Invalid literal size",
        ),
        (
            b"a LOGIN joe {4294967295}\r\n",
            "BAD Some(Tag(\"a\")) Some(TooBig) Literal too big",
        ),
        (b"a APPEND INBOX {4294967295}\r\n", "NO Message too big"),
        (
            b"a APPEND INBOX {4294967296}\r\n",
            "BAD Some(Tag(\"a\")) None Invalid literal size",
        ),
        (
            b"a LOGIN joe {99999999999999999999999999}\r\n",
            "BAD Some(Tag(\"a\")) None Invalid literal size",
        ),
    ] {
        let mut rx = Receiver::new(limits.clone());
        let (out, peak) = pump(&mut rx, input);
        let t = texts(&out);
        assert_eq!(t.last().map(String::as_str), Some(want), "{t:?}");
        assert!(!out.contains(&Input::Continue));
        assert!(peak < 100);
        // The connection goes on.
        let (out, _) = pump(&mut rx, b"b NOOP\r\n");
        assert_eq!(texts(&out), vec!["b NOOP"]);
    }
    // Non-synchronizing: not read, the connection is closed.
    for input in [
        &b"a LOGIN joe {4294967295+}\r\n"[..],
        b"a APPEND INBOX {4294967295+}\r\n",
    ] {
        let mut rx = Receiver::new(limits.clone());
        let (out, _) = pump(&mut rx, input);
        assert!(matches!(out.last(), Some(Input::Fatal { .. })), "{out:?}");
        let (out, _) = pump(&mut rx, &[b'x'; 100_000]);
        assert!(out.is_empty());
        assert_eq!(rx.buffered(), 0);
    }
}

#[test]
fn an_endless_line_and_nul_bytes() {
    let limits = Limits::default();
    let mut rx = Receiver::new(limits.clone());
    let mut input = b"a NOOP ".to_vec();
    input.resize(10 << 20, b'x');
    let (out, peak) = pump(&mut rx, &input);
    assert!(peak <= limits.max_line + 1 + 32, "peak {peak}");
    assert_eq!(
        texts(&out),
        vec!["BAD Some(Tag(\"a\")) Some(TooBig) Line too long"]
    );
    let (out, _) = pump(&mut rx, b"\r\nb NOOP\r\n");
    assert_eq!(texts(&out), vec!["b NOOP"]);
    let zeros = vec![0u8; 1 << 20];
    let (out, peak) = pump(&mut rx, &zeros);
    assert!(peak <= limits.max_line + 1 + 32);
    assert_eq!(texts(&out), vec!["BAD None Some(TooBig) Line too long"]);
}

#[test]
fn many_tiny_literals_in_one_command() {
    let limits = Limits::default();
    // Non-synchronizing: refused at the limit, the rest of the command
    // (with all its literals) skipped.
    let mut input = b"a SEARCH".to_vec();
    for _ in 0..5000 {
        input.extend_from_slice(b" TEXT {1+}\r\nx");
    }
    input.extend_from_slice(b"\r\nb NOOP\r\n");
    let mut rx = Receiver::new(limits.clone());
    let (out, peak) = pump(&mut rx, &input);
    assert!(peak <= bound(&limits));
    assert_eq!(
        texts(&out),
        vec![
            "BAD Some(Tag(\"a\")) Some(Limit) Too many literals",
            "b NOOP"
        ]
    );
    // Synchronizing, with the data sent without waiting (a protocol
    // violation): each literal costs a check of the command so far; the
    // limit keeps the total work small.
    let mut input = b"a SEARCH".to_vec();
    for _ in 0..5000 {
        input.extend_from_slice(b" TEXT {1}\r\nx");
    }
    let start = std::time::Instant::now();
    let (out, peak) = pump(&mut Receiver::new(limits.clone()), &input);
    assert!(start.elapsed().as_secs() < 10);
    assert!(peak <= bound(&limits));
    let t = texts(&out);
    assert_eq!(
        t.iter().take_while(|s| s.as_str() == "Continue").count(),
        MAX_LITERALS
    );
    assert_eq!(
        t[MAX_LITERALS],
        "BAD Some(Tag(\"a\")) Some(Limit) Too many literals"
    );
}

#[test]
fn a_command_over_max_command() {
    let limits = Limits {
        max_command: 1000,
        ..Limits::default()
    };
    let mut input = b"a SEARCH".to_vec();
    for _ in 0..20 {
        input.extend_from_slice(b" TEXT {100+}\r\n");
        input.extend_from_slice(&[b'y'; 100]);
    }
    input.extend_from_slice(b"\r\nb NOOP\r\n");
    let (out, _) = pump(&mut Receiver::new(limits), &input);
    assert_eq!(
        texts(&out),
        vec![
            "BAD Some(Tag(\"a\")) Some(TooBig) Literal too big",
            "b NOOP"
        ]
    );
}
