//! `maildex-bench delivered`: the first listing of mail that arrived over LMTP one message
//! at a time (issue 19 #2), Dovecot and maildex side by side in one run.
//!
//! The same generated messages go two ways into each server's copy of the mail root: one
//! user (`fresh`) receives them over LMTP, one transaction each, one session, as postfix
//! hands them over, after one login that listed the still empty INBOX (Dovecot's LMTP
//! updates an index but creates none); another (`bulk`) has them as a copied Maildir. Both servers are then
//! restarted (fresh processes; Dovecot keeps what its LMTP and that login wrote; maildex
//! keeps the index written at delivery), and the mutt listing of `fresh`'s INBOX is timed
//! first and warm. The bulk side gives the reference the issue names: maildex's
//! first listing of a folder indexed in one go (`maildex index rebuild`, then a restart)
//! and Dovecot's of the copied Maildir (index dropped, as the listing workload's `first`).
//! The LMTP rate of the delivery is reported too (one session, so latency-bound).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{json, Map, Value};

use crate::listing::{median_ms, MUTT};
use crate::lmtp_client::{dot_stuff, Lmtp};
use crate::servers::{Server, DOMAIN};

/// The user whose mail arrives over LMTP.
const FRESH: &str = "fresh";
/// The user whose mail is a copied Maildir of the same messages.
const BULK: &str = "bulk";

/// Options of `maildex-bench delivered`.
pub struct DeliveredOpts {
    /// Messages delivered, one corpus each.
    pub sizes: Vec<usize>,
    /// Warm repeats of the listing.
    pub rounds: usize,
    /// The maildex binary.
    pub maildex_bin: PathBuf,
    /// Work folder.
    pub work: PathBuf,
    /// Dovecot's `mail_fsync`.
    pub dovecot_mail_fsync: String,
}

/// The corpus's message files in name order (the order they are delivered in).
fn messages(maildir: &Path) -> Result<Vec<Vec<u8>>> {
    let mut paths = Vec::new();
    for sub in ["new", "cur"] {
        for e in std::fs::read_dir(maildir.join(sub))? {
            paths.push(e?.path());
        }
    }
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read(p).with_context(|| format!("reading {}", p.display())))
        .collect()
}

/// Delivers every message to `fresh` over one LMTP session; returns messages per second.
/// The user has logged in once before (an empty INBOX listed), so Dovecot's LMTP finds an
/// index to update: it creates none for a mailbox that has none yet.
fn deliver(server: &dyn Server, wires: &[Vec<u8>]) -> Result<f64> {
    crate::listing::one(server, FRESH, MUTT).context("listing the empty INBOX")?;
    let mut c = Lmtp::connect(server.lmtp(), Duration::from_secs(60))?;
    let rcpt = [format!("{FRESH}@{DOMAIN}")];
    let t = Instant::now();
    for w in wires {
        c.deliver_wire("bench@example.net", &rcpt, w)?;
    }
    let secs = t.elapsed().as_secs_f64();
    c.quit();
    Ok(wires.len() as f64 / secs)
}

/// Times of the mutt listing of `user`'s INBOX: first (right after `restart`: one run,
/// since a listing leaves state behind that a second first would find) and warm (the
/// median of `rounds` more), in ms; fails unless every listing has `messages` responses.
fn first_and_warm(
    server: &mut dyn Server,
    user: &str,
    messages: usize,
    rounds: usize,
    restart: fn(&mut dyn Server) -> Result<()>,
) -> Result<(f64, f64)> {
    let listing = |server: &mut dyn Server| -> Result<Duration> {
        let (_, reply) = crate::listing::one(server, user, MUTT)?;
        anyhow::ensure!(
            reply.untagged >= messages as u64,
            "{} listed {} messages of {user}'s INBOX, not {messages}",
            server.name(),
            reply.untagged
        );
        Ok(reply.wall)
    };
    restart(server)?;
    let first = listing(server)?;
    let warm: Vec<Duration> = (0..rounds.max(1))
        .map(|_| listing(server))
        .collect::<Result<_>>()?;
    Ok((first.as_secs_f64() * 1e3, median_ms(&warm)))
}

