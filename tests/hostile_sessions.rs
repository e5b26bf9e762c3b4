//! Hostile logged-in clients against the real daemon on 127.0.0.1 (issue 15 #24, #27,
//! #28): commands whose cost the client chooses (FETCH items repeated thousands of times,
//! LIST patterns of 60 KB, STATUS on a million made-up names). Each attack measures the
//! process's peak memory (`MEMORY ...`, the daemon runs in this process) and another
//! client's command latency during the attack (`LATENCY ...`); run with `--nocapture` to
//! see them. The figures are in docs/SECURITY.md.

#[allow(dead_code)]
mod hostile_support;
mod imap_support;

use hostile_support::{serial, Bystander, Daemon, Mem};

/// Sends `n` commands made by `command(i)` in bursts of `burst` and reads their answers;
/// returns how many answered OK. Pipelined, so the server, not the round trip, sets
/// the pace.
fn pipelined(
    c: &mut imap_support::Client,
    n: usize,
    burst: usize,
    command: impl Fn(usize) -> String,
) -> usize {
    let mut ok = 0;
    for start in (0..n).step_by(burst) {
        let end = (start + burst).min(n);
        let mut wire = String::new();
        for i in start..end {
            wire.push_str(&format!("P{i} {}\r\n", command(i)));
        }
        c.send(wire);
        for i in start..end {
            let r = c.until(&format!("P{i}"));
            ok += usize::from(r.status() == "OK");
        }
    }
    ok
}

#[test]
fn status_on_made_up_names_leaves_nothing_behind() {
    let _serial = serial();
    let d = Daemon::start("");
    let bystander = Bystander::start("100,000 STATUS on made-up names", d.imap, "bob");
    let mut c = d.login("alice");
    let mem = Mem::start("100,000 STATUS on made-up mailbox names");
    let ok = pipelined(&mut c, 100_000, 500, |i| {
        format!("STATUS made-up-mailbox-name-{i:08} (MESSAGES)")
    });
    assert_eq!(ok, 0, "no such mailboxes");
    c.ok("LOGOUT");
    let grew = mem.finish();
    // each name left about 150 bytes behind before (14 MiB here; the issue saw 329 MiB
    // after a million)
    assert!(grew < 4 * 1024, "grew by {grew} KiB");
    bystander.finish();
}
