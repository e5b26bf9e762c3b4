//! The write path shared by LMTP, `maildex deliver` and IMAP APPEND.
//!
//! Order (a crash between any two steps loses no acknowledged message and leaves nothing
//! half-visible): stream into `tmp/` and fsync it; summarize the file; rename into `new/`
//! (or `cur/` when flags are set) and fsync the directory; record the UID in
//! dovecot-uidlist (the UID authority, so it is durable before the index mentions it);
//! commit the index record. If a step after the rename fails, the file is removed again so
//! that the sender's retry cannot duplicate it; the UID it got is simply never used.

use std::io::Read;
use std::path::Path;
use std::time::SystemTime;

use maildex_index::MessageState;
use maildex_maildir::keywords::KeywordMap;
use maildex_maildir::{deliver, Delivered, Flags, Keywords, Sub, TmpFile, UidRecord, UidlistLock};

use crate::convert::{self, flag_bits};
use crate::{StoreError, UserStore};

/// How a message is delivered.
#[derive(Clone, Debug, Default)]
pub struct DeliverOptions {
    /// Flags to set (a message with flags goes to `cur/`, otherwise to `new/`).
    pub flags: Flags,
    /// Keyword names to set (mapped to letters through dovecot-keywords).
    pub keywords: Vec<String>,
    /// INTERNALDATE (APPEND's date-time); the delivery time when absent.
    pub internal_date: Option<SystemTime>,
}

/// A message that is now in the Maildir, in dovecot-uidlist and in the index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveredMessage {
    /// Index id of the mailbox.
    pub mailbox_id: u32,
    /// Its UID.
    pub uid: u32,
    /// The mailbox's UIDVALIDITY (for APPENDUID, RFC 4315).
    pub uidvalidity: u32,
    /// Modseq of the new record.
    pub modseq: u64,
    /// File name in `new/` or `cur/`.
    pub file_name: String,
    /// Physical size.
    pub size: u64,
    /// RFC822.SIZE.
    pub vsize: u64,
}

impl UserStore {
    /// Delivers one message read from `src` into mailbox `mailbox` (see the module docs).
    pub fn deliver(
        &self,
        mailbox: &str,
        src: &mut dyn Read,
        opts: &DeliverOptions,
    ) -> Result<DeliveredMessage, StoreError> {
        let name = Self::canonical(mailbox);
        let path = self.mailbox_path(name)?;
        if !path.join("cur").is_dir() {
            return Err(StoreError::NoMailbox(name.to_string()));
        }
        if self.indexed_mailbox(name)?.is_none() {
            self.sync_mailbox(name)?;
        }
        let mut tmp = TmpFile::create(&path)?;
        std::io::copy(src, &mut tmp).map_err(|e| StoreError::io(tmp.path(), e))?;
        // INTERNALDATE is the file's mtime, as Dovecot keeps it (RFC 3501 §2.3.3)
        tmp.set_mtime(opts.internal_date.unwrap_or_else(SystemTime::now));
        tmp.set_durable(self.opts.fsync);
        tmp.sync()?;
        // the index's keyword table follows dovecot-keywords in the same commit
        let (keywords, keyword_table) = if opts.keywords.is_empty() {
            (Keywords::EMPTY, None)
        } else {
            let (bits, table) = self.keyword_bits(name, &path, &opts.keywords)?;
            (bits, Some(table))
        };
        let sub = if opts.flags.is_empty() && keywords.is_empty() {
            Sub::New
        } else {
            Sub::Cur
        };
        let state = MessageState {
            in_new: sub == Sub::New,
            flags: flag_bits(opts.flags),
            keywords: keywords.0,
            save_date: convert::now_secs(),
            ..MessageState::default()
        };
        let mut built = convert::index_file(tmp.path(), state)?;
        // nothing after the rename may fail without removing the file again (below)
        let delivered = tmp.commit(sub, opts.flags, keywords)?;
        built.record.state.file_name = delivered.file_name.clone();
        match self.record_delivery(name, &path, &delivered, built, keyword_table) {
            Ok(d) => Ok(d),
            Err(e) => {
                if let Err(rm) = deliver::remove(&path, sub, &delivered.file_name) {
                    tracing::error!(file = %delivered.path.display(), error = %rm, "could not remove a delivery that failed");
                }
                Err(e)
            }
        }
    }

