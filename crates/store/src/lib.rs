//! The one place that changes mail. A [`UserStore`] owns one user's Maildir++ tree and LMDB
//! index and keeps them equal:
//!
//! - [`UserStore::sync_mailbox`] / [`UserStore::sync_all`] bring the index up to date with
//!   whatever other tools did to the Maildir (files added, removed, renamed with new flags),
//!   looking at directory stamps first so that an unchanged mailbox costs two `stat`s.
//! - [`UserStore::deliver`] is the write path for LMTP, `maildex deliver` and APPEND: stream
//!   into `tmp/`, fsync, summarize, rename into `new/`/`cur/`, fsync the directory, record the
//!   UID in dovecot-uidlist, commit the index.
//! - [`UserStore::snapshot`], [`UserStore::load`] and [`UserStore::open_message`] are the
//!   read side sessions use: what changed since their view (from the change log), messages
//!   in batches, message files (see `read.rs`). Nothing outside the store builds a Maildir
//!   path or opens an index transaction for a session.
//! - [`UserStore::rebuild`] and [`UserStore::check`] serve the admin CLI.
//!
//! UIDs live in `dovecot-uidlist` (the authority, shared with Dovecot); the index mirrors them.

mod check;
mod convert;
mod copy;
mod deliver;
mod expunge;
mod flags;
pub mod foreground;
mod incoming;
mod learned;
mod mailboxes;
mod message_text;
mod op_error;
mod opctx;
mod orders;
pub mod parallel;
mod quota_file;
mod read;
mod rebuild;
pub mod section;
mod skeleton;
mod special;
mod subscriptions;
mod sync;
pub mod sync_watch;
mod text_index;
mod text_words;
mod uids;
pub mod watch;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use maildex_index::{Index, IndexError, OpenOptions};
use maildex_maildir::uidlist::LockTemplate;
use maildex_maildir::{MaildirError, UidlistLock};
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

pub use check::Difference;
pub use copy::CopyOutcome;
pub use deliver::{
    received_header, trace_headers, DeliverOptions, DeliveredMessage, LinkOrCopy, PreparedMessage,
    Received,
};
pub use flags::{FlagOp, FlagState, FlagsOutcome};
pub use foreground::{Foreground, ForegroundCommand};
pub use incoming::IncomingMessage;
pub use mailboxes::{MailboxInfo, SpecialUse};
/// Makes every index commit this process left unsynced durable (`[storage]
/// index_sync_delay`); the daemon calls it as it stops.
pub use maildex_index::sync_unsynced as sync_unsynced_indexes;
pub use maildex_index::{ChangeSet, MailboxId, ModSeq, Uid};
/// The index's record types as sessions read them: the IMAP crate takes them from here and
/// does not depend on the index crate (it reaches mail only through the store).
pub mod records {
    pub use maildex_index::{
        flag, Built, Cached, CachedFields, FlagState, Fts, MailboxRecord, MessageState,
        PartKindRecord, PartRecord, SearchField, SearchFields, SearchView, SortKeys, SortNeed,
        HOT_HEADERS, SEARCH_HEADERS,
    };
}
pub use maildex_maildir::{mutf7, Flags};
/// Decoded message text (headers, bodies, SEARCH normalisation): [`UserStore::message_text`].
pub use maildex_text as text;
pub use message_text::build_record;
pub use op_error::{OpError, Refusal};
pub use read::{
    Changes, Contents, Expunged, Loaded, Mailbox, MessageFile, Since, Snapshot, SnapshotRequest,
    SortEntry, SyncFirst,
};
pub use rebuild::{Progress, RebuildReport};
pub use special::{AutoCreate, MailboxSetting};
pub use subscriptions::SUBSCRIPTIONS_FILE;
pub use sync::{SyncReport, FAST_SYNC_INTERVAL};
pub use text_index::{TextPass, TextReport, TEXT_BATCH};
pub use text_words::{TextAnswers, TextNeedle};
pub use watch::{DirWatch, DirWatcher};

/// What can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The Maildir layer failed (names the file).
    #[error(transparent)]
    Maildir(#[from] MaildirError),
    /// The index failed.
    #[error(transparent)]
    Index(IndexError),
    /// A file operation outside the Maildir layer failed.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said (in the message; not a `source()`).
        error: std::io::Error,
    },
    /// The mailbox does not exist on disk.
    #[error("no mailbox {0:?}")]
    NoMailbox(String),
    /// dovecot-uidlist cannot be read and nothing else knows the UIDs: refusing to renumber.
    #[error("{path}: {reason}; refusing to renumber messages: move the file away to start a new UIDVALIDITY, or fix it")]
    UidlistUnusable {
        /// The uidlist file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The Maildir kept changing under a sync.
    #[error("mailbox {0:?} kept changing during sync; try again")]
    Busy(String),
}

