//! Load workloads: LMTP throughput (one client process per session), memory per idle
//! connection and the time for all IDLE connections to see one delivery, and FETCH 1:*
//! BODY[] of multi-MB messages with the server's peak memory.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use maildex_corpus::{Generator, Role};
use maildex_dovecot_harness::procs;
use serde_json::{json, Value};

use crate::imap_client::Imap;
use crate::listing::median_ms;
use crate::lmtp_client::Lmtp;
use crate::servers::{Server, DOMAIN, PASSWORD};

/// The LMTP recipient `i` (0-based) of the throughput test.
pub fn rcpt_user(i: usize) -> String {
    format!("rcpt{:04}", i + 1)
}

/// The idle user `i` (0-based, of 16).
pub fn idle_user(i: usize) -> String {
    format!("idle{:02}", i + 1)
}

/// Idle connections per client address: both servers cap connections per address
/// (maildex at 100, Dovecot per user and address), so connection `i` comes from
/// 127.0.0.(2 + i / 50), a loopback address like any other.
pub fn source_ip(i: usize) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(127, 0, (2 + i / 50 / 250) as u8, (2 + (i / 50) % 250) as u8)
}

/// Number of mailboxes the idle connections are spread over.
pub const IDLE_USERS: usize = 16;

/// The hidden `lmtp-client` subcommand: one LMTP session in its own process. Generates its
/// messages first, prints `ready`, waits for a line on stdin, delivers, prints
/// `done <messages> <bytes> <seconds>`.
pub fn lmtp_client_main(
    addr: SocketAddr,
    session: usize,
    messages: usize,
    users: usize,
    first_msg: usize,
    seed: u64,
    scale: f64,
) -> Result<()> {
    let mut gen = Generator::for_user(seed, 10_000 + session, scale);
    let msgs: Vec<(String, Vec<u8>)> = (0..messages)
        .map(|_| {
            let g = gen.next_message(Role::Inbox);
            let from = g
                .lmtp
                .as_ref()
                .map_or_else(|| "bench@example.net".to_owned(), |(f, _)| f.clone());
            // in DATA's wire form before the clock starts, as an MTA has it in its queue
            let mut wire = Vec::new();
            crate::lmtp_client::dot_stuff(g.lmtp_data(), &mut wire);
            (from, wire)
        })
        .collect();
    let mut c = Lmtp::connect(addr, Duration::from_secs(60))?;
    println!("ready");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let (t, mut bytes) = (Instant::now(), 0usize);
    for (k, (from, msg)) in msgs.iter().enumerate() {
        // Spread messages over users round-robin across all sessions.
        let rcpt = format!("{}@{DOMAIN}", rcpt_user((first_msg + k) % users.max(1)));
        c.deliver_wire(from, &[rcpt], msg)?;
        bytes += msg.len();
    }
    let secs = t.elapsed().as_secs_f64();
    c.quit();
    println!("done {} {bytes} {secs}", msgs.len());
    Ok(())
}

/// CPU time used so far by the server's processes (ms).
pub(crate) fn server_cpu_ms(server: &dyn Server) -> f64 {
    server.root_pid().map(procs::tree_cpu_ms).unwrap_or(0.0)
}

/// The server's CPU once it has gone quiet after a run: work it left for after the last
/// reply (maildex's background full-text indexer) counted too. Sampled every 250 ms until
/// one interval adds under 2 ms, at most 60 s.
pub(crate) fn settled_cpu_ms(server: &dyn Server) -> f64 {
    let mut last = server_cpu_ms(server);
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(250));
        let now = server_cpu_ms(server);
        if now - last < 2.0 {
            return now;
        }
        last = now;
    }
    last
}

/// Write requests and kB written so far to the block device holding `path`
/// (`/sys/dev/block/MAJ:MIN/stat`, fields 5 and 7; a partition has its own), None where
/// that is not readable.
fn disk_writes(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let stat = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).ok()?;
    let f: Vec<u64> = stat
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    Some((*f.get(4)?, *f.get(6)? / 2))
}

