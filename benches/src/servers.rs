//! The two servers behind one interface: Dovecot (through maildex-dovecot-harness) and
//! maildex (`maildex serve --config FILE`), each on its own copy of the same Maildir tree
//! (`ROOT/%d/%n/Maildir`).

use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use maildex_dovecot_harness::{procs, Dovecot, Options, ProcMem, User};

/// The name of the config file `MaildexServer::start` writes into its folder.
pub const MAILDEX_CONFIG: &str = "maildex.toml";
/// Password of every benchmark user.
pub const PASSWORD: &str = "bench";
/// Domain of every benchmark user.
pub const DOMAIN: &str = "example.org";

/// A server under test.
pub trait Server {
    /// "dovecot" or "maildex".
    fn name(&self) -> &'static str;
    /// Plain IMAP listener.
    fn imap(&self) -> SocketAddr;
    /// LMTP listener.
    fn lmtp(&self) -> SocketAddr;
    /// The top process (its descendants are the server's other processes).
    fn root_pid(&self) -> Option<u32>;
    /// The mail root (`ROOT` of `ROOT/%d/%n/Maildir`).
    fn mail_root(&self) -> &Path;
    /// Stops the server, drops whatever a listing leaves behind that delivery would not
    /// have written (Dovecot: `dovecot.index*` and its cache; maildex: nothing, its index is
    /// written at delivery), and starts fresh processes.
    fn cold_restart(&mut self) -> Result<()>;
    /// Stops the server and starts fresh processes on the same mail and indexes (the IDLE
    /// workload measures memory from there, not from what earlier workloads left cached).
    fn restart(&mut self) -> Result<()>;
    /// Bytes of index (and cache) the server keeps for `user` (local part).
    fn index_bytes(&self, user: &str) -> u64;
    /// Rebuilds `user`'s index of INBOX from the Maildir alone with the server's own admin
    /// tool, timed: Dovecot `doveadm force-resync` with its `dovecot.index*` deleted first
    /// (the index, no cache: the cache fills on the next listing), maildex `maildex index
    /// rebuild` (everything a listing needs, UIDs kept). The server runs meanwhile.
    fn rebuild_index(&mut self, user: &str) -> Result<Duration>;

    /// All processes of the server now.
    fn pids(&self) -> Vec<u32> {
        self.root_pid().map(procs::tree).unwrap_or_default()
    }
    /// Memory summed over the server's processes, and their count.
    fn memory(&self) -> (ProcMem, usize) {
        self.root_pid().map(procs::tree_mem).unwrap_or_default()
    }
    /// `user`'s Maildir.
    fn maildir(&self, user: &str) -> PathBuf {
        self.mail_root().join(DOMAIN).join(user).join("Maildir")
    }
}

/// Sum of the sizes of files under `dir` whose name satisfies `keep`.
pub fn dir_bytes(dir: &Path, keep: &dyn Fn(&str) -> bool) -> u64 {
    let mut total = 0;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    for e in rd.flatten() {
        let Ok(md) = e.metadata() else { continue };
        if md.is_dir() {
            total += dir_bytes(&e.path(), keep);
        } else if keep(&e.file_name().to_string_lossy()) {
            // Bytes on disk, never more than the length (LMDB files may be sparse).
            total += md.len().min(md.blocks() * 512);
        }
    }
    total
}

fn remove_matching(dir: &Path, matches: &dyn Fn(&str) -> bool) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            remove_matching(&p, matches);
        } else if matches(&e.file_name().to_string_lossy()) {
            let _ = std::fs::remove_file(&p);
        }
    }
}

/// Dovecot on its own copy of the mail.
pub struct DovecotServer {
    dc: Dovecot,
    mail: PathBuf,
    name: &'static str,
}

