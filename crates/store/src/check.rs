//! Comparing the index with the Maildir, for `maildex index check`. Reads only: no lock is
//! taken and nothing is written, so it is safe at any time (a delivery in flight can show as
//! a difference; the CLI checks twice and reports what persists).

use std::collections::{HashMap, HashSet};
use std::fmt;

use maildex_index::{Counts, FlagState, MessageState};
use maildex_maildir::filename::base_of;
use maildex_maildir::{folder, scan, Sub, Uidlist};

use crate::convert::flag_bits;
use crate::Uid;
use crate::{StoreError, UserStore};

/// One way in which the index and the Maildir disagree.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Difference {
    /// A folder on disk that the index does not know.
    MailboxNotIndexed(String),
    /// A mailbox in the index whose folder is gone.
    MailboxNotOnDisk(String),
    /// The mailbox has files but no dovecot-uidlist.
    NoUidlist(String),
    /// The uidlist and the index disagree on UIDVALIDITY.
    UidValidity {
        mailbox: String,
        uidlist: u32,
        index: u32,
    },
    /// The index would hand out a UID the uidlist already used.
    UidNext {
        mailbox: String,
        uidlist: Uid,
        index: Uid,
    },
    /// A message file that has no UID in dovecot-uidlist yet.
    NotInUidlist { mailbox: String, file: String },
    /// A message file (with its UID) that the index lacks.
    NotIndexed {
        mailbox: String,
        uid: Uid,
        file: String,
    },
    /// An index record whose file is gone.
    FileGone {
        mailbox: String,
        uid: Uid,
        file: String,
    },
    /// The index and the uidlist give one file different UIDs.
    UidMismatch {
        mailbox: String,
        file: String,
        uidlist: Uid,
        index: Uid,
    },
    /// The record's file name (flags) differs from the file's.
    FileName {
        mailbox: String,
        uid: Uid,
        index: String,
        disk: String,
    },
    /// The record's flags differ from the file name's.
    Flags {
        mailbox: String,
        uid: Uid,
        index: u8,
        disk: u8,
    },
    /// The record's size differs from the file's.
    Size {
        mailbox: String,
        uid: Uid,
        index: u64,
        disk: u64,
    },
    /// The message's full-text record (what SEARCH BODY/TEXT compare) is not what its
    /// file gives; `index check --repair` rewrites it.
    /// A message without one is not a difference: its full text is not indexed yet
    /// (written after the listing records by the daemon's background indexer, a SEARCH
    /// or `index rebuild`; [`UserStore::pending_texts`] counts them).
    Text { mailbox: String, uid: Uid },
    /// The index's flags column (what SEARCH of flags reads) disagrees with the message's
    /// record, or holds a message the records lack; `index check --repair` rewrites it
    /// from the record.
    FlagColumn { mailbox: String, uid: Uid },
    /// The stored counters differ from the records.
    Counts {
        mailbox: String,
        stored: Counts,
        actual: Counts,
    },
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Difference::*;
        match self {
            MailboxNotIndexed(m) => write!(
                f,
                "{m}: not indexed yet (indexed when first opened; not a difference)"
            ),
            MailboxNotOnDisk(m) => write!(f, "{m}: in the index but the folder is gone"),
            NoUidlist(m) => write!(f, "{m}: has messages but no dovecot-uidlist"),
            UidValidity {
                mailbox,
                uidlist,
                index,
            } => {
                write!(
                    f,
                    "{mailbox}: UIDVALIDITY {uidlist} in dovecot-uidlist, {index} in the index"
                )
            }
            UidNext {
                mailbox,
                uidlist,
                index,
            } => {
                write!(
                    f,
                    "{mailbox}: next UID {uidlist} in dovecot-uidlist but {index} in the index"
                )
            }
            NotInUidlist { mailbox, file } => {
                write!(f, "{mailbox}: {file} has no UID in dovecot-uidlist")
            }
            NotIndexed { mailbox, uid, file } => {
                write!(f, "{mailbox}: UID {uid} ({file}) is not in the index")
            }
            FileGone { mailbox, uid, file } => {
                write!(f, "{mailbox}: UID {uid} is indexed but {file} is gone")
            }
            FlagColumn { mailbox, uid } => write!(
                f,
                "{mailbox}: UID {uid}: the index's flags column disagrees with its record"
            ),
            UidMismatch {
                mailbox,
                file,
                uidlist,
                index,
            } => {
                write!(f, "{mailbox}: {file} is UID {uidlist} in dovecot-uidlist but {index} in the index")
            }
            FileName {
                mailbox,
                uid,
                index,
                disk,
            } => {
                write!(
                    f,
                    "{mailbox}: UID {uid} is {index} in the index but {disk} on disk"
                )
            }
            Flags {
                mailbox,
                uid,
                index,
                disk,
            } => {
                write!(f, "{mailbox}: UID {uid} has flags {index:#04x} in the index but {disk:#04x} on disk")
            }
            Size {
                mailbox,
                uid,
                index,
                disk,
            } => {
                write!(
                    f,
                    "{mailbox}: UID {uid} is {index} bytes in the index but {disk} on disk"
                )
            }
            Text { mailbox, uid } => {
                write!(
                    f,
                    "{mailbox}: UID {uid} differs from its file in its full-text record"
                )
            }
            Counts {
                mailbox,
                stored,
                actual,
            } => {
                write!(
                    f,
                    "{mailbox}: stored counters {stored:?} but records give {actual:?}"
                )
            }
        }
    }
}

