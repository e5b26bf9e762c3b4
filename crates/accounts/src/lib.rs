//! maildex-accounts: who the users are and where their mail lives, shared by the LMTP
//! and IMAP servers.
//!
//! [`Accounts`] holds the configuration, the user directory (a [`UserDb`]: the users file,
//! SQL or LDAP, see [`userdb`]), the aliases file, a cache of lookups (`cache`) and a cache
//! of open stores (one [`UserStore`] per user per process: the index registry allows
//! one LMDB env per folder; a store nobody else holds is closed after a minute unused, so
//! memory and file descriptors follow the users active now, not every user since start).
//! It answers:
//! - [`Accounts::lookup`] / [`Accounts::verify_login`]: the directory's answer (for the
//!   users file, the rules of `maildex-auth`: a full address wins over a bare local part;
//!   a bare entry matches any domain), or [`Unavailable`] when it cannot be asked;
//! - [`Accounts::resolve_recipient`]: an LMTP recipient to users and mailboxes, through
//!   the aliases and `user+detail` (Dovecot's `recipient_delimiter` and
//!   `lmtp_save_to_detail_mailbox`);
//! - [`Accounts::over_quota`]: a user's storage quota against the index's counts.
//!
//! [`Accounts::reload`] (SIGHUP) re-reads the users and aliases files and swaps them in
//! at once; lookups in flight keep the version they started with. A lookup also notices
//! by itself when either file changed (a `stat` at most once a second, as Dovecot
//! re-reads a passwd-file) and reloads, so a changed password or a removed user takes
//! effect without a signal; a file that no longer loads keeps the old users, logged.

#![warn(missing_docs)]

mod aliases;
mod cache;
mod fields;
mod filedb;
mod ldap;
mod lookups;
mod nets;
pub mod owner;
mod quota;
mod remote;
mod sql;
mod stores;
pub mod userdb;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use maildex_auth::AuthError;
use maildex_config::{Config, ConfigError};
use maildex_store::{AutoCreate, MailboxSetting, SpecialUse, StoreError, StoreOptions, UserStore};

pub use aliases::Aliases;
pub use ldap::LdapConfigError;
pub use maildex_auth::LogName;
pub use owner::Owner;
pub use quota::{usage, StorageQuota};
pub use sql::SqlConfigError;
pub use stores::StoreOpened;
pub use userdb::{Unavailable, UserDb};

use cache::{Cache, CachedLogin, Hit};
use filedb::FileDb;
use ldap::LdapDb;
use sql::SqlDb;
use stores::Stores;

