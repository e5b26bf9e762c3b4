//! maildex-lmtp: the LMTP server (RFC 2033) that postfix delivers to.
//!
//! [`Server::bind`] opens every configured listener (TCP addresses and `unix:` socket
//! paths); [`Server::run`] accepts connections until its cancellation token fires, one
//! task per connection, at most [`Limits::max_connections`] at once. Each connection
//! drives a sans-IO [`maildex_lmtp_proto::Session`]: bytes read go in, replies come out,
//! and the server decides on recipients ([`maildex_accounts::Accounts`]) and delivers.
//!
//! Delivery (`deliver` module): the message data is streamed into `tmp/` of the first
//! recipient's mailbox as it arrives, behind the `Return-Path` (and, for a single
//! recipient, `Delivered-To`) and `Received:` headers Dovecot's LMTP writes (the
//! `Received:` id is the session id of the logs, unique across restarts); at the end it is fsynced and
//! summarized once, then for each recipient hard-linked (or copied across filesystems)
//! into the mailbox, numbered in dovecot-uidlist and committed to the index, and only
//! then answered `250` (RFC 2033 §4.2: one reply per recipient). Store work runs on
//! tokio's blocking pool, so sessions run in parallel and deliveries to one user share
//! index commits (group commit).
//!
//! Shutdown: no new connections; an idle session gets `421 4.3.2` at once, one inside a
//! transaction may finish it within [`Limits::shutdown_timeout`] and then gets `421`.

#![warn(missing_docs)]

mod conn;
mod deliver;
mod listen;

use std::sync::Arc;
use std::time::Duration;

use maildex_accounts::Accounts;
use maildex_config::{Cidr, Listen, LmtpConfig};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Failures of the server itself (a session's failures end only that session).
#[derive(Debug, thiserror::Error)]
pub enum LmtpError {
    /// A listener could not be set up; names the address or socket path.
    #[error("LMTP listener {listen}: {reason}: {error}")]
    Listen {
        /// The listener (config form).
        listen: String,
        /// What was being done.
        reason: &'static str,
        /// What the OS said (in the message; not a `source()`).
        error: std::io::Error,
    },
    /// A `socket_owner` / `socket_group` that names no user or group.
    #[error("LMTP socket {what} {name:?}: no such {what}")]
    UnknownId {
        /// "user" or "group".
        what: &'static str,
        /// The name.
        name: String,
    },
}

/// Limits and timeouts of the server and its sessions.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Protocol limits: message size (SIZE), recipients, line length, host name.
    pub proto: maildex_lmtp_proto::Limits,
    /// Most connections served at once; further ones wait in the listen backlog.
    pub max_connections: usize,
    /// Wait for the next command (RFC 5321 §4.5.3.2.7: 5 minutes).
    pub command_timeout: Duration,
    /// Wait for more message data inside DATA or BDAT.
    pub data_timeout: Duration,
    /// On shutdown, time a transaction in progress gets to finish.
    pub shutdown_timeout: Duration,
    /// Prepend a `Received:` header (`[lmtp] add_received_header`).
    pub add_received_header: bool,
    /// Longest a client may take none of its replies before the connection is closed.
    pub write_timeout: Duration,
}

impl Limits {
    /// Limits from `[lmtp]`; the host name defaults to the system's.
    pub fn from_config(c: &LmtpConfig) -> Limits {
        let mut proto = maildex_lmtp_proto::Limits::new(c.host_name());
        proto.max_message_size = c.max_message_size;
        proto.max_recipients = c.max_recipients;
        proto.max_line = c.max_line_length;
        Limits {
            proto,
            max_connections: c.max_connections.max(1),
            command_timeout: c.command_timeout,
            data_timeout: c.data_timeout,
            shutdown_timeout: c.shutdown_timeout,
            add_received_header: c.add_received_header,
            write_timeout: c.write_timeout,
        }
    }
}

/// What every connection task shares.
pub(crate) struct Shared {
    pub accounts: Arc<Accounts>,
    pub limits: Limits,
}

/// Bound LMTP listeners, ready to [`Server::run`].
pub struct Server {
    listeners: Vec<listen::Bound>,
    /// `proxy_listen`: TCP listeners behind a proxy (PROXY protocol header first).
    proxy_listeners: Vec<listen::Bound>,
    proxy_trusted: Arc<[Cidr]>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("listeners", &self.local_addrs())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Binds every listener of `config` (TCP, and unix sockets with a stale socket file
    /// removed and mode/owner/group set). Needs no runtime; [`Server::run`] does.
    pub fn bind(
        config: &LmtpConfig,
        accounts: Arc<Accounts>,
        limits: Limits,
    ) -> Result<Server, LmtpError> {
        let mut listeners = Vec::with_capacity(config.listen.len());
        for l in &config.listen {
            listeners.push(listen::bind(l, config)?);
        }
        let mut proxy_listeners = Vec::with_capacity(config.proxy_listen.len());
        for &addr in &config.proxy_listen {
            proxy_listeners.push(listen::bind(&Listen::Tcp(addr), config)?);
        }
        Ok(Server {
            listeners,
            proxy_listeners,
            proxy_trusted: config.proxy_trusted_networks.as_slice().into(),
            shared: Arc::new(Shared { accounts, limits }),
        })
    }

    /// The bound addresses: TCP with the real port (tests bind `127.0.0.1:0`), and the
    /// unix socket paths.
    pub fn local_addrs(&self) -> Vec<Listen> {
        self.listeners.iter().map(listen::Bound::local).collect()
    }

    /// The bound `proxy_listen` addresses.
    pub fn proxy_addrs(&self) -> Vec<Listen> {
        self.proxy_listeners
            .iter()
            .map(listen::Bound::local)
            .collect()
    }

    /// Serves until `shutdown` is cancelled, then stops accepting, lets sessions end
    /// (see the crate docs) and returns once all have. Unix socket files are removed.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), LmtpError> {
        let slots = Arc::new(Semaphore::new(self.shared.limits.max_connections));
        let mut loops = JoinSet::new();
        let proxied = self
            .proxy_listeners
            .into_iter()
            .map(|b| (b, Some(&self.proxy_trusted)));
        for (bound, proxy) in self.listeners.into_iter().map(|b| (b, None)).chain(proxied) {
            let listener = bound.into_tokio()?;
            loops.spawn(listen::accept_loop(
                listener,
                Arc::clone(&self.shared),
                Arc::clone(&slots),
                shutdown.clone(),
                proxy.cloned(),
            ));
        }
        while let Some(r) = loops.join_next().await {
            if let Err(e) = r {
                tracing::error!(error = %e, "LMTP accept loop failed");
            }
        }
        Ok(())
    }
}
