//! Connection floods and senders at a byte a second against the real daemon on 127.0.0.1
//! (issue 5, part 4), with the process's peak memory around each (`MEMORY ...` lines on
//! stderr with `--nocapture`; the daemon runs in this process). The limits themselves are
//! tested one by one in tests/it/imap/limits.rs; here they are hammered: hundreds of
//! connections held, a thousand opened and dropped at once, while another address logs in
//! and works.
//!
//! Every loop has a fixed count and every wait is bounded by [`PATIENCE`]; nothing asserts
//! how fast the machine is.

// shared with tests/hostile/clients.rs and tests/hostile/sessions.rs
#[allow(dead_code)]
use std::io::Read;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::support::daemon::{Opts, Server};
use crate::support::hostile::{
    pipeline_without_reading, serial, tcp6_from, tcp_from, tcp_small_window_from, Bystander,
    LocalPrefix, Mem,
};
use crate::support::imap::{simple, Client, Stream, PATIENCE};
use crate::support::lmtp::deliver;

const ATTACKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
const OTHER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const CHURN: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);

/// The first line the server sends on `tcp` (the greeting or the refusal).
fn first_line(tcp: &mut TcpStream) -> String {
    tcp.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        match tcp.read(&mut b) {
            Ok(0) => break,
            Ok(_) => line.push(b[0]),
            Err(e) => panic!(
                "no first line: {e} after {:?}",
                String::from_utf8_lossy(&line)
            ),
        }
    }
    String::from_utf8_lossy(&line).into_owned()
}

/// Opens `n` connections from `src` and keeps those that are greeted; returns them and
/// the refusals' texts.
fn flood(src: Ipv4Addr, dst: SocketAddr, n: usize) -> (Vec<TcpStream>, Vec<String>) {
    flood_by(n, |_| tcp_from(src, dst))
}

/// [`flood`] with the `i`th connection made by `connect(i)`.
fn flood_by(
    n: usize,
    mut connect: impl FnMut(usize) -> TcpStream,
) -> (Vec<TcpStream>, Vec<String>) {
    let (mut held, mut refused) = (Vec::new(), Vec::new());
    for i in 0..n {
        let mut tcp = connect(i);
        let line = first_line(&mut tcp);
        if line.starts_with("* OK ") {
            held.push(tcp);
        } else {
            assert!(line.starts_with("* BYE [UNAVAILABLE] "), "{line:?}");
            refused.push(line);
        }
    }
    (held, refused)
}

