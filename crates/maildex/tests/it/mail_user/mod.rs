//! What the tests of files, owners and modes share: the unprivileged mail user
//! `maildex-test` (created here once, idempotently, with `useradd --system`), a data folder
//! it owns, the `maildex` binary run as root, and a walk that checks the owner and mode of
//! every file under a folder. These tests need root (CI runs as root); elsewhere they say
//! why they skipped.

#![allow(dead_code)] // each test file uses its own part

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The mail user's name: the `[daemon] user` of these tests.
pub const MAIL_USER: &str = "maildex-test";

pub fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

fn id(flag: &str, user: &str) -> Option<u32> {
    let o = Command::new("id").args([flag, user]).output().ok()?;
    String::from_utf8_lossy(&o.stdout).trim().parse().ok()
}

/// The uid and gid of [`MAIL_USER`], creating the user if it does not exist.
pub fn mail_user() -> (u32, u32) {
    system_user(MAIL_USER)
}

/// The uid and gid of the system user `name`, creating it (`useradd --system`) if it does
/// not exist (tests run in parallel: a `useradd` that lost the race to another test is fine).
pub fn system_user(name: &str) -> (u32, u32) {
    if id("-u", name).is_none() {
        let _ = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
            ])
            .arg(name)
            .status();
    }
    (
        id("-u", name).expect("useradd"),
        id("-g", name).expect("group of the new user"),
    )
}

/// A data folder: `root` (0755, root's) holding `mail/`, owned by the mail user with mode
/// 0700, as the README has the admin prepare `/var/vmail`.
pub fn data_folder() -> tempfile::TempDir {
    let (uid, gid) = mail_user();
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let mail = dir.path().join("mail");
    fs::create_dir(&mail).unwrap();
    fs::set_permissions(&mail, fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&mail, Some(uid), Some(gid)).unwrap();
    dir
}

/// The binary under test: `$MAILDEX_BIN` (to run these tests against another build),
/// else the one cargo built for this test.
pub fn maildex_bin() -> PathBuf {
    std::env::var_os("MAILDEX_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_maildex")))
}

/// Writes `root/maildex.toml`: `extra` first (a `[daemon]` section, say), IMAP on
/// 127.0.0.1:`port`, no LMTP, mail at `root/mail/LOCATION` with the index inside, the users
/// file `root/users` (written by each test) and, with `tls`, `root/cert.pem` and `key.pem`.
pub fn write_config(root: &Path, extra: &str, port: u16, location: &str, tls: bool) -> PathBuf {
    let r = root.display();
    let tls = if tls {
        format!("[tls]\ncert = \"{r}/cert.pem\"\nkey = \"{r}/key.pem\"\n")
    } else {
        String::new()
    };
    let config = root.join("maildex.toml");
    fs::write(
        &config,
        format!(
            "{extra}[imap]\nlisten = [\"127.0.0.1:{port}\"]\nlisten_tls = []\n[lmtp]\nlisten = []\n\
             {tls}[storage]\nmail_location = \"{r}/mail/{location}\"\n\
             fsync = false\nindex_map_size = \"4MiB\"\n\
             [auth]\nusers_file = \"{r}/users\"\n"
        ),
    )
    .unwrap();
    config
}

/// The start of a test of the daemon as the mail user: None (saying why) when not root;
/// else a [`data_folder`], a free IMAP port and a [`write_config`] with `[daemon] user` and
/// mail at `%n/Maildir`.
pub fn as_mail_user() -> Option<(tempfile::TempDir, u16, PathBuf)> {
    if !is_root() {
        eprintln!("skipped: needs root to switch users (CI runs as root)");
        return None;
    }
    let dir = data_folder();
    let port = free_port();
    let config = write_config(dir.path(), &daemon_section(), port, "%n/Maildir", false);
    Some((dir, port, config))
}

/// `[daemon] user = "maildex-test"`, for [`write_config`].
pub fn daemon_section() -> String {
    format!("[daemon]\nuser = \"{MAIL_USER}\"\n")
}

/// `maildex ARGS --config CONFIG` with `stdin`, as the current (root) user.
pub fn maildex(config: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(maildex_bin())
        .args(args)
        .arg("--config")
        .arg(config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run maildex");
    // a command may exit without reading its input
    let _ = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes());
    child.wait_with_output().expect("maildex output")
}

