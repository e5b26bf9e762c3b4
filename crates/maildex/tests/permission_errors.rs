//! Issue 15 #9: a permission error names the fix, Dovecot's way: who maildex runs as, which
//! permission it lacks on which path, and that path's owner and mode. The case from the
//! issue: a `dovecot-uidlist` left `root:root 0600` (as a root-run rebuild once did), then
//! `maildex deliver` (stderr, exit 75) and the daemon (log of the failed SELECT) as the mail
//! user.

mod mail_user;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use mail_user::{
    daemon_section, data_folder, free_port, is_root, maildex, text, write_config, Imap, Server,
    MAIL_USER,
};

#[test]
fn a_root_owned_uidlist_is_named_with_its_owner_mode_and_our_uid() {
    if !is_root() {
        eprintln!("skipped: needs root to switch users (CI runs as root)");
        return;
    }
    let dir = data_folder();
    let port = free_port();
    let config = write_config(dir.path(), &daemon_section(), port, "%n/Maildir", false);
    fs::write(dir.path().join("users"), "alice:{PLAIN}pw\n").unwrap();
    let o = maildex(&config, &["deliver", "-u", "alice"], "Subject: a\n\none\n");
    assert!(o.status.success(), "{}", text(&o));
    let uidlist = dir.path().join("mail/alice/Maildir/dovecot-uidlist");
    std::os::unix::fs::chown(&uidlist, Some(0), Some(0)).unwrap();
    fs::set_permissions(&uidlist, fs::Permissions::from_mode(0o600)).unwrap();
    let want = format!(
        "({MAIL_USER}) lacks read permission on {}, owned by 0(root) mode=0600)",
        uidlist.display()
    );

    let o = maildex(&config, &["deliver", "-u", "alice"], "Subject: b\n\ntwo\n");
    assert_eq!(o.status.code(), Some(75), "{}", text(&o));
    assert!(text(&o).contains(&want), "deliver says: {}", text(&o));

    let server = Server::start(&config, port);
    let mut c = Imap::connect(port).unwrap();
    assert_eq!(Imap::status(&c.cmd("LOGIN alice pw")), "OK");
    // the uidlist is read when the folder changed since the index last saw it
    fs::write(
        dir.path().join("mail/alice/Maildir/new/1.M1P1.planted"),
        "Subject: c\n\nthree\n",
    )
    .unwrap();
    let sel = c.cmd("SELECT INBOX");
    assert_eq!(Imap::status(&sel), "NO", "{sel}");
    c.cmd("LOGOUT");
    let log = server.log_text();
    assert!(log.contains(&want), "the daemon logs: {log}");
}
