//! `maildex-bench mixed`: per-command latency under concurrent load (issue 15 item 22).
//!
//! N clients (threads, one IMAP connection each, over loopback) share one user's two
//! mailboxes (INBOX and `Archive`, half the clients on each) and run a random mix of
//! APPEND, STORE, EXPUNGE, FETCH, SEARCH and COPY for a bounded time, against Dovecot and
//! maildex on copies of the same generated Maildir, one server after the other in the
//! same run. Each command's wall time (sent to tagged response) is recorded by type; the
//! report gives median, p90, p99 and max per type and the ratio to Dovecot.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{json, Map, Value};

use crate::imap_client::Imap;
use crate::load::source_ip;
use crate::servers::{DovecotServer, MaildexServer, Server, DOMAIN, PASSWORD};

/// The user whose mailboxes every client shares.
const USER: &str = "mixed";
/// The two shared mailboxes; COPY goes from a client's mailbox to the other one.
const MAILBOXES: [&str; 2] = ["INBOX", "Archive"];

/// Command types, in report order.
pub const KINDS: [&str; 6] = ["APPEND", "STORE", "EXPUNGE", "FETCH", "SEARCH", "COPY"];
/// Relative weights of the kinds above in the random mix.
const WEIGHTS: [u32; 6] = [10, 25, 8, 32, 15, 10];

/// Options of `maildex-bench mixed`.
pub struct MixedOpts {
    /// Client counts, one run per count and server.
    pub clients: Vec<usize>,
    /// Seconds each run lasts.
    pub secs: u64,
    /// Messages in INBOX at the start (Archive starts with a tenth of that).
    pub messages: usize,
    /// Rounds: each round runs every client count against every server.
    pub rounds: usize,
    /// The maildex binary.
    pub maildex_bin: PathBuf,
    /// Work folder (short: Dovecot's sockets live under it).
    pub work: PathBuf,
    /// Dovecot's `mail_fsync`.
    pub dovecot_mail_fsync: String,
    /// Commands per second offered by all clients together (paced), or None for a closed
    /// loop (each client sends its next command as soon as the last one is answered).
    pub rate: Option<f64>,
}

/// A small xorshift generator: the mix must be the same for both servers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// 1..=n (n >= 1).
    fn one_to(&mut self, n: u64) -> u64 {
        1 + self.next() % n.max(1)
    }
    fn kind(&mut self) -> usize {
        let total: u32 = WEIGHTS.iter().sum();
        let mut x = (self.next() % u64::from(total)) as u32;
        for (i, w) in WEIGHTS.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        0
    }
}

/// A message to APPEND (about 2 kB, CRLF line ends as on the wire).
fn append_message(client: usize, n: u64) -> String {
    let mut m = format!(
        "From: Load Client {client} <client{client}@example.net>\r\nTo: {USER}@{DOMAIN}\r\n\
         Subject: mixed load {client}-{n}\r\nDate: Tue, 3 Jan 2023 10:00:00 +0000\r\n\
         Message-ID: <mixed{client}.{n}@example.net>\r\n\r\n"
    );
    for i in 0..30 {
        m.push_str(&format!(
            "line {i} of a message appended under load, {n}\r\n"
        ));
    }
    m
}

/// One client's run: the latencies per kind (microseconds) and NO/BAD answers.
#[derive(Default)]
struct ClientResult {
    micros: [Vec<u64>; 6],
    refused: [u64; 6],
}

