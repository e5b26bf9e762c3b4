//! The PROXY protocol (HAProxy's "PROXY protocol" specification, versions 1 and 2): a
//! TCP proxy in front of a listener (haproxy `send-proxy`/`send-proxy-v2`, nginx
//! `proxy_protocol on`) sends one header naming the client before the client's bytes.
//!
//! Written here rather than taken from a crate (`ppp` parses a buffer): the header must be
//! read off the socket under a deadline and a size bound, consuming exactly its own
//! bytes, because what follows it is the client's (an IMAP command, a TLS ClientHello)
//! and belongs to the session. Version 1 is read a byte at a time up to its LF (at most
//! 107 bytes, spec §2.1), version 2 as its 16-byte prefix and the length it announces.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::{canonical_peer, Cidr};

/// How long a trusted proxy may take to send its header (Dovecot: 3 s,
/// `HAPROXY_TIMEOUT_MSECS`; a proxy sends it at once, before any client byte).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// The version 2 signature (spec §2.2).
const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// The longest version 1 line, CRLF included (spec §2.1).
const V1_MAX: usize = 107;
/// The most of a version 2 header after its 16-byte prefix: the addresses (216 bytes
/// for AF_UNIX) and room for TLVs (haproxy's unique id, ALPN, SSL details).
const V2_MAX_BODY: usize = 1024;

/// Why a connection on a PROXY listener was closed before its session began.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The connection does not come from `proxy_trusted_networks`.
    #[error("{0} is not a trusted proxy")]
    Untrusted(IpAddr),
    /// The header did not arrive in time.
    #[error("no PROXY header within {0:?}")]
    Timeout(Duration),
    /// The first bytes are not a valid PROXY header.
    #[error("malformed PROXY header: {0}")]
    Malformed(&'static str),
    /// The connection failed or closed while the header was read.
    #[error("reading the PROXY header: {0}")]
    Io(io::Error),
}

/// The OS error is in the message, so it is not also the `source()` (see `error_text` in
/// crates/maildex).
impl From<io::Error> for ProxyError {
    fn from(e: io::Error) -> Self {
        ProxyError::Io(e)
    }
}

/// The client of a connection that `peer` made to a PROXY listener: refused unless `peer`
/// is in `trusted`; then the address of the header read from `stream` within `within`
/// (exactly the header's bytes are consumed), or `peer` itself for a header that names
/// no client (v2 `LOCAL`, a proxy's health check; v1 `UNKNOWN`; v2 `UNSPEC`/`AF_UNIX`).
pub async fn proxied_peer<S: AsyncRead + Unpin + ?Sized>(
    stream: &mut S,
    peer: SocketAddr,
    trusted: &[Cidr],
    within: Duration,
) -> Result<SocketAddr, ProxyError> {
    if !trusted.iter().any(|net| net.contains(peer.ip())) {
        return Err(ProxyError::Untrusted(peer.ip()));
    }
    match tokio::time::timeout(within, read_header(stream)).await {
        Ok(Ok(client)) => Ok(client.map_or(peer, canonical_peer)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ProxyError::Timeout(within)),
    }
}

/// [`proxied_peer`] with [`HEADER_TIMEOUT`] for a listener's accept path: the client is
/// recorded as the `peer` field of the connection's span; a refusal is logged and gives
/// `None` (the caller closes the connection without writing to it, as Dovecot does).
pub async fn client_behind<S: AsyncRead + Unpin + ?Sized>(
    stream: &mut S,
    peer: SocketAddr,
    trusted: &[Cidr],
) -> Option<SocketAddr> {
    match proxied_peer(stream, peer, trusted, HEADER_TIMEOUT).await {
        Ok(client) => {
            tracing::Span::current().record("peer", tracing::field::display(client));
            Some(client)
        }
        Err(e) => {
            tracing::info!(error = %e, "proxied connection refused");
            None
        }
    }
}

/// Reads one header; `None` when it names no client.
async fn read_header<S: AsyncRead + Unpin + ?Sized>(
    s: &mut S,
) -> Result<Option<SocketAddr>, ProxyError> {
    let mut prefix = [0u8; 16];
    s.read_exact(&mut prefix[..6]).await?;
    if &prefix[..6] == b"PROXY " {
        return read_v1(s).await;
    }
    if prefix[..6] != V2_SIGNATURE[..6] {
        return Err(ProxyError::Malformed("not a PROXY header"));
    }
    s.read_exact(&mut prefix[6..]).await?;
    if prefix[..12] != V2_SIGNATURE {
        return Err(ProxyError::Malformed("bad version 2 signature"));
    }
    let (version_command, family) = (prefix[12], prefix[13]);
    let len = usize::from(u16::from_be_bytes([prefix[14], prefix[15]]));
    if version_command >> 4 != 2 {
        return Err(ProxyError::Malformed("unknown version"));
    }
    if len > V2_MAX_BODY {
        return Err(ProxyError::Malformed("header too long"));
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).await?;
    match version_command & 0x0f {
        0x0 => Ok(None), // LOCAL: the proxy's own connection (spec §2.2)
        0x1 => v2_source(family, &body),
        _ => Err(ProxyError::Malformed("unknown command")),
    }
}

