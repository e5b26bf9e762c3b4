//! The write path shared by LMTP, `maildex deliver` and IMAP APPEND.
//!
//! Order (a crash between any two steps loses no acknowledged message and leaves nothing
//! half-visible): stream into `tmp/` and fsync it; summarize the file; rename into `new/`
//! (or `cur/` when flags are set) and fsync the directory; record the UID in
//! dovecot-uidlist (the UID authority, so it is durable before the index mentions it);
//! commit the index record. If a step after the rename fails, the file is removed again so
//! that the sender's retry cannot duplicate it; the UID it got is simply never used.
//!
//! From the rename until the index commit the delivery holds the mailbox's in-process
//! serial lock (as STORE, EXPUNGE, COPY, MOVE and sync do). A sync that ran in that window
//! found the file numbered but not indexed and indexed it itself; a session could then
//! STORE, EXPUNGE or MOVE it, and the delivery's own commit, landing after, wrote its
//! first record back over the result: an expunged or moved message reappeared as a record
//! of a file that no longer exists, and flags changed meanwhile were undone (found by
//! tests/it/imap/concurrency.rs). Another process (`maildex deliver` beside the daemon) is not held
//! by that lock; for it the commit keeps a record a sync already made instead of replacing
//! it, which leaves only an expunge within that window able to bring the record back until
//! the next full sync drops it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use maildex_index::{Built, MessageState};
use maildex_maildir::keywords::KeywordMap;
use maildex_maildir::uidlist::AppendScan;
use maildex_maildir::{deliver, Delivered, Flags, Keywords, MaildirError, Sub, TmpFile, UidRecord};

use crate::convert::{self, flag_bits};
use crate::{MailboxId, ModSeq, Uid};
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
    pub mailbox_id: MailboxId,
    /// Its UID.
    pub uid: Uid,
    /// The mailbox's UIDVALIDITY (for APPENDUID, RFC 4315).
    pub uidvalidity: u32,
    /// Modseq of the new record.
    pub modseq: ModSeq,
    /// Its `Message-ID` (unfolded, trimmed), for the delivery log.
    pub message_id: Option<String>,
    /// File name in `new/` or `cur/`.
    pub file_name: String,
    /// Physical size.
    pub size: u64,
    /// RFC822.SIZE.
    pub vsize: u64,
}

/// How [`UserStore::deliver_file`] put the file into the mailbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkOrCopy {
    /// A hard link to the prepared file (same inode, no data written).
    Linked,
    /// A copy (the mailbox is on another filesystem, or links are not supported).
    Copied,
}

/// A message file written in some mailbox's `tmp/`, fsynced and summarized once, ready
/// for [`UserStore::deliver_file`] into any number of mailboxes. It refers to the file by
/// path: keep the [`crate::IncomingMessage`] it came from alive until the last delivery,
/// then drop it (which removes the `tmp/` name; delivered links stay).
#[derive(Clone, Debug)]
pub struct PreparedMessage {
    pub(crate) path: PathBuf,
    pub(crate) built: Built,
    pub(crate) size: u64,
    pub(crate) vsize: u64,
    pub(crate) mtime: SystemTime,
}

impl PreparedMessage {
    /// Physical size of the file.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// RFC822.SIZE (CRLF line ends): what quotas count.
    pub fn vsize(&self) -> u64 {
        self.vsize
    }

    /// The message's `Message-ID` field value (unfolded, trimmed), for the delivery log.
    pub fn message_id(&self) -> Option<String> {
        message_id(&self.built.headers)
    }
}

/// The `Message-ID` field value (unfolded, trimmed) of a message's header blocks.
fn message_id(headers: &[u8]) -> Option<String> {
    let mut field = Vec::new();
    maildex_mime::header_fields(headers, &["message-id"], false, &mut field);
    // the first field only: up to a line break not followed by a continuation
    let end = (0..field.len())
        .find(|&i| field[i] == b'\n' && !matches!(field.get(i + 1), Some(b' ' | b'\t')))
        .unwrap_or(field.len());
    let value = field[..end].splitn(2, |&b| b == b':').nth(1)?;
    let value = String::from_utf8_lossy(value);
    let value = value.split_whitespace().collect::<Vec<_>>().join(" ");
    (!value.is_empty()).then_some(value)
}

/// Where a delivery lands (see `UserStore::placement`).
struct Placement {
    sub: Sub,
    keywords: Keywords,
    keyword_table: Option<Vec<String>>,
    state: MessageState,
}