/// stdout and stderr of `o`.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Every file and folder under `dir` (itself included): path, owner uid, mode bits, folder.
pub fn walk(dir: &Path) -> Vec<(PathBuf, u32, u32, bool)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = fs::symlink_metadata(&p).unwrap();
        out.push((p.clone(), m.uid(), m.mode() & 0o7777, m.is_dir()));
        if m.is_dir() {
            stack.extend(fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
    out
}

/// Every file under `dir` belongs to the mail user, folders 0700, files 0600 (what
/// docs/SECURITY.md promises); the panic names `after` (the command just run).
pub fn assert_mail_files(dir: &Path, after: &str) {
    let (uid, _) = mail_user();
    for (path, owner, mode, is_dir) in walk(dir) {
        assert_eq!(
            owner,
            uid,
            "after {after}: {} belongs to uid {owner}, not to {MAIL_USER}",
            path.display()
        );
        let want = if is_dir { 0o700 } else { 0o600 };
        assert_eq!(
            mode,
            want,
            "after {after}: {} has mode {mode:o}",
            path.display()
        );
    }
}

/// A port that was free a moment ago (one definition for both test binaries).
pub use crate::postfix_support::free_port;

/// A `maildex serve` process, killed when dropped; its stderr goes to `log`.
pub struct Server {
    pub child: std::process::Child,
    pub log: PathBuf,
}

impl Server {
    /// Starts `maildex serve --config CONFIG` and waits (bounded) until IMAP on `port`
    /// greets.
    pub fn start(config: &Path, port: u16) -> Server {
        let mut server = Server::spawn(config);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if let Some(st) = server.try_wait() {
                panic!("maildex serve exited with {st}: {}", server.log_text());
            }
            if let Ok(mut c) = Imap::connect(port) {
                c.cmd("LOGOUT");
                return server;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "maildex serve does not listen: {}",
                server.log_text()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Starts `maildex serve --config CONFIG` without waiting for it.
    pub fn spawn(config: &Path) -> Server {
        let log = config.with_extension("log");
        let out = fs::File::create(&log).unwrap();
        let child = Command::new(maildex_bin())
            .args(["serve", "--config"])
            .arg(config)
            .env("MAILDEX_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        Server { child, log }
    }

    /// The exit status, once the process has exited.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends `signal` (`-HUP`) to the process.
    pub fn signal(&self, signal: &str) {
        let st = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `LOGIN user pw` on 127.0.0.1:`port`: the tagged status word.
pub fn login(port: u16, user: &str, pw: &str) -> String {
    let mut c = Imap::connect(port).unwrap();
    let r = c.cmd(&format!("LOGIN {user} {pw}"));
    c.cmd("LOGOUT");
    Imap::status(&r).to_owned()
}

/// Polls (bounded) until `user` with `pw` gets `want`.
pub fn wait_login(server: &Server, port: u16, user: &str, pw: &str, want: &str) {
    let t0 = std::time::Instant::now();
    while login(port, user, pw) != want {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "LOGIN {user} {pw} never answered {want}: {}",
            server.log_text()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A plain IMAP connection on 127.0.0.1 that sends tagged commands and returns everything
/// up to and including the tagged answer.
pub struct Imap {
    reader: std::io::BufReader<std::net::TcpStream>,
    tag: u32,
}

impl Imap {
    /// Connects and reads the greeting.
    pub fn connect(port: u16) -> std::io::Result<Imap> {
        use std::io::BufRead;
        let s = std::net::TcpStream::connect(("127.0.0.1", port))?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
        let mut reader = std::io::BufReader::new(s);
        let mut greeting = String::new();
        reader.read_line(&mut greeting)?;
        if !greeting.starts_with("* OK") {
            return Err(std::io::Error::other(greeting));
        }
        Ok(Imap { reader, tag: 0 })
    }

    /// Sends `command` with a fresh tag; the untagged lines and the tagged line.
    pub fn cmd(&mut self, command: &str) -> String {
        use std::io::BufRead;
        self.tag += 1;
        let tag = format!("t{}", self.tag);
        let line = format!("{tag} {command}\r\n");
        self.reader.get_mut().write_all(line.as_bytes()).unwrap();
        let mut all = String::new();
        loop {
            let mut l = String::new();
            if self.reader.read_line(&mut l).unwrap_or(0) == 0 {
                return all;
            }
            all.push_str(&l);
            if l.starts_with(&format!("{tag} ")) {
                return all;
            }
        }
    }

    /// The status word (`OK`, `NO`, `BAD`) of the tagged answer in `response`.
    pub fn status(response: &str) -> &str {
        response
            .lines()
            .last()
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("")
    }
}
