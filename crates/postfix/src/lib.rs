//! maildex-postfix: the sockets postfix asks about maildex's users, served from the same
//! [`Accounts`] as IMAP and LMTP (passwd-file or SQL, aliases, the lookup cache):
//!
//! - the SASL authentication socket for `smtpd_sasl_type = dovecot` (`auth` module): the
//!   Dovecot auth protocol with PLAIN and LOGIN, through the same [`LoginGate`] as IMAP
//!   logins (penalties per client address and login name, KDF slots, the password length
//!   limit, the same time for every failure), a directory that is down answering `FAIL
//!   ... temp`;
//! - the socketmap server (`socketmap` module) for `virtual_mailbox_maps` (map `mailbox`:
//!   is the address a user) and `virtual_alias_maps` (map `alias`: its targets), `TEMP`
//!   when the directory is down.
//!
//! The wire formats are in `maildex-postfix-proto`; this crate only reads, writes and
//! asks the accounts. Each socket serves at most `[postfix] max_connections` connections at
//! once (further ones wait to be accepted); a line or request over the protocol's limit
//! closes its connection, so a client of the socket holds at most one bounded line and a
//! bounded number of requests in progress.

#![warn(missing_docs)]

mod auth;
mod socketmap;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use maildex_accounts::Accounts;
use maildex_config::{Listen, PostfixConfig};
use maildex_net::login::LoginGate;
use maildex_net::unix::UnixBindError;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// A socket could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("postfix {what} socket {listen}: {error}")]
pub struct PostfixError {
    /// "SASL" or "socketmap".
    what: &'static str,
    /// The socket (config form).
    listen: String,
    /// What failed.
    error: UnixBindError,
}

/// Which protocol a socket speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Auth,
    Socketmap,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Auth => "SASL",
            Kind::Socketmap => "socketmap",
        }
    }
}

enum Bound {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener, PathBuf),
}

/// What the connections share.
struct Shared {
    accounts: Arc<Accounts>,
    logins: Arc<LoginGate>,
}

/// The bound sockets of `[postfix]`, ready to [`Servers::run`].
pub struct Servers {
    bound: Vec<(Kind, Bound)>,
    max_connections: usize,
    shared: Arc<Shared>,
}

impl Servers {
    /// Binds the sockets `config` names (none: nothing to serve). Unix sockets get the
    /// mode, owner and group of the config, a stale socket file is replaced. `logins` is
    /// the IMAP server's gate, so SMTP AUTH and IMAP share penalties.
    pub fn bind(
        config: &PostfixConfig,
        accounts: Arc<Accounts>,
        logins: Arc<LoginGate>,
    ) -> Result<Servers, PostfixError> {
        let mut bound = Vec::new();
        for (kind, listen) in [
            (Kind::Auth, &config.auth_socket),
            (Kind::Socketmap, &config.socketmap),
        ] {
            let Some(listen) = listen else { continue };
            let error = |error| PostfixError {
                what: kind.name(),
                listen: listen.to_string(),
                error,
            };
            let b = match listen {
                Listen::Tcp(addr) => {
                    Bound::Tcp(maildex_net::bind_tcp(*addr, &[*addr]).map_err(|e| {
                        error(UnixBindError::Io {
                            reason: "bind",
                            error: e,
                        })
                    })?)
                }
                Listen::Unix(path) => Bound::Unix(
                    maildex_net::unix::bind(
                        path,
                        config.socket_mode,
                        config.socket_owner.as_deref(),
                        config.socket_group.as_deref(),
                    )
                    .map_err(error)?,
                    path.clone(),
                ),
            };
            bound.push((kind, b));
        }
        Ok(Servers {
            bound,
            max_connections: config.max_connections.max(1),
            shared: Arc::new(Shared { accounts, logins }),
        })
    }

    /// The bound sockets: (`"SASL"` or `"socketmap"`, address with its real port).
    pub fn local_addrs(&self) -> Vec<(&'static str, Listen)> {
        self.bound
            .iter()
            .map(|(kind, b)| {
                let l = match b {
                    Bound::Tcp(s) => Listen::Tcp(
                        s.local_addr()
                            .unwrap_or_else(|_| ([127, 0, 0, 1], 0).into()),
                    ),
                    Bound::Unix(_, p) => Listen::Unix(p.clone()),
                };
                (kind.name(), l)
            })
            .collect()
    }

    /// Serves until `shutdown`; then stops accepting, closes the connections and removes
    /// the unix socket files.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut loops = JoinSet::new();
        for (kind, bound) in self.bound {
            let slots = Arc::new(Semaphore::new(self.max_connections));
            loops.spawn(accept_loop(
                kind,
                bound,
                Arc::clone(&self.shared),
                slots,
                shutdown.clone(),
            ));
        }
        while loops.join_next().await.is_some() {}
    }
}

/// A connected client.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

async fn accept_loop(
    kind: Kind,
    bound: Bound,
    shared: Arc<Shared>,
    slots: Arc<Semaphore>,
    shutdown: CancellationToken,
) {
    let (tcp, unix, path) = match bound {
        Bound::Tcp(s) => (tokio::net::TcpListener::from_std(s).ok(), None, None),
        Bound::Unix(s, p) => (None, tokio::net::UnixListener::from_std(s).ok(), Some(p)),
    };
    if tcp.is_none() && unix.is_none() {
        tracing::error!(socket = kind.name(), "cannot register the postfix socket");
        return;
    }
    let mut conns = JoinSet::new();
    loop {
        let Some(permit) = maildex_net::connection_slot(&slots, &mut conns, &shutdown).await else {
            break;
        };
        let accepted: std::io::Result<Box<dyn Stream>> = tokio::select! {
            _ = shutdown.cancelled() => break,
            a = async {
                match (&tcp, &unix) {
                    (Some(l), _) => l.accept().await.map(|(s, _)| Box::new(s) as Box<dyn Stream>),
                    (_, Some(l)) => l.accept().await.map(|(s, _)| Box::new(s) as Box<dyn Stream>),
                    _ => Err(std::io::ErrorKind::NotConnected.into()),
                }
            } => a,
        };
        match accepted {
            Ok(stream) => {
                let shared = Arc::clone(&shared);
                let stop = shutdown.clone();
                let span = tracing::info_span!("postfix", socket = kind.name(), session = %maildex_net::session_id());
                conns.spawn(tracing::Instrument::instrument(
                    async move {
                        tokio::select! {
                            _ = stop.cancelled() => {}
                            r = serve(kind, stream, &shared) => if let Err(e) = r {
                                tracing::debug!(error = %e, "connection ended");
                            },
                        }
                        drop(permit);
                    },
                    span,
                ));
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning
                tracing::warn!(socket = kind.name(), error = %e, "accept failed");
                drop(permit);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    if let Some(path) = path {
        let _ = std::fs::remove_file(&path);
    }
    conns.abort_all();
    while conns.join_next().await.is_some() {}
}

async fn serve(kind: Kind, stream: Box<dyn Stream>, shared: &Shared) -> std::io::Result<()> {
    match kind {
        Kind::Auth => auth::serve(stream, shared).await,
        Kind::Socketmap => socketmap::serve(stream, shared).await,
    }
}
