//! `maildex-bench seed`: the seed benchmark of issue 20, side by side with Dovecot. Users
//! live in a private MariaDB, then in a private OpenLDAP slapd (benches/src/seed_dirs.rs),
//! both loaded with the same users and the same `{ARGON2ID}` hash (made once by `doveadm pw`,
//! which Debian's Dovecot, built with libsodium, lists; maildex reads the PHC string too).
//!
//! 1. LMTP: one message to each of N unique users (one RCPT per transaction: every message
//!    has one recipient, so postfix's lmtp_destination_recipient_limit does not come into
//!    it), over several sessions, to maildex with `[auth.sql]` then `[auth.ldap]`, and to
//!    Dovecot with `driver = sql` / `driver = ldap` passdb and userdb on the same data:
//!    messages/s, directory queries per message (MariaDB `Com_select`, slapd's monitor
//!    backend), server and directory CPU per message. Every user's Maildir (and maildex's
//!    index) is created by that first delivery.
//! 2. Logins: LOGIN then LOGOUT of L users from a few concurrent clients, with each
//!    server's cache on (a pass that fills it first, not counted) and off; users in MariaDB.
//! 3. Start-up: maildex with S users in MariaDB, spawn to greeting, and its RSS then.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use maildex_dovecot_harness::{procs, MailOwner};
use serde_json::{json, Value};

use crate::imap_client::Imap;
use crate::load::{lmtp_throughput, rcpt_user};
use crate::seed_dirs::{Mariadb, Slapd, PEOPLE, SVC_DN, SVC_PW};
use crate::servers::{DovecotServer, MaildexServer, Server, DOMAIN, PASSWORD};

/// Sizes and options of one run.
pub struct SeedOpts {
    /// Users that get one message each.
    pub users: usize,
    /// LMTP sessions at once.
    pub sessions: usize,
    /// Users that log in.
    pub login_users: usize,
    /// Concurrent login clients.
    pub login_clients: usize,
    /// Users in MariaDB for the start-up measurement.
    pub startup_users: usize,
    /// Users of the extra LMTP run of maildex with its default folders (MariaDB).
    pub folder_users: usize,
    pub maildex_bin: PathBuf,
    /// Short work folder (Dovecot's and MariaDB's sockets live under it).
    pub work: PathBuf,
    pub seed: u64,
    pub scale: f64,
    /// Parts to run: lmtp, logins, startup (empty: all).
    pub parts: Vec<String>,
}

