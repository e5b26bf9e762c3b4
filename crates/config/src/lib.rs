//! maildex-config: the TOML configuration file.
//!
//! The file is read into serde structs that deny unknown keys (`raw`), then checked
//! and turned into the typed [`Config`]: socket addresses, absolute paths, byte
//! counts. Relative paths in the file are relative to the file's own directory.
//! `config/maildex.example.toml` documents every key; a test parses it.
//!
//! Sections and defaults:
//! - `[imap]`: `listen` (default `["127.0.0.1:143"]`), `listen_tls` (default
//!   `["127.0.0.1:993"]` when `[tls]` is present, else empty),
//!   `plaintext_auth_on_loopback` (default true), `max_connections` (default 10000),
//!   `max_connections_per_ip` (default 100), `login_timeout` (default 60 s),
//!   `autologout` (default and least 30 min), `max_line_length` (default 64 KiB),
//!   `max_message_size` (APPENDLIMIT, default 64 MiB), `write_timeout` (default 5 min),
//!   `proxy_listen` and `proxy_listen_tls` (listeners behind a TCP proxy that expect a
//!   PROXY protocol header; default none), `proxy_trusted_networks` (default
//!   `["127.0.0.1/32", "::1/128"]`).
//! - `[lmtp]`: `listen` (default `["127.0.0.1:24"]`), `socket_mode` (default
//!   `"0660"`), `socket_owner`, `socket_group`, `hostname` (default: the system's),
//!   `aliases_file`, `recipient_delimiter` (default `"+"`), `save_to_detail_mailbox`
//!   (default false), `add_received_header` (default true), `max_message_size` (default 50 MiB), `max_recipients` (default
//!   100), `max_line_length` (default 1000), `max_connections` (default 100),
//!   `command_timeout` (default 5 min), `data_timeout` (default 5 min),
//!   `shutdown_timeout` (default 30 s), `write_timeout` (default 5 min), `proxy_listen`
//!   (TCP, default none) and `proxy_trusted_networks` as in `[imap]`.
//! - `[tls]`: `cert`, `key`; absent means plain IMAP only.
//! - `[storage]`: `mail_location` (required), `index_root`, `index_map_size`
//!   (default 64 MiB), `fsync` (default true), `quota` (default none), `quota_warning`
//!   (a percentage of the quota, 1-99; default none), `full_text` (default true),
//!   `index_sync_delay` (default 5 s, at most 5 min; 0 syncs each index commit).
//! - `[auth]`: `users_file` (required unless `[auth.sql]` is set; not both), `cache_size`
//!   (default 10000 lookups; 0 turns the cache off), `cache_ttl` (default 1 h),
//!   `cache_negative_ttl` (default 1 h). `[auth.sql]`: `driver` (`pgsql`, `mysql`,
//!   `sqlite`), `connect`, `password_query`, `user_query` (required), `iterate_query`,
//!   `alias_query`,
//!   `max_connections` (default 5), `query_timeout` (default 5 s). `[auth.ldap]`
//!   (instead of either, as Dovecot's dovecot-ldap.conf.ext): see [`LdapConfig`].
//! - `[log]`: `level` (default `"info"`), `format` (`"text"`, the default, or `"json"`).
//! - `[daemon]`: `user` and `group` to switch to after binding when started as root
//!   (default: none, keep the starting user; `group` defaults to the user's group).
//! - `[postfix]`: `auth_socket` (Dovecot-protocol SASL for `smtpd_sasl_type = dovecot`)
//!   and `socketmap` (recipient lookups), each a unix socket path or a loopback `IP:port`
//!   (default: off); `socket_mode`, `socket_owner`, `socket_group` as in `[lmtp]`,
//!   `max_connections` per socket (default 100).

#![warn(missing_docs)]

use std::collections::HashMap;
use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use maildex_net::Cidr;

mod auth;
mod error;
mod ldap;
mod mailboxes;
mod paths;
mod postfix;
mod raw;

pub use auth::{
    AuthConfig, LdapConfig, LdapScope, SqlConfig, SqlDriver, DEFAULT_AUTH_CACHE_NEGATIVE_TTL,
    DEFAULT_AUTH_CACHE_SIZE, DEFAULT_AUTH_CACHE_TTL, DEFAULT_SQL_MAX_CONNECTIONS,
    DEFAULT_SQL_QUERY_TIMEOUT,
};
pub use error::ConfigError;
pub use mailboxes::{default_mailboxes, AutoCreate, MailboxConfig, SPECIAL_USES};
pub use paths::{PathTemplate, UserPaths, INDEX_DIR_IN_MAILDIR, MAX_USER_LEN};
pub use postfix::PostfixConfig;

use raw::{RawConfig, RawListen};

/// Where `maildex` looks for its configuration when not told otherwise.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/maildex/maildex.toml";

