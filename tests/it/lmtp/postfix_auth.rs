//! Issue 20 #2 with a real postfix: SMTP AUTH on a submission port through maildex's SASL
//! socket (`smtpd_sasl_type = dovecot`), and recipients checked at RCPT time through
//! maildex's socketmap (`virtual_mailbox_maps`, `virtual_alias_maps`); Python's smtplib is
//! the SMTP client. One postfix for the module (a single test).
//!
//! Needs postfix and root; skipped with a message when postfix is missing, unless `CI` is
//! set. Raw-protocol edge cases of the same sockets: tests/it/system/postfix_sockets.rs.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;
use std::time::{Duration, Instant};

use maildex_config::Listen;

use crate::support::daemon::{Opts, Server};
use crate::support::postfix::{free_port, group_id, postfix_available, Postfix};
use crate::support::sqldb::{self, Db, Kind};

const USERS: &str = "alice@example.org:{PLAIN}alice-pw\nbob@example.org:{PLAIN}bob-pw\n";

/// SMTP sessions as a mail client and a remote MTA: prints one line per step.
const CLIENT: &str = r#"
import smtplib, sys
sub, mx = int(sys.argv[1]), int(sys.argv[2])

def auth(mech, user, pw, ir=None):
    s = smtplib.SMTP("127.0.0.1", sub, timeout=60)
    s.ehlo("client.test")
    s.user, s.password = user, pw
    if ir is None:
        ir = mech == "PLAIN"
    try:
        code, _ = s.auth(mech, getattr(s, "auth_" + mech.lower()), initial_response_ok=ir)
    except smtplib.SMTPAuthenticationError as e:
        code = e.smtp_code
    return s, code

for mech in ("PLAIN", "LOGIN"):
    s, code = auth(mech, "alice@example.org", "wrong")
    print(mech, "wrong", code)
    s.quit()
    s, code = auth(mech, "alice@example.org", "alice-pw")
    print(mech, "good", code)
    if mech == "PLAIN":
        s.sendmail("alice@example.org", ["bob@example.org"],
                   "From: alice@example.org\r\nTo: bob@example.org\r\nSubject: submitted\r\n\r\nhi\r\n")
        print("submitted")
    s.quit()

# PLAIN answering the empty challenge instead of an initial response
s, code = auth("PLAIN", "bob@example.org", "bob-pw", ir=False)
print("PLAIN-challenge good", code)
s.quit()

s = smtplib.SMTP("127.0.0.1", mx, timeout=60)
s.ehlo("mx.client.test")
s.mail("sender@example.net")
for rcpt in ("nobody@example.org", "team@example.org", "alice@example.org"):
    code, msg = s.rcpt(rcpt)
    print("rcpt", rcpt, code, msg.decode())
s.data("From: sender@example.net\r\nTo: team@example.org\r\nSubject: via mx\r\n\r\nhello\r\n")
print("sent")
s.quit()
"#;

/// maildex (users file and aliases, or `auth` as `[auth]`) with its LMTP, SASL and
/// socketmap sockets for postfix, and a postfix using all three with a submission port.
struct Site {
    s: Server,
    pf: Postfix,
    submission: u16,
    _root: tempfile::TempDir,
}

fn site(auth: Option<String>) -> Site {
    let root = tempfile::tempdir().unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let p = root.path();
    let (lmtp, sasl, map) = (p.join("lmtp.sock"), p.join("auth.sock"), p.join("map.sock"));
    let (sasl2, map2) = (sasl.clone(), map.clone());
    // the sockets as an admin sets them up for postfix's unprivileged processes
    let s = Server::start_with(Opts {
        users: USERS.to_owned(),
        files: vec![(
            "aliases",
            "team@example.org: alice@example.org, bob@example.org\n".to_owned(),
        )],
        lmtp_extra: format!(
            "listen = [\"127.0.0.1:0\", \"unix:{}\"]\nsocket_group = \"postfix\"\n\
             aliases_file = \"aliases\"",
            lmtp.display()
        ),
        auth,
        tweak: Some(Box::new(move |c| {
            c.postfix.auth_socket = Some(Listen::Unix(sasl2));
            c.postfix.socketmap = Some(Listen::Unix(map2));
            c.postfix.socket_group = Some("postfix".into());
        })),
        ..Opts::default()
    });
    for sock in [&sasl, &map] {
        let m = std::fs::metadata(sock).unwrap();
        assert_eq!(m.permissions().mode() & 0o7777, 0o660, "{}", sock.display());
        assert_eq!(m.gid(), group_id("postfix"), "{}", sock.display());
    }
    let submission = free_port();
    let main = format!(
        "virtual_mailbox_domains = example.org\n\
         virtual_transport = lmtp:unix:{lmtp}\n\
         virtual_mailbox_maps = socketmap:unix:{map}:mailbox\n\
         virtual_alias_maps = socketmap:unix:{map}:alias\n\
         smtpd_sasl_type = dovecot\n\
         smtpd_sasl_path = {sasl}\n",
        lmtp = lmtp.display(),
        map = map.display(),
        sasl = sasl.display(),
    );
    let master = format!(
        "127.0.0.1:{submission} inet n - n - - smtpd\n  \
         -o smtpd_sasl_auth_enable=yes\n  \
         -o smtpd_client_restrictions=permit_sasl_authenticated,reject\n  \
         -o smtpd_relay_restrictions=permit_sasl_authenticated,reject\n"
    );
    let pf = Postfix::start(&p.join("postfix"), &main, &master);
    Site {
        s,
        pf,
        submission,
        _root: root,
    }
}