/// One directory backend: what maildex and Dovecot are configured with, and its counters.
enum Dir<'a> {
    Sql(&'a Mariadb),
    Ldap(&'a Slapd),
}

/// The same queries as Dovecot's dovecot-sql.conf.ext below, and the same LDAP filters.
const PASSWORD_QUERY: &str = "SELECT userid AS user, password FROM users WHERE userid = '%u'";
const USER_QUERY: &str = "SELECT userid AS user FROM users WHERE userid = '%u'";
const ITERATE_QUERY: &str = "SELECT userid AS user FROM users";
const LDAP_FILTER: &str = "(&(objectClass=posixAccount)(mail=%u))";

impl Dir<'_> {
    fn name(&self) -> &'static str {
        match self {
            Dir::Sql(_) => "MariaDB",
            Dir::Ldap(_) => "OpenLDAP",
        }
    }

    fn pid(&self) -> u32 {
        match self {
            Dir::Sql(m) => m.pid(),
            Dir::Ldap(s) => s.pid(),
        }
    }

    /// Lookups the directory has answered so far: SELECTs, or LDAP searches and binds.
    fn queries(&self) -> Result<u64> {
        match self {
            Dir::Sql(m) => m.selects(),
            Dir::Ldap(s) => s.ops().map(|(search, bind)| search + bind),
        }
    }

    /// maildex's `[auth]` part; `cache_size` 0 turns its cache off. Without `folders`
    /// an empty `[mailboxes]` table: no Drafts, Sent, Trash, Junk and Archive created at a
    /// user's first delivery, as Dovecot (whose `auto = subscribe` folders are made when
    /// the user's folders are listed, never by LMTP) creates none there either.
    fn maildex_auth(&self, cache_size: usize, folders: bool) -> String {
        let mailboxes = if folders { "" } else { "[mailboxes]\n\n" };
        let head = format!("{mailboxes}[auth]\ncache_size = {cache_size}\n\n");
        match self {
            Dir::Sql(m) => format!(
                "{head}[auth.sql]\ndriver = \"mysql\"\nconnect = \"{}\"\n\
                 password_query = \"{PASSWORD_QUERY}\"\nuser_query = \"{USER_QUERY}\"\n\
                 iterate_query = \"{ITERATE_QUERY}\"\n",
                m.connect()
            ),
            Dir::Ldap(s) => format!(
                "{head}[auth.ldap]\nuris = \"{}\"\ndn = \"{SVC_DN}\"\ndnpass = \"{SVC_PW}\"\n\
                 base = \"{PEOPLE}\"\npass_filter = \"{LDAP_FILTER}\"\n\
                 pass_attrs = \"mail=user,userPassword=password\"\n\
                 user_filter = \"{LDAP_FILTER}\"\nuser_attrs = \"mail=user\"\n\
                 iterate_filter = \"(objectClass=posixAccount)\"\niterate_attrs = \"mail=user\"\n",
                s.uri()
            ),
        }
    }

    /// Dovecot's passdb and userdb blocks, their args file written into `scratch`.
    fn dovecot_auth(&self, scratch: &Path, mail: &Path) -> Result<String> {
        std::fs::create_dir_all(scratch)?;
        let (driver, args) = match self {
            Dir::Sql(m) => (
                "sql",
                format!(
                    "driver = mysql\nconnect = {}\ndefault_pass_scheme = ARGON2ID\n\
                     password_query = {PASSWORD_QUERY}\nuser_query = {USER_QUERY}\n\
                     iterate_query = {ITERATE_QUERY}\n",
                    m.connect()
                ),
            ),
            Dir::Ldap(s) => (
                "ldap",
                format!(
                    "uris = {}\ndn = {SVC_DN}\ndnpass = {SVC_PW}\nauth_bind = no\n\
                     base = {PEOPLE}\nscope = subtree\ndefault_pass_scheme = ARGON2ID\n\
                     pass_filter = {LDAP_FILTER}\npass_attrs = mail=user,userPassword=password\n\
                     user_filter = {LDAP_FILTER}\nuser_attrs = mail=user\n\
                     iterate_filter = (objectClass=posixAccount)\niterate_attrs = mail=user\n",
                    s.uri()
                ),
            ),
        };
        let file = scratch.join(format!("dovecot-{driver}.conf.ext"));
        std::fs::write(&file, args)?;
        let (uid, gid) = MailOwner::default_for_caller().ids();
        Ok(format!(
            "passdb {{\n  driver = {driver}\n  args = {f}\n}}\n\
             userdb {{\n  driver = {driver}\n  args = {f}\n  \
             default_fields = uid={uid} gid={gid} home={m}/%d/%n\n}}",
            f = file.display(),
            m = mail.display()
        ))
    }
}

