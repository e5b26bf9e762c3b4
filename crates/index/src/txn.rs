//! Typed access inside a transaction: [`Reader`] for lookups, [`Writer`] for changes that keep
//! the per-mailbox counters and modseqs exact.

use std::ops::{Bound, ControlFlow, RangeInclusive};

use heed::{RoTxn, RwTxn, WithoutTls};

use crate::changes::{self, ChangeSet};
use crate::env::Dbs;
use crate::flag_column::FlagState;
use crate::schema::{
    self, decode, encode, msg_key, split_msg_key, Cached, CachedFields, MailboxRecord,
    MessageRecord, MessageState, SortKeys, SortNeed, META_NEXT_MAILBOX_ID, META_SCHEMA,
    SCHEMA_VERSION,
};
use crate::words::MessageWords;
use crate::{IndexError, MailboxId, ModSeq, Uid};

/// Lookups in a read (or write) transaction.
pub struct Reader<'t> {
    pub(crate) dbs: &'t Dbs<'t>,
    pub(crate) txn: &'t RoTxn<'t, WithoutTls>,
}

fn lmdb(e: heed::Error) -> IndexError {
    IndexError::from_heed(e)
}

fn be_u32(bytes: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

/// Names a record in a decoding error.
struct What(&'static str, MailboxId, Uid);

impl std::fmt::Display for What {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.0, self.1, self.2)
    }
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
    pub fn mailbox_id(&self, name: &str) -> Result<Option<MailboxId>, IndexError> {
        let id = self.dbs.mailbox_names.get(self.txn, name).map_err(lmdb)?;
        Ok(id.map(MailboxId))
    }

    /// The mailbox record of `id`.
    ///
    /// RFC 7162 §3.1.1: HIGHESTMODSEQ never goes back. A power loss can undo a commit
    /// (MDB_NOMETASYNC, see `Index::open`) whose modseqs a client saw; those were at most
    /// the clock of their time (a change's modseq is at least the clock, [`Writer`], and
    /// runs ahead of it only by the changes of one commit), so the highest modseq reads as
    /// at least the clock of this process's open of the env, and the next change is above.
    pub fn mailbox(&self, id: MailboxId) -> Result<Option<MailboxRecord>, IndexError> {
        match self.dbs.mailboxes.get(self.txn, &id.get()).map_err(lmdb)? {
            Some(raw) => Ok(Some(
                self.floored(decode(raw, &format_args!("mailbox {id}"))?),
            )),
            None => Ok(None),
        }
    }

    fn floored(&self, mut rec: MailboxRecord) -> MailboxRecord {
        rec.highest_modseq = rec.highest_modseq.max(self.dbs.modseq_floor);
        rec
    }

    /// The mailbox record of `id`, or [`IndexError::NoMailbox`].
    pub fn require_mailbox(&self, id: MailboxId) -> Result<MailboxRecord, IndexError> {
        self.mailbox(id)?.ok_or(IndexError::NoMailbox(id))
    }

    /// Every mailbox, by id.
    pub fn mailboxes(&self) -> Result<Vec<(MailboxId, MailboxRecord)>, IndexError> {
        let mut out = Vec::new();
        for item in self.dbs.mailboxes.iter(self.txn).map_err(lmdb)? {
            let (id, raw) = item.map_err(lmdb)?;
            out.push((
                MailboxId(id),
                self.floored(decode(raw, &format_args!("mailbox {id}"))?),
            ));
        }
        Ok(out)
    }

    /// One message's state (flags, name, sizes, modseq).
    pub fn state(&self, mailbox: MailboxId, uid: Uid) -> Result<Option<MessageState>, IndexError> {
        match self
            .dbs
            .messages
            .get(self.txn, &msg_key(mailbox, uid))
            .map_err(lmdb)?
        {
            Some(raw) => Ok(Some(decode(raw, &What("message", mailbox, uid))?)),
            None => Ok(None),
        }
    }

    /// One message's cached listing data.
    pub fn cached(&self, mailbox: MailboxId, uid: Uid) -> Result<Option<Cached>, IndexError> {
        self.cached_fields(mailbox, uid, CachedFields::ALL)
    }

    /// The `fields` of the cached data stored for one message (the others left empty).
    pub fn cached_fields(
        &self,
        mailbox: MailboxId,
        uid: Uid,
        fields: CachedFields,
    ) -> Result<Option<Cached>, IndexError> {
        self.dbs
            .cache()
            .get(self.txn, mailbox.get(), uid.get(), fields)
    }

    /// One message: state and cached data.
    pub fn message(
        &self,
        mailbox: MailboxId,
        uid: Uid,
    ) -> Result<Option<MessageRecord>, IndexError> {
        let Some(state) = self.state(mailbox, uid)? else {
            return Ok(None);
        };
        let cached = self.cached(mailbox, uid)?.unwrap_or_default();
        Ok(Some(MessageRecord { state, cached }))
    }

    /// Calls `f` with the state of each message of `mailbox` whose UID lies in `uids`, in UID
    /// order.
    pub fn for_each_state(
        &self,
        mailbox: MailboxId,
        uids: RangeInclusive<Uid>,
        f: impl FnMut(Uid, MessageState) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        self.walk_states::<MessageState>(mailbox, uids, f)
    }

    /// Calls `f` with the flags, keywords, modseq, size and date of each message of `mailbox` whose UID
    /// lies in `uids`, in UID order, from the `flags` column: a few hundred small values
    /// for a mailbox of 30,000 messages, where [`Reader::for_each_state`] reads one record
    /// per message.
    pub fn for_each_flags(
        &self,
        mailbox: MailboxId,
        uids: RangeInclusive<Uid>,
        mut f: impl FnMut(Uid, FlagState) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        self.dbs.flag_column().for_each(
            self.txn,
            mailbox.get(),
            uids.start().get()..=uids.end().get(),
            |uid, st| f(Uid(uid), st),
        )
    }

    /// The flags column's entries of every message of `mailbox`, in UID order.
    pub fn flags(&self, mailbox: MailboxId) -> Result<Vec<(Uid, FlagState)>, IndexError> {
        let mut out = Vec::new();
        self.for_each_flags(mailbox, Uid::MIN..=Uid::MAX, |uid, f| {
            out.push((uid, f));
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(out)
    }

    /// One message's flags, keywords, modseq, size and date, from the `flags` column.
    pub fn flags_of(&self, mailbox: MailboxId, uid: Uid) -> Result<Option<FlagState>, IndexError> {
        self.dbs
            .flag_column()
            .get(self.txn, mailbox.get(), uid.get())
    }

    /// [`Reader::for_each_state`] with the file name left empty: nothing is allocated per
    /// message (the migration to schema 13 refills the flags column from the states of a
    /// whole mailbox and needs no names; SEARCH reads the flags column instead).
    pub fn for_each_state_nameless(
        &self,
        mailbox: MailboxId,
        uids: RangeInclusive<Uid>,
        f: impl FnMut(Uid, MessageState) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        self.walk_states::<crate::schema::NamelessState<'_>>(mailbox, uids, f)
    }

    /// Calls `f` with the file name and the `in_new` of each message of `mailbox`, in UID
    /// order, borrowed from the stored record (nothing after them is decoded, nothing is
    /// allocated): what a sync compares with a listing of the folders.
    pub fn for_each_file_name(
        &self,
        mailbox: MailboxId,
        mut f: impl FnMut(Uid, &str, bool),
    ) -> Result<(), IndexError> {
        self.walk_records(
            mailbox,
            Uid::MIN..=Uid::MAX,
            |uid, v: crate::schema::FileNameView<'_>| {
                f(uid, v.file_name, v.in_new);
                Ok(ControlFlow::Continue(()))
            },
        )
    }

    /// The states of `mailbox` in `uids`, each decoded as a `T` and made a [`MessageState`].
    fn walk_states<'s, T: serde::Deserialize<'s> + Into<MessageState>>(
        &'s self,
        mailbox: MailboxId,
        uids: RangeInclusive<Uid>,
        mut f: impl FnMut(Uid, MessageState) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        self.walk_records(mailbox, uids, |uid, state: T| f(uid, state.into()))
    }

    /// The stored states of `mailbox` in `uids`, each decoded as a `T` (a view of the
    /// record, borrowed from it).
    fn walk_records<'s, T: serde::Deserialize<'s>>(
        &'s self,
        mailbox: MailboxId,
        uids: RangeInclusive<Uid>,
        mut f: impl FnMut(Uid, T) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        let lo = msg_key(mailbox, *uids.start());
        let hi = msg_key(mailbox, *uids.end());
        let range = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
        for item in self.dbs.messages.range(self.txn, &range).map_err(lmdb)? {
            let (key, raw) = item.map_err(lmdb)?;
            let (_, uid) = split_msg_key(key).ok_or_else(|| {
                IndexError::Corrupt(format!("message key of {} bytes", key.len()))
            })?;
            let state: T = decode(raw, &What("message", mailbox, uid))?;
            if f(uid, state)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    /// Calls `f` with the `fields` of the cached data of each message of `mailbox` in
    /// `uids` (the other fields left empty), in UID order.
    pub fn for_each_cached(
        &self,
        mailbox: MailboxId,
        uids: RangeInclusive<Uid>,
        fields: CachedFields,
        mut f: impl FnMut(Uid, Box<Cached>) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        self.dbs
            .cache()
            .for_each(self.txn, mailbox.get(), raw(uids), fields, |uid, c| {
                f(Uid(uid), c)
            })
    }

    /// Calls `f` with the sort and thread keys (what `need` asks for) of each message of
    /// `mailbox` in `uids` that `wanted` accepts, in UID order: the `cache-sort` column
    /// alone, decoded only for those (SORT and THREAD of a whole mailbox).
    pub fn for_each_sort_keys(
        &self,
        mailbox: MailboxId,
        uids: RangeInclusive<Uid>,
        need: SortNeed,
        wanted: impl Fn(Uid) -> bool,
        mut f: impl FnMut(Uid, SortKeys),
    ) -> Result<(), IndexError> {
        self.dbs
            .cache()
            .sort
            .for_each_ref(self.txn, mailbox.get(), raw(uids), |uid, bytes| {
                let uid = Uid(uid);
                if wanted(uid) {
                    let what = What(schema::DB_CACHE_SORT, mailbox, uid);
                    f(uid, SortKeys::decode(bytes, need, &what)?);
                }
                Ok(ControlFlow::Continue(()))
            })
    }

    /// Calls `f` with the raw header blocks of each message of `mailbox` in `uids`, in UID
    /// order (see [`Reader::headers`]); each segment is decompressed once, so a listing of
    /// many messages costs one decompression per 16 of them.
    pub fn for_each_headers(
        &self,
        mailbox: MailboxId,
        uids: RangeInclusive<Uid>,
        mut f: impl FnMut(Uid, Vec<u8>) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        self.dbs
            .headers()
            .for_each(self.txn, mailbox.get(), raw(uids), |uid, h| f(Uid(uid), h))
    }

    /// The state of every message of `mailbox`, in UID order (what sync and check compare).
    pub fn states(&self, mailbox: MailboxId) -> Result<Vec<(Uid, MessageState)>, IndexError> {
        let mut out = Vec::new();
        self.for_each_state(mailbox, Uid::MIN..=Uid::MAX, |uid, s| {
            out.push((uid, s));
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(out)
    }

    /// The UIDs of `mailbox` in ascending order, from the keys alone (no value is decoded).
    pub fn uids(&self, mailbox: MailboxId) -> Result<Vec<Uid>, IndexError> {
        self.uids_from(mailbox, Uid(0), usize::MAX)
    }

    /// At most `max` UIDs of `mailbox` from `from` on, ascending, from the keys alone.
    pub fn uids_from(
        &self,
        mailbox: MailboxId,
        from: Uid,
        max: usize,
    ) -> Result<Vec<Uid>, IndexError> {
        let lo = msg_key(mailbox, from);
        let hi = msg_key(mailbox, Uid::MAX);
        let range = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
        let mut out = Vec::new();
        let iter = self
            .dbs
            .messages
            .remap_data_type::<heed::types::DecodeIgnore>()
            .range(self.txn, &range)
            .map_err(lmdb)?;
        for item in iter.take(max) {
            let (key, ()) = item.map_err(lmdb)?;
            let (_, uid) = split_msg_key(key).ok_or_else(|| {
                IndexError::Corrupt(format!("message key of {} bytes", key.len()))
            })?;
            out.push(uid);
        }
        Ok(out)
    }

    /// The messages of `mailbox` whose modseq is above `modseq` (RFC 7162 §3.1.4
    /// CHANGEDSINCE, §3.2.5 QRESYNC), in UID order. Expunged messages are not reported.
    /// Reads the change log: one entry and one state per changed message.
    pub fn changed_since(
        &self,
        mailbox: MailboxId,
        modseq: ModSeq,
    ) -> Result<Vec<(Uid, MessageState)>, IndexError> {
        Ok(self.changes_since(mailbox, modseq)?.changed)
    }

    /// What changed in `mailbox` above `modseq`: the messages added or changed (with their
    /// state) and the UIDs expunged, from the change log and the tombstones, reading only
    /// the records of the changes ([`ChangeSet::records_read`]).
    pub fn changes_since(
        &self,
        mailbox: MailboxId,
        modseq: ModSeq,
    ) -> Result<ChangeSet, IndexError> {
        let Some(rec) = self.mailbox(mailbox)? else {
            return Ok(ChangeSet::default());
        };
        if modseq >= rec.highest_modseq {
            return Ok(ChangeSet {
                expunged: Some(Vec::new()),
                ..ChangeSet::default()
            });
        }
        let uids = changes::changed_uids(self.dbs, self.txn, mailbox, modseq)?;
        let mut changed = Vec::with_capacity(uids.len());
        for &uid in &uids {
            let state = self.state(mailbox, uid)?.ok_or_else(|| {
                IndexError::Corrupt(format!("change log names {mailbox}/{uid}, not indexed"))
            })?;
            changed.push((uid, state));
        }
        let expunged = changes::expunged_uids(self.dbs, self.txn, mailbox, &rec, modseq)?;
        let records_read = 2 * changed.len() + expunged.as_ref().map_or(0, Vec::len);
        Ok(ChangeSet {
            changed,
            expunged,
            records_read,
        })
    }

    /// Every message of `mailbox`, whole, in UID order.
    pub fn messages(&self, mailbox: MailboxId) -> Result<Vec<(Uid, MessageRecord)>, IndexError> {
        let mut cached = Vec::new();
        self.for_each_cached(mailbox, Uid::MIN..=Uid::MAX, CachedFields::ALL, |uid, c| {
            cached.push((uid, c));
            Ok(ControlFlow::Continue(()))
        })?;
        let mut cached = cached.into_iter().peekable();
        let mut out = Vec::new();
        for (uid, state) in self.states(mailbox)? {
            while cached.next_if(|(u, _)| *u < uid).is_some() {}
            let c = cached
                .next_if(|(u, _)| *u == uid)
                .map(|(_, c)| *c)
                .unwrap_or_default();
            out.push((uid, MessageRecord { state, cached: c }));
        }
        Ok(out)
    }

    /// Calls `f` with the stored search fields of each message of `mailbox` in `uids`, in
    /// UID order, as bytes read in place (for [`crate::SearchView::parse`]).
    pub fn for_each_search(
        &self,
        mailbox: MailboxId,
        uids: RangeInclusive<Uid>,
        mut f: impl FnMut(Uid, &[u8]) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        self.dbs
            .cache()
            .search
            .for_each(self.txn, mailbox.get(), raw(uids), |uid, d| f(Uid(uid), d))
    }

    /// The stored search fields of one message, as bytes read in place.
    pub fn search_fields(&self, mailbox: MailboxId, uid: Uid) -> Result<Option<&[u8]>, IndexError> {
        self.dbs
            .cache()
            .search
            .get(self.txn, mailbox.get(), uid.get())
    }

    /// Calls `f` with the stored value of `column` of each message of `mailbox` in `uids`
    /// that has one, in UID order (each segment decompressed once).
    pub fn for_each_fts(
        &self,
        column: Fts,
        mailbox: MailboxId,
        uids: RangeInclusive<Uid>,
        mut f: impl FnMut(Uid, &[u8]) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        self.fts_segments(column)
            .for_each_ref(self.txn, mailbox.get(), raw(uids), |uid, d| f(Uid(uid), d))
    }

    /// Calls `f` with the stored value of `column` of each of `uids` (ascending) of
    /// `mailbox` that has one, each segment decompressed once however many of them it
    /// holds (for sparse sets: candidates after the signatures).
    pub fn fts_of(
        &self,
        column: Fts,
        mailbox: MailboxId,
        uids: &[Uid],
        mut f: impl FnMut(Uid, &[u8]) -> Result<ControlFlow<()>, IndexError>,
    ) -> Result<(), IndexError> {
        self.fts_segments(column)
            .for_uids(self.txn, mailbox.get(), uids, |uid, d| f(Uid(uid), d))
    }

    /// The stored value of `column` of one message (its segment decompressed).
    pub fn fts(
        &self,
        column: Fts,
        mailbox: MailboxId,
        uid: Uid,
    ) -> Result<Option<Vec<u8>>, IndexError> {
        self.fts_segments(column)
            .get(self.txn, mailbox.get(), uid.get())
    }

    fn fts_segments(&self, column: Fts) -> crate::segment::Segments<'_> {
        match column {
            Fts::Text => self.dbs.cache().text,
            Fts::Sig => self.dbs.cache().sig,
        }
    }

    /// The raw header blocks of a message: the root header block followed by every part's
    /// header block in pre-order (see [`schema::PartRecord::walk`]).
    pub fn headers(&self, mailbox: MailboxId, uid: Uid) -> Result<Option<Vec<u8>>, IndexError> {
        self.dbs.headers().get(self.txn, mailbox.get(), uid.get())
    }

    /// Page statistics of each database, for `index dump` and the benchmarks.
    pub fn page_stats(&self) -> Result<Vec<PageStats>, IndexError> {
        let d = self.dbs;
        let stats = [
            (
                schema::DB_MAILBOXES,
                d.mailboxes.stat(self.txn).map_err(lmdb)?,
            ),
            (
                schema::DB_MESSAGES,
                d.messages.stat(self.txn).map_err(lmdb)?,
            ),
            (schema::DB_FLAGS, d.flags.stat(self.txn).map_err(lmdb)?),
            (
                schema::DB_CACHE_HOT,
                d.cache_hot.stat(self.txn).map_err(lmdb)?,
            ),
            (
                schema::DB_CACHE_ENVELOPE,
                d.cache_envelope.stat(self.txn).map_err(lmdb)?,
            ),
            (
                schema::DB_CACHE_STRUCTURE,
                d.cache_structure.stat(self.txn).map_err(lmdb)?,
            ),
            (
                schema::DB_CACHE_SORT,
                d.cache_sort.stat(self.txn).map_err(lmdb)?,
            ),
            (
                schema::DB_CACHE_SEARCH,
                d.cache_search.stat(self.txn).map_err(lmdb)?,
            ),
            (
                schema::DB_FTS_TEXT,
                d.fts_text.stat(self.txn).map_err(lmdb)?,
            ),
            (schema::DB_FTS_SIG, d.fts_sig.stat(self.txn).map_err(lmdb)?),
            (
                schema::DB_FTS_WORDS,
                d.fts_words.stat(self.txn).map_err(lmdb)?,
            ),
            (schema::DB_HEADERS, d.headers.stat(self.txn).map_err(lmdb)?),
            (schema::DB_CHANGES, d.changes.stat(self.txn).map_err(lmdb)?),
            (
                schema::DB_EXPUNGED,
                d.expunged.stat(self.txn).map_err(lmdb)?,
            ),
        ];
        Ok(stats
            .into_iter()
            .map(|(name, s)| PageStats {
                name,
                entries: s.entries,
                leaf_pages: s.leaf_pages,
                overflow_pages: s.overflow_pages,
                branch_pages: s.branch_pages,
            })
            .collect())
    }
}

/// The two full-text columns, written, copied and removed together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fts {
    /// `fts-text`: the [`crate::TextRecord`]s, encoded.
    Text,
    /// `fts-sig`: their candidate signatures ([`crate::signature`]).
    Sig,
}

/// Page use of one database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageStats {
    /// Database name.
    pub name: &'static str,
    /// Keys in it.
    pub entries: usize,
    /// Leaf pages.
    pub leaf_pages: usize,
    /// Overflow pages (values too big for a leaf).
    pub overflow_pages: usize,
    /// Branch pages.
    pub branch_pages: usize,
}

/// Changes in a write transaction. Every change to a message goes through here so that the
/// mailbox counters, `uid_next` and modseqs stay exact.
pub struct Writer<'t, 'e> {
    pub(crate) dbs: &'t Dbs<'t>,
    pub(crate) txn: &'t mut RwTxn<'e>,
    /// The clock when this write began: no modseq it gives is lower (see
    /// [`Reader::mailbox`]).
    now: ModSeq,
    /// Set by [`Writer::quietly`].
    quiet: bool,
}

impl<'t, 'e> Writer<'t, 'e> {
    pub(crate) fn new(dbs: &'t Dbs<'t>, txn: &'t mut RwTxn<'e>) -> Self {
        Writer {
            dbs,
            txn,
            now: modseq_floor(),
            quiet: false,
        }
    }

    /// Declares that this operation changes no mail, only what is derived from it and read
    /// by no session unasked (the full text the background indexer writes after the
    /// delivery): a commit whose every change is quiet wakes no commit listener (IDLE
    /// sessions, the indexer's own watch) and is not counted in [`crate::Index::commits`].
    pub fn quietly(&mut self) {
        self.quiet = true;
    }

    pub(crate) fn is_quiet(&self) -> bool {
        self.quiet
    }

    /// Lookups that see this transaction's own changes.
    pub fn reader(&self) -> Reader<'_> {
        Reader {
            dbs: self.dbs,
            txn: self.txn,
        }
    }

    pub(crate) fn init_schema(&mut self) -> Result<(), IndexError> {
        self.dbs
            .meta
            .put(self.txn, META_SCHEMA, &SCHEMA_VERSION.to_be_bytes())
            .map_err(lmdb)
    }

    /// Writes the flags-column entry of message `uid` again from its record, or removes it
    /// when the message has none (`index check --repair`).
    pub fn rewrite_flag_entry(&mut self, mailbox: MailboxId, uid: Uid) -> Result<(), IndexError> {
        let col = self.dbs.flag_column();
        match self.reader().state(mailbox, uid)? {
            Some(st) => col.put_many(self.txn, mailbox.get(), [(uid.get(), FlagState::of(&st))]),
            None => col.remove(self.txn, mailbox.get(), uid.get()).map(drop),
        }
    }

    /// Creates a mailbox record (or returns the id of the existing one with this name).
    pub fn create_mailbox(
        &mut self,
        name: &str,
        uidvalidity: u32,
    ) -> Result<MailboxId, IndexError> {
        if let Some(id) = self.reader().mailbox_id(name)? {
            return Ok(id);
        }
        let next = self
            .dbs
            .meta
            .get(self.txn, META_NEXT_MAILBOX_ID)
            .map_err(lmdb)?;
        let id = MailboxId(next.and_then(be_u32).unwrap_or(1));
        let following = id
            .get()
            .checked_add(1)
            .ok_or(IndexError::Internal("mailbox ids exhausted".into()))?;
        self.dbs
            .meta
            .put(self.txn, META_NEXT_MAILBOX_ID, &following.to_be_bytes())
            .map_err(lmdb)?;
        self.dbs
            .mailbox_names
            .put(self.txn, name, &id.get())
            .map_err(lmdb)?;
        // Modseqs of a new mailbox record start from the clock (microseconds), not from 0:
        // a record made again after its index was deleted or moved aside can then never
        // hand out a modseq below one a client has already seen (RFC 7162 §3.1.1). The
        // expunges before it are unknown: the change log starts here.
        let floor = modseq_floor();
        let rec = MailboxRecord {
            name: name.to_string(),
            uidvalidity,
            uid_next: Uid::MIN,
            first_recent_uid: Uid::MIN,
            highest_modseq: floor,
            expunge_floor: floor,
            ..MailboxRecord::default()
        };
        self.put_mailbox(id, &rec)?;
        Ok(id)
    }

    /// Stores a mailbox record as it is (callers change stamps, uidvalidity, keywords).
    pub fn put_mailbox(&mut self, id: MailboxId, rec: &MailboxRecord) -> Result<(), IndexError> {
        self.dbs
            .mailboxes
            .put(self.txn, &id.get(), &encode(rec)?)
            .map_err(lmdb)
    }

    /// Gives mailbox `id` the name `new_name` (RENAME); its id, messages and modseqs stay.
    /// Fails with [`IndexError::Internal`] when another mailbox has that name.
    pub fn rename_mailbox(&mut self, id: MailboxId, new_name: &str) -> Result<(), IndexError> {
        let mut rec = self.reader().require_mailbox(id)?;
        if rec.name == new_name {
            return Ok(());
        }
        if self.reader().mailbox_id(new_name)?.is_some() {
            return Err(IndexError::Internal(format!(
                "rename to {new_name:?}: a mailbox of that name is indexed"
            )));
        }
        self.dbs
            .mailbox_names
            .delete(self.txn, &rec.name)
            .map_err(lmdb)?;
        self.dbs
            .mailbox_names
            .put(self.txn, new_name, &id.get())
            .map_err(lmdb)?;
        rec.name = new_name.to_string();
        self.put_mailbox(id, &rec)
    }

    /// Removes a mailbox and everything indexed in it.
    pub fn delete_mailbox(&mut self, id: MailboxId) -> Result<(), IndexError> {
        let rec = self.reader().require_mailbox(id)?;
        self.clear_messages(id)?;
        self.dbs
            .mailbox_names
            .delete(self.txn, &rec.name)
            .map_err(lmdb)?;
        self.dbs
            .mailboxes
            .delete(self.txn, &id.get())
            .map_err(lmdb)?;
        Ok(())
    }

    /// Removes every message of a mailbox and zeroes its counters (used by rebuild; UIDs
    /// live on in dovecot-uidlist).
    pub fn clear_messages(&mut self, id: MailboxId) -> Result<(), IndexError> {
        let lo = msg_key(id, Uid(0));
        let hi = msg_key(id, Uid::MAX);
        let range = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
        self.dbs
            .messages
            .delete_range(self.txn, &range)
            .map_err(lmdb)?;
        self.dbs.flag_column().clear(self.txn, id.get())?;
        self.dbs.cache().clear(self.txn, id.get())?;
        self.dbs.words().clear(self.txn, id.get())?;
        self.dbs.headers().clear(self.txn, id.get())?;
        match self.reader().mailbox(id)? {
            Some(mut rec) => {
                rec.counts = schema::Counts::default();
                // the clearing is a change of its own: a client that saw the mailbox
                // before it is below the new expunge floor and gets the full UID list
                self.bump_modseq(&mut rec);
                changes::clear(self.dbs, self.txn, id, Some(&mut rec))?;
                self.put_mailbox(id, &rec)?;
            }
            None => changes::clear(self.dbs, self.txn, id, None)?,
        }
        Ok(())
    }

    /// The next modseq of the mailbox: above its highest, and at least the clock.
    fn bump_modseq(&self, rec: &mut MailboxRecord) -> ModSeq {
        rec.highest_modseq = rec.highest_modseq.next().max(self.now);
        rec.highest_modseq
    }

    fn put_state(
        &mut self,
        mailbox: MailboxId,
        uid: Uid,
        state: &MessageState,
    ) -> Result<(), IndexError> {
        self.dbs
            .messages
            .put(self.txn, &msg_key(mailbox, uid), &encode(state)?)
            .map_err(lmdb)
    }

    /// Adds (or replaces) message `uid` with its raw header blocks, giving it the next modseq
    /// and updating the counters. Returns the modseq.
    pub fn insert_message(
        &mut self,
        mailbox: MailboxId,
        uid: Uid,
        msg: MessageRecord,
        header_blocks: Vec<u8>,
    ) -> Result<ModSeq, IndexError> {
        self.insert_message_ref(mailbox, uid, &msg, &header_blocks)
    }

    /// [`Writer::insert_message`] of a record the caller keeps (see
    /// [`Writer::insert_message_refs`]).
    pub fn insert_message_ref(
        &mut self,
        mailbox: MailboxId,
        uid: Uid,
        msg: &MessageRecord,
        header_blocks: &[u8],
    ) -> Result<ModSeq, IndexError> {
        let modseqs = self.insert_message_refs(mailbox, &[(uid, msg, header_blocks)])?;
        modseqs
            .first()
            .copied()
            .ok_or_else(|| IndexError::Internal("no modseq for an insert".into()))
    }

    /// Adds (or replaces) many messages of one mailbox in one go (each cache segment is
    /// written once). Returns their modseqs in the order given.
    pub fn insert_messages(
        &mut self,
        mailbox: MailboxId,
        batch: Vec<(Uid, MessageRecord, Vec<u8>)>,
    ) -> Result<Vec<ModSeq>, IndexError> {
        let refs: Vec<_> = batch.iter().map(|(u, m, h)| (*u, m, &h[..])).collect();
        self.insert_message_refs(mailbox, &refs)
    }

    /// [`Writer::insert_messages`] of records the caller keeps: nothing of them is copied
    /// but the states (a group commit may run a write again after growing the map, so a
    /// caller cannot hand its records over; copying them was a tenth of a rebuild's
    /// commit, `perf record`, issue 19 #1).
    pub fn insert_message_refs(
        &mut self,
        mailbox: MailboxId,
        batch: &[(Uid, &MessageRecord, &[u8])],
    ) -> Result<Vec<ModSeq>, IndexError> {
        let mut mrec = self.reader().require_mailbox(mailbox)?;
        let learned = crate::learned::values_fn().filter(|_| !mrec.learned_headers.is_empty());
        let mut cache_items = Vec::with_capacity(batch.len());
        let mut header_items = Vec::with_capacity(batch.len());
        let mut modseqs = Vec::with_capacity(batch.len());
        let mut flag_items = Vec::with_capacity(batch.len());
        for &(uid, msg, header_blocks) in batch {
            if uid == Uid(0) {
                return Err(IndexError::Internal("UID 0 is not a valid UID".into()));
            }
            let old = self.reader().state(mailbox, uid)?;
            if let Some(old) = &old {
                uncount(&mut mrec, uid, old);
            }
            let mut state = msg.state.clone();
            let mut cached = std::borrow::Cow::Borrowed(&msg.cached);
            if let Some(values) = learned {
                crate::learned::complete(
                    cached.to_mut(),
                    header_blocks,
                    &mrec.learned_headers,
                    values,
                );
            }
            state.modseq = self.bump_modseq(&mut mrec);
            count(&mut mrec, uid, &state);
            mrec.uid_next = mrec.uid_next.max(uid.next());
            self.put_state(mailbox, uid, &state)?;
            flag_items.push((uid.get(), FlagState::of(&state)));
            let old_modseq = old.map(|o| o.modseq);
            changes::log_change(self.dbs, self.txn, mailbox, uid, old_modseq, state.modseq)?;
            modseqs.push(state.modseq);
            cache_items.push((uid.get(), cached));
            header_items.push((uid.get(), header_blocks));
        }
        // `put_many` keeps the later of a UID given twice, as `messages` does
        self.dbs
            .flag_column()
            .put_many(self.txn, mailbox.get(), flag_items)?;
        let cache_refs = cache_items.iter().map(|(u, c)| (*u, &**c)).collect();
        self.dbs
            .cache()
            .put_many(self.txn, mailbox.get(), cache_refs)?;
        self.dbs
            .headers()
            .put_many(self.txn, mailbox.get(), header_items)?;
        self.put_mailbox(mailbox, &mrec)?;
        Ok(modseqs)
    }

    /// Changes the flags, keywords and file name of a message (a rename in the Maildir).
    /// Returns the new modseq, or None when the message is not in the index.
    pub fn update_message(
        &mut self,
        mailbox: MailboxId,
        uid: Uid,
        flags: u8,
        keywords: u32,
        file_name: &str,
        in_new: bool,
    ) -> Result<Option<ModSeq>, IndexError> {
        let Some(mut state) = self.reader().state(mailbox, uid)? else {
            return Ok(None);
        };
        let mut mrec = self.reader().require_mailbox(mailbox)?;
        uncount(&mut mrec, uid, &state);
        let changed_flags = state.flags != flags || state.keywords != keywords;
        state.flags = flags;
        state.keywords = keywords;
        state.file_name = file_name.to_string();
        state.in_new = in_new;
        if changed_flags {
            let old = state.modseq;
            state.modseq = self.bump_modseq(&mut mrec);
            changes::log_change(self.dbs, self.txn, mailbox, uid, Some(old), state.modseq)?;
        }
        count(&mut mrec, uid, &state);
        self.put_state(mailbox, uid, &state)?;
        if changed_flags {
            self.dbs.flag_column().put_many(
                self.txn,
                mailbox.get(),
                [(uid.get(), FlagState::of(&state))],
            )?;
        }
        self.put_mailbox(mailbox, &mrec)?;
        Ok(Some(state.modseq))
    }

    /// Removes message `uid` (expunge). Returns its state if it was there.
    pub fn remove_message(
        &mut self,
        mailbox: MailboxId,
        uid: Uid,
    ) -> Result<Option<MessageState>, IndexError> {
        let Some(old) = self.reader().state(mailbox, uid)? else {
            return Ok(None);
        };
        let mut mrec = self.reader().require_mailbox(mailbox)?;
        uncount(&mut mrec, uid, &old);
        let at = self.bump_modseq(&mut mrec);
        changes::log_expunge(self.dbs, self.txn, mailbox, uid, old.modseq, at, &mut mrec)?;
        self.dbs
            .messages
            .delete(self.txn, &msg_key(mailbox, uid))
            .map_err(lmdb)?;
        self.dbs
            .flag_column()
            .remove(self.txn, mailbox.get(), uid.get())?;
        self.dbs
            .cache()
            .remove(self.txn, mailbox.get(), uid.get())?;
        self.dbs
            .headers()
            .remove(self.txn, mailbox.get(), uid.get())?;
        self.put_mailbox(mailbox, &mrec)?;
        Ok(Some(old))
    }

    /// Replaces the full-text record (encoded), its signature and its words of message
    /// `uid`, which must be indexed (`index check --repair`, `index rebuild --fts-only`):
    /// not a change a client sees, so no modseq.
    pub fn put_text(
        &mut self,
        mailbox: MailboxId,
        uid: Uid,
        stored: Vec<u8>,
        sig: Vec<u8>,
        words: &MessageWords,
    ) -> Result<bool, IndexError> {
        if self.reader().state(mailbox, uid)?.is_none() {
            return Ok(false);
        }
        let c = self.dbs.cache();
        let (mailbox, uid) = (mailbox.get(), uid.get());
        c.text.put_many(self.txn, mailbox, vec![(uid, stored)])?;
        c.sig.put_many(self.txn, mailbox, vec![(uid, sig)])?;
        self.dbs.words().put(self.txn, mailbox, &[(uid, words)])?;
        Ok(true)
    }

    /// Stores the full-text records (encoded), signatures and words of many messages of
    /// `mailbox`, those of them still indexed (a message expunged meanwhile gets none):
    /// the text written after the listing records (the background indexer, SEARCH,
    /// `index rebuild`). Each segment and each word's list is written once, and records
    /// above every stored one are appended as a delivery's are. Not a change a client
    /// sees, so no modseq. Returns how many were written.
    pub fn put_texts(
        &mut self,
        mailbox: MailboxId,
        items: &[(Uid, &[u8], &[u8], &MessageWords)],
    ) -> Result<usize, IndexError> {
        let n = items.len();
        let (mut text, mut sig, mut words) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for &(uid, t, s, w) in items {
            if self.reader().state(mailbox, uid)?.is_some() {
                text.push((uid.get(), t));
                sig.push((uid.get(), s));
                words.push((uid.get(), w));
            }
        }
        let n = text.len();
        let c = self.dbs.cache();
        c.text.put_many(self.txn, mailbox.get(), text)?;
        c.sig.put_many(self.txn, mailbox.get(), sig)?;
        self.dbs.words().put(self.txn, mailbox.get(), &words)?;
        Ok(n)
    }

    /// Removes the full-text record and signature of message `uid` (tests of `index
    /// check`).
    pub fn remove_text(&mut self, mailbox: MailboxId, uid: Uid) -> Result<bool, IndexError> {
        let (mailbox, uid) = (mailbox.get(), uid.get());
        self.dbs.words().uncover(self.txn, mailbox, &[uid])?;
        let sig = self.dbs.cache().sig.remove(self.txn, mailbox, uid)?;
        Ok(self.dbs.cache().text.remove(self.txn, mailbox, uid)? || sig)
    }

    /// Claims the `\Recent` messages for one session (RFC 3501 §2.3.2: a message is recent
    /// in exactly one session). Returns the range of UIDs that were recent.
    pub fn claim_recent(&mut self, mailbox: MailboxId) -> Result<std::ops::Range<Uid>, IndexError> {
        let mut mrec = self.reader().require_mailbox(mailbox)?;
        let claimed = mrec.first_recent_uid..mrec.uid_next;
        if claimed.is_empty() && mrec.counts.recent == 0 {
            // nothing to claim: leave the transaction clean (no commit, no wake-up)
            return Ok(claimed);
        }
        mrec.first_recent_uid = mrec.uid_next;
        mrec.counts.recent = 0;
        self.put_mailbox(mailbox, &mrec)?;
        Ok(claimed)
    }
}

/// Microseconds since the epoch: above any modseq an older index of this mailbox can have
/// given out, since that would take one change per microsecond since 1970.
pub(crate) fn modseq_floor() -> ModSeq {
    ModSeq(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_micros() as u64),
    )
}

/// A UID range as the segment code's bare numbers.
fn raw(uids: RangeInclusive<Uid>) -> RangeInclusive<u32> {
    uids.start().get()..=uids.end().get()
}

fn count(m: &mut MailboxRecord, uid: Uid, msg: &MessageState) {
    let first_recent = m.first_recent_uid;
    m.counts.add(uid, msg, first_recent);
}

fn uncount(m: &mut MailboxRecord, uid: Uid, msg: &MessageState) {
    let first_recent = m.first_recent_uid;
    m.counts.remove(uid, msg, first_recent);
}
