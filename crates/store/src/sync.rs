//! Bringing the index up to date with the Maildir.
//!
//! An unchanged mailbox costs two directory `stat`s and one of dovecot-uidlist: when the
//! stamps of `new/`, `cur/` and the uidlist equal those stored at the last sync (and are
//! more than a second old, so a change within the same timestamp tick cannot hide), nothing
//! is read. Otherwise the folders are listed and compared with the index: files added by
//! another tool are parsed and indexed, files gone are removed, files renamed (new flags, or
//! moved from `new/` to `cur/`) get their flags updated.
//!
//! When only renames happened (every flag change, by maildex or another tool, leaves `cur/`
//! changed, so this is the rescan of nearly every SELECT on a busy folder) and
//! dovecot-uidlist is unchanged since the last complete sync, the index vouches for the
//! UIDs: the list is neither locked nor read, and listing and index are matched by base
//! name (`vouched_diff`). A file the index lacks, a message whose file is gone or a changed
//! list go through the list as before.
//!
//! A mailbox in use is watched (`sync_watch.rs`): when only this process's own writes,
//! all in the index, changed its folders since the last complete sync, nothing is listed
//! even though the stamps moved.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use maildex_index::{Built, IndexError, MailboxRecord, MessageState, Reader, Stamp, Writer};
use maildex_maildir::filename::base_of;
use maildex_maildir::keywords::KeywordMap;
use maildex_maildir::{deliver, folder, scan, uidlist, Entry, Sub};

use crate::convert::{self, file_stamp, flag_bits, stamp};
use crate::sync_watch;
use crate::uids::{self, Known};
use crate::{MailboxId, Uid};
use crate::{StoreError, UserStore};

/// What a sync did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Mailboxes looked at.
    pub mailboxes: usize,
    /// Mailboxes whose stamps showed no change (nothing read).
    pub unchanged: usize,
    /// Messages indexed.
    pub added: usize,
    /// Messages whose flags or file name changed.
    pub updated: usize,
    /// Messages removed from the index (their files are gone).
    pub removed: usize,
    /// Files that could not be read (not indexed; their UIDs are kept in dovecot-uidlist).
    pub unreadable: Vec<PathBuf>,
    /// Names in `new/`/`cur/` that are not Maildir message names (left alone).
    pub bad_names: Vec<PathBuf>,
    /// Mailboxes whose UIDVALIDITY changed (another tool renumbered them).
    pub uidvalidity_changed: Vec<String>,
    /// Mailboxes dropped from the index because their folder is gone.
    pub deleted_mailboxes: Vec<String>,
    /// Files removed from `tmp/` folders: left by a crashed writer (see
    /// [`UserStore::sync_all`]).
    pub tmp_removed: usize,
}

impl SyncReport {
    pub(crate) fn merge(&mut self, o: SyncReport) {
        self.mailboxes += o.mailboxes;
        self.unchanged += o.unchanged;
        self.added += o.added;
        self.updated += o.updated;
        self.removed += o.removed;
        self.unreadable.extend(o.unreadable);
        self.bad_names.extend(o.bad_names);
        self.uidvalidity_changed.extend(o.uidvalidity_changed);
        self.deleted_mailboxes.extend(o.deleted_mailboxes);
        self.tmp_removed += o.tmp_removed;
    }
}

/// Messages parsed per write transaction when many are new (first start, rebuild).
const BATCH: usize = 256;
/// Full passes before giving up on a Maildir that keeps changing under us.
const PASSES: usize = 4;
/// How long after a sync [`UserStore::sync_mailbox_fast`] skips the Maildir: Dovecot's
/// `MAILBOX_FULL_SYNC_INTERVAL` (src/lib-storage/index/index-storage.h), 5 s.
pub const FAST_SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

type Update = (u32, String, bool, u8, u32);

