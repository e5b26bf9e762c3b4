//! A private Dovecot for maildex's tests and benchmarks.
//!
//! [`Dovecot::start`] writes its own `dovecot.conf` and passwd-file into a scratch folder
//! (nothing is read from `/etc/dovecot`), runs `dovecot -c CONF -F` as a child process in
//! its own process group (no system service), waits a bounded time for the IMAP and LMTP
//! ports on 127.0.0.1, and stops the whole process tree on drop, also while a test panics.
//! It installs nothing: [`missing`] and [`HarnessError::Missing`] say exactly which Debian
//! package is absent.
//!
//! ```no_run
//! use maildex_dovecot_harness::{Dovecot, Options, User};
//! let opts = Options {
//!     mail_location: "maildir:/srv/mail/%d/%n/Maildir".into(),
//!     users: vec![User::new("user0001@example.org", "secret")],
//!     mail_root: Some("/srv/mail".into()),
//!     ..Options::default()
//! };
//! let dc = Dovecot::start(std::path::Path::new("/tmp/dc"), opts)?;
//! println!("IMAP on {}, LMTP on {}", dc.imap_addr(), dc.lmtp_addr());
//! # Ok::<(), maildex_dovecot_harness::HarnessError>(())
//! ```
//!
//! Running as root (as CI does), mail is accessed as uid/gid 65534, because Dovecot refuses
//! to access mail as root: [`Options::mail_root`] is handed to that owner on start.

mod config;
pub mod procs;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use procs::ProcMem;

/// Errors of the harness; each names the file, program or port involved.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// Dovecot programs are not installed.
    #[error("Dovecot is not fully installed: {what}; install with: apt-get install {packages}")]
    Missing {
        /// What was looked for and not found (program paths).
        what: String,
        /// The Debian packages that provide them, space-separated.
        packages: String,
    },
    /// A file or folder could not be written or read.
    #[error("{path}: {error}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// A user name or password cannot go into a passwd-file.
    #[error("user {name:?}: names and passwords must be non-empty and free of ':', '\"' and line breaks")]
    BadUser {
        /// The offending user name.
        name: String,
    },
    /// `mail_fsync` is not one of Dovecot's values.
    #[error("mail_fsync {0:?}: must be optimized, always or never")]
    BadFsync(String),
    /// A program could not be run.
    #[error("cannot run {program}: {error}")]
    Spawn {
        /// The program.
        program: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// Dovecot exited during start-up.
    #[error("dovecot ({conf}) exited during start-up with {status}; log:\n{log}")]
    Exited {
        /// The config it was started with.
        conf: PathBuf,
        /// Its exit status.
        status: String,
        /// The end of its log and stderr.
        log: String,
    },
    /// A port did not accept connections in time.
    #[error("dovecot ({conf}) did not listen on 127.0.0.1:{port} within {secs} s; log:\n{log}")]
    Timeout {
        /// The config it was started with.
        conf: PathBuf,
        /// The port waited for.
        port: u16,
        /// The time waited.
        secs: u64,
        /// The end of its log and stderr.
        log: String,
    },
    /// A helper command (doveadm, chown) failed.
    #[error("{program} {args} failed ({status}): {stderr}")]
    Command {
        /// The program.
        program: PathBuf,
        /// Its arguments, space-joined.
        args: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
}

type Result<T, E = HarnessError> = std::result::Result<T, E>;

/// A user of the private passwd-file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// Login name, e.g. `user0001@example.org` (matches `%u`, `%n`, `%d` in mail_location).
    pub name: String,
    /// Plain-text password (stored `{PLAIN}`: loopback test servers only).
    pub password: String,
}

impl User {
    /// A user with a password.
    pub fn new(name: impl Into<String>, password: impl Into<String>) -> User {
        User {
            name: name.into(),
            password: password.into(),
        }
    }
}

/// Which system user Dovecot accesses mail as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MailOwner {
    /// These numeric ids (as root: Dovecot refuses uid 0 for mail).
    Ids {
        /// User id.
        uid: u32,
        /// Group id.
        gid: u32,
    },
    /// The calling user, running Dovecot unprivileged (every service as this user name).
    Current {
        /// The calling user's name.
        user: String,
    },
}

impl MailOwner {
    /// uid 65534 (nobody) when running as root, otherwise the calling user.
    pub fn default_for_caller() -> MailOwner {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            return MailOwner::Ids {
                uid: 65534,
                gid: 65534,
            };
        }
        MailOwner::Current {
            user: std::env::var("USER").unwrap_or_else(|_| "nobody".into()),
        }
    }

    /// (uid, gid) written into the passwd-file.
    pub fn ids(&self) -> (u32, u32) {
        match self {
            MailOwner::Ids { uid, gid } => (*uid, *gid),
            // SAFETY: getuid/getgid have no preconditions.
            MailOwner::Current { .. } => unsafe { (libc::getuid(), libc::getgid()) },
        }
    }
}