/// LMTP throughput: `messages` to `users` over `sessions` client processes.
pub fn lmtp_throughput(
    server: &dyn Server,
    messages: usize,
    users: usize,
    sessions: usize,
    seed: u64,
    scale: f64,
) -> Result<Value> {
    let exe = std::env::current_exe()?;
    let per = messages.div_ceil(sessions.max(1));
    let mut kids = Vec::new();
    for s in 0..sessions {
        let n = per.min(messages.saturating_sub(s * per));
        let mut child = Command::new(&exe)
            .arg("lmtp-client")
            .args(["--addr", &server.lmtp().to_string()])
            .args(["--session", &s.to_string()])
            .args(["--messages", &n.to_string()])
            .args(["--users", &users.to_string()])
            .args(["--first", &(s * per).to_string()])
            .args(["--seed", &seed.to_string()])
            .args(["--scale", &scale.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting an lmtp-client process")?;
        let stdout = child.stdout.take().context("lmtp-client stdout")?;
        kids.push((child, BufReader::new(stdout)));
    }
    for (_, out) in &mut kids {
        let mut line = String::new();
        out.read_line(&mut line)?;
        if line.trim() != "ready" {
            bail!("lmtp-client did not get ready: {line:?}");
        }
    }
    let cpu0 = server_cpu_ms(server);
    let disk0 = disk_writes(server.mail_root());
    let t = Instant::now();
    for (child, _) in &mut kids {
        if let Some(stdin) = child.stdin.as_mut() {
            stdin.write_all(b"go\n")?;
        }
    }
    let (mut delivered, mut bytes) = (0usize, 0usize);
    for (mut child, mut out) in kids {
        let mut line = String::new();
        out.read_line(&mut line)?;
        let st = child.wait()?;
        let f: Vec<&str> = line.split_whitespace().collect();
        if !st.success() || f.first() != Some(&"done") || f.len() < 3 {
            bail!("lmtp-client failed ({st}): {line:?}");
        }
        delivered += f[1].parse::<usize>().unwrap_or(0);
        bytes += f[2].parse::<usize>().unwrap_or(0);
    }
    let secs = t.elapsed().as_secs_f64();
    let cpu_per_msg = (server_cpu_ms(server) - cpu0) / delivered.max(1) as f64;
    let settled = settled_cpu_ms(server);
    let settled_per_msg = (settled - cpu0) / delivered.max(1) as f64;
    // everything written to the disk meanwhile, by anyone: on a quiet machine, the server
    let per_msg = |x: u64| x as f64 / delivered.max(1) as f64;
    let disk = disk0
        .zip(disk_writes(server.mail_root()))
        .map(|((w0, k0), (w1, k1))| {
            (
                per_msg(w1.saturating_sub(w0)),
                per_msg(k1.saturating_sub(k0)),
            )
        });
    eprintln!(
        "  {:8} LMTP {delivered} messages to {users} users over {sessions} sessions: {secs:.2} s = {:.0} messages/s, server CPU {cpu_per_msg:.2} ms per message ({settled_per_msg:.2} once quiet){}",
        server.name(),
        delivered as f64 / secs,
        disk.map_or(String::new(), |(w, k)| format!(", disk {w:.1} writes and {k:.0} kB per message"))
    );
    Ok(json!({
        "messages": delivered, "users": users, "sessions": sessions, "bytes": bytes,
        "secs": secs, "per_sec": delivered as f64 / secs, "server_cpu_ms_per_message": cpu_per_msg,
        "server_cpu_ms_per_message_settled": settled_per_msg,
        "disk_writes_per_message": disk.map(|d| d.0), "disk_kb_per_message": disk.map(|d| d.1),
    }))
}

/// A gate the idle connections wait at.
#[derive(Clone, Default)]
struct Release(Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

/// Opens the gate when dropped, so no thread waits forever when the measurement bails out.
struct OpenOnDrop(Release);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

impl Release {
    fn wait(&self) {
        let (lock, cv) = &*self.0;
        let mut open = lock.lock().unwrap_or_else(|p| p.into_inner());
        while !*open {
            open = cv.wait(open).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn open(&self) {
        let (lock, cv) = &*self.0;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
    }
}

/// Memory at each count of connections in IDLE, then the time for all of them to see one
/// message delivered (one LMTP transaction to all [`IDLE_USERS`]).
pub fn idle(server: &dyn Server, levels: &[usize]) -> Result<Value> {
    let settle = || std::thread::sleep(Duration::from_millis(700));
    settle();
    let (base, base_n) = server.memory();
    let t0: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    let ready = Arc::new(AtomicUsize::new(0));
    // Connections stay in IDLE until every one has seen the message: a DONE (and the
    // server's work for it) from the early ones must not slow down the late ones.
    let release = Release::default();
    let _open_on_drop = OpenOnDrop(release.clone());
    let (seen_tx, seen_rx) = mpsc::channel::<Result<Duration, String>>();
    let mut threads = Vec::new();
    let mut points = Vec::new();
    let addr = server.imap();
    for &level in levels {
        while threads.len() < level {
            let i = threads.len();
            let (t0, ready, seen_tx) = (t0.clone(), ready.clone(), seen_tx.clone());
            let release = release.clone();
            let user = format!("{}@{DOMAIN}", idle_user(i % IDLE_USERS));
            let h = std::thread::Builder::new()
                .stack_size(128 * 1024)
                .spawn(move || {
                    let r = (|| -> Result<Duration> {
                        let mut c = Imap::open_from(
                            addr,
                            Some(source_ip(i)),
                            &user,
                            PASSWORD,
                            "INBOX",
                            Duration::from_secs(120),
                        )?;
                        let known = c.exists;
                        c.idle()?;
                        ready.fetch_add(1, Ordering::SeqCst);
                        c.wait_exists_above(known)?;
                        let t = t0.get().map(Instant::elapsed).unwrap_or_default();
                        let _ = seen_tx.send(Ok(t));
                        release.wait();
                        let _ = c.send(b"DONE\r\n");
                        Ok(t)
                    })();
                    if let Err(e) = r {
                        let _ = seen_tx.send(Err(format!("{e:#}")));
                    }
                })?;
            threads.push(h);
        }
        let deadline = Instant::now() + Duration::from_secs(60 + level as u64 / 10);
        while ready.load(Ordering::SeqCst) < level {
            if let Ok(Err(e)) = seen_rx.try_recv() {
                bail!("an idle connection failed: {e}");
            }
            if Instant::now() > deadline {
                bail!(
                    "only {} of {level} connections reached IDLE in time",
                    ready.load(Ordering::SeqCst)
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        settle();
        let (m, n) = server.memory();
        eprintln!(
            "  {:8} {level:5} idle connections: RSS sum {:.1} MiB, PSS sum {:.1} MiB over {n} processes",
            server.name(),
            m.rss_kib as f64 / 1024.0,
            m.pss_kib as f64 / 1024.0
        );
        points.push(json!({"connections": level, "rss_kib": m.rss_kib, "pss_kib": m.pss_kib, "processes": n}));
    }
    let total = threads.len();
    // One message to every idle user, in one LMTP transaction.
    let rcpts: Vec<String> = (0..IDLE_USERS.min(total.max(1)))
        .map(|i| format!("{}@{DOMAIN}", idle_user(i)))
        .collect();
    let mut l = Lmtp::connect(server.lmtp(), Duration::from_secs(30))?;
    let _ = t0.set(Instant::now());
    l.deliver(
        "bench@example.net",
        &rcpts,
        b"From: bench@example.net\nSubject: wake up\n\nnew mail\n",
    )?;
    let acked = t0.get().map(Instant::elapsed).unwrap_or_default();
    l.quit();
    let mut seen = Vec::with_capacity(total);
    let deadline = Instant::now() + Duration::from_secs(90);
    while seen.len() < total {
        let left = deadline.saturating_duration_since(Instant::now());
        match seen_rx.recv_timeout(left) {
            Ok(Ok(d)) => seen.push(d),
            Ok(Err(e)) => bail!("an idle connection failed: {e}"),
            Err(_) => bail!(
                "{} of {total} connections saw the delivery in 90 s",
                seen.len()
            ),
        }
    }
    release.open();
    for h in threads {
        let _ = h.join();
    }
    seen.sort();
    let all_ms = seen.last().map_or(0.0, |d| d.as_secs_f64() * 1e3);
    let first = points.first().cloned().unwrap_or(Value::Null);
    let last = points.last().cloned().unwrap_or(Value::Null);
    let at = |p: &Value, k: &str| p[k].as_u64().unwrap_or(0) as f64;
    let base_of = |k: &str| match k {
        "rss_kib" => base.rss_kib,
        _ => base.pss_kib,
    } as f64;
    // Everything the connections added, one-time costs included, over their number.
    let per_conn = |k: &str| (at(&last, k) - base_of(k)) / total.max(1) as f64;
    // What one more connection costs: the slope from the first count measured to the
    // last, without the one-time costs the first connections pay (each user's index
    // opened, worker threads started, allocator arenas).
    let per_extra = |k: &str| {
        let c0 = first["connections"].as_u64().unwrap_or(0);
        let c1 = last["connections"].as_u64().unwrap_or(0);
        (c1 > c0).then(|| (at(&last, k) - at(&first, k)) / (c1 - c0) as f64)
    };
    let acked_ms = acked.as_secs_f64() * 1e3;
    eprintln!(
        "  {:8} all {total} saw the delivery {all_ms:.1} ms after it started, {:.1} ms after LMTP acknowledged it at {acked_ms:.1} ms (median {:.1} ms); per extra connection {:.1} KiB PSS, {:.1} KiB RSS ({:.0} / {:.0} KiB with one-time costs)",
        server.name(),
        all_ms - acked_ms,
        median_ms(&seen),
        per_extra("pss_kib").unwrap_or(f64::NAN),
        per_extra("rss_kib").unwrap_or(f64::NAN),
        per_conn("pss_kib"),
        per_conn("rss_kib")
    );
    Ok(json!({
        "base": {"rss_kib": base.rss_kib, "pss_kib": base.pss_kib, "processes": base_n},
        "points": points,
        "connections": total,
        "per_connection_rss_kib": per_conn("rss_kib"),
        "per_connection_pss_kib": per_conn("pss_kib"),
        "per_extra_connection_rss_kib": per_extra("rss_kib"),
        "per_extra_connection_pss_kib": per_extra("pss_kib"),
        "all_saw_ms": all_ms,
        "all_saw_after_ack_ms": all_ms - acked_ms,
        "median_saw_ms": median_ms(&seen),
        "lmtp_acked_ms": acked_ms,
    }))
}

/// Resets the peak RSS (VmHWM) of every process of the server (proc(5) clear_refs "5").
fn reset_peaks(server: &dyn Server) {
    for pid in server.pids() {
        let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
    }
}

/// The resident memory of every process of the server now, KiB.
fn rss_now(server: &dyn Server) -> u64 {
    summed(server, |m| m.rss_kib)
}

/// The peak RSS (VmHWM) of every process of the server since [`reset_peaks`], KiB.
fn peak_now(server: &dyn Server) -> u64 {
    summed(server, |m| m.hwm_kib)
}

/// `field` of every process of the server, summed.
fn summed(server: &dyn Server, field: fn(&procs::ProcMem) -> u64) -> u64 {
    server
        .pids()
        .iter()
        .filter_map(|&p| procs::mem(p))
        .map(|m| field(&m))
        .sum()
}

/// FETCH 1:* BODY.PEEK[] on `user`'s INBOX of large messages: time and peak memory.
///
/// A first session (login, SELECT, a listing of sizes) comes before the timed ones, so that
/// the memory measured is the streaming's: the first use of a user costs what it costs
/// apart (maildex opens the user's store and indexes the folder, Dovecot builds its index),
/// and that is reported as `first_use_growth_kib`. Each timed session's growth is its
/// peak over the server's RSS just before it (`growth_kib`, the largest of the runs).
pub fn bodies(server: &dyn Server, user: &str, runs: usize) -> Result<Value> {
    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    let mut growth = 0u64;
    let mut peak_total = 0u64;
    let mut bytes = 0;
    std::thread::sleep(Duration::from_millis(500));
    let (before, _) = server.memory();
    let open = || {
        Imap::open(
            server.imap(),
            &format!("{user}@{DOMAIN}"),
            PASSWORD,
            "INBOX",
            Duration::from_secs(300),
        )
    };
    reset_peaks(server);
    let mut c = open()?;
    c.ok("FETCH 1:* (UID RFC822.SIZE)")?;
    let first_use = peak_now(server).saturating_sub(before.rss_kib);
    let _ = c.run("LOGOUT");
    drop(c);
    for _ in 0..runs.max(1) {
        // the session before has ended (Dovecot's imap process has exited)
        std::thread::sleep(Duration::from_millis(200));
        let rss = rss_now(server);
        reset_peaks(server);
        let mut c = open()?;
        let r = c.ok("FETCH 1:* BODY.PEEK[]")?;
        // Peak over every process while the session is still open (Dovecot's imap
        // process exits with the connection).
        let hwm = peak_now(server);
        let _ = c.run("LOGOUT");
        peak_total = peak_total.max(hwm);
        growth = growth.max(hwm.saturating_sub(rss));
        walls.push(r.wall);
        cpus.push(r.client_cpu);
        bytes = r.literal_bytes;
    }
    eprintln!(
        "  {:8} FETCH 1:* BODY[] of {:.1} MB: {:.0} ms (client cpu {:.0} ms); server peak RSS {:.1} MiB, {:.2} MiB over its RSS before the session ({:.1} MiB at the user's first session)",
        server.name(),
        bytes as f64 / 1e6,
        median_ms(&walls),
        median_ms(&cpus),
        peak_total as f64 / 1024.0,
        growth as f64 / 1024.0,
        first_use as f64 / 1024.0
    );
    Ok(json!({
        "ms": median_ms(&walls), "client_cpu_ms": median_ms(&cpus), "bytes": bytes,
        "idle_rss_kib": before.rss_kib, "peak_rss_kib": peak_total, "growth_kib": growth,
        "first_use_growth_kib": first_use,
    }))
}
