//! A minimal IMAP client built for measuring: it sends a command and reads until the
//! tagged response, counting bytes and untagged responses, and skips literals (`{n}` /
//! `~{n}`, RFC 3501 §4.3, RFC 3516 §4.2) by advancing over n bytes of its fixed buffer, so
//! it allocates nothing per message and costs little CPU next to the server.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

const BUF: usize = 256 * 1024;

/// What one command returned.
#[derive(Clone, Copy, Debug, Default)]
pub struct Reply {
    /// Bytes received up to and including the tagged response.
    pub bytes: u64,
    /// Untagged responses (`* ...`), literals counted as part of their response.
    pub untagged: u64,
    /// Literal bytes skipped.
    pub literal_bytes: u64,
    /// Wall time from sending the command to the end of the tagged response.
    pub wall: Duration,
    /// CPU time of this thread (user + system) over the same span: the client's own cost.
    pub client_cpu: Duration,
}

/// CPU time (user + system) of the calling thread.
pub fn thread_cpu() -> Duration {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a rusage into the pointer, which is valid and sized for it.
    let ru = unsafe {
        if libc::getrusage(libc::RUSAGE_THREAD, ru.as_mut_ptr()) != 0 {
            return Duration::ZERO;
        }
        ru.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// One IMAP connection.
pub struct Imap {
    stream: TcpStream,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    tag: u64,
    /// The last tagged status line (for error messages), e.g. "a3 NO ...".
    pub last_status: String,
    /// The number from the last `* N EXISTS` seen, less the `* N EXPUNGE`s since.
    pub exists: u64,
    /// Matches in the last `* SEARCH` / `* ESEARCH` response.
    pub search_hits: u64,
    /// When set, the first line of every untagged response is kept in `captured`.
    pub capture: bool,
    /// Untagged lines kept while `capture` is set (the caller clears it).
    pub captured: Vec<String>,
}

impl Imap {
    /// Connects (from the loopback source address `local` when given: servers limit
    /// connections per client address, so many idle clients spread over 127.0.0.0/8) and
    /// reads the greeting; `timeout` bounds every read.
    pub fn connect_from(
        addr: SocketAddr,
        local: Option<std::net::Ipv4Addr>,
        timeout: Duration,
    ) -> Result<Imap> {
        let stream = match local {
            None => TcpStream::connect_timeout(&addr, timeout),
            Some(ip) => connect_bound(ip, addr),
        }
        .with_context(|| format!("connecting to IMAP at {addr} from {local:?}"))?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        let mut c = Imap {
            stream,
            buf: vec![0; BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            tag: 0,
            last_status: String::new(),
            exists: 0,
            search_hits: 0,
            capture: false,
            captured: Vec::new(),
        };
        let greeting = c.read_line_text()?;
        if !greeting.starts_with("* OK") && !greeting.starts_with("* PREAUTH") {
            bail!("IMAP greeting from {addr}: {greeting}");
        }
        Ok(c)
    }

    /// Connects, logs in and selects `mailbox`.
    pub fn open(
        addr: SocketAddr,
        user: &str,
        password: &str,
        mailbox: &str,
        timeout: Duration,
    ) -> Result<Imap> {
        Imap::open_from(addr, None, user, password, mailbox, timeout)
    }

    /// As [`Imap::open`], from source address `local` (see [`Imap::connect_from`]).
    pub fn open_from(
        addr: SocketAddr,
        local: Option<std::net::Ipv4Addr>,
        user: &str,
        password: &str,
        mailbox: &str,
        timeout: Duration,
    ) -> Result<Imap> {
        let mut c = Imap::connect_from(addr, local, timeout)?;
        c.ok(&format!("LOGIN \"{user}\" \"{password}\""))?;
        c.ok(&format!("SELECT \"{mailbox}\""))?;
        Ok(c)
    }

    /// Runs a command that must answer OK.
    pub fn ok(&mut self, command: &str) -> Result<Reply> {
        let r = self.run(command)?;
        if !self.last_status.contains(" OK") {
            bail!("{command}: {}", self.last_status);
        }
        Ok(r)
    }

    /// Sends `command` with the next tag and reads to its tagged response.
    pub fn run(&mut self, command: &str) -> Result<Reply> {
        self.tag += 1;
        let tag = format!("a{}", self.tag);
        let (t0, c0) = (Instant::now(), thread_cpu());
        self.stream
            .write_all(format!("{tag} {command}\r\n").as_bytes())?;
        let mut r = Reply::default();
        self.search_hits = 0;
        loop {
            let first = self.read_response(&mut r)?;
            if first.starts_with(tag.as_bytes()) && first.get(tag.len()) == Some(&b' ') {
                self.last_status = String::from_utf8_lossy(&first).trim_end().to_owned();
                break;
            }
        }
        r.wall = t0.elapsed();
        r.client_cpu = thread_cpu().saturating_sub(c0);
        Ok(r)
    }

    /// Sends raw bytes (e.g. `DONE\r\n` after IDLE).
    pub fn send(&mut self, bytes: &[u8]) -> Result<()> {
        Ok(self.stream.write_all(bytes)?)
    }

    /// Sends `IDLE` and waits for the continuation request (RFC 2177).
    pub fn idle(&mut self) -> Result<()> {
        self.tag += 1;
        let tag = format!("a{}", self.tag);
        self.stream
            .write_all(format!("{tag} IDLE\r\n").as_bytes())?;
        loop {
            let line = self.read_line_text()?;
            if line.starts_with('+') {
                return Ok(());
            }
            if line.starts_with(&tag) {
                bail!("IDLE refused: {line}");
            }
        }
    }

    /// Reads untagged responses until an `EXISTS` above `known` (blocking up to the read
    /// timeout).
    pub fn wait_exists_above(&mut self, known: u64) -> Result<u64> {
        let mut r = Reply::default();
        loop {
            self.read_response(&mut r)?;
            if self.exists > known {
                return Ok(self.exists);
            }
        }
    }

    /// Reads one whole response (a line and any literals continuing it); returns its first
    /// line's first bytes (up to 64), for tag matching.
    fn read_response(&mut self, r: &mut Reply) -> Result<Vec<u8>> {
        let mut head: Option<Vec<u8>> = None;
        loop {
            let (line_start, line_end) = self.next_line(r)?;
            let line = &self.buf[line_start..line_end];
            if head.is_none() {
                if line.starts_with(b"* ") {
                    r.untagged += 1;
                    self.note_untagged(line_start, line_end);
                }
                let line = &self.buf[line_start..line_end];
                head = Some(line[..line.len().min(64)].to_vec());
            }
            let line = &self.buf[line_start..line_end];
            match literal_len(line) {
                Some(n) => {
                    r.literal_bytes += n;
                    self.skip(n, r)?;
                }
                None => return Ok(head.unwrap_or_default()),
            }
        }
    }

    /// Remembers EXISTS counts and SEARCH hit counts from an untagged line.
    fn note_untagged(&mut self, s: usize, e: usize) {
        let line = &self.buf[s..e];
        let text = trim_crlf(line);
        if self.capture {
            self.captured
                .push(String::from_utf8_lossy(text).into_owned());
        }
        if let Some(n) = text
            .strip_suffix(b" EXISTS")
            .and_then(|t| t.strip_prefix(b"* "))
            .and_then(|t| std::str::from_utf8(t).ok())
            .and_then(|t| t.parse().ok())
        {
            self.exists = n;
        } else if text.ends_with(b" EXPUNGE") {
            // the session's view shrinks by one (RFC 3501 §7.4.1)
            self.exists = self.exists.saturating_sub(1);
        } else if let Some(rest) = text.strip_prefix(b"* SEARCH") {
            self.search_hits += rest.split(|&b| b == b' ').filter(|t| !t.is_empty()).count() as u64;
        }
    }

    fn read_line_text(&mut self) -> Result<String> {
        let mut r = Reply::default();
        let (s, e) = self.next_line(&mut r)?;
        let line = &self.buf[s..e];
        if line.starts_with(b"* ") {
            self.note_untagged(s, e);
        }
        Ok(String::from_utf8_lossy(trim_crlf(&self.buf[s..e])).into_owned())
    }

    /// The next line in the buffer (start, end including LF), reading more as needed. A
    /// line longer than the buffer is counted and its middle dropped, keeping its end (where
    /// a literal announcement would be).
    fn next_line(&mut self, r: &mut Reply) -> Result<(usize, usize)> {
        let mut scanned = self.start;
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[scanned..self.end]) {
                let s = self.start;
                let e = scanned + i + 1;
                self.start = e;
                return Ok((s, e));
            }
            scanned = self.end;
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                scanned -= self.start;
                self.end -= self.start;
                self.start = 0;
            }
            if self.end == self.buf.len() {
                // Keep the last 64 bytes of an overlong line.
                let keep = 64;
                self.buf.copy_within(self.end - keep..self.end, 0);
                self.end = keep;
                scanned = keep;
            }
            let n = self.fill()?;
            r.bytes += n as u64;
        }
    }

    fn fill(&mut self) -> Result<usize> {
        let n = self.stream.read(&mut self.buf[self.end..])?;
        if n == 0 {
            bail!("server closed the connection");
        }
        self.end += n;
        Ok(n)
    }

    /// Skips `n` literal bytes: what is buffered, then reads straight into the buffer
    /// without keeping anything.
    fn skip(&mut self, mut n: u64, r: &mut Reply) -> Result<()> {
        let have = (self.end - self.start) as u64;
        if have >= n {
            self.start += n as usize;
            return Ok(());
        }
        n -= have;
        self.start = 0;
        self.end = 0;
        while n > 0 {
            let got = self.stream.read(&mut self.buf[..])?;
            if got == 0 {
                bail!("server closed the connection inside a literal");
            }
            r.bytes += got as u64;
            if got as u64 > n {
                self.start = n as usize;
                self.end = got;
                n = 0;
            } else {
                n -= got as u64;
            }
        }
        Ok(())
    }
}

