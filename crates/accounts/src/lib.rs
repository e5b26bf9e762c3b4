//! maildex-accounts: who the users are and where their mail lives, shared by the LMTP
//! and IMAP servers.
//!
//! [`Accounts`] holds the configuration, the users file, the aliases file and a cache
//! of open stores (one [`UserStore`] per user per process: the index registry allows
//! one LMDB env per folder; a store nobody else holds is closed after a minute unused, so
//! memory and file descriptors follow the users active now, not every user since start).
//! It answers:
//! - [`Accounts::lookup`] / [`Accounts::verify_login`]: the users-file rules of
//!   `maildex-auth` (a full address wins over a bare local part; a bare entry matches
//!   any domain);
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
mod fields;
mod nets;
mod quota;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use maildex_auth::{AuthError, UsersFile};
use maildex_config::{Config, ConfigError};
use maildex_store::{AutoCreate, MailboxSetting, SpecialUse, StoreError, StoreOptions, UserStore};

pub use aliases::Aliases;
pub use maildex_auth::LogName;
use nets::AllowNets;
pub use quota::usage;

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
}

/// A storage quota and its use, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageQuota {
    /// Bytes the user's mail takes (every mailbox).
    pub used: u64,
    /// The limit.
    pub limit: u64,
}

impl StorageQuota {
    /// Whether `incoming` more bytes would go over the limit (with `0`, size not known
    /// yet: whether the use is at or over it).
    pub fn exceeded_by(&self, incoming: u64) -> bool {
        self.used.saturating_add(incoming.max(1)) > self.limit
    }

    /// Whether `added` bytes take the use from below `percent` of the limit to it or above.
    pub fn crosses(&self, percent: u8, added: u64) -> bool {
        let threshold = u128::from(self.limit) * u128::from(percent) / 100;
        let before = u128::from(self.used);
        before < threshold && before + u128::from(added) >= threshold
    }
}

/// Where one message for a recipient goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipient {
    /// The user.
    pub user: User,
    /// The mailbox: `INBOX`, or the detail's folder when that is enabled and exists.
    pub mailbox: String,
}

/// The users file and aliases, swapped as one on reload.
#[derive(Debug)]
struct Directory {
    users: UsersFile,
    aliases: Aliases,
    /// Folded user name -> quota, for the users with a rule of their own (the others have
    /// `[storage] quota`).
    quotas: HashMap<String, Option<u64>>,
    /// `[storage] quota`.
    default_quota: Option<u64>,
    /// Folded user name -> where the user may log in from (`allow_nets=`).
    allow_nets: HashMap<String, AllowNets>,
}

/// Users, aliases, quotas and open stores of one process. See the crate docs.
pub struct Accounts {
    config: Config,
    directory: RwLock<Arc<Directory>>,
    stores: Mutex<Stores>,
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
        file_stamp(&config.auth.users_file),
        config.lmtp.aliases_file.as_deref().and_then(file_stamp),
    ]
}

/// How long a store nobody holds stays open after its last use.
const STORE_IDLE: std::time::Duration = std::time::Duration::from_secs(60);

/// Open stores by folded user name, with when each was last handed out.
#[derive(Default)]
struct Stores {
    open: HashMap<String, (Arc<UserStore>, std::time::Instant)>,
    swept: Option<std::time::Instant>,
}

impl Stores {
    /// Closes the stores only this cache holds that were not used for [`STORE_IDLE`]
    /// (at most every [`STORE_IDLE`] / 2). A store held by a session or a delivery stays:
    /// one store per user per process, and the count cannot grow while we hold the lock,
    /// since new holders get their clone here.
    fn sweep(&mut self, now: std::time::Instant) {
        if self
            .swept
            .is_some_and(|t| now.duration_since(t) < STORE_IDLE / 2)
        {
            return;
        }
        self.swept = Some(now);
        self.open.retain(|_, (store, used)| {
            Arc::strong_count(store) > 1 || now.duration_since(*used) < STORE_IDLE
        });
    }
}

impl std::fmt::Debug for Accounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accounts")
            .field("users_file", &self.config.auth.users_file)
            .field("aliases_file", &self.config.lmtp.aliases_file)
            .finish_non_exhaustive()
    }
}

