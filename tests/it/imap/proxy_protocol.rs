//! Listeners behind a TCP proxy (issue 15 #35): `proxy_listen`, `proxy_listen_tls` and
//! `[lmtp] proxy_listen` expect a PROXY protocol header (v1 text, v2 binary) from
//! `proxy_trusted_networks`, and the client it names is the client everywhere: the
//! loopback check of plaintext login, the per-address connection limit, the LMTP
//! `Received:` header. Real daemon, real sockets; the "proxy" is the test writing the
//! header itself, as haproxy `send-proxy`/`send-proxy-v2` would.

#[allow(dead_code)]
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};

use crate::support::daemon::{Opts, Server};
use crate::support::hostile::tcp_from;
use crate::support::imap::{simple, try_tls_client, Client, Stream, PATIENCE};
use crate::support::lmtp::deliver_over;
use crate::support::process::free_port;

/// The daemon with `key = ["127.0.0.1:PORT"]` and `extra` in `[imap]`; the port.
fn behind_proxy(key: &str, extra: &str) -> (Server, u16) {
    let port = free_port();
    let d = Server::with_imap_keys(&format!("{key} = [\"127.0.0.1:{port}\"]\n{extra}"));
    (d, port)
}

fn at(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A v1 header for a TCP client `client` of the proxy.
fn v1(client: SocketAddr, server_port: u16) -> Vec<u8> {
    let proto = if client.is_ipv4() { "TCP4" } else { "TCP6" };
    let server = if client.is_ipv4() { "127.0.0.1" } else { "::1" };
    format!(
        "PROXY {proto} {} {server} {} {server_port}\r\n",
        client.ip(),
        client.port()
    )
    .into_bytes()
}

/// A v2 `PROXY` header (command 1, TCP over IPv4 or IPv6) for `client`.
fn v2(client: SocketAddr) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n\x21".to_vec();
    let mut body = Vec::new();
    match client {
        SocketAddr::V4(a) => {
            h.push(0x11);
            body.extend(a.ip().octets());
            body.extend(Ipv4Addr::LOCALHOST.octets());
        }
        SocketAddr::V6(a) => {
            h.push(0x21);
            body.extend(a.ip().octets());
            body.extend(std::net::Ipv6Addr::LOCALHOST.octets());
        }
    }
    body.extend(client.port().to_be_bytes());
    body.extend(143u16.to_be_bytes());
    h.extend((body.len() as u16).to_be_bytes());
    h.extend(body);
    h
}

/// Connects to `port` from 127.0.0.1, writes `first` (a header and maybe more) at once.
fn proxied(port: u16, first: &[u8]) -> TcpStream {
    let mut tcp = TcpStream::connect(at(port)).unwrap();
    tcp.write_all(first).unwrap();
    tcp
}

/// A plain IMAP session through the "proxy", greeting read.
fn imap_via(port: u16, first: &[u8]) -> Client {
    let mut c = Client::wrap(Stream::Plain(proxied(port, first)));
    c.read_greeting();
    c
}

/// The connection is closed without a byte written.
fn assert_refused(mut c: Client, what: &str) {
    assert!(c.closed_within(PATIENCE), "{what}: still open");
    assert!(c.buffered().is_empty(), "{what}: wrote {:?}", c.buffered());
}

fn logindisabled(greeting: &str) -> bool {
    greeting.contains("LOGINDISABLED") && !greeting.contains("AUTH=PLAIN")
}

#[test]
fn the_client_of_a_v1_or_v2_header_is_the_session_peer() {
    let (_d, port) = behind_proxy("proxy_listen", "");
    // from 127.0.0.1 every proxied client used to be loopback: plaintext login allowed
    for (label, header) in [
        ("v1", v1("192.0.2.7:5555".parse().unwrap(), port)),
        ("v2", v2("192.0.2.7:5555".parse().unwrap())),
        ("v1 IPv6", v1("[2001:db8::7]:5555".parse().unwrap(), port)),
        ("v2 IPv6", v2("[2001:db8::7]:5555".parse().unwrap())),
    ] {
        let mut c = imap_via(port, &header);
        assert!(logindisabled(&c.greeting), "{label}: {}", c.greeting);
        let r = c.cmd("LOGIN alice pw");
        assert!(r.status().starts_with("NO"), "{label}: {}", r.all());
    }
    // a loopback client behind the proxy keeps its loopback rights
    let mut c = imap_via(port, &v2("127.0.0.9:5555".parse().unwrap()));
    assert!(!logindisabled(&c.greeting), "{}", c.greeting);
    c.ok("LOGIN alice pw");
    // a v2 LOCAL header (the proxy's health check) is the proxy's own connection
    let mut local = b"\r\n\r\n\0\r\nQUIT\n\x20\x00\x00\x00".to_vec();
    local.extend(b"h NOOP\r\n");
    let mut c = imap_via(port, &local);
    assert!(!logindisabled(&c.greeting), "{}", c.greeting);
    let r = c.until("h");
    assert!(r.status().starts_with("OK"), "{}", r.all());
}