/// What can go wrong loading accounts or opening a user's mail.
#[derive(Debug, thiserror::Error)]
pub enum AccountsError {
    /// The users file could not be read or parsed (the error names the file and line).
    #[error(transparent)]
    Users(#[from] AuthError),
    /// A bad line in the aliases file.
    #[error("{} line {line}: {reason}", path.display())]
    Aliases {
        /// The aliases file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A users-file entry with an unusable extra field (e.g. a quota rule).
    #[error("{} line {line}: user {user}: {reason}", path.display())]
    UserField {
        /// The users file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// The user.
        user: String,
        /// What is wrong.
        reason: String,
    },
    /// A file could not be read.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said (in the message; not a `source()`).
        error: std::io::Error,
    },
    /// Two users whose `mail_location` (or `index_root`) expand to the same folder: one
    /// would read the other's mail.
    #[error(
        "{} line {line}: users {first} and {second} both map to {}; give `mail_location` \
         and `index_root` a %u (or %d and %n) so that every user has a folder of their own",
        path.display(), folder.display()
    )]
    SharedFolder {
        /// The users file.
        path: PathBuf,
        /// 1-based line of the second user.
        line: usize,
        /// The user listed first.
        first: String,
        /// The user whose folder is already taken.
        second: String,
        /// The folder both expand to.
        folder: PathBuf,
    },
    /// The user's paths could not be derived from the config.
    #[error("user {user}: {error}")]
    Paths {
        /// The user.
        user: String,
        /// Why (in the message; not a `source()`).
        error: Box<ConfigError>,
    },
    /// None of `[auth] users_file`, `[auth.sql]`, `[auth.ldap]` is set (a config built in
    /// code; a config file without one does not load).
    #[error("no user directory: set [auth] users_file, [auth.sql] or [auth.ldap]")]
    NoDirectory,
    /// `[auth.sql]` cannot be used.
    #[error(transparent)]
    Sql(#[from] SqlConfigError),
    /// `[auth.ldap]` cannot be used.
    #[error(transparent)]
    Ldap(#[from] LdapConfigError),
    /// The user directory cannot be asked now.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    /// The directory gives the user an owner this process cannot create files as
    /// (issue 20 #4; the text says what is unsupported and the fix).
    #[error("{0}")]
    Owner(String),
    /// The user's store failed.
    #[error("user {user}: {error}")]
    Store {
        /// The user.
        user: String,
        /// Why (in the message; not a `source()`).
        error: Box<StoreError>,
    },
}

impl AccountsError {
    /// True when the failure is a full disk or disk quota (ENOSPC/EDQUOT).
    pub fn is_no_space(&self) -> bool {
        matches!(self, AccountsError::Store { error, .. } if error.is_no_space())
    }
}

/// Why a recipient cannot be resolved.
#[derive(Debug, thiserror::Error)]
pub enum RecipientError {
    /// No user and no alias by that name (LMTP `550 5.1.1`).
    #[error("no such user: {0}")]
    Unknown(String),
    /// Something that may pass later (LMTP `451 4.3.0`).
    #[error("recipient {address}: {reason}")]
    Temporary {
        /// The address asked for.
        address: String,
        /// What went wrong.
        reason: String,
    },
}

/// A user of the users file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The users-file entry name: the identity that maps to paths
    /// ([`maildex_config::StorageConfig::paths_for`]).
    pub name: String,
    /// Storage quota in bytes (per-user rule, else the config default); `None` is
    /// unlimited.
    pub quota: Option<u64>,
    /// The owner the directory gives the user's files (userdb `uid`/`gid`); `None`: the
    /// process's own. See [`owner`] for what is honoured.
    pub owner: Option<Owner>,
}

/// Where one message for a recipient goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipient {
    /// The user.
    pub user: User,
    /// The mailbox: `INBOX`, or the detail's folder when that is enabled and exists.
    pub mailbox: String,
}

/// The user directory, aliases and the cache of lookups, swapped as one on reload (a
/// lookup that began before the swap fills the old cache, which goes with it).
#[derive(Debug)]
struct Directory {
    db: Arc<dyn UserDb>,
    aliases: Aliases,
    cache: Cache,
}

/// Users, aliases, quotas and open stores of one process. See the crate docs.
pub struct Accounts {
    config: Config,
    directory: RwLock<Arc<Directory>>,
    /// `[auth.sql]`'s or `[auth.ldap]`'s pool, kept across reloads (which re-read the
    /// aliases file only).
    remote: Option<Arc<dyn UserDb>>,
    stores: Mutex<Stores>,
    /// The session commands running, shared by every store opened here (the full-text
    /// indexer steps aside for them: `UserStore::foreground`).
    foreground: maildex_store::Foreground,
    watch: Mutex<Watch>,
    /// Folded names of the users whose mail was synced since the start (or whose sync was
    /// begun); `None` when [`Accounts::store`] does not sync (admin commands, `deliver`).
    synced: Option<Mutex<HashSet<String>>>,
}

/// How often a lookup looks whether the users or aliases file changed.
const RELOAD_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// What the users and aliases files were when last loaded, and when that was looked at.
struct Watch {
    checked: std::time::Instant,
    files: [Option<FileStamp>; 2],
}

/// Device, inode, size, mtime and ctime (ns): an edit in place or a replacing rename
/// changes at least one.
type FileStamp = (u64, u64, u64, i128, i128);