/// Store options from the config (`[storage] index_map_size`, `fsync`).
pub fn store_options(config: &Config) -> StoreOptions {
    let mut opts = StoreOptions::default();
    opts.index.map_size = config.storage.index_map_size as usize;
    opts.fsync = config.storage.fsync;
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

fn load_directory(config: &Config) -> Result<Directory, AccountsError> {
    let users = UsersFile::load(&config.auth.users_file)?;
    let aliases = match &config.lmtp.aliases_file {
        Some(p) => Aliases::load(p)?,
        None => Aliases::default(),
    };
    let mut quotas = HashMap::new();
    let mut allow_nets = HashMap::new();
    let mut ignored = fields::Ignored::default();
    for e in users.list() {
        let field_error = |reason| AccountsError::UserField {
            path: config.auth.users_file.clone(),
            line: e.line,
            user: e.name.clone(),
            reason,
        };
        if let Some(q) = quota::rule_from_extra(&e.extra).map_err(field_error)? {
            quotas.insert(e.name.to_ascii_lowercase(), q);
        }
        ignored.note_entry(e);
        for field in e
            .extra
            .iter()
            .filter(|f| f.split('=').next() == Some("allow_nets"))
        {
            let value = field.split_once('=').map_or("", |(_, v)| v);
            let nets = AllowNets::parse(value).map_err(field_error)?;
            allow_nets.insert(e.name.to_ascii_lowercase(), nets);
        }
    }
    ignored.warn(&config.auth.users_file);
    refuse_shared_folders(config, &users)?;
    for (source, target) in aliases.all_targets() {
        if users.lookup(target).is_none() {
            tracing::warn!(
                alias = source,
                target,
                "alias target is not in the users file; it will be skipped"
            );
        }
    }
    Ok(Directory {
        users,
        aliases,
        quotas,
        default_quota: config.storage.quota,
        allow_nets,
    })
}

/// Refuses a users file in which two users' Maildirs or index folders are one folder
/// (`mail_location = "/var/vmail/%n"` with `mia@example.org` and `mia@other.org`). A name
/// that expands to no path at all is left to the lookup that would use it.
fn refuse_shared_folders(config: &Config, users: &UsersFile) -> Result<(), AccountsError> {
    let mut seen: HashMap<PathBuf, &str> = HashMap::new();
    for e in users.list() {
        let Ok(paths) = config.storage.paths_for(&e.name) else {
            continue;
        };
        for folder in [paths.maildir, paths.index_dir] {
            if let Some(first) = seen.get(&folder) {
                if *first != e.name.as_str() {
                    return Err(AccountsError::SharedFolder {
                        path: config.auth.users_file.clone(),
                        line: e.line,
                        first: (*first).to_owned(),
                        second: e.name.clone(),
                        folder,
                    });
                }
            }
            seen.insert(folder, &e.name);
        }
    }
    Ok(())
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
        let dir = load_directory(&config)?;
        Ok(Arc::new(Accounts {
            config,
            directory: RwLock::new(Arc::new(dir)),
            stores: Mutex::default(),
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
        let dir = Arc::new(load_directory(&self.config)?);
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
        match load_directory(&self.config) {
            Ok(dir) => {
                *self.directory.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(dir);
                tracing::info!(users_file = %self.config.auth.users_file.display(), "users or aliases file changed; reloaded");
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

    fn user_of(dir: &Directory, entry: &maildex_auth::UserEntry) -> User {
        User {
            name: entry.name.clone(),
            quota: dir
                .quotas
                .get(&entry.name.to_ascii_lowercase())
                .copied()
                .unwrap_or(dir.default_quota),
        }
    }

    /// `(user, scheme)` for every user whose password scheme is weak (PLAIN, fast hashes).
    pub fn weak_schemes(&self) -> Vec<(String, String)> {
        self.dir().users.weak_schemes()
    }

    /// The user a login name (or recipient address) names, by the users-file rules.
    pub fn lookup(&self, login: &str) -> Option<User> {
        let dir = self.dir();
        let entry = dir.users.lookup(login)?;
        Some(Self::user_of(&dir, entry))
    }

    /// Checks a login from `peer`: the user if the password matches and the user may
    /// log in from there (`allow_nets`), `None` otherwise. BLOCKING (runs the KDF):
    /// async callers use `spawn_blocking`.
    ///
    /// Every failure takes at least the time of a check against the users file's most
    /// costly hash ([`maildex_auth::UsersFile::timing_reference`]), so the time of a
    /// failed login does not tell an unknown user from a wrong password (issue 15 #29).
    /// A hash the server cannot check fails like a wrong password (logged at debug; the
    /// start-up refuses unknown schemes).
    pub fn verify_login(
        &self,
        login: &str,
        password: &[u8],
        peer: std::net::IpAddr,
    ) -> Option<User> {
        let dir = self.dir();
        let reference = dir.users.timing_reference();
        let Some(entry) = dir.users.lookup(login) else {
            maildex_auth::verify_unknown_user(reference, password);
            return None;
        };
        let matched = maildex_auth::verify(&entry.password, password).unwrap_or_else(|e| {
            tracing::debug!(user = %entry.name, error = %e, "password hash cannot be checked");
            false
        });
        if !matched {
            if reference.is_some_and(|r| r.cost_rank() > entry.password.cost_rank()) {
                maildex_auth::verify_unknown_user(reference, password);
            }
            return None;
        }
        let folded = entry.name.to_ascii_lowercase();
        if let Some(nets) = dir.allow_nets.get(&folded) {
            if !nets.allows(peer) {
                tracing::info!(user = %entry.name, %peer, "login refused: not in allow_nets");
                return None;
            }
        }
        Some(Self::user_of(&dir, entry))
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
    pub fn resolve_recipient(&self, address: &str) -> Result<Vec<Recipient>, RecipientError> {
        // with the file system allowed, `resolve` always answers
        self.resolve(address, true)
            .unwrap_or_else(|| Err(RecipientError::Unknown(address.to_owned())))
    }

    /// [`Accounts::resolve_recipient`] when the answer needs no file system access (no
    /// detail that could name a folder), so the caller may run it on the async reactor;
    /// None otherwise. An unknown address is answered here too.
    pub fn resolve_recipient_in_memory(
        &self,
        address: &str,
    ) -> Option<Result<Vec<Recipient>, RecipientError>> {
        self.resolve(address, false)
    }

    /// Resolves `address`; None when a detail folder must be looked up and `fs` is false.
    fn resolve(&self, address: &str, fs: bool) -> Option<Result<Vec<Recipient>, RecipientError>> {
        let dir = self.dir();
        let mut users = Self::expand(&dir, address);
        let mut detail = None;
        if users.is_empty() {
            if let Some((base, d)) = self.split_detail(address) {
                users = Self::expand(&dir, &base);
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

    /// Users for an address: alias targets, else the users-file entry.
    fn expand(dir: &Directory, address: &str) -> Vec<User> {
        if let Some(targets) = dir.aliases.lookup(address) {
            return targets
                .iter()
                .filter_map(|t| match dir.users.lookup(t) {
                    Some(e) => Some(Self::user_of(dir, e)),
                    None => {
                        tracing::warn!(alias = address, target = %t, "alias target is not a user; skipped");
                        None
                    }
                })
                .collect();
        }
        dir.users
            .lookup(address)
            .map(|e| vec![Self::user_of(dir, e)])
            .unwrap_or_default()
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
    pub fn store(&self, user: &User) -> Result<Arc<UserStore>, AccountsError> {
        let store = self.open_store(user)?;
        self.sync_on_first_use(user, &store);
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

    fn open_store(&self, user: &User) -> Result<Arc<UserStore>, AccountsError> {
        let key = user.name.to_ascii_lowercase();
        let mut stores = self.stores.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        stores.sweep(now);
        if let Some((s, used)) = stores.open.get_mut(&key) {
            *used = now;
            return Ok(Arc::clone(s));
        }
        let paths =
            self.config
                .storage
                .paths_for(&user.name)
                .map_err(|error| AccountsError::Paths {
                    user: user.name.clone(),
                    error: Box::new(error),
                })?;
        let store = UserStore::open_upgrading(
            &paths.maildir,
            &paths.index_dir,
            store_options(&self.config),
        )
        .map_err(|error| AccountsError::Store {
            user: user.name.clone(),
            error: Box::new(error),
        })?;
        // the configured folders (Drafts, Sent, Trash...), on the path both IMAP login and
        // LMTP delivery take; a failure leaves the user's mail usable and is logged
        if let Err(e) = store.create_special_folders() {
            tracing::warn!(user = %user.name, error = %e, "could not create the configured folders");
        }
        let store = Arc::new(store);
        stores.open.insert(key, (Arc::clone(&store), now));
        Ok(store)
    }

    /// The stores open now (users logged in or delivered to within the last minute), for
    /// background work such as autoexpunge.
    pub fn open_stores(&self) -> Vec<Arc<UserStore>> {
        let stores = self.stores.lock().unwrap_or_else(|p| p.into_inner());
        stores.open.values().map(|(s, _)| Arc::clone(s)).collect()
    }

    /// Whether `incoming` more bytes would take `user` over quota (always false without
    /// a quota). With `incoming == 0` (size not known yet), true once the user is at or
    /// over the limit. Reads the index counts: BLOCKING on first use of the store.
    pub fn over_quota(&self, user: &User, incoming: u64) -> Result<bool, AccountsError> {
        Ok(self
            .storage_quota(user)?
            .is_some_and(|q| q.exceeded_by(incoming)))
    }

    /// After `added` bytes were delivered to `user`, whose use was `before`: when that took
    /// the use across `[storage] quota_warning` percent of the limit, delivers a notice to
    /// the user's INBOX. Once per crossing, as Dovecot's `quota_warning`: a delivery that
    /// starts at or above the threshold sends none. A notice that cannot be delivered is
    /// logged; the delivery it follows stands.
    pub fn quota_warning(&self, user: &User, before: Option<StorageQuota>, added: u64) {
        let (Some(percent), Some(q)) = (self.config.storage.quota_warning, before) else {
            return;
        };
        if !q.crosses(percent, added) {
            return;
        }
        let after = StorageQuota {
            used: q.used.saturating_add(added),
            ..q
        };
        let host = self.config.lmtp.host_name();
        let notice = quota::warning_notice(&user.name, after, percent, &host);
        let delivered = self.store(user).and_then(|store| {
            let opts = maildex_store::DeliverOptions::default();
            store
                .deliver("INBOX", &mut notice.as_slice(), &opts)
                .map_err(|error| AccountsError::Store {
                    user: user.name.clone(),
                    error: Box::new(error),
                })
        });
        match delivered {
            Ok(d) => {
                tracing::info!(user = %user.name, percent, uid = d.uid, "quota warning delivered")
            }
            Err(e) => tracing::error!(user = %user.name, error = %e, "quota warning not delivered"),
        }
    }

    /// A user's storage limit and what the mail takes now (`None` without a limit): what
    /// LMTP, APPEND and IMAP's GETQUOTA (RFC 9208) all count against. BLOCKING on first
    /// use of the store.
    pub fn storage_quota(&self, user: &User) -> Result<Option<StorageQuota>, AccountsError> {
        let Some(limit) = user.quota else {
            return Ok(None);
        };
        let store = self.store(user)?;
        let used = usage(&store).map_err(|error| AccountsError::Store {
            user: user.name.clone(),
            error: Box::new(error),
        })?;
        Ok(Some(StorageQuota { used, limit }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accounts(dir: &std::path::Path) -> Arc<Accounts> {
        std::fs::write(dir.join("users"), "alice:{PLAIN}pw\n").unwrap();
        let text = format!(
            "[storage]\nmail_location = \"{d}/mail/%u\"\nindex_root = \"{d}/index/%u\"\n\
             fsync = false\n[auth]\nusers_file = \"{d}/users\"\n",
            d = dir.display()
        );
        let config = Config::from_toml_str(&text, &dir.join("maildex.toml")).unwrap();
        Accounts::load(config).unwrap()
    }

    #[test]
    fn a_store_nobody_holds_is_closed_after_a_while_unused_and_a_held_one_stays() {
        let dir = tempfile::tempdir().unwrap();
        let a = accounts(dir.path());
        let alice = a.lookup("alice").unwrap();
        let first = a.store(&alice).unwrap();
        let weak = Arc::downgrade(&first);
        // held by a session: one store, kept however long it is unused
        assert!(Arc::ptr_eq(&first, &a.store(&alice).unwrap()));
        let later = std::time::Instant::now() + STORE_IDLE * 2;
        a.stores.lock().unwrap().sweep(later);
        assert!(Arc::ptr_eq(&first, &a.store(&alice).unwrap()));
        // nobody holds it: closed by the next sweep a while later, reopened on demand
        drop(first);
        let mut stores = a.stores.lock().unwrap();
        stores.swept = None;
        stores.sweep(later);
        assert!(stores.open.is_empty());
        drop(stores);
        assert!(
            weak.upgrade().is_none(),
            "the store (and its LMDB env) is closed"
        );
        let again = a.store(&alice).unwrap();
        assert!(again
            .index()
            .read(|r| r.schema_version())
            .unwrap()
            .is_some());
    }
}
