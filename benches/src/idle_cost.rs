//! `maildex-bench idle-cost`: the server CPU one delivery costs per IDLE session, on a big
//! mailbox and a small one (issue 16: a session woken by a delivery reads what changed
//! from the change log, so its cost must not grow with the mailbox).
//!
//! One maildex server, two users: `big` (INBOX of `--big` messages) and `small` (`--small`
//! messages). For each user in turn, `--sessions` connections SELECT INBOX and IDLE; then
//! `--deliveries` messages go to that user over LMTP one at a time, each waiting until
//! every session has seen its EXISTS. The server's CPU time (utime + stime of its
//! processes, /proc/PID/stat, which counts exited threads too) is read around the
//! deliveries, and again around as many deliveries with no session at all; the difference
//! over sessions x deliveries is what one woken session costs per delivery. maildex only:
//! Dovecot's per-session processes make the same figure a different quantity.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::imap_client::Imap;
use crate::lmtp_client::Lmtp;
use crate::load::source_ip;
use crate::servers::{MaildexServer, Server, DOMAIN, PASSWORD};

/// Options of `maildex-bench idle-cost`.
pub struct IdleCostOpts {
    /// Messages in the big user's INBOX.
    pub big: usize,
    /// Messages in the small user's INBOX.
    pub small: usize,
    /// IDLE sessions per user.
    pub sessions: usize,
    /// Deliveries measured per user (and again with no session).
    pub deliveries: usize,
    /// Rounds (each measures both users).
    pub rounds: usize,
    /// The maildex binary.
    pub maildex_bin: PathBuf,
    /// Work folder.
    pub work: PathBuf,
}

/// Writes an INBOX of `n` small read messages straight into `cur/` (the server indexes
/// them at start-up).
fn make_inbox(maildir: &Path, n: usize) -> Result<()> {
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(maildir.join(sub))?;
    }
    for i in 0..n {
        let body = format!(
            "From: Sender {i} <s{i}@example.net>\nTo: you@{DOMAIN}\nSubject: message {i}\n\
             Date: Tue, 3 Jan 2023 10:00:00 +0000\nMessage-ID: <{i}@idle-cost>\n\nbody {i}\n"
        );
        let name = format!("1700000000.M{i}P1.bench,S={}:2,S", body.len());
        std::fs::write(maildir.join("cur").join(name), body)?;
    }
    Ok(())
}

/// CPU time of the server's processes so far.
fn server_cpu(server: &dyn Server) -> Duration {
    Duration::from_secs_f64(crate::load::server_cpu_ms(server) / 1e3)
}

/// Delivers `n` messages to `user` one at a time; after each, waits for `seen` to report
/// it from every one of `sessions` sessions. Returns the server CPU spent.
fn deliveries(
    server: &dyn Server,
    user: &str,
    n: usize,
    sessions: usize,
    seen: &mpsc::Receiver<Result<(), String>>,
) -> Result<Duration> {
    let rcpt = vec![format!("{user}@{DOMAIN}")];
    let mut l = Lmtp::connect(server.lmtp(), Duration::from_secs(30))?;
    let before = server_cpu(server);
    for i in 0..n {
        let msg = format!("From: bench@example.net\nSubject: wake {i}\n\nnew mail {i}\n");
        l.deliver("bench@example.net", &rcpt, msg.as_bytes())?;
        for _ in 0..sessions {
            match seen.recv_timeout(Duration::from_secs(60)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => bail!("an idle session failed: {e}"),
                Err(_) => bail!("a session did not see delivery {i} in 60 s"),
            }
        }
    }
    let spent = server_cpu(server).saturating_sub(before);
    l.quit();
    Ok(spent)
}

/// Waits (at most 20 s) until the server has used no CPU for half a second.
fn quiet(server: &dyn Server) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut last = server_cpu(server);
    while std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        let now = server_cpu(server);
        if now == last {
            return;
        }
        last = now;
    }
}

