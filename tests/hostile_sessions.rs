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

#[test]
fn list_patterns_of_60_kb_are_refused_and_long_ones_stay_cheap() {
    let _serial = serial();
    let d = Daemon::start("");
    let mut c = d.login("alice");
    let made = pipelined(&mut c, 300, 100, |i| format!("CREATE Folder{i:03}.Sub"));
    assert_eq!(made, 300);
    let bystander = Bystander::start("LIST with 60 KB and 1 KB patterns", d.imap, "bob");
    let mem = Mem::start("LIST and LSUB with 60 KB and 1 KB patterns over 600 mailboxes");
    let huge = format!("\"{}x\"", "*".repeat(60_000));
    let long = format!("\"{}x\"", "*%".repeat(500));
    let mut attackers: Vec<_> = (0..4).map(|_| d.login("alice")).collect();
    for a in &mut attackers {
        // RFC 5530 §3: a server limit
        let r = a.cmd(&format!("LIST \"\" {huge}"));
        assert_eq!(r.status(), "NO", "{}", r.done.text());
        assert!(r.done.text().contains("[LIMIT]"), "{}", r.done.text());
        let r = a.cmd(&format!("LSUB \"\" {huge}"));
        assert_eq!(r.status(), "NO", "{}", r.done.text());
    }
    // just under the cap: answered, and cheaply
    let ok = pipelined(&mut attackers[0], 40, 10, |_| format!("LIST \"\" {long}"));
    assert_eq!(ok, 40);
    let r = c.ok("LIST \"\" *%x");
    assert!(r.untagged.is_empty(), "no name ends in x: {}", r.all());
    let r = c.ok("LIST \"\" Folder1*.%");
    assert_eq!(r.untagged.len(), 100, "{}", r.all());
    drop(attackers);
    mem.finish();
    bystander.finish();
}
