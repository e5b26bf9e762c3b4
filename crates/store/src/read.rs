//! The read side of the store: what an IMAP session asks of a mailbox, answered from the
//! index, with the Maildir layout kept inside the store.
//!
//! - [`UserStore::snapshot`]: a mailbox's state at SELECT, or what changed since a
//!   session's view (from the change log, not by listing the mailbox), with the `\Recent`
//!   claim (RFC 3501 §2.3.2) in the same transaction as the read.
//! - [`UserStore::load`]: a batch of messages' states, listing data and header blocks.
//! - [`UserStore::open_message`]: a message file, found again after another tool renamed it.
//!
//! A session holds a [`Mailbox`]: the index id and UIDVALIDITY it selected, which every
//! later read checks, so a mailbox deleted, renamed away or renumbered under it is noticed.

use std::ops::{ControlFlow, Range};
use std::path::{Path, PathBuf};

use maildex_index::{
    Cached, CachedFields, ChangeSet, FlagState, IndexError, MailboxRecord, MessageState, Reader,
    SortKeys, SortNeed,
};

use crate::{MailboxId, ModSeq, StoreError, Uid, UserStore};

/// A mailbox a session has opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mailbox {
    name: String,
    id: MailboxId,
    uidvalidity: u32,
}

impl Mailbox {
    /// Its name (UTF-8, INBOX canonical).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its index id.
    pub fn id(&self) -> MailboxId {
        self.id
    }

    /// Its UIDVALIDITY when it was opened.
    pub fn uidvalidity(&self) -> u32 {
        self.uidvalidity
    }
}

/// Whether a read first brings the index up to date with the Maildir.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncFirst {
    /// Sync (two `stat`s when nothing changed).
    Always,
    /// Sync unless this process synced the mailbox in the last seconds
    /// ([`UserStore::sync_mailbox_fast`]).
    Fast,
    /// Only the index (what this process's commits changed is there already).
    Never,
}

/// A session's view of a mailbox, to catch up from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Since {
    /// Messages the session believes exist (announced and not known expunged).
    pub messages: u32,
    /// The highest UID it announced.
    pub max_uid: Uid,
    /// The highest modseq whose changes it has been told.
    pub modseq: ModSeq,
}

/// What a [`UserStore::snapshot`] reads.
#[derive(Clone, Copy, Debug)]
pub struct SnapshotRequest {
    /// Sync with the Maildir first?
    pub sync: SyncFirst,
    /// Catch up from this view; `None` reads every UID (SELECT).
    pub since: Option<Since>,
    /// Claim the messages no session has claimed as `\Recent` (a read-write SELECT).
    pub claim_recent: bool,
    /// Find the first unseen message (SELECT's `[UNSEEN n]`).
    pub first_unseen: bool,
}

/// A mailbox as the index has it now.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The mailbox (its UIDVALIDITY now: a session compares it with its own).
    pub mailbox: Mailbox,
    /// UIDNEXT.
    pub uid_next: Uid,
    /// HIGHESTMODSEQ.
    pub highest_modseq: ModSeq,
    /// Messages now.
    pub messages: u32,
    /// The first UID no session has claimed as `\Recent` (the unclaimed run up to
    /// `uid_next`).
    pub first_recent_uid: Uid,
    /// Keyword names in dovecot-keywords letter order.
    pub keywords: Vec<String>,
    /// Every UID (without [`SnapshotRequest::since`]) or what changed since the view.
    pub contents: Contents,
    /// The first unseen message's UID, when asked for.
    pub first_unseen_uid: Option<Uid>,
    /// The UIDs this read claimed as `\Recent`, when it claimed.
    pub claimed: Option<Range<Uid>>,
}

impl Snapshot {
    /// Whether messages no session has claimed as `\Recent` exist.
    pub fn unclaimed(&self) -> bool {
        self.first_recent_uid < self.uid_next
    }

    /// The unclaimed UIDs from `from` on, if any.
    pub fn unclaimed_from(&self, from: Uid) -> Option<Range<Uid>> {
        let range = self.first_recent_uid.max(from)..self.uid_next;
        (!range.is_empty()).then_some(range)
    }
}