    fn record_delivery(
        &self,
        name: &str,
        path: &Path,
        delivered: &Delivered,
        built: maildex_index::Built,
        keyword_table: Option<Vec<String>>,
    ) -> Result<DeliveredMessage, StoreError> {
        let (uid, uidvalidity) = match self.append_uid(path, delivered)? {
            Some(pair) => pair,
            None => {
                // no usable uidlist, or the index follows another UIDVALIDITY: a full sync
                // settles both and indexes this file too
                self.sync_mailbox(name)?;
                return self.find_delivered(name, delivered);
            }
        };
        let Some((id, _)) = self.indexed_mailbox(name)? else {
            return Err(StoreError::NoMailbox(name.to_string()));
        };
        let base = delivered.name.base.clone();
        // checked in the transaction that writes: another process may have re-indexed the
        // mailbox under a new UIDVALIDITY, or the UID may already name another file (a
        // uidlist restored from a backup); then a full sync settles it instead
        let committed = self.index.write_retrying(move |w| {
            let m = w.reader().require_mailbox(id)?;
            if m.uidvalidity != uidvalidity {
                return Ok(None);
            }
            if let Some(old) = w.reader().state(id, uid)? {
                if maildex_maildir::filename::base_of(&old.file_name) != base {
                    return Ok(None);
                }
            }
            if let Some(table) = keyword_table.as_ref().filter(|t| **t != m.keywords) {
                let mut m = m;
                m.keywords = table.clone();
                w.put_mailbox(id, &m)?;
            }
            w.insert_message(id, uid, built.record.clone(), built.headers.clone())
                .map(Some)
        })?;
        let Some(modseq) = committed else {
            tracing::warn!(
                mailbox = name,
                uid,
                "index changed under a delivery; syncing the mailbox"
            );
            self.sync_mailbox(name)?;
            return self.find_delivered(name, delivered);
        };
        Ok(DeliveredMessage {
            mailbox_id: id,
            uid,
            uidvalidity,
            modseq,
            file_name: delivered.file_name.clone(),
            size: delivered.size,
            vsize: delivered.vsize,
        })
    }

    /// Gives the delivered file the next UID in dovecot-uidlist. None when the list is
    /// missing or unreadable (the caller syncs instead).
    fn append_uid(
        &self,
        path: &Path,
        delivered: &Delivered,
    ) -> Result<Option<(u32, u32)>, StoreError> {
        let mut lock = UidlistLock::acquire(path, self.opts.lock_timeout)?;
        let Ok(Some(list)) = lock.read() else {
            return Ok(None);
        };
        // a concurrent sync may already have numbered this file
        if let Some(r) = list.find_base(&delivered.name.base) {
            return Ok(Some((r.uid, list.uidvalidity)));
        }
        let uid = list.next_uid;
        let Some(next) = uid.checked_add(1) else {
            return Ok(None);
        };
        lock.append(&[UidRecord::new(uid, delivered.file_name.clone())], next)?;
        Ok(Some((uid, list.uidvalidity)))
    }

    fn find_delivered(
        &self,
        name: &str,
        delivered: &Delivered,
    ) -> Result<DeliveredMessage, StoreError> {
        let found = self.index.read(|r| {
            let Some(id) = r.mailbox_id(name)? else {
                return Ok(None);
            };
            let m = r.require_mailbox(id)?;
            let mut hit = None;
            for (uid, h) in r.states(id)? {
                if maildex_maildir::filename::base_of(&h.file_name) == delivered.name.base {
                    hit = Some((id, uid, m.uidvalidity, h.modseq));
                }
            }
            Ok(hit)
        })?;
        let (mailbox_id, uid, uidvalidity, modseq) =
            found.ok_or_else(|| StoreError::NoMailbox(name.to_string()))?;
        Ok(DeliveredMessage {
            mailbox_id,
            uid,
            uidvalidity,
            modseq,
            file_name: delivered.file_name.clone(),
            size: delivered.size,
            vsize: delivered.vsize,
        })
    }

    /// Letters for keyword names (and the resulting name table), adding new names to dovecot-keywords (at most 26, the
    /// Maildir limit; further keywords are dropped with a warning, as Dovecot does). New
    /// names are written under the dovecot-uidlist lock, which is what guards
    /// dovecot-keywords in Dovecot too.
    fn keyword_bits(
        &self,
        name: &str,
        path: &Path,
        names: &[String],
    ) -> Result<(Keywords, Vec<String>), StoreError> {
        let mut map = KeywordMap::read(path)?;
        let letters =
            |map: &KeywordMap| names.iter().map(|kw| map.letter_of(kw)).collect::<Vec<_>>();
        let mut found = letters(&map);
        if found.iter().any(Option::is_none) {
            let _lock = UidlistLock::acquire(path, self.opts.lock_timeout)?;
            map = KeywordMap::read(path)?;
            for kw in names {
                if map.letter_of(kw).is_none() && map.get_or_add(kw).is_none() {
                    tracing::warn!(mailbox = name, keyword = %kw, "all 26 Maildir keyword letters are in use; keyword not stored");
                }
            }
            map.write(path)?;
            found = letters(&map);
        }
        let mut bits = Keywords::EMPTY;
        for i in found
            .into_iter()
            .flatten()
            .filter_map(Keywords::index_of_letter)
        {
            bits.insert(i);
        }
        Ok((bits, crate::sync::names_of(&map)))
    }
}
