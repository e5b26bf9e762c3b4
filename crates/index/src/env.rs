//! One LMDB environment per user: opening (once per process, through a registry), short read
//! transactions, group-committed writes and map growth.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions as FsOpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

use heed::byteorder::BigEndian;
use heed::types::{Bytes, Str, U32};
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions, WithoutTls};

use crate::columns::Columns;
use crate::schema::{self, SCHEMA_VERSION};
use crate::segment::{self, Packing, Segments};
use crate::txn::Reader;
use crate::IndexError;

mod compact;
mod group;

pub use compact::compact;
use group::Group;

/// File names LMDB keeps in an index folder.
pub const DATA_FILE: &str = "data.mdb";
/// LMDB's lock file (reader table).
pub const LOCK_FILE: &str = "lock.mdb";
/// Our own lock file: held shared by every process that has the env open, exclusive by
/// `index compact` (which must be alone, because it replaces the data file).
pub const OPEN_LOCK_FILE: &str = "maildex.lock";

/// How an environment is opened.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Initial map size in bytes (rounded up to the page size). The map grows by itself.
    pub map_size: usize,
    /// fsync on commit (of the data pages; the meta page waits for the next commit, see
    /// `open_uncached`). Off only for tests and benchmarks that measure something else.
    pub durable: bool,
    /// With `durable`: commits go unsynced for up to this long, covered by a marker of
    /// the machine's boot, and are then synced together (`crate::lazy`, for the daemon);
    /// None syncs each commit.
    pub sync_delay: Option<std::time::Duration>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            map_size: 64 << 20,
            durable: true,
            sync_delay: None,
        }
    }
}

/// Named databases an env may hold: the sixteen of [`Dbs`] and room for more.
const MAX_DBS: u32 = 24;

/// The typed databases of one environment.
pub struct Dbs<'e> {
    /// `meta`: schema version and counters.
    pub meta: Database<'e, Str, Bytes>,
    /// `mailbox-names`: name -> id.
    pub mailbox_names: Database<'e, Str, U32<BigEndian>>,
    /// `mailboxes`: id -> [`schema::MailboxRecord`].
    pub mailboxes: Database<'e, U32<BigEndian>, Bytes>,
    /// `messages`: (mailbox, uid) -> [`schema::MessageState`].
    pub messages: Database<'e, Bytes, Bytes>,
    /// `flags`: segments of each message's flags, keywords, modseq, size and date
    /// ([`crate::flag_column`]).
    pub flags: Database<'e, Bytes, Bytes>,
    /// `cache-hot`: segments of hot header fields.
    pub cache_hot: Database<'e, Bytes, Bytes>,
    /// `cache-envelope`: segments of ENVELOPEs.
    pub cache_envelope: Database<'e, Bytes, Bytes>,
    /// `cache-structure`: segments of [`schema::Structure`].
    pub cache_structure: Database<'e, Bytes, Bytes>,
    /// `cache-sort`: segments of [`schema::SortKeys`].
    pub cache_sort: Database<'e, Bytes, Bytes>,
    /// `cache-search`: [`schema::SearchFields`], packed.
    pub cache_search: Database<'e, Bytes, Bytes>,
    /// `fts-text`: (mailbox, uid) -> stored [`crate::TextRecord`].
    pub fts_text: Database<'e, Bytes, Bytes>,
    /// `fts-sig`: (mailbox, uid) -> candidate signature ([`crate::signature`]).
    pub fts_sig: Database<'e, Bytes, Bytes>,
    /// `fts-words`: (mailbox, kind, word) -> UIDs ([`crate::words`]).
    pub fts_words: Database<'e, Bytes, Bytes>,
    /// `headers`: segments of raw header blocks.
    pub headers: Database<'e, Bytes, Bytes>,
    /// `changes`: (mailbox, modseq) -> uid, the change log ([`crate::changes`]).
    pub changes: Database<'e, Bytes, Bytes>,
    /// `expunged`: (mailbox, modseq) -> uid, the expunge tombstones.
    pub expunged: Database<'e, Bytes, Bytes>,
    /// The clock in microseconds when this process opened the env: no mailbox's highest
    /// modseq reads as lower (see [`crate::Reader::mailbox`]).
    pub modseq_floor: crate::ModSeq,
}