/// Default initial LMDB map size per user: 64 MiB. The map is address space, not
/// disk (LMDB files grow with the data), and the index grows the map when LMDB
/// reports MAP_FULL, so this only sets how often small mailboxes need to grow; at a
/// couple of KiB of index per message it covers about 30,000 messages.
pub const DEFAULT_INDEX_MAP_SIZE: u64 = 64 << 20;

/// Smallest accepted `index_map_size` (1 MiB).
pub const MIN_INDEX_MAP_SIZE: u64 = 1 << 20;

/// Largest accepted `index_map_size` (1 TiB per user is already absurd).
pub const MAX_INDEX_MAP_SIZE: u64 = 1 << 40;

/// Default mode of LMTP unix sockets: owner and group may deliver (postfix is
/// usually put in the socket's group).
pub const DEFAULT_SOCKET_MODE: u32 = 0o660;

/// Default largest LMTP message: 50 MiB (CRLF octets, as SIZE counts).
pub const DEFAULT_MAX_MESSAGE_SIZE: u64 = 50 << 20;

/// Default most recipients per LMTP transaction (RFC 5321 §4.5.3.1.8: at least 100).
pub const DEFAULT_MAX_RECIPIENTS: usize = 100;

/// Default longest LMTP line in octets including CRLF (RFC 5321 §4.5.3.1.6).
pub const DEFAULT_MAX_LINE_LENGTH: usize = 1000;

/// Smallest accepted `max_line_length`: a command line may be 512 octets
/// (RFC 5321 §4.5.3.1.4).
pub const MIN_MAX_LINE_LENGTH: usize = 512;

/// Default most LMTP connections at once (postfix opens a handful per destination).
pub const DEFAULT_MAX_CONNECTIONS: usize = 100;

/// Default wait for the next LMTP command: RFC 5321 §4.5.3.2.7 server timeout (5 min).
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(300);

/// Default wait for more message data within DATA/BDAT: the same 5 minutes.
pub const DEFAULT_DATA_TIMEOUT: Duration = Duration::from_secs(300);

/// Default time a running LMTP transaction gets to finish on shutdown.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// Default most IMAP connections at once, all clients together.
pub const DEFAULT_IMAP_MAX_CONNECTIONS: usize = 10_000;

/// Default most IMAP connections at once from one IP address (desktop clients open a
/// few each; several people may share one NAT address).
pub const DEFAULT_IMAP_MAX_CONNECTIONS_PER_IP: usize = 100;

/// Default longest time a client may take no output before its connection is closed
/// (IMAP and LMTP): 5 minutes, Dovecot's output timeout (`CLIENT_OUTPUT_TIMEOUT_MSECS`),
/// as long as SMTP's command timeout (RFC 5321 §4.5.3.2.7), so a slow link is never cut
/// off and a client that stopped reading holds its slot no longer than an idle one.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(300);

/// Default autologout before authentication. RFC 9051 §5.4 lets a server use a
/// shorter timer than 30 minutes in the not-authenticated state.
pub const DEFAULT_LOGIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Least (and default) autologout of an authenticated session: RFC 9051 §5.4 says
/// the inactivity timer must be at least 30 minutes.
pub const MIN_AUTOLOGOUT: Duration = Duration::from_secs(30 * 60);

/// Default longest IMAP command line in octets, without the line end and literal
/// data: 64 KiB, Dovecot's `imap_max_line_length`.
pub const DEFAULT_IMAP_MAX_LINE_LENGTH: usize = 64 << 10;

/// Smallest accepted `imap.max_line_length`: RFC 7162 §4 asks servers to accept
/// command lines of at least 8192 octets.
pub const MIN_IMAP_MAX_LINE_LENGTH: usize = 8192;

/// Largest accepted `imap.max_line_length` (each connection may buffer a line).
pub const MAX_IMAP_MAX_LINE_LENGTH: usize = 16 << 20;

/// Default largest APPEND message (advertised as APPENDLIMIT, RFC 7889): 64 MiB.
pub const DEFAULT_IMAP_MAX_MESSAGE_SIZE: u64 = 64 << 20;

/// Largest accepted `imap.max_message_size`: the APPENDLIMIT value is an IMAP
/// `number` (RFC 7889 §6, RFC 3501 §9), at most 4294967295.
pub const MAX_IMAP_MAX_MESSAGE_SIZE: u64 = u32::MAX as u64;

/// The whole validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// IMAP listeners and policy.
    pub imap: ImapConfig,
    /// LMTP listeners.
    pub lmtp: LmtpConfig,
    /// Certificate and key; `None` means no TLS at all (plain IMAP only).
    pub tls: Option<TlsConfig>,
    /// Where mail and indexes live.
    pub storage: StorageConfig,
    /// Where users come from.
    pub auth: AuthConfig,
    /// Logging.
    pub log: LogConfig,
    /// The process: who it runs as after binding.
    pub daemon: DaemonConfig,
    /// `[mailboxes]`: folders every user gets (special use, autoexpunge).
    pub mailboxes: Vec<MailboxConfig>,
    /// `[postfix]`: the SASL and socketmap sockets.
    pub postfix: PostfixConfig,
}

