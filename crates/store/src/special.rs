//! Folders every user gets (special use, RFC 6154) and autoexpunge, configured per folder
//! as Dovecot's `namespace inbox { mailbox Trash { special_use = \Trash auto = subscribe
//! autoexpunge = 30d } }`.
//!
//! Creation: [`UserStore::create_special_folders`] runs at the user's first IMAP login
//! (the accounts crate's `session_store`; deliveries do not make the folders). A marker file in the index folder holds the settings it last applied, so an
//! unchanged configuration costs one small read per open, not a listing. Otherwise it
//! lists the folders once and creates (and subscribes) each configured one unless a folder
//! exists under that name or another folder already carries its role (`Sent Messages`
//! from Apple Mail, `INBOX.Sent` from Courier: see [`SpecialUse::of_name`]). Dovecot 2.3
//! (checked with doveadm) lists `auto` folders before it creates them and creates the
//! folder and its subscription on first access; maildex creates them at once, which leaves
//! the Maildir as Dovecot leaves it after that first access.
//!
//! Autoexpunge: [`UserStore::autoexpunge`] removes, through the expunge path (files
//! unlinked, tombstones in the change log, IDLE sessions told), the messages saved into
//! the folder longer ago than its age. The date is the save date (when the message was
//! delivered, appended, copied or moved there, or first found there by a sync), as
//! Dovecot's autoexpunge uses it: a years-old message moved to Trash today stays its full
//! time in Trash. As Dovecot does, the walk goes in UID order and stops at the first
//! message saved after the cutoff (UIDs are given in save order), so a run reads the
//! expired messages and one more, and at most `budget` are expunged per run.

use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use maildex_index::MessageState;
use maildex_maildir::folder;

use crate::{OpError, SpecialUse, StoreError, Uid, UserStore};

/// The marker file in the index folder.
const MARKER: &str = "special-use.done";

/// Whether a configured folder is created for every user (Dovecot's `auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoCreate {
    /// Not created.
    No,
    /// Created.
    Create,
    /// Created and subscribed.
    Subscribe,
}

/// One configured folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MailboxSetting {
    /// IMAP name.
    pub name: String,
    /// Its special use, shown by LIST.
    pub special_use: Option<SpecialUse>,
    /// Whether it is created for every user.
    pub auto: AutoCreate,
    /// Messages saved into it longer ago than this are expunged by [`UserStore::autoexpunge`].
    pub autoexpunge: Option<Duration>,
}

impl UserStore {
    /// The special use of mailbox `name`: the configured one, else the one its name
    /// usually has ([`SpecialUse::of_name`]).
    pub(crate) fn special_use_of(&self, name: &str) -> Option<SpecialUse> {
        match self.opts.mailboxes.iter().find(|m| m.name == name) {
            Some(m) if m.special_use.is_some() => m.special_use,
            _ => SpecialUse::of_name(name),
        }
    }

    /// Creates the configured folders this user lacks (see the module docs) and returns
    /// the names created. Cheap once done: one read of the marker file.
    pub fn create_special_folders(&self) -> Result<Vec<String>, OpError> {
        let marker = self.index.path().join(MARKER);
        let wanted = self.marker_text();
        if std::fs::read_to_string(&marker).is_ok_and(|t| t == wanted) {
            return Ok(Vec::new());
        }
        let existing: Vec<String> = folder::list_folders(&self.root)?
            .into_iter()
            .map(|f| f.name)
            .collect();
        let mut roles: Vec<SpecialUse> = existing
            .iter()
            .filter_map(|n| self.special_use_of(n))
            .collect();
        let mut created = Vec::new();
        for m in &self.opts.mailboxes {
            if m.auto == AutoCreate::No || existing.contains(&m.name) {
                continue;
            }
            if m.special_use.is_some_and(|u| roles.contains(&u)) {
                continue;
            }
            match self.create_mailbox(&m.name) {
                Ok(()) | Err(OpError::MailboxExists(_)) => {}
                Err(e) => return Err(e),
            }
            if m.auto == AutoCreate::Subscribe {
                self.subscribe(&m.name)?;
            }
            roles.extend(m.special_use);
            created.push(m.name.clone());
        }
        write_private(&marker, &wanted)?;
        Ok(created)
    }

    /// What the marker records: one line per configured folder that is created.
    fn marker_text(&self) -> String {
        let mut s = String::new();
        for m in self
            .opts
            .mailboxes
            .iter()
            .filter(|m| m.auto != AutoCreate::No)
        {
            let role = m.special_use.map_or("", SpecialUse::attribute);
            let _ = writeln!(s, "{}\t{role}\t{:?}", m.name, m.auto);
        }
        s
    }

    /// Whether any configured folder has an autoexpunge age.
    pub fn has_autoexpunge(&self) -> bool {
        self.opts.mailboxes.iter().any(|m| m.autoexpunge.is_some())
    }