/// The messages of a [`Snapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Contents {
    /// Every UID, ascending.
    All(Vec<Uid>),
    /// What changed since a session's view, read from the change log.
    Changes(Changes),
}

/// What changed in a mailbox since a session's view ([`Since`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Messages above the view's highest UID, ascending.
    pub added: Vec<Uid>,
    /// Messages of the view whose flags changed, ascending UID, with their state now.
    pub changed: Vec<(Uid, MessageState)>,
    /// The view's messages that are gone.
    pub expunged: Expunged,
    /// Index records read to answer (what catching up cost).
    pub records_read: usize,
}

/// How a [`Changes`] names the expunged messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expunged {
    /// The UIDs expunged since the view's modseq, ascending (some may never have been in
    /// the view).
    Uids(Vec<Uid>),
    /// The change log no longer reaches back to the view (or disagrees with its count):
    /// every UID present now, ascending; the view's others are gone.
    Present(Vec<Uid>),
}

impl Default for Expunged {
    fn default() -> Self {
        Expunged::Uids(Vec::new())
    }
}

/// One message as the index has it, read for one command.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// Flags, sizes, dates, file name.
    pub state: MessageState,
    /// Listing data, when asked for. Boxed: a `Cached` is about 600 bytes (its sort and
    /// search keys among them), and a FETCH of FLAGS alone would otherwise carry that
    /// much empty space per message through every batch.
    pub cached: Option<Box<Cached>>,
    /// Raw header blocks, when asked for.
    pub headers: Option<Vec<u8>>,
}

/// What SORT and THREAD compare of one message: its keys as indexed, with the arrival date
/// and size from its state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SortEntry {
    /// The UID.
    pub uid: Uid,
    /// INTERNALDATE, seconds since the epoch (SORT ARRIVAL; DATE without a sent date).
    pub internal_date: i64,
    /// RFC822.SIZE (SORT SIZE).
    pub vsize: u64,
    /// The keys computed when the message was indexed.
    pub keys: SortKeys,
}

impl SortEntry {
    /// RFC 5256 §3 DATE: the sent date, or INTERNALDATE when the message has none.
    pub fn date(&self) -> i64 {
        self.keys.sent_date.unwrap_or(self.internal_date)
    }
}

/// Whether reading `n` UIDs from `first` to `last` is cheaper as one walk over the whole
/// range (skipping the UIDs not asked for) than as one lookup per UID: the choice of every
/// per-message column read (sort keys, search fields, texts, signatures).
pub(crate) fn walk_whole_range(first: Uid, last: Uid, n: usize) -> bool {
    u64::from(last.get() - first.get()) <= 4 * n as u64 + 64
}

/// [`walk_whole_range`] for the flags column, whose entries (about 12 bytes, up to 128 to a
/// value) a walk decodes for a few nanoseconds each, where a lookup of one finds its
/// value and decodes the entries before it: walked unless the UIDs are very sparse (a
/// `SEARCH SUBJECT`'s 1,873 hits of 30,265 looked up one by one were 3% of it).
fn walk_flag_range(first: Uid, last: Uid, n: usize) -> bool {
    u64::from(last.get() - first.get()) <= 128 * n as u64 + 1024
}

/// The position in `uids` (ascending) of each UID a walk in UID order meets, or `None`
/// for a UID not asked: one position moving forward, no search per message.
pub(crate) fn positions(uids: &[Uid]) -> impl FnMut(Uid) -> Option<usize> + '_ {
    let mut i = 0;
    move |uid| {
        while uids.get(i).is_some_and(|&u| u < uid) {
            i += 1;
        }
        (uids.get(i) == Some(&uid)).then_some(i)
    }
}

/// A message file opened for reading.
#[derive(Debug)]
pub struct MessageFile {
    /// The file (opened with `O_NOFOLLOW`, a regular file).
    pub file: std::fs::File,
    /// Where it is, for error messages.
    pub path: PathBuf,
}

