//! Issue 20, users at site scale, with the real `maildex serve`:
//! - #3, users created when first used: with a passwd-file of 100,000 users no user's
//!   Maildir or index is created or opened before that user's first login or delivery, and
//!   a user's mail is synced at that first use; `maildex index check --all` and `rebuild
//!   --all` skip the users who have no mail yet, say so, and create nothing for them. No
//!   assertion is about time: the start is timed and printed only.
//! - passwd-file fields: Dovecot's `allow_nets` and `userdb_quota_rule=*:storage=` are
//!   honoured, and every other field a users file sets (the uid, gid and home columns,
//!   `userdb_uid`/`userdb_gid`, `userdb_home`, `userdb_mail`, other quota rules, fields
//!   maildex does not know) is named in one warning per field at load, with the number of
//!   users, instead of being ignored silently or named once per user.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::support::imap::Client;
use crate::support::lmtp;
use crate::support::postfix::free_port;
use crate::support::process::{maildex_bin, Daemon};

const USERS: usize = 100_000;

fn name(i: usize) -> String {
    format!("user{i:06}")
}

/// A config with IMAP and LMTP on the given ports, mail in `root/mail/%u`, indexes in
/// `root/index/%u`, and the users file `root/users`.
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

/// The users file of `count` users `user000000`... with password `pw`.
fn write_users(root: &Path, count: usize) {
    let mut text = String::with_capacity(count * 24);
    for i in 0..count {
        text.push_str(&name(i));
        text.push_str(":{PLAIN}pw\n");
    }
    std::fs::write(root.join("users"), text).unwrap();
}