/// How to start Dovecot.
#[derive(Clone, Debug)]
pub struct Options {
    /// Dovecot's `mail_location`, e.g. `maildir:/srv/mail/%d/%n/Maildir` (the layout of
    /// maildex's `[storage] mail_location` and of maildex-corpus).
    pub mail_location: String,
    /// Users of the passwd-file (passdb and userdb).
    pub users: Vec<User>,
    /// The folder holding the mail; when set, handed to [`Options::mail_owner`] on start
    /// (recursively) and made searchable along its parents.
    pub mail_root: Option<PathBuf>,
    /// Who accesses the mail.
    pub mail_owner: MailOwner,
    /// Concurrent IMAP connections to allow (process and per-user limits are raised to it).
    pub max_connections: usize,
    /// How long to wait for the ports.
    pub start_timeout: Duration,
    /// Lines appended to dovecot.conf.
    pub extra_config: String,
    /// `mail_fsync`: `optimized` (Dovecot's default), `always` or `never`.
    pub mail_fsync: String,
    /// passdb and userdb blocks written instead of the passwd-file ones (SQL or LDAP
    /// users: `passdb { driver = sql ... }`); [`Options::users`] then only get homes.
    pub auth: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mail_location: String::new(),
            users: Vec::new(),
            mail_root: None,
            mail_owner: MailOwner::default_for_caller(),
            max_connections: 100,
            start_timeout: Duration::from_secs(15),
            extra_config: String::new(),
            mail_fsync: "optimized".into(),
            auth: None,
        }
    }
}

/// Where Debian installs Dovecot's service binaries.
const LIBEXEC_DIRS: &[&str] = &["/usr/lib/dovecot", "/usr/libexec/dovecot"];

/// Finds a program on PATH or in the sbin folders (where Debian puts `dovecot`, and which
/// a non-root PATH lacks).
fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin"].iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn find_service(name: &str) -> Option<PathBuf> {
    LIBEXEC_DIRS
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// What is missing to run the harness: (what was looked for, Debian package), empty when
/// everything is there.
pub fn missing() -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    for prog in ["dovecot", "doveadm"] {
        if find_program(prog).is_none() {
            out.push((
                format!("{prog} (not on PATH nor in /usr/sbin)"),
                "dovecot-core",
            ));
        }
    }
    for (svc, pkg) in [("imap", "dovecot-imapd"), ("lmtp", "dovecot-lmtpd")] {
        if find_service(svc).is_none() {
            out.push((
                format!("{svc} service (no {svc} in {})", LIBEXEC_DIRS.join(" or ")),
                pkg,
            ));
        }
    }
    out
}

/// Ok when Dovecot can be started, else [`HarnessError::Missing`] naming the packages.
pub fn check_installed() -> Result<()> {
    missing_error(&missing())
}

fn missing_error(m: &[(String, &'static str)]) -> Result<()> {
    if m.is_empty() {
        return Ok(());
    }
    let mut packages: Vec<&str> = m.iter().map(|(_, p)| *p).collect();
    packages.dedup();
    Err(HarnessError::Missing {
        what: m
            .iter()
            .map(|(w, _)| w.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        packages: packages.join(" "),
    })
}

/// The Dovecot version (`dovecot --version`), if installed.
pub fn version() -> Option<String> {
    let out = Command::new(find_program("dovecot")?)
        .arg("--version")
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (!v.is_empty()).then_some(v)
}

/// A free TCP port on 127.0.0.1 (bound then released; the harness retries on a clash).
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|error| HarnessError::Io {
        path: "127.0.0.1:0".into(),
        error,
    })?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|error| HarnessError::Io {
            path: "127.0.0.1:0".into(),
            error,
        })
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> HarnessError + '_ {
    move |error| HarnessError::Io {
        path: path.to_owned(),
        error,
    }
}

/// A running private Dovecot; stopped (with every child process) on drop.
pub struct Dovecot {
    child: Option<Child>,
    scratch: PathBuf,
    conf: PathBuf,
    imap_port: u16,
    lmtp_port: u16,
    opts: Options,
}