fn one_command(
    c: &mut Imap,
    kind: usize,
    rng: &mut Rng,
    client: usize,
    mine: usize,
) -> Result<Duration> {
    let exists = c.exists.max(1);
    let seq = rng.one_to(exists);
    let other = MAILBOXES[1 - mine];
    let r = match KINDS[kind] {
        "APPEND" => {
            let m = append_message(client, rng.next() % 1_000_000);
            // LITERAL+ (RFC 7888): both servers announce it; no continuation round trip
            c.run(&format!(
                "APPEND \"{}\" {{{}+}}\r\n{m}",
                MAILBOXES[mine],
                m.len()
            ))?
        }
        "STORE" => {
            let (sign, flag) = match rng.next() % 4 {
                0 => ("+", "\\Seen"),
                1 => ("-", "\\Seen"),
                2 => ("+", "\\Flagged"),
                _ => ("-", "\\Flagged"),
            };
            c.run(&format!("STORE {seq} {sign}FLAGS ({flag})"))?
        }
        "EXPUNGE" => {
            c.run(&format!("STORE {seq} +FLAGS.SILENT (\\Deleted)"))?;
            c.run("EXPUNGE")?
        }
        "FETCH" => {
            if rng.next() % 2 == 0 {
                let end = (seq + 19).min(exists);
                c.run(&format!(
                    "FETCH {seq}:{end} (UID FLAGS RFC822.SIZE ENVELOPE)"
                ))?
            } else {
                c.run(&format!("FETCH {seq} (BODY.PEEK[])"))?
            }
        }
        "SEARCH" => {
            if rng.next() % 2 == 0 {
                c.run("SEARCH UNSEEN FLAGGED")?
            } else {
                c.run("SEARCH SUBJECT \"mixed load\"")?
            }
        }
        _ => c.run(&format!("COPY {seq} \"{other}\""))?,
    };
    if !c.last_status.contains(" OK") {
        anyhow::bail!("{}", c.last_status);
    }
    Ok(r.wall)
}

/// How a client's commands are sent: a closed loop or a fixed schedule.
#[derive(Clone, Copy)]
enum Pace {
    /// The next command as soon as the last one is answered: the faster server is offered
    /// more load, so its latencies include more queueing than the slower one's.
    Closed,
    /// One command every this long per client (the same offered load for both servers).
    /// Each command is timed from when its schedule said to send it, not from when it was
    /// sent, so a server that falls behind is charged the wait (no coordinated omission).
    Every(Duration),
}