impl DovecotServer {
    /// Starts Dovecot on `mail` (already a copy of the corpus) with `users` (local parts)
    /// and its `mail_fsync` setting.
    pub fn start(
        scratch: &Path,
        mail: &Path,
        users: &[String],
        max_connections: usize,
        mail_fsync: &str,
    ) -> Result<DovecotServer> {
        DovecotServer::start_with_auth(scratch, mail, users, max_connections, mail_fsync, None, "")
    }

    /// [`DovecotServer::start`] with `auth` (passdb and userdb blocks) instead of the
    /// passwd-file of `users`, and `extra` lines of dovecot.conf.
    pub fn start_with_auth(
        scratch: &Path,
        mail: &Path,
        users: &[String],
        max_connections: usize,
        mail_fsync: &str,
        auth: Option<String>,
        extra: &str,
    ) -> Result<DovecotServer> {
        DovecotServer::start_as(
            "dovecot",
            scratch,
            mail,
            users,
            max_connections,
            mail_fsync,
            auth,
            extra,
        )
    }

    /// [`DovecotServer::start_with_auth`] under another `name` (a second Dovecot in one
    /// run, such as `maildex-bench search --xapian`'s with its fts plugin in `extra`).
    #[allow(clippy::too_many_arguments)]
    pub fn start_as(
        name: &'static str,
        scratch: &Path,
        mail: &Path,
        users: &[String],
        max_connections: usize,
        mail_fsync: &str,
        auth: Option<String>,
        extra: &str,
    ) -> Result<DovecotServer> {
        let opts = Options {
            auth,
            extra_config: extra.to_owned(),
            mail_location: format!("maildir:{}/%d/%n/Maildir", mail.display()),
            users: users
                .iter()
                .map(|u| User::new(format!("{u}@{DOMAIN}"), PASSWORD))
                .collect(),
            mail_root: Some(mail.to_owned()),
            max_connections,
            mail_fsync: mail_fsync.to_owned(),
            ..Options::default()
        };
        let dc = Dovecot::start(scratch, opts)?;
        Ok(DovecotServer {
            dc,
            mail: mail.to_owned(),
            name,
        })
    }

    /// The harness's Dovecot (doveadm, its scratch folder with the users' homes).
    pub fn dovecot(&self) -> &Dovecot {
        &self.dc
    }
}

fn dovecot_index_file(name: &str) -> bool {
    name.starts_with("dovecot.index")
}

impl Server for DovecotServer {
    fn name(&self) -> &'static str {
        self.name
    }
    fn imap(&self) -> SocketAddr {
        self.dc.imap_addr()
    }
    fn lmtp(&self) -> SocketAddr {
        self.dc.lmtp_addr()
    }
    fn root_pid(&self) -> Option<u32> {
        self.dc.pid()
    }
    fn mail_root(&self) -> &Path {
        &self.mail
    }
    fn cold_restart(&mut self) -> Result<()> {
        self.dc.stop();
        // dovecot.index, .index.log, .index.log.2, .index.cache: Dovecot rebuilds them from
        // the Maildir and dovecot-uidlist (which stays, so UIDs stay).
        remove_matching(&self.mail, &dovecot_index_file);
        Ok(self.dc.restart()?)
    }
    fn restart(&mut self) -> Result<()> {
        self.dc.stop();
        Ok(self.dc.restart()?)
    }
    fn index_bytes(&self, user: &str) -> u64 {
        dir_bytes(&self.maildir(user), &dovecot_index_file)
    }
    fn rebuild_index(&mut self, user: &str) -> Result<Duration> {
        self.dc.stop();
        remove_matching(&self.maildir(user), &dovecot_index_file);
        self.dc.restart()?;
        let t = Instant::now();
        self.dc
            .doveadm(&["force-resync", "-u", &format!("{user}@{DOMAIN}"), "INBOX"])?;
        Ok(t.elapsed())
    }
}

