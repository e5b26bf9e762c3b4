//! CREATE, DELETE, RENAME and LIST (RFC 3501 §6.3.3-§6.3.8, SPECIAL-USE RFC 6154) on the
//! Maildir++ folders, with the index following.
//!
//! Maildir++ keeps every mailbox as its own `.a.b` directory under the root, so a parent and
//! its children are independent directories. Dovecot's behaviour, which we follow (checked
//! with doveadm 2.3): CREATE does not make superior levels; DELETE of a mailbox with
//! children removes just that mailbox (its children stay, and LIST then shows the level
//! `\NonExistent \HasChildren`); RENAME moves the children along; subscriptions are not
//! changed by RENAME or DELETE. DELETE renames the folder to `.DOVECOT-TRASHED` first (never
//! listed, by us or by Dovecot) and then removes it, so no half-deleted mailbox is listed.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io;
use std::path::PathBuf;

use maildex_maildir::{folder, Sub};

use crate::{OpError, StoreError, UserStore};

/// Where DELETE puts a folder while removing it (Dovecot's trash directory name).
const TRASH_DIR: &str = ".DOVECOT-TRASHED";

/// Usual folder names and their special use (RFC 6154 §2), matched case-insensitively.
const SPECIAL_NAMES: [(&str, SpecialUse); 9] = [
    ("Sent", SpecialUse::Sent),
    ("Sent Messages", SpecialUse::Sent),
    ("Sent Items", SpecialUse::Sent),
    ("Drafts", SpecialUse::Drafts),
    ("Trash", SpecialUse::Trash),
    ("Deleted Messages", SpecialUse::Trash),
    ("Junk", SpecialUse::Junk),
    ("Spam", SpecialUse::Junk),
    ("Archive", SpecialUse::Archive),
];

/// A special-use attribute (RFC 6154 §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpecialUse {
    /// `\Sent`.
    Sent,
    /// `\Drafts`.
    Drafts,
    /// `\Trash`.
    Trash,
    /// `\Junk`.
    Junk,
    /// `\Archive`.
    Archive,
}

impl SpecialUse {
    /// The special use of a mailbox named `name`, at the top level or directly under INBOX
    /// (Courier-style `INBOX.Sent`).
    pub fn of_name(name: &str) -> Option<SpecialUse> {
        let bare = match name.get(..6) {
            Some(p) if p.eq_ignore_ascii_case("INBOX.") => &name[6..],
            _ => name,
        };
        SPECIAL_NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(bare))
            .map(|(_, u)| *u)
    }

    /// The special use of a LIST attribute (`\Sent`, any case).
    pub fn from_attribute(attr: &str) -> Option<SpecialUse> {
        [
            SpecialUse::Sent,
            SpecialUse::Drafts,
            SpecialUse::Trash,
            SpecialUse::Junk,
            SpecialUse::Archive,
        ]
        .into_iter()
        .find(|u| u.attribute().eq_ignore_ascii_case(attr))
    }

    /// The attribute as LIST writes it (`\Sent`, ...).
    pub fn attribute(self) -> &'static str {
        match self {
            SpecialUse::Sent => "\\Sent",
            SpecialUse::Drafts => "\\Drafts",
            SpecialUse::Trash => "\\Trash",
            SpecialUse::Junk => "\\Junk",
            SpecialUse::Archive => "\\Archive",
        }
    }
}

/// One mailbox for LIST.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MailboxInfo {
    /// IMAP name, UTF-8, `.` as separator (the session encodes modified UTF-7).
    pub name: String,
    /// False for a hierarchy level that has no folder of its own (`a` when only `.a.b`
    /// exists): LIST shows it `\NonExistent` (RFC 5258 §3.4; `\Noselect` for RFC 3501).
    pub selectable: bool,
    /// Whether other mailboxes sit below it (`\HasChildren` / `\HasNoChildren`, RFC 5258 §4).
    pub has_children: bool,
    /// Special use (RFC 6154): configured, else guessed from the usual folder names.
    pub special_use: Option<SpecialUse>,
    /// Whether it is in the subscriptions file (`\Subscribed`, RFC 5258 §3.1).
    pub subscribed: bool,
}

/// A name as CREATE and RENAME take it: one trailing separator dropped (RFC 3501 §6.3.3),
/// no control characters (Dovecot refuses them in new names).
fn new_name(name: &str) -> Result<String, OpError> {
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    if trimmed.chars().any(char::is_control) {
        return Err(OpError::BadName {
            name: name.to_string(),
            reason: "control characters are not allowed in mailbox names",
        });
    }
    Ok(UserStore::canonical(trimmed).to_string())
}