impl<'e> Dbs<'e> {
    pub(crate) fn cache(&self) -> Columns<'e> {
        Columns {
            hot: Segments {
                db: self.cache_hot,
                name: schema::DB_CACHE_HOT,
                packing: Packing::Zstd(segment::LISTING_LEVEL),
            },
            envelope: Segments {
                db: self.cache_envelope,
                name: schema::DB_CACHE_ENVELOPE,
                packing: Packing::Zstd(segment::LISTING_LEVEL),
            },
            structure: Segments {
                db: self.cache_structure,
                name: schema::DB_CACHE_STRUCTURE,
                packing: Packing::Zstd(segment::LISTING_LEVEL),
            },
            sort: Segments {
                db: self.cache_sort,
                name: schema::DB_CACHE_SORT,
                packing: Packing::Raw,
            },
            search: crate::search_column::SearchColumn::new(self.cache_search),
            text: Segments {
                db: self.fts_text,
                name: schema::DB_FTS_TEXT,
                packing: Packing::Zstd(segment::TEXT_LEVEL),
            },
            sig: Segments {
                db: self.fts_sig,
                name: schema::DB_FTS_SIG,
                packing: Packing::Raw,
            },
        }
    }
    pub(crate) fn flag_column(&self) -> crate::flag_column::FlagColumn<'e> {
        crate::flag_column::FlagColumn::new(self.flags)
    }
    pub(crate) fn words(&self) -> crate::words::Words<'e> {
        crate::words::Words { db: self.fts_words }
    }
    pub(crate) fn headers(&self) -> Segments<'e> {
        Segments {
            db: self.headers,
            name: schema::DB_HEADERS,
            packing: Packing::Zstd(segment::LISTING_LEVEL),
        }
    }
}

self_cell::self_cell!(
    /// heed 0.23 ties each `Database` to a borrow of its `Env`; this cell keeps the env and
    /// its databases together (self-referential, without `unsafe` of our own).
    struct EnvCell {
        owner: Env<WithoutTls>,
        #[covariant]
        dependent: Dbs,
    }
);

/// One user's index environment. Cheap to share (`Arc`); closed when the last `Arc` drops.
pub struct Index {
    path: PathBuf,
    cell: EnvCell,
    /// Held shared by every transaction, exclusively while the map is resized: LMDB allows
    /// `mdb_env_set_mapsize` only when this process has no transaction open.
    resize: RwLock<()>,
    group: Mutex<Group>,
    /// Signalled when a leader finishes a batch.
    group_changed: std::sync::Condvar,
    /// Write transactions committed (each may carry many writers' operations).
    commits: std::sync::atomic::AtomicU64,
    /// Called with the commit generation after every commit that changed the index (the
    /// store turns it into the feed IDLE waits on); dead ones are dropped as found.
    listeners: Mutex<Vec<std::sync::Weak<CommitListener>>>,
    /// Opened by [`Index::create_deferred`] and not yet made durable
    /// ([`Index::finish_deferred`]): commits are not synced meanwhile.
    pub(crate) deferred: std::sync::atomic::AtomicBool,
    /// Whether commits are unsynced now (MDB_NOSYNC set).
    pub(crate) unsynced: std::sync::atomic::AtomicBool,
    /// Commits left unsynced between checkpoints (see `crate::lazy`); None: synced.
    pub(crate) lazy: Option<crate::lazy::Lazy>,
    /// This env's own `Arc`, which a marked env hands to the checkpoint thread.
    pub(crate) me: OnceLock<Weak<Index>>,
    _open_lock: File,
}

/// What [`Index::add_commit_listener`] calls: with the commit generation, after every commit
/// of this process that changed the index, before the writers of that commit return.
pub type CommitListener = dyn Fn(u64) + Send + Sync;

