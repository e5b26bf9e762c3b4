//! The attackers' tools of tests/hostile (and of a few tests in tests/it): connections
//! from a chosen loopback address or IPv6 prefix, small receive windows, pipelining
//! without reading, the memory meter, a timed bystander and hand-made TLS ClientHellos.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::imap::{Client, PATIENCE};

/// The tests of the file run one at a time, so the memory figures of one attack are not
/// mixed with another's.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A TCP connection to `dst` from the loopback address `src` (Linux routes all of
/// 127.0.0.0/8 to `lo`, so 127.0.0.2 is a second client address on one machine).
pub fn tcp_from(src: Ipv4Addr, dst: SocketAddr) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind(SocketAddr::new(IpAddr::V4(src), 0))
            .unwrap_or_else(|e| panic!("bind {src}: {e}"));
        let tcp = tokio::time::timeout(PATIENCE, socket.connect(dst))
            .await
            .expect("connect in time")
            .unwrap();
        let std = tcp.into_std().unwrap();
        std.set_nonblocking(false).unwrap();
        std
    })
}

/// One line of `/proc/self/status` in KiB (`VmRSS`, `VmHWM`).
fn status_kib(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} not in /proc/self/status"))
}

/// How far the process may grow under one attack: the daemon runs in this process, so
/// its memory is this process's.
pub const MEMORY_BOUND_KIB: u64 = 64 * 1024;

/// The resident memory of this process (the daemon runs in it) around one attack: the
/// peak is the kernel's high-water mark `VmHWM`, reset at the start (`clear_refs` 5), so
/// it is the true peak during the attack, not a sample.
pub struct Mem {
    label: &'static str,
    before: u64,
    reset: bool,
}

impl Mem {
    /// Starts measuring. Build large payloads before this, so the client's own buffers
    /// are not counted as the server's.
    pub fn start(label: &'static str) -> Mem {
        let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
        Mem {
            label,
            before: status_kib("VmRSS"),
            reset,
        }
    }

    /// Prints the figures and checks the growth stays under [`MEMORY_BOUND_KIB`];
    /// returns the growth of the peak over the start in KiB.
    pub fn finish(self) -> u64 {
        let peak = status_kib("VmHWM");
        let after = status_kib("VmRSS");
        let grew = peak.saturating_sub(self.before);
        let mib = |k: u64| k as f64 / 1024.0;
        eprintln!(
            "MEMORY {}: VmRSS before {:.1} MiB, peak {:.1} MiB (+{:.1} MiB){}, after {:.1} MiB",
            self.label,
            mib(self.before),
            mib(peak),
            mib(grew),
            if self.reset {
                ""
            } else {
                " (VmHWM could not be reset: peak of the whole run)"
            },
            mib(after),
        );
        assert!(
            grew < MEMORY_BOUND_KIB,
            "{}: the process grew by {grew} KiB (bound {MEMORY_BOUND_KIB} KiB)",
            self.label
        );
        grew
    }
}