impl Dovecot {
    /// Writes the config into `scratch` (created if needed), starts Dovecot and waits for
    /// its ports. `scratch` should be short: Dovecot's unix sockets live in `scratch/run`
    /// and socket paths are limited to 107 bytes.
    pub fn start(scratch: &Path, opts: Options) -> Result<Dovecot> {
        check_installed()?;
        if !matches!(opts.mail_fsync.as_str(), "optimized" | "always" | "never") {
            return Err(HarnessError::BadFsync(opts.mail_fsync.clone()));
        }
        for u in &opts.users {
            if config::bad_field(&u.name) || config::bad_field(&u.password) {
                return Err(HarnessError::BadUser {
                    name: u.name.clone(),
                });
            }
        }
        std::fs::create_dir_all(scratch).map_err(io_err(scratch))?;
        let scratch = scratch.canonicalize().map_err(io_err(scratch))?;
        let mut dc = Dovecot {
            child: None,
            conf: scratch.join("dovecot.conf"),
            scratch,
            imap_port: 0,
            lmtp_port: 0,
            opts,
        };
        dc.prepare_dirs()?;
        // A port picked free may be taken before Dovecot binds it: try a few times.
        let mut last = None;
        for _ in 0..3 {
            dc.imap_port = free_port()?;
            dc.lmtp_port = free_port()?;
            dc.write_files()?;
            match dc.spawn_and_wait() {
                Ok(()) => return Ok(dc),
                Err(e @ (HarnessError::Exited { .. } | HarnessError::Timeout { .. }))
                    if e.to_string().contains("in use") =>
                {
                    dc.stop();
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| HarnessError::Io {
            path: dc.conf.clone(),
            error: std::io::Error::other("no free ports"),
        }))
    }

    fn prepare_dirs(&self) -> Result<()> {
        for d in ["run", "state", "home"] {
            let p = self.scratch.join(d);
            std::fs::create_dir_all(&p).map_err(io_err(&p))?;
        }
        for u in &self.opts.users {
            let p = self.scratch.join("home").join(&u.name);
            std::fs::create_dir_all(&p).map_err(io_err(&p))?;
        }
        // Dovecot's services run as other users; they must reach the scratch folder.
        searchable_with_parents(&self.scratch)?;
        let mut owned = vec![self.scratch.join("home")];
        owned.extend(self.opts.mail_root.clone());
        if let MailOwner::Ids { uid, gid } = self.opts.mail_owner {
            for p in &owned {
                searchable_with_parents(p)?;
                run_checked(
                    Path::new("chown"),
                    &["-R".into(), format!("{uid}:{gid}"), p.display().to_string()],
                )?;
            }
        }
        Ok(())
    }

    fn write_files(&self) -> Result<()> {
        let layout = config::Layout {
            scratch: &self.scratch,
            imap_port: self.imap_port,
            lmtp_port: self.lmtp_port,
        };
        let users = self.scratch.join("users");
        std::fs::write(&users, config::users_file(&self.opts, &layout)).map_err(io_err(&users))?;
        std::fs::write(&self.conf, config::dovecot_conf(&self.opts, &layout))
            .map_err(io_err(&self.conf))
    }

    fn spawn_and_wait(&mut self) -> Result<()> {
        let program = find_program("dovecot").unwrap_or_else(|| "dovecot".into());
        let stderr_path = self.scratch.join("dovecot.stderr");
        let stderr = std::fs::File::create(&stderr_path).map_err(io_err(&stderr_path))?;
        let mut cmd = Command::new(&program);
        cmd.arg("-c")
            .arg(&self.conf)
            .arg("-F")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            // Own process group, so one signal reaches every service process.
            .process_group(0);
        // SAFETY: the closure only calls prctl(2), which is async-signal-safe, between fork
        // and exec. PR_SET_PDEATHSIG makes the kernel stop the master if this process dies
        // without running Drop (e.g. SIGKILL of a test binary).
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|error| HarnessError::Spawn {
            program: program.clone(),
            error,
        })?;
        self.child = Some(child);
        let deadline = Instant::now() + self.opts.start_timeout;
        for port in [self.imap_port, self.lmtp_port] {
            loop {
                if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                    return Err(HarnessError::Exited {
                        conf: self.conf.clone(),
                        status: status.to_string(),
                        log: self.log_tail(),
                    });
                }
                let addr = SocketAddr::from(([127, 0, 0, 1], port));
                if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(HarnessError::Timeout {
                        conf: self.conf.clone(),
                        port,
                        secs: self.opts.start_timeout.as_secs(),
                        log: self.log_tail(),
                    });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    /// Stops Dovecot and every process it started: SIGTERM to the master (it stops its
    /// services), then after a bounded wait SIGKILL to its process group and any
    /// descendant left. Idempotent; also run by Drop.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id();
        let mut pids = procs::tree(pid);
        procs::signal_all(&[pid], libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        pids.extend(procs::tree(pid));
        procs::signal_group(pid, libc::SIGKILL);
        procs::signal_all(&pids, libc::SIGKILL);
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Stops and starts Dovecot again on the same config and ports (fresh processes, e.g.
    /// after deleting its index files).
    pub fn restart(&mut self) -> Result<()> {
        self.stop();
        self.spawn_and_wait()
    }

    /// The IMAP listener (plain, plaintext login allowed).
    pub fn imap_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.imap_port))
    }

    /// The LMTP listener.
    pub fn lmtp_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.lmtp_port))
    }

    /// The master process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The master and every service process alive now.
    pub fn processes(&self) -> Vec<u32> {
        self.pid().map(procs::tree).unwrap_or_default()
    }

    /// Memory summed over all of Dovecot's processes, and their count.
    pub fn memory(&self) -> (ProcMem, usize) {
        self.pid().map(procs::tree_mem).unwrap_or_default()
    }

    /// The config file written.
    pub fn conf_path(&self) -> &Path {
        &self.conf
    }

    /// The scratch folder.
    pub fn scratch(&self) -> &Path {
        &self.scratch
    }

    /// Dovecot's log so far (empty if none yet).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.scratch.join("dovecot.log")).unwrap_or_default()
    }

    fn log_tail(&self) -> String {
        let mut s = self.log();
        s.push_str(
            &std::fs::read_to_string(self.scratch.join("dovecot.stderr")).unwrap_or_default(),
        );
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Runs `doveadm -c CONF ARGS` and returns its stdout.
    pub fn doveadm(&self, args: &[&str]) -> Result<String> {
        self.doveadm_with_input(args, &[])
    }

    /// [`Dovecot::doveadm`] with `input` on its standard input (`doveadm save`).
    pub fn doveadm_with_input(&self, args: &[&str], input: &[u8]) -> Result<String> {
        let program = find_program("doveadm").unwrap_or_else(|| "doveadm".into());
        let mut full = vec!["-c".to_owned(), self.conf.display().to_string()];
        full.extend(args.iter().map(|s| (*s).to_owned()));
        run_with_input(&program, &full, input)
    }

    /// Hands `path` (recursively) to the mail owner again, e.g. after copying new mail in.
    pub fn chown_mail(&self, path: &Path) -> Result<()> {
        if let MailOwner::Ids { uid, gid } = self.opts.mail_owner {
            searchable_with_parents(path)?;
            run_checked(
                Path::new("chown"),
                &[
                    "-R".into(),
                    format!("{uid}:{gid}"),
                    path.display().to_string(),
                ],
            )?;
        }
        Ok(())
    }
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Adds search (x) permission for others to `path` and each parent below `/` that lacks it,
/// so services running as another user can reach `path`.
fn searchable_with_parents(path: &Path) -> Result<()> {
    for p in path.ancestors() {
        if p == Path::new("/") || p.as_os_str().is_empty() {
            break;
        }
        let Ok(md) = std::fs::metadata(p) else {
            continue;
        };
        let mode = md.permissions().mode();
        if md.is_dir() && mode & 0o001 == 0 {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode | 0o055))
                .map_err(io_err(p))?;
        }
    }
    Ok(())
}

