//! Listeners: TCP and unix sockets, and the accept loop.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use maildex_config::{Cidr, Listen, LmtpConfig};
use maildex_net::proxy::client_behind;
use maildex_net::unix::UnixBindError;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::{LmtpError, Shared};

/// A bound listener, not yet registered with a runtime.
pub(crate) enum Bound {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener, PathBuf),
}

/// A listener registered with the runtime.
pub(crate) enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener, PathBuf),
}

fn err<'a>(l: &'a Listen, reason: &'static str) -> impl FnOnce(std::io::Error) -> LmtpError + 'a {
    move |error| LmtpError::Listen {
        listen: l.to_string(),
        reason,
        error,
    }
}

pub(crate) fn bind(l: &Listen, config: &LmtpConfig) -> Result<Bound, LmtpError> {
    match l {
        Listen::Tcp(addr) => {
            let all: Vec<SocketAddr> = config
                .listen
                .iter()
                .filter_map(|l| match l {
                    Listen::Tcp(a) => Some(*a),
                    Listen::Unix(_) => None,
                })
                .chain(config.proxy_listen.iter().copied())
                .collect();
            let s = maildex_net::bind_tcp(*addr, &all).map_err(err(l, "bind"))?;
            Ok(Bound::Tcp(s))
        }
        Listen::Unix(path) => bind_unix(l, path, config),
    }
}

fn bind_unix(l: &Listen, path: &Path, config: &LmtpConfig) -> Result<Bound, LmtpError> {
    let s = maildex_net::unix::bind(
        path,
        config.socket_mode,
        config.socket_owner.as_deref(),
        config.socket_group.as_deref(),
    )
    .map_err(|e| match e {
        UnixBindError::Io { reason, error } => err(l, reason)(error),
        UnixBindError::UnknownId { what, name } => LmtpError::UnknownId { what, name },
    })?;
    Ok(Bound::Unix(s, path.to_path_buf()))
}

impl Bound {
    pub(crate) fn local(&self) -> Listen {
        match self {
            Bound::Tcp(s) => match s.local_addr() {
                Ok(a) => Listen::Tcp(a),
                Err(_) => Listen::Tcp(([0, 0, 0, 0], 0).into()),
            },
            Bound::Unix(_, p) => Listen::Unix(p.clone()),
        }
    }

    pub(crate) fn into_tokio(self) -> Result<Listener, LmtpError> {
        let l = self.local();
        Ok(match self {
            Bound::Tcp(s) => {
                Listener::Tcp(tokio::net::TcpListener::from_std(s).map_err(err(&l, "register"))?)
            }
            Bound::Unix(s, p) => Listener::Unix(
                tokio::net::UnixListener::from_std(s).map_err(err(&l, "register"))?,
                p,
            ),
        })
    }
}

/// Accepts until `shutdown`, one task per connection holding one of `slots`; then
/// waits for the connections to end and removes a unix socket file. With `proxy` (the
/// trusted networks of a listener behind a proxy) each connection must start with a PROXY
/// protocol header, whose client is then the session's (logs, `Received:`).
pub(crate) async fn accept_loop(
    listener: Listener,
    shared: Arc<Shared>,
    slots: Arc<Semaphore>,
    shutdown: CancellationToken,
    proxy: Option<Arc<[Cidr]>>,
) {
    let mut conns = JoinSet::new();
    loop {
        let Some(permit) = maildex_net::connection_slot(&slots, &mut conns, &shutdown).await else {
            break;
        };
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            a = accept(&listener) => a,
        };
        match accepted {
            Ok((mut stream, peer, tcp_peer)) => {
                let id = maildex_net::session_id();
                let span = tracing::info_span!(
                    "lmtp",
                    session = %id,
                    peer = tracing::field::Empty,
                    proxy = tracing::field::Empty
                );
                let field = if proxy.is_some() { "proxy" } else { "peer" };
                span.record(field, tracing::field::display(&peer));
                let shared = Arc::clone(&shared);
                let shutdown = shutdown.clone();
                let proxy = proxy.clone();
                conns.spawn(tracing::Instrument::instrument(
                    async move {
                        let peer_ip = match (proxy, tcp_peer) {
                            (Some(trusted), Some(tcp_peer)) => {
                                match client_behind(&mut stream, tcp_peer, &trusted).await {
                                    Some(client) => Some(client.ip()),
                                    None => return,
                                }
                            }
                            _ => tcp_peer.map(|a| a.ip()),
                        };
                        let client = crate::conn::Client { id, peer_ip };
                        crate::conn::serve(stream, client, shared, shutdown).await;
                        drop(permit);
                    },
                    span,
                ));
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning
                tracing::warn!(error = %e, "LMTP accept failed");
                drop(permit);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    if let Listener::Unix(_, path) = &listener {
        if let Err(e) = std::fs::remove_file(path) {
            tracing::warn!(path = %path.display(), error = %e, "could not remove LMTP socket");
        }
    }
    drop(listener);
    while conns.join_next().await.is_some() {}
}

/// A connected client, TCP or unix.
pub(crate) type Stream = Box<dyn crate::conn::AsyncStream>;

/// A client's stream, its address for the logs and its TCP address (none over a unix
/// socket).
async fn accept(listener: &Listener) -> std::io::Result<(Stream, String, Option<SocketAddr>)> {
    match listener {
        Listener::Tcp(l) => {
            let (s, peer) = l.accept().await?;
            let _ = s.set_nodelay(true);
            let peer = maildex_net::canonical_peer(peer);
            Ok((Box::new(s), peer.to_string(), Some(peer)))
        }
        Listener::Unix(l, path) => {
            let (s, _) = l.accept().await?;
            Ok((Box::new(s), format!("unix:{}", path.display()), None))
        }
    }
}