/// The source address of a version 2 `PROXY` command (spec §2.2: family in the high
/// nibble, 1 = AF_INET, 2 = AF_INET6; UNSPEC and AF_UNIX name no TCP client).
fn v2_source(family: u8, body: &[u8]) -> Result<Option<SocketAddr>, ProxyError> {
    // source address, destination address, source port, destination port
    let (ip_len, need) = match family >> 4 {
        0x1 => (4, 12),
        0x2 => (16, 36),
        0x0 | 0x3 => return Ok(None),
        _ => return Err(ProxyError::Malformed("unknown address family")),
    };
    if body.len() < need {
        return Err(ProxyError::Malformed("address block too short"));
    }
    let ip = match ip_len {
        4 => IpAddr::from([body[0], body[1], body[2], body[3]]),
        _ => {
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&body[..16]);
            IpAddr::from(octets)
        }
    };
    let port = u16::from_be_bytes([body[2 * ip_len], body[2 * ip_len + 1]]);
    Ok(Some(SocketAddr::new(ip, port)))
}

/// The rest of a version 1 line after `PROXY `: `TCP4|TCP6 SRC DST SPORT DPORT\r\n` or
/// `UNKNOWN ...\r\n` (spec §2.1).
async fn read_v1<S: AsyncRead + Unpin + ?Sized>(
    s: &mut S,
) -> Result<Option<SocketAddr>, ProxyError> {
    let mut line = Vec::with_capacity(V1_MAX);
    line.extend_from_slice(b"PROXY ");
    while line.last() != Some(&b'\n') {
        if line.len() == V1_MAX {
            return Err(ProxyError::Malformed("version 1 line too long"));
        }
        line.push(s.read_u8().await?);
    }
    let text = line
        .strip_suffix(b"\r\n")
        .and_then(|l| std::str::from_utf8(l).ok())
        .ok_or(ProxyError::Malformed(
            "version 1 line not ASCII ending in CRLF",
        ))?;
    let fields: Vec<&str> = text.split(' ').collect();
    match fields.as_slice() {
        ["PROXY", "UNKNOWN", ..] => Ok(None),
        ["PROXY", proto @ ("TCP4" | "TCP6"), src, dst, sport, dport] => {
            let v4 = *proto == "TCP4";
            let (Some(src), Some(_), Some(sport), Some(_)) = (
                parse_ip(src, v4),
                parse_ip(dst, v4),
                parse_port(sport),
                parse_port(dport),
            ) else {
                return Err(ProxyError::Malformed("bad version 1 addresses or ports"));
            };
            Ok(Some(SocketAddr::new(src, sport)))
        }
        _ => Err(ProxyError::Malformed("bad version 1 line")),
    }
}

/// A port of a version 1 line: decimal, no leading zero.
fn parse_port(s: &str) -> Option<u16> {
    s.parse().ok().filter(|_| !s.starts_with('0') || s == "0")
}

