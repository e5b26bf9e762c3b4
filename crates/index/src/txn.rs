//! Typed access inside a transaction: [`Reader`] for lookups, [`Writer`] for changes that keep
//! the per-mailbox counters and modseqs exact.

use std::ops::ControlFlow;

use heed::{RoTxn, RwTxn, WithoutTls};

use crate::env::Dbs;
use crate::schema::{
    self, decode, encode, msg_key, split_msg_key, MailboxRecord, MessageRecord, META_NEXT_MAILBOX_ID,
    META_SCHEMA, SCHEMA_VERSION,
};
use crate::IndexError;

/// Lookups in a read (or write) transaction.
pub struct Reader<'t> {
    dbs: &'t Dbs<'t>,
    txn: &'t RoTxn<'t, WithoutTls>,
}

fn lmdb(e: heed::Error) -> IndexError {
    IndexError::from_heed(e)
}

fn be_u32(bytes: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

impl<'t> Reader<'t> {
    pub(crate) fn new(dbs: &'t Dbs<'t>, txn: &'t RoTxn<'t, WithoutTls>) -> Self {
        Reader { dbs, txn }
    }

    /// The schema version stored in the env, if any.
    pub fn schema_version(&self) -> Result<Option<u32>, IndexError> {
        let raw = self.dbs.meta.get(self.txn, META_SCHEMA).map_err(lmdb)?;
        Ok(raw.and_then(be_u32))
    }

    /// Id of the mailbox called `name`.
    pub fn mailbox_id(&self, name: &str) -> Result<Option<u32>, IndexError> {
        self.dbs.mailbox_names.get(self.txn, name).map_err(lmdb)
    }

    /// The mailbox record of `id`.
    pub fn mailbox(&self, id: u32) -> Result<Option<MailboxRecord>, IndexError> {
        match self.dbs.mailboxes.get(self.txn, &id).map_err(lmdb)? {
            Some(raw) => Ok(Some(decode(raw, &format!("mailbox {id}"))?)),
            None => Ok(None),
        }
    }

    /// The mailbox record of `id`, or [`IndexError::NoMailbox`].
    pub fn require_mailbox(&self, id: u32) -> Result<MailboxRecord, IndexError> {
        self.mailbox(id)?.ok_or(IndexError::NoMailbox(id))
    }

    /// Every mailbox, by id.
    pub fn mailboxes(&self) -> Result<Vec<(u32, MailboxRecord)>, IndexError> {
        let mut out = Vec::new();
        for item in self.dbs.mailboxes.iter(self.txn).map_err(lmdb)? {
            let (id, raw) = item.map_err(lmdb)?;
            out.push((id, decode(raw, &format!("mailbox {id}"))?));
        }
        Ok(out)
    }

    /// One message's record.
    pub fn message(&self, mailbox: u32, uid: u32) -> Result<Option<MessageRecord>, IndexError> {
        match self.dbs.messages.get(self.txn, &msg_key(mailbox, uid)).map_err(lmdb)? {
            Some(raw) => Ok(Some(decode(raw, &format!("message {mailbox}/{uid}"))?)),
            None => Ok(None),
        }
    }

    /// Calls `f` with each message of `mailbox` whose UID lies in `uids`, in UID order, with
    /// the record's raw bytes (decode with [`schema::decode`] or use [`Reader::messages`]).
    pub fn for_each_raw(
        &self,
        mailbox: u32,
        uids: std::ops::RangeInclusive<u32>,
        mut f: impl FnMut(u32, &[u8]) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        let lo = msg_key(mailbox, *uids.start());
        let hi = msg_key(mailbox, *uids.end());
        let range = (std::ops::Bound::Included(&lo[..]), std::ops::Bound::Included(&hi[..]));
        for item in self.dbs.messages.range(self.txn, &range).map_err(lmdb)? {
            let (key, raw) = item.map_err(lmdb)?;
            let (_, uid) = split_msg_key(key)
                .ok_or_else(|| IndexError::Corrupt(format!("message key of {} bytes", key.len())))?;
            if f(uid, raw)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    /// Every message of `mailbox`, decoded, in UID order.
    pub fn messages(&self, mailbox: u32) -> Result<Vec<(u32, MessageRecord)>, IndexError> {
        let mut out = Vec::new();
        self.for_each_raw(mailbox, 1..=u32::MAX, |uid, raw| {
            out.push((uid, decode(raw, &format!("message {mailbox}/{uid}"))?));
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(out)
    }

    /// The leading fields of every message of `mailbox`, in UID order (cheap: the cached
    /// fields are not decoded).
    pub fn heads(&self, mailbox: u32) -> Result<Vec<(u32, schema::MessageHead)>, IndexError> {
        let mut out = Vec::new();
        self.for_each_raw(mailbox, 1..=u32::MAX, |uid, raw| {
            out.push((uid, decode(raw, &format!("message {mailbox}/{uid}"))?));
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(out)
    }

    /// The stored header blocks of a message, decompressed: the root header block followed
    /// by every part's header block in pre-order (see [`schema::PartRecord::walk`]).
    pub fn headers(&self, mailbox: u32, uid: u32) -> Result<Option<Vec<u8>>, IndexError> {
        match self.dbs.headers.get(self.txn, &msg_key(mailbox, uid)).map_err(lmdb)? {
            Some(raw) => crate::record::decompress_headers(raw).map(Some),
            None => Ok(None),
        }
    }

    /// Size in bytes of the stored (compressed) header blocks, for statistics.
    pub fn headers_stored_len(&self, mailbox: u32, uid: u32) -> Result<usize, IndexError> {
        let raw = self.dbs.headers.get(self.txn, &msg_key(mailbox, uid)).map_err(lmdb)?;
        Ok(raw.map_or(0, <[u8]>::len))
    }
}

/// Changes in a write transaction. Every change to a message goes through here so that the
/// mailbox counters, `uid_next` and modseqs stay exact.
pub struct Writer<'t, 'e> {
    dbs: &'t Dbs<'t>,
    txn: &'t mut RwTxn<'e>,
}

impl<'t, 'e> Writer<'t, 'e> {
    pub(crate) fn new(dbs: &'t Dbs<'t>, txn: &'t mut RwTxn<'e>) -> Self {
        Writer { dbs, txn }
    }

    /// Lookups that see this transaction's own changes.
    pub fn reader(&self) -> Reader<'_> {
        Reader { dbs: self.dbs, txn: self.txn }
    }

    pub(crate) fn init_schema(&mut self) -> Result<(), IndexError> {
        self.dbs
            .meta
            .put(self.txn, META_SCHEMA, &SCHEMA_VERSION.to_be_bytes())
            .map_err(lmdb)
    }

    /// Creates a mailbox record (or returns the id of the existing one with this name).
    pub fn create_mailbox(&mut self, name: &str, uidvalidity: u32) -> Result<u32, IndexError> {
        if let Some(id) = self.reader().mailbox_id(name)? {
            return Ok(id);
        }
        let next = self.dbs.meta.get(self.txn, META_NEXT_MAILBOX_ID).map_err(lmdb)?;
        let id = next.and_then(be_u32).unwrap_or(1);
        let following = id.checked_add(1).ok_or(IndexError::Internal("mailbox ids exhausted".into()))?;
        self.dbs
            .meta
            .put(self.txn, META_NEXT_MAILBOX_ID, &following.to_be_bytes())
            .map_err(lmdb)?;
        self.dbs.mailbox_names.put(self.txn, name, &id).map_err(lmdb)?;
        let rec = MailboxRecord {
            name: name.to_string(),
            uidvalidity,
            uid_next: 1,
            first_recent_uid: 1,
            ..MailboxRecord::default()
        };
        self.put_mailbox(id, &rec)?;
        Ok(id)
    }

    /// Stores a mailbox record as it is (callers change stamps, uidvalidity, keywords).
    pub fn put_mailbox(&mut self, id: u32, rec: &MailboxRecord) -> Result<(), IndexError> {
        self.dbs.mailboxes.put(self.txn, &id, &encode(rec)?).map_err(lmdb)
    }

    /// Removes a mailbox and everything indexed in it.
    pub fn delete_mailbox(&mut self, id: u32) -> Result<(), IndexError> {
        let rec = self.reader().require_mailbox(id)?;
        self.clear_messages(id)?;
        self.dbs.mailbox_names.delete(self.txn, &rec.name).map_err(lmdb)?;
        self.dbs.mailboxes.delete(self.txn, &id).map_err(lmdb)?;
        Ok(())
    }

    /// Removes every message of a mailbox and zeroes its counters (used by rebuild; UIDs
    /// live on in dovecot-uidlist).
    pub fn clear_messages(&mut self, id: u32) -> Result<(), IndexError> {
        let lo = msg_key(id, 0);
        let hi = msg_key(id, u32::MAX);
        let range = (std::ops::Bound::Included(&lo[..]), std::ops::Bound::Included(&hi[..]));
        self.dbs.messages.delete_range(self.txn, &range).map_err(lmdb)?;
        self.dbs.headers.delete_range(self.txn, &range).map_err(lmdb)?;
        if let Some(mut rec) = self.reader().mailbox(id)? {
            rec.counts = schema::Counts::default();
            self.put_mailbox(id, &rec)?;
        }
        Ok(())
    }

    fn bump_modseq(rec: &mut MailboxRecord) -> u64 {
        rec.highest_modseq += 1;
        rec.highest_modseq
    }

    /// Adds (or replaces) message `uid` with its compressed header blocks, giving it the
    /// next modseq and updating the counters.
    pub fn insert_message(
        &mut self,
        mailbox: u32,
        uid: u32,
        mut msg: MessageRecord,
        compressed_headers: &[u8],
    ) -> Result<u64, IndexError> {
        if uid == 0 {
            return Err(IndexError::Internal("UID 0 is not a valid UID".into()));
        }
        let mut mrec = self.reader().require_mailbox(mailbox)?;
        if let Some(old) = self.reader().message(mailbox, uid)? {
            uncount(&mut mrec, uid, &old);
        }
        msg.modseq = Self::bump_modseq(&mut mrec);
        count(&mut mrec, uid, &msg);
        mrec.uid_next = mrec.uid_next.max(uid.saturating_add(1));
        let key = msg_key(mailbox, uid);
        self.dbs.messages.put(self.txn, &key, &encode(&msg)?).map_err(lmdb)?;
        self.dbs.headers.put(self.txn, &key, compressed_headers).map_err(lmdb)?;
        self.put_mailbox(mailbox, &mrec)?;
        Ok(msg.modseq)
    }

    /// Changes the flags, keywords and file name of a message (a rename in the Maildir).
    /// Returns the new modseq, or None when the message is not in the index.
    pub fn update_message(
        &mut self,
        mailbox: u32,
        uid: u32,
        flags: u8,
        keywords: u32,
        file_name: &str,
        in_new: bool,
    ) -> Result<Option<u64>, IndexError> {
        let Some(mut msg) = self.reader().message(mailbox, uid)? else {
            return Ok(None);
        };
        let mut mrec = self.reader().require_mailbox(mailbox)?;
        uncount(&mut mrec, uid, &msg);
        let changed_flags = msg.flags != flags || msg.keywords != keywords;
        msg.flags = flags;
        msg.keywords = keywords;
        msg.file_name = file_name.to_string();
        msg.in_new = in_new;
        if changed_flags {
            msg.modseq = Self::bump_modseq(&mut mrec);
        }
        count(&mut mrec, uid, &msg);
        self.dbs
            .messages
            .put(self.txn, &msg_key(mailbox, uid), &encode(&msg)?)
            .map_err(lmdb)?;
        self.put_mailbox(mailbox, &mrec)?;
        Ok(Some(msg.modseq))
    }

    /// Removes message `uid` (expunge). Returns its record if it was there.
    pub fn remove_message(&mut self, mailbox: u32, uid: u32) -> Result<Option<MessageRecord>, IndexError> {
        let Some(old) = self.reader().message(mailbox, uid)? else {
            return Ok(None);
        };
        let mut mrec = self.reader().require_mailbox(mailbox)?;
        uncount(&mut mrec, uid, &old);
        Self::bump_modseq(&mut mrec);
        let key = msg_key(mailbox, uid);
        self.dbs.messages.delete(self.txn, &key).map_err(lmdb)?;
        self.dbs.headers.delete(self.txn, &key).map_err(lmdb)?;
        self.put_mailbox(mailbox, &mrec)?;
        Ok(Some(old))
    }

    /// Claims the `\Recent` messages for one session (RFC 3501 §2.3.2: a message is recent
    /// in exactly one session). Returns the range of UIDs that were recent.
    pub fn claim_recent(&mut self, mailbox: u32) -> Result<std::ops::Range<u32>, IndexError> {
        let mut mrec = self.reader().require_mailbox(mailbox)?;
        let claimed = mrec.first_recent_uid..mrec.uid_next;
        mrec.first_recent_uid = mrec.uid_next;
        mrec.counts.recent = 0;
        self.put_mailbox(mailbox, &mrec)?;
        Ok(claimed)
    }
}

fn count(m: &mut MailboxRecord, uid: u32, msg: &MessageRecord) {
    let c = &mut m.counts;
    c.messages += 1;
    c.unseen += u32::from(msg.is_unseen());
    c.deleted += u32::from(msg.is_deleted());
    c.recent += u32::from(uid >= m.first_recent_uid);
    c.vsize += msg.vsize;
}

fn uncount(m: &mut MailboxRecord, uid: u32, msg: &MessageRecord) {
    let c = &mut m.counts;
    c.messages = c.messages.saturating_sub(1);
    c.unseen = c.unseen.saturating_sub(u32::from(msg.is_unseen()));
    c.deleted = c.deleted.saturating_sub(u32::from(msg.is_deleted()));
    c.recent = c.recent.saturating_sub(u32::from(uid >= m.first_recent_uid));
    c.vsize = c.vsize.saturating_sub(msg.vsize);
}
