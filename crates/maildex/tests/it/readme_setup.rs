//! Issue 15 #12: the README's "Setting up on Debian", followed block by block. The blocks
//! whose info string is `maildex-setup-NAME` are taken from README.md (compiled in, so the
//! README and this test cannot drift apart) and used as they are, with these textual
//! substitutions and nothing else:
//!
//! 1. the mail user `vmail` becomes [`MAIL_USER`] (then `/var/vmail` reads
//!    `/var/maildex-test`);
//! 2. the system paths become folders of one scratch root: `/var/maildex-test` -> `mail`,
//!    `/var/lib/maildex` -> `index`, `/etc/maildex` -> `etc`, the certbot folder -> `tls`,
//!    `/usr/local/bin` -> `bin` (a copy of the binary under test), `/var/spool/postfix`
//!    -> the private postfix's queue;
//! 3. the IMAP ports `0.0.0.0:143` and `0.0.0.0:993` become free loopback ports.
//!
//! Shell blocks run with `sh -e` as root, with `bin` first in `PATH` and `MAILDEX_CONFIG`
//! naming the scratch config (the README's commands rely on the default
//! `/etc/maildex/maildex.toml`). Then: the real `maildex serve` (the unit's `ExecStart`)
//! as root with `[daemon] user`, a private postfix with the README's `main.cf` and
//! `master.cf` lines delivering one message to a user over the LMTP socket and to another
//! through the pipe service, a user added while running, the admin commands, a reload
//! (the unit's `ExecReload`) with a root-only key, IMAP logins that see the mail, and at
//! the end the owner and mode of every file under the scratch data.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::mail_user::{
    assert_mail_files, free_port, is_root, mail_user, maildex_bin, wait_login, Imap, Server,
    MAIL_USER,
};
use crate::postfix_support::{group_id, postfix_available, smtp_send, Postfix};

/// The README's two users (alice over LMTP, bob through the pipe) and their passwords.
const USERS: [(&str, &str); 2] = [
    ("alice@example.org", "alice-pw"),
    ("bob@example.net", "bob-pw"),
];

const README: &str = include_str!("../../../../README.md");

/// The body of the README block fenced with ```` ```LANG maildex-setup-NAME ````.
fn block(name: &str) -> &'static str {
    let marker = format!(" maildex-setup-{name}\n");
    let start = README
        .lines()
        .position(|l| l.starts_with("```") && format!("{l}\n").ends_with(&marker))
        .unwrap_or_else(|| panic!("README.md has no block maildex-setup-{name}"));
    let from: usize = README.lines().take(start + 1).map(|l| l.len() + 1).sum();
    let len = README[from..]
        .find("\n```")
        .unwrap_or_else(|| panic!("block {name} is not closed"));
    &README[from..from + len + 1]
}

/// The scratch machine: one root folder standing for `/`, and two free IMAP ports.
struct Scratch {
    root: PathBuf,
    imap: u16,
    imaps: u16,
}

impl Scratch {
    fn path(&self, p: &str) -> PathBuf {
        self.root.join(p)
    }

    /// `text` from the README with the substitutions of the module comment.
    fn localize(&self, text: &str) -> String {
        let r = self.root.display();
        let mut out = text.replace("vmail", MAIL_USER);
        for (from, to) in [
            (format!("/var/{MAIL_USER}"), format!("{r}/mail")),
            ("/var/lib/maildex".into(), format!("{r}/index")),
            ("/etc/maildex".into(), format!("{r}/etc")),
            (
                "/etc/letsencrypt/live/mail.example.org".into(),
                format!("{r}/tls"),
            ),
            ("/usr/local/bin".into(), format!("{r}/bin")),
            ("/var/spool/postfix".into(), format!("{r}/postfix/queue")),
            ("0.0.0.0:143".into(), format!("127.0.0.1:{}", self.imap)),
            ("0.0.0.0:993".into(), format!("127.0.0.1:{}", self.imaps)),
        ] {
            out = out.replace(&from, &to);
        }
        out
    }

