//! Issue 20 #4: the uid/gid a user directory gives a user (the passwd-file's columns,
//! `userdb_uid`/`userdb_gid`, SQL `uid`/`gid` columns). The daemon honours an owner that is
//! its own identity and refuses any other (at start for the users file, at first use for
//! SQL), never writing files the owner cannot use; admin commands from a root shell write
//! as each user's owner. Needs root (CI runs as root); elsewhere the tests say why they
//! skipped.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::mail_user::{
    daemon_section, data_folder, free_port, is_root, mail_user, maildex, system_user, text, walk,
    write_config, Imap, Server, MAIL_USER,
};

/// A second system user: an owner other than the daemon's.
const OTHER_USER: &str = "maildex-test2";

const MESSAGE: &str = "From: a@example.org\nSubject: hi\n\nhello\n";

fn root_or_skip() -> bool {
    if !is_root() {
        eprintln!("skipped: needs root to switch users (CI runs as root)");
    }
    is_root()
}

fn ok(config: &Path, args: &[&str], stdin: &str) -> String {
    let o = maildex(config, args, stdin);
    assert!(o.status.success(), "maildex {args:?}: {}", text(&o));
    text(&o)
}

/// Every file and folder under `dir` belongs to `uid`:`gid`; the panic names `after`.
fn assert_owned(dir: &Path, (uid, gid): (u32, u32), after: &str) {
    let all = walk(dir);
    assert!(
        all.len() > 1,
        "after {after}: nothing under {}",
        dir.display()
    );
    for (path, _, _, _) in all {
        let m = fs::symlink_metadata(&path).unwrap();
        assert_eq!(
            (m.uid(), m.gid()),
            (uid, gid),
            "after {after}: {} belongs to {}:{}",
            path.display(),
            m.uid(),
            m.gid()
        );
    }
}

/// `write_config` with LMTP on 127.0.0.1:`lmtp`.
fn with_lmtp(config: &Path, lmtp: u16) {
    let text = fs::read_to_string(config).unwrap();
    let text = text.replace(
        "[lmtp]\nlisten = []\n",
        &format!("[lmtp]\nlisten = [\"127.0.0.1:{lmtp}\"]\n"),
    );
    fs::write(config, text).unwrap();
}

/// One LMTP transaction to `rcpt`: the reply to the end of the data (or to RCPT when
/// that is refused).
fn lmtp_deliver(port: u16, rcpt: &str) -> String {
    let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut r = BufReader::new(s);
    let reply = |r: &mut BufReader<std::net::TcpStream>, line: &str| {
        if !line.is_empty() {
            r.get_mut().write_all(line.as_bytes()).unwrap();
        }
        loop {
            let mut l = String::new();
            assert!(r.read_line(&mut l).unwrap() > 0, "LMTP closed");
            if l.as_bytes().get(3) != Some(&b'-') {
                return l;
            }
        }
    };
    reply(&mut r, "");
    reply(&mut r, "LHLO test\r\n");
    reply(&mut r, "MAIL FROM:<a@example.org>\r\n");
    let rcpt_reply = reply(&mut r, &format!("RCPT TO:<{rcpt}>\r\n"));
    if !rcpt_reply.starts_with('2') {
        return rcpt_reply;
    }
    reply(&mut r, "DATA\r\n");
    let data = MESSAGE.replace('\n', "\r\n");
    reply(&mut r, &format!("{data}.\r\n"))
}

/// `Imap::cmd` that must answer OK.
fn imap_ok(c: &mut Imap, command: &str) -> String {
    let r = c.cmd(command);
    assert_eq!(Imap::status(&r), "OK", "{command}: {r}");
    r
}

