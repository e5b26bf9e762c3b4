//! The listeners: IMAP on port 143 style addresses (plain, STARTTLS offered when TLS is
//! configured) and IMAPS (implicit TLS, RFC 8314 §3.2), each also behind a TCP proxy that
//! sends a PROXY protocol header first ([`ProxyListeners`]). A task per connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use maildex_net::proxy::client_behind;
use maildex_net::Cidr;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::context::Shared;
use crate::session::Session;
use crate::stream::Stream;

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Binding a listener failed.
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What the OS said (in the message; not a `source()`).
        error: std::io::Error,
    },
    /// An implicit-TLS listener is configured without `[tls]`.
    #[error("IMAPS listener {0} needs a [tls] certificate and key")]
    NoTls(SocketAddr),
}

struct Listener {
    socket: TcpListener,
    implicit_tls: bool,
    /// Behind a proxy: the networks it may connect from.
    proxy: Option<Arc<[Cidr]>>,
}

/// Listeners behind a TCP proxy (haproxy, nginx): every connection must come from
/// `trusted` and start with a PROXY protocol header (v1 or v2), whose client address is
/// then the session's, as Dovecot's `haproxy = yes` listeners behave.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProxyListeners<'a> {
    /// Plain listeners (STARTTLS offered when TLS is configured).
    pub plain: &'a [SocketAddr],
    /// Implicit-TLS listeners: the header comes before the TLS handshake.
    pub implicit_tls: &'a [SocketAddr],
    /// Where the proxy may connect from.
    pub trusted: &'a [Cidr],
}

/// Bound IMAP listeners, ready to run.
pub struct ImapServer {
    shared: Arc<Shared>,
    listeners: Vec<Listener>,
}

/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long running sessions get to say BYE at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

impl ImapServer {
    /// Binds `plain` (IMAP, STARTTLS when TLS is configured) and `implicit_tls` (IMAPS)
    /// addresses, and those of `proxy`. Port 0 picks a free port
    /// ([`ImapServer::local_addrs`] and [`ImapServer::proxy_addrs`] tell which).
    pub async fn bind(
        shared: Arc<Shared>,
        plain: &[SocketAddr],
        implicit_tls: &[SocketAddr],
        proxy: ProxyListeners<'_>,
    ) -> Result<ImapServer, ServerError> {
        let mut listeners = Vec::new();
        let all: Vec<SocketAddr> = [plain, implicit_tls, proxy.plain, proxy.implicit_tls].concat();
        let trusted: Arc<[Cidr]> = proxy.trusted.into();
        for (addrs, tls, behind) in [
            (plain, false, None),
            (implicit_tls, true, None),
            (proxy.plain, false, Some(&trusted)),
            (proxy.implicit_tls, true, Some(&trusted)),
        ] {
            for &addr in addrs {
                if tls && shared.tls.is_none() {
                    return Err(ServerError::NoTls(addr));
                }
                let socket = maildex_net::bind_tcp(addr, &all)
                    .and_then(TcpListener::from_std)
                    .map_err(|error| ServerError::Bind { addr, error })?;
                listeners.push(Listener {
                    socket,
                    implicit_tls: tls,
                    proxy: behind.cloned(),
                });
            }
        }
        Ok(ImapServer { shared, listeners })
    }

    /// The bound addresses not behind a proxy: (address, implicit TLS).
    pub fn local_addrs(&self) -> Vec<(SocketAddr, bool)> {
        self.addrs(false)
    }

    /// The bound addresses behind a proxy: (address, implicit TLS).
    pub fn proxy_addrs(&self) -> Vec<(SocketAddr, bool)> {
        self.addrs(true)
    }

    fn addrs(&self, proxied: bool) -> Vec<(SocketAddr, bool)> {
        self.listeners
            .iter()
            .filter(|l| l.proxy.is_some() == proxied)
            .filter_map(|l| l.socket.local_addr().ok().map(|a| (a, l.implicit_tls)))
            .collect()
    }

    /// Accepts connections until the shutdown token fires, then gives sessions a few
    /// seconds to say `* BYE` and returns.
    pub async fn run(self) {
        let mut accepts = JoinSet::new();
        let sessions = Arc::new(tokio::sync::Mutex::new(JoinSet::new()));
        for l in self.listeners {
            let shared = Arc::clone(&self.shared);
            let sessions = Arc::clone(&sessions);
            accepts.spawn(accept_loop(l, shared, sessions));
        }
        self.shared.shutdown.cancelled().await;
        accepts.abort_all();
        let mut sessions = sessions.lock().await;
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, async {
            while sessions.join_next().await.is_some() {}
        })
        .await;
        sessions.abort_all();
    }
}

/// Runs one session over an in-memory `stream` as if `peer` had connected to a plain
/// listener (no connection limits, no STARTTLS). Tests and the whole-server fuzz target
/// ([`crate::fuzzing`]) drive the real session code through it without sockets.
pub async fn serve_stream(shared: Arc<Shared>, stream: tokio::io::DuplexStream, peer: SocketAddr) {
    Session::new(Stream::Memory(stream), peer, shared)
        .run()
        .await;
}

async fn accept_loop(
    l: Listener,
    shared: Arc<Shared>,
    sessions: Arc<tokio::sync::Mutex<JoinSet<()>>>,
) {
    loop {
        let (mut tcp, peer) = match l.socket.accept().await {
            Ok((tcp, peer)) => (tcp, maildex_net::canonical_peer(peer)),
            Err(e) => {
                // EMFILE and friends: wait a little rather than spin
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let shared2 = Arc::clone(&shared);
        let id = maildex_net::session_id();
        // behind a proxy the span's `peer` is the header's client, set by client_behind
        let span = tracing::info_span!(
            "imap",
            session = %id,
            peer = tracing::field::Empty,
            proxy = tracing::field::Empty,
            user = tracing::field::Empty
        );
        let field = if l.proxy.is_some() { "proxy" } else { "peer" };
        span.record(field, tracing::field::display(peer));
        let mut set = sessions.lock().await;
        // reap finished sessions so the set does not grow
        while set.try_join_next().is_some() {}
        let (implicit_tls, proxy) = (l.implicit_tls, l.proxy.clone());
        set.spawn(
            async move {
                let peer = match proxy {
                    None => peer,
                    Some(trusted) => match client_behind(&mut tcp, peer, &trusted).await {
                        Some(client) => client,
                        None => return,
                    },
                };
                connection(tcp, peer, implicit_tls, shared2).await
            }
            .instrument(span),
        );
    }
}

async fn connection(mut tcp: TcpStream, peer: SocketAddr, implicit_tls: bool, shared: Arc<Shared>) {
    let slot = match shared.admit(peer.ip()) {
        Ok(slot) => slot,
        Err(why) => {
            tracing::info!(reason = why, "connection refused");
            if !implicit_tls {
                let line = format!("* BYE [UNAVAILABLE] {why}\r\n");
                let timeout = shared.settings.write_timeout;
                let _ =
                    maildex_net::write_all_within(&mut tcp, line.as_bytes(), timeout, None).await;
            }
            return;
        }
    };
    let stream = if implicit_tls {
        let Some(tls) = &shared.tls else { return };
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
            Ok(Ok(s)) => Stream::Tls(Box::new(s)),
            Ok(Err(e)) => {
                tracing::info!(error = %e, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::info!("TLS handshake timed out");
                return;
            }
        }
    } else {
        Stream::Plain(tcp)
    };
    tracing::debug!(tls = stream.is_tls(), "connected");
    Session::new(stream, peer, shared).run().await;
    drop(slot);
}