impl StoreError {
    /// A file error; a permission error names who lacks what (issue 15 #9).
    pub(crate) fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        let path = path.as_ref().to_path_buf();
        StoreError::Io {
            error: maildex_maildir::explain_denied(&path, source),
            path,
        }
    }
}

/// An index error; a permission error on an index file (an index left by root) names
/// who lacks what, as a Maildir error does.
impl From<IndexError> for StoreError {
    fn from(e: IndexError) -> Self {
        match e {
            IndexError::Io { path, error } => StoreError::Index(IndexError::Io {
                error: maildex_maildir::explain_denied(&path, error),
                path,
            }),
            e => StoreError::Index(e),
        }
    }
}

/// How a store is opened.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// LMDB settings.
    pub index: OpenOptions,
    /// How long to wait for another process's dovecot-uidlist lock.
    pub lock_timeout: Duration,
    /// fsync message files and directories on delivery (off only in tests/benchmarks).
    pub fsync: bool,
    /// The configured folders (`[mailboxes]`): roles, creation, autoexpunge.
    pub mailboxes: Vec<MailboxSetting>,
    /// `[storage] full_text`: store the text SEARCH BODY/TEXT compare when a message is
    /// indexed. Off: BODY/TEXT read the files of the messages without a stored text.
    pub full_text: bool,
    /// The session commands running, shared by the stores of one daemon
    /// ([`UserStore::foreground`]); by default the store's own.
    pub foreground: Foreground,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            index: OpenOptions::default(),
            lock_timeout: Duration::from_secs(30),
            fsync: true,
            mailboxes: Vec::new(),
            full_text: true,
            foreground: Foreground::default(),
        }
    }
}

/// Mailbox lock entries from which dead ones are swept (then at each power of two).
const SWEEP_AT: usize = 64;

/// One user's mail: a Maildir++ tree and its index.
pub struct UserStore {
    root: PathBuf,
    index: Arc<Index>,
    opts: StoreOptions,
    /// One sync at a time per mailbox within this process (other processes are kept in step
    /// by the dovecot-uidlist lock and LMDB transactions). See [`LockSlot`]: names that
    /// never existed (STATUS on made-up names) do not accumulate; dead entries are swept
    /// as the map grows ([`UserStore::mailbox_lock`]).
    mailbox_locks: Mutex<HashMap<String, LockSlot>>,
    /// This process's file that the user's dovecot-uidlist locks are links to, kept in
    /// the index folder (see [`LockTemplate`]).
    lock_template: Arc<LockTemplate>,
    /// The change feed: the index's commit generation (see [`UserStore::change_feed`]).
    feed: tokio::sync::watch::Sender<u64>,
    /// Keeps the index calling into `feed` (the index holds it weakly).
    _feed_listener: Arc<maildex_index::CommitListener>,
    /// Sort orders kept between queries ([`UserStore::sort_order`]).
    orders: orders::Orders,
    /// The storage limit `maildirsize` states ([`UserStore::set_quota_limit`]); held while
    /// the file is written.
    quota_limit: Mutex<Option<u64>>,
    /// A new user's skeleton is being made ([`UserStore::create_new`]): dovecot-uidlist
    /// writes are not synced, the skeleton is made durable as a whole at the end.
    deferring: bool,
}