fn file_stamp(path: &std::path::Path) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    Some((
        m.dev(),
        m.ino(),
        m.size(),
        ns(m.mtime(), m.mtime_nsec()),
        ns(m.ctime(), m.ctime_nsec()),
    ))
}

fn files_stamp(config: &Config) -> [Option<FileStamp>; 2] {
    [
        config.auth.users_file.as_deref().and_then(file_stamp),
        config.lmtp.aliases_file.as_deref().and_then(file_stamp),
    ]
}

impl std::fmt::Debug for Accounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accounts")
            .field(
                "users",
                &self.directory.read().map(|d| format!("{:?}", d.db)),
            )
            .field("aliases_file", &self.config.lmtp.aliases_file)
            .finish_non_exhaustive()
    }
}

/// Store options from the config (`[storage] index_map_size`, `fsync`, `full_text`).
pub fn store_options(config: &Config) -> StoreOptions {
    let mut opts = StoreOptions::default();
    opts.index.map_size = config.storage.index_map_size as usize;
    opts.fsync = config.storage.fsync;
    opts.full_text = config.storage.full_text;
    opts.index.durable = config.storage.fsync;
    opts.mailboxes = config.mailboxes.iter().map(mailbox_setting).collect();
    opts
}

/// A `[mailboxes]` table as the store takes it.
fn mailbox_setting(m: &maildex_config::MailboxConfig) -> MailboxSetting {
    MailboxSetting {
        name: m.name.clone(),
        special_use: m.special_use.and_then(SpecialUse::from_attribute),
        auto: match m.auto {
            maildex_config::AutoCreate::No => AutoCreate::No,
            maildex_config::AutoCreate::Create => AutoCreate::Create,
            maildex_config::AutoCreate::Subscribe => AutoCreate::Subscribe,
        },
        autoexpunge: m.autoexpunge,
    }
}

fn load_directory(
    config: &Config,
    remote: Option<&Arc<dyn UserDb>>,
) -> Result<Directory, AccountsError> {
    let db: Arc<dyn UserDb> = match (remote, &config.auth.users_file) {
        (Some(remote), _) => Arc::clone(remote),
        (None, Some(path)) => Arc::new(FileDb::load(config, path)?),
        (None, None) => return Err(AccountsError::NoDirectory),
    };
    let aliases = match &config.lmtp.aliases_file {
        Some(p) => Aliases::load(p)?,
        None => Aliases::default(),
    };
    if db.in_memory() {
        for (source, target) in aliases.all_targets() {
            if !matches!(db.user(target), Ok(Some(_))) {
                tracing::warn!(
                    alias = source,
                    target,
                    "alias target is not in the users file; it will be skipped"
                );
            }
        }
    }
    let auth = &config.auth;
    let cache = Cache::new(auth.cache_size, auth.cache_ttl, auth.cache_negative_ttl);
    Ok(Directory { db, aliases, cache })
}

impl Accounts {
    /// Loads the users file and the aliases file named by `config`. Reads no user's mail:
    /// a Maildir and an index are created or opened when [`Accounts::store`] is first
    /// asked for them.
    pub fn load(config: Config) -> Result<Arc<Accounts>, AccountsError> {
        Self::load_with(config, false)
    }

    /// [`Accounts::load`] for the daemon: the first [`Accounts::store`] of each user after
    /// the start also syncs all of the user's mailboxes ([`UserStore::sync_all`], which
    /// removes what a crash left in `tmp/`), instead of a walk over every user at start-up.
    pub fn load_syncing_on_first_use(config: Config) -> Result<Arc<Accounts>, AccountsError> {
        Self::load_with(config, true)
    }