/// `[imap]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImapConfig {
    /// Plain listeners offering STARTTLS (RFC 9051 §6.2.1, RFC 8314 §3). Empty disables.
    pub listen: Vec<SocketAddr>,
    /// Implicit-TLS listeners (RFC 8314 §3.2, port 993). Empty disables.
    pub listen_tls: Vec<SocketAddr>,
    /// Allow LOGIN/AUTHENTICATE PLAIN without TLS when the peer is a loopback address
    /// (for local webmail). Elsewhere plaintext login is refused with LOGINDISABLED
    /// until STARTTLS (RFC 9051 §6.2.3).
    pub plaintext_auth_on_loopback: bool,
    /// Most connections served at once, all clients; more are refused with
    /// `* BYE [UNAVAILABLE]` (plain) or closed (implicit TLS).
    pub max_connections: usize,
    /// Most connections served at once from one IP address; more are refused the same way.
    pub max_connections_per_ip: usize,
    /// Autologout before authentication (RFC 9051 §5.4 allows a shorter timer there).
    pub login_timeout: Duration,
    /// Autologout after authentication, also the longest IDLE: at least
    /// [`MIN_AUTOLOGOUT`] when read from the file (RFC 9051 §5.4, RFC 2177 §3).
    pub autologout: Duration,
    /// Longest command line in octets, without the line end and literal data; a
    /// longer one gets `BAD [TOOBIG]`.
    pub max_line_length: usize,
    /// Largest APPEND message in octets, advertised as APPENDLIMIT (RFC 7889); a
    /// larger one gets `NO [TOOBIG]`.
    pub max_message_size: u64,
    /// Longest a client may take none of the output queued for it (it stopped reading)
    /// before the connection is closed; before login, `login_timeout` caps it too.
    pub write_timeout: Duration,
    /// Plain listeners behind a TCP proxy: each connection starts with a PROXY protocol
    /// header naming the client (Dovecot's `haproxy = yes`). Empty disables.
    pub proxy_listen: Vec<SocketAddr>,
    /// Implicit-TLS listeners behind a TCP proxy: the header comes before the handshake.
    pub proxy_listen_tls: Vec<SocketAddr>,
    /// Who may connect to a proxy listener (Dovecot's `haproxy_trusted_networks`);
    /// others are refused.
    pub proxy_trusted_networks: Vec<Cidr>,
}

impl ImapConfig {
    /// `[imap]` with every default and the given listeners.
    pub fn with_listeners(listen: Vec<SocketAddr>, listen_tls: Vec<SocketAddr>) -> ImapConfig {
        ImapConfig {
            listen,
            listen_tls,
            plaintext_auth_on_loopback: true,
            max_connections: DEFAULT_IMAP_MAX_CONNECTIONS,
            max_connections_per_ip: DEFAULT_IMAP_MAX_CONNECTIONS_PER_IP,
            login_timeout: DEFAULT_LOGIN_TIMEOUT,
            autologout: MIN_AUTOLOGOUT,
            max_line_length: DEFAULT_IMAP_MAX_LINE_LENGTH,
            max_message_size: DEFAULT_IMAP_MAX_MESSAGE_SIZE,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            proxy_listen: Vec::new(),
            proxy_listen_tls: Vec::new(),
            proxy_trusted_networks: default_proxy_trusted_networks(),
        }
    }
}

/// `proxy_trusted_networks` when the file sets none: a proxy on this host.
pub fn default_proxy_trusted_networks() -> Vec<Cidr> {
    ["127.0.0.1/32", "::1/128"]
        .into_iter()
        .filter_map(|n| Cidr::parse(n).ok())
        .collect()
}

/// One LMTP listener.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Listen {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A unix-domain socket path (absolute).
    Unix(PathBuf),
}