/// Runs the measurement (see the module docs) and prints a table.
pub fn run(o: &DeliveredOpts) -> Result<Value> {
    maildex_dovecot_harness::check_installed()?;
    let mut table = String::from(
        "| messages | LMTP msg/s (Dovecot / maildex) | delivered: first ms Dovecot / maildex (ratio) | delivered: warm ms (ratio) | bulk: first ms Dovecot / maildex (ratio) | maildex first, delivered / bulk |\n\
         |---:|---|---|---|---|---:|\n",
    );
    let mut sizes = Vec::new();
    for &n in &o.sizes {
        let work = o.work.join(format!("n{n}"));
        std::fs::create_dir_all(&work)?;
        let (template, bytes) = crate::mixed::one_user_corpus(&work, BULK, n, 19)?;
        let wires: Vec<Vec<u8>> = messages(&template.join(DOMAIN).join(BULK).join("Maildir"))?
            .iter()
            .map(|m| {
                let mut w = Vec::new();
                dot_stuff(m, &mut w);
                w
            })
            .collect();
        let fresh = template.join(DOMAIN).join(FRESH).join("Maildir");
        for sub in ["cur", "new", "tmp"] {
            std::fs::create_dir_all(fresh.join(sub))?;
        }
        eprintln!("== delivered: {n} messages ({:.1} MB)", bytes as f64 / 1e6);
        let users = vec![FRESH.to_owned(), BULK.to_owned()];
        let mut servers = crate::mixed::start_both(
            &work,
            &template,
            &users,
            16,
            &o.dovecot_mail_fsync,
            &o.maildex_bin,
        )?;
        let mut by_server = Map::new();
        for s in servers.iter_mut() {
            let rate = deliver(s.as_ref(), &wires).with_context(|| format!("{} LMTP", s.name()))?;
            let (first, warm) = first_and_warm(s.as_mut(), FRESH, n, o.rounds, |s| s.restart())?;
            // before the bulk side's cold restart, which drops Dovecot's index files
            let index_bytes = s.index_bytes(FRESH);
            if s.name() == "maildex" {
                s.rebuild_index(BULK)?;
            }
            let (bulk_first, bulk_warm) = first_and_warm(s.as_mut(), BULK, n, o.rounds, |s| {
                if s.name() == "maildex" {
                    s.restart()
                } else {
                    s.cold_restart()
                }
            })?;
            eprintln!(
                "  {n:6} {:8} LMTP {rate:7.0} msg/s; delivered: first {first:8.1} ms warm {warm:7.1} ms; bulk: first {bulk_first:8.1} ms warm {bulk_warm:7.1} ms",
                s.name()
            );
            by_server.insert(
                s.name().into(),
                json!({
                    "lmtp_per_sec": rate,
                    "delivered_first_ms": first,
                    "delivered_warm_ms": warm,
                    "bulk_first_ms": bulk_first,
                    "bulk_warm_ms": bulk_warm,
                    "index_bytes_delivered": index_bytes,
                    "index_bytes_bulk": s.index_bytes(BULK),
                }),
            );
        }
        let f = |server: &str, k: &str| by_server[server][k].as_f64().unwrap_or(f64::NAN);
        table.push_str(&format!(
            "| {n} | {:.0} / {:.0} | {:.1} / {:.1} ({:.1}x) | {:.1} / {:.1} ({:.1}x) | {:.1} / {:.1} ({:.1}x) | {:.2} |\n",
            f("dovecot", "lmtp_per_sec"),
            f("maildex", "lmtp_per_sec"),
            f("dovecot", "delivered_first_ms"),
            f("maildex", "delivered_first_ms"),
            f("dovecot", "delivered_first_ms") / f("maildex", "delivered_first_ms"),
            f("dovecot", "delivered_warm_ms"),
            f("maildex", "delivered_warm_ms"),
            f("dovecot", "delivered_warm_ms") / f("maildex", "delivered_warm_ms"),
            f("dovecot", "bulk_first_ms"),
            f("maildex", "bulk_first_ms"),
            f("dovecot", "bulk_first_ms") / f("maildex", "bulk_first_ms"),
            f("maildex", "delivered_first_ms") / f("maildex", "bulk_first_ms"),
        ));
        drop(servers);
        std::fs::remove_dir_all(&work)?;
        sizes.push(json!({"messages": n, "mail_bytes": bytes, "servers": by_server}));
    }
    eprintln!("{table}");
    Ok(json!({
        "machine": crate::suite::machine(),
        "rounds": o.rounds,
        "sizes": sizes,
        "table": table,
    }))
}