/// A TLS ClientHello record offering only `version` (no supported_versions extension,
/// so a TLS 1.3 server must treat it as that version): ECDHE and RSA suites, the usual
/// groups and signature algorithms, SNI `localhost`. With `0x0303` rustls answers it
/// with a ServerHello, which shows the hello is well formed.
pub fn client_hello(version: u16) -> Vec<u8> {
    fn ext(out: &mut Vec<u8>, kind: u16, data: &[u8]) {
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&(data.len() as u16).to_be_bytes());
        out.extend_from_slice(data);
    }
    let mut body = version.to_be_bytes().to_vec();
    body.extend_from_slice(&[0x5a; 32]); // random
    body.push(0); // no session id
    let suites: [u16; 11] = [
        0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013, 0xc014, 0x002f, 0x0035, 0x000a,
    ];
    body.extend_from_slice(&((suites.len() * 2) as u16).to_be_bytes());
    for s in suites {
        body.extend_from_slice(&s.to_be_bytes());
    }
    body.extend_from_slice(&[1, 0]); // compression: null only
    let mut exts = Vec::new();
    let name = b"localhost";
    let mut sni = ((name.len() + 3) as u16).to_be_bytes().to_vec();
    sni.push(0);
    sni.extend_from_slice(&(name.len() as u16).to_be_bytes());
    sni.extend_from_slice(name);
    ext(&mut exts, 0, &sni);
    ext(&mut exts, 10, &[0, 6, 0, 0x1d, 0, 0x17, 0, 0x18]); // x25519, P-256, P-384
    ext(&mut exts, 11, &[1, 0]); // uncompressed points
    let algs: [u16; 7] = [0x0403, 0x0503, 0x0804, 0x0805, 0x0401, 0x0501, 0x0807];
    let mut sig = ((algs.len() * 2) as u16).to_be_bytes().to_vec();
    for a in algs {
        sig.extend_from_slice(&a.to_be_bytes());
    }
    ext(&mut exts, 13, &sig);
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    let mut hs = vec![1u8]; // client_hello
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    let record_version: u16 = if version <= 0x0300 { 0x0300 } else { 0x0301 };
    let mut rec = vec![0x16];
    rec.extend_from_slice(&record_version.to_be_bytes());
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

/// What a server sent back to a ClientHello.
#[derive(Debug, PartialEq, Eq)]
pub enum HelloAnswer {
    /// A handshake record starting with a ServerHello, and the version it chose.
    ServerHello(u16),
    /// An alert record: (level, description).
    Alert(u8, u8),
    /// The connection closed without a record.
    Closed,
    /// Something else: the first bytes.
    Other(Vec<u8>),
}

/// Sends `hello` on `tcp` and reads the first record of the answer (bounded by
/// [`PATIENCE`]).
pub fn send_hello(mut tcp: TcpStream, hello: &[u8]) -> HelloAnswer {
    tcp.write_all(hello).unwrap();
    let deadline = Instant::now() + PATIENCE;
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    while got.len() < 11 {
        let left = deadline
            .checked_duration_since(Instant::now())
            .expect("an answer to the ClientHello in time");
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
    match got.as_slice() {
        [] => HelloAnswer::Closed,
        [0x15, _, _, _, _, level, desc, ..] => HelloAnswer::Alert(*level, *desc),
        [0x16, _, _, _, _, 2, _, _, _, hi, lo, ..] => {
            HelloAnswer::ServerHello(u16::from_be_bytes([*hi, *lo]))
        }
        other => HelloAnswer::Other(other[..other.len().min(16)].to_vec()),
    }
}

/// Longest a bystander's command may take during an attack. Not a statement about
/// speed (the machine is shared): the attacks this guards against stalled others for
/// 15 to 30 s, a served command takes milliseconds.
pub const LATENCY_BOUND: Duration = Duration::from_secs(5);

/// Another client working during an attack: a thread that logs in as `user`, selects
/// INBOX and runs NOOP and STATUS in turn (20 ms apart) until [`Bystander::finish`],
/// timing each command.
pub struct Bystander {
    label: &'static str,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<Duration>>>,
}

impl Bystander {
    /// Starts the bystander on `addr` (logged in and selected before this returns).
    pub fn start(label: &'static str, addr: SocketAddr, user: &str) -> Bystander {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (flag, user) = (std::sync::Arc::clone(&stop), user.to_owned());
        let thread = std::thread::spawn(move || {
            let mut c = Client::connect(addr);
            c.ok(&format!("LOGIN {user} pw"));
            c.ok("SELECT INBOX");
            ready_tx.send(()).unwrap();
            let mut times = Vec::new();
            let commands = ["NOOP", "STATUS INBOX (MESSAGES UNSEEN)"];
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let begun = Instant::now();
                c.ok(commands[times.len() % 2]);
                times.push(begun.elapsed());
                std::thread::sleep(Duration::from_millis(20));
            }
            times
        });
        ready_rx
            .recv_timeout(PATIENCE)
            .expect("bystander logged in");
        Bystander {
            label,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops, prints the median and the slowest command and checks the slowest stays
    /// under [`LATENCY_BOUND`]; returns the slowest.
    pub fn finish(mut self) -> Duration {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut times = self
            .thread
            .take()
            .unwrap()
            .join()
            .expect("bystander served");
        times.sort();
        let median = times.get(times.len() / 2).copied().unwrap_or_default();
        let max = times.last().copied().unwrap_or_default();
        eprintln!(
            "LATENCY {}: {} commands of another client, median {:.1} ms, max {:.1} ms",
            self.label,
            times.len(),
            median.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3
        );
        assert!(
            !times.is_empty(),
            "{}: the bystander ran no command",
            self.label
        );
        assert!(
            max < LATENCY_BOUND,
            "{}: another client waited {max:?} for one command",
            self.label
        );
        max
    }
}

/// A local route for a whole IPv6 /64 on `lo`, so that connections can come from any of
/// its addresses (with `IPV6_FREEBIND`); removed on drop. `None`, with a message, where
/// the machine has no IPv6 or the route cannot be added (no CAP_NET_ADMIN).
pub struct LocalPrefix(String);

impl LocalPrefix {
    pub fn add(prefix: &str) -> Option<LocalPrefix> {
        let route = |verb: &str| {
            std::process::Command::new("ip")
                .args(["-6", "route", verb, "local", prefix, "dev", "lo"])
                .output()
        };
        match route("add") {
            Ok(o) if o.status.success() => Some(LocalPrefix(prefix.to_owned())),
            Ok(o) => {
                eprintln!(
                    "skipped: cannot route {prefix} to lo: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("skipped: no `ip` command ({e})");
                None
            }
        }
    }
}

impl Drop for LocalPrefix {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["-6", "route", "del", "local", &self.0, "dev", "lo"])
            .output();
    }
}

/// A TCP connection to `dst` from `src`, an address of a [`LocalPrefix`].
pub fn tcp6_from(src: std::net::Ipv6Addr, dst: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::STREAM, None).unwrap();
    s.set_freebind_v6(true).unwrap();
    let from: SocketAddr = (src, 0).into();
    s.bind(&from.into())
        .unwrap_or_else(|e| panic!("bind {src}: {e}"));
    s.connect_timeout(&dst.into(), PATIENCE).unwrap();
    s.into()
}

