//! Desktop and phone clients reconnecting to a folder they know (issue 17 #4): each keeps a
//! cache (UIDVALIDITY, HIGHESTMODSEQ, every UID with its flags), goes away while another
//! client flags, expunges and new mail arrives, and comes back the way it does:
//! - Thunderbird-style (CONDSTORE, RFC 7162 §3.1): `SELECT (CONDSTORE)`, then
//!   `UID FETCH 1:* (FLAGS) (CHANGEDSINCE m)` for flag changes and new mail, and a
//!   `UID SEARCH` of the known range to find what was expunged;
//! - Apple Mail / K-9-style (QRESYNC, RFC 7162 §3.2.5): `ENABLE QRESYNC`,
//!   `SELECT (QRESYNC (v m known-uids))` answered with VANISHED (EARLIER) and the changed
//!   FETCHes, then `UID FETCH max+1:* (FLAGS)` for the new mail.
//!
//! Each cache must come out equal to the folder as a full fetch shows it, and the resync
//! must move a small fraction of a full resync's bytes (protocol volume, not time).

use std::collections::{BTreeMap, BTreeSet};

use crate::support::daemon::Server;
use crate::support::imap::{Client, Reply};

/// Messages in the folder before the client goes away.
const MESSAGES: u32 = 1500;

/// A client's cache of one folder.
#[derive(Debug, Default, PartialEq)]
struct Cache {
    uidvalidity: u32,
    highest_modseq: u64,
    flags: BTreeMap<u32, BTreeSet<String>>,
}

/// The bytes of a reply as they came over the socket.
fn bytes(r: &Reply) -> usize {
    r.untagged.iter().map(|u| u.raw.len()).sum::<usize>() + r.done.raw.len()
}

/// (UID, flags without `\Recent`) of every FETCH of a reply that carries both.
fn fetched(r: &Reply) -> Vec<(u32, BTreeSet<String>)> {
    r.fetches()
        .iter()
        .filter_map(|(_, resp)| {
            let t = resp.text();
            let uid = t
                .split("UID ")
                .nth(1)?
                .split([' ', ')'])
                .next()?
                .parse()
                .ok()?;
            let flags = t.split("FLAGS (").nth(1)?.split(')').next()?;
            let flags = flags
                .split(' ')
                .filter(|f| !f.is_empty() && *f != "\\Recent")
                .map(String::from)
                .collect();
            Some((uid, flags))
        })
        .collect()
}

/// The UIDs of a `* VANISHED (EARLIER) set` line, expanded.
fn vanished(r: &Reply) -> Vec<u32> {
    let mut out = Vec::new();
    for line in r.lines("* VANISHED (EARLIER) ") {
        let set = line.trim_start_matches("* VANISHED (EARLIER) ").trim();
        for run in set.split(',') {
            let (a, b) = run.split_once(':').unwrap_or((run, run));
            let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
            out.extend(a.min(b)..=a.max(b));
        }
    }
    out
}

/// A first sync: every UID and its flags.
fn full_sync(c: &mut Client) -> (Cache, usize) {
    let r = c.ok("SELECT INBOX (CONDSTORE)");
    let mut cache = Cache {
        uidvalidity: r.expect_code("UIDVALIDITY") as u32,
        highest_modseq: r.expect_code("HIGHESTMODSEQ"),
        ..Cache::default()
    };
    let mut moved = bytes(&r);
    let r = c.ok("UID FETCH 1:* (FLAGS)");
    moved += bytes(&r);
    cache.flags.extend(fetched(&r));
    (cache, moved)
}

/// What the client missed: flags on 40 messages, 30 expunged, 12 delivered.
fn meanwhile(s: &Server) {
    let mut other = s.select("alice", "INBOX");
    other.ok("STORE 100:139 +FLAGS.SILENT (\\Flagged $Important)");
    other.ok("STORE 600:629 +FLAGS.SILENT (\\Deleted)");
    other.ok("EXPUNGE");
    other.ok("LOGOUT");
    for i in 0..12 {
        s.deliver("alice", &msg(MESSAGES + i));
    }
}

fn msg(i: u32) -> String {
    format!("From: a@example.net\nSubject: message {i}\n\nbody {i}\n")
}