fn exists(path: &std::path::Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

fn is_symlink(path: &std::path::Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

impl UserStore {
    /// Whether mailbox `name` exists: its folder is one maildex uses
    /// ([`folder::is_mailbox_dir`]: `cur/` present, no symbolic link). An error when the
    /// name cannot be a folder.
    pub fn mailbox_exists(&self, name: &str) -> Result<bool, StoreError> {
        Ok(self.mailbox_dir(name)?.is_some())
    }

    /// The folder of mailbox `name` when the mailbox exists ([`UserStore::mailbox_exists`]).
    pub(crate) fn mailbox_dir(&self, name: &str) -> Result<Option<PathBuf>, StoreError> {
        let path = self.mailbox_path(Self::canonical(name))?;
        Ok(folder::is_mailbox_dir(&path).then_some(path))
    }

    /// Creates mailbox `name` (RFC 3501 §6.3.3): a trailing separator is dropped; superior
    /// levels are not created (as Dovecot with Maildir++ does). The folder gets `tmp/ new/
    /// cur/` and `maildirfolder`, then a sync creates its dovecot-uidlist (new UIDVALIDITY)
    /// and its index record.
    pub fn create_mailbox(&self, name: &str) -> Result<(), OpError> {
        let name = new_name(name)?;
        if name == "INBOX" {
            return Err(OpError::MailboxExists(name));
        }
        let path = self.mailbox_path(&name)?;
        // a folder or cur/ that is a symbolic link takes the name too: it is no mailbox,
        // and none is made through it (it could lead out of the Maildir, issue 15 #2)
        if self.mailbox_exists(&name)? || is_symlink(&path) || is_symlink(&Sub::Cur.path(&path)) {
            return Err(OpError::MailboxExists(name));
        }
        folder::create_mailbox(&path, true)?;
        self.sync_mailbox(&name)?;
        Ok(())
    }

    /// Deletes mailbox `name` and its messages (RFC 3501 §6.3.4). INBOX cannot be deleted;
    /// children stay (see the module docs). The index record goes in the same step.
    pub fn delete_mailbox(&self, name: &str) -> Result<(), OpError> {
        let name = Self::canonical(name).to_string();
        if name == "INBOX" {
            return Err(OpError::Cannot {
                mailbox: name,
                reason: "INBOX cannot be deleted (RFC 3501 §6.3.4)",
            });
        }
        let Some(path) = self.mailbox_dir(&name)? else {
            return Err(OpError::NoMailbox(name));
        };
        // one trash folder for every DELETE: they take turns, or one wipes (or cannot
        // rename onto) another's trash. The key is no mailbox's, the name being refused.
        let serial = self.serial(&[&name, &TRASH_DIR[1..]]);
        serial.hold(|| -> Result<(), OpError> {
            let trash = self.root.join(TRASH_DIR);
            if exists(&trash) {
                // left over from an interrupted delete (ours or Dovecot's)
                fs::remove_dir_all(&trash).map_err(|e| StoreError::io(&trash, e))?;
            }
            match fs::rename(&path, &trash) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(OpError::NoMailbox(name.clone()))
                }
                Err(e) => return Err(StoreError::io(&path, e).into()),
            }
            if let Some((id, _)) = self.indexed_mailbox(&name)? {
                self.index.write(move |w| w.delete_mailbox(id))?;
            }
            fs::remove_dir_all(&trash).map_err(|e| StoreError::io(&trash, e))?;
            self.forget_lock(&name);
            self.quota_file_recalculate();
            Ok(())
        })
    }

    /// Renames mailbox `old` to `new` (RFC 3501 §6.3.5), its children along (`old.x`
    /// becomes `new.x`); UIDs and UIDVALIDITY stay (dovecot-uidlist moves with the folder).
    /// Renaming INBOX moves its messages into a new mailbox `new` and leaves INBOX empty
    /// (its children stay).
    pub fn rename_mailbox(&self, old: &str, new: &str) -> Result<(), OpError> {
        let old = Self::canonical(old).to_string();
        let new = new_name(new)?;
        if new == "INBOX" {
            return Err(OpError::MailboxExists(new));
        }
        let new_path = self.mailbox_path(&new)?;
        if exists(&new_path) {
            return Err(OpError::MailboxExists(new));
        }
        if old == "INBOX" {
            // RFC 3501 §6.3.5: the messages move, INBOX stays (empty)
            let inbox = self.target("INBOX")?;
            self.create_mailbox(&new)?;
            let id = inbox.id;
            let uids = self.index.read(move |r| r.uids(id))?;
            self.move_messages("INBOX", &new, &uids)?;
            return Ok(());
        }
        if !self.mailbox_exists(&old)? {
            return Err(OpError::NoMailbox(old));
        }
        let prefix = format!("{old}.");
        if new.starts_with(&prefix) {
            return Err(OpError::Cannot {
                mailbox: old,
                reason: "a mailbox cannot be renamed under itself",
            });
        }
        // the mailbox itself, then its children (shallowest first)
        let mut moves: Vec<(String, String)> = vec![(old.clone(), new.clone())];
        for f in folder::list_folders(&self.root)? {
            if let Some(rest) = f.name.strip_prefix(&prefix) {
                moves.push((f.name.clone(), format!("{new}.{rest}")));
            }
        }
        let mut paths = Vec::with_capacity(moves.len());
        for (from, to) in &moves {
            let to_path = self.mailbox_path(to)?;
            if exists(&to_path) {
                return Err(OpError::MailboxExists(to.clone()));
            }
            paths.push((self.mailbox_path(from)?, to_path));
        }
        let names: Vec<&str> = moves
            .iter()
            .flat_map(|(a, b)| [a.as_str(), b.as_str()])
            .collect();
        let serial = self.serial(&names);
        serial.hold(|| -> Result<(), OpError> {
            let mut done: Vec<(String, String)> = Vec::with_capacity(moves.len());
            for ((from, to), (from_path, to_path)) in moves.iter().zip(&paths) {
                match fs::rename(from_path, to_path) {
                    Ok(()) => done.push((from.clone(), to.clone())),
                    // a child deleted meanwhile
                    Err(e) if e.kind() == io::ErrorKind::NotFound && !done.is_empty() => {}
                    Err(e) => {
                        if done.is_empty() {
                            return Err(StoreError::io(from_path, e).into());
                        }
                        tracing::error!(from = %from_path.display(), to = %to_path.display(), error = %e, "RENAME moved the mailbox but not this child");
                    }
                }
            }
            self.index.write(move |w| {
                for (from, to) in &done {
                    if let Some(stale) = w.reader().mailbox_id(to)? {
                        // an index record left by a folder another tool removed
                        w.delete_mailbox(stale)?;
                    }
                    if let Some(id) = w.reader().mailbox_id(from)? {
                        w.rename_mailbox(id, to)?;
                    }
                }
                Ok(())
            })?;
            Ok(())
        })
    }

    /// Every mailbox, INBOX first then by name, with the hierarchy levels that have no
    /// folder of their own (`selectable` false), children flags, special use and
    /// subscription.
    pub fn list_mailboxes(&self) -> Result<Vec<MailboxInfo>, OpError> {
        let subscribed: HashSet<String> = self.subscriptions()?.into_iter().collect();
        let mut all: BTreeMap<String, bool> = BTreeMap::new();
        for f in folder::list_folders(&self.root)? {
            let mut level = f.name.as_str();
            while let Some((parent, _)) = level.rsplit_once('.') {
                all.entry(parent.to_string()).or_insert(false);
                level = parent;
            }
            all.insert(f.name, true);
        }
        // a name has children when the first name at or after `name.` starts with it: a
        // range lookup, not a scan of every name (20,000 mailboxes took seconds)
        let parents: HashSet<String> = all
            .keys()
            .filter(|name| {
                let prefix = format!("{name}.");
                all.range(prefix.clone()..)
                    .next()
                    .is_some_and(|(n, _)| n.starts_with(&prefix))
            })
            .cloned()
            .collect();
        let mut out: Vec<MailboxInfo> = all
            .into_iter()
            .map(|(name, selectable)| {
                let has_children = parents.contains(&name);
                MailboxInfo {
                    special_use: if selectable {
                        self.special_use_of(&name)
                    } else {
                        None
                    },
                    subscribed: subscribed.contains(&name),
                    name,
                    selectable,
                    has_children,
                }
            })
            .collect();
        out.sort_by(|a, b| (a.name != "INBOX", &a.name).cmp(&(b.name != "INBOX", &b.name)));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_use_from_usual_names() {
        assert_eq!(SpecialUse::of_name("sent items"), Some(SpecialUse::Sent));
        assert_eq!(SpecialUse::of_name("INBOX.Trash"), Some(SpecialUse::Trash));
        assert_eq!(
            SpecialUse::of_name("Deleted Messages"),
            Some(SpecialUse::Trash)
        );
        assert_eq!(SpecialUse::of_name("SPAM"), Some(SpecialUse::Junk));
        assert_eq!(SpecialUse::of_name("Archive.2024"), None);
        assert_eq!(SpecialUse::of_name("Sentinel"), None);
        assert_eq!(SpecialUse::Drafts.attribute(), "\\Drafts");
    }

    #[test]
    fn new_names_drop_one_trailing_separator_and_refuse_controls() {
        assert_eq!(new_name("a.b.").unwrap(), "a.b");
        assert_eq!(new_name("inbox").unwrap(), "INBOX");
        assert!(matches!(new_name("a\tb"), Err(OpError::BadName { .. })));
    }
}