#[test]
fn a_users_file_owner_that_is_the_daemons_owns_every_file_the_user_gets() {
    if !root_or_skip() {
        return;
    }
    let owner = mail_user();
    let dir = data_folder();
    let (port, lmtp) = (free_port(), free_port());
    // by name and by number, as Dovecot's userdb takes both
    fs::write(
        dir.path().join("users"),
        format!(
            "alice:{{PLAIN}}pw::::::userdb_uid={MAIL_USER} userdb_gid={}\n",
            owner.1
        ),
    )
    .unwrap();
    let config = write_config(dir.path(), &daemon_section(), port, "%n/Maildir", false);
    with_lmtp(&config, lmtp);
    let server = Server::start(&config, port);
    let log = server.log_text();
    assert!(
        !log.contains("field=userdb_uid") && !log.contains("field=userdb_gid"),
        "the owner fields are honoured, not warned about: {log}"
    );

    let reply = lmtp_deliver(lmtp, "alice@example.org");
    assert!(reply.starts_with("250"), "{reply}: {}", server.log_text());
    let mut c = Imap::connect(port).unwrap();
    imap_ok(&mut c, "LOGIN alice pw");
    imap_ok(&mut c, "CREATE Projects");
    let msg = MESSAGE.replace('\n', "\r\n");
    imap_ok(
        &mut c,
        &format!("APPEND Projects {{{}+}}\r\n{msg}", msg.len()),
    );
    imap_ok(&mut c, "SELECT Projects");
    imap_ok(&mut c, "LOGOUT");
    drop(server);

    // from a root shell
    ok(&config, &["index", "rebuild", "-u", "alice"], "");
    ok(&config, &["deliver", "-u", "alice"], MESSAGE);
    assert_owned(
        &dir.path().join("mail"),
        owner,
        "LMTP, IMAP, rebuild, deliver",
    );
}