fn client_run(
    addr: std::net::SocketAddr,
    client: usize,
    seed: u64,
    start: &Barrier,
    secs: u64,
    pace: Pace,
) -> Result<ClientResult> {
    let mine = client % 2;
    let mut c = Imap::open_from(
        addr,
        Some(source_ip(client)),
        &format!("{USER}@{DOMAIN}"),
        PASSWORD,
        MAILBOXES[mine],
        Duration::from_secs(60),
    )?;
    let mut rng = Rng(seed ^ (client as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut out = ClientResult::default();
    start.wait();
    let began = Instant::now();
    let deadline = began + Duration::from_secs(secs);
    // clients start spread over one interval, not all at once
    let mut due = match pace {
        Pace::Closed => began,
        Pace::Every(every) => began + every.mul_f64((rng.next() % 1000) as f64 / 1000.0),
    };
    while Instant::now() < deadline {
        let late = match pace {
            Pace::Closed => Duration::ZERO,
            Pace::Every(every) => {
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                let late = Instant::now().saturating_duration_since(due);
                due += every;
                late
            }
        };
        let kind = rng.kind();
        match one_command(&mut c, kind, &mut rng, client, mine) {
            Ok(wall) => out.micros[kind].push((late + wall).as_micros() as u64),
            // a message expunged meanwhile (RFC 2180): counted, not timed
            Err(_) if c.last_status.contains(" NO ") => out.refused[kind] += 1,
            Err(e) => return Err(e.context(format!("client {client}, {}", KINDS[kind]))),
        }
    }
    let _ = c.run("LOGOUT");
    Ok(out)
}

/// Percentile `p` (0-100) of sorted values, nearest rank.
fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One run of `clients` clients against `server`.
fn run_once(
    server: &dyn Server,
    clients: usize,
    secs: u64,
    seed: u64,
    rate: Option<f64>,
) -> Result<Value> {
    let pace = match rate {
        Some(r) if r > 0.0 => Pace::Every(Duration::from_secs_f64(clients as f64 / r)),
        _ => Pace::Closed,
    };
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    let addr = server.imap();
    let start = Arc::new(Barrier::new(clients + 1));
    let handles: Vec<_> = (0..clients)
        .map(|i| {
            let start = Arc::clone(&start);
            std::thread::spawn(move || client_run(addr, i, seed, &start, secs, pace))
        })
        .collect();
    start.wait();
    let t = Instant::now();
    let mut all = ClientResult::default();
    for h in handles {
        let r = h
            .join()
            .map_err(|_| anyhow::anyhow!("client thread panicked"))??;
        for k in 0..KINDS.len() {
            all.micros[k].extend_from_slice(&r.micros[k]);
            all.refused[k] += r.refused[k];
        }
    }
    let wall = t.elapsed().as_secs_f64();
    let mut kinds = Map::new();
    let mut total = 0;
    for (k, name) in KINDS.iter().enumerate() {
        let v = &mut all.micros[k];
        v.sort_unstable();
        total += v.len();
        let ms = |us: u64| us as f64 / 1000.0;
        kinds.insert(
            (*name).into(),
            json!({
                "count": v.len(),
                "refused": all.refused[k],
                "p50_ms": ms(percentile(v, 50.0)),
                "p90_ms": ms(percentile(v, 90.0)),
                "p99_ms": ms(percentile(v, 99.0)),
                "max_ms": ms(v.last().copied().unwrap_or(0)),
            }),
        );
    }
    Ok(json!({
        "clients": clients,
        "secs": wall,
        "commands": total,
        "per_sec": total as f64 / wall,
        "kinds": kinds,
    }))
}

/// Writes a generated INBOX of `messages` for `user` under `work/template` (the mail root
/// both servers get a copy of); returns the template and the corpus's bytes.
pub fn one_user_corpus(
    work: &Path,
    user: &str,
    messages: usize,
    seed: u64,
) -> Result<(PathBuf, u64)> {
    let template = work.join("template");
    let user_dir = template.join(DOMAIN).join(user);
    std::fs::create_dir_all(user_dir.parent().context("domain")?)?;
    let gen = work.join("gen");
    let spec = maildex_corpus::Spec {
        seed,
        users: 1,
        messages_per_user: messages,
        folders: false,
        size_scale: 0.3,
    };
    let stats = maildex_corpus::generate(&spec, &gen)?;
    let maildir = maildex_corpus::user_maildir(&gen, 0);
    std::fs::rename(maildir.parent().context("user dir")?, &user_dir)?;
    std::fs::remove_dir_all(&gen)?;
    Ok((template, stats.bytes))
}

/// Copies the mail root `template` for Dovecot and maildex (then removes it) and starts
/// both on loopback: Dovecot first.
pub fn start_both(
    work: &Path,
    template: &Path,
    users: &[String],
    max_connections: usize,
    dovecot_mail_fsync: &str,
    maildex_bin: &Path,
) -> Result<Vec<Box<dyn Server>>> {
    for name in ["dovecot", "maildex"] {
        let dst = work.join(name);
        std::fs::create_dir_all(&dst)?;
        let st = Command::new("cp")
            .arg("-a")
            .arg(template)
            .arg(dst.join("mail"))
            .status()?;
        anyhow::ensure!(st.success(), "cp -a of the corpus failed");
    }
    std::fs::remove_dir_all(template)?;
    Ok(vec![
        Box::new(DovecotServer::start(
            &work.join("dc"),
            &work.join("dovecot/mail"),
            users,
            max_connections,
            dovecot_mail_fsync,
        )?),
        Box::new(MaildexServer::start(
            maildex_bin,
            &work.join("mx"),
            &work.join("maildex/mail"),
            users,
        )?),
    ])
}

/// Writes the corpus: `messages` in INBOX, a tenth of that in Archive.
fn prepare(work: &Path, messages: usize, seed: u64) -> Result<PathBuf> {
    let (template, bytes) = one_user_corpus(work, USER, messages, seed)?;
    let user_dir = template.join(DOMAIN).join(USER);
    // Archive: a Maildir++ folder holding a copy of every tenth INBOX message
    let inbox = user_dir.join("Maildir");
    let archive = inbox.join(format!(".{}", MAILBOXES[1]));
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(archive.join(sub))?;
    }
    for sub in ["cur", "new"] {
        let mut names: Vec<_> = std::fs::read_dir(inbox.join(sub))?
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        names.sort();
        for (i, n) in names.iter().enumerate().filter(|(i, _)| i % 10 == 0) {
            let name = n.to_string_lossy();
            // a distinct base name per copy (Maildir unique names)
            let copy = format!("{i}.arch.{name}");
            std::fs::copy(inbox.join(sub).join(n), archive.join(sub).join(copy))?;
        }
    }
    eprintln!(
        "corpus: {messages} messages, {:.1} MB, in INBOX; every tenth copied to {}",
        bytes as f64 / 1e6,
        MAILBOXES[1]
    );
    Ok(template)
}

/// Runs the mixed workload; returns the results document.
pub fn run(o: &MixedOpts) -> Result<Value> {
    maildex_dovecot_harness::check_installed()?;
    let work = &o.work;
    std::fs::create_dir_all(work)?;
    let seed = 42;
    let template = prepare(work, o.messages, seed)?;
    let users = vec![USER.to_owned()];
    let max_clients = o.clients.iter().copied().max().unwrap_or(0);
    let servers = start_both(
        work,
        &template,
        &users,
        max_clients + 16,
        &o.dovecot_mail_fsync,
        &o.maildex_bin,
    )?;
    let mut runs = Vec::new();
    for round in 0..o.rounds {
        for &n in &o.clients {
            // alternate the order so that neither server always runs second
            let order: Vec<usize> = if (round + n) % 2 == 0 {
                vec![0, 1]
            } else {
                vec![1, 0]
            };
            let mut by_server = Map::new();
            for i in order {
                let s = servers[i].as_ref();
                let r = run_once(s, n, o.secs, seed + round as u64, o.rate)
                    .with_context(|| format!("{} with {n} clients", s.name()))?;
                eprintln!(
                    "  round {round} {:8} {n:3} clients: {:.0} commands/s",
                    s.name(),
                    r["per_sec"].as_f64().unwrap_or(0.0)
                );
                by_server.insert(s.name().into(), r);
            }
            let table = markdown_table(&by_server);
            eprintln!("{table}");
            runs.push(json!({"round": round, "clients": n, "servers": by_server}));
        }
    }
    Ok(json!({
        "machine": crate::suite::machine(),
        "messages": o.messages,
        "secs": o.secs,
        "rate": o.rate,
        "dovecot_mail_fsync": o.dovecot_mail_fsync,
        "runs": runs,
    }))
}

/// A markdown table of one run (both servers): per kind, count, p50/p90/p99/max of each
/// and the ratios Dovecot ÷ maildex of p50 and p99 (above 1× maildex is faster).
pub fn markdown_table(by_server: &Map<String, Value>) -> String {
    let (d, m) = (&by_server["dovecot"], &by_server["maildex"]);
    let mut t = format!(
        "{} clients: Dovecot {:.0} commands/s, maildex {:.0} commands/s\n\n\
         | command | Dovecot n | p50 | p90 | p99 | max | maildex n | p50 | p90 | p99 | max | p50 ratio | p99 ratio |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        d["clients"],
        d["per_sec"].as_f64().unwrap_or(0.0),
        m["per_sec"].as_f64().unwrap_or(0.0)
    );
    let f = |v: &Value, k: &str, key: &str| v["kinds"][k][key].as_f64().unwrap_or(0.0);
    for k in KINDS {
        let ratio = |key: &str| {
            let (a, b) = (f(d, k, key), f(m, k, key));
            if b > 0.0 {
                format!("{:.2}×", a / b)
            } else {
                "-".into()
            }
        };
        t.push_str(&format!(
            "| {k} | {:.0} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} | {:.1} | {:.1} | {:.1} | {:.0} | {} | {} |\n",
            f(d, k, "count"),
            f(d, k, "p50_ms"),
            f(d, k, "p90_ms"),
            f(d, k, "p99_ms"),
            f(d, k, "max_ms"),
            f(m, k, "count"),
            f(m, k, "p50_ms"),
            f(m, k, "p90_ms"),
            f(m, k, "p99_ms"),
            f(m, k, "max_ms"),
            ratio("p50_ms"),
            ratio("p99_ms"),
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
    }

    #[test]
    fn the_mix_draws_every_kind() {
        let mut rng = Rng(42);
        let mut seen = [0usize; 6];
        for _ in 0..10_000 {
            seen[rng.kind()] += 1;
        }
        assert!(seen.iter().all(|&n| n > 300), "{seen:?}");
    }
}