impl Difference {
    /// Whether this is drift between index and Maildir (something to rebuild). A folder
    /// that was never indexed is not: the daemon indexes a folder when it is first opened,
    /// so a user who logged in but never opened one has folders "not indexed yet".
    pub fn is_drift(&self) -> bool {
        !matches!(self, Difference::MailboxNotIndexed(_))
    }
}

fn recount(heads: &[(Uid, MessageState)], first_recent_uid: Uid) -> Counts {
    let mut c = Counts::default();
    for (uid, h) in heads {
        c.add(*uid, h, first_recent_uid);
    }
    c
}

/// The UIDs whose entry in the flags column is not what their record gives (missing,
/// different, or there without a record), ascending.
fn column_drift<'a>(
    heads: &'a [(Uid, MessageState)],
    column: &'a [(Uid, FlagState)],
) -> impl Iterator<Item = Uid> + 'a {
    let want: HashMap<Uid, FlagState> = heads.iter().map(|(u, h)| (*u, FlagState::of(h))).collect();
    let have: HashMap<Uid, FlagState> = column.iter().copied().collect();
    let mut uids: Vec<Uid> = want
        .iter()
        .filter(|(u, f)| have.get(u) != Some(f))
        .map(|(u, _)| *u)
        .chain(have.keys().filter(|u| !want.contains_key(u)).copied())
        .collect();
    uids.sort_unstable();
    uids.into_iter()
}

impl UserStore {
    /// Rewrites the flags-column entry of message `uid` of `mailbox` from its record, or
    /// removes it when the message has no record (`index check --repair`). False when
    /// the mailbox is not indexed.
    pub fn repair_flag_column(&self, mailbox: &str, uid: Uid) -> Result<bool, StoreError> {
        let Some((id, _)) = self.indexed_mailbox(mailbox)? else {
            return Ok(false);
        };
        self.index
            .write_retrying(move |w| w.rewrite_flag_entry(id, uid))?;
        Ok(true)
    }

    /// Every difference between the index and the Maildir (empty when they agree).
    pub fn check(&self) -> Result<Vec<Difference>, StoreError> {
        let folders = folder::list_folders(&self.root)?;
        let mut out = Vec::new();
        let on_disk: HashSet<&str> = folders.iter().map(|f| f.name.as_str()).collect();
        for (_, m) in self.index.read(|r| r.mailboxes())? {
            if !on_disk.contains(m.name.as_str()) {
                out.push(Difference::MailboxNotOnDisk(m.name));
            }
        }
        for f in &folders {
            self.check_mailbox(&f.name, &f.path, &mut out)?;
        }
        Ok(out)
    }

