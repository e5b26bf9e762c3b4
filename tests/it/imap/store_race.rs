//! STOREs of several sessions on the same messages at once (issue 15 #22): each session
//! adds keywords of its own (each once) and toggles a system flag off and on again on every
//! message, so at the end every message carries every keyword, `\Seen` and `\Flagged` (a
//! STORE that computed the new file name from a stale index record instead of the file's
//! real name would drop the keyword an earlier STORE added), and the index names each
//! message's file by its real name. Written for an experiment in which STOREs shared
//! commits (not merged: docs/BENCHMARKS.md, "Latency under concurrent load"); it guards
//! any later change to how STOREs of one mailbox are ordered.

use std::sync::{Arc, Barrier};

use imap_codec::imap_types::fetch::MessageDataItem;
use imap_codec::imap_types::flag::FlagFetch;

use crate::support::daemon::{Opts, Server};
use crate::support::imap::{crlf, simple};

/// Sessions storing at once.
const SESSIONS: usize = 6;
/// Messages they all store on (few: the STOREs must meet).
const MESSAGES: u32 = 4;
/// Passes of each session over the messages, each adding a keyword of its own (added
/// once, so a keyword lost is not put back by a later pass; 24 of the 26 letters).
const PASSES: u32 = 4;

#[test]
fn concurrent_stores_on_the_same_messages_keep_every_flag() {
    // durable commits, as the daemon's default: each takes long enough for the STOREs
    // of the other sessions to queue behind it
    let server = Server::start_with(Opts {
        tweak: Some(Box::new(|c| c.storage.fsync = true)),
        ..Opts::default()
    });
    let mut c = server.select("alice", "INBOX");
    for i in 0..MESSAGES {
        let m = crlf(&simple(&format!("m{i}"), "body"));
        let mut cmd = format!("APPEND INBOX {{{}+}}\r\n", m.len()).into_bytes();
        cmd.extend_from_slice(&m);
        let r = c.cmd_bytes(&cmd);
        assert!(r.status().starts_with("OK"), "{}", r.all());
    }
    let gate = Arc::new(Barrier::new(SESSIONS));
    let workers: Vec<_> = (0..SESSIONS)
        .map(|s| {
            let gate = Arc::clone(&gate);
            let mut c = server.select("alice", "INBOX");
            std::thread::spawn(move || {
                let flag = if s % 2 == 0 { "\\Seen" } else { "\\Flagged" };
                gate.wait();
                for pass in 0..PASSES {
                    for k in 0..MESSAGES {
                        // each session in its own order, so that they meet on every message
                        let uid = 1 + (k + s as u32 * 3 + pass) % MESSAGES;
                        c.ok(&format!("UID STORE {uid} +FLAGS.SILENT ($s{s}p{pass})"));
                        c.ok(&format!("UID STORE {uid} -FLAGS.SILENT ({flag})"));
                        c.ok(&format!("UID STORE {uid} +FLAGS.SILENT ({flag})"));
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("session");
    }

    // a new session: `c` also holds the others' flag changes as unsolicited FETCHes
    let mut c = server.select("alice", "INBOX");
    let r = c.ok("UID FETCH 1:* (UID FLAGS)");
    let fetched = r.fetches();
    assert_eq!(fetched.len(), MESSAGES as usize, "{}", r.all());
    for (_, resp) in fetched {
        let (_, items) = resp.fetch().expect("a FETCH");
        let mut uid = 0;
        let mut flags = Vec::new();
        for item in items {
            match item {
                MessageDataItem::Uid(u) => uid = u.get(),
                MessageDataItem::Flags(fs) => flags.extend(fs.iter().filter_map(|f| match f {
                    FlagFetch::Flag(f) => Some(f.to_string()),
                    FlagFetch::Recent => None,
                })),
                _ => {}
            }
        }
        let mut want: Vec<String> = (0..SESSIONS)
            .flat_map(|s| (0..PASSES).map(move |p| format!("$s{s}p{p}")))
            .collect();
        want.extend(["\\Seen".to_string(), "\\Flagged".to_string()]);
        for w in &want {
            assert!(flags.contains(w), "UID {uid} lost {w}: {flags:?}");
        }
    }
    // the index names each file by its real name (a record left on a stale name would
    // be found by `index check` too)
    let mut indexed: Vec<String> = server
        .indexed_files("alice", "INBOX")
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    let mut on_disk: Vec<String> = server
        .files("alice", "INBOX")
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    indexed.sort();
    on_disk.sort();
    assert_eq!(indexed, on_disk);
    server.assert_clean("alice");
}
