//! Issue 20 (user directories, passwd-file): the real `maildex serve` honours Dovecot's
//! `allow_nets` and `userdb_quota_rule=*:storage=` fields, and names every other field a
//! users file sets (the uid, gid and home columns, `userdb_uid`/`userdb_gid`, `userdb_home`,
//! `userdb_mail`, other quota rules, fields it does not know) in one warning per field at
//! load, with the number of users, instead of ignoring it silently or once per user.

mod crash_support;
mod imap_support;
mod lmtp_support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crash_support::{free_port, maildex_bin, Daemon};
use imap_support::Client;

fn write_config(root: &Path, imap: u16, lmtp: u16) -> PathBuf {
    let r = root.display();
    let path = root.join("maildex.toml");
    std::fs::write(
        &path,
        format!(
            "[imap]\nlisten = [\"127.0.0.1:{imap}\"]\nlisten_tls = []\n\
             [lmtp]\nlisten = [\"127.0.0.1:{lmtp}\"]\n\
             [storage]\nmail_location = \"{r}/mail/%u\"\nindex_root = \"{r}/index/%u\"\n\
             fsync = false\nindex_map_size = \"4MiB\"\n\
             [auth]\nusers_file = \"{r}/users\"\n"
        ),
    )
    .unwrap();
    path
}

const USERS: &str = "\
alice:{PLAIN}pw:5000:5000::/home/alice::allow_nets=127.0.0.0/8 userdb_mail=maildir:~/Maildir \
userdb_home=/srv/alice userdb_uid=6000 userdb_gid=6000 nodelay=y\n\
bob:{PLAIN}pw::::::allow_nets=10.0.0.0/8 quota_rule=Trash:storage=+10M nodelay=y\n\
carol:{PLAIN}pw::::::userdb_quota_rule=*:storage=1K\n";

/// The warning lines of `log` about `field`.
fn warnings<'a>(log: &'a str, field: &str) -> Vec<&'a str> {
    let needle = format!("field={field} ");
    log.lines()
        .filter(|l| l.contains("users file:") && l.contains(&needle))
        .collect()
}

#[test]
fn passwd_file_fields_are_honoured_or_named_once_each() {
    let bin = maildex_bin();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (imap, lmtp) = (free_port(), free_port());
    let config = write_config(root, imap, lmtp);
    std::fs::write(root.join("users"), USERS).unwrap();
    let imap_addr: SocketAddr = ([127, 0, 0, 1], imap).into();
    let lmtp_addr: SocketAddr = ([127, 0, 0, 1], lmtp).into();
    let mut daemon = Daemon::start(&bin, &config, root, imap_addr);
    let log = daemon.log_text();

    for (field, users, why) in [
        ("uid", 1, "daemon's user"),
        ("gid", 1, "daemon's user"),
        ("userdb_uid", 1, "daemon's user"),
        ("userdb_gid", 1, "daemon's user"),
        ("home", 1, "mail_location"),
        ("userdb_home", 1, "mail_location"),
        ("userdb_mail", 1, "mail_location"),
        ("quota_rule", 1, "only the `*:storage=` quota rule"),
        ("nodelay", 2, "not supported"),
    ] {
        let lines = warnings(&log, field);
        assert_eq!(lines.len(), 1, "{field}: {log}");
        assert!(lines[0].contains(&format!("users={users} ")), "{lines:?}");
        assert!(lines[0].contains(why), "{lines:?}");
    }
    for honoured in ["allow_nets", "userdb_quota_rule"] {
        assert!(warnings(&log, honoured).is_empty(), "{honoured}: {log}");
    }

    // allow_nets: alice may log in from loopback, bob only from 10.0.0.0/8
    let mut c = Client::connect(imap_addr);
    c.ok("LOGIN alice pw");
    c.ok("LOGOUT");
    let mut c = Client::connect(imap_addr);
    assert_eq!(c.cmd("LOGIN bob pw").status(), "NO");
    // the per-user path fields are not honoured: alice's mail is where the config says
    assert!(root.join("mail/alice/cur").is_dir());

    // userdb_quota_rule=*:storage=1K: a bigger message is refused for good
    let mut l = lmtp_support::Client::connect(lmtp_addr);
    l.expect("220 ");
    l.send("LHLO test\r\n");
    l.expect("250");
    let body = "x".repeat(2048);
    let msg = format!("Subject: big\r\n\r\n{body}\r\n");
    let replies = lmtp_support::transaction(&mut l, &["carol@example.org"], &msg);
    assert!(replies[0].starts_with("552 5.2.2"), "{replies:?}");
    daemon.terminate();
}
