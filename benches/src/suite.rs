//! `maildex-bench all`: prepares one corpus, gives each server its own copy, runs every
//! workload against each available server in turn (workload by workload, so both see the
//! same machine state as closely as a shared machine allows) and collects JSON results.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};

use crate::load::{idle_user, rcpt_user, IDLE_USERS};
use crate::servers::{DovecotServer, MaildexServer, Server, DOMAIN};
use crate::{listing, load};

/// Sizes and counts of one mode.
#[derive(Clone, Debug)]
pub struct Params {
    /// "smoke", "quick" or "full".
    pub mode: &'static str,
    /// INBOX sizes listed (one user each).
    pub sizes: Vec<usize>,
    /// Corpus size multiplier (1.0 = real mail sizes).
    pub scale: f64,
    /// Runs of each listing on a fresh server.
    pub first_runs: usize,
    /// Warm runs of each listing.
    pub warm_runs: usize,
    /// LMTP messages, recipients, sessions.
    pub lmtp: (usize, usize, usize),
    /// Whether an LMTP run waits out ext4's recently-deleted-inode window after a run of
    /// the other server (see [`settle_writeback`]); about five minutes per wait.
    pub lmtp_settle: bool,
    /// Idle connection counts measured.
    pub idle_levels: Vec<usize>,
    /// Large messages and the size of each.
    pub big: (usize, usize),
    /// Corpus seed.
    pub seed: u64,
}

impl Params {
    /// Parameters of a mode.
    pub fn for_mode(mode: &str) -> Result<Params> {
        let p = match mode {
            "smoke" => Params {
                mode: "smoke",
                sizes: vec![300],
                scale: 0.1,
                first_runs: 1,
                warm_runs: 2,
                lmtp: (200, 20, 2),
                lmtp_settle: false,
                idle_levels: vec![8, 16],
                big: (3, 1 << 20),
                seed: 42,
            },
            "quick" => Params {
                mode: "quick",
                sizes: vec![1_000, 3_000, 10_000],
                scale: 1.0,
                first_runs: 3,
                warm_runs: 5,
                lmtp: (500, 100, 10),
                lmtp_settle: false,
                idle_levels: vec![100, 250, 500, 1_000],
                big: (10, 5 << 20),
                seed: 42,
            },
            "full" => Params {
                mode: "full",
                sizes: vec![1_000, 3_000, 10_000, 30_000],
                scale: 1.0,
                first_runs: 5,
                warm_runs: 7,
                lmtp: (10_000, 1_000, 10),
                lmtp_settle: true,
                idle_levels: vec![100, 250, 500, 1_000],
                big: (40, 8 << 20),
                seed: 42,
            },
            other => bail!("unknown mode {other}"),
        };
        Ok(p)
    }
}

/// The listing user of an INBOX size.
pub fn list_user(size: usize) -> String {
    format!("list{size}")
}

/// The user holding large messages.
pub const BIG_USER: &str = "big";

fn run_cmd(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn make_maildir(dir: &Path) -> Result<()> {
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    Ok(())
}

/// A message of about `size` bytes: a short text part and a base64 attachment of
/// pseudo-random bytes (76-character lines, RFC 2045 §6.8).
fn big_message(i: usize, size: usize) -> Vec<u8> {
    let mut m = format!(
        "From: Archive Robot <robot@example.net>\nTo: big@{DOMAIN}\nSubject: scan {i}\n\
         Date: Mon, 2 Jan 2023 10:{:02}:00 +0000\nMessage-ID: <big{i}@example.net>\nMIME-Version: 1.0\n\
         Content-Type: multipart/mixed; boundary=\"b{i}\"\n\n--b{i}\nContent-Type: text/plain\n\n\
         The scan is attached.\n\n--b{i}\nContent-Type: application/pdf; name=\"scan{i}.pdf\"\n\
         Content-Transfer-Encoding: base64\n\n",
        i % 60
    )
    .into_bytes();
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ i as u64;
    while m.len() < size {
        for _ in 0..76 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            m.push(B64[(x & 63) as usize]);
        }
        m.push(b'\n');
    }
    m.extend_from_slice(format!("--b{i}--\n").as_bytes());
    m
}

