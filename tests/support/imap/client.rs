//! The blocking raw-socket IMAP client of the tests: sends commands (waiting for
//! continuations at synchronizing literals), reads responses with their literals, and
//! parses each with imap-codec.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use imap_codec::decode::Decoder;
use imap_codec::imap_types::fetch::MessageDataItem;
use imap_codec::imap_types::response::{Data, Response, Status};
use imap_codec::imap_types::IntoStatic;
use imap_codec::{GreetingCodec, ResponseCodec};

use super::{tls_client, PATIENCE};

pub enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
    Gone,
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(t) => t,
            Stream::Tls(s) => &s.sock,
            Stream::Gone => panic!("stream gone"),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(t) => t.read(buf),
            Stream::Tls(s) => s.read(buf),
            Stream::Gone => Ok(0),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(t) => t.write(buf),
            Stream::Tls(s) => s.write(buf),
            Stream::Gone => Err(std::io::ErrorKind::BrokenPipe.into()),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(t) => t.flush(),
            Stream::Tls(s) => s.flush(),
            Stream::Gone => Ok(()),
        }
    }
}

/// One server response (a line with its literals), as sent and as imap-codec read it.
#[derive(Debug, Clone)]
pub struct Resp {
    pub raw: Vec<u8>,
    /// `None` only for `* ESEARCH` (checked by [`check_esearch`] instead).
    pub parsed: Option<Response<'static>>,
}

impl Resp {
    /// The raw bytes, lossy UTF-8.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.raw).into_owned()
    }

    /// The tag of a tagged status response.
    pub fn tag(&self) -> Option<String> {
        match &self.parsed {
            Some(Response::Status(Status::Tagged(t))) => Some(t.tag.inner().to_string()),
            _ => None,
        }
    }

    pub fn is_continuation(&self) -> bool {
        matches!(self.parsed, Some(Response::CommandContinuationRequest(_)))
    }

    /// `(seq, items)` of a `* n FETCH`.
    pub fn fetch(&self) -> Option<(u32, Vec<MessageDataItem<'static>>)> {
        match &self.parsed {
            Some(Response::Data(Data::Fetch { seq, items })) => {
                Some((seq.get(), items.as_ref().to_vec()))
            }
            _ => None,
        }
    }

    /// The data of every `BODY[...]` item of a FETCH, in order.
    pub fn body_sections(&self) -> Vec<Option<Vec<u8>>> {
        let Some((_, items)) = self.fetch() else {
            return Vec::new();
        };
        items
            .into_iter()
            .filter_map(|i| match i {
                MessageDataItem::BodyExt { data, .. } => {
                    Some(data.into_option().map(|c| c.to_vec()))
                }
                _ => None,
            })
            .collect()
    }
}

/// The answer to one command.
#[derive(Debug)]
pub struct Reply {
    pub untagged: Vec<Resp>,
    pub done: Resp,
}

impl Reply {
    /// `OK`, `NO` or `BAD`.
    pub fn status(&self) -> String {
        let t = self.done.text();
        t.split(' ').nth(1).unwrap_or("").to_string()
    }

    /// Every response as text, one per line (for assertion messages and `contains`).
    pub fn all(&self) -> String {
        let mut s = String::new();
        for r in self.untagged.iter().chain(std::iter::once(&self.done)) {
            s.push_str(&r.text());
        }
        s
    }

    /// The number in `[NAME n]` of the untagged response that carries it
    /// (`UIDVALIDITY`, `HIGHESTMODSEQ`, ...).
    pub fn code_value(&self, name: &str) -> Option<u64> {
        self.untagged.iter().find_map(|x| {
            let t = x.text();
            let at = t.find(&format!("[{name} "))? + name.len() + 2;
            t[at..].split(']').next()?.parse().ok()
        })
    }

    /// [`Reply::code_value`], which must be there.
    pub fn expect_code(&self, name: &str) -> u64 {
        self.code_value(name)
            .unwrap_or_else(|| panic!("no {name}: {}", self.all()))
    }

    /// Untagged responses whose text starts with `prefix` (e.g. `* LIST`).
    pub fn lines(&self, prefix: &str) -> Vec<String> {
        self.untagged
            .iter()
            .map(|r| r.text())
            .filter(|t| t.starts_with(prefix))
            .map(|t| t.trim_end().to_string())
            .collect()
    }

