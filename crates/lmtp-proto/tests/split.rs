//! Split-input tests: the events must not depend on how the input was cut
//! into reads (one byte at a time, random chunkings), and body round trips.

mod common;

use common::{data, replies, run, run_with, Seen};
use proptest::prelude::*;

/// Sessions covering every command, the body rules and the error paths.
const SESSIONS: &[&[u8]] = &[
    b"LHLO x\r\nMAIL FROM:<s@a> SIZE=10 BODY=7BIT\r\nRCPT TO:<a@x>\r\nRCPT TO:<unknown@x>\r\n\
      RCPT TO:<full@x>\r\nDATA\r\nSubject: t\r\n\r\n..x\r\n.\r\n.y\r\nz.\r\n\r\n.\r\nNOOP\r\nQUIT\r\n",
    b"LHLO x\nMAIL FROM:<>\nRCPT TO:<a@x>\nDATA\na\rb\n..\n.\r\r\n.\nRSET\n",
    b"LHLO x\r\nMAIL FROM:<>\r\nRCPT TO:<a@x>\r\nBDAT 7\r\n.\r\n.\r\n\rBDAT 3 LAST\r\n\nx\rQUIT\r\n",
    b"LHLO x\r\nMAIL FROM:<>\r\nRCPT TO:<a@x>\r\nBDAT 0 LAST\r\nMAIL FROM:<>\r\nRCPT TO:<b@x>\r\n\
      BDAT 2\r\nabRSET\r\nBDAT 1\r\nzVRFY a\r\nHELP\r\n",
    b"MAIL FROM:<>\r\nHELO x\r\nLHLO x\r\nLHLO y\r\nRCPT TO:<a@x>\r\nDATA\r\nFOO\r\n\
      MAIL FROM:<a@b> X=1\r\nMAIL FROM:<a@b>\r\nMAIL FROM:<a@b>\r\nRCPT TO:<unknown@x>\r\nDATA\r\n\
      RCPT TO:<a@x>\r\nRCPT TO:<b@x>\r\nRCPT TO:<c@x>\r\nRCPT TO:<d@x>\r\nDATA\r\n.\r\n",
    b"LHLO x\r\nMAIL FROM:<>\r\nRCPT TO:<a@x>\r\nRCPT TO:<b@x>\r\nDATA\r\n\
      0123456789012345678901234567890123456789012345678901234567890123456789012345678\r\n\
      0123456789012345678901234567890123456789012345678901234567890123456789012345678\r\n\
      0123456789012345678901234567890123456789012345678901234567890123456789012345678\r\n\
      0123456789012345678901234567890123456789012345678901234567890123456789012345678\r\n\
      0123456789012345678901234567890123456789012345678901234567890123456789012345678\r\n\
      0123456789012345678901234567890123456789012345678901234567890123456789012345678\r\n\
      0123456789012345678901234567890123456789012345678901234567890123456789012345678\r\n\
      0123456789012345678901234567890123456789012345678901234567890123456789012345678\r\n\
      0123456789012345678901234567890123456789012345678901234567890123456789012345678\r\n\
      0123456789012345678901234567890123456789012345678901234567890123456789012345678\r\n\
      0123456789012345678901234567890123456789012345678901234567890123456789012345678\r\n\
      0123456789012345678901234567890123456789012345678901234567890123456789012345678\r\n\
      0123456789012345678901234567890123456789012345678901234567890123456789012345678\r\n\
      .\r\nNOOP\r\n",
    b"LHLO x\r\nMAIL FROM:<>\r\nBDAT 3 LAST\r\nabcBDAT nope\r\nNOOP\r\n",
];

/// Cuts `input` at the given points (taken modulo its length).
fn cut(input: &[u8], points: &[usize]) -> Vec<Vec<u8>> {
    let mut pts: Vec<usize> = points.iter().map(|p| p % (input.len() + 1)).collect();
    pts.push(0);
    pts.push(input.len());
    pts.sort_unstable();
    pts.dedup();
    pts.windows(2).map(|w| input[w[0]..w[1]].to_vec()).collect()
}

fn run_chunks(chunks: &[Vec<u8>]) -> Vec<Seen> {
    let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
    run(&refs)
}

#[test]
fn one_byte_at_a_time_matches_one_feed() {
    for input in SESSIONS {
        let whole = run(&[input]);
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(run(&bytes), whole, "{}", String::from_utf8_lossy(input));
    }
}