/// The trace header lines a delivery agent prepends, as Dovecot's LDA and LMTP write
/// them: `Return-Path: <sender>` (RFC 5321 §4.4; `<>` for a bounce) and, when given,
/// `Delivered-To: <recipient>` (Dovecot adds it only for a single recipient, which the
/// caller decides). CR, LF and NUL are dropped from the values so an envelope address
/// cannot inject header lines. LF line ends, as the files are stored.
pub fn trace_headers(return_path: Option<&str>, delivered_to: Option<&str>) -> Vec<u8> {
    let clean = |s: &str| {
        s.chars()
            .filter(|c| !matches!(c, '\r' | '\n' | '\0'))
            .collect::<String>()
    };
    let mut out = String::new();
    if let Some(from) = return_path {
        let from = clean(from);
        let from = from.trim_start_matches('<').trim_end_matches('>');
        out.push_str(&format!("Return-Path: <{from}>\n"));
    }
    if let Some(rcpt) = delivered_to {
        out.push_str(&format!("Delivered-To: {}\n", clean(rcpt)));
    }
    out.into_bytes()
}

/// What a `Received:` trace header (RFC 5321 §4.4) says of one LMTP transaction.
#[derive(Debug, Clone)]
pub struct Received<'a> {
    /// The client's LHLO name.
    pub helo: &'a str,
    /// The client's address; `None` over a unix socket.
    pub peer: Option<std::net::IpAddr>,
    /// This host's name.
    pub by: &'a str,
    /// The protocol, e.g. `LMTP`.
    pub with: &'a str,
    /// The session and transaction id, as the logs name it.
    pub id: &'a str,
    /// The envelope sender (empty for a bounce).
    pub envelope_from: &'a str,
    /// The recipient, when the message goes to exactly one (as `Delivered-To`).
    pub recipient: Option<&'a str>,
    /// When the message was received.
    pub when: std::time::SystemTime,
}

/// The `Received:` header as Dovecot 2.3's LMTP writes it (checked against its
/// output): `from HELO ([ip])`, `by HOST with LMTP`, `id ID`, `(envelope-from <s>)`,
/// `for <rcpt>` only with a single recipient, then `; date` (RFC 5322 §3.3, UTC).
/// Folded with tabs, LF line ends as the files are stored; CR, LF and other control
/// characters are dropped from the client's values.
pub fn received_header(r: &Received<'_>) -> Vec<u8> {
    let clean = |s: &str| s.chars().filter(|c| !c.is_control()).collect::<String>();
    let mut out = format!("Received: from {}", clean(r.helo));
    if let Some(ip) = r.peer {
        out.push_str(&format!(" ([{ip}])"));
    }
    out.push_str(&format!("\n\tby {} with {}\n\tid {}", r.by, r.with, r.id));
    let from = clean(r.envelope_from);
    let from = from.trim_start_matches('<').trim_end_matches('>');
    out.push_str(&format!("\n\t(envelope-from <{from}>)"));
    if let Some(rcpt) = r.recipient {
        out.push_str(&format!("\n\tfor <{}>", clean(rcpt)));
    }
    let date = time::OffsetDateTime::from(r.when)
        .format(&time::format_description::well_known::Rfc2822)
        .unwrap_or_default();
    out.push_str(&format!("; {date}\n"));
    out.into_bytes()
}

impl StoreError {
    /// True when the error comes from a full disk or an exhausted disk quota (ENOSPC,
    /// EDQUOT): the caller answers "insufficient storage" (LMTP `452 4.3.1`) rather
    /// than a generic temporary failure.
    pub fn is_no_space(&self) -> bool {
        let os_error = match self {
            StoreError::Maildir(MaildirError::Io { error, .. })
            | StoreError::Io { error, .. }
            | StoreError::Index(maildex_index::IndexError::Io { error, .. }) => error,
            _ => return false,
        };
        matches!(os_error.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
    }
}

impl UserStore {
    /// Delivers one message read from `src` into mailbox `mailbox` (see the module docs).
    pub fn deliver(
        &self,
        mailbox: &str,
        src: &mut dyn Read,
        opts: &DeliverOptions,
    ) -> Result<DeliveredMessage, StoreError> {
        // background work (the full-text indexer) steps aside for deliveries too
        let _busy = self.opts.foreground.begin();
        let (name, path) = self.delivery_target(mailbox)?;
        let mut tmp = self.tmp_in(&path)?;
        std::io::copy(src, &mut tmp).map_err(|e| StoreError::io(tmp.path(), e))?;
        // INTERNALDATE is the file's mtime, as Dovecot keeps it (RFC 3501 §2.3.3)
        tmp.set_mtime(opts.internal_date.unwrap_or_else(SystemTime::now));
        tmp.sync()?;
        let target = self.placement(name, &path, opts)?;
        let built = convert::index_file(tmp.path(), target.state.clone())?;
        let serial = self.mailbox_lock(name);
        let held = serial.add();
        // nothing after the rename may fail without removing the file again (finish)
        let delivered = tmp.commit(target.sub, opts.flags, target.keywords)?;
        self.finish_delivery(name, &path, target, delivered, built, held)
    }