/// maildex (`maildex serve --config FILE`) on its own copy of the mail.
pub struct MaildexServer {
    bin: PathBuf,
    conf: PathBuf,
    dir: PathBuf,
    mail: PathBuf,
    imap: SocketAddr,
    lmtp: SocketAddr,
    child: Option<Child>,
}

impl MaildexServer {
    /// Writes a config and users file under `dir`, starts `maildex serve` and waits for its
    /// ports. Any failure means "not available" to the caller.
    pub fn start(bin: &Path, dir: &Path, mail: &Path, users: &[String]) -> Result<MaildexServer> {
        std::fs::create_dir_all(dir)?;
        let users_file = dir.join("users");
        let mut text = String::new();
        for u in users {
            text.push_str(&format!("{u}@{DOMAIN}:{{PLAIN}}{PASSWORD}::::::\n"));
        }
        std::fs::write(&users_file, text)?;
        let auth = format!("[auth]\nusers_file = \"{}\"\n", users_file.display());
        MaildexServer::start_with_auth(bin, dir, mail, &auth)
    }

    /// [`MaildexServer::start`] with `auth` as the config's `[auth]` part (with its
    /// `[auth.sql]` or `[auth.ldap]` table) instead of a users file.
    pub fn start_with_auth(
        bin: &Path,
        dir: &Path,
        mail: &Path,
        auth: &str,
    ) -> Result<MaildexServer> {
        if !bin.is_file() {
            bail!(
                "no maildex binary at {} (build it: cargo build --release -p maildex)",
                bin.display()
            );
        }
        std::fs::create_dir_all(dir)?;
        let port = || maildex_dovecot_harness::free_port();
        let (imap, lmtp) = (
            SocketAddr::from(([127, 0, 0, 1], port()?)),
            SocketAddr::from(([127, 0, 0, 1], port()?)),
        );
        let conf = dir.join(MAILDEX_CONFIG);
        // `[storage] full_text` from MAILDEX_BENCH_FULL_TEXT (`true`/`false`; default the
        // config's default), for LMTP and index size with and without the stored text
        let full_text = match std::env::var("MAILDEX_BENCH_FULL_TEXT") {
            Ok(v) if v == "true" || v == "false" => format!("full_text = {v}\n"),
            Ok(v) => bail!("MAILDEX_BENCH_FULL_TEXT={v}: true or false"),
            Err(_) => String::new(),
        };
        // `[storage] fsync` from MAILDEX_BENCH_FSYNC (`true`/`false`; default true): what
        // the syncs cost, measured by leaving them out
        let fsync = match std::env::var("MAILDEX_BENCH_FSYNC") {
            Ok(v) if v == "true" || v == "false" => v,
            Ok(v) => bail!("MAILDEX_BENCH_FSYNC={v}: true or false"),
            Err(_) => "true".to_owned(),
        };
        std::fs::write(
            &conf,
            format!(
                "[imap]\nlisten = [\"{imap}\"]\nlisten_tls = []\n\n[lmtp]\nlisten = [\"{lmtp}\"]\n\n\
                 [storage]\nmail_location = \"{m}/%d/%n/Maildir\"\nindex_root = \"{d}/index/%d/%n\"\nfsync = {fsync}\n{full_text}\n\
                 [log]\nlevel = \"warn\"\n\n{auth}",
                m = mail.display(),
                d = dir.display(),
            ),
        )?;
        let mut s = MaildexServer {
            bin: bin.to_owned(),
            conf,
            dir: dir.to_owned(),
            mail: mail.to_owned(),
            imap,
            lmtp,
            child: None,
        };
        // `serve` brings every user's index up to date before it listens: the state
        // delivery leaves (each message indexed once, no listing state).
        s.spawn()?;
        Ok(s)
    }