/// `doveadm pw -s ARGON2ID`: the one stored hash of every user's password.
fn argon2id_hash() -> Result<String> {
    let out = std::process::Command::new("doveadm")
        .args(["pw", "-s", "ARGON2ID", "-p", PASSWORD])
        .output()
        .context("doveadm pw")?;
    let hash = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || !hash.starts_with("{ARGON2ID}$argon2id$") {
        bail!(
            "doveadm pw -s ARGON2ID: {hash} {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(hash)
}

/// The full address of benchmark user `i`.
fn address(i: usize) -> String {
    format!("{}@{DOMAIN}", rcpt_user(i))
}

/// Directory counters around `f`: (its result, queries, directory CPU ms).
fn counted<T>(dir: &Dir<'_>, f: impl FnOnce() -> Result<T>) -> Result<(T, u64, f64)> {
    let (q0, cpu0) = (dir.queries()?, procs::tree_cpu_ms(dir.pid()));
    let v = f()?;
    let (q1, cpu1) = (dir.queries()?, procs::tree_cpu_ms(dir.pid()));
    // LDAP: the monitor read before `f` is itself one bind and one search counted after
    let own = if matches!(dir, Dir::Ldap(_)) { 2 } else { 0 };
    Ok((v, q1.saturating_sub(q0).saturating_sub(own), cpu1 - cpu0))
}

/// maildex on `dir/mail` (made first, so the disk's write counters can be read for it from
/// the start) with the `[auth]` part `auth`.
fn start_maildex(o: &SeedOpts, dir: &Path, auth: &str) -> Result<MaildexServer> {
    std::fs::create_dir_all(dir.join("mail"))?;
    MaildexServer::start_with_auth(&o.maildex_bin, dir, &dir.join("mail"), auth)
}

/// Dovecot in `o.work/name` with `dir`'s users and `extra` lines of dovecot.conf.
fn start_dovecot(o: &SeedOpts, name: &str, dir: &Dir<'_>, extra: &str) -> Result<DovecotServer> {
    let scratch = o.work.join(name);
    let mail = scratch.join("mail");
    std::fs::create_dir_all(&mail)?;
    let auth = dir.dovecot_auth(&scratch, &mail)?;
    DovecotServer::start_with_auth(
        &scratch.join("s"),
        &mail,
        &[],
        100,
        "optimized",
        Some(auth),
        extra,
    )
}

/// One LMTP run against a started server: one message to each of `users` users.
fn lmtp_run(server: &dyn Server, dir: &Dir<'_>, o: &SeedOpts, users: usize) -> Result<Value> {
    crate::suite::settle_writeback(None);
    let (mut v, queries, dir_cpu) = counted(dir, || {
        lmtp_throughput(server, users, users, o.sessions, o.seed, o.scale)
    })?;
    let n = v["messages"].as_f64().unwrap_or(0.0).max(1.0);
    eprintln!(
        "  {:8} {}: {:.2} directory queries and {:.2} ms directory CPU per message",
        server.name(),
        dir.name(),
        queries as f64 / n,
        dir_cpu / n
    );
    v["directory_queries_per_message"] = json!(queries as f64 / n);
    v["directory_cpu_ms_per_message"] = json!(dir_cpu / n);
    Ok(v)
}

/// LMTP to every user, maildex then Dovecot, on fresh mail folders. Nothing is deleted
/// until the end: on this ext4 (mounted with `discard`) removing 10,000 Maildirs takes
/// minutes, and the next run would then meet inodes ext4 skips for a while (see
/// `suite::settle_writeback`).
fn lmtp_both(dir: &Dir<'_>, o: &SeedOpts) -> Result<Value> {
    let tag = match dir {
        Dir::Sql(_) => "sql",
        Dir::Ldap(_) => "ldap",
    };
    let mx_dir = o.work.join(format!("mx-{tag}"));
    let mx = two_passes(
        &start_maildex(o, &mx_dir, &dir.maildex_auth(10_000, false))?,
        dir,
        o,
    )?;
    // maildex as shipped: its five default folders made at each user's first delivery
    let folders = if matches!(dir, Dir::Sql(_)) && o.folder_users > 0 {
        let mx_dir = o.work.join(format!("mx-{tag}-folders"));
        let s = start_maildex(o, &mx_dir, &dir.maildex_auth(10_000, true))?;
        eprintln!("  maildex with its default folders:");
        let v = lmtp_run(&s, dir, o, o.folder_users)?;
        drop(s);
        v
    } else {
        Value::Null
    };
    let dc = two_passes(&start_dovecot(o, &format!("dc-{tag}"), dir, "")?, dir, o)?;
    let rate = |v: &Value, pass: &str| v[pass]["per_sec"].as_f64().unwrap_or(0.0);
    let (ratio, ratio2) = (
        rate(&mx, "first") / rate(&dc, "first").max(1e-9),
        rate(&mx, "second") / rate(&dc, "second").max(1e-9),
    );
    eprintln!(
        "  maildex/Dovecot messages/s with {}: {ratio:.2}x to new users, {ratio2:.2}x to the same users again",
        dir.name()
    );
    Ok(
        json!({"maildex": mx, "dovecot": dc, "ratio": ratio, "ratio_second": ratio2,
              "maildex_default_folders": folders}),
    )
}

/// The seed run proper (every user new: the delivery makes the Maildir and the index), then
/// the same again to the same users, who now have mail (the stores long closed: maildex
/// keeps at most 1,000 idle ones).
fn two_passes(server: &dyn Server, dir: &Dir<'_>, o: &SeedOpts) -> Result<Value> {
    let first = lmtp_run(server, dir, o, o.users)?;
    eprintln!("  {:8} again, to the same users:", server.name());
    let second = lmtp_run(server, dir, o, o.users)?;
    Ok(json!({"first": first, "second": second}))
}

/// LOGIN then LOGOUT of users 0..n from `clients` threads: logins per second.
fn login_pass(addr: std::net::SocketAddr, n: usize, clients: usize) -> Result<f64> {
    let next = AtomicUsize::new(0);
    let t = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            return Ok(());
                        }
                        let mut c = Imap::connect_from(addr, None, Duration::from_secs(60))?;
                        c.ok(&format!("LOGIN \"{}\" \"{PASSWORD}\"", address(i)))?;
                        c.ok("LOGOUT")?;
                    }
                })
            })
            .collect();
        for w in workers {
            w.join()
                .map_err(|_| anyhow::anyhow!("login thread panicked"))??;
        }
        Ok(())
    })?;
    Ok(n as f64 / t.elapsed().as_secs_f64())
}

