//! maildex-net: what the IMAP and LMTP servers share at the socket level: binding a TCP
//! listener so that `0.0.0.0:143` and `[::]:143` can be configured together, and the one
//! form of a client's address that connection limits, login penalties, the loopback
//! check and the logs all use; writes under a deadline ([`write_all_within`]); networks
//! ([`Cidr`]) and the PROXY protocol header of a listener behind a proxy ([`proxy`]);
//! login penalties and password-check slots ([`login`]); unix socket listeners ([`unix`]).

#![warn(missing_docs)]

mod cidr;
pub mod login;
pub mod proxy;
pub mod unix;

pub use cidr::Cidr;

use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

/// Connections the kernel queues before they are accepted (tokio's own default).
const BACKLOG: i32 = 1024;

/// Binds a non-blocking TCP listener on `addr`, one of the listeners `all` of a server.
///
/// An IPv6 socket is made IPv6-only (`IPV6_V6ONLY`, RFC 3493 §5.3) when `all` also has
/// an IPv4 address on its port, as Dovecot's `listen = *, ::` does: without it `[::]:143`
/// takes the IPv4 port too (Linux's default `bindv6only = 0`) and
/// `["0.0.0.0:143", "[::]:143"]` fails with "Address already in use". Alone, `[::]:143`
/// keeps the system's dual-stack default, so a configuration that relied on it still
/// serves IPv4 clients (as IPv4-mapped addresses, see [`canonical_ip`]). `SO_REUSEADDR`
/// as the standard library sets it, so a restart does not wait for TIME_WAIT connections.
pub fn bind_tcp(addr: SocketAddr, all: &[SocketAddr]) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() && all.iter().any(|a| a.is_ipv4() && a.port() == addr.port()) {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// A client's address as every check and log line uses it: an IPv4-mapped IPv6
/// address (`::ffff:127.0.0.1`, what an IPv4 client looks like on a dual-stack socket,
/// RFC 4291 §2.5.5.2) becomes the IPv4 address, so it is loopback when that is and
/// counts against the same limits as the plain IPv4 address.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// [`canonical_ip`] of a peer, port kept.
pub fn canonical_peer(peer: SocketAddr) -> SocketAddr {
    SocketAddr::new(canonical_ip(peer.ip()), peer.port())
}

/// Waits for a free connection slot of `slots` (a listener's connection limit), reaping
/// the finished connection tasks of `conns` meanwhile; `None` once `shutdown` fires.
pub async fn connection_slot<T: 'static>(
    slots: &std::sync::Arc<tokio::sync::Semaphore>,
    conns: &mut tokio::task::JoinSet<T>,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            p = std::sync::Arc::clone(slots).acquire_owned() => return p.ok(),
        }
    }
}

/// Writes all of `buf` to `w` and flushes it, as `write_all` and `flush` do, but gives up
/// with [`io::ErrorKind::TimedOut`] when the peer takes nothing for `stall` (it stopped
/// reading: without this its connection, and whatever output is queued for it, would be
/// held for ever), or at `by` however it progresses (a session's own deadline, such as
/// the login timeout). Progress restarts the `stall` timer, so a slow but reading client
/// is never cut off, as Dovecot's output timeout (5 minutes without progress) behaves.
pub async fn write_all_within<W: AsyncWrite + Unpin + ?Sized>(
    w: &mut W,
    mut buf: &[u8],
    stall: Duration,
    by: Option<Instant>,
) -> io::Result<()> {
    let deadline = || {
        let next = Instant::now() + stall;
        by.map_or(next, |by| by.min(next))
    };
    let stalled = || io::Error::new(io::ErrorKind::TimedOut, "the client stopped reading");
    while !buf.is_empty() {
        match tokio::time::timeout_at(deadline(), w.write(buf)).await {
            Ok(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(Ok(n)) => buf = &buf[n..],
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(stalled()),
        }
    }
    tokio::time::timeout_at(deadline(), w.flush())
        .await
        .map_err(|_| stalled())?
}

/// A session id unique across restarts, for the IMAP and LMTP logs and LMTP's `Received:`
/// ids: this process's start time (microseconds, base 36) and a counter, so the lines of
/// two runs never share an id.
pub fn session_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    static PROCESS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let tag = PROCESS.get_or_init(|| {
        let mut n = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        let mut digits = Vec::new();
        while n > 0 {
            digits.push(b"0123456789abcdefghijklmnopqrstuvwxyz"[(n % 36) as usize]);
            n /= 36;
        }
        digits.reverse();
        String::from_utf8(digits).unwrap_or_default()
    });
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{tag}-{n}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapped_address_is_its_ipv4_address() {
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:5000".parse().unwrap();
        let peer = canonical_peer(mapped);
        assert_eq!(peer, "127.0.0.1:5000".parse::<SocketAddr>().unwrap());
        assert!(peer.ip().is_loopback());
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(canonical_ip(v6), v6);
        assert_eq!(
            canonical_ip("::1".parse().unwrap()),
            "::1".parse::<IpAddr>().unwrap()
        );
    }
}
