//! A real postfix in front of maildex: mail sent through postfix's SMTP port to several
//! recipients must arrive exactly once in each Maildir, indexed, over LMTP (TCP and a
//! unix socket, with an IMAP session of each recipient idling meanwhile that must see
//! every message arrive) and through `maildex deliver` as a pipe transport.
//!
//! Needs postfix and root (a private instance with its own queue on loopback). Skipped
//! with a message when postfix is missing, unless `CI` is set: then it must run.

mod crash_support;
mod imap_support;
mod lmtp_support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crash_support::maildex_bin;

const POSTFIX: &str = "/usr/sbin/postfix";

/// False (with a message) when postfix cannot run here and CI does not insist.
fn postfix_available() -> bool {
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false");
    let installed = Path::new(POSTFIX).exists();
    let root = unsafe_free_is_root();
    if installed && root {
        return true;
    }
    let why = if installed {
        "needs root"
    } else {
        "postfix is not installed (apt-get install postfix)"
    };
    assert!(!ci, "CI is set but the postfix test cannot run: {why}");
    eprintln!("SKIPPED: real-postfix test: {why}");
    false
}

fn unsafe_free_is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A private postfix instance; stopped and its queue emptied on drop.
struct Postfix {
    dir: PathBuf,
    smtp_port: u16,
}

const SERVICES: &str = "\
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
tlsmgr    unix  -       -       n       1000?   1       tlsmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
proxywrite unix -       -       n       -       1       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
local     unix  -       n       n       -       -       local
virtual   unix  -       n       n       -       -       virtual
lmtp      unix  -       -       n       -       -       lmtp
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
";

impl Postfix {
    /// Starts postfix with `transport` as `virtual_transport` and `extra_master` lines.
    fn start(dir: &Path, transport: &str, extra_main: &str, extra_master: &str) -> Postfix {
        std::fs::create_dir_all(dir.join("queue")).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let smtp_port = free_port();
        let d = dir.display();
        let main = format!(
            "compatibility_level = 3.6\n\
             queue_directory = {d}/queue\n\
             data_directory = {d}/data\n\
             maillog_file = {d}/postfix.log\n\
             maillog_file_prefixes = {d}\n\
             inet_interfaces = 127.0.0.1\n\
             inet_protocols = ipv4\n\
             myhostname = mx.test\n\
             mydomain = test\n\
             mydestination =\n\
             alias_maps =\n\
             alias_database =\n\
             local_recipient_maps =\n\
             mynetworks = 127.0.0.0/8\n\
             smtpd_relay_restrictions = permit_mynetworks, reject\n\
             virtual_mailbox_domains = example.org, example.net\n\
             virtual_mailbox_maps =\n\
             virtual_transport = {transport}\n\
             minimal_backoff_time = 1s\n\
             maximal_backoff_time = 2s\n\
             queue_run_delay = 1s\n\
             smtputf8_enable = no\n\
             biff = no\n\
             default_transport = discard:no relaying in tests\n\
             {extra_main}\n"
        );
        std::fs::write(dir.join("main.cf"), main).unwrap();
        let master =
            format!("127.0.0.1:{smtp_port} inet n - n - - smtpd\n{SERVICES}{extra_master}\n");
        std::fs::write(dir.join("master.cf"), master).unwrap();
        let p = Postfix {
            dir: dir.to_path_buf(),
            smtp_port,
        };
        let out = p.cmd(POSTFIX, &["start"]);
        assert!(
            out.status.success(),
            "postfix start failed: {}\nlog:\n{}",
            String::from_utf8_lossy(&out.stderr),
            p.log()
        );
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", smtp_port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "smtpd never listened; log:\n{}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        p
    }

    fn cmd(&self, prog: &str, args: &[&str]) -> std::process::Output {
        Command::new(prog)
            .arg("-c")
            .arg(&self.dir)
            .args(args)
            .output()
            .unwrap()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("postfix.log")).unwrap_or_default()
    }

    fn flush(&self) {
        let _ = self.cmd("/usr/sbin/postqueue", &["-f"]);
    }

    /// Lines that say something went wrong.
    fn problems(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter(|l| l.contains("warning:") || l.contains("fatal:") || l.contains("panic:"))
            // postfix-script's start-up lint of our scratch spool (ownership and modes
            // of the folders `postfix start` creates there): not about delivery
            .filter(|l| !l.contains("postfix/postfix-script["))
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Postfix {
    fn drop(&mut self) {
        let _ = self.cmd("/usr/sbin/postsuper", &["-d", "ALL"]);
        let _ = self.cmd(POSTFIX, &["stop"]);
    }
}

/// Sends one message through SMTP; panics on any refusal.
fn smtp_send(port: u16, from: &str, rcpts: &[&str], msg: &str) {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    let expect = |code: &str, r: &mut BufReader<TcpStream>| loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(line.starts_with(code), "expected {code}, got {line:?}");
        if line.as_bytes().get(3) != Some(&b'-') {
            break;
        }
    };
    expect("220", &mut r);
    w.write_all(b"EHLO client.test\r\n").unwrap();
    expect("250", &mut r);
    w.write_all(format!("MAIL FROM:<{from}>\r\n").as_bytes())
        .unwrap();
    expect("250", &mut r);
    for rc in rcpts {
        w.write_all(format!("RCPT TO:<{rc}>\r\n").as_bytes())
            .unwrap();
        expect("250", &mut r);
    }
    w.write_all(b"DATA\r\n").unwrap();
    expect("354", &mut r);
    w.write_all(msg.as_bytes()).unwrap();
    w.write_all(b".\r\n").unwrap();
    expect("250", &mut r);
    w.write_all(b"QUIT\r\n").unwrap();
    expect("221", &mut r);
}

