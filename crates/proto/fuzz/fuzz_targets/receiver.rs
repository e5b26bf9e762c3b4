//! Arbitrary bytes in arbitrary chunkings into the receiver: no panic, the
//! buffer stays within its bound, APPEND data adds up, and the inputs do
//! not depend on the chunking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use maildex_proto::{Command, Input, Limits, LineTooLong, Receiver};

/// What the session saw.
#[derive(Debug, PartialEq)]
enum Ev {
    In(Input),
    Line(Result<Vec<u8>, LineTooLong>),
}

/// Small limits so every limit path is reachable.
fn limits() -> Limits {
    Limits {
        max_line: 200,
        max_inline_literal: 100,
        max_command: 1000,
        max_append: 1000,
        max_depth: 8,
        max_items: 50,
        max_chunk: 64,
    }
}

/// Runs a session over `chunks`: APPENDs to mailboxes starting with `n`
/// are rejected; after IDLE and AUTHENTICATE one raw line is read.
fn session(chunks: &[&[u8]]) -> Vec<Ev> {
    let l = limits();
    let bound = (l.max_line + 1).max(l.max_inline_literal) + l.max_command + 32;
    let mut rx = Receiver::new(l.clone());
    let mut out: Vec<Ev> = Vec::new();
    let mut raw_line_wanted = false;
    let mut append_left: Option<u64> = None;
    for c in chunks {
        rx.feed(c);
        loop {
            if raw_line_wanted {
                match rx.next_line() {
                    None => break,
                    Some(line) => {
                        raw_line_wanted = false;
                        out.push(Ev::Line(line));
                        continue;
                    }
                }
            }
            let Some(i) = rx.next() else { break };
            match &i {
                Input::Command { command: Command::Idle | Command::Authenticate { .. }, .. } => {
                    raw_line_wanted = true;
                }
                Input::AppendBegin { mailbox, .. } if mailbox.as_bytes().starts_with(b"n") => {
                    out.push(Ev::In(i));
                    rx.reject_append();
                    append_left = None;
                    continue;
                }
                Input::AppendMessage(m) => {
                    assert!(m.len <= l.max_append);
                    assert_eq!(append_left.unwrap_or(0), 0, "previous message incomplete");
                    append_left = Some(m.len);
                }
                Input::AppendData(d) => {
                    assert!(!d.is_empty() && d.len() <= l.max_chunk);
                    let left = append_left.as_mut().expect("data outside a message");
                    *left = left.checked_sub(d.len() as u64).expect("more data than announced");
                }
                Input::AppendEnd => {
                    assert_eq!(append_left.take().unwrap_or(0), 0, "AppendEnd before the data");
                }
                Input::Bad { .. } | Input::No { .. } | Input::Fatal { .. } => append_left = None,
                _ => {}
            }
            match (out.last_mut(), i) {
                (Some(Ev::In(Input::AppendData(prev))), Input::AppendData(d)) => {
                    prev.extend_from_slice(&d)
                }
                (_, i) => out.push(Ev::In(i)),
            }
        }
        assert!(rx.buffered() <= bound, "buffered {} > {}", rx.buffered(), bound);
    }
    out
}

fuzz_target!(|data: &[u8]| {
    // The first byte seeds the chunking; the rest is the stream.
    let Some((&seed, stream)) = data.split_first() else { return };
    let mut chunks = Vec::new();
    let mut rest = stream;
    let mut x = u32::from(seed) | 1;
    while !rest.is_empty() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let n = (x as usize % 97 + 1).min(rest.len());
        chunks.push(&rest[..n]);
        rest = &rest[n..];
    }
    let split = session(&chunks);
    let whole = session(&[stream]);
    assert_eq!(split, whole);
});