#[test]
fn a_users_file_owner_other_than_the_daemons_is_refused_at_start() {
    if !root_or_skip() {
        return;
    }
    let (other, _) = system_user(OTHER_USER);
    let dir = data_folder();
    let port = free_port();
    fs::write(
        dir.path().join("users"),
        format!("alice:{{PLAIN}}pw\nbob:{{PLAIN}}pw:{other}:{other}\n"),
    )
    .unwrap();
    let config = write_config(dir.path(), &daemon_section(), port, "%n/Maildir", false);
    let mut server = Server::spawn(&config);
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(st) = server.try_wait() {
            break st;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "maildex serve started with bob's uid {other}: {}",
            server.log_text()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let log = server.log_text();
    assert!(!status.success(), "{log}");
    let (uid, gid) = mail_user();
    assert!(
        log.contains(&format!("gives user bob uid {other}"))
            && log.contains(&format!("runs as uid {uid} gid {gid}"))
            && log.contains("per-user uids other than the daemon's are not supported"),
        "{log}"
    );
    assert!(
        fs::read_dir(dir.path().join("mail"))
            .unwrap()
            .next()
            .is_none(),
        "nothing is created for anyone"
    );
}

/// The Dovecot layout of one uid per user: a mail root of root's, a folder per user owned
/// by that user, no `[daemon] user`.
fn per_user_layout(users: &[(&str, (u32, u32))]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let mail = dir.path().join("mail");
    fs::create_dir(&mail).unwrap();
    fs::set_permissions(&mail, fs::Permissions::from_mode(0o755)).unwrap();
    for (name, (uid, gid)) in users {
        let home = mail.join(name);
        fs::create_dir(&home).unwrap();
        fs::set_permissions(&home, fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&home, Some(*uid), Some(*gid)).unwrap();
    }
    dir
}

#[test]
fn admin_commands_from_root_write_as_each_users_owner() {
    if !root_or_skip() {
        return;
    }
    let (alice, bob) = (mail_user(), system_user(OTHER_USER));
    let dir = per_user_layout(&[("alice", alice), ("bob", bob)]);
    fs::write(
        dir.path().join("users"),
        format!(
            "alice:{{PLAIN}}pw::::::userdb_uid={} userdb_gid={}\n\
             bob:{{PLAIN}}pw:{}:{}\n",
            alice.0, alice.1, bob.0, bob.1
        ),
    )
    .unwrap();
    let config = write_config(dir.path(), "", free_port(), "%n/Maildir", false);
    let mail = dir.path().join("mail");
    for (user, owner) in [("alice", alice), ("bob", bob)] {
        ok(&config, &["deliver", "-u", user], MESSAGE);
        ok(&config, &["index", "rebuild", "-u", user], "");
        ok(&config, &["index", "check", "-u", user], "");
        ok(&config, &["index", "compact", "-u", user], "");
        assert_owned(&mail.join(user), owner, &format!("{user}'s admin commands"));
    }
    // one process cannot write as both: said, and nothing done
    let o = maildex(&config, &["index", "rebuild", "--all"], "");
    assert!(!o.status.success());
    assert!(
        text(&o).contains("have different owners") && text(&o).contains("--user"),
        "{}",
        text(&o)
    );
}

/// A SQLite users database at `path` with `rows` of (userid, (uid, gid)), password `pw`.
fn sqlite_users(path: &Path, rows: &[(&str, (u32, u32))]) {
    let mut sql = String::from(
        "CREATE TABLE users (userid TEXT PRIMARY KEY, password TEXT, uid INTEGER, gid INTEGER);\n",
    );
    for (name, (uid, gid)) in rows {
        sql.push_str(&format!(
            "INSERT INTO users VALUES ('{name}', '{{PLAIN}}pw', {uid}, {gid});\n"
        ));
    }
    let o = std::process::Command::new("sqlite3")
        .arg(path)
        .arg(sql)
        .output()
        .expect("sqlite3 (scripts/test-all.sh installs it)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    fs::set_permissions(path, fs::Permissions::from_mode(0o644)).unwrap();
}

/// The config of the SQL test: `write_config` with `[auth.sql]` in place of the users file.
fn sql_config(root: &Path, port: u16, lmtp: u16, db: &Path) -> PathBuf {
    let config = write_config(root, &daemon_section(), port, "%n/Maildir", false);
    with_lmtp(&config, lmtp);
    let text = fs::read_to_string(&config).unwrap();
    let users_line = format!("users_file = \"{}/users\"\n", root.display());
    let sql = format!(
        "cache_size = 0\n[auth.sql]\ndriver = \"sqlite\"\nconnect = \"{}\"\n\
         password_query = \"SELECT userid AS user, password FROM users WHERE userid = '%u'\"\n\
         user_query = \"SELECT userid AS user, uid, gid FROM users WHERE userid = '%u'\"\n\
         iterate_query = \"SELECT userid AS user FROM users\"\n",
        db.display()
    );
    fs::write(&config, text.replace(&users_line, &sql)).unwrap();
    config
}

#[test]
fn a_sql_user_of_another_owner_is_refused_at_first_use_and_one_of_the_daemons_served() {
    if !root_or_skip() {
        return;
    }
    let (uid, gid) = mail_user();
    let (other, other_gid) = system_user(OTHER_USER);
    let dir = data_folder();
    let db = dir.path().join("users.db");
    sqlite_users(
        &db,
        &[
            ("alice@example.org", (uid, gid)),
            ("bob@example.org", (other, other_gid)),
        ],
    );
    let (port, lmtp) = (free_port(), free_port());
    let config = sql_config(dir.path(), port, lmtp, &db);
    let server = Server::start(&config, port);

    let mut c = Imap::connect(port).unwrap();
    imap_ok(&mut c, "LOGIN alice@example.org pw");
    imap_ok(&mut c, "CREATE Projects");
    let reply = lmtp_deliver(lmtp, "alice@example.org");
    assert!(reply.starts_with("250"), "{reply}");
    assert_owned(
        &dir.path().join("mail"),
        (uid, gid),
        "alice's login and delivery",
    );

    // bob's uid is not the daemon's: a temporary failure that names why, and no files
    let r = Imap::connect(port).unwrap().cmd("LOGIN bob@example.org pw");
    assert!(r.contains("NO [UNAVAILABLE]"), "{r}");
    let reply = lmtp_deliver(lmtp, "bob@example.org");
    assert!(reply.starts_with("451"), "{reply}");
    assert!(!dir.path().join("mail/bob").exists());
    let log = server.log_text();
    assert!(
        log.contains(&format!("gives user bob@example.org uid {other}"))
            && log.contains("per-user uids other than the daemon's are not supported"),
        "{log}"
    );
}
