//! The passwd-file backend of [`crate::userdb::UserDb`]: the users file loaded into
//! memory, with the per-user quota and `allow_nets` of its extra fields.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use maildex_auth::{PasswordHash, UserEntry, UsersFile};
use maildex_config::Config;

use crate::nets::AllowNets;
use crate::userdb::{PassRecord, Unavailable, UserDb};
use crate::{fields, quota, AccountsError, Owner, User};

/// The users file, read into memory.
#[derive(Debug)]
pub(crate) struct FileDb {
    pub(crate) users: UsersFile,
    /// Folded user name -> quota, for the users with a rule of their own (the others have
    /// `[storage] quota`).
    quotas: HashMap<String, Option<u64>>,
    /// `[storage] quota`.
    default_quota: Option<u64>,
    /// Folded user name -> where the user may log in from (`allow_nets=`).
    allow_nets: HashMap<String, AllowNets>,
    /// Folded user name -> the owner of the user's files (uid/gid columns or fields).
    owners: HashMap<String, Owner>,
}

impl FileDb {
    /// Loads `path` with the checks of the extra fields and of the users' folders.
    pub(crate) fn load(config: &Config, path: &Path) -> Result<FileDb, AccountsError> {
        let users = UsersFile::load(path)?;
        let mut quotas = HashMap::new();
        let mut allow_nets = HashMap::new();
        let mut owners = HashMap::new();
        let mut ignored = fields::Ignored::default();
        for e in users.list() {
            let field_error = |reason| AccountsError::UserField {
                path: path.to_owned(),
                line: e.line,
                user: e.name.clone(),
                reason,
            };
            if let Some(q) = quota::rule_from_extra(&e.extra).map_err(field_error)? {
                quotas.insert(e.name.to_ascii_lowercase(), q);
            }
            if let Some(o) = entry_owner(e).map_err(field_error)? {
                owners.insert(e.name.to_ascii_lowercase(), o);
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
        ignored.warn(path);
        refuse_shared_folders(config, path, &users)?;
        Ok(FileDb {
            users,
            quotas,
            default_quota: config.storage.quota,
            allow_nets,
            owners,
        })
    }

    fn user_of(&self, entry: &UserEntry) -> User {
        User {
            name: entry.name.clone(),
            quota: self
                .quotas
                .get(&entry.name.to_ascii_lowercase())
                .copied()
                .unwrap_or(self.default_quota),
            owner: self.owners.get(&entry.name.to_ascii_lowercase()).copied(),
        }
    }
}

impl UserDb for FileDb {
    fn password(&self, login: &str) -> Result<Option<PassRecord>, Unavailable> {
        Ok(self.users.lookup(login).map(|e| PassRecord {
            user: self.user_of(e),
            password: e.password.clone(),
            allow_nets: self.allow_nets.get(&e.name.to_ascii_lowercase()).cloned(),
            bind_dn: None,
        }))
    }

    fn user(&self, login: &str) -> Result<Option<User>, Unavailable> {
        Ok(self.users.lookup(login).map(|e| self.user_of(e)))
    }

    fn iterate(&self) -> Result<Vec<String>, Unavailable> {
        Ok(self.users.list().map(|e| e.name.clone()).collect())
    }

    fn timing_reference(&self) -> Option<PasswordHash> {
        self.users.timing_reference().cloned()
    }

    fn in_memory(&self) -> bool {
        true
    }

    fn weak_schemes(&self) -> Vec<(String, String)> {
        self.users.weak_schemes()
    }
}

/// The owner of an entry's files: the passwd-file's uid and gid columns, overridden by
/// `userdb_uid=`/`userdb_gid=` (Dovecot: a `userdb_` extra field wins over the column).
fn entry_owner(e: &UserEntry) -> Result<Option<Owner>, String> {
    let field = |key: &str| {
        e.extra.iter().rev().find_map(|f| {
            f.split_once('=')
                .filter(|(k, _)| *k == key)
                .map(|(_, v)| v.to_owned())
        })
    };
    let uid = field("userdb_uid").or(e.uid.map(|u| u.to_string()));
    let gid = field("userdb_gid").or(e.gid.map(|g| g.to_string()));
    Owner::parse(uid.as_deref(), gid.as_deref())
}

/// Refuses a users file in which two users' Maildirs or index folders are one folder
/// (`mail_location = "/var/vmail/%n"` with `mia@example.org` and `mia@other.org`). A name
/// that expands to no path at all is left to the lookup that would use it.
fn refuse_shared_folders(
    config: &Config,
    path: &Path,
    users: &UsersFile,
) -> Result<(), AccountsError> {
    let mut seen: HashMap<PathBuf, &str> = HashMap::new();
    for e in users.list() {
        let Ok(paths) = config.storage.paths_for(&e.name) else {
            continue;
        };
        for folder in [paths.maildir, paths.index_dir] {
            if let Some(first) = seen.get(&folder) {
                if *first != e.name.as_str() {
                    return Err(AccountsError::SharedFolder {
                        path: path.to_owned(),
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