fn test_message(i: usize) -> String {
    format!(
        "From: sender@example.net\r\nTo: team@example.org\r\nSubject: via postfix {i}\r\n\
         Message-ID: <pf{i}@example.net>\r\n\r\nBody {i}.\r\n..dot line\r\n"
    )
}

/// Waits (bounded) until each user has `n` messages, then checks each message is there
/// exactly once, is indexed, and the index is clean.
fn check_arrivals(
    pf: &Postfix,
    n: usize,
    users: &[&str],
    files: impl Fn(&str) -> Vec<PathBuf>,
    indexed: impl Fn(&str) -> usize,
) {
    let t0 = Instant::now();
    loop {
        let done = users.iter().all(|u| files(u).len() >= n);
        if done {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "mail did not arrive in time; postfix log:\n{}",
            pf.log()
        );
        pf.flush();
        std::thread::sleep(Duration::from_millis(200));
    }
    for u in users {
        let f = files(u);
        assert_eq!(f.len(), n, "{u}: {f:?}");
        for i in 0..n {
            let hits = f
                .iter()
                .filter(|p| {
                    std::fs::read_to_string(p)
                        .unwrap()
                        .contains(&format!("Message-ID: <pf{i}@example.net>"))
                })
                .count();
            assert_eq!(hits, 1, "{u}: message {i}");
        }
        assert_eq!(indexed(u), n, "{u}: indexed");
        let text = std::fs::read_to_string(&f[0]).unwrap();
        assert!(text.contains("\n.dot line\n"), "dot-unstuffed once: {text}");
        assert!(text.starts_with("Return-Path: <sender@example.net>\n"));
    }
}

/// An IMAP session of `user` on its INBOX, in IDLE.
fn idle_session(s: &imap_support::Server, user: &str) -> imap_support::Client {
    let mut c = s.select(user, "INBOX");
    c.send("i1 IDLE\r\n");
    let r = c.read();
    assert!(r.is_continuation(), "IDLE: {}", r.text());
    c
}

/// Reads an IDLE session's untagged responses (each parsed by imap-codec) until it has
/// announced `n` messages; false if that does not happen within `wait`.
fn idle_sees(c: &mut imap_support::Client, n: usize, wait: Duration) -> bool {
    let t0 = Instant::now();
    while let Some(left) = wait.checked_sub(t0.elapsed()) {
        let Some(r) = c.read_within(left) else {
            return false;
        };
        let text = r.text();
        let exists = text
            .strip_prefix("* ")
            .and_then(|t| t.trim_end().strip_suffix(" EXISTS"))
            .and_then(|t| t.parse::<usize>().ok());
        if exists.is_some_and(|e| e >= n) {
            return true;
        }
    }
    false
}

fn group_id(name: &str) -> u32 {
    let out = Command::new("getent")
        .args(["group", name])
        .output()
        .unwrap();
    let line = String::from_utf8(out.stdout).unwrap();
    line.split(':').nth(2).unwrap().trim().parse().unwrap()
}