impl UserStore {
    /// Mailbox `name` as the index has it (see [`SnapshotRequest`]); `None` when it does not
    /// exist. With `since`, what changed is read from the change log: the records of the
    /// changed messages and the expunge tombstones, not the mailbox's UID list, so a
    /// thousand IDLE sessions woken by one delivery each read a few keys.
    pub fn snapshot(
        &self,
        name: &str,
        req: &SnapshotRequest,
    ) -> Result<Option<Snapshot>, StoreError> {
        let synced = match req.sync {
            SyncFirst::Always => Some(self.sync_mailbox(name)),
            SyncFirst::Fast => Some(self.sync_mailbox_fast(name)),
            SyncFirst::Never => None,
        };
        match synced {
            Some(Err(StoreError::NoMailbox(_))) => return Ok(None),
            Some(Err(e)) => return Err(e),
            _ => {}
        }
        let name = Self::canonical(name).to_string();
        let snap = self.index.read(|r| match r.mailbox_id(&name)? {
            Some(id) => read_snapshot(r, name.clone(), id, req),
            None => Ok(None),
        })?;
        // claim \Recent only when there is something to claim: a write commit wakes every
        // IDLE session of the user, which must not answer with commits of its own
        let Some(id) = snap
            .as_ref()
            .filter(|s| req.claim_recent && s.unclaimed())
            .map(|s| s.mailbox.id)
        else {
            return Ok(snap);
        };
        // RFC 3501 §2.3.2: the claim and the read in one transaction, so that every message
        // a session is told of was claimed by it or by a session before it. Read after the
        // claim's commit, a message delivered in between was announced unclaimed and went
        // to whichever session claimed next, possibly one that had already announced it
        // without \Recent (found by tests/it/imap/concurrency.rs).
        let req = *req;
        let (claimed, snap) = self.index.write(move |w| {
            let claimed = w.claim_recent(id)?;
            let snap = read_snapshot(&w.reader(), name, id, &req)?;
            Ok((claimed, snap))
        })?;
        Ok(snap.map(|mut s| {
            s.claimed = Some(claimed);
            s
        }))
    }

    /// What changed in `mailbox` since `modseq` (QRESYNC, RFC 7162 §3.2.5; UID FETCH
    /// (CHANGEDSINCE m VANISHED), §3.2.6): the messages changed or added since, with their
    /// state now, and the UIDs expunged since (`None` when the tombstones no longer reach
    /// back that far), from the change log alone.
    pub fn changes_since(
        &self,
        mailbox: &Mailbox,
        modseq: ModSeq,
    ) -> Result<ChangeSet, StoreError> {
        let id = mailbox.id;
        Ok(self.index.read(|r| r.changes_since(id, modseq))?)
    }

    /// Mailbox `name`'s record after a sync with its Maildir (STATUS), `None` when it does
    /// not exist.
    pub fn mailbox_status(&self, name: &str) -> Result<Option<MailboxRecord>, StoreError> {
        match self.sync_mailbox(name) {
            Ok(_) => {}
            Err(StoreError::NoMailbox(_)) => return Ok(None),
            Err(e) => return Err(e),
        }
        Ok(self.indexed_mailbox(Self::canonical(name))?.map(|(_, m)| m))
    }

    /// Reads messages `uids` (ascending) of `mailbox` in one read transaction: states, and
    /// the `fields` of the listing data and the header blocks when asked. Dense batches
    /// walk each database once over the UID range, so every compressed segment is decoded
    /// once, not once per message; sparse ones look each UID up. `None` for a UID that is
    /// gone.
    pub fn load(
        &self,
        mailbox: &Mailbox,
        uids: &[Uid],
        fields: CachedFields,
        headers: bool,
    ) -> Result<Vec<Option<Loaded>>, StoreError> {
        Ok(self
            .index
            .read(|r| load_batch(r, mailbox.id, uids, fields, headers, true))?)
    }

