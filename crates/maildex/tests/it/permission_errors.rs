//! Issue 15 #9: a permission error names the fix, Dovecot's way: who maildex runs as, which
//! permission it lacks on which path, and that path's owner and mode. The case from the
//! issue: a `dovecot-uidlist` left `root:root 0600` (as a root-run rebuild once did), then
//! `maildex deliver` (stderr, exit 75) and the daemon (log of the failed SELECT) as the mail
//! user.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::mail_user::{as_mail_user, free_port, maildex, text, Imap, Server, MAIL_USER};

#[test]
fn a_root_owned_uidlist_is_named_with_its_owner_mode_and_our_uid() {
    let Some((dir, port, config)) = as_mail_user() else {
        return;
    };
    let lmtp = free_port();
    let with_lmtp = fs::read_to_string(&config).unwrap().replace(
        "[lmtp]\nlisten = []",
        &format!("[lmtp]\nlisten = [\"127.0.0.1:{lmtp}\"]"),
    );
    fs::write(&config, with_lmtp).unwrap();
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

    // LMTP: 451 for the recipient, and the log line says why
    let before = log.matches(&want).count();
    let reply = lmtp_deliver(lmtp, "alice@example.org");
    assert!(reply.starts_with("451 "), "LMTP answered {reply}");
    let log = server.log_text();
    assert!(
        log.matches(&want).count() > before,
        "the daemon logs: {log}"
    );
}

/// One LMTP transaction to `rcpt`; the reply to the end of DATA.
fn lmtp_deliver(port: u16, rcpt: &str) -> String {
    use std::io::{BufRead, BufReader, Write};
    let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut r = BufReader::new(s);
    let mut reply = |send: &str| {
        r.get_mut().write_all(send.as_bytes()).unwrap();
        loop {
            let mut l = String::new();
            assert!(r.read_line(&mut l).unwrap() > 0, "LMTP closed");
            // the last line of a reply has a space after the code
            if l.as_bytes().get(3) != Some(&b'-') {
                return l;
            }
        }
    };
    reply("");
    reply("LHLO test\r\n");
    reply("MAIL FROM:<a@example.org>\r\n");
    reply(&format!("RCPT TO:<{rcpt}>\r\n"));
    reply("DATA\r\n");
    reply("Subject: d\r\n\r\nfour\r\n.\r\n")
}
