//! IPv4 and IPv6 listeners of the real daemon (issue 15 #5): `0.0.0.0` and `[::]` on one
//! port for IMAP and LMTP together, and `[::]` alone, where an IPv4 client arrives as
//! `::ffff:127.0.0.1` and must still count as loopback. Real sockets, ports picked free;
//! without IPv6 loopback on the machine the tests say so and skip.

#[allow(dead_code)]
use std::net::{Ipv6Addr, SocketAddr, TcpListener, TcpStream};

use crate::support::daemon::{Opts, Server};
use crate::support::imap::{simple, Client};
use crate::support::lmtp::deliver;

/// Whether this machine can listen on `::1`.
fn have_ipv6_loopback() -> bool {
    match TcpListener::bind((Ipv6Addr::LOCALHOST, 0)) {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipped: no IPv6 loopback on this machine ({e})");
            false
        }
    }
}

/// A port free on both 0.0.0.0 and [::] a moment ago (the daemon binds it next).
fn free_port() -> u16 {
    loop {
        let v4 = TcpListener::bind("0.0.0.0:0").unwrap();
        let port = v4.local_addr().unwrap().port();
        let v6 = socket_v6_only(port);
        if v6.is_some() {
            return port;
        }
    }
}

/// `[::]:port` IPv6-only, if free.
fn socket_v6_only(port: u16) -> Option<TcpListener> {
    let s = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::STREAM, None).ok()?;
    s.set_only_v6(true).ok()?;
    let addr: SocketAddr = (Ipv6Addr::UNSPECIFIED, port).into();
    s.bind(&addr.into()).ok()?;
    s.listen(1).ok()?;
    Some(s.into())
}

fn imap_at(addr: SocketAddr) -> Client {
    let mut c = Client::wrap(crate::support::imap::Stream::Plain(
        TcpStream::connect(addr).unwrap(),
    ));
    c.read_greeting();
    assert!(c.greeting.starts_with("* OK"), "{addr}: {}", c.greeting);
    c
}

#[test]
fn ipv4_and_ipv6_wildcards_listen_together_for_imap_and_lmtp() {
    if !have_ipv6_loopback() {
        return;
    }
    let (imap, lmtp) = (free_port(), free_port());
    let d = Server::start_with(Opts {
        imap_extra: format!("listen = [\"0.0.0.0:{imap}\", \"[::]:{imap}\"]"),
        lmtp_extra: format!("listen = [\"0.0.0.0:{lmtp}\", \"[::]:{lmtp}\"]"),
        ..Opts::default()
    });
    for host in ["127.0.0.1", "[::1]"] {
        let lmtp_addr: SocketAddr = format!("{host}:{lmtp}").parse().unwrap();
        deliver(lmtp_addr, "alice", &simple(host, "over both"));
        let mut c = imap_at(format!("{host}:{imap}").parse().unwrap());
        // both are loopback: plaintext login allowed
        assert!(c.greeting.contains("AUTH=PLAIN"), "{host}: {}", c.greeting);
        c.ok("LOGIN alice pw");
        c.ok("LOGOUT");
    }
    let mut c = imap_at(format!("127.0.0.1:{imap}").parse().unwrap());
    c.ok("LOGIN alice pw");
    let r = c.ok("SELECT INBOX");
    assert!(r.all().contains("* 2 EXISTS"), "{}", r.all());
    drop(d);
}

#[test]
fn an_ipv4_client_of_a_dual_stack_listener_is_loopback() {
    if !have_ipv6_loopback() {
        return;
    }
    let port = free_port();
    let d = Server::with_imap_keys(&format!("listen = [\"[::]:{port}\"]"));
    // [::] alone keeps the system's dual stack: 127.0.0.1 arrives as ::ffff:127.0.0.1
    let mut c = imap_at(format!("127.0.0.1:{port}").parse().unwrap());
    assert!(
        c.greeting.contains("AUTH=PLAIN") && !c.greeting.contains("LOGINDISABLED"),
        "a mapped loopback address is loopback: {}",
        c.greeting
    );
    c.ok("LOGIN alice pw");
    let mut c6 = imap_at(format!("[::1]:{port}").parse().unwrap());
    c6.ok("LOGIN bob pw");
    drop(d);
}
