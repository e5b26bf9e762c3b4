//! Issue 15 #4, #30, #33: the users file and the TLS key in the documented setup, with the
//! real binary started as root with `[daemon] user`: a users file `maildex user add`
//! creates is readable by the daemon's group and keeps its owner and mode on every edit; a
//! changed password or a removed user takes effect without a signal; SIGHUP reloads a
//! root-only key (0600 root) and the users whatever happens to the other; two users whose
//! Maildirs are one folder are refused at start and on reload.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::mail_user::{
    as_mail_user, daemon_section, data_folder, free_port, is_root, login, mail_user, maildex, text,
    wait_login, write_config, Server,
};

fn user_cmd(config: &Path, args: &[&str], pw: &str) {
    let o = maildex(config, args, &format!("{pw}\n"));
    assert!(o.status.success(), "{args:?}: {}", text(&o));
}

fn mode_owner(p: &Path) -> (u32, u32, u32) {
    let m = fs::metadata(p).unwrap();
    (m.mode() & 0o7777, m.uid(), m.gid())
}

#[test]
fn users_file_edits_and_reloads_work_with_a_root_only_key() {
    if !is_root() {
        eprintln!("skipped: needs root to switch users (CI runs as root)");
        return;
    }
    let (_, gid) = mail_user();
    let dir = data_folder();
    let port = free_port();
    let config = write_config(dir.path(), &daemon_section(), port, "%n/Maildir", true);
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    maildex_imap::tls::write_self_signed(&["localhost"], &cert, &key).unwrap();
    assert_eq!(
        mode_owner(&key),
        (0o600, 0, 0),
        "a root-only key, as certbot's"
    );
    let users = dir.path().join("users");

    // a new users file: root's, readable by the daemon's group
    user_cmd(
        &config,
        &["user", "add", "alice", "--password-stdin"],
        "pw1",
    );
    assert_eq!(mode_owner(&users), (0o640, 0, gid), "a new users file");
    let server = Server::start(&config, port);
    assert_eq!(login(port, "alice", "pw1"), "OK");

    // a changed password holds without a signal; the edit keeps the file's owner and mode
    user_cmd(
        &config,
        &["user", "passwd", "alice", "--password-stdin"],
        "pw2",
    );
    assert_eq!(mode_owner(&users), (0o640, 0, gid), "after user passwd");
    wait_login(&server, port, "alice", "pw2", "OK");
    assert_eq!(login(port, "alice", "pw1"), "NO");

    // SIGHUP after the key was rewritten in place (root-only): certificates and users reload
    user_cmd(&config, &["user", "add", "bob", "--password-stdin"], "pw");
    assert_eq!(mode_owner(&users), (0o640, 0, gid), "after user add");
    maildex_imap::tls::write_self_signed(&["localhost"], &cert, &key).unwrap();
    server.signal("-HUP");
    wait_login(&server, port, "bob", "pw", "OK");
    let t0 = Instant::now();
    while !server.log_text().contains("reloaded certificates") {
        assert!(
            !server.log_text().contains("reload failed"),
            "{}",
            server.log_text()
        );
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{}",
            server.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // a removed user is refused without a signal
    let text = fs::read_to_string(&users).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| !l.starts_with("alice:"))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(&users, kept).unwrap();
    wait_login(&server, port, "alice", "pw2", "NO");
    assert_eq!(login(port, "bob", "pw"), "OK");
    assert_eq!(
        fs::metadata(&users).unwrap().permissions().mode() & 0o777,
        0o640
    );
}

#[test]
fn a_users_file_the_daemon_cannot_read_is_named_at_start() {
    let Some((dir, port, config)) = as_mail_user() else {
        return;
    };
    let users = dir.path().join("users");
    fs::write(&users, "alice:{PLAIN}pw\n").unwrap();
    fs::set_permissions(&users, fs::Permissions::from_mode(0o600)).unwrap();
    let server = Server::start(&config, port);
    let log = server.log_text();
    assert!(
        log.contains("cannot read this file after the switch") && log.contains("chmod 0640"),
        "{log}"
    );
}

#[test]
fn two_users_sharing_one_maildir_are_refused_at_start_and_on_reload() {
    if !is_root() {
        eprintln!("skipped: needs root to switch users (CI runs as root)");
        return;
    }
    let dir = data_folder();
    let port = free_port();
    // %n only: mia@example.org and mia@other.org would share /mail/mia
    let config = write_config(dir.path(), &daemon_section(), port, "%n", false);
    let users = dir.path().join("users");
    fs::write(
        &users,
        "mia@example.org:{PLAIN}one\nmia@other.org:{PLAIN}two\n",
    )
    .unwrap();
    let mut refused = Server::spawn(&config);
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = refused.try_wait() {
            break st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "serve started: {}",
            refused.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = refused.log_text();
    assert!(!status.success(), "{out}");
    assert!(
        out.contains("mia@example.org") && out.contains("mia@other.org"),
        "{out}"
    );
    drop(refused);

    // on reload: the old users stay and the error is logged
    fs::write(&users, "mia@example.org:{PLAIN}one\n").unwrap();
    let server = Server::start(&config, port);
    assert_eq!(login(port, "mia@example.org", "one"), "OK");
    fs::write(
        &users,
        "mia@example.org:{PLAIN}one\nmia@other.org:{PLAIN}two\n",
    )
    .unwrap();
    let t0 = Instant::now();
    while !server.log_text().contains("both map to") {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{}",
            server.log_text()
        );
        // each lookup may look at the file
        login(port, "mia@other.org", "two");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(login(port, "mia@other.org", "two"), "NO");
    assert_eq!(login(port, "mia@example.org", "one"), "OK");
}
