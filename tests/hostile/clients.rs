//! Hostile clients against the real daemon on 127.0.0.1 (issue 5, part 4): slow senders,
//! literals announced at 4 GB, commands with a million items, deeply nested parentheses,
//! login brute force, plaintext pipelined after STARTTLS, TLS below 1.2 and AUTHENTICATE
//! with garbage. Each attack checks that others are still served and measures the
//! process's resident memory (the daemon runs in it): `MEMORY ...` lines on stderr, run
//! with `--nocapture` to see them. Connection floods and senders at a byte a second are in
//! tests/hostile/floods.rs (the limits one by one in tests/it/imap/limits.rs).
//!
//! The tests take a lock and run one at a time, so one attack's memory is not another's.
//! Every wait is bounded by [`PATIENCE`] or a fixed count; no assertion is about how fast
//! the machine is, only about order (a login from another address finishes before the
//! attacker's penalty runs out) and lower bounds the server itself imposes.

// shared with tests/hostile/floods.rs and tests/hostile/sessions.rs, which use the rest
#[allow(dead_code)]
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::support::daemon::{Opts, Server};
use crate::support::hostile::{client_hello, send_hello, serial, tcp_from, HelloAnswer, Mem};
use crate::support::imap::{Client, Reply, PATIENCE};
use base64::Engine;

const ATTACKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
const OTHER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