    /// Delivers a message file that is already written and summarized (LMTP: one file
    /// for every recipient) into `mailbox` of this store: a hard link into `new/` (or
    /// `cur/` with flags) when the file is on the same filesystem, a copy through this
    /// mailbox's `tmp/` otherwise (EXDEV, or a filesystem without hard links); then the
    /// same steps as [`UserStore::deliver`]: fsync of the folder, dovecot-uidlist, index
    /// commit. The index record is the one built once by [`crate::IncomingMessage::prepare`]
    /// (the file is immutable, so it holds for every link). INTERNALDATE is the file's
    /// mtime: `opts.internal_date` is ignored here.
    pub fn deliver_file(
        &self,
        mailbox: &str,
        msg: &PreparedMessage,
        opts: &DeliverOptions,
    ) -> Result<(DeliveredMessage, LinkOrCopy), StoreError> {
        let _busy = self.opts.foreground.begin();
        let (name, path) = self.delivery_target(mailbox)?;
        let target = self.placement(name, &path, opts)?;
        let mut built = msg.built.clone();
        built.record.state = MessageState {
            internal_date: built.record.state.internal_date,
            size: built.record.state.size,
            vsize: built.record.state.vsize,
            ..target.state.clone()
        };
        let serial = self.mailbox_lock(name);
        let held = serial.add();
        let (delivered, how) =
            self.place_file(msg, &path, target.sub, opts.flags, target.keywords)?;
        self.finish_delivery(name, &path, target, delivered, built, held)
            .map(|d| (d, how))
    }

    /// Canonical name and folder of an existing mailbox, indexed (synced once if the index
    /// does not know it yet).
    pub(crate) fn delivery_target<'n>(
        &self,
        mailbox: &'n str,
    ) -> Result<(&'n str, PathBuf), StoreError> {
        let name = Self::canonical(mailbox);
        let Some(path) = self.mailbox_dir(name)? else {
            return Err(StoreError::NoMailbox(name.to_string()));
        };
        if self.indexed_mailbox(name)?.is_none() {
            self.sync_mailbox(name)?;
        }
        Ok((name, path))
    }

    pub(crate) fn tmp_in(&self, path: &Path) -> Result<TmpFile, StoreError> {
        let mut tmp = TmpFile::create(path)?;
        tmp.set_durable(self.opts.fsync);
        Ok(tmp)
    }

