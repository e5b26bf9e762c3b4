//! Python's imaplib (standard library) and imapclient against the real server, driven by
//! tests/it/imap/imap_client.py: login, list, select, envelopes and bodystructure,
//! search, store, append, copy, and IDLE woken by another connection.

use crate::support::daemon::Server;
use crate::support::imap::{have_tool, simple};

fn has_imapclient() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import imapclient"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn python_imaplib_and_imapclient() {
    if !have_tool("python3") {
        return;
    }
    let imapclient = has_imapclient();
    if !imapclient {
        if std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false") {
            panic!("python3 imapclient is missing and CI is set: scripts/test-all.sh installs it");
        }
        eprintln!("SKIPPED (imapclient part): pip install imapclient");
    }
    let s = Server::start();
    for subject in ["first", "second", "third"] {
        s.deliver("alice", &simple(subject, &format!("body of {subject}")));
    }
    s.login("alice").ok("CREATE Archive");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/it/imap/imap_client.py");
    let mut cmd = std::process::Command::new("python3");
    cmd.arg(script)
        .arg("127.0.0.1")
        .arg(s.imap.port().to_string())
        .arg("alice")
        .arg("pw");
    if !imapclient {
        cmd.arg("--no-imapclient");
    }
    let out = cmd.output().unwrap();
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "script failed:\n{so}\n{se}");
    assert!(so.trim_end().ends_with("ok"), "{so}");
    // what the clients did is on the server
    let mut c = s.login("alice");
    let r = c.ok("STATUS INBOX (MESSAGES)");
    let want = if imapclient { 5 } else { 4 };
    assert!(
        r.all().contains(&format!("(MESSAGES {want})")),
        "{}",
        r.all()
    );
    let r = c.ok("STATUS Archive (MESSAGES)");
    assert!(r.all().contains("(MESSAGES 1)"), "{}", r.all());
    c.ok("EXAMINE INBOX");
    let r = c.ok("FETCH 1 FLAGS");
    assert!(r.all().contains("\\Flagged"), "{}", r.all());
    s.assert_clean("alice");
}

/// imaplib's `authenticate` sends no initial response (no SASL-IR) and decodes every
/// challenge as base64: PLAIN needs the empty challenge `+ `, LOGIN the base64
/// "Username:" / "Password:" challenges (issue 15 #3).
#[test]
fn python_imaplib_authenticate_plain_and_login() {
    if !have_tool("python3") {
        return;
    }
    let s = Server::start();
    let script = r#"
import imaplib, sys
port = int(sys.argv[1])
m = imaplib.IMAP4("127.0.0.1", port)
typ, _ = m.authenticate("PLAIN", lambda challenge: b"\0alice\0pw")
assert typ == "OK", typ
typ, data = m.select("INBOX")
assert typ == "OK", (typ, data)
m.logout()
asked = []
def login(challenge):
    asked.append(challenge)
    return {b"Username:": b"bob", b"Password:": b"pw"}[challenge]
m = imaplib.IMAP4("127.0.0.1", port)
typ, _ = m.authenticate("LOGIN", login)
assert typ == "OK", typ
assert asked == [b"Username:", b"Password:"], asked
m.logout()
m = imaplib.IMAP4("127.0.0.1", port)
try:
    m.authenticate("PLAIN", lambda challenge: b"\0alice\0wrong")
    raise SystemExit("a wrong password was accepted")
except imaplib.IMAP4.error as e:
    assert "AUTHENTICATIONFAILED" in str(e), e
print("ok")
"#;
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(s.imap.port().to_string())
        .output()
        .unwrap();
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "imaplib failed:\n{so}\n{se}");
    assert_eq!(so.trim_end(), "ok", "{se}");
}
