//! `maildex-bench resync`: what a desktop client's reconnect costs (issue 17): a client
//! that knows the folder (UIDVALIDITY, HIGHESTMODSEQ, its UIDs) comes back after another
//! client made `--flags` flag changes and `--expunges` expunges, and resynchronises either
//! with QRESYNC (`ENABLE QRESYNC`, `SELECT INBOX (QRESYNC (v m 1:n))`, RFC 7162 §3.2.5) or
//! in full (`SELECT INBOX`, `UID FETCH 1:* (FLAGS)`, what a client without CONDSTORE does).
//! The first QRESYNC after the changes includes the server's sync of the folder with the
//! Maildir (both servers list it: the other client's renames changed its directory times);
//! the others run once the folder has been synced since, as for a client that reconnects
//! hours later.
//! Against Dovecot and maildex on copies of the same generated Maildir, in one run: wall
//! time, bytes on the wire and the server's CPU for each, and the ratios.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};

use crate::imap_client::Imap;
use crate::servers::{Server, DOMAIN, PASSWORD};

/// The user whose INBOX is resynchronised.
const USER: &str = "resync";

/// Options of `maildex-bench resync`.
pub struct ResyncOpts {
    /// Messages in INBOX.
    pub messages: usize,
    /// Flag changes made while the client is away.
    pub flags: usize,
    /// Expunges made while the client is away.
    pub expunges: usize,
    /// Rounds (each: changes, then both resyncs, on each server).
    pub rounds: usize,
    /// The maildex binary.
    pub maildex_bin: PathBuf,
    /// Work folder.
    pub work: PathBuf,
    /// Dovecot's `mail_fsync`.
    pub dovecot_mail_fsync: String,
}

/// The number in `[NAME n]` of a captured untagged line.
fn code(lines: &[String], name: &str) -> Result<u64> {
    let key = format!("[{name} ");
    lines
        .iter()
        .find_map(|l| {
            let at = l.find(&key)? + key.len();
            l[at..].split(']').next()?.parse().ok()
        })
        .with_context(|| format!("no {name} in the SELECT answer"))
}

fn login(server: &dyn Server) -> Result<Imap> {
    let mut c = Imap::connect_from(server.imap(), None, Duration::from_secs(120))?;
    c.ok(&format!("LOGIN \"{USER}@{DOMAIN}\" \"{PASSWORD}\""))?;
    Ok(c)
}

/// What the client knows when it leaves: (UIDVALIDITY, HIGHESTMODSEQ, highest UID).
fn remember(server: &dyn Server) -> Result<(u64, u64, u64)> {
    let mut c = login(server)?;
    c.capture = true;
    c.ok("SELECT INBOX (CONDSTORE)")?;
    let (v, m, next) = (
        code(&c.captured, "UIDVALIDITY")?,
        code(&c.captured, "HIGHESTMODSEQ")?,
        code(&c.captured, "UIDNEXT")?,
    );
    c.ok("LOGOUT")?;
    Ok((v, m, next.saturating_sub(1)))
}

/// Another client's work while the first is away: flag changes on messages spread over
/// the folder, then expunges of others.
fn changes(server: &dyn Server, flags: usize, expunges: usize, round: usize) -> Result<()> {
    let mut c = login(server)?;
    c.ok("SELECT INBOX")?;
    let n = c.exists.max(1) as usize;
    let step = (n / (flags + expunges + 1)).max(1);
    let flag = if round % 2 == 0 { "+" } else { "-" };
    for i in 0..flags {
        let seq = 1 + (i * step + round) % n;
        c.ok(&format!("STORE {seq} {flag}FLAGS.SILENT (\\Flagged)"))?;
    }
    let mut seqs: Vec<usize> = (0..expunges)
        .map(|i| 1 + ((flags + i) * step + round + 1) % n)
        .collect();
    seqs.sort_unstable();
    seqs.dedup();
    let set: Vec<String> = seqs.iter().map(usize::to_string).collect();
    if !set.is_empty() {
        c.ok(&format!(
            "STORE {} +FLAGS.SILENT (\\Deleted)",
            set.join(",")
        ))?;
        c.ok("EXPUNGE")?;
    }
    c.ok("LOGOUT")?;
    Ok(())
}

/// Runs `commands` on a logged-in connection: (wall ms, bytes received, server CPU ms).
fn timed(server: &dyn Server, setup: &[&str], commands: &[String]) -> Result<(f64, u64, f64)> {
    let mut c = login(server)?;
    for s in setup {
        c.ok(s)?;
    }
    let cpu = || crate::load::server_cpu_ms(server);
    let cpu0 = cpu();
    let (mut wall, mut bytes) = (Duration::ZERO, 0u64);
    for cmd in commands {
        let r = c.ok(cmd)?;
        wall += r.wall;
        bytes += r.bytes;
    }
    let spent = cpu() - cpu0;
    c.ok("LOGOUT")?;
    Ok((wall.as_secs_f64() * 1e3, bytes, spent))
}