    /// Runs the README's shell block `name` with `stdin`; panics with its output if it fails.
    fn run(&self, name: &str, stdin: &str) {
        use std::io::Write;
        let script = self.localize(block(name));
        let path = format!(
            "{}:{}",
            self.path("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut child = Command::new("sh")
            .args(["-ec", &script])
            .env("PATH", path)
            .env("MAILDEX_CONFIG", self.path("etc/maildex.toml"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "README block {name} failed:\n{script}\n{}",
            crate::mail_user::text(&out)
        );
    }

    /// The value of `key=` in the README's systemd unit, localized.
    fn unit(&self, key: &str) -> String {
        let line = block("systemd")
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("the unit has no {key}"));
        self.localize(line)
    }
}

/// Owner uid, group gid and mode bits of `p` (not following a link).
fn owner_mode(p: &Path) -> (u32, u32, u32) {
    let m = fs::symlink_metadata(p).unwrap();
    (m.uid(), m.gid(), m.mode() & 0o7777)
}

/// `user`'s INBOX (logged in with `pw`): the number of messages and their subjects.
fn inbox(port: u16, user: &str, pw: &str) -> (usize, String) {
    let mut c = Imap::connect(port).unwrap();
    let r = c.cmd(&format!("LOGIN {user} {pw}"));
    assert_eq!(Imap::status(&r), "OK", "{user}: {r}");
    let r = c.cmd("SELECT INBOX");
    assert_eq!(Imap::status(&r), "OK", "{user}: {r}");
    let n = r
        .lines()
        .find_map(|l| l.strip_prefix("* ")?.strip_suffix(" EXISTS")?.parse().ok())
        .unwrap_or(0);
    let subjects = if n > 0 {
        c.cmd("FETCH 1:* (BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
    } else {
        String::new()
    };
    c.cmd("LOGOUT");
    (n, subjects)
}

/// Waits (bounded, flushing postfix's queue) until `user` has a message in INBOX.
fn wait_mail(pf: &Postfix, port: u16, user: &str, pw: &str) -> String {
    let t0 = Instant::now();
    loop {
        let (n, subjects) = inbox(port, user, pw);
        if n > 0 {
            assert_eq!(n, 1, "{user}: {subjects}");
            return subjects;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(40),
            "no mail for {user}; postfix log:\n{}",
            pf.log()
        );
        pf.flush();
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The SHA-256 fingerprint of the certificate in `pem`, or of the one served on
/// 127.0.0.1:`port` (IMAPS, or with `starttls` IMAP's STARTTLS), by openssl.
fn fingerprint(pem: Option<&Path>, port: u16, starttls: bool) -> String {
    let script = match pem {
        Some(p) => format!(
            "openssl x509 -noout -fingerprint -sha256 -in {}",
            p.display()
        ),
        None => format!(
            "openssl s_client -connect 127.0.0.1:{port} -servername localhost {} </dev/null \
             2>/dev/null | openssl x509 -noout -fingerprint -sha256",
            if starttls { "-starttls imap" } else { "" }
        ),
    };
    let out = Command::new("sh").args(["-c", &script]).output().unwrap();
    let fp = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        fp.contains("Fingerprint="),
        "{script}: {}",
        crate::mail_user::text(&out)
    );
    fp
}

/// The line of postfix's log that says how the mail to `rcpt` went.
fn outcome(pf: &Postfix, rcpt: &str) -> String {
    pf.log()
        .lines()
        .find(|l| l.contains(&format!("to=<{rcpt}>")) && l.contains("status="))
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn the_readme_setup_delivers_reloads_and_leaves_the_promised_owners_and_modes() {
    if !is_root() {
        eprintln!("skipped: needs root to switch users (CI runs as root)");
        return;
    }
    if !postfix_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let s = Scratch {
        root: dir.path().to_path_buf(),
        imap: free_port(),
        imaps: free_port(),
    };
    for d in ["bin", "tls", "postfix"] {
        fs::create_dir(s.path(d)).unwrap();
        fs::set_permissions(s.path(d), fs::Permissions::from_mode(0o755)).unwrap();
    }
    // a copy, not a link: postfix's pipe runs it as the mail user, who may not be able to
    // reach the build folder (a checkout under a 0700 folder, as `mktemp -d` makes)
    fs::copy(maildex_bin(), s.path("bin/maildex")).unwrap();
    fs::set_permissions(s.path("bin/maildex"), fs::Permissions::from_mode(0o755)).unwrap();

    // the mail user, the folders, the config, the first user
    s.run("system", "");
    let (uid, gid) = mail_user();
    let (cert, key) = (s.path("tls/fullchain.pem"), s.path("tls/privkey.pem"));
    maildex_imap::tls::write_self_signed(&["localhost"], &cert, &key).unwrap();
    assert_eq!(
        owner_mode(&key),
        (0, 0, 0o600),
        "a root-only key, as certbot's"
    );
    fs::write(s.path("etc/maildex.toml"), s.localize(block("config"))).unwrap();
    s.run("files", "alice-pw\n");

    // postfix first (it owns the private folder the socket goes in), then maildex
    let pf = Postfix::start(
        &s.path("postfix"),
        &s.localize(block("main.cf")),
        &s.localize(block("master.cf")),
    );
    let config = s.path("etc/maildex.toml");
    assert_eq!(
        s.unit("ExecStart"),
        format!(
            "{} serve --config {}",
            s.path("bin/maildex").display(),
            config.display()
        ),
        "the unit starts what this test starts"
    );
    let mut server = Server::start(&config, s.imap);
    let socket = s.path("postfix/queue/private/maildex-lmtp");
    let socket_ok = |when: &str| {
        let m = fs::symlink_metadata(&socket).unwrap();
        assert!(
            m.file_type().is_socket(),
            "{when}: {socket:?} is not a socket"
        );
        assert_eq!(
            owner_mode(&socket),
            (0, group_id("postfix"), 0o660),
            "{when}: the LMTP socket is maildex's, group postfix, 0660"
        );
    };
    socket_ok("at start");

    // a user added while running logs in without a restart
    s.run("add-user", "bob-pw\n");
    wait_login(&server, s.imap, "bob@example.net", "bob-pw", "OK");

    // one message, two routes: example.org over LMTP, example.net through the pipe
    smtp_send(
        pf.smtp_port,
        "sender@example.net",
        &["alice@example.org", "bob@example.net"],
        "From: sender@example.net\r\nTo: alice@example.org, bob@example.net\r\n\
         Subject: readme setup\r\nMessage-ID: <setup@example.net>\r\n\r\nHello.\r\n",
    );
    for (user, pw) in USERS {
        let subjects = wait_mail(&pf, s.imap, user, pw);
        assert!(
            subjects.contains("Subject: readme setup"),
            "{user}: {subjects}"
        );
    }
    let lmtp = outcome(&pf, "alice@example.org");
    assert!(
        lmtp.contains("private/maildex-lmtp") && lmtp.contains("status=sent (250 2.0.0"),
        "alice over LMTP: {lmtp}"
    );
    let pipe = outcome(&pf, "bob@example.net");
    assert!(
        pipe.contains("relay=maildex-pipe") && pipe.contains("status=sent"),
        "bob through the pipe: {pipe}"
    );

    // the admin commands from this root shell, with the daemon running
    s.run("admin", "");

    // a reload with the root-only key rewritten in place, as the unit's ExecReload does it
    let old_cert = fingerprint(Some(&cert), 0, false);
    maildex_imap::tls::write_self_signed(&["localhost"], &cert, &key).unwrap();
    let reload = s
        .unit("ExecReload")
        .replace("$MAINPID", &server.child.id().to_string());
    let st = Command::new("sh").args(["-ec", &reload]).status().unwrap();
    assert!(st.success(), "{reload}");
    let t0 = Instant::now();
    while !server.log_text().contains("reloaded certificates") {
        let log = server.log_text();
        assert!(!log.contains("reload failed"), "{log}");
        assert!(t0.elapsed() < Duration::from_secs(20), "no reload: {log}");
        std::thread::sleep(Duration::from_millis(50));
    }
    for (user, pw) in USERS {
        assert_eq!(inbox(s.imap, user, pw).0, 1, "{user} after the reload");
    }
    // Thunderbird's two choices, IMAPS and STARTTLS, are served the rewritten certificate
    let new_cert = fingerprint(Some(&cert), 0, false);
    assert_ne!(new_cert, old_cert, "a new certificate");
    assert_eq!(
        fingerprint(None, s.imaps, false),
        new_cert,
        "IMAPS after the reload"
    );
    assert_eq!(
        fingerprint(None, s.imap, true),
        new_cert,
        "STARTTLS after the reload"
    );
    let problems = pf.problems();
    assert!(problems.is_empty(), "postfix complained:\n{problems:#?}");
    assert!(server.try_wait().is_none(), "{}", server.log_text());

    // every file: mail and index the mail user's (0700/0600), /etc/maildex root's and
    // readable by the mail group only, the key root's alone, the socket group postfix
    let after = "the README setup";
    assert_mail_files(&s.path("mail"), after);
    assert_mail_files(&s.path("index"), after);
    assert_eq!(uid, owner_mode(&s.path("mail")).0);
    let server_log = server.log.clone();
    let mut etc: Vec<_> = fs::read_dir(s.path("etc"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| *p != server_log) // this test's capture of the daemon's stderr
        .collect();
    etc.sort();
    let config_files = [s.path("etc/maildex.toml"), s.path("etc/users")];
    let lock = s.path("etc/users.lock"); // `user add`'s flock, root's alone
    let mut want = config_files.to_vec();
    want.push(lock.clone());
    assert_eq!(etc, want, "/etc/maildex");
    assert_eq!(owner_mode(&s.path("etc")), (0, gid, 0o750), "/etc/maildex");
    for f in &config_files {
        assert_eq!(owner_mode(f), (0, gid, 0o640), "{f:?}");
    }
    assert_eq!(owner_mode(&lock), (0, 0, 0o600), "{lock:?}");
    assert_eq!(owner_mode(&key), (0, 0, 0o600), "the key after the reload");
    socket_ok("at the end");
}