fn b64(s: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The session still answers, or the server ended it with `* BYE` (the server decides;
/// either is sane). Returns true when it still answers.
fn alive_or_bye(c: &mut Client, what: &str) -> bool {
    let t = c.tag();
    c.send(format!("{t} NOOP\r\n"));
    let r = c.read();
    if r.text().starts_with("* BYE") {
        assert!(c.closed_within(PATIENCE), "{what}: open after BYE");
        eprintln!("{what}: the server said BYE and closed");
        return false;
    }
    let mut last = r;
    while last.tag().as_deref() != Some(t.as_str()) {
        assert!(last.tag().is_none(), "{what}: {}", last.text());
        last = c.read();
    }
    assert!(last.text().contains(" OK "), "{what}: {}", last.text());
    true
}

/// Asserts `r` is a tagged `status` with `[code]` when given.
fn assert_status(r: &Reply, status: &str, code: Option<&str>, what: &str) {
    assert_eq!(r.status(), status, "{what}: {}", r.all());
    if let Some(code) = code {
        assert!(
            r.done.text().contains(&format!("[{code}]")),
            "{what}: wanted [{code}]: {}",
            r.all()
        );
    }
}

#[test]
fn slow_senders_are_served_and_do_not_hold_up_others() {
    let _serial = serial();
    let d = Server::with_imap_keys("");
    let mem = Mem::start("20 slow LOGIN senders + 1 slow APPEND, a byte per 100 ms");
    // 20 clients send their LOGIN a byte at a time; one logged-in client sends an APPEND
    // with its message the same way (LITERAL+, so no continuation is awaited)
    let login: &[u8] = b"S1 LOGIN alice pw\r\n";
    let append: &[u8] = b"S2 APPEND INBOX {12+}\r\nSubject: x\r\n\r\n";
    let mut slow: Vec<(Client, &[u8], &str)> =
        (0..20).map(|_| (d.connect(), login, "S1")).collect();
    slow.push((d.login("alice"), append, "S2"));
    let longest = append.len().max(login.len());
    let mut bystander_done = false;
    for i in 0..longest {
        for (c, script, _) in &mut slow {
            if let Some(&b) = script.get(i) {
                c.send([b]);
            }
        }
        if i == 9 && !bystander_done {
            // every slow client holds half a command: another client is served all along
            let mut other = d.login("bob");
            other.ok("SELECT INBOX");
            other.ok("APPEND INBOX {9+}\r\nSubject: ");
            let r = other.ok("FETCH 1 (FLAGS RFC822.SIZE)");
            assert_eq!(r.fetches().len(), 1, "{}", r.all());
            other.ok("LOGOUT");
            bystander_done = true;
            // nothing was answered to the half-sent commands
            for (c, _, _) in &mut slow {
                assert!(c.read_within(Duration::from_millis(1)).is_none());
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for (c, _, tag) in &mut slow {
        let r = c.until(tag);
        assert_status(&r, "OK", None, "slow command");
        c.ok("SELECT INBOX");
    }
    assert!(bystander_done);
    assert_eq!(d.count("alice", "new") + d.count("alice", "cur"), 1);
    drop(slow);
    mem.finish();
}

#[test]
fn login_timeout_ends_unauthenticated_slow_senders() {
    let _serial = serial();
    let d = Server::with_imap_keys("login_timeout = \"1s\"");
    let mem = Mem::start("slow unauthenticated senders under login_timeout 1 s");
    let started = Instant::now();
    // one never finishes a line; one finishes a NOOP every 100 ms but never logs in
    let mut trickle = d.connect();
    let mut chatty = d.connect();
    let mut logged_in = d.login("alice");
    let mut trickle_bye = None;
    let mut chatty_bye = None;
    // bounded: 150 rounds of ~100 ms, far past the 1 s timer
    for round in 0..150 {
        if trickle_bye.is_none() {
            let _ = std::io::Write::write_all(&mut trickle.stream, b"A");
            if let Some(r) = trickle.read_within(Duration::from_millis(100)) {
                trickle_bye = Some((r.text(), started.elapsed(), round));
            }
        }
        if chatty_bye.is_none() {
            let t = chatty.tag();
            let _ =
                std::io::Write::write_all(&mut chatty.stream, format!("{t} NOOP\r\n").as_bytes());
            loop {
                let r = chatty.read();
                if r.text().starts_with("* BYE") {
                    chatty_bye = Some((r.text(), started.elapsed(), round));
                    break;
                }
                if r.tag().as_deref() == Some(t.as_str()) {
                    assert_eq!(r.text().split(' ').nth(1), Some("OK"), "NOOP: {}", r.text());
                    break;
                }
            }
            if trickle_bye.is_some() {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        if trickle_bye.is_some() && chatty_bye.is_some() {
            break;
        }
    }
    for (who, bye, c) in [
        ("never ends a line", trickle_bye, &mut trickle),
        ("NOOPs without logging in", chatty_bye, &mut chatty),
    ] {
        let (text, at, round) =
            bye.unwrap_or_else(|| panic!("{who}: still served after 150 rounds"));
        eprintln!("{who}: {} after {at:?} (round {round})", text.trim_end());
        assert!(
            text.starts_with("* BYE ") && text.contains("Autologout"),
            "{who}: {text}"
        );
        assert!(at >= Duration::from_millis(900), "{who}: BYE at {at:?}");
        assert!(c.closed_within(PATIENCE), "{who}: open after BYE");
    }
    // the logged-in session is under autologout (30 minutes) instead
    logged_in.ok("NOOP");
    mem.finish();
}

#[test]
fn literals_announced_at_4_gb_are_refused_before_reading() {
    let _serial = serial();
    let d = Server::with_imap_keys("");
    let mut bystander = d.login("bob");
    let mut c = d.login("alice");
    c.ok("SELECT INBOX");
    let mem = Mem::start("literals announced at 4 GB");
    // synchronizing: refused with no continuation; the NOOP pipelined right after the
    // announcement is read as a command, so not one octet was taken as literal data
    let sync_cases: [(&str, &str, Option<&str>); 6] = [
        ("APPEND INBOX {4294967295}", "NO", Some("TOOBIG")),
        ("APPEND INBOX (\\Seen) ~{4294967295}", "NO", Some("TOOBIG")),
        // RFC 3501 §9: a literal's size is a 32-bit `number`; more is a syntax error
        ("APPEND INBOX {4294967296}", "BAD", None),
        ("APPEND INBOX {18446744073709551616}", "BAD", None),
        ("SEARCH SUBJECT {4294967295}", "BAD", Some("TOOBIG")),
        ("RENAME {4294967295}", "BAD", Some("TOOBIG")),
    ];
    for (cmd, status, code) in sync_cases {
        let (t, n) = (c.tag(), c.tag());
        c.send(format!("{t} {cmd}\r\n{n} NOOP\r\n"));
        let r = c.until(&t);
        assert_status(&r, status, code, cmd);
        let noop = c.until(&n);
        assert_status(&noop, "OK", None, cmd);
        eprintln!("{cmd}: {}", r.done.text().trim_end());
    }
    let mut fresh = d.connect();
    let (t, n) = (fresh.tag(), fresh.tag());
    fresh.send(format!("{t} LOGIN alice {{4294967295}}\r\n{n} NOOP\r\n"));
    assert_status(&fresh.until(&t), "BAD", Some("TOOBIG"), "LOGIN literal");
    assert_status(&fresh.until(&n), "OK", None, "LOGIN literal");
    // non-synchronizing (RFC 7888 §4): the server closes rather than read 4 GB; it does so
    // while the client has sent nothing after the announcement
    for (login, cmd) in [
        (true, "APPEND INBOX {4294967295+}"),
        (false, "LOGIN alice {4294967295+}"),
        (true, "SEARCH SUBJECT {4000000000+}"),
    ] {
        let mut c = if login { d.login("alice") } else { d.connect() };
        let t = c.tag();
        c.send(format!("{t} {cmd}\r\n"));
        let mut seen = Vec::new();
        loop {
            let r = c.read();
            seen.push(r.text());
            if r.text().starts_with("* BYE") {
                break;
            }
            assert!(r.text().contains(" BAD [TOOBIG]"), "{cmd}: {seen:?}");
        }
        assert!(c.closed_within(PATIENCE), "{cmd}: left open: {seen:?}");
        eprintln!("{cmd}: {seen:?}");
    }
    // no message file was begun for any of them
    assert_eq!(d.count("alice", "tmp"), 0);
    assert_eq!(d.count("alice", "new") + d.count("alice", "cur"), 0);
    bystander.ok("SELECT INBOX");
    c.ok("NOOP");
    mem.finish();
}

/// `n` comma-separated numbers `1,2,...`.
fn numbers(n: usize) -> String {
    let mut s = String::with_capacity(n * 8);
    for i in 1..=n {
        if i > 1 {
            s.push(',');
        }
        s.push_str(&i.to_string());
    }
    s
}

#[test]
fn commands_with_a_million_items_are_refused() {
    let _serial = serial();
    let d = Server::with_imap_keys("");
    let mut bystander = d.login("bob");
    bystander.ok("SELECT INBOX");
    let mut c = d.login("alice");
    c.ok("APPEND INBOX {9+}\r\nSubject: ");
    c.ok("SELECT INBOX");
    // whole lines built before measuring and sent as they are: the client's buffers
    // are not the server's
    let million_seq = format!("M1 FETCH {} FLAGS\r\n", numbers(1_000_000));
    let million_items = format!("M2 FETCH 1 ({}FLAGS)\r\n", "FLAGS ".repeat(999_999));
    let million_uid_search = format!("M3 UID SEARCH UID {}1\r\n", "1,".repeat(999_999));
    let many_seq = format!("M4 FETCH {}1 FLAGS\r\n", "1,".repeat(19_999)); // 40 KB
    let many_flags = format!("M5 STORE 1 +FLAGS ({}a)\r\n", "a ".repeat(19_999));
    let many_literals = {
        let mut s = String::from("M6 SEARCH");
        for _ in 0..2_000 {
            s.push_str(" SUBJECT {1+}\r\nx");
        }
        s.push_str("\r\n");
        s
    };
    let mem = Mem::start("commands with a million items");
    for (what, cmd, code) in [
        (
            "1,000,000 sequence numbers (6.9 MB)",
            &million_seq,
            "TOOBIG",
        ),
        ("1,000,000 FETCH items (6 MB)", &million_items, "TOOBIG"),
        (
            "1,000,000 UIDs in SEARCH (2 MB)",
            &million_uid_search,
            "TOOBIG",
        ),
        ("20,000 sequence numbers in one line", &many_seq, "LIMIT"),
        ("20,000 flags in one line", &many_flags, "LIMIT"),
    ] {
        c.send(cmd.as_bytes());
        let r = c.until(&cmd[..2]);
        assert_status(&r, "BAD", Some(code), what);
        eprintln!("{what}: {}", r.done.text().trim_end());
        assert!(alive_or_bye(&mut c, what), "{what}: the session ended");
        bystander.ok("NOOP");
    }
    // 2,000 non-synchronizing literals: refused at the 1,001st; what follows is skipped
    // or refused line by line, and a NOOP after it all is answered
    c.send(many_literals.as_bytes());
    let first = c.read();
    assert!(
        first.text().starts_with("M6 BAD [LIMIT]"),
        "{}",
        first.text()
    );
    let n = c.tag();
    c.send(format!("{n} NOOP\r\n"));
    let rest = c.read_until(PATIENCE, |r| r.tag().as_deref() == Some(n.as_str()));
    let last = rest.last().expect("an answer to the NOOP");
    assert!(last.text().starts_with(&format!("{n} OK")), "{rest:?}");
    assert!(
        rest[..rest.len() - 1]
            .iter()
            .all(|r| r.text().contains(" BAD ")),
        "only BADs for the rest: {rest:?}"
    );
    eprintln!(
        "2,000 literals: {} then {} more BAD",
        first.text().trim_end(),
        rest.len() - 1
    );
    bystander.ok("NOOP");
    c.ok("FETCH 1 FLAGS");
    mem.finish();
}

#[test]
fn deeply_nested_parentheses_are_refused_without_recursion() {
    let _serial = serial();
    let d = Server::with_imap_keys("");
    let mut bystander = d.login("bob");
    let mut c = d.login("alice");
    c.ok("APPEND INBOX {9+}\r\nSubject: ");
    c.ok("SELECT INBOX");
    let nest = |n: usize, inner: &str| format!("{}{inner}{}", "(".repeat(n), ")".repeat(n));
    let over_line = format!("SEARCH {}", nest(100_000, "ALL"));
    let in_line = format!("SEARCH {}", nest(30_000, "ALL"));
    let unclosed = format!("SEARCH {}", "(".repeat(60_000));
    let nots = format!("SEARCH {}ALL", "NOT ".repeat(15_000));
    let ors = format!(
        "SEARCH {}{}",
        "OR ".repeat(5_000),
        "ALL ".repeat(5_001).trim_end()
    );
    let fetch = format!("FETCH 1 {}", nest(30_000, "FLAGS"));
    let store = format!("STORE 1 FLAGS {}", nest(30_000, "a"));
    // 102,000 levels, more than a line may hold: six lines of 34,000 "(" or ")" joined
    // by LITERAL+ strings, within the 256 KiB command limit, reach the parser whole
    let across = {
        let mut s = String::from("SEARCH");
        for _ in 0..3 {
            s.push(' ');
            s.push_str(&"(".repeat(34_000));
            s.push_str("SUBJECT {1+}\r\nx");
        }
        for i in 0..3 {
            s.push_str(&")".repeat(34_000));
            if i < 2 {
                s.push_str(" SUBJECT {1+}\r\nx");
            }
        }
        s
    };
    let mem = Mem::start("deeply nested parentheses");
    for (what, cmd, code) in [
        (
            "SEARCH, 100,000 levels in one line",
            &over_line,
            Some("TOOBIG"),
        ),
        ("SEARCH, 30,000 levels", &in_line, Some("LIMIT")),
        ("SEARCH, 60,000 unclosed", &unclosed, Some("LIMIT")),
        ("SEARCH, 15,000 NOT", &nots, Some("LIMIT")),
        ("SEARCH, 5,000 OR", &ors, Some("LIMIT")),
        ("FETCH, 30,000 levels", &fetch, None),
        ("STORE, 30,000 levels", &store, None),
        ("SEARCH, 102,000 levels over 3 lines", &across, None),
    ] {
        let r = c.cmd(cmd);
        assert_status(&r, "BAD", code, what);
        eprintln!("{what}: {}", r.done.text().trim_end());
        assert!(alive_or_bye(&mut c, what), "{what}: the session ended");
    }
    let r = c.ok("SEARCH ((((ALL))))");
    assert!(r.all().contains("* SEARCH 1"), "{}", r.all());
    bystander.ok("SELECT INBOX");
    mem.finish();
}

#[test]
fn login_brute_force_is_slowed_for_its_address_only() {
    let _serial = serial();
    let d = Server::with_imap_keys("");
    let mem = Mem::start("login brute force");
    let mut attacker = d.connect_from(ATTACKER);
    // each failure makes the next answer to this address wait longer: 0, 250, 500 ms
    // (lower bounds the server's own sleep imposes; never an upper bound)
    for (i, at_least) in [0u64, 250, 500].into_iter().enumerate() {
        let begun = Instant::now();
        let r = attacker.cmd(&format!("LOGIN alice wrong{i}"));
        let took = begun.elapsed();
        assert_status(&r, "NO", Some("AUTHENTICATIONFAILED"), "wrong password");
        eprintln!("failure {}: answered after {took:?}", i + 1);
        assert!(
            took >= Duration::from_millis(at_least),
            "failure {}: answered after {took:?}, the penalty is {at_least} ms",
            i + 1
        );
    }
    // three more at once from other connections of the same address (each waits 1 s)
    let more: Vec<_> = (0..3)
        .map(|i| {
            let imap = d.imap;
            std::thread::spawn(move || {
                let mut c = Client::wrap(crate::support::imap::Stream::Plain(tcp_from(
                    ATTACKER, imap,
                )));
                c.read_greeting();
                let r = c.cmd(&format!("LOGIN bob parallel{i}"));
                assert_status(&r, "NO", Some("AUTHENTICATIONFAILED"), "parallel");
            })
        })
        .collect();
    for t in more {
        t.join().unwrap();
    }
    // six failures: the next login from this address waits 8 s, even with the right
    // password (a guess that happens to be right is no faster)
    let penalty = Duration::from_secs(8);
    let t = attacker.tag();
    let begun = Instant::now();
    attacker.send(format!("{t} LOGIN alice pw\r\n"));
    // meanwhile a client from another address logs in at once, and its first command
    // answers, all before the attacker's answer
    let mut other = d.connect_from(OTHER);
    other.ok("LOGIN alice pw");
    other.ok("SELECT INBOX");
    let other_done = begun.elapsed();
    assert!(
        attacker.read_within(Duration::from_millis(1)).is_none() && other_done < penalty,
        "the other address was held up: done after {other_done:?}"
    );
    let r = attacker.until(&t);
    let attacker_done = begun.elapsed();
    assert_status(&r, "OK", None, "right password under penalty");
    eprintln!(
        "other address logged in after {other_done:?}; the attacker's right password \
         answered after {attacker_done:?} (penalty {penalty:?})"
    );
    assert!(attacker_done >= penalty - Duration::from_millis(50));
    assert!(other_done < attacker_done);
    mem.finish();
}

#[test]
fn plaintext_pipelined_after_starttls_is_never_executed() {
    let _serial = serial();
    let d = Server::with_imap_keys("plaintext_auth_on_loopback = true");
    let mem = Mem::start("plaintext pipelined after STARTTLS");
    // RFC 9051 §6.2.1, RFC 3207 §4.2 (the STARTTLS command injection class of bugs):
    // commands in the same packet as STARTTLS. Plaintext LOGIN is allowed on loopback
    // here, so the LOGIN and CREATE would have worked had they been executed.
    let mut c = d.connect();
    c.starttls(
        &d.cert,
        "X1 LOGIN alice pw\r\nX2 CREATE injected\r\nX3 LOGOUT\r\n",
    );
    let r = c.ok("CAPABILITY");
    let caps = r.lines("* CAPABILITY").join(" ");
    assert!(
        caps.contains("AUTH=PLAIN"),
        "still not authenticated: {caps}"
    );
    assert_status(&c.cmd("CREATE probe"), "BAD", None, "not logged in");
    c.ok("LOGIN alice pw");
    let r = c.ok("LIST \"\" *");
    assert!(!r.all().contains("injected"), "{}", r.all());
    assert!(!d.maildir("alice").join(".injected").exists());
    c.ok("LOGOUT");
    // plaintext sent after the OK instead of a ClientHello: the handshake fails and the
    // connection closes; the command is not run
    let mut c = d.connect();
    let t = c.tag();
    c.send(format!("{t} STARTTLS\r\n"));
    assert_status(&c.until(&t), "OK", None, "STARTTLS");
    c.send("X1 LOGIN alice pw\r\nX2 CREATE injected2\r\n");
    assert!(c.closed_within(PATIENCE), "open after a failed handshake");
    let text = String::from_utf8_lossy(c.buffered()).into_owned();
    assert!(!text.contains("X1") && !text.contains("X2"), "{text:?}");
    let mut check = d.login("alice");
    let r = check.ok("LIST \"\" *");
    assert!(!r.all().contains("injected"), "{}", r.all());
    assert!(!d.maildir("alice").join(".injected2").exists());
    mem.finish();
}

#[test]
fn tls_below_1_2_is_refused() {
    let _serial = serial();
    let d = Server::with_imap_keys("");
    let mem = Mem::start("TLS below 1.2");
    // the same hello offering TLS 1.2 is answered: the hellos are well formed
    let ok = send_hello(tcp_from(ATTACKER, d.imaps.unwrap()), &client_hello(0x0303));
    assert_eq!(ok, HelloAnswer::ServerHello(0x0303), "TLS 1.2 control");
    for (name, v) in [
        ("SSL 3.0", 0x0300),
        ("TLS 1.0", 0x0301),
        ("TLS 1.1", 0x0302),
    ] {
        // IMAPS
        let got = send_hello(tcp_from(ATTACKER, d.imaps.unwrap()), &client_hello(v));
        eprintln!("IMAPS {name}: {got:?}");
        // an alert protocol_version (70), fatal (2)
        assert_eq!(got, HelloAnswer::Alert(2, 70), "IMAPS {name}");
        // STARTTLS
        let mut c = d.connect();
        let t = c.tag();
        c.send(format!("{t} STARTTLS\r\n"));
        assert_status(&c.until(&t), "OK", None, "STARTTLS");
        let crate::support::imap::Stream::Plain(tcp) =
            std::mem::replace(&mut c.stream, crate::support::imap::Stream::Gone)
        else {
            unreachable!()
        };
        let got = send_hello(tcp, &client_hello(v));
        eprintln!("STARTTLS {name}: {got:?}");
        assert_eq!(got, HelloAnswer::Alert(2, 70), "STARTTLS {name}");
    }
    d.connect().ok("NOOP");
    mem.finish();
    // and with a real TLS 1.1 client, when there is one
    if !openssl_can_offer_tls_1_1() {
        eprintln!(
            "SKIPPED openssl s_client -tls1_1: no openssl, or it cannot send a TLS 1.1 \
             hello here; the hand-made hellos above stand"
        );
        return;
    }
    let port = d.imaps.unwrap().port().to_string();
    let (ok12, out12) = s_client(&["-connect", &format!("127.0.0.1:{port}"), "-tls1_2"]);
    assert!(
        ok12 && out12.contains("TLSv1.2"),
        "s_client -tls1_2: {out12}"
    );
    for args in [
        vec!["-connect".to_string(), format!("127.0.0.1:{port}")],
        vec![
            "-connect".to_string(),
            d.imap.to_string(),
            "-starttls".into(),
            "imap".into(),
        ],
    ] {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend(["-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"]);
        let (ok, out) = s_client(&all);
        eprintln!("openssl s_client {}: handshake ok = {ok}", all.join(" "));
        assert!(!ok, "TLS 1.1 accepted: {out}");
        if out.contains("no protocols available") {
            // the local OpenSSL policy would not send the hello: nothing was tested
            eprintln!("SKIPPED: the local OpenSSL refuses to offer TLS 1.1: {out}");
            continue;
        }
        // the server answered the hello with a fatal alert (rustls sends
        // handshake_failure, 40, to OpenSSL's hello) and nothing was negotiated
        let alert = out.lines().find(|l| l.contains("SSL alert number"));
        eprintln!("  {}", alert.unwrap_or("no alert line"));
        assert!(alert.is_some() && out.contains("Cipher is (NONE)"), "{out}");
    }
}

/// Whether `openssl s_client -tls1_1` exists and may send a TLS 1.1 hello here.
fn openssl_can_offer_tls_1_1() -> bool {
    std::process::Command::new("openssl")
        .args(["s_client", "-help"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stderr).contains("-tls1_1"))
        .unwrap_or(false)
}

/// Runs `openssl s_client` with stdin closed, bounded by `timeout`; returns whether it
/// exited 0 and its stdout and stderr.
fn s_client(args: &[&str]) -> (bool, String) {
    let secs = PATIENCE.as_secs().to_string();
    let out = std::process::Command::new("timeout")
        .arg(&secs)
        .args(["openssl", "s_client", "-servername", "localhost"])
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run openssl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn authenticate_with_garbage_is_refused_and_the_session_goes_on() {
    let _serial = serial();
    let d = Server::with_imap_keys("");
    // alice's store is opened once before measuring (a first login's one-time cost)
    d.login("alice").ok("LOGOUT");
    let mut c = d.connect();
    let junk_60k: String = (0..60_000u32)
        .map(|i| char::from(b"!@#$%^&*()=_-?><,.:;"[(i % 20) as usize]))
        .collect();
    let mem = Mem::start("AUTHENTICATE PLAIN with garbage");
    let bad_ir: Vec<(&str, String)> = vec![
        ("not base64", "!!!not-base64!!!".into()),
        ("60 KB of punctuation", junk_60k.clone()),
        ("padding in the middle", "YW=Jj".into()),
        ("no NUL inside", b64(b"alicepw")),
        ("one NUL only", b64(b"alice\0pw")),
        ("not UTF-8 user", b64(b"\0\xff\xfe\0pw")),
        // (a known user)
        ("2,000 NULs after the user", {
            let mut v = b"\0alice\0".to_vec();
            v.extend_from_slice(&[0u8; 2_000]);
            b64(&v)
        }),
    ];
    for (what, ir) in &bad_ir {
        let r = c.cmd(&format!("AUTHENTICATE PLAIN {ir}"));
        assert!(
            matches!(r.status().as_str(), "BAD" | "NO"),
            "{what}: {}",
            r.all()
        );
        eprintln!("initial response, {what}: {}", r.done.text().trim_end());
        c.ok("NOOP");
    }
    // the same garbage as the answer to the continuation
    for (what, line) in bad_ir
        .iter()
        .map(|(w, l)| (*w, l.as_bytes().to_vec()))
        .chain([("binary octets", b"\xff\xfe\x01\x80".to_vec())])
    {
        let t = c.tag();
        c.send(format!("{t} AUTHENTICATE PLAIN\r\n"));
        assert!(c.read().is_continuation(), "{what}");
        let mut bytes = line;
        bytes.extend_from_slice(b"\r\n");
        c.send(&bytes);
        let r = c.until(&t);
        assert!(
            matches!(r.status().as_str(), "BAD" | "NO"),
            "{what}: {}",
            r.all()
        );
        c.ok("NOOP");
    }
    // 500 in a row cost nothing lasting, and the right credentials still work
    for _ in 0..500 {
        let r = c.cmd("AUTHENTICATE PLAIN %%%");
        assert_eq!(r.status(), "BAD", "{}", r.all());
    }
    c.ok(&format!("AUTHENTICATE PLAIN {}", b64(b"\0alice\0pw")));
    c.ok("SELECT INBOX");
    // a continuation answer longer than a line: the server ends the session
    let mut long = d.connect();
    let t = long.tag();
    long.send(format!("{t} AUTHENTICATE PLAIN\r\n"));
    assert!(long.read().is_continuation());
    long.send("A".repeat(200_000) + "\r\n");
    let r = long.read();
    assert!(r.text().starts_with("* BYE"), "{}", r.text());
    assert!(long.closed_within(PATIENCE));
    d.connect().ok("NOOP");
    mem.finish();
}

/// Issue 15 #23: SHA-crypt's cost grows with the password's length (a 65,000-byte
/// password cost 10.7 s of CPU), and every login shares the hashing slots. Six such
/// LOGINs from one address, and then twelve of 1,000 bytes (under the cap, so hashed)
/// at once, while a client from another address logs in: the long ones are refused
/// without hashing, with the answer a wrong password gets, one address holds at most
/// its share of the hashing slots, and the other client's login is answered meanwhile.
#[test]
fn long_passwords_and_one_address_cannot_take_every_hashing_slot() {
    let _serial = serial();
    // carol's password is "pw", hashed by `doveadm pw -s SHA512-CRYPT`
    let users = format!(
        "{USERS}carol:{{SHA512-CRYPT}}$6$5yhPmwwpgiyghTho$vYXP2lcmkiDKxTKmEwWM.eBHL2AYqXeuhG.\
         KC7z/Y/3OGr5yTj9MaZFrj2G1W9R7dm8zXO.KA6QO7RgtvBtPF0\n",
        USERS = crate::support::daemon::USERS
    );
    let d = Server::start_with(Opts {
        users,
        ..Opts::default()
    });
    d.login("alice").ok("LOGOUT");
    // a fresh attacking address per round: the first round's failures would otherwise
    // hold the second's logins in the penalty delay, before any hashing
    for (len, count, from) in [
        (65_000usize, 6usize, ATTACKER),
        (1_000, 12, Ipv4Addr::new(127, 0, 0, 3)),
    ] {
        let password = "p".repeat(len);
        let mem = Mem::start(if len > 1024 {
            "6 LOGINs with 65,000-byte passwords"
        } else {
            "12 LOGINs with 1,000-byte passwords at once"
        });
        let (sent_tx, sent) = std::sync::mpsc::channel();
        let attackers: Vec<_> = (0..count)
            .map(|_| {
                let imap = d.imap;
                let password = password.clone();
                let sent_tx = sent_tx.clone();
                std::thread::spawn(move || {
                    let mut c =
                        Client::wrap(crate::support::imap::Stream::Plain(tcp_from(from, imap)));
                    c.read_greeting();
                    let t = c.tag();
                    c.send(format!("{t} LOGIN carol {{{len}+}}\r\n{password}\r\n"));
                    sent_tx.send(()).unwrap();
                    let r = c.until(&t);
                    assert_status(&r, "NO", Some("AUTHENTICATIONFAILED"), "long password");
                    r.done.text()
                })
            })
            .collect();
        // every attacking LOGIN is on the wire before the other client starts
        for _ in 0..count {
            sent.recv_timeout(PATIENCE).unwrap();
        }
        let begun = Instant::now();
        let mut other = d.connect_from(OTHER);
        other.ok("LOGIN carol pw");
        let other_done = begun.elapsed();
        let answers: Vec<String> = attackers.into_iter().map(|t| t.join().unwrap()).collect();
        let attack_done = begun.elapsed();
        eprintln!(
            "{count} logins with {len}-byte passwords: another address logged in after \
             {other_done:?}; the attack was answered after {attack_done:?}"
        );
        assert!(
            answers
                .iter()
                .all(|a| a.ends_with(" NO [AUTHENTICATIONFAILED] Authentication failed.\r\n")),
            "{answers:?}"
        );
        // bounded, far from the 31.7 s the issue measured (never a statement of speed:
        // the bound is ten times what this takes on a loaded two-core machine)
        assert!(other_done < Duration::from_secs(10), "{other_done:?}");
        mem.finish();
    }
}
