//! What the subcommands share: logging, loading the config, resolving users to stores.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{bail, Context, Result};
use maildex_accounts::Owner;
use maildex_config::{Config, LogFormat, UserPaths};
use maildex_daemon::privileges::{self, Identity};
use maildex_store::UserStore;

use crate::UsersArg;

/// Logs to stderr: `$MAILDEX_LOG` (a tracing filter) when set and not empty, else the
/// config's `[log] level` (an empty `MAILDEX_LOG=` must not silence errors). Colours only
/// when stderr is a terminal: a log file or journald gets plain text. `[log] format =
/// "json"` writes one JSON object per line.
pub fn init_logging(level: &str, format: LogFormat) {
    let directives = std::env::var("MAILDEX_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty() && tracing_subscriber::EnvFilter::try_new(v).is_ok())
        .unwrap_or_else(|| level.to_owned());
    let mut filter = tracing_subscriber::EnvFilter::new(&directives);
    if !directives.contains("rustls") {
        // rustls warns for every client that sends an IP address as SNI (openssl
        // s_client -servername 127.0.0.1, some mail clients): harmless, ignored by the
        // handshake, and not the admin's to fix. A filter naming rustls keeps them.
        if let Ok(quiet) = "rustls::msgs::handshake=error".parse() {
            filter = filter.add_directive(quiet);
        }
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        LogFormat::Json => builder.json().with_ansi(false).try_init(),
    };
}

/// `e` and its causes joined by `: ` (anyhow's `{:#}`: our context, then the error).
///
/// The rule for every error type of the workspace: a variant whose message shows another
/// error's text (`"{path}: {error}"`) holds it in a field that is not its `source()`
/// (thiserror: no `#[source]`/`#[from]`, no field named `source`), and a variant that
/// wraps another error without text of its own is `#[error(transparent)]`. So a message
/// names each cause once, log lines (which print only the message) lose nothing, and
/// this chain repeats nothing. Code that needs the OS error asks the type
/// (`StoreError::is_no_space`) instead of walking `source()`.
pub fn error_text(e: &anyhow::Error) -> String {
    format!("{e:#}")
}

pub fn load_config(path: &Path) -> Result<Config> {
    let config =
        Config::load(path).with_context(|| format!("loading config {}", path.display()))?;
    init_logging(&config.log.level, config.log.format);
    Ok(config)
}

/// Store options from the config: the same ones the daemon uses.
pub use maildex_accounts::store_options;

/// The login names a command applies to.
pub fn users(config: &Config, which: &UsersArg) -> Result<Vec<String>> {
    if let Some(u) = &which.user {
        return Ok(vec![u.clone()]);
    }
    let Some(path) = &config.auth.users_file else {
        // the directory's iterate_query or iterate_filter
        let accounts = maildex_accounts::Accounts::load(config.clone())?;
        return Ok(accounts.user_names()?);
    };
    let file = maildex_auth::UsersFile::load(path)
        .with_context(|| format!("reading users file {}", path.display()))?;
    Ok(file.list().map(|e| e.name.clone()).collect())
}

/// `[auth] users_file`, for the commands that edit it.
pub fn users_file(config: &Config) -> Result<&Path> {
    config.auth.users_file.as_deref().ok_or_else(|| {
        let place = match config.auth.ldap {
            Some(_) => "[auth.ldap]: manage them in the directory",
            None => "[auth.sql]: manage them in the database",
        };
        anyhow::anyhow!("the users are in {place}")
    })
}

pub fn open_store(config: &Config, user: &str) -> Result<UserStore> {
    let paths = config
        .storage
        .paths_for(user)
        .with_context(|| format!("user {user}"))?;
    UserStore::open(&paths.maildir, &paths.index_dir, store_options(config))
        .with_context(|| format!("opening the mail of {user}"))
}

/// [`open_store`] for the paths that deliver and serve mail: an index of another schema
/// version (left by an older maildex) is replaced and refilled from the Maildir.
pub fn open_store_upgrading(config: &Config, user: &str) -> Result<UserStore> {
    let paths = config
        .storage
        .paths_for(user)
        .with_context(|| format!("user {user}"))?;
    UserStore::open_upgrading(&paths.maildir, &paths.index_dir, store_options(config))
        .with_context(|| format!("opening the mail of {user}"))
}

/// Started as root, an admin command that touches users' mail switches for good to the
/// mail's owner first, as doveadm runs as the userdb's uid: the owner the directory gives
/// the users (their uid/gid fields, issue 20 #4), else the `[daemon] user` (and group)
/// when one is configured, else the owner of the mail root (the nearest existing folder of
/// `mail_location`'s fixed prefix). So every file it creates belongs to the user the daemon
/// runs as, and a file that user cannot read is reported, not worked around. A mail root
/// owned by root keeps root. Users of different owners cannot be served by one process:
/// the command says so and asks for one user at a time. Not root: nothing changes, and a
/// user whose owner is someone else is refused.
pub fn become_mail_owner(config: &Config, users: &[String]) -> Result<()> {
    let owners = owners_of(config, users)?;
    become_owner(config, &owners)
}

/// The owner the directory gives each of `users` (`None`: none, or no such user).
fn owners_of(config: &Config, users: &[String]) -> Result<Vec<(String, Option<Owner>)>> {
    if users.is_empty() {
        return Ok(Vec::new());
    }
    let accounts = maildex_accounts::Accounts::load(config.clone())?;
    users
        .iter()
        .map(|u| Ok((u.clone(), accounts.lookup(u)?.and_then(|u| u.owner))))
        .collect()
}

/// [`become_mail_owner`] for users whose owners are known: `(name, owner)` each.
pub fn become_owner(config: &Config, owners: &[(String, Option<Owner>)]) -> Result<()> {
    if !privileges::is_root() {
        let me = maildex_accounts::owner::process_identity();
        for (user, owner) in owners {
            if let Some(why) = owner.and_then(|o| o.refusal(user, me)) {
                bail!("{why}; run this command as root or as that user");
            }
        }
        return Ok(());
    }
    let (default_name, default) = match &config.daemon.user {
        Some(user) => (
            user.clone(),
            privileges::resolve(user, config.daemon.group.as_deref())?,
        ),
        None => {
            let prefix = config.storage.mail_location.fixed_prefix();
            let id = prefix
                .ancestors()
                .find_map(|p| std::fs::metadata(p).ok())
                .map_or(Identity { uid: 0, gid: 0 }, |md| Identity {
                    uid: md.uid(),
                    gid: md.gid(),
                });
            (id.uid.to_string(), id)
        }
    };
    let mut wanted: Option<(&str, Identity)> = None;
    for (user, owner) in owners {
        let id = match owner {
            Some(o) => {
                let (uid, gid) = o.or((default.uid, default.gid));
                Identity { uid, gid }
            }
            None => default,
        };
        match wanted {
            Some((first, w)) if w != id => bail!(
                "users {first} (uid {} gid {}) and {user} (uid {} gid {}) have different \
                 owners and one process writes as one owner: run the command for one user \
                 at a time (--user)",
                w.uid,
                w.gid,
                id.uid,
                id.gid
            ),
            Some(_) => {}
            None => wanted = Some((user, id)),
        }
    }
    let (name, id) = match wanted {
        Some((user, id)) if id != default => (format!("the owner of {user}"), id),
        _ => (default_name, default),
    };
    if id.uid == 0 {
        return Ok(());
    }
    privileges::switch_to(&name, id)?;
    Ok(())
}

/// What the index commands say of a user whose Maildir does not exist yet.
pub const NO_MAIL_YET: &str = "no Maildir yet (nothing delivered, never logged in)";

/// The paths of `user` when the user has an index already; None (and a line saying why)
/// otherwise. Read-only commands use it so that they create nothing for a user who has no
/// mail yet.
pub fn existing_paths(config: &Config, user: &str) -> Result<Option<UserPaths>> {
    let paths = config
        .storage
        .paths_for(user)
        .with_context(|| format!("user {user}"))?;
    if !paths.maildir.is_dir() {
        println!("{user}: {NO_MAIL_YET}");
        return Ok(None);
    }
    if !paths.index_dir.join(maildex_index::DATA_FILE).exists() {
        println!("{user}: not indexed yet (indexed when the user first logs in)");
        return Ok(None);
    }
    Ok(Some(paths))
}
