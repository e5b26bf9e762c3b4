//! What the session-level operations share: finding a mailbox (indexed), serialising with
//! the sync of the same mailbox, and mapping keyword names to dovecot-keywords letters.

use std::path::PathBuf;
use std::sync::Arc;

use maildex_index::MailboxRecord;
use maildex_maildir::keywords::KeywordMap;
use maildex_maildir::{Flags, Keywords};
use parking_lot::RwLockWriteGuard;

use crate::{MailboxId, MailboxSerial, OpError, UserStore};

/// A mailbox an operation works on.
pub(crate) struct Target {
    /// Canonical IMAP name.
    pub name: String,
    /// Its folder.
    pub path: PathBuf,
    /// Index id.
    pub id: MailboxId,
    /// Its record when the operation started.
    pub record: MailboxRecord,
}

/// Index flag bits are the same bits as [`Flags`] (checked by a test in convert.rs).
pub(crate) fn flags_of(bits: u8) -> Flags {
    Flags(bits & Flags::ALL.0)
}

/// Keyword names of letter bits, through a table of names by letter index.
pub(crate) fn keyword_names(bits: u32, table: &[String]) -> Vec<String> {
    Keywords(bits)
        .iter()
        .filter_map(|i| table.get(usize::from(i)).filter(|n| !n.is_empty()).cloned())
        .collect()
}

/// The keyword table an operation may write over `current`, the index's: `table`, read
/// from dovecot-keywords earlier in the operation, unless it is `current` or an older state
/// of it (a prefix: names were added since by another operation). Letters are only ever
/// appended, so writing an older table back dropped the newer names, and every message with
/// one of them showed without it (FETCH FLAGS, SEARCH KEYWORD) until the next write of the
/// table, with no modseq change to make sessions tell their clients again (found by
/// tests/it/imap/concurrency.rs).
pub(crate) fn newer_keywords(current: &[String], table: &[String]) -> Option<Vec<String>> {
    (!current.starts_with(table)).then(|| table.to_vec())
}

/// The letters of keyword names in a mailbox.
pub(crate) struct Letters {
    /// The letters found (or added).
    pub bits: Keywords,
    /// Names by letter index after the call (what the index record mirrors).
    pub table: Vec<String>,
}

/// Two per-mailbox locks taken in name order (no deadlock between COPY a->b and b->a).
pub(crate) struct Serial {
    locks: Vec<Arc<MailboxSerial>>,
}

impl Serial {
    /// Runs `f` holding the locks.
    pub fn hold<R>(&self, f: impl FnOnce() -> R) -> R {
        let guards: Vec<RwLockWriteGuard<'_, ()>> = self.locks.iter().map(|l| l.hold()).collect();
        let out = f();
        drop(guards);
        out
    }

    /// Runs `f` holding the mailboxes for adding messages ([`crate::MailboxSerial::add`]).
    pub fn add<R>(&self, f: impl FnOnce() -> R) -> R {
        let guards: Vec<crate::Adding<'_>> = self.locks.iter().map(|l| l.add()).collect();
        let out = f();
        drop(guards);
        out
    }
}

impl UserStore {
    /// Mailbox `name` as it is on disk and in the index (synced first when the index does
    /// not know it yet). [`OpError::NoMailbox`] when its folder is missing.
    pub(crate) fn target(&self, name: &str) -> Result<Target, OpError> {
        let name = Self::canonical(name).to_string();
        let Some(path) = self.mailbox_dir(&name)? else {
            return Err(OpError::NoMailbox(name));
        };
        let found = match self.indexed_mailbox(&name)? {
            Some(found) => found,
            None => {
                self.sync_mailbox(&name)?;
                self.indexed_mailbox(&name)?
                    .ok_or_else(|| OpError::NoMailbox(name.clone()))?
            }
        };
        Ok(Target {
            name,
            path,
            id: found.0,
            record: found.1,
        })
    }

    /// The in-process locks of mailboxes `names` (deduplicated, in name order). Operations
    /// hold them so that a sync of the same mailbox in this process cannot interleave.
    /// Never call `sync_mailbox` while holding them (it takes the same lock).
    pub(crate) fn serial(&self, names: &[&str]) -> Serial {
        let mut sorted: Vec<&str> = names.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        Serial {
            locks: sorted.into_iter().map(|n| self.mailbox_lock(n)).collect(),
        }
    }

    /// Letters of keyword `names` in mailbox `t`. With `add`, names without a letter get
    /// the first free one in dovecot-keywords (written under the dovecot-uidlist lock, which
    /// is what guards that file in Dovecot too); a name that does not fit in the 26 letters
    /// fails with [`OpError::KeywordLimit`] and nothing is written (RFC 3501 §2.3.2 lets a
    /// server refuse new keywords). Without `add`, unknown names are skipped (removing a
    /// keyword no message has).
    pub(crate) fn letters(
        &self,
        t: &Target,
        names: &[String],
        add: bool,
    ) -> Result<Letters, OpError> {
        let mut map = KeywordMap::read(&t.path)?;
        let missing = names.iter().any(|n| map.letter_of(n).is_none());
        if add && missing {
            let _lock = self.uidlist_lock(&t.path)?;
            map = KeywordMap::read(&t.path)?;
            let before = map.clone();
            for kw in names {
                if map.letter_of(kw).is_some() {
                    continue;
                }
                if kw.is_empty() || kw.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    return Err(OpError::BadKeyword(kw.clone()));
                }
                if map.get_or_add(kw).is_none() {
                    return Err(OpError::KeywordLimit {
                        mailbox: t.name.clone(),
                        keyword: kw.clone(),
                    });
                }
            }
            if map != before {
                map.write(&t.path)?;
            }
        }
        let mut bits = Keywords::EMPTY;
        for n in names {
            if let Some(i) = map.letter_of(n).and_then(Keywords::index_of_letter) {
                bits.insert(i);
            }
        }
        Ok(Letters {
            bits,
            table: crate::sync::names_of(&map),
        })
    }
}