/// Writes the template mail tree: one INBOX per listing size, the large-message user,
/// empty idle users. Returns mail bytes per listing user.
fn prepare_template(p: &Params, work: &Path) -> Result<Map<String, Value>> {
    let template = work.join("template");
    let domain = template.join(DOMAIN);
    std::fs::create_dir_all(&domain)?;
    let mut bytes = Map::new();
    for &n in &p.sizes {
        let t = Instant::now();
        let gen = work.join(format!("gen-{n}"));
        let spec = maildex_corpus::Spec {
            seed: p.seed,
            users: 1,
            messages_per_user: n,
            folders: false,
            size_scale: p.scale,
        };
        let stats = maildex_corpus::generate(&spec, &gen)?;
        std::fs::rename(
            maildex_corpus::user_maildir(&gen, 0)
                .parent()
                .context("user dir")?,
            domain.join(list_user(n)),
        )?;
        std::fs::remove_dir_all(&gen)?;
        eprintln!(
            "corpus: INBOX of {n} messages, {:.1} MB (p50 {} B, p99 {} B, max {} B) in {:.1} s",
            stats.bytes as f64 / 1e6,
            stats.sizes.p50,
            stats.sizes.p99,
            stats.sizes.max,
            t.elapsed().as_secs_f64()
        );
        bytes.insert(n.to_string(), json!(stats.bytes));
    }
    let big = domain.join(BIG_USER).join("Maildir");
    make_maildir(&big)?;
    for i in 0..p.big.0 {
        let m = big_message(i, p.big.1);
        let lines = m.iter().filter(|&&b| b == b'\n').count();
        let name = format!(
            "{}.M{i}P1Q{i}.bench,S={},W={}:2,S",
            1_672_000_000 + i * 60,
            m.len(),
            m.len() + lines
        );
        std::fs::write(big.join("cur").join(name), m)?;
    }
    for i in 0..IDLE_USERS {
        make_maildir(&domain.join(idle_user(i)).join("Maildir"))?;
    }
    Ok(bytes)
}

/// Every user of both servers.
fn users(p: &Params) -> Vec<String> {
    let mut u: Vec<String> = p.sizes.iter().map(|&n| list_user(n)).collect();
    u.push(BIG_USER.into());
    u.extend((0..IDLE_USERS).map(idle_user));
    u.extend((0..p.lmtp.1).map(rcpt_user));
    u
}

