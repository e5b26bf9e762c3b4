//! A fake server that drives a session: recipients whose local part starts
//! with "unknown" are refused at RCPT, "full" ones fail after DATA.

#![allow(dead_code)]

use maildex_lmtp_proto::{
    DataSummary, Event, Limits, MailFrom, ProtoError, RcptOutcome, RcptResult, Session, Status,
};

/// What the fake server saw, with consecutive `Data` pieces merged (their
/// split depends on how input was fed) and the data of a too-big message
/// dropped (the server discards it anyway).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Reply(String),
    Mail(MailFrom),
    Rcpt(String),
    DataStart,
    Data(Vec<u8>),
    DataEnd(DataSummary),
    TooBig,
    Reset,
    Quit,
    Error(ProtoError),
}

pub fn limits() -> Limits {
    Limits {
        max_message_size: 1000,
        max_recipients: 3,
        max_line: 1000,
        hostname: "mx.test".into(),
    }
}

/// Feeds `chunks` one after the other, draining events after each.
pub fn run_with(limits: Limits, chunks: &[&[u8]]) -> Vec<Seen> {
    let mut s = Session::new(limits);
    let mut seen = Vec::new();
    let mut done = false;
    for chunk in chunks {
        if done {
            break;
        }
        s.feed(chunk);
        loop {
            match s.next_event() {
                Ok(None) => break,
                Ok(Some(ev)) => handle(&mut s, ev, &mut seen),
                Err(e) => {
                    seen.push(Seen::Error(e));
                    done = true;
                    break;
                }
            }
        }
    }
    seen
}

pub fn run(chunks: &[&[u8]]) -> Vec<Seen> {
    run_with(limits(), chunks)
}

fn handle(s: &mut Session, ev: Event, seen: &mut Vec<Seen>) {
    match ev {
        Event::Reply(b) => seen.push(Seen::Reply(String::from_utf8_lossy(&b).into_owned())),
        Event::MailFrom(m) => seen.push(Seen::Mail(m)),
        Event::RcptTo(a) => {
            let r = if a.local_part.starts_with("unknown") {
                RcptResult::Rejected(Status::unknown_user())
            } else {
                RcptResult::Accepted
            };
            seen.push(Seen::Rcpt(a.to_string()));
            s.rcpt_result(r).expect("rcpt_result when asked");
        }
        Event::DataStart => seen.push(Seen::DataStart),
        Event::Data(d) => {
            assert!(!d.is_empty(), "empty Data event");
            if let Some(Seen::Data(prev)) = seen.last_mut() {
                prev.extend_from_slice(&d);
            } else {
                seen.push(Seen::Data(d));
            }
        }
        Event::DataEnd(sum) => {
            seen.push(Seen::DataEnd(sum));
            let outcomes = s
                .accepted_recipients()
                .iter()
                .map(|a| {
                    if a.local_part.starts_with("full") {
                        RcptOutcome::Failed(Status::disk_full())
                    } else {
                        RcptOutcome::Delivered
                    }
                })
                .collect();
            s.data_results(outcomes).expect("data_results when asked");
        }
        Event::MessageTooBig => {
            if let Some(Seen::Data(_)) = seen.last() {
                seen.pop();
            }
            seen.push(Seen::TooBig);
        }
        Event::Reset => seen.push(Seen::Reset),
        Event::Quit => seen.push(Seen::Quit),
    }
}

/// Just the replies, concatenated.
pub fn replies(seen: &[Seen]) -> String {
    seen.iter()
        .filter_map(|s| match s {
            Seen::Reply(r) => Some(r.as_str()),
            _ => None,
        })
        .collect()
}

/// All message data handed out, concatenated.
pub fn data(seen: &[Seen]) -> Vec<u8> {
    seen.iter()
        .filter_map(|s| match s {
            Seen::Data(d) => Some(d.as_slice()),
            _ => None,
        })
        .flatten()
        .copied()
        .collect()
}

pub const GREETING: &str = "220 mx.test LMTP ready\r\n";
pub const LHLO_REPLY: &str = "250-mx.test\r\n250-PIPELINING\r\n250-ENHANCEDSTATUSCODES\r\n\
250-8BITMIME\r\n250-SIZE 1000\r\n250 CHUNKING\r\n";