    /// Where and with which state a delivery lands: keyword letters (new names go into
    /// dovecot-keywords, whose table follows in the same index commit), `new/` or `cur/`.
    fn placement(
        &self,
        name: &str,
        path: &Path,
        opts: &DeliverOptions,
    ) -> Result<Placement, StoreError> {
        let (keywords, keyword_table) = if opts.keywords.is_empty() {
            (Keywords::EMPTY, None)
        } else {
            let (bits, table) = self.keyword_bits(name, path, &opts.keywords)?;
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
        Ok(Placement {
            sub,
            keywords,
            keyword_table,
            state,
        })
    }

    /// Links (or copies) a prepared file into `path`'s `sub` folder under a fresh unique
    /// name, never replacing a file, and fsyncs the folder.
    fn place_file(
        &self,
        msg: &PreparedMessage,
        path: &Path,
        sub: Sub,
        flags: Flags,
        keywords: Keywords,
    ) -> Result<(Delivered, LinkOrCopy), StoreError> {
        let to = deliver::LinkInto {
            mailbox: path,
            sub,
            flags,
            keywords,
            sizes: (msg.size, msg.vsize),
            first_id: None,
            fault: maildex_faults::Point::Link,
            fsync: self.opts.fsync,
            source: deliver::LinkSource::Keep,
        };
        match deliver::link_unique(&msg.path, to) {
            Ok(delivered) => Ok((delivered, LinkOrCopy::Linked)),
            // another filesystem (EXDEV) or one without hard links: copy
            Err(MaildirError::Io { error, .. })
                if maildex_maildir::transfer::link_unsupported(&error) =>
            {
                self.copy_file(msg, path, sub, flags, keywords)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn copy_file(
        &self,
        msg: &PreparedMessage,
        path: &Path,
        sub: Sub,
        flags: Flags,
        keywords: Keywords,
    ) -> Result<(Delivered, LinkOrCopy), StoreError> {
        let mut src =
            maildex_maildir::open_message(&msg.path).map_err(|e| StoreError::io(&msg.path, e))?;
        let mut tmp = self.tmp_in(path)?;
        std::io::copy(&mut src, &mut tmp).map_err(|e| StoreError::io(tmp.path(), e))?;
        tmp.set_mtime(msg.mtime);
        tmp.sync()?;
        Ok((tmp.commit(sub, flags, keywords)?, LinkOrCopy::Copied))
    }

    /// The steps after the file is visible: uidlist and index, under the mailbox's serial
    /// lock `held` (see the module docs), which is released before a sync settles what the
    /// commit could not. On failure the file is removed again, so that the sender's retry
    /// cannot duplicate it.
    fn finish_delivery(
        &self,
        name: &str,
        path: &Path,
        target: Placement,
        delivered: Delivered,
        mut built: maildex_index::Built,
        held: crate::Adding<'_>,
    ) -> Result<DeliveredMessage, StoreError> {
        built.record.state.file_name = delivered.file_name.clone();
        let message_id = message_id(&built.headers);
        let recorded = self
            .record_delivery(name, path, &delivered, built, target.keyword_table)
            .and_then(|r| {
                drop(held);
                match r {
                    Some(d) => {
                        self.quota_file_change(i64::try_from(d.size).unwrap_or(i64::MAX), 1);
                        Ok(d)
                    }
                    // no usable uidlist, another UIDVALIDITY, or the UID names another
                    // file: a full sync settles the mailbox and indexes this file too
                    None => {
                        self.sync_mailbox(name)?;
                        self.find_delivered(name, &delivered)
                    }
                }
            })
            .map(|d| DeliveredMessage { message_id, ..d });
        recorded.inspect_err(|_| {
            if let Err(rm) = deliver::remove(path, target.sub, &delivered.file_name) {
                tracing::error!(file = %delivered.path.display(), error = %rm, "could not remove a delivery that failed");
            }
        })
    }

    fn record_delivery(
        &self,
        name: &str,
        path: &Path,
        delivered: &Delivered,
        built: maildex_index::Built,
        keyword_table: Option<Vec<String>>,
    ) -> Result<Option<DeliveredMessage>, StoreError> {
        let Some((uid, uidvalidity)) = self.append_uid(path, delivered)? else {
            return Ok(None);
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
            if let Some(old) = w.reader().state(id, Uid(uid))? {
                if maildex_maildir::filename::base_of(&old.file_name) != base {
                    return Ok(None);
                }
                // another process's sync indexed it first, and it may have changed since:
                // that record stands (see the module docs)
                return Ok(Some(old.modseq));
            }
            let newer = keyword_table
                .as_ref()
                .and_then(|t| crate::opctx::newer_keywords(&m.keywords, t));
            if let Some(table) = newer {
                let mut m = m;
                m.keywords = table;
                w.put_mailbox(id, &m)?;
            }
            w.insert_message_ref(id, Uid(uid), &built.record, &built.headers)
                .map(Some)
        })?;
        let Some(modseq) = committed else {
            tracing::warn!(
                mailbox = name,
                uid,
                "index changed under a delivery; syncing the mailbox"
            );
            return Ok(None);
        };
        Ok(Some(DeliveredMessage {
            mailbox_id: id,
            uid: Uid(uid),
            uidvalidity,
            modseq,
            message_id: None, // set by finish_delivery
            file_name: delivered.file_name.clone(),
            size: delivered.size,
            vsize: delivered.vsize,
        }))
    }

    /// Gives the delivered file the next UID in dovecot-uidlist. None when the list is
    /// missing or unreadable (the caller syncs instead).
    fn append_uid(
        &self,
        path: &Path,
        delivered: &Delivered,
    ) -> Result<Option<(u32, u32)>, StoreError> {
        let mut lock = self.uidlist_lock(path)?;
        // the three numbers needed, without parsing every record (a whole file that is not
        // plain version 3 is parsed)
        let scan = match lock.scan_for_append(&delivered.name.base) {
            Ok(Some(scan)) => scan,
            _ => {
                let Ok(Some(list)) = lock.read() else {
                    return Ok(None);
                };
                AppendScan {
                    uidvalidity: list.uidvalidity,
                    next_uid: list.next_uid,
                    existing: list.find_base(&delivered.name.base).map(|r| r.uid),
                }
            }
        };
        // a concurrent sync may already have numbered this file
        if let Some(uid) = scan.existing {
            return Ok(Some((uid, scan.uidvalidity)));
        }
        let uid = scan.next_uid;
        let Some(next) = uid.checked_add(1) else {
            return Ok(None);
        };
        lock.append(&[UidRecord::new(uid, delivered.file_name.clone())], next)?;
        Ok(Some((uid, scan.uidvalidity)))
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
            message_id: None, // set by finish_delivery
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
            let _lock = self.uidlist_lock(path)?;
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
