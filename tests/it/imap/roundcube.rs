//! Roundcube end to end in a real browser (issue 17 #4): Debian's Roundcube 1.6, served by
//! PHP's built-in server from a private config folder, talks IMAP to the in-process
//! daemon; headless Chromium, driven by selenium from tests/it/imap/roundcube.py, logs in,
//! lists, sorts, switches to threads, opens an attachment, searches, flags, moves, deletes,
//! saves a draft and reads the quota. The script checks what the browser shows; this test
//! then checks over IMAP what the browser did to the mail, and in Roundcube's IMAP log
//! that the server did the sorting and threading (SORT, THREAD) and answered the quota.
//!
//! Screenshots of every step go to `target/roundcube/` (or `$CARGO_TARGET_DIR/roundcube`),
//! with Roundcube's IMAP log; the scratch setup follows /work/shared/notes/roundcube-in-tests.md.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::daemon::{Opts, Server};
use crate::support::imap::have_tool;
use crate::support::postfix::free_port;

/// Roundcube's own files as Debian installs them.
const ROUNDCUBE: &str = "/var/lib/roundcube";

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false")
}

/// True when every part is installed; in CI a missing part fails the test.
fn have_everything() -> bool {
    for tool in ["php", "chromium", "chromedriver", "python3", "sqlite3"] {
        if !have_tool(tool) {
            return false;
        }
    }
    let selenium = Command::new("python3")
        .args(["-c", "import selenium"])
        .output()
        .is_ok_and(|o| o.status.success());
    let roundcube = Path::new(ROUNDCUBE).join("index.php").exists();
    if selenium && roundcube {
        return true;
    }
    assert!(
        !ci(),
        "roundcube or selenium is missing and CI is set: scripts/test-all.sh installs them"
    );
    eprintln!("SKIPPED: apt-get install roundcube roundcube-sqlite3 php-cli; pip install selenium");
    false
}

/// Where the screenshots go.
fn artefacts() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("roundcube")
}

/// PHP's built-in server, stopped on drop.
struct Php(Child);

impl Drop for Php {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A private Roundcube config in `dir` (a copy of /etc/roundcube with its own SQLite
/// database, logs and temp folder) pointed at the daemon's plain IMAP port, served on
/// loopback; returns the server and its URL.
fn start_roundcube(dir: &Path, imap_port: u16) -> (Php, String) {
    let conf = dir.join("conf");
    let status = Command::new("cp")
        .args(["-rL", "/etc/roundcube"])
        .arg(&conf)
        .status()
        .unwrap();
    assert!(status.success());
    for sub in ["logs", "temp"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let db = dir.join("roundcube.db");
    std::fs::write(
        conf.join("db.php"),
        format!(
            "<?php\n$config['db_dsnw'] = 'sqlite:///{}?mode=0640';\n",
            db.display()
        ),
    )
    .unwrap();
    let main = conf.join("config.inc.php");
    let text = std::fs::read_to_string(&main).unwrap();
    let debian_db = "include(\"/etc/roundcube/debian-db-roundcube.php\");";
    assert!(text.contains(debian_db), "Debian's config.inc.php changed");
    let text = text.replace(debian_db, "include(__DIR__ . \"/db.php\");")
        + &format!(
            "\n$config['imap_host'] = ['127.0.0.1:{imap_port}'];\n\
             $config['log_dir'] = '{logs}/';\n$config['temp_dir'] = '{temp}/';\n\
             $config['log_driver'] = 'file';\n$config['imap_debug'] = true;\n\
             $config['des_key'] = 'maildex-test-des-key-24b';\n",
            logs = dir.join("logs").display(),
            temp = dir.join("temp").display(),
        );
    std::fs::write(&main, text).unwrap();
    let schema = std::fs::File::open("/usr/share/roundcube/SQL/sqlite.initial.sql")
        .or_else(|_| std::fs::File::open(format!("{ROUNDCUBE}/SQL/sqlite.initial.sql")))
        .unwrap();
    let out = Command::new("sqlite3")
        .arg(&db)
        .stdin(schema)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");

    let port = free_port();
    let child = Command::new("php")
        .args(["-S", &format!("127.0.0.1:{port}"), "-t", ROUNDCUBE])
        .env("ROUNDCUBE_CONFIG_DIR", &conf)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("php.log")).unwrap())
        .spawn()
        .unwrap();
    let php = Php(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "php -S did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    (php, format!("http://127.0.0.1:{port}/"))
}

/// The IMAP commands (verb after the tag, UID folded in) Roundcube sent, from its log.
fn commands_sent(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.split_once("] C: ").map(|(_, c)| c))
        .filter_map(|c| {
            let mut w = c.split(' ').skip(1);
            let verb = w.next()?.to_ascii_uppercase();
            if verb == "UID" {
                Some(w.next()?.to_ascii_uppercase())
            } else {
                Some(verb)
            }
        })
        .collect()
}

#[test]
fn roundcube_in_headless_chromium() {
    if !have_everything() {
        return;
    }
    let s = Server::start_with(Opts {
        // Roundcube's own special folders are the defaults: Drafts, Sent, Trash, Junk, Archive
        mailboxes: Some(""),
        users: "alice:{PLAIN}pw::::::userdb_quota_rule=*:storage=20K\n".into(),
        ..Opts::default()
    });
    let scratch = tempfile::tempdir().unwrap();
    let (_php, url) = start_roundcube(scratch.path(), s.imap.port());
    let shots = artefacts();
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/it/imap/roundcube.py");
    let out = Command::new("timeout")
        .arg("300")
        .arg("python3")
        .arg(script)
        .arg(s.imap.port().to_string())
        .arg(&url)
        .args(["alice", "pw"])
        .arg(&shots)
        .output()
        .unwrap();
    let imap_log =
        std::fs::read_to_string(scratch.path().join("logs/imap.log")).unwrap_or_default();
    let _ = std::fs::write(shots.join("imap.log"), &imap_log);
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && so.trim_end().ends_with("ok"),
        "the browser steps failed (screenshots and Roundcube's IMAP log in {}):\n{so}\n{se}",
        shots.display()
    );