impl std::fmt::Display for Listen {
    /// The config-file form: `127.0.0.1:24` or `unix:/path`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Tcp(a) => write!(f, "{a}"),
            Listen::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// `[lmtp]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LmtpConfig {
    /// Listeners. Empty disables LMTP.
    pub listen: Vec<Listen>,
    /// TCP listeners behind a proxy, expecting a PROXY protocol header (as in `[imap]`).
    pub proxy_listen: Vec<SocketAddr>,
    /// Who may connect to a proxy listener.
    pub proxy_trusted_networks: Vec<Cidr>,
    /// Permission bits for unix sockets.
    pub socket_mode: u32,
    /// Owner (user name or numeric uid) for unix sockets, if it should be changed.
    pub socket_owner: Option<String>,
    /// Group (group name or numeric gid) for unix sockets, if it should be changed.
    pub socket_group: Option<String>,
    /// Name in the greeting and replies; `None` means the system's host name.
    pub hostname: Option<String>,
    /// Aliases file (`source: user1, user2` lines), if any (absolute path).
    pub aliases_file: Option<PathBuf>,
    /// Characters that separate a user from a detail (`user+detail@domain`), as
    /// Dovecot's `recipient_delimiter`; empty disables details.
    pub recipient_delimiter: String,
    /// Deliver `user+detail` to the folder named by the detail when it exists
    /// (Dovecot's `lmtp_save_to_detail_mailbox`); otherwise to INBOX.
    pub save_to_detail_mailbox: bool,
    /// Prepend a `Received:` trace header naming the LMTP client, this host and the
    /// session, as Dovecot's `lmtp_add_received_header` (RFC 5321 §4.4).
    pub add_received_header: bool,
    /// Largest message in octets with CRLF line ends (advertised as SIZE, RFC 1870);
    /// 0 means no limit.
    pub max_message_size: u64,
    /// Most accepted recipients per transaction; more get `452 4.5.3`.
    pub max_recipients: usize,
    /// Longest line in octets including CRLF: the hard cap on a command line
    /// (longer message lines are accepted and counted).
    pub max_line_length: usize,
    /// Most connections served at once; more wait to be accepted.
    pub max_connections: usize,
    /// How long to wait for the next command before `421 4.4.2` and close.
    pub command_timeout: Duration,
    /// How long to wait for more message data during DATA or BDAT.
    pub data_timeout: Duration,
    /// On shutdown, how long a transaction in progress may take to finish before
    /// the session gets `421 4.3.2` (its message then stays with the client).
    pub shutdown_timeout: Duration,
    /// Longest a client may take none of the replies queued for it before the
    /// connection is closed.
    pub write_timeout: Duration,
}

impl LmtpConfig {
    /// The host name LMTP greets with and writes into `Received:`: `hostname`, else the
    /// system's, else `localhost`.
    pub fn host_name(&self) -> String {
        self.hostname.clone().unwrap_or_else(|| {
            hostname::get()
                .ok()
                .and_then(|h| h.into_string().ok())
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "localhost".to_owned())
        })
    }

    /// `[lmtp]` with every default and the given listeners.
    pub fn with_listeners(listen: Vec<Listen>) -> LmtpConfig {
        LmtpConfig {
            listen,
            proxy_listen: Vec::new(),
            proxy_trusted_networks: default_proxy_trusted_networks(),
            socket_mode: DEFAULT_SOCKET_MODE,
            socket_owner: None,
            socket_group: None,
            hostname: None,
            aliases_file: None,
            recipient_delimiter: "+".to_owned(),
            save_to_detail_mailbox: false,
            add_received_header: true,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            max_recipients: DEFAULT_MAX_RECIPIENTS,
            max_line_length: DEFAULT_MAX_LINE_LENGTH,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            data_timeout: DEFAULT_DATA_TIMEOUT,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
        }
    }
}

/// `[tls]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// PEM certificate chain (absolute path).
    pub cert: PathBuf,
    /// PEM private key (absolute path).
    pub key: PathBuf,
}

/// `[storage]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageConfig {
    /// Maildir root per user.
    pub mail_location: PathTemplate,
    /// Index directory per user; `None` puts it at `<maildir>/maildex-index`.
    /// Set it when the Maildir is on NFS: LMDB must live on a local disk.
    pub index_root: Option<PathTemplate>,
    /// Initial LMDB map size in bytes (a multiple of 1 MiB, see [`DEFAULT_INDEX_MAP_SIZE`]).
    pub index_map_size: u64,
    /// fsync files and directories on delivery. Only turn off for tests and benchmarks:
    /// without it an acknowledged message can be lost in a crash.
    pub fsync: bool,
    /// Default storage quota per user in bytes (sum of RFC822.SIZE over all mailboxes,
    /// as the index counts it); `None` means no quota. A users-file entry can set its
    /// own with Dovecot's `userdb_quota_rule=*:storage=<size>` extra field.
    pub quota: Option<u64>,
    /// Percentage of a user's quota at which a delivery that crosses it also delivers a
    /// notice to the user's INBOX (as Dovecot's `quota_warning`); `None`: no notice.
    pub quota_warning: Option<u8>,
    /// Store the text SEARCH BODY/TEXT compare in the index when a message is indexed
    /// (`fts-text`, `fts-sig`), so no SEARCH reads a message file. Off: nothing is stored
    /// and BODY/TEXT read the message files, with the same answers.
    pub full_text: bool,
    /// How long the daemon may leave an index's commits unsynced, covered by a marker
    /// of the machine's boot (an index found after a power loss with unsynced commits is
    /// rebuilt from the Maildir; docs/RELIABILITY.md). Zero syncs each commit.
    pub index_sync_delay: Duration,
}

/// Default `[storage] index_sync_delay`.
pub const DEFAULT_INDEX_SYNC_DELAY: Duration = Duration::from_secs(5);
/// The longest `[storage] index_sync_delay`.
pub const MAX_INDEX_SYNC_DELAY: Duration = Duration::from_secs(300);