    fn load_with(config: Config, sync_first_use: bool) -> Result<Arc<Accounts>, AccountsError> {
        // stamped before reading: a change while the file is read is seen next time
        let files = files_stamp(&config);
        let remote: Option<Arc<dyn UserDb>> = match (&config.auth.sql, &config.auth.ldap) {
            (Some(s), _) => Some(Arc::new(SqlDb::new(s, config.storage.quota)?)),
            (None, Some(l)) => Some(Arc::new(LdapDb::new(l, config.storage.quota)?)),
            (None, None) => None,
        };
        let dir = load_directory(&config, remote.as_ref())?;
        Ok(Arc::new(Accounts {
            directory: RwLock::new(Arc::new(dir)),
            remote,
            config,
            stores: Mutex::default(),
            foreground: maildex_store::Foreground::default(),
            watch: Mutex::new(Watch {
                checked: std::time::Instant::now(),
                files,
            }),
            synced: sync_first_use.then(Mutex::default),
        }))
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Re-reads the users file and the aliases file and swaps both in at once (SIGHUP).
    /// On error the old versions stay in force.
    pub fn reload(&self) -> Result<(), AccountsError> {
        let mut watch = self.watch.lock().unwrap_or_else(|p| p.into_inner());
        watch.files = files_stamp(&self.config);
        watch.checked = std::time::Instant::now();
        let dir = Arc::new(load_directory(&self.config, self.remote.as_ref())?);
        *self.directory.write().unwrap_or_else(|p| p.into_inner()) = dir;
        Ok(())
    }

    /// Reloads when the users or aliases file changed since it was last loaded, looking at
    /// most every [`RELOAD_POLL`] (one `stat` per file; a lookup that finds another one
    /// looking does not wait). A file that no longer loads is logged once per change and
    /// the old users stay.
    fn reload_if_changed(&self) {
        let Ok(mut watch) = self.watch.try_lock() else {
            return;
        };
        let now = std::time::Instant::now();
        if now.duration_since(watch.checked) < RELOAD_POLL {
            return;
        }
        watch.checked = now;
        let files = files_stamp(&self.config);
        if files == watch.files {
            return;
        }
        watch.files = files;
        match load_directory(&self.config, self.remote.as_ref()) {
            Ok(dir) => {
                *self.directory.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(dir);
                tracing::info!("users or aliases file changed; reloaded");
            }
            Err(e) => tracing::error!(
                error = %e,
                "users or aliases file changed but does not load; keeping the previous users"
            ),
        }
    }

    fn dir(&self) -> Arc<Directory> {
        self.reload_if_changed();
        Arc::clone(&self.directory.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// `(user, scheme)` for every user whose password scheme is weak (PLAIN, fast hashes),
    /// where the directory can tell without a query (the users file).
    pub fn weak_schemes(&self) -> Vec<(String, String)> {
        self.dir().db.weak_schemes()
    }

    /// Every user of the directory (the users file, or `iterate_query`).
    pub fn user_names(&self) -> Result<Vec<String>, Unavailable> {
        self.dir().db.iterate()
    }

    /// Queries sent to the database since the start (0 for the users file).
    pub fn directory_queries(&self) -> u64 {
        self.dir().db.queries()
    }

    /// The user a login name (or recipient address) names: `Ok(None)` when there is no
    /// such user, [`Unavailable`] when the directory cannot be asked. BLOCKING for SQL.
    pub fn lookup(&self, login: &str) -> Result<Option<User>, Unavailable> {
        let dir = self.dir();
        Self::user_cached(&dir.cache, &*dir.db, login)
    }

    /// A user lookup through the cache.
    fn user_cached(
        cache: &Cache,
        db: &dyn UserDb,
        login: &str,
    ) -> Result<Option<User>, Unavailable> {
        match cache.user(login) {
            Hit::Found(u) => {
                tracing::debug!(login = %LogName::new(login), "user cache hit");
                return Ok(Some(u));
            }
            Hit::Absent => {
                tracing::debug!(login = %LogName::new(login), "user cache hit: no such user");
                return Ok(None);
            }
            Hit::Miss => {}
        }
        let found = db.user(login)?;
        tracing::debug!(login = %LogName::new(login), found = found.is_some(), "user cache miss");
        cache.put_user(login, found.clone());
        Ok(found)
    }

    /// Checks a login from `peer`: the user if the password matches and the user may
    /// log in from there (`allow_nets`), `Ok(None)` otherwise, [`Unavailable`] when the
    /// directory cannot be asked. BLOCKING (runs the KDF, asks the database): async
    /// callers use `spawn_blocking`.
    ///
    /// A login that succeeded with the same password within `[auth] cache_ttl` is answered
    /// from the cache (no hash, no query); a wrong password is never cached.
    ///
    /// Every failure takes at least the time of a check against the directory's most
    /// costly hash (the users file's [`maildex_auth::UsersFile::timing_reference`], else
    /// an Argon2id hash), so the time of a failed login does not tell an unknown user from
    /// a wrong password (issue 15 #29). A hash the server cannot check fails like a wrong
    /// password (logged at debug; the start-up refuses unknown schemes in the users file).
    pub fn verify_login(
        &self,
        login: &str,
        password: &[u8],
        peer: std::net::IpAddr,
    ) -> Result<Option<User>, Unavailable> {
        let dir = self.dir();
        let reference = dir.db.timing_reference();
        let who = LogName::new(login);
        let found = match dir.cache.login(login, password) {
            Hit::Found(ok) => {
                tracing::debug!(login = %who, "auth cache hit");
                return Ok(Self::allowed_from(ok, peer));
            }
            Hit::Absent => {
                tracing::debug!(login = %who, "auth cache hit: no such user");
                None
            }
            Hit::Miss => {
                let found = dir.db.password(login)?;
                tracing::debug!(login = %who, found = found.is_some(), "auth cache miss");
                if found.is_none() {
                    dir.cache.put_no_pass_user(login);
                }
                found
            }
        };
        let Some(rec) = found else {
            maildex_auth::verify_unknown_user(reference.as_ref(), password);
            return Ok(None);
        };
        let matched = dir.db.check_password(&rec, password)?;
        if !matched {
            if reference
                .as_ref()
                .is_some_and(|r| r.cost_rank() > rec.password.cost_rank())
            {
                maildex_auth::verify_unknown_user(reference.as_ref(), password);
            }
            return Ok(None);
        }
        let Some(user) = dir.db.login_user(&rec)? else {
            tracing::info!(user = %rec.user.name, "login refused: the password lookup found the user, the user lookup did not");
            return Ok(None);
        };
        let ok = CachedLogin {
            user,
            allow_nets: rec.allow_nets,
        };
        dir.cache.put_login(login, password, ok.clone());
        Ok(Self::allowed_from(ok, peer))
    }

    /// The user of a verified login if `peer` is in the user's `allow_nets`.
    fn allowed_from(ok: CachedLogin, peer: std::net::IpAddr) -> Option<User> {
        if let Some(nets) = &ok.allow_nets {
            if !nets.allows(peer) {
                tracing::info!(user = %ok.user.name, %peer, "login refused: not in allow_nets");
                return None;
            }
        }
        Some(ok.user)
    }

    /// Where mail for `address` (`local@domain`, or a bare local part) goes.
    ///
    /// Order: the whole address through the aliases, then the users file; if neither
    /// knows it and the local part holds a `recipient_delimiter` character, the part
    /// before it the same way, the rest being the detail. With
    /// `save_to_detail_mailbox`, a detail naming an existing folder (`INBOX` in any
    /// case too) selects it, otherwise INBOX (Dovecot's `lmtp_save_to_detail_mailbox`
    /// without autocreate). Targets of one alias that name the same user and mailbox
    /// are delivered once. Looks at the file system (whether the folder exists): call
    /// it off the async reactor.
    ///
    /// A directory that cannot be asked gives [`RecipientError::Temporary`].
    pub fn resolve_recipient(&self, address: &str) -> Result<Vec<Recipient>, RecipientError> {
        // with the file system allowed, `resolve` always answers
        self.resolve(address, true)
            .unwrap_or_else(|| Err(RecipientError::Unknown(address.to_owned())))
    }

    /// [`Accounts::resolve_recipient`] when the answer needs no file system access (no
    /// detail that could name a folder, and a directory in memory), so the caller may run
    /// it on the async reactor; None otherwise. An unknown address is answered here too.
    pub fn resolve_recipient_in_memory(
        &self,
        address: &str,
    ) -> Option<Result<Vec<Recipient>, RecipientError>> {
        self.resolve(address, false)
    }

    /// Resolves `address`; None when a detail folder must be looked up and `fs` is false.
    fn resolve(&self, address: &str, fs: bool) -> Option<Result<Vec<Recipient>, RecipientError>> {
        let dir = self.dir();
        if !fs && !dir.db.in_memory() {
            return None;
        }
        let temporary = |e: Unavailable| {
            Some(Err(RecipientError::Temporary {
                address: address.to_owned(),
                reason: e.to_string(),
            }))
        };
        let mut users = match self.expand(&dir, address) {
            Ok(u) => u,
            Err(e) => return temporary(e),
        };
        let mut detail = None;
        if users.is_empty() {
            if let Some((base, d)) = self.split_detail(address) {
                users = match self.expand(&dir, &base) {
                    Ok(u) => u,
                    Err(e) => return temporary(e),
                };
                detail = Some(d);
            }
        }
        if users.is_empty() {
            return Some(Err(RecipientError::Unknown(address.to_owned())));
        }
        let mut out: Vec<Recipient> = Vec::with_capacity(users.len());
        for user in users {
            let mailbox = match &detail {
                Some(d) if self.config.lmtp.save_to_detail_mailbox => {
                    if !fs {
                        return None;
                    }
                    match self.detail_mailbox(&user, d) {
                        Ok(m) => m,
                        Err(reason) => {
                            return Some(Err(RecipientError::Temporary {
                                address: address.to_owned(),
                                reason,
                            }))
                        }
                    }
                }
                _ => "INBOX".to_owned(),
            };
            let dup = out
                .iter()
                .any(|r| r.user.name.eq_ignore_ascii_case(&user.name) && r.mailbox == mailbox);
            if !dup {
                out.push(Recipient { user, mailbox });
            }
        }
        Some(Ok(out))
    }

    /// Users for an address: alias targets (the aliases file's, else the directory's),
    /// else the directory's user.
    fn expand(&self, dir: &Directory, address: &str) -> Result<Vec<User>, Unavailable> {
        let db = &*dir.db;
        let directory_targets;
        let targets = match dir.aliases.lookup(address) {
            Some(t) => Some(t),
            None => {
                directory_targets = Self::directory_aliases(&dir.cache, db, address)?;
                directory_targets.as_deref()
            }
        };
        if let Some(targets) = targets {
            let mut users = Vec::with_capacity(targets.len());
            for t in targets {
                match Self::user_cached(&dir.cache, db, t)? {
                    Some(u) => users.push(u),
                    None => {
                        tracing::warn!(alias = address, target = %t, "alias target is not a user; skipped")
                    }
                }
            }
            return Ok(users);
        }
        Ok(Self::user_cached(&dir.cache, db, address)?
            .into_iter()
            .collect())
    }

    /// The directory's targets for `address` (SQL `alias_query`), through the cache.
    fn directory_aliases(
        cache: &Cache,
        db: &dyn UserDb,
        address: &str,
    ) -> Result<Option<Vec<String>>, Unavailable> {
        if !db.has_aliases() {
            return Ok(None);
        }
        match cache.alias(address) {
            Hit::Found(t) => return Ok(Some(t)),
            Hit::Absent => return Ok(None),
            Hit::Miss => {}
        }
        let targets = db.aliases(address)?;
        cache.put_alias(address, targets.clone());
        Ok(targets)
    }

    /// `user+detail@domain` -> (`user@domain`, `detail`), at the first delimiter.
    fn split_detail(&self, address: &str) -> Option<(String, String)> {
        let delims = &self.config.lmtp.recipient_delimiter;
        if delims.is_empty() {
            return None;
        }
        let (local, domain) = match address.rsplit_once('@') {
            Some((l, d)) => (l, Some(d)),
            None => (address, None),
        };
        let i = local.find(|c| delims.contains(c))?;
        let delim_len = local[i..].chars().next().map_or(1, char::len_utf8);
        let (user, detail) = (&local[..i], &local[i + delim_len..]);
        if user.is_empty() {
            return None;
        }
        let base = match domain {
            Some(d) => format!("{user}@{d}"),
            None => user.to_owned(),
        };
        Some((base, detail.to_owned()))
    }

    fn detail_mailbox(&self, user: &User, detail: &str) -> Result<String, String> {
        if detail.is_empty() || detail.eq_ignore_ascii_case("INBOX") {
            return Ok("INBOX".to_owned());
        }
        let paths = self
            .config
            .storage
            .paths_for(&user.name)
            .map_err(|e| e.to_string())?;
        // a name that cannot be a folder simply is not one: INBOX
        match maildex_maildir::folder::folder_path(&paths.maildir, detail) {
            Ok(p) if maildex_maildir::folder::is_mailbox_dir(&p) => Ok(detail.to_owned()),
            _ => Ok("INBOX".to_owned()),
        }
    }

    /// The user's store, opened once per process and cached. BLOCKING on first use
    /// (opens the LMDB env, creates the Maildir if missing; for the daemon, the first use
    /// after the start also syncs every mailbox of the user, see
    /// [`Accounts::load_syncing_on_first_use`]).
    ///
    /// This is the delivery path (LMTP, `maildex deliver`): it does not make the
    /// configured folders (Drafts, Sent, Trash...), as Dovecot's delivery does not make its
    /// `auto` folders. A new user's first delivery then makes only the Maildir, INBOX and
    /// the index, and syncs them once: 25 fewer syncs than with the five default folders
    /// (each one's dovecot-uidlist, `tmp/`, `new/`, `cur/` and the folder; issue 20's
    /// deliveries to new users). [`Accounts::session_store`] makes them at the first login.
    pub fn store(&self, user: &User) -> Result<Arc<UserStore>, AccountsError> {
        self.store_with(user, false)
    }

    /// The user's store for an IMAP session: [`Accounts::store`], and the configured
    /// folders the user lacks, made at the first login (one small read of a marker file
    /// once done). A failure to make them is logged; the session goes on without them.
    pub fn session_store(&self, user: &User) -> Result<Arc<UserStore>, AccountsError> {
        let store = self.store_with(user, true)?;
        if let Err(e) = store.create_special_folders() {
            tracing::warn!(user = %user.name, error = %e, "could not create the configured folders");
        }
        Ok(store)
    }

    /// [`Accounts::store`]; `folders` makes a new user's configured folders with the rest
    /// of the new store (durable once, see `UserStore::create_new`).
    fn store_with(&self, user: &User, folders: bool) -> Result<Arc<UserStore>, AccountsError> {
        let store = self.open_store(user, folders)?;
        self.sync_on_first_use(user, &store);
        // Maildir++ maildirsize for the other tools while the user has a quota (a new or
        // changed limit rewrites it from the index, synced just now at a first use)
        store.set_quota_limit(user.quota);
        Ok(store)
    }

    /// Syncs all of `user`'s mailboxes if nobody did since the start. Once per user per
    /// process, whatever the outcome: a failure is logged and each mailbox is still synced
    /// when it is opened, as sessions and deliveries do anyway. A second first use meanwhile
    /// does not wait for the sync (its mailboxes sync themselves).
    fn sync_on_first_use(&self, user: &User, store: &UserStore) {
        let Some(synced) = &self.synced else {
            return;
        };
        let first = synced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(user.name.to_ascii_lowercase());
        if !first {
            return;
        }
        match store.sync_all() {
            Ok(r) => tracing::info!(
                user = %user.name,
                mailboxes = r.mailboxes,
                unchanged = r.unchanged,
                added = r.added,
                tmp_removed = r.tmp_removed,
                "first use since start: mailboxes synced"
            ),
            Err(e) => tracing::error!(
                user = %user.name,
                error = %e,
                "first use since start: sync failed; each mailbox is synced again when opened"
            ),
        }
    }

    fn open_store(&self, user: &User, folders: bool) -> Result<Arc<UserStore>, AccountsError> {
        let key = user.name.to_ascii_lowercase();
        stores::open_once(&self.stores, &key, || self.open_new_store(user, folders))
    }

    /// [`store_options`] with this process's shared [`maildex_store::Foreground`]. The
    /// daemon's indexes leave commits unsynced for `[storage] index_sync_delay`: it
    /// syncs them as it stops ([`maildex_store::sync_unsynced_indexes`]); a short-lived command
    /// (`maildex deliver`, the admin commands) syncs each commit.
    fn store_options(&self) -> StoreOptions {
        let mut opts = store_options(&self.config);
        opts.foreground = self.foreground.clone();
        let delay = self.config.storage.index_sync_delay;
        if self.synced.is_some() && !delay.is_zero() {
            opts.index.sync_delay = Some(delay);
        }
        opts
    }

    fn open_new_store(&self, user: &User, folders: bool) -> Result<UserStore, AccountsError> {
        // before anything of the user's is created or opened: files made as another owner
        // than the directory's would be unreadable to the user's other tools (and to us
        // after a switch)
        if let Some(why) = user
            .owner
            .and_then(|o| o.refusal(&user.name, owner::process_identity()))
        {
            return Err(AccountsError::Owner(why));
        }
        let paths =
            self.config
                .storage
                .paths_for(&user.name)
                .map_err(|error| AccountsError::Paths {
                    user: user.name.clone(),
                    error: Box::new(error),
                })?;
        let store_error = |error| AccountsError::Store {
            user: user.name.clone(),
            error: Box::new(error),
        };
        // a new user's configured folders (Drafts, Sent, Trash...) with the rest of the
        // store when a login opens it; a failure leaves the user's mail usable and is logged
        let (store, folders) = if UserStore::is_new(&paths.maildir, &paths.index_dir) {
            // made whole, then durable once (issue 19 #4); nothing to sync at first use
            let made = UserStore::create_new(
                &paths.maildir,
                &paths.index_dir,
                self.store_options(),
                folders,
            )
            .map_err(store_error)?;
            if let Some(synced) = &self.synced {
                let mut synced = synced.lock().unwrap_or_else(|p| p.into_inner());
                synced.insert(user.name.to_ascii_lowercase());
            }
            made
        } else {
            let store =
                UserStore::open_upgrading(&paths.maildir, &paths.index_dir, self.store_options())
                    .map_err(store_error)?;
            (store, Ok(Vec::new()))
        };
        if let Err(e) = folders {
            tracing::warn!(user = %user.name, error = %e, "could not create the configured folders");
        }
        Ok(store)
    }

    /// Registers `f`, called with every store opened from now on (once per open, on the
    /// thread that opened it, outside the cache's lock): the daemon's background
    /// full-text indexer watches each open store's change feed from there.
    pub fn on_store_opened(&self, f: StoreOpened) {
        self.stores
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .on_open = Some(f);
    }

    /// The stores open now (users logged in or delivered to within the last minute), for
    /// background work such as autoexpunge.
    pub fn open_stores(&self) -> Vec<Arc<UserStore>> {
        let stores = self.stores.lock().unwrap_or_else(|p| p.into_inner());
        stores.open.values().map(|(s, _)| Arc::clone(s)).collect()
    }
}