/// Logins per second with the cache on (filled by a first pass) and off.
fn logins(server: &dyn Server, dir: &Dir<'_>, cache: bool, o: &SeedOpts) -> Result<Value> {
    let n = o.login_users;
    if cache {
        login_pass(server.imap(), n, o.login_clients)?;
    }
    let cpu0 = crate::load::server_cpu_ms(server);
    let (rate, queries, _) = counted(dir, || login_pass(server.imap(), n, o.login_clients))?;
    let cpu = (crate::load::server_cpu_ms(server) - cpu0) / n as f64;
    eprintln!(
        "  {:8} cache {}: {n} logins at {rate:.0}/s, {:.2} SQL queries and {cpu:.2} ms server CPU per login",
        server.name(),
        if cache { "on " } else { "off" },
        queries as f64 / n as f64
    );
    Ok(
        json!({"per_sec": rate, "queries_per_login": queries as f64 / n as f64,
              "server_cpu_ms_per_login": cpu}),
    )
}

/// Dovecot's auth cache settings: on as a site sets it, or off (its default).
fn dovecot_cache(on: bool) -> &'static str {
    if on {
        "auth_cache_size = 10M\nauth_cache_ttl = 1 hour\nauth_cache_negative_ttl = 1 hour\n"
    } else {
        "auth_cache_size = 0\n"
    }
}

fn login_all(db: &Mariadb, o: &SeedOpts) -> Result<Value> {
    let dir = Dir::Sql(db);
    let mut out = serde_json::Map::new();
    for cache in [true, false] {
        let key = if cache { "cache_on" } else { "cache_off" };
        let mx_dir = o.work.join(format!("mx-{key}"));
        let auth = dir.maildex_auth(if cache { 10_000 } else { 0 }, false);
        let mx = logins(&start_maildex(o, &mx_dir, &auth)?, &dir, cache, o)?;
        let dc = start_dovecot(o, &format!("dc-{key}"), &dir, dovecot_cache(cache))?;
        let dc = logins(&dc, &dir, cache, o)?;
        let ratio = mx["per_sec"].as_f64().unwrap_or(0.0) / dc["per_sec"].as_f64().unwrap_or(1.0);
        eprintln!("  maildex/Dovecot logins/s, {key}: {ratio:.2}x");
        out.insert(
            key.into(),
            json!({"maildex": mx, "dovecot": dc, "ratio": ratio}),
        );
    }
    Ok(Value::Object(out))
}