/// `[log]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// A `tracing` filter: a level (`info`) or directives (`info,maildex_imap=debug`).
    pub level: String,
    /// How each line is written.
    pub format: LogFormat,
}

/// `[log] format`: plain text lines (the default) or one JSON object per line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// `"text"`: `time LEVEL span{fields}: target: message key=value ...`.
    #[default]
    Text,
    /// `"json"`: `{"timestamp", "level", "fields": {"message", ...}, "target", "span", "spans"}`.
    Json,
}

/// `[daemon]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DaemonConfig {
    /// Started as root, the user (name or uid) the daemon switches to once its listeners
    /// are bound and before it touches mail; `None` keeps the starting user.
    pub user: Option<String>,
    /// The group (name or gid) it switches to; `None` means the user's primary group.
    pub group: Option<String>,
}

impl StorageConfig {
    /// The Maildir and index directory of `user`.
    ///
    /// `%u` expands to the whole name, `%n` to the part before `@` (the whole name if
    /// there is none), `%d` to the part after (empty if none), `%%` to `%`. The name is
    /// lower-cased (ASCII) first, as Dovecot does by default (`auth_username_format =
    /// %Lu`), so case variants of one login share one Maildir. Without `index_root`
    /// the index is `<maildir>/maildex-index`.
    ///
    /// Security: names that could leave the template's directory are refused with
    /// [`ConfigError::BadUserName`]: empty, over 255 bytes, containing `/`, NUL,
    /// control characters or `..`, starting with `.`, with an empty local part, more
    /// than one `@`, or a domain starting with `.`. The result is also checked to stay
    /// under [`PathTemplate::fixed_prefix`] ([`ConfigError::PathEscape`]).
    pub fn paths_for(&self, user: &str) -> Result<UserPaths, ConfigError> {
        let maildir = self.mail_location.expand(user)?;
        let index_dir = match &self.index_root {
            Some(t) => t.expand(user)?,
            None => maildir.join(INDEX_DIR_IN_MAILDIR),
        };
        Ok(UserPaths { maildir, index_dir })
    }
}

impl Config {
    /// Reads and validates the config file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.to_owned(),
            error,
        })?;
        Config::from_toml_str(&text, path)
    }

    /// Parses and validates `text`; `origin` is the file it came from, used in
    /// messages and as the base of relative paths (its directory).
    pub fn from_toml_str(text: &str, origin: &Path) -> Result<Config, ConfigError> {
        let raw: RawConfig =
            toml::from_str(text).map_err(|e| error::from_toml(origin, text, &e))?;
        validate(raw, origin)
    }
}

/// The embedded configuration of `maildex serve --dev`: everything under
/// `data_dir` (made absolute), loopback only, ports above 1024.
///
/// - Maildirs `data_dir/mail/%d/%n/Maildir`, indexes `data_dir/index/%d/%n`
/// - users file `data_dir/users`, TLS `data_dir/tls/cert.pem` and `key.pem`
/// - IMAP `127.0.0.1:1143`, IMAPS `127.0.0.1:1993`, LMTP `127.0.0.1:1024`
pub fn dev(data_dir: &Path) -> Config {
    let data_dir = std::path::absolute(data_dir).unwrap_or_else(|_| data_dir.to_owned());
    use paths::Seg::{Domain, Lit, Local};
    let lit = |s: &str| Lit(s.as_bytes().to_vec());
    let mail_location = PathTemplate::under(
        &data_dir,
        vec![lit("mail/"), Domain, lit("/"), Local, lit("/Maildir")],
    );
    let index_root = PathTemplate::under(&data_dir, vec![lit("index/"), Domain, lit("/"), Local]);
    let lo = |port| SocketAddr::from(([127, 0, 0, 1], port));
    Config {
        imap: ImapConfig::with_listeners(vec![lo(1143)], vec![lo(1993)]),
        lmtp: LmtpConfig::with_listeners(vec![Listen::Tcp(lo(1024))]),
        tls: Some(TlsConfig {
            cert: data_dir.join("tls/cert.pem"),
            key: data_dir.join("tls/key.pem"),
        }),
        storage: StorageConfig {
            mail_location,
            index_root: Some(index_root),
            index_map_size: DEFAULT_INDEX_MAP_SIZE,
            fsync: true,
            quota: None,
            quota_warning: None,
            full_text: true,
            index_sync_delay: DEFAULT_INDEX_SYNC_DELAY,
        },
        auth: AuthConfig::file(data_dir.join("users")),
        log: LogConfig {
            level: "info".to_owned(),
            format: LogFormat::Text,
        },
        daemon: DaemonConfig::default(),
        mailboxes: default_mailboxes(),
        postfix: PostfixConfig::default(),
    }
}