/// The in-process serialisation of one mailbox's syncs and writes, and which syncs ran.
///
/// Syncs, MOVE, mailbox RENAME and DELETE, rebuild and autoexpunge hold `lock`
/// exclusively ([`MailboxSerial::hold`]). The writes sessions make all the time hold it
/// shared (issue 15 #22): a STORE or an EXPUNGE claims the UIDs it changes
/// ([`MailboxSerial::claim`]), an APPEND, a delivery or a COPY into the mailbox holds the
/// adders' mutex ([`MailboxSerial::add`]). They touch different files (a STORE renames its
/// messages', an EXPUNGE unlinks its own, an adder makes a new one) and their index updates
/// meet only inside the index's write transaction, so they run side by side and reach the
/// group commit together, sharing its fdatasync. Two of them on one message still run one
/// after the other (each reads the record the other committed: UNCHANGEDSINCE, the
/// `\Deleted` an EXPUNGE checks, undoing a failed rename), and adders one at a time (UIDs
/// are committed in the order dovecot-uidlist gave them). A sync holds the lock
/// exclusively because it compares a listing of the folders with the index: no file may
/// be renamed, added or removed between the two.
#[derive(Default)]
pub(crate) struct MailboxSerial {
    lock: RwLock<()>,
    /// UIDs a STORE or an EXPUNGE holding `lock` shared is changing.
    claimed: Mutex<BTreeSet<Uid>>,
    /// Signalled when claimed UIDs are released.
    released: Condvar,
    /// Held by the one adder (holding `lock` shared) that is adding messages.
    adding: Mutex<()>,
    /// Sync passes begun (each numbered by this count when it begins, under `lock`).
    syncs_begun: std::sync::atomic::AtomicU64,
    /// The number of the last sync that completed (written under `lock`).
    last_synced: std::sync::atomic::AtomicU64,
    /// When the last sync that completed began (see [`UserStore::sync_mailbox_fast`]).
    last_look: Mutex<Option<std::time::Instant>>,
}

/// An entry of the mailbox lock map.
enum LockSlot {
    /// The lock of a mailbox a sync found, held so that its sync history (the fast sync's
    /// last look, a sync to reuse) outlives the commands between syncs: as many as the
    /// user has mailboxes.
    Kept(Arc<MailboxSerial>),
    /// Any other name's (one a sync did not find, a made-up one): it lives while some
    /// operation holds it, and the entry is swept once it is dead (issue 15 #28).
    Held(Weak<MailboxSerial>),
}

impl LockSlot {
    fn live(&self) -> Option<Arc<MailboxSerial>> {
        match self {
            LockSlot::Kept(lock) => Some(Arc::clone(lock)),
            LockSlot::Held(weak) => weak.upgrade(),
        }
    }
}

impl MailboxSerial {
    /// Holds the mailbox against other syncs and writes of this process.
    pub(crate) fn hold(&self) -> RwLockWriteGuard<'_, ()> {
        self.lock.write()
    }

    /// Holds the mailbox against syncs and the other exclusive holders, beside the other
    /// shared ones (see the type's docs). parking_lot's lock is task-fair: a STORE arriving
    /// while a sync waits queues behind it, and a writer's unlock wakes the readers queued
    /// before the next writer. (std's `RwLock` on Linux wakes a waiting writer before any
    /// reader: with only STOREs shared and deliveries, COPYs and EXPUNGEs exclusive and
    /// always queued at 50 clients, STOREs waited up to 6 s in `maildex-bench mixed`.)
    pub(crate) fn share(&self) -> RwLockReadGuard<'_, ()> {
        self.lock.read()
    }

    /// Holds the mailbox for adding messages (APPEND, delivery, COPY into it): shared with
    /// STOREs and EXPUNGEs, one adder at a time.
    pub(crate) fn add(&self) -> Adding<'_> {
        let shared = self.share();
        Adding {
            _adding: self.adding.lock().unwrap_or_else(|p| p.into_inner()),
            _shared: shared,
        }
    }

    /// Claims `uids` (ascending) for the holder of `_shared`, waiting for each one another
    /// STORE or EXPUNGE has claimed. Taken one by one in UID order, so two claims cannot wait for each
    /// other (each waits only for UIDs above those it holds), and a STORE of many messages
    /// is not starved by small ones. Released when the [`Claim`] is dropped.
    pub(crate) fn claim<'a>(
        &'a self,
        _shared: &RwLockReadGuard<'a, ()>,
        uids: &[Uid],
    ) -> Claim<'a> {
        debug_assert!(uids.windows(2).all(|w| w[0] < w[1]));
        let mut claimed = self.claimed.lock().unwrap_or_else(|p| p.into_inner());
        for &uid in uids {
            while claimed.contains(&uid) {
                claimed = self
                    .released
                    .wait(claimed)
                    .unwrap_or_else(|p| p.into_inner());
            }
            claimed.insert(uid);
        }
        Claim {
            serial: self,
            uids: uids.to_vec(),
        }
    }
}

/// The mailbox held for adding messages ([`MailboxSerial::add`]).
pub(crate) struct Adding<'a> {
    // dropped first: the next adder may go on while this one lets go of the mailbox
    _adding: std::sync::MutexGuard<'a, ()>,
    _shared: RwLockReadGuard<'a, ()>,
}