    /// The FETCH responses: seq -> response.
    pub fn fetches(&self) -> Vec<(u32, &Resp)> {
        self.untagged
            .iter()
            .filter_map(|r| r.fetch().map(|(s, _)| (s, r)))
            .collect()
    }
}

pub struct Client {
    pub stream: Stream,
    buf: Vec<u8>,
    next_tag: u32,
    pub greeting: String,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let tcp = TcpStream::connect(addr).unwrap();
        let mut c = Client::wrap(Stream::Plain(tcp));
        c.read_greeting();
        c
    }

    pub fn wrap(stream: Stream) -> Client {
        stream.tcp().set_read_timeout(Some(PATIENCE)).unwrap();
        stream.tcp().set_nodelay(true).unwrap();
        Client {
            stream,
            buf: Vec::new(),
            next_tag: 1,
            greeting: String::new(),
        }
    }

    /// Reads the greeting and checks imap-codec's greeting parser takes it.
    pub fn read_greeting(&mut self) {
        let raw = self
            .read_raw(PATIENCE)
            .unwrap_or_else(|e| panic!("{e}"))
            .expect("greeting");
        self.take_greeting(raw);
    }

    /// Checks imap-codec's greeting parser takes `raw` and keeps it as the greeting.
    fn take_greeting(&mut self, raw: Vec<u8>) {
        match GreetingCodec::default().decode(&raw) {
            Ok((rest, _)) => assert!(rest.is_empty(), "greeting: {:?}", lossy(&raw)),
            Err(e) => panic!("imap-codec rejects the greeting {:?}: {e:?}", lossy(&raw)),
        }
        self.greeting = lossy(&raw);
    }

    /// Writes raw bytes.
    pub fn send(&mut self, bytes: impl AsRef<[u8]>) {
        self.stream.write_all(bytes.as_ref()).unwrap();
        self.stream.flush().unwrap();
    }

    /// A fresh tag.
    pub fn tag(&mut self) -> String {
        let t = format!("T{}", self.next_tag);
        self.next_tag += 1;
        t
    }

    /// Sends `TAG command` and reads until the tagged response. A synchronizing literal
    /// `{n}\r\n` in `command` waits for the server's continuation before going on; if the
    /// server answers with the tagged response instead, the rest is not sent.
    pub fn cmd(&mut self, command: &str) -> Reply {
        self.cmd_bytes(command.as_bytes())
    }

    /// [`Client::cmd`] for bytes.
    pub fn cmd_bytes(&mut self, command: &[u8]) -> Reply {
        let tag = self.tag();
        let mut whole = format!("{tag} ").into_bytes();
        whole.extend_from_slice(command);
        whole.extend_from_slice(b"\r\n");
        let mut untagged = Vec::new();
        let mut rest = &whole[..];
        loop {
            let cut = sync_literal_end(rest);
            let Some(cut) = cut else {
                self.send(rest);
                break;
            };
            self.send(&rest[..cut]);
            rest = &rest[cut..];
            let r = self.read();
            if r.tag().as_deref() == Some(tag.as_str()) {
                return Reply { untagged, done: r };
            }
            if r.is_continuation() {
                continue;
            }
            untagged.push(r);
            let more = self.until_continuation(&tag);
            untagged.extend(more.0);
            if let Some(done) = more.1 {
                return Reply { untagged, done };
            }
        }
        let mut r = self.until(&tag);
        untagged.append(&mut r.untagged);
        r.untagged = untagged;
        r
    }

    /// Reads until a continuation (returns the untagged seen) or the tagged answer.
    fn until_continuation(&mut self, tag: &str) -> (Vec<Resp>, Option<Resp>) {
        let mut out = Vec::new();
        loop {
            let r = self.read();
            if r.is_continuation() {
                return (out, None);
            }
            if r.tag().as_deref() == Some(tag) {
                return (out, Some(r));
            }
            out.push(r);
        }
    }

    /// [`Client::cmd`] that must answer OK.
    pub fn ok(&mut self, command: &str) -> Reply {
        let r = self.cmd(command);
        assert_eq!(r.status(), "OK", "{command}: {}", r.all());
        r
    }

    /// A connection to a server that may be dead or dying (a kill test): the greeting, or
    /// `None` when nothing listens, the connection breaks or `wait` passes.
    pub fn try_connect(addr: SocketAddr, wait: Duration) -> Option<Client> {
        let tcp = TcpStream::connect(addr).ok()?;
        let mut c = Client::wrap(Stream::Plain(tcp));
        let raw = c.read_raw(wait).ok()??;
        c.take_greeting(raw);
        Some(c)
    }

    /// [`Client::cmd`] for a server that may die: `None` when the connection breaks or no
    /// response arrives within `wait`. Literals in `command` must be non-synchronizing.
    pub fn try_cmd(&mut self, command: &[u8], wait: Duration) -> Option<Reply> {
        let tag = self.tag();
        let mut whole = format!("{tag} ").into_bytes();
        whole.extend_from_slice(command);
        whole.extend_from_slice(b"\r\n");
        self.stream.write_all(&whole).ok()?;
        self.stream.flush().ok()?;
        let mut untagged = Vec::new();
        loop {
            let r = parse(self.read_raw(wait).ok()??);
            if r.tag().as_deref() == Some(tag.as_str()) {
                return Some(Reply { untagged, done: r });
            }
            untagged.push(r);
        }
    }

    /// Reads responses until the tagged one for `tag` (continuations are a failure).
    pub fn until(&mut self, tag: &str) -> Reply {
        let mut untagged = Vec::new();
        loop {
            let r = self.read();
            if r.tag().as_deref() == Some(tag) {
                return Reply { untagged, done: r };
            }
            assert!(
                r.tag().is_none(),
                "tagged response for another command: {}",
                r.text()
            );
            assert!(!r.is_continuation(), "unexpected continuation {}", r.text());
            untagged.push(r);
        }
    }

    /// Reads one response, failing the test when none arrives in [`PATIENCE`].
    pub fn read(&mut self) -> Resp {
        self.read_within(PATIENCE).unwrap_or_else(|| {
            panic!(
                "no response within {PATIENCE:?}; buffered {:?}",
                lossy(&self.buf)
            )
        })
    }

    /// One response if one arrives within `wait`.
    pub fn read_within(&mut self, wait: Duration) -> Option<Resp> {
        let raw = self.read_raw(wait).unwrap_or_else(|e| panic!("{e}"))?;
        Some(parse(raw))
    }

    /// Reads responses until one satisfies `pred` or `wait` passes; returns all read.
    pub fn read_until(&mut self, wait: Duration, pred: impl Fn(&Resp) -> bool) -> Vec<Resp> {
        let deadline = Instant::now() + wait;
        let mut out = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.read_within(left) {
                Some(r) => {
                    let hit = pred(&r);
                    out.push(r);
                    if hit {
                        break;
                    }
                }
                None => break,
            }
        }
        out
    }

    /// Whether the server closed the connection (reads to EOF within `wait`, discarding).
    pub fn closed_within(&mut self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        self.stream
            .tcp()
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut b = [0u8; 4096];
        let res = loop {
            if Instant::now() > deadline {
                break false;
            }
            match self.stream.read(&mut b) {
                Ok(0) => break true,
                Ok(n) => self.buf.extend_from_slice(&b[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => break true,
            }
        };
        self.stream.tcp().set_read_timeout(Some(PATIENCE)).unwrap();
        res
    }

    /// Bytes read but not yet consumed as responses.
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }

    /// One response's raw bytes: a line, and for each `{n}` at its end n octets and
    /// the rest of the line; `Ok(None)` when `wait` passes first, `Err` when the
    /// connection ends.
    fn read_raw(&mut self, wait: Duration) -> Result<Option<Vec<u8>>, String> {
        let deadline = Instant::now() + wait;
        let mut pos = 0; // where the current line segment starts in buf
        loop {
            if let Some(i) = find_crlf(&self.buf[pos..]) {
                let end = pos + i + 2;
                match literal_len(&self.buf[pos..end - 2]) {
                    Some(n) => {
                        let need = end + n;
                        while self.buf.len() < need {
                            if !self.fill(deadline)? {
                                return Ok(None);
                            }
                        }
                        pos = need;
                        continue;
                    }
                    None => {
                        let raw: Vec<u8> = self.buf.drain(..end).collect();
                        return Ok(Some(raw));
                    }
                }
            }
            if !self.fill(deadline)? {
                return Ok(None);
            }
        }
    }

    /// Reads more bytes; false on timeout, `Err` at EOF or on a read error (a read a signal
    /// interrupted counts as read: the caller asks again).
    fn fill(&mut self, deadline: Instant) -> Result<bool, String> {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return Ok(false);
        };
        let left = left.max(Duration::from_millis(1));
        self.stream.tcp().set_read_timeout(Some(left)).unwrap();
        let mut b = [0u8; 16384];
        match self.stream.read(&mut b) {
            Ok(0) => Err(format!(
                "server closed the connection; buffered {:?}",
                lossy(&self.buf)
            )),
            Ok(n) => {
                self.buf.extend_from_slice(&b[..n]);
                Ok(true)
            }
            // a signal to the test process (a child server exiting) cut the read short
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(true),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(format!("read: {e}")),
        }
    }

    /// STARTTLS: sends `extra` in the same write after the command, checks the OK, and
    /// does a TLS handshake trusting `cert`.
    pub fn starttls(&mut self, cert: &Path, extra: &str) -> Reply {
        let tag = self.tag();
        self.send(format!("{tag} STARTTLS\r\n{extra}"));
        let r = self.until(&tag);
        assert_eq!(r.status(), "OK", "{}", r.all());
        assert!(
            self.buf.is_empty(),
            "plaintext after the STARTTLS OK: {:?}",
            lossy(&self.buf)
        );
        let Stream::Plain(tcp) = std::mem::replace(&mut self.stream, Stream::Gone) else {
            panic!("not a plain stream")
        };
        tcp.set_read_timeout(Some(PATIENCE)).unwrap();
        self.stream = Stream::Tls(Box::new(tls_client(cert, tcp)));
        r
    }
}