fn parse_ip(s: &str, v4: bool) -> Option<IpAddr> {
    if v4 {
        s.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
    } else {
        s.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    const PROXY: &str = "127.0.0.1:40000";

    fn lo() -> Vec<Cidr> {
        vec![Cidr::parse("127.0.0.1/32").unwrap()]
    }

    /// Runs `proxied_peer` over `input`, returning its answer and the bytes left unread.
    async fn run(input: &[u8]) -> (Result<SocketAddr, ProxyError>, Vec<u8>) {
        let (mut a, mut b) = tokio::io::duplex(4096);
        a.write_all(input).await.unwrap();
        drop(a);
        let r = proxied_peer(&mut b, PROXY.parse().unwrap(), &lo(), HEADER_TIMEOUT).await;
        let mut rest = Vec::new();
        b.read_to_end(&mut rest).await.unwrap();
        (r, rest)
    }

    fn v2(command: u8, family: u8, body: &[u8]) -> Vec<u8> {
        let mut h = V2_SIGNATURE.to_vec();
        h.extend([0x20 | command, family]);
        h.extend((body.len() as u16).to_be_bytes());
        h.extend(body);
        h
    }

    #[tokio::test]
    async fn version_1_names_the_client_and_leaves_what_follows() {
        let (r, rest) = run(b"PROXY TCP4 192.0.2.7 127.0.0.1 5555 143\r\na LOGIN\r\n").await;
        assert_eq!(r.unwrap(), "192.0.2.7:5555".parse().unwrap());
        assert_eq!(rest, b"a LOGIN\r\n");
        let (r, _) = run(b"PROXY TCP6 2001:db8::1 ::1 5555 143\r\n").await;
        assert_eq!(r.unwrap(), "[2001:db8::1]:5555".parse().unwrap());
        let (r, rest) = run(b"PROXY UNKNOWN whatever\r\nx").await;
        assert_eq!(r.unwrap(), PROXY.parse().unwrap());
        assert_eq!(rest, b"x");
    }

    #[tokio::test]
    async fn version_2_names_the_client_and_local_keeps_the_proxy() {
        let mut body = vec![198, 51, 100, 9, 127, 0, 0, 1];
        body.extend(6000u16.to_be_bytes());
        body.extend(143u16.to_be_bytes());
        body.extend([0x04, 0, 1, b'x']); // a TLV (NOOP) after the addresses
        let mut input = v2(1, 0x11, &body);
        input.extend(b"\x16\x03\x01");
        let (r, rest) = run(&input).await;
        assert_eq!(r.unwrap(), "198.51.100.9:6000".parse().unwrap());
        assert_eq!(rest, b"\x16\x03\x01");
        let mut body6 = "2001:db8::9".parse::<Ipv6Addr>().unwrap().octets().to_vec();
        body6.extend(Ipv6Addr::LOCALHOST.octets());
        body6.extend([0x17, 0x70, 0, 143]);
        let (r, _) = run(&v2(1, 0x21, &body6)).await;
        assert_eq!(r.unwrap(), "[2001:db8::9]:6000".parse().unwrap());
        // a v4-mapped client is its IPv4 address, as on a dual-stack socket
        let mut mapped = "::ffff:192.0.2.1"
            .parse::<Ipv6Addr>()
            .unwrap()
            .octets()
            .to_vec();
        mapped.extend([0; 20]);
        let (r, _) = run(&v2(1, 0x21, &mapped)).await;
        assert_eq!(r.unwrap().ip(), "192.0.2.1".parse::<IpAddr>().unwrap());
        let (r, rest) = run(&[v2(0, 0x00, &[]), b"a".to_vec()].concat()).await;
        assert_eq!(r.unwrap(), PROXY.parse().unwrap());
        assert_eq!(rest, b"a");
    }

    #[tokio::test]
    async fn malformed_and_missing_headers_are_errors() {
        let long_v1 = [b"PROXY TCP4 ".as_slice(), &[b'1'; 200]].concat();
        let cases: Vec<Vec<u8>> = vec![
            b"a LOGIN alice pw\r\n".to_vec(),
            b"PROXY TCP4 192.0.2.7 127.0.0.1 5555\r\n".to_vec(),
            b"PROXY TCP4 2001:db8::1 127.0.0.1 5555 143\r\n".to_vec(),
            b"PROXY TCP4 192.0.2.7 127.0.0.1 70000 143\r\n".to_vec(),
            b"PROXY TCP4 192.0.2.7 127.0.0.1 5555 143\n".to_vec(),
            long_v1,
            v2(1, 0x11, &[1, 2, 3]),
            v2(2, 0x11, &[0; 12]),
            v2(1, 0x11, &vec![0; V2_MAX_BODY + 1]),
            V2_SIGNATURE[..8].to_vec(),
            Vec::new(),
        ];
        for input in cases {
            let (r, _) = run(&input).await;
            assert!(r.is_err(), "{:?} accepted", String::from_utf8_lossy(&input));
        }
    }

    #[tokio::test]
    async fn an_untrusted_peer_is_refused_before_anything_is_read() {
        let (_a, mut b) = tokio::io::duplex(64);
        let peer = "192.0.2.1:1".parse().unwrap();
        let r = proxied_peer(&mut b, peer, &lo(), HEADER_TIMEOUT).await;
        assert!(matches!(r, Err(ProxyError::Untrusted(_))), "{r:?}");
    }

    #[tokio::test]
    async fn a_silent_proxy_times_out() {
        let (_a, mut b) = tokio::io::duplex(64);
        let within = Duration::from_millis(50);
        let r = proxied_peer(&mut b, PROXY.parse().unwrap(), &lo(), within).await;
        assert!(matches!(r, Err(ProxyError::Timeout(_))), "{r:?}");
    }
}
