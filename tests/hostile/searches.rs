//! Hostile searches (issue 18 with issue 15's rule that every input is bounded): full-text
//! searches that compare every stored text, from several sessions of one user at once.
//! A SEARCH BODY takes its batches on the blocking pool, with helper threads when cores
//! are idle (`crates/imap/src/session/search_batches.rs`); the sessions here ask for more
//! than the machine has. Measured as the other attacks are: the process's peak memory
//! (`MEMORY ...`) and another client's command latency (`LATENCY ...`), plus another
//! user's own BODY search while the attack runs.

use std::time::{Duration, Instant};

use crate::support::daemon::Server;
use crate::support::hostile::{serial, Bystander, Mem, LATENCY_BOUND};
use crate::support::imap::{simple, Reply};

/// Messages in the attacker's INBOX.
const MESSAGES: usize = 3_000;

/// A body of about 4 KB of varied words; every fifth holds `next week`.
fn body(i: usize) -> String {
    let words = [
        "invoice", "meeting", "report", "schedule", "lunch", "budget", "draft", "review",
    ];
    let mut out = String::new();
    let mut x = (i as u32).wrapping_mul(2_654_435_761) | 1;
    while out.len() < 4_000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out.push_str(words[x as usize % words.len()]);
        out.push_str(if x % 11 == 0 { ".\n" } else { " " });
    }
    if i % 5 == 0 {
        out.push_str("see you next week\n");
    }
    out
}

/// The number of UIDs in a `* SEARCH` answer.
fn hits(r: &Reply) -> usize {
    r.lines("* SEARCH")
        .iter()
        .map(|l| l.trim_start_matches("* SEARCH").split_whitespace().count())
        .sum()
}

#[test]
fn body_searches_from_four_sessions_at_once_do_not_hold_up_others() {
    let _serial = serial();
    let d = Server::with_imap_keys("");
    d.deliver("alice", &simple("message 1", &body(1)));
    let cur = d.maildir("alice").join("cur");
    for i in 2..=MESSAGES {
        let name = format!("1700000000.M{i:05}P1.test:2,S");
        std::fs::write(cur.join(name), simple(&format!("message {i}"), &body(i))).unwrap();
    }
    d.deliver("bob", &simple("note", "a short note for next week"));
    let mut clients: Vec<_> = (0..4).map(|_| d.login("alice")).collect();
    for c in &mut clients {
        c.ok("SELECT INBOX");
    }
    // `ice meet` is inside words on both sides, and the word pair it spans (`invoice
    // meeting`) is in nearly every text: neither the word lists nor the signatures
    // narrow it, so nearly every stored text is compared. The first search also indexes
    // the texts, before the attack.
    let search = "SEARCH BODY \"ice meet\"";
    let want = (1..=MESSAGES)
        .filter(|&i| body(i).contains("invoice meeting"))
        .count();
    assert!(want > MESSAGES / 2, "{want}");
    assert_eq!(hits(&clients[0].ok(search)), want);
    let bystander = Bystander::start("4 sessions comparing 3,000 bodies", d.imap, "bob");
    let mut bob = d.login("bob");
    bob.ok("SELECT INBOX");
    let mem = Mem::start("4 sessions comparing 3,000 message bodies, 5 times each");
    let begun = Instant::now();
    let mut bob_slowest = Duration::ZERO;
    for _ in 0..5 {
        for c in &mut clients {
            c.send(format!("S {search}\r\n"));
        }
        let asked = Instant::now();
        assert_eq!(hits(&bob.ok("SEARCH BODY \"next week\"")), 1);
        bob_slowest = bob_slowest.max(asked.elapsed());
        for c in &mut clients {
            let r = c.until("S");
            assert_eq!(r.status(), "OK", "{}", r.all());
            assert_eq!(hits(&r), want);
        }
    }
    eprintln!(
        "20 BODY searches of 3,000 messages in {:.1} s; another user's BODY search took {:.1} ms at most",
        begun.elapsed().as_secs_f64(),
        bob_slowest.as_secs_f64() * 1e3
    );
    drop(clients);
    mem.finish();
    bystander.finish();
    assert!(
        bob_slowest < LATENCY_BOUND,
        "another user's search waited {bob_slowest:?}"
    );
}