/// Thunderbird-style: CONDSTORE only.
fn condstore_resync(c: &mut Client, cache: &mut Cache) -> usize {
    let r = c.ok("SELECT INBOX (CONDSTORE)");
    assert_eq!(r.expect_code("UIDVALIDITY") as u32, cache.uidvalidity);
    let mut moved = bytes(&r);
    let highest = r.expect_code("HIGHESTMODSEQ");
    let r = c.ok(&format!(
        "UID FETCH 1:* (FLAGS) (CHANGEDSINCE {})",
        cache.highest_modseq
    ));
    moved += bytes(&r);
    cache.flags.extend(fetched(&r));
    // what of the known range is still there
    let known_max = *cache.flags.keys().next_back().unwrap();
    let r = c.ok(&format!("UID SEARCH UID 1:{known_max}"));
    moved += bytes(&r);
    let present: BTreeSet<u32> = r
        .lines("* SEARCH")
        .iter()
        .flat_map(|l| {
            l.trim_start_matches("* SEARCH")
                .split_whitespace()
                .map(|n| n.parse::<u32>().unwrap())
                .collect::<Vec<_>>()
        })
        .collect();
    cache
        .flags
        .retain(|u, _| *u > known_max || present.contains(u));
    cache.highest_modseq = highest;
    moved
}

/// Apple Mail / K-9-style: QRESYNC.
fn qresync_resync(c: &mut Client, cache: &mut Cache) -> usize {
    let r = c.ok("ENABLE QRESYNC");
    let mut moved = bytes(&r);
    let known_max = *cache.flags.keys().next_back().unwrap();
    let r = c.ok(&format!(
        "SELECT INBOX (QRESYNC ({} {} 1:{known_max}))",
        cache.uidvalidity, cache.highest_modseq
    ));
    moved += bytes(&r);
    for uid in vanished(&r) {
        cache.flags.remove(&uid);
    }
    cache.flags.extend(fetched(&r));
    cache.highest_modseq = r.expect_code("HIGHESTMODSEQ");
    let r = c.ok(&format!("UID FETCH {}:* (FLAGS)", known_max + 1));
    moved += bytes(&r);
    cache.flags.extend(fetched(&r));
    moved
}

#[test]
fn thunderbird_and_apple_style_reconnects_resync_from_the_change_log() {
    let s = Server::start();
    for i in 0..MESSAGES {
        s.deliver("alice", &msg(i));
    }
    let mut tb = s.login("alice");
    let (mut tb_cache, full_bytes) = full_sync(&mut tb);
    tb.ok("LOGOUT");
    let mut apple = s.login("alice");
    let (mut apple_cache, _) = full_sync(&mut apple);
    apple.ok("LOGOUT");
    assert_eq!(tb_cache.flags.len(), MESSAGES as usize);

    meanwhile(&s);

    let mut tb = s.login("alice");
    let tb_bytes = condstore_resync(&mut tb, &mut tb_cache);
    let mut apple = s.login("alice");
    let apple_bytes = qresync_resync(&mut apple, &mut apple_cache);

    // both caches now hold what a new client would fetch
    let mut fresh = s.login("alice");
    let (truth, _) = full_sync(&mut fresh);
    assert_eq!(truth.flags.len(), MESSAGES as usize - 30 + 12);
    assert_eq!(tb_cache, truth, "Thunderbird-style cache");
    assert_eq!(apple_cache, truth, "Apple-style cache");
    // the flag changes are there, the expunged messages are gone
    assert!(
        truth
            .flags
            .values()
            .filter(|f| f.contains("$Important"))
            .count()
            == 40
    );

    // a resync moves a small part of a full sync's bytes: QRESYNC least (the expunges as
    // one VANISHED range, no UID list of the folder)
    assert!(
        apple_bytes * 10 < full_bytes,
        "QRESYNC resync {apple_bytes} bytes, full sync {full_bytes}"
    );
    assert!(
        tb_bytes * 3 < full_bytes,
        "CONDSTORE resync {tb_bytes} bytes, full sync {full_bytes}"
    );
    assert!(apple_bytes < tb_bytes, "{apple_bytes} vs {tb_bytes}");
}
