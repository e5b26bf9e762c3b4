//! The maildex server process: the IMAP and LMTP listeners (and the `[postfix]` SASL and
//! socketmap sockets) of one configuration on one
//! tokio runtime, with graceful shutdown (SIGTERM/SIGINT: IMAP sessions get `* BYE`, LMTP
//! sessions finish their transaction) and reload (SIGHUP: certificates and the users and
//! aliases files). `maildex serve` runs [`serve_forever`]; tests start a [`Daemon`]
//! in-process on `127.0.0.1:0` and talk to it over real sockets.

#![warn(missing_docs)]

use std::net::SocketAddr;
use std::sync::Arc;

use maildex_accounts::Accounts;
use maildex_config::{Config, ImapConfig, Listen};
use maildex_imap::context::{Settings, Shared};
use maildex_imap::server::ImapServer;
use maildex_imap::tls::TlsSource;
use tokio::task::JoinHandle;

pub mod autoexpunge;
pub mod privileges;
pub mod text_indexer;
use tokio_util::sync::CancellationToken;

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// TLS certificate or key.
    #[error(transparent)]
    Tls(#[from] maildex_imap::tls::TlsError),
    /// An IMAP listener.
    #[error(transparent)]
    Imap(#[from] maildex_imap::server::ServerError),
    /// An LMTP listener.
    #[error(transparent)]
    Lmtp(#[from] maildex_lmtp::LmtpError),
    /// Users or aliases.
    #[error(transparent)]
    Accounts(#[from] maildex_accounts::AccountsError),
    /// A `[postfix]` socket.
    #[error(transparent)]
    Postfix(#[from] maildex_postfix::PostfixError),
    /// `[daemon] user` and `group`.
    #[error(transparent)]
    Privileges(#[from] privileges::PrivilegeError),
    /// Signal handlers or the runtime.
    #[error("{0}")]
    Runtime(String),
}

/// A running server.
pub struct Daemon {
    /// IMAP listeners: (address, implicit TLS).
    pub imap_addrs: Vec<(SocketAddr, bool)>,
    /// LMTP listeners.
    pub lmtp_addrs: Vec<Listen>,
    /// `[postfix]` sockets: (`"SASL"` or `"socketmap"`, address).
    pub postfix_addrs: Vec<(&'static str, Listen)>,
    accounts: Arc<Accounts>,
    tls: Option<Arc<TlsSource>>,
    shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Daemon {
    /// Binds every listener of `config` and starts serving on the current runtime
    /// ([`Daemon::bind`] then [`Bound::serve`]).
    pub async fn start(config: Config, settings: Settings) -> Result<Daemon, DaemonError> {
        Ok(Daemon::bind(config, settings).await?.serve())
    }

    /// Loads certificates and users and binds every listener of `config`, serving nothing
    /// yet: what needs root is done, and [`privileges::apply`] may run before
    /// [`Bound::serve`].
    ///
    /// The `[imap]` limits and timers of `config` replace those of `settings`
    /// ([`apply_imap_config`]); `settings` supplies the rest (KDF permits, the grammar
    /// limits the file does not set). A test wanting a timer the file refuses (an
    /// autologout under 30 minutes) sets it on the validated [`Config`].
    pub async fn bind(config: Config, settings: Settings) -> Result<Bound, DaemonError> {
        // no user's mail is opened here: each user's on first use (issue 20 #3)
        let accounts = Accounts::load_syncing_on_first_use(config.clone())?;
        let tls = match &config.tls {
            Some(t) => Some(Arc::new(TlsSource::load(&t.cert, &t.key)?)),
            None => None,
        };
        let shutdown = CancellationToken::new();
        let mut settings = settings;
        apply_imap_config(&mut settings, &config.imap);
        let shared = Shared::new(
            Arc::clone(&accounts),
            tls.clone(),
            settings,
            shutdown.clone(),
        );
        // SMTP AUTH through postfix counts against the same penalties as IMAP logins
        let postfix = maildex_postfix::Servers::bind(
            &config.postfix,
            Arc::clone(&accounts),
            Arc::clone(&shared.logins),
        )?;
        let proxy = maildex_imap::server::ProxyListeners {
            plain: &config.imap.proxy_listen,
            implicit_tls: &config.imap.proxy_listen_tls,
            trusted: &config.imap.proxy_trusted_networks,
        };
        let imap =
            ImapServer::bind(shared, &config.imap.listen, &config.imap.listen_tls, proxy).await?;
        let lmtp = maildex_lmtp::Server::bind(
            &config.lmtp,
            Arc::clone(&accounts),
            maildex_lmtp::Limits::from_config(&config.lmtp),
        )?;
        Ok(Bound {
            accounts,
            tls,
            shutdown,
            imap,
            lmtp,
            postfix,
        })
    }

    /// The first plain IMAP address (tests).
    pub fn imap_addr(&self) -> Option<SocketAddr> {
        self.imap_addrs.iter().find(|(_, t)| !t).map(|(a, _)| *a)
    }

    /// The first TCP LMTP address (tests).
    pub fn lmtp_addr(&self) -> Option<SocketAddr> {
        self.lmtp_addrs.iter().find_map(|l| match l {
            Listen::Tcp(a) => Some(*a),
            Listen::Unix(_) => None,
        })
    }

    /// Accounts shared by both servers.
    pub fn accounts(&self) -> &Arc<Accounts> {
        &self.accounts
    }

    /// Re-reads the users and aliases files, then the certificates, each whatever happens
    /// to the other (a key the daemon cannot read must not keep a removed user valid); what
    /// fails keeps its old version. The error is the first failure.
    pub fn reload(&self) -> Result<(), DaemonError> {
        let users = self.accounts.reload().map_err(DaemonError::from);
        let tls = match &self.tls {
            Some(tls) => tls.reload().map_err(DaemonError::from),
            None => Ok(()),
        };
        users.and(tls)
    }

    /// Stops accepting, lets sessions end (IMAP: `* BYE`), and waits for both servers.
    pub async fn stop(self) {
        self.shutdown.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
        // the indexes' commits left unsynced (`[storage] index_sync_delay`) are made
        // durable and their markers removed, so a clean stop leaves none to inspect
        match tokio::task::spawn_blocking(maildex_store::sync_unsynced_indexes).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::error!(error = %e, "could not sync an index as the daemon stopped")
            }
            Err(e) => tracing::error!(error = %e, "index sync task failed"),
        }
    }
}

/// Copies the `[imap]` policy, connection limits, timers and grammar limits of the
/// config into the server's settings. A whole command may hold at least four of the
/// longest lines (the default ratio: 64 KiB lines, 256 KiB commands).
pub fn apply_imap_config(settings: &mut Settings, imap: &ImapConfig) {
    settings.plaintext_auth_on_loopback = imap.plaintext_auth_on_loopback;
    settings.max_connections = imap.max_connections;
    settings.max_per_ip = imap.max_connections_per_ip;
    settings.login_timeout = imap.login_timeout;
    settings.idle_timeout = imap.autologout;
    settings.write_timeout = imap.write_timeout;
    settings.limits.max_line = imap.max_line_length;
    settings.limits.max_command = settings
        .limits
        .max_command
        .max(imap.max_line_length.saturating_mul(4));
    settings.limits.max_append = imap.max_message_size;
}

/// Listeners bound, nothing accepted yet.
pub struct Bound {
    accounts: Arc<Accounts>,
    tls: Option<Arc<TlsSource>>,
    shutdown: CancellationToken,
    imap: ImapServer,
    lmtp: maildex_lmtp::Server,
    postfix: maildex_postfix::Servers,
}

impl Bound {
    /// Accounts shared by both servers.
    pub fn accounts(&self) -> &Arc<Accounts> {
        &self.accounts
    }

    /// Starts accepting on the current runtime.
    pub fn serve(self) -> Daemon {
        let Bound {
            accounts,
            tls,
            shutdown,
            imap,
            lmtp,
            postfix,
        } = self;
        let imap_addrs = imap.local_addrs();
        for (addr, tls) in imap.proxy_addrs() {
            tracing::info!(%addr, tls, "IMAP listening behind a proxy (PROXY protocol)");
        }
        let lmtp_addrs = lmtp.local_addrs();
        for l in lmtp.proxy_addrs() {
            tracing::info!(listen = %l, "LMTP listening behind a proxy (PROXY protocol)");
        }
        let mut tasks = Vec::new();
        // before the first store is opened: it watches every store opened from now on
        tasks.extend(text_indexer::start(&accounts, shutdown.clone()));
        tasks.push(tokio::spawn(imap.run()));
        let token = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            if let Err(e) = lmtp.run(token).await {
                tracing::error!(error = %e, "LMTP server failed");
            }
        }));
        let postfix_addrs = postfix.local_addrs();
        tasks.push(tokio::spawn(postfix.run(shutdown.clone())));
        if let Some(every) = autoexpunge::interval(&accounts.config().mailboxes) {
            let job = autoexpunge::run(Arc::clone(&accounts), every, shutdown.clone());
            tasks.push(tokio::spawn(job));
        }
        for (addr, tls) in &imap_addrs {
            tracing::info!(%addr, tls, "IMAP listening");
        }
        for l in &lmtp_addrs {
            tracing::info!(listen = %l, "LMTP listening");
        }
        for (what, l) in &postfix_addrs {
            tracing::info!(listen = %l, "postfix {what} socket listening");
        }
        Daemon {
            imap_addrs,
            lmtp_addrs,
            postfix_addrs,
            accounts,
            tls,
            shutdown,
            tasks,
        }
    }
}

/// Serves `bound` until SIGTERM or SIGINT; SIGHUP reloads.
pub async fn serve_forever(bound: Bound) -> Result<(), DaemonError> {
    use tokio::signal::unix::{signal, SignalKind};
    let sig = |k| signal(k).map_err(|e| DaemonError::Runtime(format!("signal handler: {e}")));
    let (mut term, mut int, mut hup) = (
        sig(SignalKind::terminate())?,
        sig(SignalKind::interrupt())?,
        sig(SignalKind::hangup())?,
    );
    let daemon = bound.serve();
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => match daemon.reload() {
                Ok(()) => tracing::info!("reloaded certificates, users and aliases"),
                Err(e) => tracing::error!(error = %e, "reload failed; what failed keeps its old version"),
            },
        }
    }
    tracing::info!("shutting down");
    daemon.stop().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_defaults_are_the_servers_defaults() {
        // An [imap] section without limits changes nothing of Settings::default().
        let imap = ImapConfig::with_listeners(Vec::new(), Vec::new());
        let mut s = Settings::default();
        apply_imap_config(&mut s, &imap);
        let d = Settings::default();
        assert_eq!(s.plaintext_auth_on_loopback, d.plaintext_auth_on_loopback);
        assert_eq!(s.max_connections, d.max_connections);
        assert_eq!(s.max_per_ip, d.max_per_ip);
        assert_eq!(s.login_timeout, d.login_timeout);
        assert_eq!(s.idle_timeout, d.idle_timeout);
        assert_eq!(s.limits, d.limits);
    }

    #[test]
    fn config_values_reach_the_settings() {
        let mut imap = ImapConfig::with_listeners(Vec::new(), Vec::new());
        imap.plaintext_auth_on_loopback = false;
        imap.max_connections = 7;
        imap.max_connections_per_ip = 3;
        imap.login_timeout = std::time::Duration::from_secs(5);
        imap.autologout = std::time::Duration::from_secs(3600);
        imap.max_line_length = 1 << 20;
        imap.max_message_size = 1000;
        let mut s = Settings::default();
        apply_imap_config(&mut s, &imap);
        assert!(!s.plaintext_auth_on_loopback);
        assert_eq!((s.max_connections, s.max_per_ip), (7, 3));
        assert_eq!(s.login_timeout.as_secs(), 5);
        assert_eq!(s.idle_timeout.as_secs(), 3600);
        assert_eq!(s.limits.max_line, 1 << 20);
        assert_eq!(
            s.limits.max_command,
            4 << 20,
            "a command holds a longest line"
        );
        assert_eq!(s.limits.max_append, 1000);
    }
}