    /// [`UserStore::load`] without the states (left default): for a caller that has them
    /// already and wants more of the same messages (SEARCH's later stages). `None` for a
    /// UID that is gone.
    pub fn load_more(
        &self,
        mailbox: &Mailbox,
        uids: &[Uid],
        fields: CachedFields,
        headers: bool,
    ) -> Result<Vec<Option<Loaded>>, StoreError> {
        Ok(self
            .index
            .read(|r| load_batch(r, mailbox.id, uids, fields, headers, false))?)
    }

    /// The sort and thread keys of messages `uids` (ascending) of `mailbox`, read from the
    /// index alone (its `cache-sort` column and the states): no message file is opened and
    /// no header parsed. A UID that is gone is left out. A dense set (a SORT of the whole
    /// mailbox) walks the two databases once over the UID range, decoding nothing else, and
    /// of the keys only what `need` asks for (nothing for ARRIVAL and SIZE, the sent date
    /// for DATE); a sparse one reads each message whole.
    pub fn sort_keys(
        &self,
        mailbox: &Mailbox,
        uids: &[Uid],
        need: SortNeed,
    ) -> Result<Vec<SortEntry>, StoreError> {
        let (Some(&first), Some(&last)) = (uids.first(), uids.last()) else {
            return Ok(Vec::new());
        };
        if walk_whole_range(first, last, uids.len()) {
            let id = mailbox.id;
            let wanted = |uid: Uid| uids.binary_search(&uid).is_ok();
            return Ok(self.index.read(|r| {
                let mut out: Vec<SortEntry> = Vec::with_capacity(uids.len());
                r.for_each_state(id, first..=last, |uid, state| {
                    if wanted(uid) {
                        out.push(SortEntry {
                            uid,
                            internal_date: state.internal_date,
                            vsize: state.vsize,
                            keys: SortKeys::default(),
                        });
                    }
                    Ok(ControlFlow::Continue(()))
                })?;
                if need == SortNeed::NOTHING {
                    return Ok(out);
                }
                let mut at = 0;
                r.for_each_sort_keys(id, first..=last, need, wanted, |uid, keys| {
                    while at < out.len() && out[at].uid < uid {
                        at += 1;
                    }
                    if let Some(e) = out.get_mut(at).filter(|e| e.uid == uid) {
                        e.keys = keys;
                    }
                })?;
                Ok(out)
            })?);
        }
        let fields = CachedFields {
            sort: true,
            ..CachedFields::default()
        };
        Ok(self
            .load(mailbox, uids, fields, false)?
            .into_iter()
            .zip(uids)
            .filter_map(|(m, &uid)| {
                let m = m?;
                Some(SortEntry {
                    uid,
                    internal_date: m.state.internal_date,
                    vsize: m.state.vsize,
                    keys: m.cached.map(|c| c.sort).unwrap_or_default(),
                })
            })
            .collect())
    }

    /// Calls `f` with the position in `uids` (ascending) and the flags, keywords, modseq,
    /// RFC822.SIZE and INTERNALDATE of each of those messages of `mailbox`, from the
    /// index's flags column, in one read transaction: what SEARCH's keys on the state read
    /// (`UNSEEN`, `FLAGGED`, `KEYWORD`, `MODSEQ`, `LARGER`, `SINCE`...), and the hits' modseqs.
    /// A UID that is gone is skipped.
    pub fn visit_flags(
        &self,
        mailbox: &Mailbox,
        uids: &[Uid],
        mut f: impl FnMut(usize, FlagState),
    ) -> Result<(), StoreError> {
        let (Some(&first), Some(&last)) = (uids.first(), uids.last()) else {
            return Ok(());
        };
        let id = mailbox.id;
        Ok(self.index.read(|r| {
            if walk_flag_range(first, last, uids.len()) {
                let mut at = positions(uids);
                r.for_each_flags(id, first..=last, |uid, st| {
                    if let Some(i) = at(uid) {
                        f(i, st);
                    }
                    Ok(ControlFlow::Continue(()))
                })
            } else {
                for (i, &uid) in uids.iter().enumerate() {
                    if let Some(st) = r.flags_of(id, uid)? {
                        f(i, st);
                    }
                }
                Ok(())
            }
        })?)
    }