/// maildex with `o.startup_users` users in MariaDB: spawn to greeting, RSS then.
fn startup(db: &Mariadb, hash: &str, o: &SeedOpts) -> Result<Value> {
    db.clear_users()?;
    db.add_users((0..o.startup_users).map(address), hash)?;
    let dir = o.work.join("mx-start");
    let auth = Dir::Sql(db).maildex_auth(10_000, false);
    let t = Instant::now();
    let s = start_maildex(o, &dir, &auth)?;
    let secs = t.elapsed().as_secs_f64();
    let rss = s
        .root_pid()
        .and_then(procs::mem)
        .map_or(0.0, |m| m.rss_kib as f64 / 1024.0);
    let made = std::fs::read_dir(dir.join("mail")).map_or(0, |d| d.count());
    drop(s);
    eprintln!(
        "  maildex with {} users in MariaDB: greeting {:.0} ms after spawn, RSS {rss:.1} MiB, {made} entries under the mail root",
        o.startup_users,
        secs * 1000.0
    );
    Ok(
        json!({"users": o.startup_users, "secs_to_greeting": secs, "rss_mib": rss,
              "mail_root_entries": made}),
    )
}

/// The whole benchmark.
pub fn run(o: &SeedOpts) -> Result<Value> {
    let missing = crate::seed_dirs::missing();
    if !missing.is_empty() {
        let pkgs: Vec<&str> = missing.iter().map(|m| m.1).collect();
        bail!("missing {:?}: apt-get install {}", missing, pkgs.join(" "));
    }
    maildex_dovecot_harness::check_installed()?;
    let t = Instant::now();
    let hash = argon2id_hash()?;
    eprintln!("== directories: {} users in MariaDB and OpenLDAP", o.users);
    let db = Mariadb::start(&o.work.join("my"))?;
    db.add_users((0..o.users).map(address), &hash)?;
    let ldap = Slapd::start(&o.work.join("ld"), (0..o.users).map(address), &hash)?;
    eprintln!("   loaded in {:.1} s", t.elapsed().as_secs_f64());
    eprintln!(
        "== LMTP: {} messages to {} unique users over {} sessions, one RCPT each",
        o.users, o.users, o.sessions
    );
    let part = |p: &str| o.parts.is_empty() || o.parts.iter().any(|x| x == p);
    let (mut sql, mut ldap_r) = (Value::Null, Value::Null);
    if part("lmtp") {
        sql = lmtp_both(&Dir::Sql(&db), o)?;
        ldap_r = lmtp_both(&Dir::Ldap(&ldap), o)?;
    }
    drop(ldap);
    eprintln!(
        "== logins: {} users in MariaDB, {} clients",
        o.login_users, o.login_clients
    );
    let logins = if part("logins") {
        login_all(&db, o)?
    } else {
        Value::Null
    };
    eprintln!("== start-up with {} users in MariaDB", o.startup_users);
    let start = if part("startup") {
        startup(&db, &hash, o)?
    } else {
        Value::Null
    };
    Ok(json!({
        "users": o.users, "sessions": o.sessions, "login_users": o.login_users,
        "login_clients": o.login_clients, "hash": "ARGON2ID (doveadm pw default: m=65536,t=3,p=1)",
        "lmtp": {"MariaDB": sql, "OpenLDAP": ldap_r}, "logins": logins, "startup": start,
        "dovecot": maildex_dovecot_harness::version(), "secs": t.elapsed().as_secs_f64(),
    }))
}