/// A TCP connection to `addr` (IPv4) from `local`:0, through socket/bind/connect, which
/// std's TcpStream does not offer.
fn connect_bound(local: std::net::Ipv4Addr, addr: SocketAddr) -> std::io::Result<TcpStream> {
    use std::os::fd::FromRawFd;
    let SocketAddr::V4(dst) = addr else {
        return Err(std::io::Error::other("IPv4 only"));
    };
    let sin = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let (src, dst) = (sin(local, 0), sin(*dst.ip(), dst.port()));
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain socket calls on a descriptor we own; the sockaddr pointers point at
    // live, correctly sized sockaddr_in values. On success the descriptor is handed to a
    // TcpStream, which owns and closes it; on failure it is closed here.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let ok = libc::bind(fd, (&src as *const libc::sockaddr_in).cast(), len) == 0
            && libc::connect(fd, (&dst as *const libc::sockaddr_in).cast(), len) == 0;
        if !ok {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
        Ok(TcpStream::from_raw_fd(fd))
    }
}

fn trim_crlf(l: &[u8]) -> &[u8] {
    let l = l.strip_suffix(b"\n").unwrap_or(l);
    l.strip_suffix(b"\r").unwrap_or(l)
}

/// The size of a literal announced at the end of `line` (`{n}` or `~{n}`, CRLF-terminated).
fn literal_len(line: &[u8]) -> Option<u64> {
    let l = trim_crlf(line);
    let l = l.strip_suffix(b"}")?;
    let open = l.iter().rposition(|&b| b == b'{')?;
    let digits = &l[open + 1..];
    let digits = digits.strip_suffix(b"+").unwrap_or(digits);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn literal_announcements() {
        assert_eq!(literal_len(b"* 1 FETCH (BODY[] {123}\r\n"), Some(123));
        assert_eq!(literal_len(b"* 1 FETCH (BINARY[] ~{7}\r\n"), Some(7));
        assert_eq!(literal_len(b"* 1 FETCH (FLAGS (\\Seen))\r\n"), None);
        assert_eq!(literal_len(b"* OK {x}\r\n"), None);
        assert_eq!(literal_len(b"* OK {}\r\n"), None);
    }

    /// A scripted server: literals of many sizes (larger than the buffer too), split
    /// across writes, and a tagged response; the client must count exactly.
    #[test]
    fn counts_responses_and_skips_literals() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let big = 3 * BUF + 17;
        let srv = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.write_all(b"* OK hi\r\n").unwrap();
            let mut cmd = [0u8; 64];
            let n = s.read(&mut cmd).unwrap();
            assert_eq!(&cmd[..n], b"a1 FETCH 1:* BODY[]\r\n");
            let mut out = Vec::new();
            out.extend_from_slice(b"* 2 EXISTS\r\n");
            out.extend_from_slice(b"* 1 FETCH (BODY[] {5}\r\na\r\n}\n) UID 1)\r\n");
            out.extend_from_slice(format!("* 2 FETCH (BODY[] {{{big}}}\r\n").as_bytes());
            out.extend(std::iter::repeat_n(b'\n', big));
            out.extend_from_slice(b" BODY[HEADER] {3}\r\n{1}\r\n)\r\n");
            out.extend_from_slice(b"* SEARCH 4 5 6\r\n");
            out.extend_from_slice(b"a1 OK done\r\n");
            for chunk in out.chunks(1000) {
                s.write_all(chunk).unwrap();
            }
            out.len()
        });
        let mut c = Imap::connect_from(addr, None, Duration::from_secs(5)).unwrap();
        let r = c.run("FETCH 1:* BODY[]").unwrap();
        let sent = srv.join().unwrap();
        assert_eq!(r.bytes, sent as u64);
        assert_eq!(r.untagged, 4);
        assert_eq!(r.literal_bytes, 5 + big as u64 + 3);
        assert_eq!(c.exists, 2);
        assert_eq!(c.search_hits, 3);
        assert_eq!(c.last_status, "a1 OK done");
    }

    #[test]
    fn connects_from_another_loopback_address() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let srv = std::thread::spawn(move || {
            let (mut s, peer) = l.accept().unwrap();
            s.write_all(b"* OK hi\r\n").unwrap();
            peer
        });
        let ip = std::net::Ipv4Addr::new(127, 0, 0, 9);
        Imap::connect_from(addr, Some(ip), Duration::from_secs(5)).unwrap();
        assert_eq!(srv.join().unwrap().ip(), std::net::IpAddr::V4(ip));
    }
}