/// Facts about the machine and the versions measured.
pub fn machine() -> Value {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    let mem_kib: u64 = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let cmd = |c: &str, args: &[&str]| run_cmd(Command::new(c).args(args)).unwrap_or_default();
    json!({
        "nproc": std::thread::available_parallelism().map_or(0, usize::from),
        "cpu": cpu,
        "memory_gib": (mem_kib as f64 / 1048576.0 * 10.0).round() / 10.0,
        "kernel": cmd("uname", &["-r"]),
        "rustc": cmd("rustc", &["--version"]),
        "dovecot": maildex_dovecot_harness::version().unwrap_or_default(),
        "commit": cmd("git", &["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "--short", "HEAD"]),
        "inotify_max_user_instances": read("/proc/sys/fs/inotify/max_user_instances").trim(),
        "loadavg_at_start": read("/proc/loadavg").split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    })
}

/// Dovecot runs one process per IMAP connection as the mail user, each with its own
/// inotify instance for IDLE; the kernel default (128 per user) would silently turn IDLE
/// into 30 s polling past 128 connections. An admin raises it; so do we, when allowed.
fn raise_inotify_limit(connections: usize) -> Option<String> {
    let path = "/proc/sys/fs/inotify/max_user_instances";
    let cur: usize = std::fs::read_to_string(path).ok()?.trim().parse().ok()?;
    let want = connections + 256;
    if cur >= want {
        return None;
    }
    match std::fs::write(path, want.to_string()) {
        Ok(()) => Some(format!("raised {path} from {cur} to {want}")),
        Err(e) => Some(format!(
            "could not raise {path} from {cur} ({e}): Dovecot IDLE past {cur} connections polls"
        )),
    }
}

/// Runs `f` on each server, storing its result (or error) under the server's name.
fn each(
    servers: &mut [Box<dyn Server>],
    f: &mut dyn FnMut(&mut dyn Server) -> Result<Value>,
) -> Value {
    let mut out = Map::new();
    for s in servers.iter_mut() {
        let v = f(s.as_mut()).unwrap_or_else(|e| {
            eprintln!("  {:8} FAILED: {e:#}", s.name());
            json!({"error": format!("{e:#}")})
        });
        out.insert(s.name().into(), v);
    }
    Value::Object(out)
}

/// The LMTP workload twice per server, in the order A B B A, each server's figures the
/// mean of its two runs. First `warm` runs once per server (B, then A, so that A's first
/// run follows its own): every recipient has had mail before the clock runs, as on a
/// server in service, so no run pays for creating a user's index files (Dovecot creates
/// its `dovecot.index*` at a user's first delivery; maildex's index exists from its
/// start-up sync). Before each run the page cache is written back, and with `settle` a
/// run that follows the other server's waits until ext4 no longer skips the inodes that
/// server freed (see [`settle_writeback`]).
fn lmtp_rounds(
    servers: &mut [Box<dyn Server>],
    settle: bool,
    warm: &dyn Fn(&dyn Server) -> Result<Value>,
    f: &dyn Fn(&dyn Server) -> Result<Value>,
) -> Value {
    let n = servers.len();
    let order: Vec<usize> = (0..n).chain((0..n).rev()).collect();
    let mut runs: Vec<Vec<Value>> = vec![Vec::new(); n];
    let mut out = Map::new();
    let mut last: Option<(usize, Instant)> = None;
    for i in (0..n).rev() {
        eprintln!("  {:8} warm-up (not counted):", servers[i].name());
        if let Err(e) = warm(servers[i].as_ref()) {
            eprintln!("  {:8} warm-up FAILED: {e:#}", servers[i].name());
        }
        last = Some((i, Instant::now()));
    }
    for i in order {
        let other_ended = last.filter(|(j, _)| *j != i).map(|(_, t)| t);
        settle_writeback(other_ended.filter(|_| settle));
        match f(servers[i].as_ref()) {
            Ok(v) => runs[i].push(v),
            Err(e) => {
                eprintln!("  {:8} FAILED: {e:#}", servers[i].name());
                out.insert(servers[i].name().into(), json!({"error": format!("{e:#}")}));
            }
        }
        last = Some((i, Instant::now()));
    }
    for (i, rs) in runs.into_iter().enumerate() {
        let name = servers[i].name();
        if out.contains_key(name) {
            continue;
        }
        let Some(mut v) = rs.first().cloned() else {
            continue;
        };
        let mean = |k: &str| rs.iter().filter_map(|r| r[k].as_f64()).sum::<f64>() / rs.len() as f64;
        for k in ["per_sec", "server_cpu_ms_per_message", "secs"] {
            v[k] = json!(mean(k));
        }
        v["runs"] = json!(rs);
        out.insert(name.into(), v);
    }
    Value::Object(out)
}

/// How long ext4 without a journal avoids reusing a freed inode whose inode table block
/// is dirty: `RECENTCY_MIN + RECENTCY_DIRTY` seconds (fs/ext4/ialloc.c), plus a margin.
const EXT4_RECENTLY_DELETED: Duration = Duration::from_secs(5 + 300 + 10);

/// Writes back every dirty page (`sync(2)`), so that a run does not pay for the writeback
/// of what came before it (the corpus copies, the other server's unsynced index files),
/// then, when `after` is when another server's run ended, waits until
/// [`EXT4_RECENTLY_DELETED`] has passed since then.
///
/// Why the wait: allocating an inode on an ext4 without a journal, as this machine's,
/// skips every free inode of the group that was deleted in the last 5 s, or in the last
/// 305 s while its inode table block is dirty (`recently_deleted`, called for each
/// candidate, from the group's first free inode on). Dovecot frees two or three inodes per
/// delivery (its dotlocks, the rewritten dovecot-uidlist) in the same block groups as
/// maildex's copy of the corpus, and maildex's own allocations dirty those blocks again:
/// a maildex run within five minutes of a Dovecot run spent 10-12% of its CPU in that
/// scan (`perf record`), one started later 0.1%. maildex frees no inode per delivery, so a
/// server alone on its disk pays only for its own churn; waiting makes each run do the same.
pub(crate) fn settle_writeback(after: Option<Instant>) {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    if let Some(wait) = after.and_then(|t| EXT4_RECENTLY_DELETED.checked_sub(t.elapsed())) {
        eprintln!(
            "  waiting {:.0} s for ext4 to stop skipping the inodes the other server freed",
            wait.as_secs_f64()
        );
        std::thread::sleep(wait);
        // SAFETY: as above.
        unsafe { libc::sync() };
    }
}

/// Options of `all` besides the mode.
pub struct RunOpts {
    /// Work folder (corpus copies, server scratch); must be short (unix socket paths).
    pub work: PathBuf,
    /// The maildex binary.
    pub maildex_bin: PathBuf,
    /// Workloads to run (empty: all).
    pub only: Vec<String>,
    /// Dovecot's `mail_fsync` setting.
    pub dovecot_mail_fsync: String,
}

impl RunOpts {
    fn wants(&self, workload: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|w| w == workload)
    }
}

/// Runs every workload; returns the results document.
pub fn run(p: &Params, o: &RunOpts) -> Result<Value> {
    maildex_dovecot_harness::check_installed()?;
    let started = Instant::now();
    let work = &o.work;
    std::fs::create_dir_all(work)?;
    raise_fd_limit();
    let inotify = raise_inotify_limit(p.idle_levels.iter().copied().max().unwrap_or(0));
    let mail_bytes = prepare_template(p, work)?;
    for name in ["dovecot", "maildex"] {
        let dst = work.join(name);
        std::fs::create_dir_all(&dst)?;
        run_cmd(
            Command::new("cp")
                .arg("-a")
                .arg(work.join("template"))
                .arg(dst.join("mail")),
        )?;
    }
    std::fs::remove_dir_all(work.join("template"))?;
    let users = users(p);
    let max_conn = p.idle_levels.iter().copied().max().unwrap_or(0) + 32;
    let mut servers: Vec<Box<dyn Server>> = vec![Box::new(DovecotServer::start(
        &work.join("dc"),
        &work.join("dovecot/mail"),
        &users,
        max_conn,
        &o.dovecot_mail_fsync,
    )?)];
    let maildex = match MaildexServer::start(
        &o.maildex_bin,
        &work.join("mx"),
        &work.join("maildex/mail"),
        &users,
    ) {
        Ok(s) => {
            servers.push(Box::new(s));
            json!({"available": true})
        }
        Err(e) => {
            eprintln!("maildex: not available ({e:#}); measuring Dovecot only");
            json!({"available": false, "reason": format!("{e:#}")})
        }
    };
    let mut r = Map::new();
    r.insert("mode".into(), json!(p.mode));
    r.insert("machine".into(), machine());
    r.insert(
        "servers".into(),
        json!({"dovecot": {"available": true}, "maildex": maildex}),
    );
    r.insert(
        "corpus".into(),
        json!({"seed": p.seed, "scale": p.scale, "sizes": p.sizes, "mail_bytes": mail_bytes}),
    );
    if let Some(note) = inotify {
        r.insert("inotify".into(), json!(note));
    }

    let mut listings = Map::new();
    let mut index = Map::new();
    if o.wants("listing") {
        eprintln!(
            "== listings (first after delivery: {} runs, warm: {} runs)",
            p.first_runs, p.warm_runs
        );
    }
    for &n in p.sizes.iter().filter(|_| o.wants("listing")) {
        let user = list_user(n);
        listings.insert(
            n.to_string(),
            each(&mut servers, &mut |s| {
                listing::listings(s, &user, p.first_runs, p.warm_runs)
            }),
        );
        index.insert(
            n.to_string(),
            each(&mut servers, &mut |s| {
                // maildex's background indexer writes the full text after the listings:
                // the size once it is done, not a snapshot of its progress
                crate::load::settled_cpu_ms(s);
                Ok(json!(s.index_bytes(&user)))
            }),
        );
    }
    r.insert("listing".into(), Value::Object(listings));
    r.insert("index_bytes".into(), Value::Object(index));
    r.insert("index_bytes_settled".into(), json!(true));

    let largest = p.sizes.iter().copied().max().unwrap_or(0);
    let user = list_user(largest);
    if o.wants("files") {
        eprintln!("== message files opened by the mutt listing of {largest} messages (strace)");
        let traces = work.join("traces");
        std::fs::create_dir_all(&traces)?;
        let files = each(&mut servers, &mut |s| {
            listing::files_opened(s, &user, &traces)
        });
        r.insert(
            "files_opened".into(),
            json!({"size": largest, "servers": files}),
        );
    }

    if o.wants("search") {
        eprintln!("== SEARCH on {largest} messages");
        let search = each(&mut servers, &mut |s| {
            listing::searches(s, &user, p.warm_runs)
        });
        r.insert("search".into(), json!({"size": largest, "servers": search}));
    }

    if o.wants("rebuild") {
        eprintln!("== index rebuild of {largest} messages from the Maildir, then the mutt listing");
        let rebuild = each(&mut servers, &mut |s| {
            listing::rebuilds(s, &user, largest, p.first_runs)
        });
        r.insert(
            "rebuild".into(),
            json!({"size": largest, "servers": rebuild}),
        );
    }

    if o.wants("bodies") {
        eprintln!(
            "== FETCH 1:* BODY[] of {} messages of {} MiB",
            p.big.0,
            p.big.1 >> 20
        );
        let bodies = each(&mut servers, &mut |s| load::bodies(s, BIG_USER, 3));
        r.insert(
            "bodies".into(),
            json!({"messages": p.big.0, "message_bytes": p.big.1, "servers": bodies}),
        );
    }

    if o.wants("lmtp") {
        let (msgs, rcpts, sessions) = p.lmtp;
        eprintln!("== LMTP: {msgs} messages to {rcpts} users over {sessions} sessions (fsync on)");
        // one message to each recipient, from another seed
        let warm = |s: &dyn Server| {
            load::lmtp_throughput(s, rcpts, rcpts, sessions, p.seed ^ 0x5eed, p.scale)
        };
        let lmtp = lmtp_rounds(&mut servers, p.lmtp_settle, &warm, &|s| {
            load::lmtp_throughput(s, msgs, rcpts, sessions, p.seed, p.scale)
        });
        r.insert("lmtp".into(), json!({"servers": lmtp}));
    }

    if o.wants("idle") {
        eprintln!("== IDLE connections {:?}", p.idle_levels);
        let idle = each(&mut servers, &mut |s| {
            s.restart()?;
            load::idle(s, &p.idle_levels)
        });
        r.insert("idle".into(), json!({"servers": idle}));
    }

    r.insert("secs".into(), json!(started.elapsed().as_secs_f64()));
    drop(servers);
    Ok(Value::Object(r))
}

/// Raises the soft open-file limit to the hard one (idle connections need one each).
fn raise_fd_limit() {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct passed by pointer.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}