impl UserStore {
    /// Syncs every mailbox on disk, drops from the index mailboxes whose folder is gone,
    /// and removes from each `tmp/` what crashed writers left there
    /// ([`deliver::clean_stale_tmp`]: files of a dead pid of this host, or older than
    /// 36 h as Dovecot). `maildex serve` runs this at each user's first use after its
    /// start, so a crash of the daemon (or of a `maildex deliver`) leaves no temporary file
    /// behind once the user is served again; the per-mailbox sync of sessions does not read `tmp/` (it stays at two
    /// `stat`s when nothing changed).
    pub fn sync_all(&self) -> Result<SyncReport, StoreError> {
        let folders = folder::list_folders(&self.root)?;
        let mut report = SyncReport::default();
        for f in &folders {
            // not watched for that (sync_watch.rs): only mailboxes in use are
            report.merge(self.sync_mailbox_with(&f.name, false, false)?);
            // a folder without tmp/ (another tool's) or an unreadable one must not stop
            // the sync: the leftovers wait for the next one
            match deliver::clean_stale_tmp(&f.path) {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(mailbox = %f.name, files = n, "removed files left in tmp/ by a crashed writer");
                    report.tmp_removed += n;
                }
                Err(e) => tracing::warn!(mailbox = %f.name, error = %e, "could not clean tmp/"),
            }
        }
        let on_disk: HashSet<&str> = folders.iter().map(|f| f.name.as_str()).collect();
        let gone: Vec<(MailboxId, String)> = self.index.read(|r| {
            Ok(r.mailboxes()?
                .into_iter()
                .filter(|(_, m)| !on_disk.contains(m.name.as_str()))
                .map(|(id, m)| (id, m.name))
                .collect())
        })?;
        for (id, name) in gone {
            // it may have been created (and synced by someone else) since the listing
            let lock = self.mailbox_lock(&name);
            let _serial = lock.hold();
            if self.mailbox_exists(&name).unwrap_or(false) {
                continue;
            }
            tracing::info!(mailbox = %name, "folder gone from the Maildir; dropping it from the index");
            self.index.write(move |w| w.delete_mailbox(id))?;
            report.deleted_mailboxes.push(name);
        }
        Ok(report)
    }

    /// Syncs one mailbox (see the module docs).
    pub fn sync_mailbox(&self, name: &str) -> Result<SyncReport, StoreError> {
        self.sync_mailbox_with(name, false, true)
    }

    /// As [`UserStore::sync_mailbox`], unless a sync of `name` by this process began less
    /// than [`FAST_SYNC_INTERVAL`] ago: then nothing is looked at and no lock is taken.
    /// For the commands after which Dovecot syncs with `MAILBOX_SYNC_FLAG_FAST` (FETCH,
    /// STORE, SEARCH, COPY; maildex adds APPEND, MOVE and EXPUNGE): every change made through maildex (this process or
    /// another, LMDB being shared) is in the index already, and only another tool's change
    /// to the files needs the Maildir, which NOOP, CHECK, IDLE, STATUS and SELECT still
    /// look at every time. Without it, each command under load listed the folders: every
    /// flag change leaves `cur/` unsettled for a second (see the module docs), so the sync
    /// of every command of every session re-read the whole folder while holding the
    /// mailbox against other sessions' writes (issue 15 item 22).
    pub fn sync_mailbox_fast(&self, name: &str) -> Result<SyncReport, StoreError> {
        let lock = self.mailbox_lock(Self::canonical(name));
        let recent = lock
            .last_look
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|t| t.elapsed() < FAST_SYNC_INTERVAL);
        if recent {
            return Ok(SyncReport {
                mailboxes: 1,
                unchanged: 1,
                ..SyncReport::default()
            });
        }
        self.sync_mailbox(name)
    }

    /// As [`UserStore::sync_mailbox`]; `force` ignores the stamps and lists the folders;
    /// `watch` has the folder watched from now on if it is not (see sync_watch.rs: for
    /// a mailbox in use, not for every mailbox a start-up sync or a rebuild goes through).
    pub(crate) fn sync_mailbox_with(
        &self,
        name: &str,
        force: bool,
        watch: bool,
    ) -> Result<SyncReport, StoreError> {
        use std::sync::atomic::Ordering::SeqCst;
        let name = Self::canonical(name).to_string();
        let path = self.mailbox_path(&name)?;
        let lock = self.mailbox_lock(&name);
        // Syncs that began before this call may have missed what it must see; one that
        // began after it looked at the folders later than any change the caller knows of.
        let arrived = lock.syncs_begun.load(SeqCst);
        let _serial = lock.hold();
        let mut report = SyncReport {
            mailboxes: 1,
            ..SyncReport::default()
        };
        if !force && lock.last_synced.load(SeqCst) > arrived {
            // Such a sync completed while we waited: reuse it. When a delivery wakes the
            // hundreds of IDLE sessions on one mailbox, one of them lists the folders (a
            // new file keeps the folder unsettled for a second, so each would list them)
            // and the others return here.
            report.unchanged += 1;
            return Ok(report);
        }
        let number = lock.syncs_begun.fetch_add(1, SeqCst) + 1;
        let began = std::time::Instant::now();
        for _ in 0..PASSES {
            let passed = match self.sync_pass(&name, &path, force, watch, &mut report) {
                Err(e @ StoreError::NoMailbox(_)) => {
                    self.forget_lock(&name);
                    return Err(e);
                }
                other => other?,
            };
            if passed {
                lock.last_synced.store(number, SeqCst);
                *lock.last_look.lock().unwrap_or_else(|p| p.into_inner()) = Some(began);
                self.keep_lock(&name, &lock);
                return Ok(report);
            }
        }
        Err(StoreError::Busy(name))
    }

    /// What the index knows of a mailbox's UIDs, read now (see [`uids::Known`]).
    fn known_uids(&self, name: &str) -> Result<Option<Known>, StoreError> {
        let Some((id, m)) = self.indexed_mailbox(name)? else {
            return Ok(None);
        };
        let files: Vec<(u32, String)> = self.index.read(|r| {
            Ok(r.states(id)?
                .into_iter()
                .map(|(u, h)| (u.get(), h.file_name))
                .collect())
        })?;
        let max = files.iter().map(|(u, _)| *u).max().unwrap_or(0);
        Ok(Some(Known {
            uidvalidity: m.uidvalidity,
            uid_next: m.uid_next.get().max(max.saturating_add(1)),
            files,
        }))
    }

    /// The id and record of mailbox `name` in the index, if it is there.
    pub(crate) fn indexed_mailbox(
        &self,
        name: &str,
    ) -> Result<Option<(MailboxId, MailboxRecord)>, StoreError> {
        Ok(self.index.read(|r| match r.mailbox_id(name)? {
            Some(id) => Ok(r.mailbox(id)?.map(|m| (id, m))),
            None => Ok(None),
        })?)
    }

    /// One pass; false when files vanished while we read them (another pass is needed).
    /// The folder stamps are stored only when the pass saw everything (nothing unreadable,
    /// no removal left for later), so that otherwise the next sync looks again.
    fn sync_pass(
        &self,
        name: &str,
        path: &Path,
        force: bool,
        watch: bool,
        report: &mut SyncReport,
    ) -> Result<bool, StoreError> {
        let stamps = || {
            scan::stamps(path).map_err(|e| {
                if e.is_not_found() {
                    StoreError::NoMailbox(name.to_string())
                } else {
                    e.into()
                }
            })
        };
        let (new, cur) = stamps()?;
        // the folder's watch, read empty (see sync_watch.rs); the mailbox is held
        // exclusively, so every write of this process to it is confirmed by now
        let look = sync_watch::look(path, [new.ino, cur.ino], watch);
        let uidlist_path = path.join(uidlist::UIDLIST_NAME);
        let existing = self.indexed_mailbox(name)?;
        let uidlist_now = file_stamp(&uidlist_path)?;
        if let Some((_, m)) = existing.as_ref().filter(|_| !force) {
            // Only this process's writes, all in the index, changed new/ and cur/ since
            // the last complete sync; dovecot-uidlist has the stamp that sync stored
            // (every UID given since, by anyone, changed it).
            if look == sync_watch::Look::Clean
                && m.uidlist_stamp != Stamp::default()
                && m.uidlist_stamp == uidlist_now
            {
                report.unchanged += 1;
                return Ok(true);
            }
            // stat'ed again after the look: with the folder watched since before this
            // stat, stamps that vouch for the index are a baseline for the watch. When
            // the watch saw another process's change since its baseline, the folder is
            // listed whatever the stamps say (the change may be in the stamps' tick).
            let (new, cur) = stamps()?;
            let now = SystemTime::now();
            let same = m.new_stamp == stamp(new)
                && m.cur_stamp == stamp(cur)
                && m.uidlist_stamp == uidlist_now;
            if look != sync_watch::Look::Changed
                && same
                && new.is_settled(now)
                && cur.is_settled(now)
            {
                sync_watch::settled(path);
                report.unchanged += 1;
                return Ok(true);
            }
        }
        sync_watch::listed(path);

        // The index is read before the folders are listed: a delivery renames its file
        // before it commits the index, so whatever the index holds now has its file on disk
        // in time for the listing, and "indexed but not listed" really means gone.
        let heads = match &existing {
            Some((id, _)) => self.index.read(|r| Indexed::read(r, *id))?,
            None => Indexed::default(),
        };
        let listing = scan::scan_unsorted(path)?;
        for bad in &listing.bad_names {
            tracing::warn!(file = %bad.display(), "not a Maildir message name; left alone");
        }
        report.bad_names.extend(listing.bad_names.iter().cloned());

        // dovecot-uidlist unchanged since a complete sync: the index holds its UIDs (see
        // `vouched_diff`)
        let vouched = existing
            .as_ref()
            .filter(|(_, m)| {
                !force && m.uidlist_stamp != Stamp::default() && m.uidlist_stamp == uidlist_now
            })
            .and_then(|(_, m)| Some((m, vouched_diff(&listing.entries, &heads)?)));
        let Plan {
            uidvalidity,
            next_uid,
            uidlist_stamp,
            mut to_add,
            to_update,
            to_remove,
            mut complete,
        } = match vouched {
            Some((m, to_update)) => Plan {
                uidvalidity: m.uidvalidity,
                next_uid: m.uid_next.get(),
                uidlist_stamp: uidlist_now,
                to_add: Vec::new(),
                to_update,
                to_remove: Vec::new(),
                complete: true,
            },
            None => self.full_diff(name, path, &listing, existing.as_ref(), &heads, report)?,
        };
        // parsed and inserted in UID order (the listing is in directory order)
        to_add.sort_unstable_by_key(|(uid, _)| *uid);
        let keywords = keyword_names(path)?;
        let mut again = false;
        report.removed += to_remove.len();
        report.updated += to_update.len();

        let owned_name = name.to_string();
        let settle = |complete: bool| Settle {
            next_uid,
            keywords: keywords.clone(),
            stamps: complete.then(|| (stamp(listing.new), stamp(listing.cur), uidlist_stamp)),
        };
        // with nothing to parse, the mailbox record is settled in the same commit
        let settle_now = to_add.is_empty().then(|| settle(complete));
        let id = self.index.write(move |w| {
            let id = w.create_mailbox(&owned_name, uidvalidity)?;
            let mut m = w.reader().require_mailbox(id)?;
            if m.uidvalidity != uidvalidity {
                w.clear_messages(id)?;
                m = w.reader().require_mailbox(id)?;
                m.uidvalidity = uidvalidity;
                m.uid_next = Uid::MIN;
                m.first_recent_uid = Uid::MIN;
                w.put_mailbox(id, &m)?;
            }
            for uid in to_remove {
                w.remove_message(id, Uid(uid))?;
            }
            for (uid, file_name, in_new, flags, kw) in to_update {
                w.update_message(id, Uid(uid), flags, kw, &file_name, in_new)?;
            }
            if let Some(settle) = settle_now {
                settle.apply(w, id)?;
            }
            Ok(id)
        })?;

        // Parsing is most of a first indexing (or a rebuild): the batches are parsed on
        // every core and committed in order by one thread, the next batch parsing while the
        // last one commits.
        let workers = parse_workers(to_add.len());
        std::thread::scope(|scope| -> Result<(), StoreError> {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(u32, Built)>>(1);
            let committer = scope.spawn(move || -> Result<(), StoreError> {
                for built in rx {
                    self.insert_batch(id, built)?;
                }
                Ok(())
            });
            let mut sent = Ok(());
            for chunk in to_add.chunks(BATCH) {
                let parsed = parse_in_parallel(chunk, path, workers);
                let mut built: Vec<(u32, Built)> = Vec::with_capacity(chunk.len());
                for ((uid, e), result) in chunk.iter().zip(parsed) {
                    let file = e.sub.path(path).join(&e.file_name);
                    match result {
                        Ok(b) => built.push((*uid, b)),
                        Err(StoreError::Io { error, .. })
                            if error.kind() == std::io::ErrorKind::NotFound
                                && std::fs::symlink_metadata(&file).is_err() =>
                        {
                            // renamed or expunged by another tool since the listing: list
                            // again
                            complete = false;
                            again = true;
                        }
                        Err(StoreError::Io { path, error }) => {
                            tracing::warn!(file = %path.display(), error = %error, "cannot read message file; not indexed (its UID is kept)");
                            report.unreadable.push(path);
                            // not storing the stamps makes the next sync try it again
                            complete = false;
                        }
                        Err(e) => {
                            sent = Err(e);
                            break;
                        }
                    }
                }
                if sent.is_err() {
                    break;
                }
                report.added += built.len();
                // a send fails only when the committer stopped on an error, told below
                if tx.send(built).is_err() {
                    break;
                }
            }
            drop(tx);
            let committed = committer
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            sent.and(committed)
        })?;

        if !to_add.is_empty() {
            let settle = settle(complete);
            self.index.write(move |w| settle.apply(w, id))?;
        }
        if complete && !again {
            // the listing (after the look) is all in the index: a baseline for the watch
            sync_watch::settled(path);
        }
        Ok(!again)
    }

    /// The diff through dovecot-uidlist: UIDs for new files (under the uidlist lock), and
    /// removals confirmed on a complete listing.
    fn full_diff<'a>(
        &self,
        name: &str,
        path: &Path,
        listing: &'a scan::Scan,
        existing: Option<&(MailboxId, MailboxRecord)>,
        heads: &Indexed,
        report: &mut SyncReport,
    ) -> Result<Plan<'a>, StoreError> {
        let assigned = uids::assign(
            path,
            &listing.entries,
            // asked under the uidlist lock, only when the list is lost: read the index afresh,
            // so deliveries committed since `heads` was read keep their UIDs too
            || self.known_uids(name),
            || self.uidlist_lock(path),
        )?;
        let validity_changed = existing.is_some_and(|(_, m)| m.uidvalidity != assigned.uidvalidity);
        if validity_changed {
            tracing::warn!(mailbox = %name, "UIDVALIDITY changed in dovecot-uidlist; re-indexing the mailbox");
            report.uidvalidity_changed.push(name.to_string());
        }
        let indexed: HashMap<u32, (&str, bool)> = if validity_changed {
            HashMap::new()
        } else {
            heads.iter().map(|(u, f, n)| (u, (f, n))).collect()
        };

        let (to_add, to_update, mut to_remove) =
            diff(name, &listing.entries, &assigned.by_base, &indexed);
        let mut complete = true;
        if !to_remove.is_empty() {
            // A removal is an EXPUNGE for clients: confirm it on a listing known to be
            // complete, or leave it for a later sync when the folders are quiet. A UID whose
            // file is still there but now numbered otherwise goes too (it was renumbered).
            match uids::complete_listing(path)? {
                Some(present) => {
                    let all: HashMap<&str, u32> =
                        assigned.records.iter().map(|r| (r.base(), r.uid)).collect();
                    to_remove.retain(|uid| {
                        indexed.get(uid).is_none_or(|(file_name, _)| {
                            let base = base_of(file_name);
                            !present.contains(base) || all.get(base) != Some(uid)
                        })
                    })
                }
                None => {
                    to_remove.clear();
                    complete = false;
                }
            }
        }
        Ok(Plan {
            uidvalidity: assigned.uidvalidity,
            next_uid: assigned.next_uid,
            uidlist_stamp: assigned.stamp,
            to_add,
            to_update,
            to_remove,
            complete,
        })
    }

    /// Inserts built records in one write (run again if the map had to grow).
    pub(crate) fn insert_batch(
        &self,
        id: MailboxId,
        built: Vec<(u32, Built)>,
    ) -> Result<(), StoreError> {
        Ok(self.index.write_retrying(move |w| {
            let items: Vec<_> = built
                .iter()
                .map(|(uid, b)| (Uid(*uid), &b.record, &b.headers[..]))
                .collect();
            w.insert_message_refs(id, &items).map(drop)
        })?)
    }
}