fn validate(raw: RawConfig, origin: &Path) -> Result<Config, ConfigError> {
    let origin_abs = std::path::absolute(origin).unwrap_or_else(|_| origin.to_owned());
    let base = match origin_abs.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("/"),
    };
    let resolve = |p: PathBuf| if p.is_absolute() { p } else { base.join(p) };
    let invalid = |key: &str, message: String| ConfigError::Invalid {
        path: origin.to_owned(),
        key: key.to_owned(),
        message,
    };
    let missing = |key| ConfigError::Missing {
        path: origin.to_owned(),
        key,
    };

    let tls = match raw.tls {
        None => None,
        Some(t) => {
            let cert = t.cert.ok_or_else(|| missing("tls.cert"))?;
            let key = t.key.ok_or_else(|| missing("tls.key"))?;
            Some(TlsConfig {
                cert: resolve(cert),
                key: resolve(key),
            })
        }
    };

    let mut imap_raw = raw.imap.unwrap_or_default();
    let lo = |port| SocketAddr::from(([127, 0, 0, 1], port));
    let listen = match imap_raw.listen.take() {
        Some(v) => v.into_iter().map(|a| a.0).collect(),
        None => vec![lo(143)],
    };
    let listen_tls: Vec<SocketAddr> = match imap_raw.listen_tls.take() {
        Some(v) => v.into_iter().map(|a| a.0).collect(),
        None if tls.is_some() => vec![lo(993)],
        None => Vec::new(),
    };
    if imap_raw
        .proxy_listen_tls
        .as_ref()
        .is_some_and(|v| !v.is_empty())
        && tls.is_none()
    {
        return Err(invalid(
            "imap.proxy_listen_tls",
            "implicit-TLS listeners need a [tls] section with cert and key".into(),
        ));
    }
    if !listen_tls.is_empty() && tls.is_none() {
        return Err(invalid(
            "imap.listen_tls",
            "implicit-TLS listeners need a [tls] section with cert and key (or set listen_tls = [])".into(),
        ));
    }
    let imap = validate_imap(imap_raw, listen, listen_tls).map_err(|(key, m)| invalid(key, m))?;

    let lmtp_raw = raw.lmtp.unwrap_or_default();
    let lmtp = validate_lmtp(lmtp_raw, &resolve).map_err(|(key, m)| invalid(key, m))?;
    check_duplicates(&imap, &lmtp).map_err(|(key, m)| invalid(key, m))?;

    let storage_raw = raw
        .storage
        .ok_or_else(|| missing("storage.mail_location"))?;
    let mail_location = storage_raw
        .mail_location
        .ok_or_else(|| missing("storage.mail_location"))?;
    let mail_location = PathTemplate::resolve(
        OsStr::new(&mail_location.0),
        &base,
        origin,
        "storage.mail_location",
    )?;
    let index_root = match storage_raw.index_root {
        Some(t) => Some(PathTemplate::resolve(
            OsStr::new(&t.0),
            &base,
            origin,
            "storage.index_root",
        )?),
        None => None,
    };
    let size = storage_raw
        .index_map_size
        .map_or(DEFAULT_INDEX_MAP_SIZE, |s| s.0);
    if !(MIN_INDEX_MAP_SIZE..=MAX_INDEX_MAP_SIZE).contains(&size) {
        return Err(invalid(
            "storage.index_map_size",
            format!("{size} bytes is outside 1MiB..=1TiB"),
        ));
    }
    // LMDB wants a multiple of the OS page size; rounding up to whole MiB covers every
    // page size in use (4 KiB to 64 KiB).
    let index_map_size = size.div_ceil(MIN_INDEX_MAP_SIZE) * MIN_INDEX_MAP_SIZE;
    let storage = StorageConfig {
        mail_location,
        index_root,
        index_map_size,
        fsync: storage_raw.fsync.unwrap_or(true),
        quota: storage_raw.quota.map(|q| q.0).filter(|&q| q > 0),
        quota_warning: match storage_raw.quota_warning {
            None => None,
            Some(p @ 1..=99) => Some(p),
            Some(p) => {
                return Err(invalid(
                    "storage.quota_warning",
                    format!("{p} is not a percentage from 1 to 99"),
                ))
            }
        },
        full_text: storage_raw.full_text.unwrap_or(true),
        index_sync_delay: match storage_raw.index_sync_delay {
            None => DEFAULT_INDEX_SYNC_DELAY,
            Some(s) if Duration::from_secs(s.0) <= MAX_INDEX_SYNC_DELAY => Duration::from_secs(s.0),
            Some(s) => {
                return Err(invalid(
                    "storage.index_sync_delay",
                    format!("{} s is longer than the most, 300 s", s.0),
                ))
            }
        },
    };

    if raw
        .auth
        .as_ref()
        .is_none_or(|a| a.users_file.is_none() && a.sql.is_none() && a.ldap.is_none())
    {
        return Err(missing("auth.users_file"));
    }
    let auth = auth::validate(raw.auth, resolve).map_err(|(key, m)| invalid(key, m))?;
    let raw_log = raw.log.unwrap_or_default();
    let log = LogConfig {
        level: raw_log.level.map_or_else(|| "info".to_owned(), |l| l.0),
        format: raw_log.format.unwrap_or_default(),
    };
    let daemon_raw = raw.daemon.unwrap_or_default();
    if daemon_raw.group.is_some() && daemon_raw.user.is_none() {
        return Err(invalid(
            "daemon.group",
            "needs daemon.user too (the group alone would leave the process root)".into(),
        ));
    }
    let daemon = DaemonConfig {
        user: daemon_raw.user.map(|u| u.0),
        group: daemon_raw.group.map(|g| g.0),
    };
    let mailboxes = mailboxes::validate(raw.mailboxes).map_err(|(key, m)| invalid(&key, m))?;
    let postfix = postfix::validate(raw.postfix, &resolve).map_err(|(key, m)| invalid(key, m))?;
    Ok(Config {
        imap,
        lmtp,
        tls,
        storage,
        auth,
        log,
        daemon,
        mailboxes,
        postfix,
    })
}