#[test]
fn commands_pipelined_after_the_header_are_read_as_imap() {
    let (d, port) = behind_proxy("proxy_listen", "");
    for header in [
        v1("127.0.0.3:1000".parse().unwrap(), port),
        v2("127.0.0.3:1000".parse().unwrap()),
    ] {
        let first = [header, b"a LOGIN alice pw\r\nb NOOP\r\n".to_vec()].concat();
        let mut c = imap_via(port, &first);
        assert!(c.until("a").status().starts_with("OK"));
        assert!(c.until("b").status().starts_with("OK"));
    }
    drop(d);
}

#[test]
fn connection_limits_count_the_client_of_the_header() {
    let (d, port) = behind_proxy("proxy_listen", "max_connections_per_ip = 1");
    let first = imap_via(port, &v2("192.0.2.7:1".parse().unwrap()));
    assert!(first.greeting.starts_with("* OK"), "{}", first.greeting);
    // another client through the same proxy is not the first one's address
    let other = imap_via(port, &v2("192.0.2.8:1".parse().unwrap()));
    assert!(other.greeting.starts_with("* OK"), "{}", other.greeting);
    // nor is the proxy's own address, on the ordinary listener
    let direct = d.connect();
    assert!(direct.greeting.starts_with("* OK"), "{}", direct.greeting);
    // a second connection of the first client is over its limit
    let again = imap_via(port, &v1("192.0.2.7:2".parse().unwrap(), port));
    assert!(
        again.greeting.starts_with("* BYE [UNAVAILABLE]"),
        "{}",
        again.greeting
    );
}

#[test]
fn an_untrusted_source_a_bad_header_and_a_slow_one_are_closed() {
    let (d, port) = behind_proxy(
        "proxy_listen",
        "proxy_trusted_networks = [\"127.0.0.1/32\"]",
    );
    // 127.0.0.2 is not a trusted proxy, even with a good header
    let mut tcp = tcp_from(Ipv4Addr::new(127, 0, 0, 2), at(port));
    tcp.write_all(&v1("192.0.2.7:1".parse().unwrap(), port))
        .unwrap();
    assert_refused(Client::wrap(Stream::Plain(tcp)), "untrusted");
    for (what, first) in [
        ("no header", b"a LOGIN alice pw\r\n".to_vec()),
        ("bad v1", b"PROXY TCP4 192.0.2.7 nowhere 1 2\r\n".to_vec()),
        ("bad v2", b"\r\n\r\n\0\r\nQUIT\n\x31\x11\x00\x00".to_vec()),
        // an unfinished header: closed at the header deadline, not the login timeout
        ("slow", b"PROXY TCP4 192.0".to_vec()),
        ("silent", Vec::new()),
    ] {
        assert_refused(Client::wrap(Stream::Plain(proxied(port, &first))), what);
    }
    // the ordinary listener never reads a header: the line is a (bad) IMAP command
    let mut c = d.connect();
    c.send(v1("192.0.2.7:1".parse().unwrap(), port));
    let r = c.read();
    assert!(r.text().starts_with("PROXY BAD"), "{}", r.text());
}

#[test]
fn imaps_behind_a_proxy_reads_the_header_before_the_handshake() {
    let (d, port) = behind_proxy("proxy_listen_tls", "max_connections_per_ip = 1");
    let tls_via = |client: &str| {
        let tcp = proxied(port, &v2(client.parse().unwrap()));
        let tls = try_tls_client(&d.cert, tcp).expect("handshake after the header");
        let mut c = Client::wrap(Stream::Tls(Box::new(tls)));
        c.read_greeting();
        c
    };
    let mut c = tls_via("[2001:db8::5]:7000");
    c.ok("LOGIN alice pw");
    // the limit of one connection is the header's client's, not the proxy's
    let other = tls_via("[2001:db8:1::5]:7000");
    assert!(other.greeting.starts_with("* OK"), "{}", other.greeting);
    drop(d);
}