/// The names of the per-user folders under `dir` (none when `dir` does not exist).
fn user_folders(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// One message to `rcpt` over LMTP: the reply after the data.
fn deliver(addr: SocketAddr, rcpt: &str, message: &str) -> String {
    let mut c = lmtp::Client::connect(addr);
    c.expect("220 ");
    c.send("LHLO test\r\n");
    c.expect("250");
    let replies = lmtp::transaction(&mut c, &[rcpt], message);
    c.send("QUIT\r\n");
    replies.concat()
}

/// `maildex index ARGS --config CONFIG`: (success, stdout and stderr).
pub(super) fn index_cmd(bin: &Path, config: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(bin)
        .arg("index")
        .args(args)
        .arg("--config")
        .arg(config)
        .env("MAILDEX_LOG", "warn")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn a_hundred_thousand_users_get_no_folder_before_their_first_login_or_delivery() {
    let bin = maildex_bin();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (imap, lmtp) = (free_port(), free_port());
    let config = write_config(root, imap, lmtp);
    write_users(root, USERS);
    let (mail, index) = (root.join("mail"), root.join("index"));
    let imap_addr: SocketAddr = ([127, 0, 0, 1], imap).into();
    let lmtp_addr: SocketAddr = ([127, 0, 0, 1], lmtp).into();

    let t0 = Instant::now();
    let mut daemon = Daemon::start(&bin, &config, root, imap_addr);
    eprintln!(
        "maildex serve with {USERS} users greeted after {:?}",
        t0.elapsed()
    );
    assert!(
        user_folders(&mail).is_empty() && user_folders(&index).is_empty(),
        "the start created user folders: {} Maildirs, {} indexes",
        user_folders(&mail).len(),
        user_folders(&index).len()
    );

    // the first login creates that user's Maildir and index, and no one else's
    let first = name(50_000);
    let mut c = Client::connect(imap_addr);
    c.ok(&format!("LOGIN {first} pw"));
    let r = c.ok("SELECT INBOX");
    assert!(r.all().contains("* 0 EXISTS"), "{}", r.all());
    c.ok("LOGOUT");
    assert_eq!(user_folders(&mail), vec![first.clone()]);
    assert_eq!(user_folders(&index), vec![first.clone()]);
    for sub in ["cur", "new", "tmp"] {
        assert!(mail.join(&first).join(sub).is_dir(), "{first}: no {sub}/");
    }

    // a delivery to a never-used user creates that user's Maildir, indexed at delivery
    let second = name(USERS - 1);
    let message = lmtp::message("first");
    let reply = deliver(lmtp_addr, &format!("{second}@example.org"), &message);
    assert!(reply.starts_with("250 "), "{reply}");
    assert_eq!(user_folders(&mail), [first.clone(), second.clone()]);
    let mut c = Client::connect(imap_addr);
    c.ok(&format!("LOGIN {second} pw"));
    let r = c.ok("SELECT INBOX");
    assert!(r.all().contains("* 1 EXISTS"), "{}", r.all());
    c.ok("LOGOUT");
    daemon.terminate();

    // the index commands skip (and report) the users with no mail yet, creating nothing
    let (ok, out) = index_cmd(&bin, &config, &["check", "--all"]);
    assert!(ok, "index check --all: {out}");
    assert!(
        out.contains(&format!("{}: no Maildir yet", name(0))),
        "{out}"
    );
    assert!(out.contains("index and Maildir agree"), "{out}");
    let (ok, out) = index_cmd(&bin, &config, &["rebuild", "--all"]);
    assert!(ok, "index rebuild --all: {out}");
    assert!(
        out.contains(&format!("{}: no Maildir yet", name(1))),
        "{out}"
    );
    assert!(
        out.contains(&format!("{} users with no mail yet", USERS - 2)),
        "{out}"
    );
    // several users are rebuilt at once, and reported in the directory's order
    let reported: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("user"))
        .filter_map(|l| l.split(": ").next())
        .collect();
    assert_eq!(reported.len(), USERS, "{}", &out[..out.len().min(2000)]);
    assert!(
        reported.windows(2).all(|w| w[0] < w[1]),
        "users not reported in order"
    );
    // INBOX and the five special-use folders every user gets at first use (issue 17 #3)
    assert!(
        out.contains(&format!("{second}: 6 mailboxes, 1 messages")),
        "{out}"
    );
    assert_eq!(user_folders(&mail), [first.clone(), second.clone()]);
    assert_eq!(user_folders(&index), [first, second]);
}

/// What a crash left in a user's `tmp/` is removed at the user's first use after the start
/// (the sync of all the user's mailboxes that the start-up walk used to do), not at start.
#[test]
fn a_users_mail_is_synced_at_first_use_after_the_start() {
    let bin = maildex_bin();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (imap, lmtp) = (free_port(), free_port());
    let config = write_config(root, imap, lmtp);
    write_users(root, 2);
    let imap_addr: SocketAddr = ([127, 0, 0, 1], imap).into();
    let user = name(1);

    let mut daemon = Daemon::start(&bin, &config, root, imap_addr);
    Client::connect(imap_addr).ok(&format!("LOGIN {user} pw"));
    daemon.terminate();
    // left in tmp/ by a writer of this host that has died, and a message another tool put
    // into a folder maildex has not seen
    let maildir = root.join("mail").join(&user);
    let mut gone = Command::new("true").spawn().unwrap();
    let dead_pid = gone.id();
    gone.wait().unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let stale = maildir.join(format!("tmp/1700000000.M1P{dead_pid}.{}", host.trim()));
    std::fs::write(&stale, b"Subject: half\n\n").unwrap();
    let archive = maildir.join(".Archive");
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(archive.join(sub)).unwrap();
    }
    std::fs::write(
        archive.join("cur/1700000000.M1P1.host:2,S"),
        b"Subject: archived\n\nold\n",
    )
    .unwrap();

    let mut daemon = Daemon::start(&bin, &config, root, imap_addr);
    assert!(stale.exists(), "the start touched the user's mail");
    let mut c = Client::connect(imap_addr);
    c.ok(&format!("LOGIN {user} pw"));
    assert!(!stale.exists(), "the first login did not clean tmp/");
    let (ok, out) = {
        c.ok("LOGOUT");
        daemon.terminate();
        index_cmd(&bin, &config, &["check", "-u", &user])
    };
    // synced at the first use: the folder is indexed, not "not indexed yet (indexed when
    // first opened)"; its full text may still wait for the background indexer, which the
    // LOGOUT right after the login can stop before it runs (not a difference)
    assert!(ok && out.contains("index and Maildir agree"), "{out}");
    assert!(!out.contains("not indexed yet (indexed when"), "{out}");
}

const FIELD_USERS: &str = "\
alice:{PLAIN}pw::::/home/alice::allow_nets=127.0.0.0/8 userdb_mail=maildir:~/Maildir \
userdb_home=/srv/alice nodelay=y\n\
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
    std::fs::write(root.join("users"), FIELD_USERS).unwrap();
    let imap_addr: SocketAddr = ([127, 0, 0, 1], imap).into();
    let lmtp_addr: SocketAddr = ([127, 0, 0, 1], lmtp).into();
    let mut daemon = Daemon::start(&bin, &config, root, imap_addr);
    let log = daemon.log_text();

    for (field, users, why) in [
        ("home", 1, "mail_location"),
        ("userdb_home", 1, "mail_location"),
        ("userdb_mail", 1, "mail_location"),
        (
            "quota_rule",
            1,
            "only the `*:storage=` (or `*:bytes=`) quota rule",
        ),
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
    let body = "x".repeat(2048);
    let reply = deliver(
        lmtp_addr,
        "carol@example.org",
        &format!("Subject: big\r\n\r\n{body}\r\n"),
    );
    assert!(reply.starts_with("552 5.2.2"), "{reply}");
    daemon.terminate();
}