    /// Expunges from each folder with an autoexpunge age the messages saved into it
    /// before `now` minus that age, at most `budget` in all; returns (mailbox, UIDs) of
    /// what went. Folders that do not exist are skipped. BLOCKING.
    pub fn autoexpunge(
        &self,
        now: SystemTime,
        budget: usize,
    ) -> Result<Vec<(String, Vec<Uid>)>, OpError> {
        let mut out = Vec::new();
        let mut left = budget;
        for m in &self.opts.mailboxes {
            let Some(age) = m.autoexpunge else { continue };
            if left == 0 {
                break;
            }
            if !self.mailbox_exists(&m.name)? {
                continue;
            }
            let cutoff = now
                .checked_sub(age)
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(i64::MIN, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
            let gone = self.expunge_saved_before(&m.name, cutoff, left)?;
            if !gone.is_empty() {
                left -= gone.len().min(left);
                out.push((m.name.clone(), gone));
            }
        }
        Ok(out)
    }

    /// Expunges up to `limit` messages of `mailbox` saved before `cutoff` (seconds since
    /// the epoch), walking in UID order and stopping at the first one saved later.
    fn expunge_saved_before(
        &self,
        mailbox: &str,
        cutoff: i64,
        limit: usize,
    ) -> Result<Vec<Uid>, OpError> {
        self.sync_mailbox(mailbox)?;
        let t = self.target(mailbox)?;
        let id = t.id;
        let serial = self.serial(&[&t.name]);
        serial.hold(|| {
            let old: Vec<(Uid, MessageState)> = self.index.read(move |r| {
                let mut old = Vec::new();
                r.for_each_state(id, Uid::MIN..=Uid::MAX, |uid, s| {
                    if s.save_date >= cutoff || old.len() >= limit {
                        return Ok(ControlFlow::Break(()));
                    }
                    old.push((uid, s));
                    Ok(ControlFlow::Continue(()))
                })?;
                Ok(old)
            })?;
            if old.is_empty() {
                return Ok(Vec::new());
            }
            self.remove_messages(&t, old, false)
        })
    }
}

/// Replaces `path` with `text`, mode 0600 as every file of the user's mail (a lost
/// write only means the next open checks again).
fn write_private(path: &std::path::Path, text: &str) -> Result<(), StoreError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| StoreError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| StoreError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreOptions;

    fn setting(name: &str, role: Option<SpecialUse>, age: Option<u64>) -> MailboxSetting {
        MailboxSetting {
            name: name.into(),
            special_use: role,
            auto: AutoCreate::Subscribe,
            autoexpunge: age.map(Duration::from_secs),
        }
    }

    fn store(dir: &std::path::Path, mailboxes: Vec<MailboxSetting>) -> UserStore {
        let opts = StoreOptions {
            fsync: false,
            mailboxes,
            ..StoreOptions::default()
        };
        UserStore::open(&dir.join("mail"), &dir.join("index"), opts).unwrap()
    }

    fn add(store: &UserStore, mailbox: &str, n: usize) {
        for i in 0..n {
            let msg = format!("Subject: {i}\r\n\r\nbody {i}\r\n");
            let opts = crate::DeliverOptions::default();
            store.deliver(mailbox, &mut msg.as_bytes(), &opts).unwrap();
        }
    }

    #[test]
    fn created_once_and_never_beside_a_folder_with_the_role() {
        let dir = tempfile::tempdir().unwrap();
        let settings = vec![
            setting("Sent", Some(SpecialUse::Sent), None),
            setting("Papierkorb", Some(SpecialUse::Trash), None),
        ];
        let s = store(dir.path(), settings);
        s.create_mailbox("Sent Messages").unwrap();
        assert_eq!(s.create_special_folders().unwrap(), ["Papierkorb"]);
        assert!(!s.mailbox_exists("Sent").unwrap());
        assert_eq!(s.subscriptions().unwrap(), ["Papierkorb"]);
        let list = s.list_mailboxes().unwrap();
        let papier = list.iter().find(|m| m.name == "Papierkorb").unwrap();
        assert_eq!(papier.special_use, Some(SpecialUse::Trash));
        // deleted by the user: not made again while the settings stay
        s.delete_mailbox("Papierkorb").unwrap();
        assert!(s.create_special_folders().unwrap().is_empty());
        assert!(!s.mailbox_exists("Papierkorb").unwrap());
    }

    #[test]
    fn autoexpunge_stops_at_the_first_message_saved_later_and_keeps_to_its_budget() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(
            dir.path(),
            vec![setting("Trash", Some(SpecialUse::Trash), Some(3600))],
        );
        s.create_special_folders().unwrap();
        add(&s, "Trash", 5);
        // nothing is an hour old yet
        assert!(s.autoexpunge(SystemTime::now(), 100).unwrap().is_empty());
        let later = SystemTime::now() + Duration::from_secs(7200);
        let first = s.autoexpunge(later, 3).unwrap();
        assert_eq!(first, [("Trash".to_string(), vec![Uid(1), Uid(2), Uid(3)])]);
        let rest = s.autoexpunge(later, 3).unwrap();
        assert_eq!(rest, [("Trash".to_string(), vec![Uid(4), Uid(5)])]);
        let id = s.target("Trash").unwrap().id;
        assert!(s.index.read(move |r| r.uids(id)).unwrap().is_empty());
    }
}