#[test]
fn session_table_sanity() {
    // The table really exercises what it claims: check a few answers.
    let all: Vec<Vec<Seen>> = SESSIONS.iter().map(|s| run(&[s])).collect();
    assert_eq!(data(&all[0]), b"Subject: t\n\n.x\n");
    assert_eq!(data(&all[1]), b"a\rb\n.\n\r\n");
    // A CRLF split across two BDAT chunks is still one line end.
    assert_eq!(data(&all[2]), b".\n.\n\nx\r");
    assert!(all[5].contains(&Seen::TooBig));
    assert!(matches!(all[6].last(), Some(Seen::Error(_))));
    assert!(replies(&all[4]).contains("452 4.5.3 Too many recipients"));
}

/// Message lines with the awkward bytes: dots, CR, NUL, 8-bit.
fn line() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            3 => Just(b'.'),
            1 => Just(b'\r'),
            1 => Just(0u8),
            1 => Just(0xe9u8),
            4 => b'a'..=b'z',
        ],
        0..12,
    )
    .prop_filter("a line may not end in CR (it would join the CRLF)", |l| {
        l.last() != Some(&b'\r')
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_chunkings_match_one_feed(
        idx in 0..SESSIONS.len(),
        points in prop::collection::vec(0usize..2000, 0..40),
    ) {
        let input = SESSIONS[idx];
        prop_assert_eq!(run_chunks(&cut(input, &points)), run(&[input]));
    }

    /// DATA round trip: dot-stuff lines with CRLF or LF ends, feed in random
    /// cuts; the output is the lines joined with LF (RFC 5321 §4.5.2).
    #[test]
    fn data_round_trip(
        lines in prop::collection::vec(line(), 0..12),
        lf_only in any::<bool>(),
        points in prop::collection::vec(0usize..400, 0..20),
    ) {
        let eol: &[u8] = if lf_only { b"\n" } else { b"\r\n" };
        let mut input = b"LHLO x\r\nMAIL FROM:<>\r\nRCPT TO:<a@x>\r\nDATA\r\n".to_vec();
        let mut want = Vec::new();
        for l in &lines {
            if l.first() == Some(&b'.') {
                input.push(b'.');
            }
            input.extend_from_slice(l);
            input.extend_from_slice(eol);
            want.extend_from_slice(l);
            want.push(b'\n');
        }
        input.extend_from_slice(b".");
        input.extend_from_slice(eol);
        input.extend_from_slice(b"NOOP\r\n");
        let mut l = common::limits();
        l.max_message_size = 0;
        let chunks = cut(&input, &points);
        let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        let seen = run_with(l, &refs);
        prop_assert_eq!(data(&seen), want);
        prop_assert!(replies(&seen).ends_with("250 2.0.0 <a@x> Saved\r\n250 2.0.0 Ok\r\n"));
    }

    /// BDAT round trip: any bytes, any chunk sizes; only CRLF -> LF changes.
    #[test]
    fn bdat_round_trip(
        body in prop::collection::vec(prop_oneof![Just(b'\r'), Just(b'\n'), Just(b'.'), any::<u8>()], 0..200),
        sizes in prop::collection::vec(0usize..50, 1..6),
        points in prop::collection::vec(0usize..600, 0..20),
    ) {
        let mut input = b"LHLO x\r\nMAIL FROM:<>\r\nRCPT TO:<a@x>\r\n".to_vec();
        let mut rest = body.as_slice();
        for (i, &n) in sizes.iter().enumerate() {
            let n = if i + 1 == sizes.len() { rest.len() } else { n.min(rest.len()) };
            let last = if i + 1 == sizes.len() { " LAST" } else { "" };
            input.extend_from_slice(format!("BDAT {n}{last}\r\n").as_bytes());
            input.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
        }
        let mut want = Vec::new();
        let mut i = 0;
        while i < body.len() {
            if body[i] == b'\r' && body.get(i + 1) == Some(&b'\n') {
                want.push(b'\n');
                i += 2;
            } else {
                want.push(body[i]);
                i += 1;
            }
        }
        let mut l = common::limits();
        l.max_message_size = 0;
        let chunks = cut(&input, &points);
        let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        let seen = run_with(l, &refs);
        prop_assert_eq!(data(&seen), want);
        prop_assert!(replies(&seen).ends_with("250 2.0.0 <a@x> Saved\r\n"));
    }
}
