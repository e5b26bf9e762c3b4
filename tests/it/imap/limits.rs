//! The `[imap]` connection limits and autologout timers, set in the config file and
//! enforced by the real daemon on 127.0.0.1:0 (issue 5, connection floods: the global
//! and per-IP limits hold while other clients are still served; issue 6, listeners):
//! refusal past `max_connections` and `max_connections_per_ip`, `login_timeout`,
//! `autologout` (in IDLE too), the grammar limits, graceful shutdown and reload.
//!
//! Every wait is bounded by [`PATIENCE`]; timers under test are 1-2 s.

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::support::daemon::{Opts, Server, USERS};
use crate::support::hostile::tcp_from;
use crate::support::imap::{Client, Stream, PATIENCE};
use maildex_config::{Config, ConfigError};

/// The daemon with `imap_keys` added to `[imap]` (no TLS); `tweak` may change the
/// validated config (to set what the file refuses, such as a short autologout).
fn start(imap_keys: &str, tweak: impl FnOnce(&mut Config) + Send + 'static) -> Server {
    Server::start_with(Opts {
        tls: false,
        imap_extra: imap_keys.to_owned(),
        tweak: Some(Box::new(tweak)),
        ..Opts::default()
    })
}

/// Everything the server sends on `tcp` until it closes (bounded by [`PATIENCE`]);
/// panics if it keeps the connection open.
fn read_to_close(mut tcp: TcpStream) -> String {
    let deadline = Instant::now() + PATIENCE;
    let mut got = Vec::new();
    let mut b = [0u8; 1024];
    loop {
        let left = deadline
            .checked_duration_since(Instant::now())
            .unwrap_or_else(|| {
                panic!(
                    "still open after {PATIENCE:?}; got {:?}",
                    String::from_utf8_lossy(&got)
                )
            });
        tcp.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match tcp.read(&mut b) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&b[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("read: {e}"),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Connects from `src` and expects a refusal: `* BYE [UNAVAILABLE] ...`, then close.
fn assert_refused(src: Ipv4Addr, dst: SocketAddr) -> String {
    let text = read_to_close(tcp_from(src, dst));
    assert!(
        text.starts_with("* BYE [UNAVAILABLE] ") && text.ends_with("\r\n"),
        "wanted a refusal, got {text:?}"
    );
    assert_eq!(text.matches("\r\n").count(), 1, "one line only: {text:?}");
    text
}

/// Connects until the server greets with `* OK` (a closed session's slot is given back
/// when its task ends, a moment after the client's close); bounded by [`PATIENCE`].
fn connect_when_served(src: Ipv4Addr, dst: SocketAddr) -> Client {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let tcp = tcp_from(src, dst);
        tcp.set_read_timeout(Some(PATIENCE)).unwrap();
        // look at the first bytes without taking them: the greeting or the refusal
        let mut first = [0u8; 5];
        let mut n = 0;
        while n < first.len() {
            n = tcp.peek(&mut first).unwrap();
            assert!(n > 0, "closed without a word");
            assert!(Instant::now() < deadline, "no greeting");
        }
        if &first == b"* OK " {
            let mut c = Client::wrap(Stream::Plain(tcp));
            c.read_greeting();
            return c;
        }
        let rest = read_to_close(tcp);
        assert!(rest.starts_with("* BYE [UNAVAILABLE]"), "{rest:?}");
        assert!(Instant::now() < deadline, "no slot came free: {rest:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

const LOCAL: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
const OTHER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

#[test]
fn global_limit_refuses_the_next_connection_until_one_closes() {
    let d = start("max_connections = 3", |_| {});
    let mut open: Vec<Client> = (0..3).map(|_| d.connect()).collect();
    let why = assert_refused(LOCAL, d.imap);
    assert!(why.contains("Too many connections"), "{why}");
    // the limit is global: another address is refused too
    assert_refused(OTHER, d.imap);
    // those admitted are served: one logs in, all answer
    open[0].ok("LOGIN alice pw");
    for c in &mut open {
        c.ok("NOOP");
    }
    // one leaves: a new connection is served again, and the one after is refused
    let mut gone = open.pop().unwrap();
    gone.ok("LOGOUT");
    assert!(gone.closed_within(PATIENCE));
    let mut again = connect_when_served(OTHER, d.imap);
    again.ok("LOGIN bob pw");
    assert_refused(LOCAL, d.imap);
    // a client that just drops its connection gives its slot back too
    drop(open.pop());
    let mut third = connect_when_served(LOCAL, d.imap);
    third.ok("NOOP");
}

#[test]
fn per_ip_limit_refuses_that_address_and_serves_others() {
    let d = start("max_connections_per_ip = 2", |_| {});
    let mut mine: Vec<Client> = (0..2).map(|_| d.connect()).collect();
    let why = assert_refused(LOCAL, d.imap);
    assert!(why.contains("from your address"), "{why}");
    // a client from another address is served and can log in
    let mut other = Client::wrap(Stream::Plain(tcp_from(OTHER, d.imap)));
    other.read_greeting();
    assert!(other.greeting.starts_with("* OK"), "{}", other.greeting);
    other.ok("LOGIN bob pw");
    other.ok("SELECT INBOX");
    // and a second one from there; the third from there is refused as well
    let mut other2 = Client::wrap(Stream::Plain(tcp_from(OTHER, d.imap)));
    other2.read_greeting();
    other2.ok("LOGIN alice pw");
    assert_refused(OTHER, d.imap);
    // the first address's own sessions were never disturbed
    for c in &mut mine {
        c.ok("NOOP");
    }
    mine[1].ok("LOGOUT");
    assert!(mine[1].closed_within(PATIENCE));
    let mut back = connect_when_served(LOCAL, d.imap);
    back.ok("LOGIN alice pw");
}

#[test]
fn login_timeout_says_bye_to_an_idle_unauthenticated_connection() {
    let d = start("login_timeout = \"1s\"", |_| {});
    let started = Instant::now();
    let mut idle = d.connect();
    // a session that logs in is under the autologout timer (30 min) instead
    let mut authed = d.login("alice");
    let bye = idle.read();
    assert!(
        bye.text().starts_with("* BYE ") && bye.text().contains("Autologout"),
        "{}",
        bye.text()
    );
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "BYE before the timer ran out: {:?}",
        started.elapsed()
    );
    assert!(idle.closed_within(PATIENCE));
    // the logged-in session has been quiet for longer than login_timeout by now
    std::thread::sleep(Duration::from_millis(1200));
    authed.ok("NOOP");
    // its slot was given back: a new connection is served
    d.connect().ok("LOGOUT");
}

#[test]
fn autologout_under_30_minutes_is_a_config_error() {
    let text = "[imap]\nautologout = \"29m\"\n[storage]\nmail_location = \"/m/%u\"\n\
                [auth]\nusers_file = \"/u\"\n";
    let err =
        Config::from_toml_str(text, std::path::Path::new("/etc/maildex/maildex.toml")).unwrap_err();
    assert!(
        matches!(&err, ConfigError::Invalid { key, .. } if key == "imap.autologout"),
        "{err:?}"
    );
    let shown = err.to_string();
    assert!(
        shown.contains("`imap.autologout`") && shown.contains("30 minutes"),
        "{shown}"
    );
}

#[test]
fn autologout_ends_an_authenticated_session_and_an_idle() {
    // Set in-process on the validated config: the file refuses under 30 minutes.
    let d = start("", |c| c.imap.autologout = Duration::from_secs(2));
    let started = Instant::now();
    let mut quiet = d.login("alice");
    let mut idling = d.login("bob");
    idling.ok("SELECT INBOX");
    let tag = idling.tag();
    idling.send(format!("{tag} IDLE\r\n"));
    assert!(idling.read().is_continuation());
    for c in [&mut quiet, &mut idling] {
        let bye = c.read();
        assert!(
            bye.text().starts_with("* BYE ") && bye.text().contains("Autologout"),
            "{}",
            bye.text()
        );
        assert!(c.closed_within(PATIENCE));
    }
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "BYE before the timer ran out: {:?}",
        started.elapsed()
    );
}

#[test]
fn stop_says_bye_to_every_session_and_closes_them() {
    let mut d = start("", |_| {});
    let mut greeted = d.connect();
    let mut authed = d.login("alice");
    let mut idling = d.login("bob");
    idling.ok("SELECT INBOX");
    let tag = idling.tag();
    idling.send(format!("{tag} IDLE\r\n"));
    assert!(idling.read().is_continuation());
    d.begin_stop();
    for (name, c) in [
        ("not authenticated", &mut greeted),
        ("authenticated", &mut authed),
        ("idle", &mut idling),
    ] {
        let bye = c.read();
        assert!(
            bye.text().starts_with("* BYE ") && bye.text().contains("shutting down"),
            "{name}: {}",
            bye.text()
        );
        assert!(c.closed_within(PATIENCE), "{name} left open");
    }
    d.stop();
    assert!(
        TcpStream::connect_timeout(&d.imap, PATIENCE).is_err(),
        "the listener is closed after stop"
    );
}

#[test]
fn a_user_added_to_the_users_file_logs_in_after_reload_only() {
    let d = start("", |_| {});
    std::fs::write(d.users_file(), format!("{USERS}carol:{{PLAIN}}pw\n")).unwrap();
    let mut c = d.connect();
    let r = c.cmd("LOGIN carol pw");
    assert_eq!(r.status(), "NO", "before reload: {}", r.all());
    d.reload().unwrap();
    c.ok("LOGIN carol pw");
    c.ok("SELECT INBOX");
    // a broken users file (a name defined twice) is refused and the loaded users stay
    std::fs::write(d.users_file(), "carol:{PLAIN}new\nCAROL:{PLAIN}new\n").unwrap();
    let err = d
        .reload()
        .expect_err("a users file with a duplicate is refused");
    assert!(err.contains("already defined"), "{err}");
    let mut again = d.connect();
    again.ok("LOGIN carol pw");
    again.ok("LOGOUT");
}

#[test]
fn grammar_limits_come_from_the_config() {
    let d = start("max_line_length = 8192\nmax_message_size = 1000", |_| {});
    let mut c = d.login("alice");
    let caps = c.ok("CAPABILITY").all();
    assert!(caps.contains(" APPENDLIMIT=1000"), "{caps}");
    // RFC 7889 §4: a larger APPEND is refused before its literal is sent
    let r = c.cmd(&format!("APPEND INBOX {{1001}}\r\n{}", "x".repeat(1001)));
    assert_eq!(r.status(), "NO", "{}", r.all());
    assert!(r.done.text().contains("[TOOBIG]"), "{}", r.all());
    // a line over 8192 octets is refused; one just under is read
    let long = format!("SEARCH SUBJECT \"{}\"", "a".repeat(8200));
    let r = c.cmd(&long);
    assert_eq!(r.status(), "BAD", "{}", r.all());
    assert!(r.done.text().contains("[TOOBIG]"), "{}", r.all());
    c.ok("SELECT INBOX");
    let fits = format!("SEARCH SUBJECT \"{}\"", "a".repeat(8000));
    c.ok(&fits);
}