/// UIDs a STORE or an EXPUNGE changes, claimed against the others of the mailbox ([`MailboxSerial::claim`]).
pub(crate) struct Claim<'a> {
    serial: &'a MailboxSerial,
    uids: Vec<Uid>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut claimed = self
            .serial
            .claimed
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for uid in &self.uids {
            claimed.remove(uid);
        }
        drop(claimed);
        self.serial.released.notify_all();
    }
}

impl UserStore {
    /// Opens the store of a user whose Maildir is `maildir` (created if missing, as an empty
    /// INBOX) with the index in `index_dir`.
    pub fn open(
        maildir: &Path,
        index_dir: &Path,
        opts: StoreOptions,
    ) -> Result<UserStore, StoreError> {
        Self::open_with(maildir, index_dir, opts, None)
    }

    /// [`UserStore::open`]; with `deferred` (the marker's note), a new index's commits are
    /// not synced until [`Index::finish_deferred`] (a new user's skeleton, `skeleton.rs`).
    pub(crate) fn open_with(
        maildir: &Path,
        index_dir: &Path,
        opts: StoreOptions,
        deferred: Option<&[u8]>,
    ) -> Result<UserStore, StoreError> {
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(maildir)
            .map_err(|e| StoreError::io(maildir, e))?;
        maildex_maildir::folder::create_mailbox(maildir, false)?;
        let index = if let Some(note) = deferred {
            Index::create_deferred(index_dir, &opts.index, note)?
        } else {
            Index::open(index_dir, &opts.index)?
        };
        // learned header fields are computed as HEADER compares them (crates/text)
        maildex_index::learned::set_values_fn(maildex_text::header_values);
        let stale = LockTemplate::clean_stale(index_dir);
        if stale > 0 {
            tracing::debug!(index = %index_dir.display(), stale, "removed lock templates of dead processes");
        }
        let feed = tokio::sync::watch::Sender::new(index.commits());
        let tx = feed.clone();
        let listener: Arc<maildex_index::CommitListener> = Arc::new(move |generation| {
            tx.send_replace(generation);
        });
        index.add_commit_listener(&listener);
        Ok(UserStore {
            root: maildir.to_path_buf(),
            index,
            opts,
            mailbox_locks: Mutex::default(),
            lock_template: Arc::new(LockTemplate::new(index_dir)),
            feed,
            _feed_listener: listener,
            orders: orders::Orders::default(),
            quota_limit: Mutex::default(),
            deferring: deferred.is_some(),
        })
    }

    /// Counts a session's command as running until the returned guard drops: background
    /// work on the stores sharing [`StoreOptions::foreground`] (the daemon's full-text
    /// indexer) waits meanwhile ([`UserStore::wait_for_commands`]). Not for IDLE, which
    /// waits rather than works.
    pub fn foreground(&self) -> ForegroundCommand {
        self.opts.foreground.begin()
    }

    /// Blocks the calling thread (background work, never an async task) until no session
    /// command of the stores sharing [`StoreOptions::foreground`] has run for
    /// [`foreground::GRACE`], or for `at_most`. Returns whether they are quiet.
    pub fn wait_for_commands(&self, at_most: std::time::Duration) -> bool {
        self.opts.foreground.wait_quiet(at_most)
    }