/// One measurement of `user`: CPU for `n` deliveries without sessions and with
/// `sessions` IDLE sessions.
fn measure(server: &dyn Server, user: &str, sessions: usize, n: usize) -> Result<Value> {
    quiet(server);
    let (_tx, none) = mpsc::channel();
    let alone = deliveries(server, user, n, 0, &none)?;
    let (tx, rx) = mpsc::channel::<Result<(), String>>();
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let mut threads = Vec::new();
    for i in 0..sessions {
        let (tx, ready_tx) = (tx.clone(), ready_tx.clone());
        let (addr, login) = (server.imap(), format!("{user}@{DOMAIN}"));
        threads.push(std::thread::spawn(move || {
            let r = (|| -> Result<()> {
                let mut c = Imap::open_from(
                    addr,
                    Some(source_ip(i)),
                    &login,
                    PASSWORD,
                    "INBOX",
                    Duration::from_secs(120),
                )?;
                c.idle()?;
                let _ = ready_tx.send(Ok(()));
                let mut known = c.exists;
                for _ in 0..n {
                    known = c.wait_exists_above(known)?;
                    let _ = tx.send(Ok(()));
                }
                c.send(b"DONE\r\n")?;
                Ok(())
            })();
            if let Err(e) = r {
                let _ = ready_tx.send(Err(format!("{e:#}")));
                let _ = tx.send(Err(format!("{e:#}")));
            }
        }));
    }
    for _ in 0..sessions {
        match ready_rx.recv_timeout(Duration::from_secs(120)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => bail!("a session failed to reach IDLE: {e}"),
            Err(_) => bail!("sessions did not reach IDLE in 120 s"),
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let with = deliveries(server, user, n, sessions, &rx)?;
    for t in threads {
        let _ = t.join();
    }
    // the sessions' DONE and LOGOUT must not count in the next measurement
    quiet(server);
    let per_session_us =
        (with.as_secs_f64() - alone.as_secs_f64()) * 1e6 / (sessions.max(1) * n.max(1)) as f64;
    Ok(json!({
        "cpu_alone_ms": alone.as_secs_f64() * 1e3,
        "cpu_with_sessions_ms": with.as_secs_f64() * 1e3,
        "per_session_per_delivery_us": per_session_us,
    }))
}

/// Runs the measurement (see the module docs) and prints it.
pub fn run(o: &IdleCostOpts) -> Result<Value> {
    let mail = o.work.join("mail");
    let users = [("big", o.big), ("small", o.small)];
    for (user, n) in users {
        make_inbox(&mail.join(DOMAIN).join(user).join("Maildir"), n)
            .with_context(|| format!("writing {user}'s INBOX"))?;
    }
    let names: Vec<String> = users.iter().map(|(u, _)| u.to_string()).collect();
    eprintln!(
        "== idle-cost: {} sessions, {} deliveries, INBOX of {} and {} messages",
        o.sessions, o.deliveries, o.big, o.small
    );
    let server = MaildexServer::start(&o.maildex_bin, &o.work.join("maildex"), &mail, &names)?;
    let mut results = Vec::new();
    for round in 0..o.rounds {
        for (user, n) in users {
            let r = measure(&server, user, o.sessions, o.deliveries)?;
            eprintln!(
                "  round {round} {user:5} ({n:6} messages): CPU {:.0} ms alone, {:.0} ms with sessions: {:.1} µs per session per delivery",
                r["cpu_alone_ms"].as_f64().unwrap_or(0.0),
                r["cpu_with_sessions_ms"].as_f64().unwrap_or(0.0),
                r["per_session_per_delivery_us"].as_f64().unwrap_or(0.0)
            );
            results.push(json!({"round": round, "user": user, "messages": n, "result": r}));
        }
    }
    let mean = |user: &str| {
        let v: Vec<f64> = results
            .iter()
            .filter(|r| r["user"] == user)
            .filter_map(|r| r["result"]["per_session_per_delivery_us"].as_f64())
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let (big, small) = (mean("big"), mean("small"));
    eprintln!(
        "  per session per delivery: {big:.1} µs on {} messages, {small:.1} µs on {} (ratio {:.2})",
        o.big,
        o.small,
        big / small
    );
    Ok(json!({
        "sessions": o.sessions,
        "deliveries": o.deliveries,
        "runs": results,
        "big_us": big,
        "small_us": small,
        "ratio": big / small,
    }))
}
