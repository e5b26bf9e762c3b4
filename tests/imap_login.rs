//! Logging in (issue 15, items 3, 7, 29, 31 and 32) against the real daemon over raw
//! sockets, every response parsed by imap-codec (tests/imap_support): AUTHENTICATE PLAIN
//! without SASL-IR and AUTHENTICATE LOGIN, the users file's `allow_nets`, failed logins
//! that answer alike whatever failed, penalties per address and user, and log lines that
//! carry a client's login name. Clients come from chosen loopback addresses
//! (tests/hostile_support's `tcp_from`) where the penalties of one address must not leak
//! into another test's.

mod imap_support;

use base64::Engine;
use imap_support::Server;

fn b64(s: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn authenticate_plain_without_sasl_ir_sends_an_empty_challenge() {
    let s = Server::start();
    let mut c = s.connect();
    let tag = c.tag();
    c.send(format!("{tag} AUTHENTICATE PLAIN\r\n"));
    let cont = c.read();
    assert!(cont.is_continuation(), "{}", cont.text());
    // RFC 3501 §7.5 / RFC 4959 §3: the empty challenge is "+ " and nothing else; a
    // client decodes what follows "+ " as base64 ("OK" is not)
    assert_eq!(cont.raw, b"+ \r\n", "{:?}", cont.text());
    c.send(format!("{}\r\n", b64(b"\0alice\0pw")));
    let r = c.until(&tag);
    assert_eq!(r.status(), "OK", "{}", r.all());
}

#[test]
fn authenticate_login_asks_for_user_name_and_password() {
    let s = Server::start();
    let mut c = s.connect();
    let caps = c.ok("CAPABILITY").lines("* CAPABILITY").join(" ");
    assert!(caps.split(' ').any(|w| w == "AUTH=LOGIN"), "{caps}");
    // draft-murchison-sasl-login §2: "Username:" then "Password:", both base64
    let tag = c.tag();
    c.send(format!("{tag} AUTHENTICATE LOGIN\r\n"));
    let cont = c.read();
    assert_eq!(cont.text(), format!("+ {}\r\n", b64(b"Username:")));
    c.send(format!("{}\r\n", b64(b"alice")));
    let cont = c.read();
    assert_eq!(cont.text(), format!("+ {}\r\n", b64(b"Password:")));
    c.send(format!("{}\r\n", b64(b"pw")));
    let r = c.until(&tag);
    assert_eq!(r.status(), "OK", "{}", r.all());
    assert!(r.done.text().contains("[CAPABILITY "), "{}", r.all());
    c.ok("SELECT INBOX");

    // the user name as an initial response (SASL-IR), a wrong password, a cancel
    let mut c = s.connect();
    let tag = c.tag();
    c.send(format!("{tag} AUTHENTICATE LOGIN {}\r\n", b64(b"bob")));
    let cont = c.read();
    assert_eq!(cont.text(), format!("+ {}\r\n", b64(b"Password:")));
    c.send(format!("{}\r\n", b64(b"wrong")));
    let r = c.until(&tag);
    assert!(
        r.done.text().contains("NO [AUTHENTICATIONFAILED]"),
        "{}",
        r.all()
    );
    let tag = c.tag();
    c.send(format!("{tag} AUTHENTICATE LOGIN\r\n"));
    assert!(c.read().is_continuation());
    c.send(format!("{}\r\n", b64(b"bob")));
    assert!(c.read().is_continuation());
    c.send("*\r\n");
    let r = c.until(&tag);
    assert_eq!(r.status(), "BAD", "{}", r.all());
    let r = c.cmd("AUTHENTICATE LOGIN !!!");
    assert_eq!(r.status(), "BAD", "{}", r.all());
    c.ok("NOOP");
}