    /// Calls `f` with the position in `uids` (ascending) and the stored search fields of
    /// each of those messages of `mailbox` ([`maildex_index::SearchView::parse`] reads
    /// them), in one read transaction, read in place: SEARCH FROM/TO/CC/BCC/SUBJECT and
    /// SENT* over a whole mailbox allocate nothing per message. A UID that is gone is
    /// skipped.
    pub fn visit_search_fields(
        &self,
        mailbox: &Mailbox,
        uids: &[Uid],
        mut f: impl FnMut(usize, &[u8]),
    ) -> Result<(), StoreError> {
        let (Some(&first), Some(&last)) = (uids.first(), uids.last()) else {
            return Ok(());
        };
        let id = mailbox.id;
        Ok(self.index.read(|r| {
            if walk_whole_range(first, last, uids.len()) {
                let mut at = positions(uids);
                r.for_each_search(id, first..=last, |uid, raw| {
                    if let Some(i) = at(uid) {
                        f(i, raw);
                    }
                    Ok(ControlFlow::Continue(()))
                })
            } else {
                for (i, &uid) in uids.iter().enumerate() {
                    if let Some(raw) = r.search_fields(id, uid)? {
                        f(i, raw);
                    }
                }
                Ok(())
            }
        })?)
    }

    /// Opens the file of message `uid` of `mailbox`, whose index state is `state`. When the
    /// file is not where the index says (a STORE or another Maildir tool renamed it, giving
    /// it new flags), it is found by its base where it is now; when no file has its base,
    /// the mailbox is synced (so the index learns it is gone) and the message looked up
    /// again. `None` when it is gone. Links and other non-regular files are refused
    /// (issue 15 #2).
    pub fn open_message(
        &self,
        mailbox: &Mailbox,
        uid: Uid,
        state: &MessageState,
    ) -> Result<Option<MessageFile>, StoreError> {
        let dir = self.mailbox_path(&mailbox.name)?;
        if let Some(f) = self.open_state(&dir, mailbox.id, uid, state)? {
            return Ok(Some(f));
        }
        self.sync_mailbox(&mailbox.name)?;
        let id = mailbox.id;
        let Some(state) = self.index.read(|r| r.state(id, uid))? else {
            return Ok(None);
        };
        open_at(&dir, &state)
    }

    /// The file of message `uid` of mailbox `id` (folder `dir`) whose index state was
    /// `state`: where the state says, else where its base is now ([`open_at`]). When no
    /// file has its base, the index is asked again, at most twice: a STORE renames before
    /// it commits the new name, and a listing may miss a file renamed while it reads the
    /// folder, so the name committed since is tried. `None` when the index no longer has
    /// the message or names the same file again.
    pub(crate) fn open_state(
        &self,
        dir: &Path,
        id: MailboxId,
        uid: Uid,
        state: &MessageState,
    ) -> Result<Option<MessageFile>, StoreError> {
        if let Some(f) = open_at(dir, state)? {
            return Ok(Some(f));
        }
        let mut tried = state.file_name.clone();
        for _ in 0..2 {
            let Some(now) = self.index.read(|r| r.state(id, uid))? else {
                return Ok(None);
            };
            if now.file_name == tried {
                return Ok(None);
            }
            if let Some(f) = open_at(dir, &now)? {
                return Ok(Some(f));
            }
            tried = now.file_name;
        }
        Ok(None)
    }

    /// The whole file of message `uid`, whose index state is `state` (found as
    /// [`UserStore::open_message`] finds it, without the sync); `None` when it cannot be
    /// read: gone, or refused or unreadable (logged).
    pub fn read_message(
        &self,
        mailbox: &Mailbox,
        uid: Uid,
        state: &MessageState,
    ) -> Option<Vec<u8>> {
        let dir = self.mailbox_path(&mailbox.name).ok()?;
        let mut f = match self.open_state(&dir, mailbox.id, uid, state) {
            Ok(f) => f?,
            Err(e) => {
                tracing::warn!(error = %e, "message file unreadable");
                return None;
            }
        };
        let mut bytes = Vec::with_capacity(usize::try_from(state.size).unwrap_or(0));
        if let Err(e) = std::io::Read::read_to_end(&mut f.file, &mut bytes) {
            tracing::warn!(path = %f.path.display(), error = %e, "message file unreadable");
            return None;
        }
        Some(bytes)
    }
}