fn validate_imap(
    raw: raw::RawImap,
    listen: Vec<SocketAddr>,
    listen_tls: Vec<SocketAddr>,
) -> Result<ImapConfig, (&'static str, String)> {
    let mut c = ImapConfig::with_listeners(listen, listen_tls);
    let addrs = |v: Option<Vec<raw::TcpAddr>>| v.unwrap_or_default().into_iter().map(|a| a.0);
    c.proxy_listen = addrs(raw.proxy_listen).collect();
    c.proxy_listen_tls = addrs(raw.proxy_listen_tls).collect();
    if let Some(nets) = raw.proxy_trusted_networks {
        c.proxy_trusted_networks = nets.into_iter().map(|n| n.0).collect();
    }
    c.plaintext_auth_on_loopback = raw.plaintext_auth_on_loopback.unwrap_or(true);
    let count = |v: Option<u32>, key: &'static str, default: usize| match v {
        None => Ok(default),
        Some(0) => Err((key, "must be at least 1".to_owned())),
        Some(n) => Ok(n as usize),
    };
    c.max_connections = count(
        raw.max_connections,
        "imap.max_connections",
        DEFAULT_IMAP_MAX_CONNECTIONS,
    )?;
    c.max_connections_per_ip = count(
        raw.max_connections_per_ip,
        "imap.max_connections_per_ip",
        DEFAULT_IMAP_MAX_CONNECTIONS_PER_IP,
    )?;
    if let Some(s) = raw.login_timeout {
        if s.0 == 0 {
            return Err(("imap.login_timeout", "must be at least 1 second".into()));
        }
        c.login_timeout = Duration::from_secs(s.0);
    }
    if let Some(s) = raw.autologout {
        // RFC 9051 §5.4: an autologout timer must be of at least 30 minutes.
        let d = Duration::from_secs(s.0);
        if d < MIN_AUTOLOGOUT {
            return Err((
                "imap.autologout",
                format!(
                    "{} s is below 30 minutes, the shortest autologout RFC 9051 §5.4 allows \
                     after login (login_timeout sets the timer before login)",
                    s.0
                ),
            ));
        }
        c.autologout = d;
    }
    if let Some(s) = raw.write_timeout {
        if s.0 == 0 {
            return Err(("imap.write_timeout", "must be at least 1 second".into()));
        }
        c.write_timeout = Duration::from_secs(s.0);
    }
    if let Some(n) = raw.max_line_length {
        let range = MIN_IMAP_MAX_LINE_LENGTH as u64..=MAX_IMAP_MAX_LINE_LENGTH as u64;
        if !range.contains(&n.0) {
            return Err((
                "imap.max_line_length",
                format!(
                    "{} is outside 8192..=16MiB (RFC 7162 §4: servers accept lines of at \
                     least 8192 octets)",
                    n.0
                ),
            ));
        }
        c.max_line_length = n.0 as usize;
    }
    if let Some(n) = raw.max_message_size {
        if !(1..=MAX_IMAP_MAX_MESSAGE_SIZE).contains(&n.0) {
            return Err((
                "imap.max_message_size",
                format!(
                    "{} is outside 1..=4294967295 (APPENDLIMIT is an IMAP number, RFC 7889 \
                     §6; there is no \"no limit\")",
                    n.0
                ),
            ));
        }
        c.max_message_size = n.0;
    }
    Ok(c)
}