    // the server sorted, threaded and told the quota: Roundcube did none of it itself
    let sent = commands_sent(&imap_log);
    for verb in ["SORT", "THREAD", "GETQUOTAROOT", "MOVE", "APPEND"] {
        assert!(
            sent.iter().any(|c| c == verb),
            "Roundcube never sent {verb}: {sent:?}"
        );
    }
    // Roundcube takes the first of REFS, REFERENCES, ORDEREDSUBJECT that is offered
    assert!(
        imap_log.contains("THREAD REFS "),
        "Roundcube did not thread with REFS"
    );

    // what the browser did is on the server
    let mut c = s.login("alice");
    let count = |c: &mut crate::support::imap::Client, folder: &str| {
        let r = c.ok(&format!("STATUS {folder} (MESSAGES)"));
        r.all()
            .split("(MESSAGES ")
            .nth(1)
            .and_then(|x| x.split(')').next())
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or_else(|| panic!("{}", r.all()))
    };
    assert_eq!(count(&mut c, "INBOX"), 6);
    assert_eq!(count(&mut c, "Archive"), 1);
    assert_eq!(count(&mut c, "Trash"), 1);
    assert_eq!(count(&mut c, "Drafts"), 1);
    c.ok("EXAMINE Archive");
    let r = c.ok("FETCH 1 BODY.PEEK[HEADER.FIELDS (SUBJECT)]");
    assert!(r.all().contains("Subject: Zebra crossing"), "{}", r.all());
    c.ok("EXAMINE Trash");
    let r = c.ok("FETCH 1 BODY.PEEK[HEADER.FIELDS (SUBJECT)]");
    assert!(r.all().contains("Subject: apples"), "{}", r.all());
    // Roundcube saves a draft as `APPEND Drafts (\Seen)`: the folder makes it a draft
    c.ok("EXAMINE Drafts");
    let r = c.ok("FETCH 1 (FLAGS BODY.PEEK[HEADER.FIELDS (SUBJECT)])");
    assert!(r.all().contains("\\Seen"), "{}", r.all());
    assert!(
        r.all().contains("Subject: Draft from the browser"),
        "{}",
        r.all()
    );
    c.ok("EXAMINE INBOX");
    let flagged = c.ok("SEARCH FLAGGED").all();
    let hits: Vec<&str> = flagged
        .lines()
        .find_map(|l| l.strip_prefix("* SEARCH"))
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>();
    assert_eq!(hits.len(), 1, "{flagged}");
    let r = c.ok(&format!(
        "FETCH {} BODY.PEEK[HEADER.FIELDS (SUBJECT)]",
        hits[0]
    ));
    assert!(
        r.all().contains("=?UTF-8?Q?=C3=89t=C3=A9_plans?="),
        "{}",
        r.all()
    );
    s.assert_clean("alice");
}