    /// The change feed: a receiver whose value changes after every commit of this process
    /// that changed the user's index (each carrying any number of writers' changes), so an
    /// IDLE session can await `changed()` and then read what changed. Commits of other
    /// processes (the CLI, `maildex deliver`) are not seen here; a session's periodic sync
    /// covers those.
    pub fn change_feed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.feed.subscribe()
    }

    /// The Maildir root (INBOX).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The index.
    pub fn index(&self) -> &Arc<Index> {
        &self.index
    }

    /// The folder of mailbox `name` on disk.
    pub fn mailbox_path(&self, name: &str) -> Result<PathBuf, StoreError> {
        Ok(maildex_maildir::folder::folder_path(&self.root, name)?)
    }

    /// Canonical IMAP name: INBOX is case-insensitive (RFC 3501 §5.1).
    pub(crate) fn canonical(name: &str) -> &str {
        if name.eq_ignore_ascii_case("INBOX") {
            "INBOX"
        } else {
            name
        }
    }

    /// Takes the dovecot-uidlist lock of the mailbox folder `path`.
    pub(crate) fn uidlist_lock(&self, path: &Path) -> Result<UidlistLock, StoreError> {
        let mut lock = UidlistLock::acquire_via(path, self.opts.lock_timeout, &self.lock_template)?;
        lock.set_durable(!self.deferring);
        Ok(lock)
    }

    /// The in-process lock of mailbox `name`: the one other callers hold now, or a new one.
    /// A lock nobody holds has no state worth keeping (its sync counters only matter to
    /// callers waiting at the same time), so it is dropped with its last holder and its
    /// map entry swept when the map has doubled since the last sweep.
    pub(crate) fn mailbox_lock(&self, name: &str) -> Arc<MailboxSerial> {
        let mut locks = self.locks();
        if let Some(live) = locks.get(name).and_then(LockSlot::live) {
            return live;
        }
        if locks.len() >= SWEEP_AT && locks.len().is_power_of_two() {
            locks.retain(|_, slot| slot.live().is_some());
        }
        let lock = Arc::new(MailboxSerial::default());
        locks.insert(name.to_string(), LockSlot::Held(Arc::downgrade(&lock)));
        lock
    }

    /// Keeps `lock` of mailbox `name`, which a sync found (the caller holds it, so it is
    /// the one the map has).
    pub(crate) fn keep_lock(&self, name: &str, lock: &Arc<MailboxSerial>) {
        let mut locks = self.locks();
        if !matches!(locks.get(name), Some(LockSlot::Kept(_))) {
            locks.insert(name.to_string(), LockSlot::Kept(Arc::clone(lock)));
        }
    }

    /// Lets the lock of mailbox `name` go with its last holder (a sync did not find it, or
    /// it was deleted).
    pub(crate) fn forget_lock(&self, name: &str) {
        let mut locks = self.locks();
        if let Some(LockSlot::Kept(lock)) = locks.get(name) {
            let weak = Arc::downgrade(lock);
            locks.insert(name.to_string(), LockSlot::Held(weak));
        }
    }

    fn locks(&self) -> std::sync::MutexGuard<'_, HashMap<String, LockSlot>> {
        self.mailbox_locks.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Claims of overlapping UID sets from many threads all complete (taken in UID order,
    /// none waits for another forever) and never hold one UID twice at once.
    #[test]
    fn overlapping_claims_exclude_each_other_without_deadlock() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let serial = MailboxSerial::default();
        let held: Vec<AtomicBool> = (0..8).map(|_| AtomicBool::new(false)).collect();
        std::thread::scope(|s| {
            for t in 0..6u32 {
                let (serial, held) = (&serial, &held);
                s.spawn(move || {
                    for round in 0..300u32 {
                        // a different, overlapping set per thread and round
                        let uids: Vec<Uid> = (0..8u32)
                            .filter(|u| (u + t + round) % 3 != 0)
                            .map(Uid)
                            .collect();
                        let shared = serial.share();
                        let _claim = serial.claim(&shared, &uids);
                        for &u in &uids {
                            let was = held[u.get() as usize].swap(true, Ordering::SeqCst);
                            assert!(!was, "UID {u} claimed twice");
                        }
                        std::thread::yield_now();
                        for &u in &uids {
                            held[u.get() as usize].store(false, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
    }

    #[test]
    fn locks_of_names_nobody_holds_do_not_accumulate() {
        let dir = tempfile::tempdir().unwrap();
        let store = UserStore::open(
            &dir.path().join("mail"),
            &dir.path().join("index"),
            StoreOptions::default(),
        )
        .unwrap();
        let held = store.mailbox_lock("INBOX");
        for i in 0..10_000 {
            let name = format!("made-up-{i}");
            assert!(matches!(
                store.sync_mailbox(&name),
                Err(StoreError::NoMailbox(_))
            ));
        }
        let entries = store.mailbox_locks.lock().unwrap().len();
        assert!(
            entries <= 2 * SWEEP_AT,
            "{entries} entries after 10,000 names"
        );
        // a lock someone holds is the one the next caller gets
        assert!(Arc::ptr_eq(&held, &store.mailbox_lock("INBOX")));
        drop(held);
        // a mailbox a sync found keeps its lock, and its last look, with no holder...
        store.sync_mailbox("INBOX").unwrap();
        let look = |s: &UserStore| *s.mailbox_lock("INBOX").last_look.lock().unwrap();
        assert!(look(&store).is_some());
        // ...until it is let go
        store.forget_lock("INBOX");
        assert!(look(&store).is_none());
    }
}