fn validate_lmtp(
    raw: raw::RawLmtp,
    resolve: &dyn Fn(PathBuf) -> PathBuf,
) -> Result<LmtpConfig, (&'static str, String)> {
    let lo = |port| SocketAddr::from(([127, 0, 0, 1], port));
    let listen = match raw.listen {
        Some(v) => v
            .into_iter()
            .map(|l| match l {
                RawListen::Tcp(a) => Listen::Tcp(a),
                RawListen::Unix(p) => Listen::Unix(resolve(p)),
            })
            .collect(),
        None => vec![Listen::Tcp(lo(24))],
    };
    let mut c = LmtpConfig::with_listeners(listen);
    c.proxy_listen = raw
        .proxy_listen
        .unwrap_or_default()
        .into_iter()
        .map(|a| a.0)
        .collect();
    if let Some(nets) = raw.proxy_trusted_networks {
        c.proxy_trusted_networks = nets.into_iter().map(|n| n.0).collect();
    }
    c.socket_mode = raw.socket_mode.map_or(DEFAULT_SOCKET_MODE, |m| m.0);
    c.socket_owner = raw.socket_owner.map(|s| s.0);
    c.socket_group = raw.socket_group.map(|s| s.0);
    c.hostname = raw.hostname.map(|s| s.0);
    if let Some(h) = &c.hostname {
        if h.chars().any(|ch| ch.is_whitespace() || ch.is_control()) {
            return Err(("lmtp.hostname", format!("{h:?} contains whitespace")));
        }
    }
    c.aliases_file = raw.aliases_file.map(resolve);
    if let Some(d) = raw.recipient_delimiter {
        if d.chars()
            .any(|ch| ch == '@' || ch.is_whitespace() || ch.is_control())
        {
            return Err((
                "lmtp.recipient_delimiter",
                format!("{d:?}: '@', whitespace and control characters cannot separate a detail"),
            ));
        }
        c.recipient_delimiter = d;
    }
    c.save_to_detail_mailbox = raw.save_to_detail_mailbox.unwrap_or(false);
    c.add_received_header = raw.add_received_header.unwrap_or(true);
    if let Some(m) = raw.max_message_size {
        c.max_message_size = m.0;
    }
    if let Some(n) = raw.max_recipients {
        if n == 0 {
            return Err((
                "lmtp.max_recipients",
                "must be at least 1 (RFC 5321 §4.5.3.1.8 asks for 100)".into(),
            ));
        }
        c.max_recipients = n as usize;
    }
    if let Some(n) = raw.max_line_length {
        if (n as usize) < MIN_MAX_LINE_LENGTH {
            return Err((
                "lmtp.max_line_length",
                format!("{n} is below {MIN_MAX_LINE_LENGTH}, the longest command line RFC 5321 §4.5.3.1.4 allows"),
            ));
        }
        c.max_line_length = n as usize;
    }
    if let Some(n) = raw.max_connections {
        if n == 0 {
            return Err(("lmtp.max_connections", "must be at least 1".into()));
        }
        c.max_connections = n as usize;
    }
    let secs = |v: Option<raw::Seconds>, key: &'static str, default: Duration| match v {
        None => Ok(default),
        Some(raw::Seconds(0)) => Err((key, "must be at least 1 second".to_owned())),
        Some(raw::Seconds(n)) => Ok(Duration::from_secs(n)),
    };
    c.command_timeout = secs(
        raw.command_timeout,
        "lmtp.command_timeout",
        DEFAULT_COMMAND_TIMEOUT,
    )?;
    c.data_timeout = secs(raw.data_timeout, "lmtp.data_timeout", DEFAULT_DATA_TIMEOUT)?;
    c.write_timeout = secs(
        raw.write_timeout,
        "lmtp.write_timeout",
        DEFAULT_WRITE_TIMEOUT,
    )?;
    c.shutdown_timeout = match raw.shutdown_timeout {
        None => DEFAULT_SHUTDOWN_TIMEOUT,
        Some(s) => Duration::from_secs(s.0),
    };
    Ok(c)
}

/// Two listeners on one address would fail at bind time; say so at load time.
fn check_duplicates(imap: &ImapConfig, lmtp: &LmtpConfig) -> Result<(), (&'static str, String)> {
    let mut seen: HashMap<Listen, &'static str> = HashMap::new();
    let tcp = |key: &'static str, addrs: &[SocketAddr]| {
        addrs
            .iter()
            .map(move |a| (key, Listen::Tcp(*a)))
            .collect::<Vec<_>>()
    };
    let all = imap
        .listen
        .iter()
        .map(|a| ("imap.listen", Listen::Tcp(*a)))
        .chain(
            imap.listen_tls
                .iter()
                .map(|a| ("imap.listen_tls", Listen::Tcp(*a))),
        )
        .chain(lmtp.listen.iter().map(|l| ("lmtp.listen", l.clone())))
        .chain(tcp("imap.proxy_listen", &imap.proxy_listen))
        .chain(tcp("imap.proxy_listen_tls", &imap.proxy_listen_tls))
        .chain(tcp("lmtp.proxy_listen", &lmtp.proxy_listen));
    for (key, l) in all {
        if matches!(l, Listen::Tcp(a) if a.port() == 0) {
            continue; // port 0: the OS picks a free port each time (tests).
        }
        if let Some(first) = seen.insert(l.clone(), key) {
            return Err((key, format!("{l} is already used by {first}")));
        }
    }
    Ok(())
}