/// A connection to `dst` from `src` whose receive buffer is small (4 KiB), for a client
/// that will stop reading: the server's output backs up after a few KiB, not megabytes.
pub fn tcp_small_window_from(src: Ipv4Addr, dst: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    let from: SocketAddr = (src, 0).into();
    s.bind(&from.into()).unwrap();
    s.connect_timeout(&dst.into(), PATIENCE).unwrap();
    s.into()
}

/// Sends `command` over and over on `tcp` and never reads, until the server stops taking
/// input (its replies filled the socket buffers and its write waits for us) after at
/// least `at_least` bytes (enough that the replies outgrow the kernel's buffers, 4 MiB at
/// most on Linux, rather than a busy server pausing). Returns the bytes sent. Bounded by
/// [`PATIENCE`].
pub fn pipeline_without_reading(tcp: &TcpStream, command: &[u8], at_least: usize) -> usize {
    let burst = command.repeat((16 * 1024 / command.len()).max(1));
    tcp.set_nonblocking(true).unwrap();
    let (mut sent, mut blocked_since) = (0, None::<Instant>);
    let deadline = Instant::now() + PATIENCE;
    loop {
        match (&*tcp).write(&burst) {
            Ok(n) => {
                sent += n;
                blocked_since = None;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // the server has taken nothing for a while: it is stuck writing to us
                let since = *blocked_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_millis(300) && sent >= at_least {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            // the server has closed on us already (a deadline ran out): also done
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                ) =>
            {
                break
            }
            Err(e) => panic!("after {sent} bytes: {e}"),
        }
        assert!(
            Instant::now() < deadline,
            "the server took {sent} bytes and still reads"
        );
    }
    tcp.set_nonblocking(false).unwrap();
    sent
}
