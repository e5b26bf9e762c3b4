//! Invariant checks shared by the cargo-fuzz targets in `fuzz/` and the
//! stable replay test `tests/fuzz_corpus.rs` (which runs them over the
//! committed corpus). Not part of the API: each function panics when the
//! invariant it checks does not hold.

use crate::body::Decoder;
use crate::command::{parse, Command};

/// Target `command`: one command line (without its line end) into the
/// command parser: no panic, and an accepted MAIL or RCPT address written
/// back with its `Display` form (RFC 5321 §4.1.2 path syntax) parses to the
/// same address.
pub fn command(line: &[u8]) {
    match parse(line) {
        Ok(Command::Rcpt(a)) => {
            let again = parse(format!("RCPT TO:<{a}>").as_bytes());
            assert_eq!(again, Ok(Command::Rcpt(a.clone())), "{a}");
        }
        Ok(Command::Mail {
            reverse_path: Some(a),
            ..
        }) => {
            let again = parse(format!("MAIL FROM:<{a}>").as_bytes());
            let want = Command::Mail {
                reverse_path: Some(a.clone()),
                size: None,
                body_8bit: false,
            };
            assert_eq!(again, Ok(want), "{a}");
        }
        _ => {}
    }
}

/// What decoding gave: output, input bytes used, terminator reached, long
/// lines counted.
type Decoded = (Vec<u8>, usize, bool, u64);

/// Decodes `chunks` one after the other, as the session feeds them: stops
/// at the terminator; BDAT (`!dot`) flushes a pending CR at the end.
fn decode_chunks(dot: bool, max_line: usize, chunks: &[&[u8]]) -> Decoded {
    let mut d = Decoder::new(dot, max_line);
    let mut out = Vec::new();
    let mut used = 0;
    let mut ended = false;
    for c in chunks {
        let (n, end) = d.decode(c, &mut out);
        assert!(n <= c.len());
        used += n;
        if end {
            ended = true;
            break;
        }
        assert_eq!(n, c.len(), "input left over without the terminator");
    }
    if !dot {
        d.flush(&mut out);
    }
    (out, used, ended, d.long_lines)
}

/// A line-by-line reading of the rules in `body.rs`, on the whole input:
/// lines end at LF, one CR before it is part of the line end; DATA drops
/// one leading "." and ends at a line that is "."; a CR at the very end is
/// still pending (DATA) or kept (BDAT, flushed); a line longer on the wire
/// than `max_line - 2` octets (dot included, line end excluded) is long.
fn reference(dot: bool, max_line: usize, input: &[u8]) -> Decoded {
    let max_text = max_line.saturating_sub(2);
    let mut out = Vec::new();
    let mut long = 0;
    let mut at = 0;
    while at < input.len() {
        let (raw, next, complete) = match memchr::memchr(b'\n', &input[at..]) {
            Some(i) => (&input[at..at + i], at + i + 1, true),
            None => (&input[at..], input.len(), false),
        };
        let mut line = raw;
        if line.last() == Some(&b'\r') && (complete || dot) {
            line = &line[..line.len() - 1];
        }
        if dot && complete && line == b"." {
            return (out, next, true, long);
        }
        if line.len() > max_text {
            long += 1;
        }
        let text = if dot {
            line.strip_prefix(b".").unwrap_or(line)
        } else {
            line
        };
        out.extend_from_slice(text);
        if complete {
            out.push(b'\n');
        }
        at = next;
    }
    (out, input.len(), false, long)
}

/// Target `body`: the DATA / BDAT body decoder. The first byte picks DATA
/// or BDAT, the line limit and the chunking; the rest is the body. Decoding
/// in chunks gives exactly what decoding in one piece gives, and both equal
/// the line-by-line reference.
pub fn body(data: &[u8]) {
    let Some((&seed, input)) = data.split_first() else {
        return;
    };
    let dot = seed & 1 == 0;
    // At least 3: the session never goes below 512, and with a limit under
    // 3 the terminator's own "." would count as a long line.
    let max_line = [3, 4, 8, 1000][usize::from(seed >> 1) & 3];
    let whole = decode_chunks(dot, max_line, &[input]);
    // Chunk sizes 1..=13 drawn from the seed.
    let mut chunks = Vec::new();
    let mut rest = input;
    let mut x = u32::from(seed) | 1;
    while !rest.is_empty() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let n = (x as usize % 13 + 1).min(rest.len());
        chunks.push(&rest[..n]);
        rest = &rest[n..];
    }
    let split = decode_chunks(dot, max_line, &chunks);
    assert_eq!(split, whole, "chunking changed the decoding");
    assert_eq!(
        whole,
        reference(dot, max_line, input),
        "differs from the reference"
    );
}
