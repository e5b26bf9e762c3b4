//! `[daemon] user`: `maildex serve` started as root binds a port below 1024, then runs as
//! the configured user for good, and every mail and index file it writes belongs to that
//! user with modes 0600/0700. Runs only as root (CI runs as root); elsewhere it says why
//! it skipped.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;

fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

/// A free port on 127.0.0.1 in `range`, found by binding it (the daemon binds it again
/// a moment later; nothing else on this machine picks ports in these ranges by chance).
fn free_port(range: std::ops::Range<u16>) -> u16 {
    range
        .into_iter()
        .find(|&p| TcpListener::bind(("127.0.0.1", p)).is_ok())
        .expect("a free port")
}

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn connect(addr: SocketAddr, server: &mut Server) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(s) = TcpStream::connect(addr) {
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            return s;
        }
        if let Some(status) = server.0.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = server.0.stderr.take() {
                e.read_to_string(&mut err).unwrap();
            }
            panic!("maildex serve exited ({status}): {err}");
        }
        assert!(Instant::now() < deadline, "{addr} never accepted");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends `line` (unless empty) and reads lines until one starts with `until`.
fn exchange(r: &mut BufReader<TcpStream>, line: &str, until: &str) -> String {
    if !line.is_empty() {
        r.get_mut().write_all(line.as_bytes()).unwrap();
    }
    let mut all = String::new();
    loop {
        let mut l = String::new();
        assert!(r.read_line(&mut l).unwrap() > 0, "closed after: {all}");
        all.push_str(&l);
        if l.starts_with(until) {
            return all;
        }
    }
}

fn status_ids(pid: u32, field: &str) -> Vec<u32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace()
        .skip(1)
        .map(|n| n.parse().unwrap())
        .collect()
}

fn write_config(dir: &Path, extra: &str, imap: u16, lmtp: u16) -> std::path::PathBuf {
    let users = dir.join("users");
    fs::write(&users, "demo:{PLAIN}secret::::::\n").unwrap();
    let config = dir.join("maildex.toml");
    fs::write(
        &config,
        format!(
            "[imap]\nlisten = [\"127.0.0.1:{imap}\"]\n\
             [lmtp]\nlisten = [\"127.0.0.1:{lmtp}\"]\n\
             [storage]\nmail_location = \"{}/mail/%n/Maildir\"\n\
             [auth]\nusers_file = \"{}\"\n{extra}",
            dir.display(),
            users.display()
        ),
    )
    .unwrap();
    config
}

fn start(config: &Path) -> Server {
    Server(
        Command::new(env!("CARGO_BIN_EXE_maildex"))
            .args(["serve", "--config"])
            .arg(config)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// Every file and folder under `dir` (itself included) with its owner and mode.
fn walk(dir: &Path, out: &mut Vec<(std::path::PathBuf, u32, u32, bool)>) {
    let m = fs::symlink_metadata(dir).unwrap();
    out.push((dir.to_owned(), m.uid(), m.mode() & 0o777, m.is_dir()));
    if m.is_dir() {
        for e in fs::read_dir(dir).unwrap() {
            walk(&e.unwrap().path(), out);
        }
    }
}

#[test]
fn serve_binds_as_root_then_runs_as_the_configured_user() {
    if !is_root() {
        eprintln!("skipped: needs root to switch users (CI runs as root)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let mail = tmp.path().join("mail");
    fs::create_dir(&mail).unwrap();
    fs::set_permissions(&mail, fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&mail, Some(NOBODY), Some(NOBODY)).unwrap();
    // a privileged port: only root can bind it, and only before the switch
    let imap = free_port(700..1000);
    let lmtp = free_port(40000..41000);
    let config = write_config(
        tmp.path(),
        "[daemon]\nuser = \"nobody\"\ngroup = \"nogroup\"\n",
        imap,
        lmtp,
    );
    let mut server = start(&config);
    let mut l = BufReader::new(connect(([127, 0, 0, 1], lmtp).into(), &mut server));
    // the kernel accepts a connection as soon as the socket listens, before the switch;
    // the greeting comes once the daemon serves, after it
    exchange(&mut l, "", "220 ");
    let pid = server.0.id();
    for field in ["Uid:", "Gid:"] {
        assert_eq!(
            status_ids(pid, field),
            [NOBODY; 4],
            "{field} real, effective, saved, fs"
        );
    }
    assert_eq!(
        status_ids(pid, "Groups:"),
        [NOBODY],
        "no supplementary group left"
    );

    exchange(&mut l, "LHLO test\r\n", "250 ");
    exchange(&mut l, "MAIL FROM:<a@example.org>\r\n", "250 ");
    exchange(&mut l, "RCPT TO:<demo@example.org>\r\n", "250 ");
    exchange(&mut l, "DATA\r\n", "354 ");
    let reply = exchange(
        &mut l,
        "Subject: hi\r\nFrom: a@example.org\r\n\r\nhello\r\n.\r\n",
        "",
    );
    assert!(reply.starts_with("250 "), "{reply}");

    let mut i = BufReader::new(connect(([127, 0, 0, 1], imap).into(), &mut server));
    exchange(&mut i, "", "* OK");
    exchange(&mut i, "a LOGIN demo secret\r\n", "a OK");
    let sel = exchange(&mut i, "b SELECT INBOX\r\n", "b OK");
    assert!(sel.contains("* 1 EXISTS"), "{sel}");
    let f = exchange(&mut i, "c FETCH 1 BODY.PEEK[TEXT]\r\n", "c OK");
    assert!(f.contains("hello"), "{f}");
    exchange(&mut i, "d CREATE Projects\r\n", "d OK");
    exchange(&mut i, "e SUBSCRIBE Projects\r\n", "e OK");

    let mut found = Vec::new();
    walk(&mail, &mut found);
    assert!(
        found.len() > 10,
        "mail, index and folders were written: {found:?}"
    );
    // the configured folders (issue 17 #3) are made by the configured user too
    assert!(
        found.iter().any(|(p, ..)| p.ends_with(".Trash/cur")),
        "Trash created: {found:?}"
    );
    for (path, uid, mode, dir) in &found {
        assert_eq!(
            *uid,
            NOBODY,
            "{} belongs to the configured user",
            path.display()
        );
        let want = if *dir { 0o700 } else { 0o600 };
        assert_eq!(*mode, want, "{} has mode {mode:o}", path.display());
    }
}

#[test]
fn an_unknown_daemon_user_stops_the_start_before_any_mail_is_touched() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(
        tmp.path(),
        "[daemon]\nuser = \"no-such-user-maildex\"\n",
        free_port(41000..42000),
        free_port(42000..43000),
    );
    let mut server = start(&config);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "maildex serve kept running");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    if let Some(mut e) = server.0.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    assert!(!status.success(), "{err}");
    assert!(err.contains("no-such-user-maildex"), "{err}");
    assert!(!tmp.path().join("mail").exists(), "no Maildir was created");
}
