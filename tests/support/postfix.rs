//! A private postfix instance for tests: its own `main.cf`, `master.cf` (Debian's service
//! list) and queue in a scratch folder, started as root and stopped in `Drop`, and an SMTP
//! client to send it mail. Shared by `tests/it/lmtp/postfix.rs` and
//! `crates/maildex/tests/it/readme_setup.rs` (which includes this file by path): std only.
//! /work/shared/notes/postfix-in-tests.md has the facts this rests on.

#![allow(dead_code)] // each including binary uses its own part

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub const POSTFIX: &str = "/usr/sbin/postfix";

/// False (with a message) when postfix cannot run here and CI does not insist.
pub fn postfix_available() -> bool {
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

/// A port free on 127.0.0.1 a moment ago (bound on port 0 and released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A private postfix instance; stopped and its queue emptied on drop.
pub struct Postfix {
    pub dir: PathBuf,
    pub smtp_port: u16,
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
    /// Starts postfix on a free SMTP port with a scratch `main.cf` and `extra_main`
    /// (which routes the mail: `virtual_mailbox_domains`, `virtual_transport`...), and
    /// Debian's services with `extra_master` lines.
    pub fn start(dir: &Path, extra_main: &str, extra_master: &str) -> Postfix {
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
             virtual_mailbox_maps =\n\
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

    pub fn cmd(&self, prog: &str, args: &[&str]) -> std::process::Output {
        Command::new(prog)
            .arg("-c")
            .arg(&self.dir)
            .args(args)
            .output()
            .unwrap()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("postfix.log")).unwrap_or_default()
    }

    pub fn flush(&self) {
        let _ = self.cmd("/usr/sbin/postqueue", &["-f"]);
    }

    /// Lines that say something went wrong.
    pub fn problems(&self) -> Vec<String> {
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
pub fn smtp_send(port: u16, from: &str, rcpts: &[&str], msg: &str) {
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

/// The gid of group `name` (`postfix`, which owns the LMTP socket postfix connects to).
pub fn group_id(name: &str) -> u32 {
    let out = Command::new("getent")
        .args(["group", name])
        .output()
        .unwrap();
    let line = String::from_utf8(out.stdout).unwrap();
    line.split(':').nth(2).unwrap().trim().parse().unwrap()
}
