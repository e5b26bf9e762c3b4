//! Logging in (issue 15, items 3, 7, 29 and 31) against the real daemon over raw sockets,
//! every response parsed by imap-codec (tests/support/imap): AUTHENTICATE PLAIN without
//! SASL-IR and AUTHENTICATE LOGIN, the users file's `allow_nets`, failed logins that answer
//! alike whatever failed, and penalties per address and user (item 32, login names in log
//! lines, is in tests/it/system/log_secrets.rs). Clients come from chosen loopback addresses
//! (tests/support/hostile.rs's `tcp_from`), so the penalties of one test do not reach another.

#[allow(dead_code)]
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::support::daemon::{Opts, Server};
use crate::support::hostile::tcp_from;
use crate::support::imap::{Client, Stream};
use base64::Engine;

fn b64(s: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn connect_from(s: &Server, src: Ipv4Addr) -> Client {
    let mut c = Client::wrap(Stream::Plain(tcp_from(src, s.imap)));
    c.read_greeting();
    c
}

fn server_with_users(users: &str) -> Server {
    Server::start_with(Opts {
        files: vec![("users", users.to_owned())],
        ..Opts::default()
    })
}

/// `pw` hashed by `doveadm pw -s SHA512-CRYPT -p pw`.
const CAROL_SHA512: &str = "{SHA512-CRYPT}$6$5yhPmwwpgiyghTho$vYXP2lcmkiDKxTKmEwWM.eBHL2AYqXeuhG.KC7z/Y/3OGr5yTj9MaZFrj2G1W9R7dm8zXO.KA6QO7RgtvBtPF0";

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

#[test]
fn allow_nets_limits_where_a_user_logs_in_from() {
    // Dovecot's `local` is a connection without an address (a UNIX socket): no TCP
    // client, loopback included, is one
    let s = server_with_users(
        "alice:{PLAIN}pw\ncarol:{PLAIN}pw::::::allow_nets=127.0.0.9/32,10.0.0.0/8\n\
         dave:{PLAIN}pw::::::allow_nets=local\n",
    );
    let refused = |src: Ipv4Addr, user: &str| {
        let mut c = connect_from(&s, src);
        let r = c.cmd(&format!("LOGIN {user} pw"));
        assert_eq!(
            r.done.text(),
            format!(
                "{} NO [AUTHENTICATIONFAILED] Authentication failed.\r\n",
                r.done.tag().unwrap()
            )
        );
    };
    refused(Ipv4Addr::new(127, 0, 3, 1), "carol");
    refused(Ipv4Addr::new(127, 0, 3, 2), "dave");
    connect_from(&s, Ipv4Addr::new(127, 0, 0, 9)).ok("LOGIN carol pw");
    connect_from(&s, Ipv4Addr::new(127, 0, 3, 3)).ok("LOGIN alice pw");
}

/// The tagged answer without its tag.
fn answer(c: &mut Client, command: &str) -> String {
    let r = c.cmd(command);
    let text = r.done.text();
    text.split_once(' ')
        .map(|(_, rest)| rest.to_owned())
        .unwrap_or(text)
}

#[test]
fn failed_logins_answer_alike_and_take_alike_whatever_failed() {
    // erin's hash is broken: a scheme problem is a failed login like any other
    let users =
        format!("alice:{{PLAIN}}pw\ncarol:{CAROL_SHA512}\nerin:{{SHA512-CRYPT}}$6$broken\n");
    let s = server_with_users(&users);
    let mut answers = Vec::new();
    for (i, cmd) in [
        "LOGIN carol wrong",
        "LOGIN nobody wrong",
        "LOGIN erin wrong",
        &format!("AUTHENTICATE PLAIN {}", b64(b"\0nobody\0wrong")),
        &format!("AUTHENTICATE PLAIN {}", b64(b"\0carol\0wrong")),
    ]
    .into_iter()
    .enumerate()
    {
        let mut c = connect_from(&s, Ipv4Addr::new(127, 0, 4, i as u8 + 1));
        answers.push((cmd.to_owned(), answer(&mut c, cmd)));
    }
    for (cmd, a) in &answers {
        assert_eq!(
            a, "NO [AUTHENTICATIONFAILED] Authentication failed.\r\n",
            "{cmd}: {answers:?}"
        );
    }
    // the broken hash earned a penalty like a wrong password: the next try waits
    let mut c = connect_from(&s, Ipv4Addr::new(127, 0, 4, 3));
    let begun = Instant::now();
    assert!(answer(&mut c, "LOGIN erin wrong").starts_with("NO [AUTHENTICATIONFAILED]"));
    assert!(
        begun.elapsed() >= Duration::from_millis(250),
        "{:?}",
        begun.elapsed()
    );

    // timing: an unknown user costs what a wrong SHA512-CRYPT password costs (each try
    // from a fresh address, so no penalty is in the figures)
    let time = |user: &str, base: u8| {
        let mut all: Vec<Duration> = (0..7u8)
            .map(|i| {
                let mut c = connect_from(&s, Ipv4Addr::new(127, 0, base, i + 1));
                let begun = Instant::now();
                let a = answer(&mut c, &format!("LOGIN {user} wrong"));
                assert!(a.starts_with("NO [AUTHENTICATIONFAILED]"), "{a}");
                begun.elapsed()
            })
            .collect();
        all.sort();
        all[all.len() / 2]
    };
    let (unknown, wrong) = (time("nobody", 5), time("carol", 6));
    eprintln!("median failed login: unknown user {unknown:?}, wrong password {wrong:?}");
    // the same order of magnitude, a generous bound (other tests share the cores)
    let (lo, hi) = (unknown.min(wrong), unknown.max(wrong));
    assert!(
        hi < lo * 10 + Duration::from_millis(20),
        "unknown user {unknown:?} against wrong password {wrong:?}"
    );
}

#[test]
fn a_success_clears_the_penalty_of_that_user_only() {
    let s = Server::start();
    let from = Ipv4Addr::new(127, 0, 7, 1);
    let mut attacker = connect_from(&s, from);
    // two guesses against bob, then the attacker logs in to its own account (alice)
    for i in 0..2 {
        assert!(answer(&mut attacker, &format!("LOGIN bob guess{i}")).starts_with("NO"));
    }
    let mut own = connect_from(&s, from);
    own.ok("LOGIN alice pw");
    // the guesses still count: the next one waits 500 ms, not 0
    let begun = Instant::now();
    assert!(answer(&mut attacker, "LOGIN bob guess2").starts_with("NO"));
    let took = begun.elapsed();
    assert!(took >= Duration::from_millis(500), "waited {took:?}");
    // bob's own success clears bob's failures at this address
    let mut c = connect_from(&s, from);
    c.ok("LOGIN bob pw");
    let begun = Instant::now();
    let mut c = connect_from(&s, from);
    c.ok("LOGIN bob pw");
    let took = begun.elapsed();
    assert!(took < Duration::from_millis(250), "waited {took:?}");
}