    fn spawn(&mut self) -> Result<()> {
        let stderr = std::fs::File::create(self.dir.join("serve.stderr"))?;
        let child = Command::new(&self.bin)
            .arg("serve")
            .arg("--config")
            .arg(&self.conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {}", self.bin.display()))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(120);
        for addr in [self.imap, self.lmtp] {
            loop {
                if let Some(Ok(Some(st))) = self.child.as_mut().map(Child::try_wait) {
                    self.child = None;
                    let err =
                        std::fs::read_to_string(self.dir.join("serve.stderr")).unwrap_or_default();
                    let last: Vec<&str> = err.lines().rev().take(3).collect();
                    bail!(
                        "`maildex serve` exited ({st}) without listening on {addr}: {}",
                        last.into_iter().rev().collect::<Vec<_>>().join(" / ")
                    );
                }
                if greets(addr) {
                    break;
                }
                if Instant::now() > deadline {
                    self.stop();
                    bail!("`maildex serve` did not listen on {addr} within 120 s");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // the background full-text indexer writes what start-up or the last run left
        // pending (a corpus just copied in: seconds of CPU); measured meanwhile, a
        // workload would share the cores with it, Dovecot's included
        if let Some(pid) = self.child.as_ref().map(Child::id) {
            if !cpu_settles(pid, Duration::from_secs(120)) {
                eprintln!("  maildex  still busy 120 s after its start; measuring anyway");
            }
        }
        Ok(())
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let pid = c.id() as libc::pid_t;
            // SAFETY: kill(2) on our own child; no memory involved.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            // SAFETY: as above, for the whole process group of the child.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
            let _ = c.wait();
        }
    }
}

/// Waits until process `pid` used at most one clock tick (10 ms) of CPU in each of three
/// 100 ms windows in a row, or `at_most`; whether it settled.
fn cpu_settles(pid: u32, at_most: Duration) -> bool {
    let deadline = Instant::now() + at_most;
    let (mut last, mut quiet) = (procs::tree_cpu_ms(pid), 0);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        let now = procs::tree_cpu_ms(pid);
        quiet = if now - last <= 10.0 { quiet + 1 } else { 0 };
        if quiet >= 3 {
            return true;
        }
        last = now;
    }
    false
}

/// Whether the server at `addr` sends its greeting (IMAP `* OK`, LMTP `220`) within a
/// second. A connect alone is not enough: `maildex serve` binds its ports before its
/// start-up sync and greets only once that is done, and a sync still running would take
/// CPU from whatever the benchmark measures next (Dovecot's run of a workload included).
fn greets(addr: SocketAddr) -> bool {
    use std::io::Read;
    let Ok(mut c) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = c.set_read_timeout(Some(Duration::from_secs(1)));
    let mut buf = [0u8; 64];
    matches!(c.read(&mut buf), Ok(n) if n >= 3 && (buf.starts_with(b"* OK") || buf.starts_with(b"220")))
}

impl Drop for MaildexServer {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Server for MaildexServer {
    fn name(&self) -> &'static str {
        "maildex"
    }
    fn imap(&self) -> SocketAddr {
        self.imap
    }
    fn lmtp(&self) -> SocketAddr {
        self.lmtp
    }
    fn root_pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
    fn mail_root(&self) -> &Path {
        &self.mail
    }
    fn cold_restart(&mut self) -> Result<()> {
        self.stop();
        self.spawn()
    }
    fn restart(&mut self) -> Result<()> {
        self.cold_restart()
    }
    fn index_bytes(&self, user: &str) -> u64 {
        dir_bytes(&self.dir.join("index").join(DOMAIN).join(user), &|_| true)
    }
    fn rebuild_index(&mut self, user: &str) -> Result<Duration> {
        let t = Instant::now();
        let out = Command::new(&self.bin)
            .args([
                "index",
                "rebuild",
                "--user",
                &format!("{user}@{DOMAIN}"),
                "--config",
            ])
            .arg(&self.conf)
            .output()
            .with_context(|| format!("running {}", self.bin.display()))?;
        let took = t.elapsed();
        if !out.status.success() {
            bail!(
                "maildex index rebuild: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(took)
    }
}