/// The message file `state` names in mailbox folder `dir`, followed by its base when it
/// was renamed meanwhile ([`maildex_maildir::transfer::open_found`]); `None` when no file
/// has its base.
pub(crate) fn open_at(dir: &Path, state: &MessageState) -> Result<Option<MessageFile>, StoreError> {
    let sub = if state.in_new {
        maildex_maildir::Sub::New
    } else {
        maildex_maildir::Sub::Cur
    };
    match maildex_maildir::transfer::open_found(dir, sub, &state.file_name) {
        Ok(found) => Ok(found.map(|(file, path)| MessageFile { file, path })),
        Err(maildex_maildir::MaildirError::Io { path, error, .. }) => {
            Err(StoreError::Io { path, error })
        }
        Err(e) => Err(e.into()),
    }
}

/// What [`UserStore::snapshot`] reads of mailbox `id`, in one transaction.
fn read_snapshot(
    r: &Reader<'_>,
    name: String,
    id: MailboxId,
    req: &SnapshotRequest,
) -> Result<Option<Snapshot>, IndexError> {
    let Some(m) = r.mailbox(id)? else {
        return Ok(None);
    };
    let contents = match req.since {
        None => Contents::All(r.uids(id)?),
        Some(since) => Contents::Changes(changes(r, id, &m, since)?),
    };
    let mut first_unseen_uid = None;
    if req.first_unseen && m.counts.unseen > 0 {
        r.for_each_flags(id, Uid::MIN..=Uid::MAX, |uid, st| {
            if st.is_unseen() {
                first_unseen_uid = Some(uid);
                return Ok(ControlFlow::Break(()));
            }
            Ok(ControlFlow::Continue(()))
        })?;
    }
    Ok(Some(Snapshot {
        mailbox: Mailbox {
            name,
            id,
            uidvalidity: m.uidvalidity,
        },
        uid_next: m.uid_next,
        highest_modseq: m.highest_modseq,
        messages: m.counts.messages,
        first_recent_uid: m.first_recent_uid,
        keywords: m.keywords,
        contents,
        first_unseen_uid,
        claimed: None,
    }))
}

/// What changed in mailbox `id` (record `m`) since a view, from the change log.
fn changes(
    r: &Reader<'_>,
    id: MailboxId,
    m: &MailboxRecord,
    since: Since,
) -> Result<Changes, IndexError> {
    let log = r.changes_since(id, since.modseq)?;
    let mut out = Changes {
        records_read: log.records_read,
        ..Changes::default()
    };
    for (uid, state) in log.changed {
        if uid > since.max_uid {
            out.added.push(uid);
        } else {
            out.changed.push((uid, state));
        }
    }
    // The view's count, plus what was added, less what was expunged of it, is the
    // mailbox's count, unless the log no longer reaches back or the view missed something
    // (a message indexed below its highest UID): then every UID present, as before the log.
    let consistent = log.expunged.as_ref().is_some_and(|gone| {
        let gone_of_view = gone.iter().filter(|&&u| u <= since.max_uid).count();
        let expected = (since.messages as usize + out.added.len()).checked_sub(gone_of_view);
        expected == Some(m.counts.messages as usize)
    });
    out.expunged = match log.expunged {
        Some(gone) if consistent => Expunged::Uids(gone),
        _ => {
            let all = r.uids(id)?;
            out.records_read += all.len();
            Expunged::Present(all)
        }
    };
    Ok(out)
}

