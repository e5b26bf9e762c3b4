//! Issue 15 #2: symbolic links inside a Maildir are never followed. A link in `cur/` to
//! `/etc/passwd`, a message file replaced by such a link, and a `.Folder` that links to a
//! Maildir elsewhere are neither indexed, listed, served by FETCH or SEARCH, copied, nor
//! picked up by `index rebuild`, whether the daemon runs as root or as the mail user.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use crate::mail_user::{
    daemon_section, data_folder, free_port, is_root, maildex, text, write_config, Imap, Server,
};

const PASSWD: &str = "root:x:0:0";

/// The regular message files of a mailbox folder.
fn message_files(mailbox: &Path) -> Vec<PathBuf> {
    ["new", "cur"]
        .iter()
        .flat_map(|s| fs::read_dir(mailbox.join(s)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| fs::symlink_metadata(p).unwrap().is_file())
        .collect()
}

fn links_are_not_followed(daemon: &str) {
    let dir = data_folder();
    let port = free_port();
    let config = write_config(dir.path(), daemon, port, "%n/Maildir", false);
    fs::write(dir.path().join("users"), "alice:{PLAIN}pw\n").unwrap();
    let o = maildex(
        &config,
        &["deliver", "-u", "alice"],
        "Subject: hi\n\nhello\n",
    );
    assert!(o.status.success(), "{}", text(&o));
    let inbox = dir.path().join("mail/alice/Maildir");

    // a Maildir folder outside alice's, linked in as her folder .Evil
    let outside = dir.path().join("outside");
    for sub in ["cur", "new", "tmp"] {
        fs::create_dir_all(outside.join(sub)).unwrap();
    }
    fs::write(
        outside.join("cur/1.M1P1.h:2,"),
        "Subject: x\n\nSECRET-OUTSIDE\n",
    )
    .unwrap();
    symlink(&outside, inbox.join(".Evil")).unwrap();
    // a planted "message": a link to /etc/passwd
    symlink("/etc/passwd", inbox.join("cur/1700000000.M1P1.planted:2,S")).unwrap();

    let server = Server::start(&config, port);
    let mut c = Imap::connect(port).unwrap();
    assert_eq!(Imap::status(&c.cmd("LOGIN alice pw")), "OK");
    let list = c.cmd("LIST \"\" \"*\"");
    assert!(!list.contains("Evil"), "a linked folder is listed: {list}");
    let sel = c.cmd("SELECT Evil");
    assert_eq!(Imap::status(&sel), "NO", "a linked folder opens: {sel}");
    let sel = c.cmd("SELECT INBOX");
    assert!(
        sel.contains("* 1 EXISTS"),
        "the planted link is indexed: {sel}"
    );
    let f = c.cmd("FETCH 1:* BODY.PEEK[]");
    assert!(f.contains("hello") && !f.contains(PASSWD), "{f}");

    // the delivered message's file replaced by a link under the same name
    let file = message_files(&inbox).pop().expect("the delivered message");
    fs::remove_file(&file).unwrap();
    symlink("/etc/passwd", &file).unwrap();
    let f = c.cmd("FETCH 1 BODY.PEEK[]");
    assert!(!f.contains(PASSWD), "FETCH served the link: {f}");
    let s = c.cmd("SEARCH BODY root");
    assert!(!s.contains("* SEARCH 1"), "SEARCH read the link: {s}");
    assert_eq!(Imap::status(&c.cmd("CREATE Copies")), "OK");
    c.cmd("COPY 1:* Copies");
    let copies = inbox.join(".Copies");
    for sub in ["new", "cur"] {
        for e in fs::read_dir(copies.join(sub)).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            assert!(m.is_file(), "COPY made {} a link", p.display());
            assert!(!fs::read_to_string(&p).unwrap().contains(PASSWD));
        }
    }
    c.cmd("LOGOUT");
    drop(server);

    let o = maildex(
        &config,
        &["index", "rebuild", "-u", "alice", "--with-text"],
        "",
    );
    let dump = text(&maildex(&config, &["index", "dump", "-u", "alice"], ""));
    assert!(
        !dump.contains("planted") && !dump.contains("Evil"),
        "rebuild indexed a link: {}\n{dump}",
        text(&o)
    );
}

#[test]
fn links_in_a_maildir_are_not_followed_by_a_daemon_running_as_root() {
    if !is_root() {
        eprintln!("skipped: needs root (CI runs as root)");
        return;
    }
    links_are_not_followed("");
}

#[test]
fn links_in_a_maildir_are_not_followed_by_a_daemon_running_as_the_mail_user() {
    if !is_root() {
        eprintln!("skipped: needs root to switch users (CI runs as root)");
        return;
    }
    links_are_not_followed(&daemon_section());
}