/// The file names the index holds for a mailbox, in one buffer: what a sync compares with
/// the listing (a `String` and a whole state per message cost a 30,000-message folder's
/// sync 30,000 allocations).
#[derive(Default)]
struct Indexed {
    names: String,
    /// UID, end of its file name in `names`, whether the file is in `new/`; in UID order.
    heads: Vec<(u32, usize, bool)>,
}

impl Indexed {
    fn read(r: &Reader<'_>, id: MailboxId) -> Result<Indexed, IndexError> {
        let mut out = Indexed::default();
        r.for_each_file_name(id, |uid, file_name, in_new| {
            out.names.push_str(file_name);
            // dovecot-uidlist's UIDs are bare numbers: the diff compares those
            out.heads.push((uid.get(), out.names.len(), in_new));
        })?;
        Ok(out)
    }

    fn len(&self) -> usize {
        self.heads.len()
    }

    /// UID, file name and `in_new` of the `i`th message.
    fn get(&self, i: usize) -> (u32, &str, bool) {
        let start = i.checked_sub(1).map_or(0, |p| self.heads[p].1);
        let (uid, end, in_new) = self.heads[i];
        (uid, &self.names[start..end], in_new)
    }

    fn iter(&self) -> impl Iterator<Item = (u32, &str, bool)> {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// What a pass changes in the index, from the listing.
struct Plan<'a> {
    uidvalidity: u32,
    next_uid: u32,
    /// dovecot-uidlist's stamp when its UIDs were read (or when the index vouched for them).
    uidlist_stamp: Stamp,
    to_add: Vec<(u32, &'a Entry)>,
    to_update: Vec<Update>,
    to_remove: Vec<u32>,
    /// No removal was left for later.
    complete: bool,
}

/// What a sync writes into the mailbox record at its end.
struct Settle {
    next_uid: u32,
    keywords: Vec<String>,
    /// Stamps of new/, cur/ and dovecot-uidlist, when the pass saw everything.
    stamps: Option<(Stamp, Stamp, Stamp)>,
}

impl Settle {
    fn apply(&self, w: &mut Writer<'_, '_>, id: MailboxId) -> Result<(), IndexError> {
        let old = w.reader().require_mailbox(id)?;
        let mut m = old.clone();
        m.uid_next = m.uid_next.max(Uid(self.next_uid));
        if let Some(table) = crate::opctx::newer_keywords(&m.keywords, &self.keywords) {
            m.keywords = table;
        }
        if let Some((new, cur, uidlist)) = self.stamps {
            m.new_stamp = new;
            m.cur_stamp = cur;
            m.uidlist_stamp = uidlist;
        }
        if m == old {
            // a sync that found nothing new writes nothing (and wakes no one)
            return Ok(());
        }
        w.put_mailbox(id, &m)
    }
}

/// What a listing tells of a file before it is read (size and date come from the file).
/// Threads that parse message files for one sync: every core for a batch of work, one for
/// a few messages (a delivery found by a sync, say).
fn parse_workers(messages: usize) -> usize {
    if messages < 64 {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// Builds the records of `chunk`'s files on `workers` threads; results in `chunk`'s order.
fn parse_in_parallel(
    chunk: &[(u32, &Entry)],
    path: &Path,
    workers: usize,
) -> Vec<Result<Built, StoreError>> {
    crate::parallel::map_in_parallel(chunk, workers, |buf, (_, e)| {
        convert::index_file_in(&e.sub.path(path).join(&e.file_name), entry_state(e), buf)
    })
}

fn entry_state(e: &Entry) -> MessageState {
    MessageState {
        file_name: e.file_name.clone(),
        in_new: e.sub == Sub::New,
        flags: flag_bits(e.name.flags),
        keywords: e.name.keywords.0,
        save_date: convert::now_secs(),
        ..MessageState::default()
    }
}

/// Keyword names by letter index, from dovecot-keywords.
pub(crate) fn keyword_names(path: &Path) -> Result<Vec<String>, StoreError> {
    Ok(names_of(&KeywordMap::read(path)?))
}

/// Keyword names by letter index (empty for an unused letter, none after the last used).
pub(crate) fn names_of(map: &KeywordMap) -> Vec<String> {
    let mut names: Vec<String> = (b'a'..=b'z')
        .map(|l| map.name_of(l).unwrap_or_default().to_string())
        .collect();
    while names.last().is_some_and(String::is_empty) {
        names.pop();
    }
    names
}

/// The diff when dovecot-uidlist has not changed since the last complete sync stored its
/// stamp, or `None` when the listing needs the list after all. That sync left the index
/// holding exactly the list's UID for every file then present, and every later change of a
/// UID (a delivery, COPY, APPEND or MOVE by maildex, a renumbering or new file numbered by
/// another tool) writes the list and so changes its stamp; what stays is the renames (flag
/// changes, `new/` to `cur/`) by maildex or another tool, which keep the base name. So when
/// every listed base is indexed once and every indexed message is listed, the list would
/// give each file the UID the index has, and only the renames are left to apply. A file
/// the index does not know (it needs a UID) or a message whose file is gone (its removal
/// needs a complete listing) falls back to the list. Its compaction (records of files
/// gone) waits for the next sync that reads it.
fn vouched_diff(entries: &[Entry], indexed: &Indexed) -> Option<Vec<Update>> {
    if entries.len() != indexed.len() {
        return None;
    }
    let mut by_base: HashMap<&str, usize> = HashMap::with_capacity(indexed.len());
    for (i, (_, file_name, _)) in indexed.iter().enumerate() {
        if by_base.insert(base_of(file_name), i).is_some() {
            return None;
        }
    }
    // as many listed as indexed, each listed base indexed and none twice: one to one
    let mut seen = vec![false; indexed.len()];
    let mut update = Vec::new();
    for e in entries {
        let &i = by_base.get(e.name.base.as_str())?;
        if std::mem::replace(&mut seen[i], true) {
            return None;
        }
        let (uid, file_name, was_new) = indexed.get(i);
        let in_new = e.sub == Sub::New;
        if file_name != e.file_name || was_new != in_new {
            update.push(update_of(uid, e));
        }
    }
    Some(update)
}

/// The index update of message `uid`, renamed to `e`.
fn update_of(uid: u32, e: &Entry) -> Update {
    (
        uid,
        e.file_name.clone(),
        e.sub == Sub::New,
        flag_bits(e.name.flags),
        e.name.keywords.0,
    )
}

/// Splits the listing into files to index, renamed files and UIDs whose file is gone.
fn diff<'a>(
    mailbox: &str,
    entries: &'a [Entry],
    by_base: &HashMap<&str, u32>,
    indexed: &HashMap<u32, (&str, bool)>,
) -> (Vec<(u32, &'a Entry)>, Vec<Update>, Vec<u32>) {
    let mut add = Vec::new();
    let mut update = Vec::new();
    let mut seen = HashSet::with_capacity(entries.len());
    for e in entries {
        let Some(&uid) = by_base.get(e.name.base.as_str()) else {
            continue;
        };
        if !seen.insert(uid) {
            // the same base name in new/ and cur/ (a tool copied instead of moving)
            tracing::warn!(mailbox, file = %e.file_name, uid, "duplicate Maildir base name; indexed once");
            continue;
        }
        let in_new = e.sub == Sub::New;
        match indexed.get(&uid) {
            None => add.push((uid, e)),
            // the UID now names another file (renumbered by another tool): index it afresh
            Some((file_name, _)) if base_of(file_name) != e.name.base => add.push((uid, e)),
            Some(&(file_name, was_new)) if file_name != e.file_name || was_new != in_new => {
                update.push(update_of(uid, e));
            }
            Some(_) => {}
        }
    }
    let remove = indexed
        .keys()
        .filter(|u| !seen.contains(u))
        .copied()
        .collect();
    (add, update, remove)
}