/// [`UserStore::load`] in a read transaction (the states left default without `states`).
pub(crate) fn load_batch(
    r: &Reader<'_>,
    id: MailboxId,
    uids: &[Uid],
    fields: CachedFields,
    headers: bool,
    states: bool,
) -> Result<Vec<Option<Loaded>>, IndexError> {
    let cached = fields.any();
    let (Some(&first), Some(&last)) = (uids.first(), uids.last()) else {
        return Ok(Vec::new());
    };
    let mut out: Vec<Option<Loaded>> = (0..uids.len()).map(|_| None).collect();
    // A segment holds 16 messages or more (up to 64 where they fill its pages): walking
    // the range decodes each segment once, looking UIDs up decodes one per UID, so the
    // walk is cheaper down to at least one UID in 16.
    let dense = u64::from(last.get() - first.get()) <= 16 * uids.len() as u64 + 64;
    if !dense {
        for (slot, &uid) in out.iter_mut().zip(uids) {
            let state = if states {
                let Some(state) = r.state(id, uid)? else {
                    continue;
                };
                state
            } else {
                MessageState::default()
            };
            *slot = Some(Loaded {
                state,
                cached: if cached {
                    r.cached_fields(id, uid, fields)?.map(Box::new)
                } else {
                    None
                },
                headers: if headers { r.headers(id, uid)? } else { None },
            });
        }
        return Ok(out);
    }
    let slot = |uid: Uid| uids.binary_search(&uid).ok();
    if states {
        r.for_each_state(id, first..=last, |uid, state| {
            if let Some(i) = slot(uid) {
                out[i] = Some(Loaded {
                    state,
                    cached: None,
                    headers: None,
                });
            }
            Ok(ControlFlow::Continue(()))
        })?;
    } else {
        // the data decides what is there
        out.iter_mut().for_each(|o| {
            *o = Some(Loaded {
                state: MessageState::default(),
                cached: None,
                headers: None,
            })
        });
    }
    if cached {
        r.for_each_cached(id, first..=last, fields, |uid, c| {
            if let Some(Some(m)) = slot(uid).map(|i| out[i].as_mut()) {
                m.cached = Some(c);
            }
            Ok(ControlFlow::Continue(()))
        })?;
    }
    if headers {
        r.for_each_headers(id, first..=last, |uid, h| {
            if let Some(Some(m)) = slot(uid).map(|i| out[i].as_mut()) {
                m.headers = Some(h);
            }
            Ok(ControlFlow::Continue(()))
        })?;
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A FETCH of flags alone carries one `Loaded` per message through every batch: the
    /// cached record (about 600 bytes) stays out of it unless asked for.
    #[test]
    fn a_loaded_message_without_cached_data_stays_small() {
        let size = std::mem::size_of::<Loaded>();
        assert!(size <= 128, "Loaded is {size} bytes");
    }
    use crate::{DeliverOptions, FlagOp, StoreOptions};

    /// A store on `dir` without fsync (the store's unit tests share it).
    pub(crate) fn store(dir: &Path) -> UserStore {
        let opts = StoreOptions {
            fsync: false,
            ..StoreOptions::default()
        };
        UserStore::open(&dir.join("mail"), &dir.join("index"), opts).unwrap()
    }

    fn deliver(s: &UserStore, n: usize) -> Vec<Uid> {
        (0..n)
            .map(|i| {
                let msg = format!("Subject: m{i}\r\nMessage-ID: <{i}@x>\r\n\r\nbody {i}\r\n");
                let opts = DeliverOptions::default();
                s.deliver("INBOX", &mut msg.as_bytes(), &opts).unwrap().uid
            })
            .collect()
    }

    fn select(s: &UserStore) -> Snapshot {
        let req = SnapshotRequest {
            sync: SyncFirst::Always,
            since: None,
            claim_recent: true,
            first_unseen: true,
        };
        s.snapshot("inbox", &req).unwrap().expect("INBOX")
    }

    fn catch_up(s: &UserStore, since: Since) -> (Snapshot, Changes) {
        let req = SnapshotRequest {
            sync: SyncFirst::Never,
            since: Some(since),
            claim_recent: false,
            first_unseen: false,
        };
        let snap = s.snapshot("INBOX", &req).unwrap().expect("INBOX");
        match &snap.contents {
            Contents::Changes(c) => {
                let c = c.clone();
                (snap, c)
            }
            Contents::All(_) => panic!("a catch-up read every UID"),
        }
    }

    /// What a woken session reads after one flag change, one expunge and one delivery:
    /// the same few records in a mailbox of 50 messages as in one of 2,000 (issue 16: an
    /// IDLE session's cost per delivery does not grow with the mailbox).
    #[test]
    fn a_catch_up_reads_the_changes_not_the_mailbox() {
        let mut cost = Vec::new();
        for size in [50, 2_000] {
            let dir = tempfile::tempdir().unwrap();
            let s = store(dir.path());
            let uids = deliver(&s, size);
            let sel = select(&s);
            assert_eq!(sel.contents, Contents::All(uids.clone()));
            assert_eq!(sel.claimed, Some(Uid(1)..Uid(size as u32 + 1)));
            let since = Since {
                messages: size as u32,
                max_uid: *uids.last().unwrap(),
                modseq: sel.highest_modseq,
            };
            let (flagged, gone) = (uids[7], uids[9]);
            s.set_flags(
                "INBOX",
                &[flagged],
                FlagOp::Add,
                crate::Flags::FLAGGED,
                &[],
                None,
            )
            .unwrap();
            s.set_flags(
                "INBOX",
                &[gone],
                FlagOp::Add,
                crate::Flags::DELETED,
                &[],
                None,
            )
            .unwrap();
            s.expunge("INBOX", Some(&[gone])).unwrap();
            let new = deliver(&s, 1)[0];
            let (snap, changes) = catch_up(&s, since);
            assert_eq!(changes.added, vec![new]);
            assert_eq!(
                changes.changed.iter().map(|(u, _)| *u).collect::<Vec<_>>(),
                vec![flagged]
            );
            assert_eq!(changes.expunged, Expunged::Uids(vec![gone]));
            assert_eq!(snap.messages, size as u32);
            assert_eq!(snap.mailbox, sel.mailbox);
            cost.push(changes.records_read);
            // nothing since: nothing read
            let (_, none) = catch_up(
                &s,
                Since {
                    messages: size as u32,
                    max_uid: new,
                    modseq: snap.highest_modseq,
                },
            );
            assert_eq!(none, Changes::default());
        }
        assert_eq!(cost[0], cost[1], "records read: {cost:?}");
        assert!(cost[0] <= 6, "records read: {cost:?}");
    }

    /// A view whose count disagrees with the log (it missed something) gets every UID.
    #[test]
    fn a_view_that_disagrees_with_the_log_gets_every_uid() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        let uids = deliver(&s, 5);
        let sel = select(&s);
        let (_, changes) = catch_up(
            &s,
            Since {
                messages: 4,
                max_uid: uids[4],
                modseq: sel.highest_modseq,
            },
        );
        assert_eq!(changes.expunged, Expunged::Present(uids));
    }

    /// A message whose file another tool renamed (new flags) is opened where it is now.
    #[test]
    fn open_message_follows_a_rename_by_another_tool() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        let uid = deliver(&s, 1)[0];
        let sel = select(&s);
        let loaded = s
            .load(&sel.mailbox, &[uid], CachedFields::default(), false)
            .unwrap();
        let state = loaded[0].as_ref().expect("loaded").state.clone();
        let new = dir.path().join("mail/new").join(&state.file_name);
        let cur = dir
            .path()
            .join("mail/cur")
            .join(format!("{}:2,S", state.file_name));
        std::fs::rename(&new, &cur).unwrap();
        let f = s
            .open_message(&sel.mailbox, uid, &state)
            .unwrap()
            .expect("found");
        assert_eq!(f.path, cur);
        std::fs::remove_file(&cur).unwrap();
        assert!(s.open_message(&sel.mailbox, uid, &state).unwrap().is_none());
        assert_eq!(s.read_message(&sel.mailbox, uid, &state), None);
    }
}