fn run_checked(program: &Path, args: &[String]) -> Result<String> {
    run_with_input(program, args, &[])
}

/// Runs `program` with `input` on its standard input; its stdout, or an error naming the
/// command and its stderr when it fails.
fn run_with_input(program: &Path, args: &[String], input: &[u8]) -> Result<String> {
    let spawn_err = |error| HarnessError::Spawn {
        program: program.to_owned(),
        error,
    };
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_err)?;
    let mut stdin = child.stdin.take();
    if let Some(w) = stdin.as_mut() {
        // a program that exits without reading leaves a broken pipe: its status tells
        let _ = std::io::Write::write_all(w, input);
    }
    drop(stdin);
    let out = child.wait_with_output().map_err(spawn_err)?;
    if !out.status.success() {
        return Err(HarnessError::Command {
            program: program.to_owned(),
            args: args.join(" "),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_names_programs_and_packages_once() {
        assert!(missing_error(&[]).is_ok());
        let e = missing_error(&[
            ("dovecot (x)".into(), "dovecot-core"),
            ("doveadm (x)".into(), "dovecot-core"),
            ("lmtp service (y)".into(), "dovecot-lmtpd"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("dovecot (x), doveadm (x), lmtp service (y)")
                && e.ends_with("apt-get install dovecot-core dovecot-lmtpd"),
            "{e}"
        );
    }

    #[test]
    fn bad_user_is_refused_before_anything_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = Options {
            users: vec![User::new("a:b", "pw")],
            ..Options::default()
        };
        match Dovecot::start(tmp.path(), opts) {
            Err(HarnessError::BadUser { name }) => assert_eq!(name, "a:b"),
            Err(HarnessError::Missing { .. }) => {} // no Dovecot on this machine
            Err(e) => panic!("unexpected {e}"),
            Ok(_) => panic!("started with a bad user"),
        }
    }
}
