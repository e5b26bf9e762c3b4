//! Invariant checks shared by the cargo-fuzz targets in `fuzz/` and the
//! stable replay test `tests/fuzz_corpus.rs` (which runs them over the
//! committed corpus). Not part of the API: each function panics when the
//! invariant it checks does not hold.

use crate::{
    parse_command, Command, Input, Limits, LineTooLong, Receiver, SearchKey, SeqNum, SeqRange,
    SequenceSet,
};

/// What the session saw.
#[derive(Debug, PartialEq)]
enum Ev {
    In(Input),
    Line(Result<Vec<u8>, LineTooLong>),
}

/// Small limits so every limit path is reachable.
fn small_limits() -> Limits {
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
    let l = small_limits();
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
                Input::Command {
                    command: Command::Idle | Command::Authenticate { .. },
                    ..
                } => {
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
                    *left = left
                        .checked_sub(d.len() as u64)
                        .expect("more data than announced");
                }
                Input::AppendEnd => {
                    assert_eq!(
                        append_left.take().unwrap_or(0),
                        0,
                        "AppendEnd before the data"
                    );
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
        assert!(
            rx.buffered() <= bound,
            "buffered {} > {}",
            rx.buffered(),
            bound
        );
    }
    out
}

/// Cuts `stream` into chunks of 1..=97 bytes, sizes drawn from `seed`.
pub fn chunks(seed: u8, stream: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = stream;
    let mut x = u32::from(seed) | 1;
    while !rest.is_empty() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let n = (x as usize % 97 + 1).min(rest.len());
        out.push(&rest[..n]);
        rest = &rest[n..];
    }
    out
}

/// Target `receiver`: arbitrary bytes (the first byte seeds the chunking)
/// into the receiver: no panic, the buffer stays within its bound, APPEND
/// data adds up to what was announced, and the inputs do not depend on the
/// chunking.
pub fn receiver(data: &[u8]) {
    let Some((&seed, stream)) = data.split_first() else {
        return;
    };
    let split = session(&chunks(seed, stream));
    let whole = session(&[stream]);
    assert_eq!(split, whole);
}

/// True when `input` starts with `tag` and a space.
fn starts_with_tag(input: &[u8], tag: &[u8]) -> bool {
    input.starts_with(tag) && input.get(tag.len()) == Some(&b' ')
}

/// Target `command`: one whole command line (literals inline) into
/// [`parse_command`]: no panic; a tag it reports is the input's first
/// token; a command accepted under small limits is accepted, and the same,
/// under the default limits (limits only refuse, they never change a
/// parse); and a command without its final CRLF parses the same with it.
pub fn command(data: &[u8]) {
    let small = parse_command(data, &small_limits());
    let default = parse_command(data, &Limits::default());
    for r in [&small, &default] {
        match r {
            Ok((tag, _)) => assert!(starts_with_tag(data, tag.as_str().as_bytes()), "{tag:?}"),
            Err(e) => {
                if let Some(tag) = &e.tag {
                    assert!(starts_with_tag(data, tag.as_str().as_bytes()), "{tag:?}");
                }
            }
        }
    }
    if let Ok(ok) = &small {
        assert_eq!(default.as_ref(), Ok(ok), "limits changed the parse");
    }
    if let Ok(ok) = &default {
        if !matches!(data.last(), None | Some(b'\r' | b'\n')) {
            let mut with_crlf = data.to_vec();
            with_crlf.extend_from_slice(b"\r\n");
            let again = parse_command(&with_crlf, &Limits::default());
            assert_eq!(again.as_ref(), Ok(ok), "the final CRLF changed the parse");
        }
    }
}

/// A command with its sequence sets resolved against the largest possible number, for
/// comparing with what imap-codec understood (it normalizes sets: `5:2` becomes `2:5`).
/// Used by `tests/oracle.rs` and the `oracle` target (`tests/support/oracle_check.rs`).
pub fn canonical(mut c: Command) -> Command {
    match &mut c {
        Command::Fetch { set, .. }
        | Command::Store { set, .. }
        | Command::Copy { set, .. }
        | Command::Move { set, .. } => canon_set(set),
        Command::Expunge { uids: Some(s) } => canon_set(s),
        Command::Search { args, .. } => args.keys.iter_mut().for_each(canon_key),
        Command::Sort { args, .. } => args.keys.iter_mut().for_each(canon_key),
        Command::Thread { args, .. } => args.keys.iter_mut().for_each(canon_key),
        Command::Select { params, .. } | Command::Examine { params, .. } => {
            if let Some(q) = &mut params.qresync {
                q.known_uids.iter_mut().for_each(canon_set);
                if let Some((a, b)) = &mut q.seq_match {
                    canon_set(a);
                    canon_set(b);
                }
            }
        }
        _ => {}
    }
    c
}

fn canon_set(s: &mut SequenceSet) {
    if let Some(r) = s.resolve(u32::MAX) {
        let n = |v: u32| {
            if v == u32::MAX {
                SeqNum::Largest
            } else {
                SeqNum::Value(v)
            }
        };
        *s = SequenceSet::Ranges(
            r.into_iter()
                .map(|(a, b)| SeqRange {
                    start: n(a),
                    end: n(b),
                })
                .collect(),
        );
    }
}

fn canon_key(k: &mut SearchKey) {
    match k {
        SearchKey::Uid(s) | SearchKey::SequenceSet(s) => canon_set(s),
        SearchKey::Not(k) => canon_key(k),
        SearchKey::Or(a, b) => {
            canon_key(a);
            canon_key(b);
        }
        SearchKey::And(ks) => ks.iter_mut().for_each(canon_key),
        _ => {}
    }
}