/// The whole daemon (IMAP and LMTP) behind postfix: every recipient's IMAP session idles
/// on its INBOX while postfix delivers over LMTP, and must see each message arrive.
fn run_lmtp_case(unix: bool) {
    if !postfix_available() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let pfdir = root.path().join("postfix");
    let sock = root.path().join("lmtp.sock");
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // the socket as an admin sets it up for postfix, whose lmtp client runs as the
    // postfix user: group postfix, mode 0660, nobody else may connect
    let lmtp_extra = if unix {
        format!(
            "listen = [\"127.0.0.1:0\", \"unix:{}\"]\nsocket_mode = \"0660\"\n\
             socket_group = \"postfix\"\naliases_file = \"aliases\"",
            sock.display()
        )
    } else {
        "aliases_file = \"aliases\"".to_owned()
    };
    let s = imap_support::Server::start_with(imap_support::Opts {
        lmtp_extra,
        files: vec![
            ("users", lmtp_support::USERS.to_owned()),
            ("aliases", "team@example.org: alice, bob\n".to_owned()),
        ],
        ..Default::default()
    });
    if unix {
        let m = std::fs::metadata(&sock).unwrap();
        assert_eq!(m.permissions().mode() & 0o7777, 0o660, "socket mode");
        assert_eq!(m.gid(), group_id("postfix"), "socket group");
    }
    let transport = if unix {
        format!("lmtp:unix:{}", sock.display())
    } else {
        format!("lmtp:inet:{}", s.lmtp)
    };
    // one idling session per recipient, before any mail is sent
    let users = [("alice", 4), ("bob", 4), ("carol@example.org", 3)];
    let mut idlers: Vec<_> = users.iter().map(|(u, _)| idle_session(&s, u)).collect();
    let pf = Postfix::start(&pfdir, &transport, "", "");
    for i in 0..3 {
        smtp_send(
            pf.smtp_port,
            "sender@example.net",
            &["alice@example.org", "bob@example.net", "carol@example.org"],
            &test_message(i),
        );
    }
    // the alias: alice and bob get one more each
    smtp_send(
        pf.smtp_port,
        "sender@example.net",
        &["team@example.org"],
        &test_message(3),
    );
    for (&(u, n), c) in users.iter().zip(&mut idlers) {
        check_arrivals(
            &pf,
            n,
            &[u],
            |u| s.files(u, "INBOX"),
            |u| s.indexed(u, "INBOX"),
        );
        // the session was idle throughout: the deliveries woke it
        assert!(
            idle_sees(c, n, Duration::from_secs(30)),
            "{u}: the IDLE session did not see {n} messages"
        );
        c.send("DONE\r\n");
        assert_eq!(c.until("i1").status(), "OK");
        let fetched = c.ok("FETCH 1:* (FLAGS ENVELOPE)");
        assert_eq!(fetched.fetches().len(), n, "{u}: {}", fetched.all());
        s.assert_clean(u);
    }
    assert!(s.tmp_files().is_empty(), "{:?}", s.tmp_files());
    let problems = pf.problems();
    assert!(problems.is_empty(), "postfix complained:\n{problems:#?}");
    let log = pf.log();
    assert!(
        log.contains("status=sent (250 2.0.0"),
        "delivered over LMTP: {log}"
    );
}

#[test]
fn postfix_delivers_over_lmtp_tcp() {
    run_lmtp_case(false);
}

#[test]
fn postfix_delivers_over_lmtp_unix_socket() {
    run_lmtp_case(true);
}

#[test]
fn postfix_pipes_to_maildex_deliver() {
    if !postfix_available() {
        return;
    }
    let bin = maildex_bin();
    let root = tempfile::tempdir().unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = root.path().join("maildex");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("users"), lmtp_support::USERS).unwrap();
    let cfg = data.join("maildex.toml");
    std::fs::write(&cfg, lmtp_support::config_text(&data, "", "")).unwrap();
    // the pipe runs as nobody: the data folder is theirs
    let st = Command::new("chown")
        .args(["-R", "nobody"])
        .arg(&data)
        .status()
        .unwrap();
    assert!(st.success());
    let master = format!(
        "maildex   unix  -       n       n       -       -       pipe\n  \
         flags=u user=nobody argv={} deliver --config {} --user ${{user}}@${{domain}} \
         --from ${{sender}} --recipient ${{original_recipient}}\n",
        bin.display(),
        cfg.display()
    );
    let pf = Postfix::start(
        &root.path().join("postfix"),
        "maildex",
        "maildex_destination_recipient_limit = 1",
        &master,
    );
    for i in 0..2 {
        smtp_send(
            pf.smtp_port,
            "sender@example.net",
            &["alice@example.org", "bob@example.org"],
            &test_message(i),
        );
    }
    // an unknown user: maildex deliver refuses before reading stdin; postfix must
    // bounce it (exit 67), not defer it (a broken pipe)
    smtp_send(
        pf.smtp_port,
        "sender@example.net",
        &["nobody@example.org"],
        &test_message(9),
    );
    let config = maildex_config::Config::load(&cfg).unwrap();
    let accounts = maildex_accounts::Accounts::load(config.clone()).unwrap();
    let files = |u: &str| {
        let m = config.storage.paths_for(u).unwrap().maildir;
        let mut v = Vec::new();
        for sub in ["new", "cur"] {
            if let Ok(rd) = std::fs::read_dir(m.join(sub)) {
                v.extend(rd.flatten().map(|e| e.path()));
            }
        }
        v
    };
    let indexed = |u: &str| {
        let user = accounts.lookup(u).unwrap();
        let store = accounts.store(&user).unwrap();
        store
            .index()
            .read(|r| {
                let id = r.mailbox_id("INBOX")?.unwrap();
                Ok(r.states(id)?.len())
            })
            .unwrap()
    };
    check_arrivals(&pf, 2, &["alice", "bob"], files, indexed);
    let t0 = Instant::now();
    let outcome = loop {
        let log = pf.log();
        let line = log
            .lines()
            .find(|l| l.contains("to=<nobody@example.org>") && l.contains("status="))
            .map(str::to_owned);
        if let Some(l) = line {
            break l;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no outcome for nobody@: {log}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        outcome.contains("status=bounced") && outcome.contains("unknown user"),
        "an unknown user must bounce (exit 67): {outcome}"
    );
    let problems: Vec<String> = pf.problems();
    assert!(problems.is_empty(), "postfix complained:\n{problems:#?}");
}
