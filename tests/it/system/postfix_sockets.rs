//! Issue 20 #2: the `[postfix]` sockets spoken to raw, as postfix's `xsasl_dovecot_server.c`
//! and socketmap client speak them: the Dovecot auth handshake, PLAIN and LOGIN, wrong
//! passwords, bad base64, unknown mechanisms, CONT for an unknown id, a line over the limit,
//! more connections than allowed, penalties shared with IMAP; the socketmap's `mailbox` and
//! `alias` maps, malformed and oversized requests; and a directory that is down (`FAIL ...
//! temp`, `TEMP`) and back. The same sockets behind a real postfix: tests/it/lmtp/postfix_auth.rs.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::Ipv4Addr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine;
use maildex_config::Listen;

use crate::support::daemon::{Opts, Server};
use crate::support::imap::PATIENCE;
use crate::support::postfix::free_port;
use crate::support::sqldb::{self, Db, Kind};

const USERS: &str = "alice@example.org:{PLAIN}pw\nbob@example.org:{PLAIN}pw\n";

fn b64(s: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A daemon with both postfix sockets in its scratch folder (at most `max` connections
/// each), the users above and the alias `team@example.org`; `auth` replaces `[auth]`.
fn server(max: usize, auth: Option<String>) -> (Server, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (sasl, map) = (dir.path().join("auth.sock"), dir.path().join("map.sock"));
    let (s2, m2) = (sasl.clone(), map.clone());
    let s = Server::start_with(Opts {
        users: USERS.to_owned(),
        files: vec![(
            "aliases",
            "team@example.org: alice@example.org, bob\n".to_owned(),
        )],
        lmtp_extra: "aliases_file = \"aliases\"".to_owned(),
        auth,
        dir: Some(dir),
        tweak: Some(Box::new(move |c| {
            c.postfix.auth_socket = Some(Listen::Unix(s2));
            c.postfix.socketmap = Some(Listen::Unix(m2));
            c.postfix.max_connections = max;
        })),
        ..Opts::default()
    });
    (s, sasl, map)
}

/// A client of the SASL socket, past the handshake.
struct Sasl {
    r: BufReader<UnixStream>,
    w: UnixStream,
    /// The server's handshake lines.
    handshake: Vec<String>,
}

impl Sasl {
    fn connect(path: &Path) -> Sasl {
        let s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut c = Sasl {
            w: s.try_clone().unwrap(),
            r: BufReader::new(s),
            handshake: Vec::new(),
        };
        // as postfix: VERSION and CPID first, then read up to DONE
        c.send("VERSION\t1\t0\nCPID\t4242");
        loop {
            let l = c.line().expect("handshake");
            let done = l == "DONE";
            c.handshake.push(l);
            if done {
                break;
            }
        }
        c
    }

    fn send(&mut self, line: &str) {
        self.w.write_all(line.as_bytes()).unwrap();
        self.w.write_all(b"\n").unwrap();
    }

    /// The next line, None at EOF.
    fn line(&mut self) -> Option<String> {
        let mut l = String::new();
        match self.r.read_line(&mut l) {
            Ok(0) => None,
            Ok(_) => Some(l.trim_end_matches('\n').to_owned()),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
            Err(e) => panic!("{e}"),
        }
    }

    fn ask(&mut self, line: &str) -> String {
        self.send(line);
        self.line().expect("a reply")
    }

    /// AUTH PLAIN with an initial response from `rip`.
    fn plain(&mut self, id: u32, user: &str, pw: &str, rip: &str) -> String {
        let resp = b64(format!("\0{user}\0{pw}").as_bytes());
        self.ask(&format!(
            "AUTH\t{id}\tPLAIN\tservice=smtp\tnologin\tlip=127.0.0.1\trip={rip}\tresp={resp}"
        ))
    }
}

#[test]
fn sasl_socket_speaks_the_dovecot_auth_protocol() {
    let (_s, sasl, _) = server(100, None);
    let mut c = Sasl::connect(&sasl);
    assert_eq!(c.handshake[0], "VERSION\t1\t2");
    for l in ["MECH\tPLAIN\tplaintext", "MECH\tLOGIN\tplaintext"] {
        assert!(c.handshake.iter().any(|h| h == l), "{:?}", c.handshake);
    }
    for p in ["SPID\t", "CUID\t", "COOKIE\t"] {
        assert!(c.handshake.iter().any(|h| h.starts_with(p)), "{p}");
    }
    // PLAIN with an initial response, as postfix sends it
    assert_eq!(
        c.plain(1, "alice@example.org", "pw", "127.0.9.1"),
        "OK\t1\tuser=alice@example.org"
    );
    assert_eq!(
        c.plain(2, "alice@example.org", "wrong", "127.0.9.2"),
        "FAIL\t2\tuser=alice@example.org"
    );
    assert_eq!(
        c.plain(3, "nobody@example.org", "pw", "127.0.9.3"),
        "FAIL\t3\tuser=nobody@example.org"
    );
    // PLAIN without one: an empty challenge
    assert_eq!(
        c.ask("AUTH\t4\tPLAIN\tservice=smtp\trip=127.0.9.4"),
        "CONT\t4\t"
    );
    let r = c.ask(&format!("CONT\t4\t{}", b64(b"\0bob@example.org\0pw")));
    assert_eq!(r, "OK\t4\tuser=bob@example.org");
    // LOGIN: "Username:", "Password:"
    let r = c.ask("AUTH\t5\tLOGIN\tservice=smtp\trip=127.0.9.5");
    assert_eq!(r, format!("CONT\t5\t{}", b64(b"Username:")));
    let r = c.ask(&format!("CONT\t5\t{}", b64(b"bob@example.org")));
    assert_eq!(r, format!("CONT\t5\t{}", b64(b"Password:")));
    assert_eq!(
        c.ask(&format!("CONT\t5\t{}", b64(b"pw"))),
        "OK\t5\tuser=bob@example.org"
    );
    // edge cases fail the request and keep the connection
    let r = c.ask("AUTH\t6\tPLAIN\tservice=smtp\tresp=not*base64");
    assert!(r.starts_with("FAIL\t6\t") && r.contains("base64"), "{r}");
    let r = c.ask("AUTH\t7\tCRAM-MD5\tservice=smtp");
    assert!(r.starts_with("FAIL\t7\t"), "{r}");
    let r = c.ask(&format!("CONT\t99\t{}", b64(b"x")));
    assert!(r.starts_with("FAIL\t99\t"), "{r}");
    assert_eq!(
        c.ask("AUTH\t8\tPLAIN\tservice=smtp\trip=127.0.9.8"),
        "CONT\t8\t"
    );
    let r = c.ask("CONT\t8\t@@@");
    assert!(r.starts_with("FAIL\t8\t"), "{r}");
    // acting as another user is refused
    let r = c.ask(&format!(
        "AUTH\t9\tPLAIN\tservice=smtp\tresp={}",
        b64(b"bob@example.org\0alice@example.org\0pw")
    ));
    assert!(r.starts_with("FAIL\t9\t"), "{r}");
    // still serving after all that
    assert_eq!(
        c.plain(10, "alice@example.org", "pw", "127.0.9.10"),
        "OK\t10\tuser=alice@example.org"
    );
    // a protocol error (no service=) closes the connection, as Dovecot does
    c.send("AUTH\t11\tPLAIN");
    assert_eq!(c.line(), None);
}

#[test]
fn sasl_socket_bounds_lines_and_connections() {
    let (_s, sasl, map) = server(4, None);
    // a line over 16 KiB without its end: the connection is closed, not the buffer grown
    let mut c = Sasl::connect(&sasl);
    let big = vec![b'A'; 64 * 1024];
    let _ = c.w.write_all(b"AUTH\t1\tPLAIN\tservice=smtp\tresp=");
    let _ = c.w.write_all(&big);
    assert_eq!(c.line(), None, "closed after an overlong line");
    // the same for the socketmap: a request over its limit
    let mut m = UnixStream::connect(&map).unwrap();
    m.set_read_timeout(Some(PATIENCE)).unwrap();
    let _ = m.write_all(b"99999999:mailbox x,");
    let mut rest = Vec::new();
    let _ = m.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{rest:?}");

    // four connections at once; a fifth waits until one ends
    let held: Vec<Sasl> = (0..4).map(|_| Sasl::connect(&sasl)).collect();
    let mut fifth = UnixStream::connect(&sasl).unwrap();
    fifth
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut byte = [0u8; 1];
    let e = fifth
        .read(&mut byte)
        .expect_err("no handshake while four are served");
    assert!(
        matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{e}"
    );
    drop(held);
    fifth.set_read_timeout(Some(PATIENCE)).unwrap();
    assert_eq!(
        fifth.read(&mut byte).unwrap(),
        1,
        "served once a slot is free"
    );
    assert_eq!(&byte, b"V");
}

#[test]
fn sasl_failures_earn_the_penalty_imap_logins_wait_for() {
    let (s, sasl, _) = server(100, None);
    let mut c = Sasl::connect(&sasl);
    let rip = "127.0.8.1";
    for id in 0..3 {
        let r = c.plain(id, "alice@example.org", "guess", rip);
        assert!(r.starts_with("FAIL"), "{r}");
    }
    // three failures: the next check from that address waits 1 s first, over IMAP too
    let mut imap = s.connect_from(Ipv4Addr::new(127, 0, 8, 1));
    let t0 = Instant::now();
    imap.ok("LOGIN alice@example.org pw");
    assert!(
        t0.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t0.elapsed()
    );
    // the success cleared alice's failures at that address: SASL goes at once again
    let t0 = Instant::now();
    assert!(c.plain(9, "alice@example.org", "pw", rip).starts_with("OK"));
    assert!(
        t0.elapsed() < Duration::from_millis(900),
        "{:?}",
        t0.elapsed()
    );
}

/// One socketmap request and its answer.
fn lookup(m: &mut UnixStream, name: &str, key: &str) -> String {
    let payload = format!("{name} {key}");
    m.write_all(format!("{}:{payload},", payload.len()).as_bytes())
        .unwrap();
    let mut len = Vec::new();
    let mut b = [0u8; 1];
    loop {
        m.read_exact(&mut b).unwrap();
        if b[0] == b':' {
            break;
        }
        len.push(b[0]);
    }
    let n: usize = String::from_utf8(len).unwrap().parse().unwrap();
    let mut answer = vec![0u8; n + 1];
    m.read_exact(&mut answer).unwrap();
    assert_eq!(answer.pop(), Some(b','));
    String::from_utf8(answer).unwrap()
}

#[test]
fn socketmap_answers_mailbox_and_alias_lookups() {
    let (_s, _, map) = server(100, None);
    let mut m = UnixStream::connect(&map).unwrap();
    m.set_read_timeout(Some(PATIENCE)).unwrap();
    assert_eq!(
        lookup(&mut m, "mailbox", "alice@example.org"),
        "OK alice@example.org"
    );
    assert_eq!(
        lookup(&mut m, "mailbox", "Bob@Example.org"),
        "OK bob@example.org"
    );
    assert_eq!(
        lookup(&mut m, "mailbox", "alice+lists@example.org"),
        "OK alice@example.org"
    );
    assert_eq!(lookup(&mut m, "mailbox", "nobody@example.org"), "NOTFOUND ");
    assert_eq!(lookup(&mut m, "mailbox", "@example.org"), "NOTFOUND ");
    assert_eq!(lookup(&mut m, "mailbox", "team@example.org"), "NOTFOUND ");
    // a bare target gets the alias's domain
    assert_eq!(
        lookup(&mut m, "alias", "team@example.org"),
        "OK alice@example.org,bob@example.org"
    );
    assert_eq!(lookup(&mut m, "alias", "alice@example.org"), "NOTFOUND ");
    assert!(lookup(&mut m, "virtual", "alice@example.org").starts_with("PERM "));
    // pipelined requests are answered in order
    m.write_all(b"23:mailbox bob@example.org,23:mailbox eve@example.org,")
        .unwrap();
    let mut both = vec![0u8; "18:OK bob@example.org,".len() + "9:NOTFOUND ,".len()];
    m.read_exact(&mut both).unwrap();
    assert_eq!(both, b"18:OK bob@example.org,9:NOTFOUND ,");
    // a malformed request closes the connection
    m.write_all(b"7:mailbox,").unwrap();
    let mut rest = Vec::new();
    let _ = m.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn a_directory_that_is_down_gives_temporary_answers_then_recovers() {
    if !sqldb::usable(Kind::Postgres) {
        return;
    }
    let (db, _alone) = Db::exclusive(Kind::Postgres);
    db.add_user("pf-carol@example.org", "{PLAIN}carol-pw", None);
    let (_s, sasl, map) = server(100, Some(db.auth_config("cache_size = 0")));
    let mut c = Sasl::connect(&sasl);
    let mut m = UnixStream::connect(&map).unwrap();
    m.set_read_timeout(Some(PATIENCE)).unwrap();
    assert!(c
        .plain(1, "pf-carol@example.org", "carol-pw", "127.0.7.1")
        .starts_with("OK"));
    assert_eq!(
        lookup(&mut m, "mailbox", "pf-carol@example.org"),
        "OK pf-carol@example.org"
    );

    db.stop();
    let r = c.plain(2, "pf-carol@example.org", "carol-pw", "127.0.7.1");
    assert!(r.starts_with("FAIL\t2\t") && r.contains("\ttemp"), "{r}");
    let r = lookup(&mut m, "mailbox", "pf-carol@example.org");
    assert!(r.starts_with("TEMP "), "{r}");
    let r = lookup(&mut m, "mailbox", "pf-nobody@example.org");
    assert!(
        r.starts_with("TEMP "),
        "an unknown user is not NOTFOUND while down: {r}"
    );

    db.start();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut id = 3;
    while !c
        .plain(id, "pf-carol@example.org", "carol-pw", "127.0.7.1")
        .starts_with("OK")
    {
        assert!(Instant::now() < deadline, "SASL did not recover");
        std::thread::sleep(Duration::from_millis(100));
        id += 1;
    }
    assert_eq!(
        lookup(&mut m, "mailbox", "pf-carol@example.org"),
        "OK pf-carol@example.org"
    );
}

#[test]
fn both_sockets_serve_on_loopback_tcp_too() {
    let (sasl_port, map_port) = (free_port(), free_port());
    let s = Server::start_with(Opts {
        users: USERS.to_owned(),
        tweak: Some(Box::new(move |c| {
            c.postfix.auth_socket = Some(Listen::Tcp(([127, 0, 0, 1], sasl_port).into()));
            c.postfix.socketmap = Some(Listen::Tcp(([127, 0, 0, 1], map_port).into()));
        })),
        ..Opts::default()
    });
    let mut m = std::net::TcpStream::connect(("127.0.0.1", map_port)).unwrap();
    m.set_read_timeout(Some(PATIENCE)).unwrap();
    m.write_all(b"25:mailbox alice@example.org,").unwrap();
    let mut answer = vec![0u8; "20:OK alice@example.org,".len()];
    m.read_exact(&mut answer).unwrap();
    assert_eq!(answer, b"20:OK alice@example.org,");
    let t = std::net::TcpStream::connect(("127.0.0.1", sasl_port)).unwrap();
    t.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut first = String::new();
    BufReader::new(t).read_line(&mut first).unwrap();
    assert_eq!(first, "VERSION\t1\t2\n");
    drop(s);
}