#[test]
fn postfix_authenticates_and_checks_recipients_against_maildex() {
    if !postfix_available() {
        return;
    }
    let Site {
        s,
        pf,
        submission,
        _root,
    } = site(None);
    let out = Command::new("python3")
        .args([
            "-c",
            CLIENT,
            &submission.to_string(),
            &pf.smtp_port.to_string(),
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "client failed: {said}\n{}\npostfix log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        pf.log()
    );
    for line in [
        "PLAIN wrong 535",
        "PLAIN good 235",
        "submitted",
        "LOGIN wrong 535",
        "LOGIN good 235",
        "PLAIN-challenge good 235",
        "rcpt team@example.org 250",
        "rcpt alice@example.org 250",
        "sent",
    ] {
        assert!(
            said.lines().any(|l| l.starts_with(line)),
            "no {line:?} in:\n{said}"
        );
    }
    // the unknown recipient is refused at RCPT time, before anything is queued
    let unknown = said
        .lines()
        .find(|l| l.starts_with("rcpt nobody@example.org"))
        .unwrap();
    assert!(unknown.contains(" 550 5.1.1 "), "{unknown}");

    // delivered over LMTP: bob the submitted message and the alias's; alice the alias's
    // and her own address's (two recipients to postfix: their original recipients differ,
    // enable_original_recipient = yes)
    let count = |user: &str, subject: &str| {
        s.files(user, "INBOX")
            .iter()
            .filter(|f| {
                std::fs::read_to_string(f)
                    .unwrap_or_default()
                    .contains(&format!("Subject: {subject}\n"))
            })
            .count()
    };
    let t0 = Instant::now();
    // a delivery's file is in the Maildir before its index commit (and before its 250),
    // so the files can be seen while the second one is still being indexed
    while count("bob@example.org", "submitted") + count("bob@example.org", "via mx") < 2
        || count("alice@example.org", "via mx") < 2
        || s.indexed("bob@example.org", "INBOX") < 2
    {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "mail did not arrive or was not indexed ({} of bob's); postfix log:\n{}",
            s.indexed("bob@example.org", "INBOX"),
            pf.log()
        );
        pf.flush();
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(count("bob@example.org", "submitted"), 1);
    assert_eq!(count("bob@example.org", "via mx"), 1);
    assert_eq!(count("alice@example.org", "via mx"), 2);
    assert_eq!(s.indexed("bob@example.org", "INBOX"), 2);
    let log = pf.log();
    assert!(
        log.contains("sasl_method=PLAIN, sasl_username=alice@example.org"),
        "{log}"
    );
    let problems: Vec<String> = pf
        .problems()
        .into_iter()
        // main.cf's base sets virtual_mailbox_maps empty; ours comes later on purpose
        .filter(|l| !l.contains("overriding earlier entry"))
        // the wrong passwords above
        .filter(|l| {
            !l.contains("SASL PLAIN authentication failed")
                && !l.contains("SASL LOGIN authentication failed")
        })
        .collect();
    assert!(problems.is_empty(), "postfix complained:\n{problems:#?}");
}

/// One SMTP step: `rcpt ADDRESS` on the MX port, or `auth USER PASSWORD` (PLAIN) on the
/// submission port; prints the reply code and text.
const STEP: &str = r#"
import smtplib, sys
sub, mx, what = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if what == "rcpt":
    s = smtplib.SMTP("127.0.0.1", mx, timeout=60)
    s.ehlo("mx.client.test")
    s.mail("sender@example.net")
    code, msg = s.rcpt(sys.argv[4])
else:
    s = smtplib.SMTP("127.0.0.1", sub, timeout=60)
    s.ehlo("client.test")
    s.user, s.password = sys.argv[4], sys.argv[5]
    try:
        code, msg = s.auth("PLAIN", s.auth_plain)
    except smtplib.SMTPAuthenticationError as e:
        code, msg = e.smtp_code, e.smtp_error
print(code, msg.decode())
s.quit()
"#;

fn step(site: &Site, args: &[&str]) -> String {
    let out = Command::new("python3")
        .args([
            "-c",
            STEP,
            &site.submission.to_string(),
            &site.pf.smtp_port.to_string(),
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\npostfix log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        site.pf.log()
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn postfix_defers_while_the_user_directory_is_down() {
    if !postfix_available() {
        return;
    }
    if !sqldb::usable(Kind::Postgres) {
        return;
    }
    let (db, _alone) = Db::exclusive(Kind::Postgres);
    db.add_user("pf-dora@example.org", "{PLAIN}dora-pw", None);
    let site = site(Some(db.auth_config("cache_size = 0")));
    assert!(step(&site, &["rcpt", "pf-dora@example.org"]).starts_with("250"));
    assert!(step(&site, &["rcpt", "pf-nobody@example.org"]).starts_with("550 5.1.1"));
    assert!(step(&site, &["auth", "pf-dora@example.org", "dora-pw"]).starts_with("235"));

    db.stop();
    // the socketmap's TEMP: postfix defers the recipient instead of refusing it
    let r = step(&site, &["rcpt", "pf-dora@example.org"]);
    assert!(r.starts_with("451 4.3.0"), "{r}");
    let r = step(&site, &["rcpt", "pf-nobody@example.org"]);
    assert!(r.starts_with("451 4.3.0"), "{r}");
    // SASL's FAIL ... temp: postfix 3.7 refuses the attempt, saying why
    let r = step(&site, &["auth", "pf-dora@example.org", "dora-pw"]);
    assert!(
        !r.starts_with("235") && r.contains("Temporary authentication failure"),
        "{r}"
    );

    db.start();
    // back by itself, with no restart of maildex or postfix
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = step(&site, &["rcpt", "pf-dora@example.org"]);
        if r.starts_with("250") {
            break;
        }
        assert!(Instant::now() < deadline, "no recovery: {r}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(step(&site, &["auth", "pf-dora@example.org", "dora-pw"]).starts_with("235"));
}
