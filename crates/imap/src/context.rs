//! What every session of one server shares: accounts, TLS, settings, the login gate (KDF
//! semaphore and penalty table, [`maildex_net::login`], shared with the postfix SASL
//! socket), the connection counters and the shutdown signal.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use maildex_accounts::Accounts;
pub use maildex_net::login::{penalty_key, KdfSlots, LoginGate, Penalties};
use tokio_util::sync::CancellationToken;

use crate::tls::TlsSource;
use maildex_store::DirWatcher;

/// Server settings (from `[imap]` in the config; defaults follow Dovecot and RFC 9051).
#[derive(Clone, Debug)]
pub struct Settings {
    /// Allow LOGIN and AUTHENTICATE PLAIN without TLS from loopback peers (RFC 9051
    /// §6.2.3 lets the server decide; Dovecot allows it for local connections).
    pub plaintext_auth_on_loopback: bool,
    /// Grammar limits (line length, literals, APPENDLIMIT).
    pub limits: maildex_imap_proto::Limits,
    /// Connections at once, all clients.
    pub max_connections: usize,
    /// Connections at once from one IP address.
    pub max_per_ip: usize,
    /// Autologout before authentication (RFC 9051 §5.4 allows a shorter timer there),
    /// counted from the start of the session, not from the last octet read.
    pub login_timeout: Duration,
    /// Autologout after authentication: at least 30 minutes (RFC 9051 §5.4, RFC 2177).
    pub idle_timeout: Duration,
    /// Longest a client may take none of its output (it stopped reading) before the
    /// connection is closed; before login the login timeout ends it too.
    pub write_timeout: Duration,
    /// Password checks running at once (each is an argon2/crypt KDF on a blocking thread).
    pub kdf_permits: usize,
    /// Watch the folders IDLE sessions have selected with inotify. Off, those sessions see
    /// other processes' changes at their periodic sync, as where inotify is unavailable
    /// (tests turn it off to exercise that fallback).
    pub inotify: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            plaintext_auth_on_loopback: true,
            limits: maildex_imap_proto::Limits::default(),
            max_connections: 10_000,
            max_per_ip: 100,
            login_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(30 * 60),
            write_timeout: Duration::from_secs(5 * 60),
            kdf_permits: std::thread::available_parallelism().map_or(2, |n| n.get()),
            inotify: true,
        }
    }
}

/// Shared by all sessions of a server.
pub struct Shared {
    /// Users, their stores.
    pub accounts: Arc<Accounts>,
    /// Certificates; `None` runs plain IMAP only.
    pub tls: Option<Arc<TlsSource>>,
    /// Settings.
    pub settings: Settings,
    /// Login penalties and KDF slots (also the postfix SASL socket's).
    pub logins: Arc<LoginGate>,
    /// Fires on shutdown (sessions say `* BYE`).
    pub shutdown: CancellationToken,
    /// inotify on the folders IDLE sessions have selected.
    pub watcher: Arc<DirWatcher>,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
    total: Mutex<usize>,
}

impl Shared {
    /// Shared state for a server. Call it on a tokio runtime (the folder watcher starts a
    /// task).
    pub fn new(
        accounts: Arc<Accounts>,
        tls: Option<Arc<TlsSource>>,
        settings: Settings,
        shutdown: CancellationToken,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            logins: Arc::new(LoginGate::new(settings.kdf_permits)),
            watcher: if settings.inotify {
                DirWatcher::start()
            } else {
                DirWatcher::without_inotify()
            },
            accounts,
            tls,
            settings,
            shutdown,
            per_ip: Mutex::default(),
            total: Mutex::new(0),
        })
    }

    /// Takes a connection slot for `ip` (counted by [`penalty_key`]), or says which limit
    /// is reached.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, &'static str> {
        let mut total = self.total.lock().unwrap_or_else(|p| p.into_inner());
        if *total >= self.settings.max_connections {
            return Err("Too many connections, try again later");
        }
        // one key for the connection limit and the login penalties: an IPv6 host owns its
        // /64, so counting single addresses would give it 2^64 slots
        let ip = penalty_key(ip);
        let mut per_ip = self.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        let n = per_ip.entry(ip).or_insert(0);
        if *n >= self.settings.max_per_ip {
            return Err("Too many connections from your address");
        }
        *n += 1;
        *total += 1;
        Ok(Slot {
            shared: Arc::clone(self),
            ip,
        })
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        *self.total.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A connection slot, given back on drop.
pub struct Slot {
    shared: Arc<Shared>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut total = self.shared.total.lock().unwrap_or_else(|p| p.into_inner());
        *total = total.saturating_sub(1);
        let mut per_ip = self.shared.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                per_ip.remove(&self.ip);
            }
        }
    }
}