/// A session from `src` once a slot is free (a closed connection's slot comes back when
/// its task ends, a moment after the close); bounded by [`PATIENCE`].
fn served_from(src: Ipv4Addr, dst: SocketAddr) -> Client {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut tcp = tcp_from(src, dst);
        let line = first_line(&mut tcp);
        if line.starts_with("* OK ") {
            let mut c = Client::wrap(Stream::Plain(tcp));
            c.greeting = line;
            return c;
        }
        assert!(Instant::now() < deadline, "never served: {line:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Another client logs in and works.
fn bystander_works(d: &Server, src: Ipv4Addr) {
    let mut c = served_from(src, d.imap);
    c.ok("LOGIN bob pw");
    c.ok("SELECT INBOX");
    c.ok("APPEND INBOX {9+}\r\nSubject: ");
    c.ok("FETCH 1:* (FLAGS RFC822.SIZE)");
    c.ok("LOGOUT");
}

#[test]
fn a_flood_from_one_address_stops_at_its_limit_and_others_are_served() {
    let _serial = serial();
    let d = Server::with_imap_keys("max_connections = 1000\nmax_connections_per_ip = 50");
    let mem = Mem::start("flood: 500 connections from one address, 1,000 opened and dropped");
    let (held, refused) = flood(ATTACKER, d.imap, 500);
    assert_eq!(held.len(), 50, "the per-address limit");
    assert_eq!(refused.len(), 450);
    assert!(
        refused.iter().all(|r| r.contains("from your address")),
        "{}",
        refused[0]
    );
    bystander_works(&d, OTHER);
    // a thousand connections from a third address, each dropped at once: every slot they
    // took comes back
    for _ in 0..1000 {
        drop(tcp_from(CHURN, d.imap));
    }
    bystander_works(&d, OTHER);
    let mut churner = served_from(CHURN, d.imap);
    churner.ok("LOGIN alice pw");
    // the held connections are sessions: they answer
    let mut first = Client::wrap(Stream::Plain(held[0].try_clone().unwrap()));
    first.ok("NOOP");
    drop(first);
    drop(held);
    let mut back = served_from(ATTACKER, d.imap);
    back.ok("LOGIN alice pw");
    let grew = mem.finish();
    eprintln!("per held connection: {:.1} KiB", grew as f64 / 50.0);
}

#[test]
fn a_flood_from_many_addresses_stops_at_the_global_limit_and_service_returns() {
    let _serial = serial();
    let d = Server::with_imap_keys("max_connections = 200\nmax_connections_per_ip = 50");
    let mem = Mem::start("flood: 250 connections from 5 addresses, global limit 200");
    let (mut held, mut refused) = (Vec::new(), Vec::new());
    for a in 1..=5u8 {
        let (h, r) = flood(Ipv4Addr::new(127, 0, 1, a), d.imap, 50);
        held.extend(h);
        refused.extend(r);
    }
    assert_eq!(held.len(), 200, "the global limit");
    assert_eq!(refused.len(), 50);
    assert!(
        refused.iter().all(|r| r.contains("Too many connections")),
        "{}",
        refused[0]
    );
    // the limit is global: a new address is refused as well while it is full
    let (none, also) = flood(OTHER, d.imap, 1);
    assert!(none.is_empty() && also.len() == 1);
    // the held connections are still sessions
    for tcp in held.iter().step_by(40) {
        let mut c = Client::wrap(Stream::Plain(tcp.try_clone().unwrap()));
        c.ok("NOOP");
    }
    // ten leave: others are served again
    held.truncate(190);
    bystander_works(&d, OTHER);
    let mut c = served_from(OTHER, d.imap);
    c.ok("LOGIN alice pw");
    drop(held);
    let grew = mem.finish();
    eprintln!("per held connection: {:.1} KiB", grew as f64 / 200.0);
}

#[test]
fn senders_at_a_byte_a_second_are_served_and_others_are_not_held_up() {
    let _serial = serial();
    let d = Server::with_imap_keys("");
    let mem = Mem::start("50 clients sending LOGIN at a byte a second");
    let line: &[u8] = b"S1 LOGIN alice pw\r\n";
    let mut slow: Vec<Client> = (0..50).map(|_| d.connect()).collect();
    // one byte per client per second: the line takes 19 s
    for (i, &b) in line.iter().enumerate() {
        let second = Instant::now() + Duration::from_secs(1);
        for c in &mut slow {
            c.send([b]);
        }
        if i == 5 || i == 12 {
            // half a command on every slow connection; another client is served meanwhile
            bystander_works(&d, OTHER);
            for c in &mut slow {
                assert!(c.read_within(Duration::from_millis(1)).is_none());
            }
        }
        if let Some(left) = second.checked_duration_since(Instant::now()) {
            std::thread::sleep(left);
        }
    }
    for c in &mut slow {
        let r = c.until("S1");
        assert_eq!(r.status(), "OK", "{}", r.all());
        c.ok("SELECT INBOX");
    }
    drop(slow);
    mem.finish();
}

#[test]
fn a_flood_from_one_ipv6_64_stops_at_the_per_address_limit() {
    let _serial = serial();
    // one host's /64 (every address in it routed to lo) and a neighbour's
    let (Some(_a), Some(_b)) = (
        LocalPrefix::add("2001:db8:64:1::/64"),
        LocalPrefix::add("2001:db8:64:2::/64"),
    ) else {
        return;
    };
    let d = Server::with_imap_keys("listen = [\"[::1]:0\"]\nmax_connections_per_ip = 5");
    let bystander = Bystander::start("40 connections from one /64", d.imap, "bob");
    let mem = Mem::start("flood: 40 connections from 40 addresses of one IPv6 /64, limit 5");
    let (held, refused) = flood_by(40, |i| {
        let src = Ipv6Addr::new(0x2001, 0xdb8, 0x64, 1, 0, 0, 0, i as u16 + 1);
        tcp6_from(src, d.imap)
    });
    assert_eq!(held.len(), 5, "the /64 counts as one address");
    assert_eq!(refused.len(), 35);
    assert!(
        refused.iter().all(|r| r.contains("from your address")),
        "{}",
        refused[0]
    );
    // the neighbouring /64 is another address
    let mut tcp = tcp6_from(Ipv6Addr::new(0x2001, 0xdb8, 0x64, 2, 0, 0, 0, 1), d.imap);
    let line = first_line(&mut tcp);
    assert!(line.starts_with("* OK "), "{line:?}");
    let mut c = Client::wrap(Stream::Plain(tcp));
    c.greeting = line;
    // not loopback: no plaintext login, but a session
    c.ok("CAPABILITY");
    drop(held);
    mem.finish();
    bystander.finish();
}

#[test]
fn clients_that_never_read_before_login_lose_their_slots_at_the_login_timeout() {
    let _serial = serial();
    // 10 slots for the attackers, one for the bystander
    let d = Server::with_imap_keys("max_connections = 11\nlogin_timeout = 6");
    let bystander = Bystander::start("10 clients pipelining CAPABILITY", d.imap, "bob");
    let mem = Mem::start("10 clients pipelining CAPABILITY before login, never reading");
    let begun = Instant::now();
    let stuck: Vec<TcpStream> = (0..10)
        .map(|_| tcp_small_window_from(ATTACKER, d.imap))
        .collect();
    // 800 kB of CAPABILITY asks for 6 MB of answers: more than the socket buffers hold,
    // so the server's writes to these clients wait for ever
    let sent: usize = stuck
        .iter()
        .map(|t| pipeline_without_reading(t, b"C CAPABILITY\r\n", 800_000))
        .sum();
    // every slot comes back by the login timeout: ten new clients are served
    let served: Vec<Client> = (0..10).map(|_| served_from(OTHER, d.imap)).collect();
    eprintln!(
        "{sent} bytes of CAPABILITY sent; 10 new clients served {:.1} s after the attack began",
        begun.elapsed().as_secs_f64()
    );
    drop((stuck, served));
    mem.finish();
    bystander.finish();
}

#[test]
fn clients_that_never_read_are_cut_off_at_the_write_timeout() {
    let _serial = serial();
    // three IMAP slots: the bystander, the FETCH that is never read, one more
    let d = Server::start_with(Opts {
        imap_extra: "max_connections = 3\nwrite_timeout = 1".into(),
        lmtp_extra: "max_connections = 5\nwrite_timeout = 1".into(),
        ..Opts::default()
    });
    let mut c = d.login("alice");
    let body = "x".repeat(200_000);
    c.ok(&format!("APPEND INBOX {{{}+}}\r\n{body}", body.len()));
    drop(c);
    let bystander = Bystander::start("a FETCH and 5 LMTP sessions never read", d.imap, "bob");
    let mem = Mem::start("a FETCH of 200 kB and LMTP NOOPs pipelined, never read");
    let reader = tcp_small_window_from(ATTACKER, d.imap);
    let mut r = Client::wrap(Stream::Plain(reader.try_clone().unwrap()));
    r.read_greeting();
    r.ok("LOGIN alice pw");
    r.ok("SELECT INBOX");
    pipeline_without_reading(&reader, b"F FETCH 1 BODY.PEEK[]\r\n", 0);
    // the third slot: a client that logs in and stays
    let mut third = d.connect();
    third.ok("LOGIN bob pw");
    // full now; the FETCH's slot comes back at its write timeout (not at the 30-minute
    // autologout)
    let mut next = served_from(OTHER, d.imap);
    next.ok("LOGIN bob pw");
    // LMTP: NOOP pipelined on each of its 5 slots; a delivery gets through once they go
    let lmtp: Vec<TcpStream> = (0..5)
        .map(|_| tcp_small_window_from(ATTACKER, d.lmtp))
        .collect();
    for t in &lmtp {
        // 2 MB of NOOP asks for 4.7 MB of replies
        pipeline_without_reading(t, b"NOOP\r\n", 2_000_000);
    }
    deliver(d.lmtp, "bob", &simple("through", "the slots came back"));
    drop((reader, lmtp));
    mem.finish();
    bystander.finish();
}