#[test]
fn lmtp_behind_a_proxy_names_the_real_client_in_received() {
    let port = free_port();
    let d = Server::start_with(Opts {
        lmtp_extra: format!("proxy_listen = [\"127.0.0.1:{port}\"]"),
        ..Opts::default()
    });
    let tcp = proxied(port, &v1("203.0.113.9:40000".parse().unwrap(), port));
    deliver_over(tcp, "alice", &simple("proxied", "hello"));
    let new = d.maildir("alice").join("new");
    let file = std::fs::read_dir(&new).unwrap().next().unwrap().unwrap();
    let text = std::fs::read_to_string(file.path()).unwrap();
    let received = text
        .lines()
        .find(|l| l.starts_with("Received:"))
        .unwrap_or_default();
    assert!(received.contains("[203.0.113.9]"), "{text}");
    assert!(!received.contains("127.0.0.1"), "{received}");
}

#[test]
fn allow_nets_sees_the_client_of_the_header() {
    let port = free_port();
    let _d = Server::start_with(Opts {
        imap_extra: format!("proxy_listen = [\"127.0.0.1:{port}\"]"),
        users: "carol:{PLAIN}pw::::::allow_nets=127.0.0.9/32\n".into(),
        ..Opts::default()
    });
    // both connections come from the proxy at 127.0.0.1; only the header differs
    let mut c = imap_via(port, &v1("127.0.0.9:1".parse().unwrap(), port));
    c.ok("LOGIN carol pw");
    let mut c = imap_via(port, &v2("127.0.0.8:1".parse().unwrap()));
    let r = c.cmd("LOGIN carol pw");
    assert!(r.status().starts_with("NO"), "{}", r.all());
}

#[test]
fn login_penalties_are_the_header_clients_not_the_proxys() {
    let (_d, port) = behind_proxy("proxy_listen", "");
    let mut attacker = imap_via(port, &v2("127.0.0.21:1".parse().unwrap()));
    // five failures: 0, 250, 500, 1000, 2000 ms of penalty; the next one waits 4 s
    for i in 0..5 {
        let r = attacker.cmd(&format!("LOGIN alice wrong{i}"));
        assert!(r.status().starts_with("NO"), "{}", r.all());
    }
    let penalty = std::time::Duration::from_secs(4);
    let t = attacker.tag();
    let begun = std::time::Instant::now();
    attacker.send(format!("{t} LOGIN alice pw\r\n"));
    // another client behind the same proxy is not held up by the attacker's penalty
    let mut other = imap_via(port, &v1("127.0.0.22:1".parse().unwrap(), port));
    other.ok("LOGIN alice pw");
    other.ok("NOOP");
    let other_done = begun.elapsed();
    assert!(
        attacker
            .read_within(std::time::Duration::from_millis(1))
            .is_none()
            && other_done < penalty,
        "the other client was held up: done after {other_done:?}"
    );
    let r = attacker.until(&t);
    assert!(r.status().starts_with("OK"), "{}", r.all());
    assert!(begun.elapsed() >= penalty - std::time::Duration::from_millis(50));
}

/// A real haproxy (`send-proxy-v2`) on 127.0.0.1:`front` in front of `back`; killed on
/// drop.
struct Haproxy(std::process::Child);

impl Haproxy {
    fn start(dir: &std::path::Path, front: u16, back: u16) -> Haproxy {
        let cfg = dir.join("haproxy.cfg");
        std::fs::write(
            &cfg,
            format!(
                "defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 30s\n  \
                 timeout server 30s\n\
                 frontend imap\n  bind 127.0.0.1:{front}\n  default_backend maildex\n\
                 backend maildex\n  server m 127.0.0.1:{back} send-proxy-v2\n"
            ),
        )
        .unwrap();
        let child = std::process::Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&cfg)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let h = Haproxy(child);
        let until = std::time::Instant::now() + PATIENCE;
        while TcpStream::connect(at(front)).is_err() {
            assert!(std::time::Instant::now() < until, "haproxy did not listen");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        h
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_real_haproxy_with_send_proxy_v2_passes_the_client_address() {
    if !crate::support::imap::have_tool("haproxy") {
        return;
    }
    let (front, back) = (free_port(), free_port());
    let d = Server::start_with(Opts {
        imap_extra: format!("proxy_listen = [\"127.0.0.1:{back}\"]"),
        users: "carol:{PLAIN}pw::::::allow_nets=127.0.0.2/32\n".into(),
        ..Opts::default()
    });
    let _haproxy = Haproxy::start(d.dir.path(), front, back);
    let via = |src: [u8; 4]| {
        let mut c = Client::wrap(Stream::Plain(tcp_from(src.into(), at(front))));
        c.read_greeting();
        c
    };
    // haproxy connects from 127.0.0.1 either way; its header names the client
    via([127, 0, 0, 2]).ok("LOGIN carol pw");
    let r = via([127, 0, 0, 1]).cmd("LOGIN carol pw");
    assert!(r.status().starts_with("NO"), "{}", r.all());
}