    fn check_mailbox(
        &self,
        name: &str,
        path: &std::path::Path,
        out: &mut Vec<Difference>,
    ) -> Result<(), StoreError> {
        let listing = scan::scan(path)?;
        let Some((id, m)) = self.indexed_mailbox(name)? else {
            out.push(Difference::MailboxNotIndexed(name.to_string()));
            return Ok(());
        };
        let (heads, column) = self.index.read(|r| Ok((r.states(id)?, r.flags(id)?)))?;
        let mb = name.to_string();
        out.extend(
            column_drift(&heads, &column).map(|uid| Difference::FlagColumn {
                mailbox: mb.clone(),
                uid,
            }),
        );
        let actual = recount(&heads, m.first_recent_uid);
        if actual != m.counts {
            out.push(Difference::Counts {
                mailbox: mb.clone(),
                stored: m.counts,
                actual,
            });
        }
        let Some(list) = Uidlist::read(path)? else {
            if !listing.entries.is_empty() {
                out.push(Difference::NoUidlist(mb));
            }
            return Ok(());
        };
        if list.uidvalidity != m.uidvalidity {
            out.push(Difference::UidValidity {
                mailbox: mb,
                uidlist: list.uidvalidity,
                index: m.uidvalidity,
            });
            return Ok(());
        }
        // The index's UIDNEXT must be above every UID that names a file. A record of a file
        // that is gone (a delivery that failed after its uidlist append removed its file;
        // the next sync compacts the record away) does not count: its UID is never given
        // again, whatever UIDNEXT says.
        let on_disk: HashSet<&str> = listing
            .entries
            .iter()
            .map(|e| e.name.base.as_str())
            .collect();
        let max_listed = list
            .records
            .iter()
            .filter(|r| on_disk.contains(base_of(&r.file_name)))
            .map(|r| Uid(r.uid))
            .max()
            .unwrap_or(Uid(0));
        if m.uid_next <= max_listed {
            out.push(Difference::UidNext {
                mailbox: mb.clone(),
                uidlist: Uid(list.next_uid),
                index: m.uid_next,
            });
        }
        let by_base = list.uids_by_base();
        let indexed: HashMap<Uid, &MessageState> = heads.iter().map(|(u, h)| (*u, h)).collect();
        let mut seen = HashSet::new();
        for e in &listing.entries {
            let Some(&uid) = by_base.get(e.name.base.as_str()) else {
                out.push(Difference::NotInUidlist {
                    mailbox: mb.clone(),
                    file: e.file_name.clone(),
                });
                continue;
            };
            let uid = Uid(uid);
            seen.insert(uid);
            let Some(h) = indexed.get(&uid) else {
                out.push(Difference::NotIndexed {
                    mailbox: mb.clone(),
                    uid,
                    file: e.file_name.clone(),
                });
                continue;
            };
            if maildex_maildir::filename::base_of(&h.file_name) != e.name.base {
                let index_uid = heads
                    .iter()
                    .find(|(_, x)| maildex_maildir::filename::base_of(&x.file_name) == e.name.base)
                    .map_or(Uid(0), |(u, _)| *u);
                out.push(Difference::UidMismatch {
                    mailbox: mb.clone(),
                    file: e.file_name.clone(),
                    uidlist: uid,
                    index: index_uid,
                });
                continue;
            }
            if h.file_name != e.file_name || h.in_new != (e.sub == Sub::New) {
                out.push(Difference::FileName {
                    mailbox: mb.clone(),
                    uid,
                    index: h.file_name.clone(),
                    disk: e.file_name.clone(),
                });
            }
            let disk_flags = flag_bits(e.name.flags);
            if h.flags != disk_flags {
                out.push(Difference::Flags {
                    mailbox: mb.clone(),
                    uid,
                    index: h.flags,
                    disk: disk_flags,
                });
            }
            let file = e.sub.path(path).join(&e.file_name);
            if let Ok(md) = std::fs::symlink_metadata(&file) {
                if md.len() != h.size {
                    out.push(Difference::Size {
                        mailbox: mb.clone(),
                        uid,
                        index: h.size,
                        disk: md.len(),
                    });
                } else if let Some(false) = self.text_drift(id, uid, &file, h)? {
                    // a missing record (`Some(true)`) is a text not indexed yet: no drift
                    out.push(Difference::Text {
                        mailbox: mb.clone(),
                        uid,
                    });
                }
            }
        }
        for (uid, h) in &heads {
            if !seen.contains(uid) {
                out.push(Difference::FileGone {
                    mailbox: mb.clone(),
                    uid: *uid,
                    file: h.file_name.clone(),
                });
            }
        }
        Ok(())
    }
}