/// Makes the C allocator hand out large blocks as fresh mappings, for a process that opens
/// many envs (the daemon: every user who gets mail or logs in). Each writable LMDB env
/// callocs a 2 MiB dirty-page list and a 1 MiB free-page list; glibc serves them from the
/// heap once its dynamic mmap threshold has risen (after the first large block is freed)
/// and then zeroes them, so each env cost 2.4 MiB of resident memory although a
/// transaction touches a few KiB of them (300 users who got a message: 742 -> 124 MiB).
/// A fixed threshold (glibc's default starting value) keeps such blocks as mappings whose
/// untouched pages stay unallocated. Call it once, early, from the binary.
pub fn keep_large_allocations_lazy() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tuning parameter of glibc's allocator.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// The registry of the envs this process has open, locked.
pub(crate) type Registry = std::sync::MutexGuard<'static, HashMap<PathBuf, Weak<Index>>>;

fn registry() -> &'static Mutex<HashMap<PathBuf, Weak<Index>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<PathBuf, Weak<Index>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

fn page_round(n: usize) -> usize {
    const PAGE: usize = 4096;
    n.div_ceil(PAGE) * PAGE
}

pub(crate) fn flock(file: &File, op: libc::c_int) -> std::io::Result<()> {
    // SAFETY: flock on a descriptor we own; no memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

pub(crate) fn open_lock_file(dir: &Path) -> Result<File, IndexError> {
    let path = dir.join(OPEN_LOCK_FILE);
    FsOpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(|e| IndexError::io(&path, e))
}

impl Index {
    /// Opens (creating if needed) the index in `dir`. A second call for the same folder in
    /// this process returns the same `Arc` while it is alive: heed refuses a second open.
    pub fn open(dir: &Path, opts: &OpenOptions) -> Result<Arc<Index>, IndexError> {
        let (key, mut reg, open) = Index::lookup(dir)?;
        if let Some(index) = open {
            return Ok(index);
        }
        crate::fresh::discard_unfinished(&key)?;
        let index = Arc::new(Index::open_uncached(&key, opts)?);
        Index::register(&mut reg, key, &index);
        Ok(index)
    }

    /// Creates `dir` if needed; its canonical path, the registry of open envs (locked), and
    /// the env this process has open there, if any.
    pub(crate) fn lookup(
        dir: &Path,
    ) -> Result<(PathBuf, Registry, Option<Arc<Index>>), IndexError> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| IndexError::io(dir, e))?;
        let key = dir.canonicalize().map_err(|e| IndexError::io(dir, e))?;
        let reg = registry().lock().map_err(|_| IndexError::Poisoned)?;
        let open = reg.get(&key).and_then(Weak::upgrade);
        Ok((key, reg, open))
    }

    pub(crate) fn register(reg: &mut Registry, key: PathBuf, index: &Arc<Index>) {
        reg.retain(|_, w| w.strong_count() > 0);
        let _ = index.me.set(Arc::downgrade(index));
        reg.insert(key, Arc::downgrade(index));
    }

    pub(crate) fn open_uncached(dir: &Path, opts: &OpenOptions) -> Result<Index, IndexError> {
        let open_lock = open_lock_file(dir)?;
        flock(&open_lock, libc::LOCK_SH)
            .map_err(|e| IndexError::io(dir.join(OPEN_LOCK_FILE), e))?;
        let existing = fs::metadata(dir.join(DATA_FILE))
            .map(|m| m.len() as usize)
            .unwrap_or(0);
        let mut env_opts = EnvOpenOptions::new().read_txn_without_tls();
        env_opts.map_size(page_round(opts.map_size.max(existing * 2).max(1 << 20)));
        env_opts.max_dbs(MAX_DBS);
        env_opts.max_readers(1024);
        if opts.durable {
            // The index is not where mail is made durable: a delivery's file, folder and
            // dovecot-uidlist record are on disk before its index commit, and a sync
            // re-indexes from them. So a commit fdatasyncs its pages but does not wait for
            // its meta page (MDB_NOMETASYNC), which the next commit's fdatasync or the
            // kernel's writeback carries to disk: LMDB keeps the database whole (the
            // previous meta's pages are never reused before this meta is synced), and a
            // power loss can only undo each env's last commit, which the next sync redoes
            // from the Maildir. One synchronous write less per delivery (LMTP throughput
            // +20%, docs/BENCHMARKS.md); a process crash loses nothing (the page cache
            // holds the meta page).
            // SAFETY: NO_META_SYNC only weakens the durability of the last commit.
            unsafe { env_opts.flags(EnvFlags::NO_META_SYNC) };
        } else {
            // SAFETY: NO_SYNC only weakens durability (a crash may lose the last commits);
            // it is used by tests and benchmarks, never by the daemon's default.
            unsafe { env_opts.flags(EnvFlags::NO_SYNC) };
        }
        // SAFETY: the env is opened once per process (registry above); LMDB's own lock file
        // coordinates with other processes; the folder must be on a local filesystem
        // (documented for `index_root`); nothing else writes these files.
        let env = unsafe { env_opts.open(dir) }.map_err(|e| IndexError::lmdb(dir, e))?;
        let cell = EnvCell::try_new(env, |env| -> Result<Dbs<'_>, IndexError> {
            let wtxn = env.write_txn().map_err(|e| IndexError::lmdb(dir, e))?;
            let dbs = env
                .create_databases_and_commit(wtxn, |dbo, wtxn| -> Result<_, heed::Error> {
                    let meta = dbo.create_database(wtxn, Some(schema::DB_META))?;
                    let names = dbo.create_database(wtxn, Some(schema::DB_MAILBOX_NAMES))?;
                    let boxes = dbo.create_database(wtxn, Some(schema::DB_MAILBOXES))?;
                    let msgs = dbo.create_database(wtxn, Some(schema::DB_MESSAGES))?;
                    let flags = dbo.create_database(wtxn, Some(schema::DB_FLAGS))?;
                    let hot = dbo.create_database(wtxn, Some(schema::DB_CACHE_HOT))?;
                    let env = dbo.create_database(wtxn, Some(schema::DB_CACHE_ENVELOPE))?;
                    let st = dbo.create_database(wtxn, Some(schema::DB_CACHE_STRUCTURE))?;
                    let sort = dbo.create_database(wtxn, Some(schema::DB_CACHE_SORT))?;
                    let search = dbo.create_database(wtxn, Some(schema::DB_CACHE_SEARCH))?;
                    let text = dbo.create_database(wtxn, Some(schema::DB_FTS_TEXT))?;
                    let sig = dbo.create_database(wtxn, Some(schema::DB_FTS_SIG))?;
                    let words = dbo.create_database(wtxn, Some(schema::DB_FTS_WORDS))?;
                    let hdrs = dbo.create_database(wtxn, Some(schema::DB_HEADERS))?;
                    let changes = dbo.create_database(wtxn, Some(schema::DB_CHANGES))?;
                    let expunged = dbo.create_database(wtxn, Some(schema::DB_EXPUNGED))?;
                    Ok(CommitOrAbort::<_, ()>::Commit((
                        meta,
                        names,
                        boxes,
                        (msgs, flags),
                        (hot, env, st, sort, search, (text, sig, words)),
                        (hdrs, changes, expunged),
                    )))
                })
                .map_err(|e| IndexError::lmdb(dir, e))?
                .unwrap_commit();
            let (meta, mailbox_names, mailboxes, (messages, flags), cache, log) = dbs;
            let (cache_hot, cache_envelope, cache_structure, cache_sort, cache_search, fts) = cache;
            let (fts_text, fts_sig, fts_words) = fts;
            let (headers, changes, expunged) = log;
            Ok(Dbs {
                meta,
                mailbox_names,
                mailboxes,
                messages,
                flags,
                cache_hot,
                cache_envelope,
                cache_structure,
                cache_sort,
                cache_search,
                fts_text,
                fts_sig,
                fts_words,
                headers,
                changes,
                expunged,
                modseq_floor: crate::txn::modseq_floor(),
            })
        })?;
        let index = Index {
            path: dir.to_path_buf(),
            cell,
            resize: RwLock::new(()),
            group: Mutex::new(Group::default()),
            group_changed: std::sync::Condvar::new(),
            commits: std::sync::atomic::AtomicU64::new(0),
            listeners: Mutex::new(Vec::new()),
            deferred: std::sync::atomic::AtomicBool::new(false),
            unsynced: std::sync::atomic::AtomicBool::new(!opts.durable),
            lazy: crate::lazy::Lazy::new(opts),
            me: OnceLock::new(),
            _open_lock: open_lock,
        };
        index.check_schema()?;
        Ok(index)
    }

    /// Verifies (or, in a new env, writes) the schema version.
    fn check_schema(&self) -> Result<(), IndexError> {
        let found = self.read(|r| r.schema_version())?;
        match found {
            Some(v) if v == SCHEMA_VERSION => Ok(()),
            Some(v) if v < SCHEMA_VERSION && self.write_retrying(move |w| w.migrate(v))? => Ok(()),
            Some(v) => Err(IndexError::SchemaMismatch {
                path: self.path.clone(),
                found: v,
            }),
            None => self.write(|w| w.init_schema()),
        }
    }

    /// The folder holding this env.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` in a read transaction. The transaction ends when `f` returns: never hold
    /// data from it across an await, an IDLE or a network write (long readers make LMDB
    /// files grow without bound), which the closure shape enforces.
    pub fn read<R>(
        &self,
        f: impl FnOnce(&Reader<'_>) -> Result<R, IndexError>,
    ) -> Result<R, IndexError> {
        self.cell.with_dependent(|env, dbs| {
            let (guard, txn) = loop {
                let guard = self.resize.read().map_err(|_| IndexError::Poisoned)?;
                match env.read_txn() {
                    Ok(txn) => break (guard, txn),
                    Err(heed::Error::Mdb(heed::MdbError::MapResized)) => {
                        drop(guard);
                        self.adopt_map_size(env)?;
                    }
                    Err(e) => return Err(IndexError::lmdb(&self.path, e)),
                }
            };
            let out = f(&Reader::new(dbs, &txn));
            drop(txn);
            drop(guard);
            out
        })
    }

    /// Write transactions that changed the index, committed by this process since the env
    /// was opened; one whose every change was quiet ([`Writer::quietly`]) is not counted.
    ///
    /// [`Writer::quietly`]: crate::Writer::quietly
    pub fn commits(&self) -> u64 {
        self.commits.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Calls `listener` after every commit of this process that changed the index (each
    /// carrying any number of writers' changes) until the last `Arc` of it is dropped.
    /// Commits of other processes (the CLI, another daemon) are not seen here.
    pub fn add_commit_listener(&self, listener: &Arc<CommitListener>) {
        let mut l = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
        l.retain(|w| w.strong_count() > 0);
        l.push(Arc::downgrade(listener));
    }

    fn notify(&self, generation: u64) {
        let live: Vec<Arc<CommitListener>> = {
            let mut l = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
            l.retain(|w| w.strong_count() > 0);
            l.iter().filter_map(std::sync::Weak::upgrade).collect()
        };
        for listener in live {
            listener(generation);
        }
    }

    /// LMDB's id of the last committed write transaction, by any process: unchanged, the
    /// index holds what it held when it was read last (quiet commits count too).
    pub fn last_txn_id(&self) -> u64 {
        let _guard = self.resize.read().unwrap_or_else(|p| p.into_inner());
        self.cell
            .with_dependent(|env, _| u64::try_from(env.info().last_txn_id).unwrap_or(u64::MAX))
    }

    /// Map size in use and bytes actually used by the data file's pages.
    pub fn usage(&self) -> (usize, usize) {
        let _guard = self.resize.read().unwrap_or_else(|p| p.into_inner());
        self.cell.with_dependent(|env, _| {
            let info = env.info();
            (info.map_size, (info.last_page_number + 1) * page_size())
        })
    }

    /// Grows the map ahead of a batch when more than 70% of it is used, so that a batch
    /// rarely meets MDB_MAP_FULL.
    fn grow_if_needed(&self) -> Result<(), IndexError> {
        let (map, used) = self.usage();
        if used.saturating_mul(10) > map.saturating_mul(7) {
            self.cell.with_dependent(|env, _| self.grow(env, 2))
        } else {
            Ok(())
        }
    }

    fn grow(&self, env: &Env<WithoutTls>, factor: usize) -> Result<(), IndexError> {
        let _guard = self.resize.write().map_err(|_| IndexError::Poisoned)?;
        let info = env.info();
        let used = (info.last_page_number + 1) * page_size();
        let new_size = page_round(info.map_size.saturating_mul(factor).max(used * 2));
        tracing::info!(index = %self.path.display(), from = info.map_size, to = new_size, "growing LMDB map");
        // SAFETY: the exclusive resize lock guarantees that no transaction of this process
        // is open (every read and write holds the lock shared while its txn lives).
        unsafe { env.resize(new_size) }.map_err(|e| IndexError::lmdb(&self.path, e))
    }

    /// Turns the syncing of commits on (as a durable env is opened: data pages synced, the
    /// meta page carried by the next commit) after forcing everything committed so far to
    /// disk, or off (MDB_NOSYNC).
    pub(crate) fn set_synced(&self, on: bool) -> Result<(), IndexError> {
        let _guard = self.resize.write().map_err(|_| IndexError::Poisoned)?;
        self.cell.with_dependent(|env, _| {
            let lmdb = |e| IndexError::lmdb(&self.path, e);
            // SAFETY: the exclusive resize lock guarantees that no transaction of this
            // process is open while the flags change (LMDB reads them at commit); the
            // flags only weaken or restore the durability of commits.
            unsafe {
                if on {
                    env.set_flags(EnvFlags::NO_META_SYNC, heed::FlagSetMode::Enable)
                        .map_err(lmdb)?;
                    env.set_flags(EnvFlags::NO_SYNC, heed::FlagSetMode::Disable)
                        .map_err(lmdb)?;
                } else {
                    env.set_flags(EnvFlags::NO_SYNC, heed::FlagSetMode::Enable)
                        .map_err(lmdb)?;
                }
            }
            self.unsynced
                .store(!on, std::sync::atomic::Ordering::SeqCst);
            if on {
                env.force_sync().map_err(lmdb)?;
            }
            Ok(())
        })
    }

    /// Makes every commit so far durable (one fdatasync of the data file).
    pub(crate) fn force_sync(&self) -> Result<(), IndexError> {
        let _guard = self.resize.read().map_err(|_| IndexError::Poisoned)?;
        self.cell
            .with_dependent(|env, _| env.force_sync())
            .map_err(|e| IndexError::lmdb(&self.path, e))
    }

    /// Another process grew the map: adopt its size (MDB_MAP_RESIZED).
    fn adopt_map_size(&self, env: &Env<WithoutTls>) -> Result<(), IndexError> {
        let _guard = self.resize.write().map_err(|_| IndexError::Poisoned)?;
        // SAFETY: as in `grow`; size 0 asks LMDB to adopt the size another process set.
        unsafe { env.resize(0) }.map_err(|e| IndexError::lmdb(&self.path, e))
    }
}

/// The size of an LMDB page here (the system's page size, as LMDB takes it).
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// Takes the env in `dir` for this process alone: fails with [`IndexError::InUse`] while any
/// process (this one included) has it open. The env stays reserved while the file lives.
pub fn lock_exclusive(dir: &Path) -> Result<File, IndexError> {
    let lock = open_lock_file(dir)?;
    match flock(&lock, libc::LOCK_EX | libc::LOCK_NB) {
        Ok(()) => Ok(lock),
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Err(IndexError::InUse {
            path: dir.to_path_buf(),
        }),
        Err(e) => Err(IndexError::io(dir.join(OPEN_LOCK_FILE), e)),
    }
}