fn one_round(server: &dyn Server, o: &ResyncOpts, round: usize) -> Result<Value> {
    let (v, m, max) = remember(server)?;
    changes(server, o.flags, o.expunges, round)?;
    let qresync = [format!("SELECT INBOX (QRESYNC ({v} {m} 1:{max}))")];
    let full = [
        "SELECT INBOX".to_string(),
        "UID FETCH 1:* (FLAGS)".to_string(),
    ];
    // the directory times must be a second old before a sync trusts them (both servers)
    let settle = || std::thread::sleep(Duration::from_millis(1100));
    settle();
    // the first look after the changes: the server syncs the folder with the Maildir
    let cold = timed(server, &["ENABLE QRESYNC"], &qresync)?;
    settle();
    // a reconnect once the folder has been synced since (by any session)
    let warm = timed(server, &["ENABLE QRESYNC"], &qresync)?;
    let full = timed(server, &[], &full)?;
    let point =
        |(ms, bytes, cpu): (f64, u64, f64)| json!({"ms": ms, "bytes": bytes, "server_cpu_ms": cpu});
    Ok(json!({"qresync_first": point(cold), "qresync": point(warm), "full": point(full)}))
}

/// Runs the measurement (see the module docs) and prints a table.
pub fn run(o: &ResyncOpts) -> Result<Value> {
    maildex_dovecot_harness::check_installed()?;
    std::fs::create_dir_all(&o.work)?;
    let (template, bytes) = crate::mixed::one_user_corpus(&o.work, USER, o.messages, 7)?;
    eprintln!(
        "== resync: INBOX of {} messages ({:.1} MB); {} flag changes and {} expunges while away",
        o.messages,
        bytes as f64 / 1e6,
        o.flags,
        o.expunges
    );
    let users = vec![USER.to_owned()];
    let servers = crate::mixed::start_both(
        &o.work,
        &template,
        &users,
        16,
        &o.dovecot_mail_fsync,
        &o.maildex_bin,
    )?;
    // both servers index the folder once before anything is measured
    for s in &servers {
        timed(s.as_ref(), &[], &["SELECT INBOX".to_string()])?;
    }
    let mut rounds = Vec::new();
    for round in 0..o.rounds {
        let mut by_server = Map::new();
        for s in &servers {
            let r = one_round(s.as_ref(), o, round)
                .with_context(|| format!("{} round {round}", s.name()))?;
            let f = |k: &str, f: &str| r[k][f].as_f64().unwrap_or(0.0);
            eprintln!(
                "  round {round} {:8} first QRESYNC {:7.2} ms {:6.1} ms CPU | QRESYNC {:7.2} ms {:7} bytes {:6.1} ms CPU | full {:7.2} ms {:8} bytes {:6.1} ms CPU",
                s.name(),
                f("qresync_first", "ms"),
                f("qresync_first", "server_cpu_ms"),
                f("qresync", "ms"),
                f("qresync", "bytes"),
                f("qresync", "server_cpu_ms"),
                f("full", "ms"),
                f("full", "bytes"),
                f("full", "server_cpu_ms"),
            );
            by_server.insert(s.name().into(), r);
        }
        rounds.push(Value::Object(by_server));
    }
    let median = |server: &str, kind: &str, key: &str| {
        let mut v: Vec<f64> = rounds
            .iter()
            .filter_map(|r| r[server][kind][key].as_f64())
            .collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    if rounds.is_empty() {
        bail!("no rounds");
    }
    let mut table = String::from(
        "| resync | Dovecot ms | maildex ms | ratio | Dovecot bytes | maildex bytes | Dovecot CPU ms | maildex CPU ms |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for kind in ["qresync_first", "qresync", "full"] {
        let (d, m) = (median("dovecot", kind, "ms"), median("maildex", kind, "ms"));
        table.push_str(&format!(
            "| {kind} | {d:.2} | {m:.2} | {:.1}x | {:.0} | {:.0} | {:.1} | {:.1} |\n",
            d / m,
            median("dovecot", kind, "bytes"),
            median("maildex", kind, "bytes"),
            median("dovecot", kind, "server_cpu_ms"),
            median("maildex", kind, "server_cpu_ms"),
        ));
    }
    eprintln!("medians over {} rounds:\n{table}", rounds.len());
    Ok(json!({
        "machine": crate::suite::machine(),
        "messages": o.messages,
        "flags": o.flags,
        "expunges": o.expunges,
        "rounds": rounds,
        "table": table,
    }))
}