/// Where the first `{n}\r\n` (a synchronizing literal announcement) of `b` ends.
fn sync_literal_end(b: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = find_crlf(&b[from..]) {
        let end = from + i;
        let line = &b[..end];
        if let Some(open) = line.iter().rposition(|&c| c == b'{') {
            let inner = &line[open + 1..];
            if inner.len() >= 2
                && inner.ends_with(b"}")
                && inner[..inner.len() - 1].iter().all(u8::is_ascii_digit)
                && end + 2 < b.len()
            {
                return Some(end + 2);
            }
        }
        from = end + 2;
    }
    None
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

/// `n` when `line` ends with `{n}` (or `~{n}`).
fn literal_len(line: &[u8]) -> Option<usize> {
    let line = line.strip_suffix(b"}")?;
    let open = line.iter().rposition(|&b| b == b'{')?;
    let digits = &line[open + 1..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Parses one response with imap-codec; anything it cannot parse fails the test.
pub fn parse(raw: Vec<u8>) -> Resp {
    if raw.starts_with(b"* ESEARCH") {
        check_esearch(&raw);
        return Resp { raw, parsed: None };
    }
    if let Some(rest) = without_appendlimit(&raw)
        .or_else(|| without_binary_origin(&raw))
        .or_else(|| without_childinfo(&raw))
    {
        let parsed = parse(rest).parsed;
        return Resp { raw, parsed };
    }
    let parsed = match ResponseCodec::default().decode(&raw) {
        Ok((rest, r)) => {
            assert!(
                rest.is_empty(),
                "imap-codec left {:?} of {:?}",
                lossy(rest),
                lossy(&raw)
            );
            r.into_static()
        }
        Err(e) => panic!("imap-codec cannot parse {:?}: {e:?}", lossy(&raw)),
    };
    Resp {
        raw,
        parsed: Some(parsed),
    }
}

/// A `* STATUS` line without its `APPENDLIMIT n` item (RFC 7889 §3.2), which imap-codec
/// does not know; the number is checked here, the rest goes to imap-codec. None for any
/// other line.
fn without_appendlimit(raw: &[u8]) -> Option<Vec<u8>> {
    const ITEM: &[u8] = b"APPENDLIMIT ";
    if !raw.starts_with(b"* STATUS ") {
        return None;
    }
    let at = raw.windows(ITEM.len()).position(|w| w == ITEM)?;
    let digits = raw[at + ITEM.len()..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    let end = at + ITEM.len() + digits;
    assert!(
        digits > 0 && matches!(raw.get(end), Some(b' ' | b')')),
        "bad APPENDLIMIT in {:?}",
        lossy(raw)
    );
    let mut out = raw[..at].to_vec();
    let mut tail = &raw[end..];
    if tail.first() == Some(&b' ') {
        tail = &tail[1..];
    } else if out.last() == Some(&b' ') {
        out.pop();
    }
    out.extend_from_slice(tail);
    Some(out)
}

/// A `* LIST` line without its `(CHILDINFO ("SUBSCRIBED"))` (RFC 5258 §6
/// `mbox-list-extended`, which imap-codec 2.0.0-alpha does not know); the rest goes to
/// imap-codec. None for any other line.
fn without_childinfo(raw: &[u8]) -> Option<Vec<u8>> {
    const ITEM: &[u8] = b" (CHILDINFO (\"SUBSCRIBED\"))\r\n";
    if !raw.starts_with(b"* LIST ") || !raw.ends_with(ITEM) {
        return None;
    }
    let mut out = raw[..raw.len() - ITEM.len()].to_vec();
    out.extend_from_slice(b"\r\n");
    Some(out)
}

/// A FETCH line without the `<origin>` after a `BINARY[section]` (RFC 3516 §4.2: a partial
/// BINARY fetch is answered as `BINARY[section]<origin>`, like BODY; RFC 3516's grammar and
/// so imap-codec leave the origin out). The origin is checked to be a number here. None
/// when the line has no such origin.
fn without_binary_origin(raw: &[u8]) -> Option<Vec<u8>> {
    const ITEM: &[u8] = b"BINARY[";
    let at = raw.windows(ITEM.len()).position(|w| w == ITEM)?;
    let close = at + raw[at..].iter().position(|&b| b == b']')?;
    let rest = &raw[close + 1..];
    let digits = rest.strip_prefix(b"<")?;
    let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
    assert!(
        n > 0 && digits.get(n) == Some(&b'>'),
        "bad BINARY origin in {:?}",
        lossy(raw)
    );
    let mut out = raw[..close + 1].to_vec();
    out.extend_from_slice(&digits[n + 1..]);
    Some(out)
}

/// RFC 4731 §3.1: `* ESEARCH [(TAG "t")] [UID] *(SP name SP value)`, names MIN MAX COUNT
/// (numbers), ALL (a sequence set) and MODSEQ (RFC 7162), each at most once.
pub fn check_esearch(raw: &[u8]) {
    let text = std::str::from_utf8(raw).expect("ESEARCH is ASCII");
    let body = text
        .strip_prefix("* ESEARCH")
        .and_then(|t| t.strip_suffix("\r\n"))
        .unwrap_or_else(|| panic!("bad ESEARCH {text:?}"));
    let mut rest = body;
    if let Some(r) = rest.strip_prefix(" (TAG \"") {
        let end = r
            .find("\")")
            .unwrap_or_else(|| panic!("bad ESEARCH tag {text:?}"));
        assert!(r[..end].chars().all(|c| c.is_ascii_graphic() && c != '"'));
        rest = &r[end + 2..];
    }
    if let Some(r) = rest.strip_prefix(" UID") {
        rest = r;
    }
    let words: Vec<&str> = rest.split(' ').skip(1).collect();
    assert!(rest.is_empty() || rest.starts_with(' '), "{text:?}");
    assert!(words.len() % 2 == 0, "ESEARCH pairs: {text:?}");
    let mut seen = Vec::new();
    for pair in words.chunks(2) {
        let (name, value) = (pair[0], pair[1]);
        assert!(!seen.contains(&name), "repeated {name}: {text:?}");
        seen.push(name);
        match name {
            "MIN" | "MAX" | "COUNT" => {
                assert!(value.parse::<u32>().is_ok(), "{text:?}");
            }
            // RFC 7162 §3.1.5: the highest modseq of what a SEARCH MODSEQ reported
            "MODSEQ" => assert!(value.parse::<u64>().is_ok_and(|m| m > 0), "{text:?}"),
            "ALL" => assert!(
                !value.is_empty()
                    && value
                        .split(',')
                        .all(|r| r.split(':').all(|n| n.parse::<u32>().is_ok_and(|n| n > 0))),
                "{text:?}"
            ),
            _ => panic!("unknown ESEARCH item {name}: {text:?}"),
        }
    }
}

/// The value of `NAME value` pairs in an ESEARCH line.
pub fn esearch_item(line: &str, name: &str) -> Option<String> {
    let words: Vec<&str> = line.trim_end().split(' ').collect();
    words
        .windows(2)
        .find(|w| w[0] == name)
        .map(|w| w[1].to_string())
}
