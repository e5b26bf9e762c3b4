//! `maildex index compact`: the env rewritten into a fresh file with every page full.
//!
//! LMDB's own compacting copy (`mdb_env_copy2` with `MDB_CP_COMPACT`) leaves out the free
//! pages but copies every page as it is, and the leaves of the databases written a
//! transaction at a time in key order (the change log, `messages`, the word lists) are
//! half to three quarters full (LMDB splits a full leaf about in half unless a put says
//! it appends): on the 10,000-message corpus `changes` used 126 pages for 10,000
//! entries of 26 bytes, `fts-words` 1,653 for 46,188 entries (59% full). Here each
//! database is read in key order and written into a new env with `MDB_APPEND`, which
//! fills each leaf before it starts the next: the same corpus took 872 fewer pages (6.5%
//! of the index; `changes` 66 pages, `fts-words` 1,009, docs/BENCHMARKS.md "`index
//! compact` with full pages").

use std::fs::{self, File};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions, PutFlags, WithoutTls};

use super::{lock_exclusive, page_round, page_size, DATA_FILE, MAX_DBS};
use crate::IndexError;

/// The folder, inside the index's, where the new env is written before its data file
/// replaces the old one (removed again after; one left by a compaction cut short is
/// removed by the next).
const SCRATCH: &str = "compact.tmp";

/// Replaces the env in `dir` with a compacted copy. Refuses (with [`IndexError::InUse`])
/// while any process, this one included, has the env open: the copy replaces the data
/// file, which an open env would keep writing to. Returns the data file's size before and
/// after.
pub fn compact(dir: &Path) -> Result<(u64, u64), IndexError> {
    let lock = lock_exclusive(dir)?;
    let data = dir.join(DATA_FILE);
    let before = fs::metadata(&data)
        .map_err(|e| IndexError::io(&data, e))?
        .len();
    // the temporary file of the LMDB copy that compacted before
    let _ = fs::remove_file(dir.join("data.mdb.compact"));
    let scratch = dir.join(SCRATCH);
    if scratch.exists() {
        fs::remove_dir_all(&scratch).map_err(|e| IndexError::io(&scratch, e))?;
    }
    fs::DirBuilder::new()
        .mode(0o700)
        .create(&scratch)
        .map_err(|e| IndexError::io(&scratch, e))?;
    let copied = scratch.join(DATA_FILE);
    // the reload needs no more pages than the old file holds (its pages at least as
    // full); slack for the free list of its commits, one per database
    let size = before as usize + before as usize / 64 + 64 * page_size();
    reload(dir, &scratch, size)?;
    // the new file gets the old one's owner and mode (0600, docs/SECURITY.md) before it
    // replaces it: LMDB creates it with the umask's mode (0644 as a rule)
    let old = fs::metadata(&data).map_err(|e| IndexError::io(&data, e))?;
    let copy = File::open(&copied).map_err(|e| IndexError::io(&copied, e))?;
    copy.set_permissions(fs::Permissions::from_mode(old.mode() & 0o7777))
        .and_then(|()| match copy.metadata() {
            Ok(m) if (m.uid(), m.gid()) != (old.uid(), old.gid()) => {
                std::os::unix::fs::fchown(&copy, Some(old.uid()), Some(old.gid()))
            }
            other => other.map(drop),
        })
        .and_then(|()| copy.sync_all())
        .map_err(|e| IndexError::io(&copied, e))?;
    fs::rename(&copied, &data).map_err(|e| IndexError::io(&data, e))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| IndexError::io(dir, e))?;
    fs::remove_dir_all(&scratch).map_err(|e| IndexError::io(&scratch, e))?;
    let after = fs::metadata(&data)
        .map_err(|e| IndexError::io(&data, e))?
        .len();
    drop(lock);
    Ok((before, after))
}

/// Copies every database of the env in `from` into a new env in `to` (of map size
/// `size`), in key order with `MDB_APPEND`, and syncs it once at the end.
fn reload(from: &Path, to: &Path, size: usize) -> Result<(), IndexError> {
    let options = || {
        let mut opts = EnvOpenOptions::new().read_txn_without_tls();
        opts.map_size(page_round(size.max(1 << 20)));
        opts.max_dbs(MAX_DBS);
        opts
    };
    // SAFETY: the caller holds the exclusive open lock, so no maildex process has the
    // env open; the new one is ours alone.
    let src = unsafe { options().open(from) }.map_err(lmdb(from))?;
    let mut dst_opts = options();
    // SAFETY: as above; NO_SYNC only weakens durability, and the file is synced whole
    // (force_sync, then fsync by the caller) before it replaces the old one.
    unsafe { dst_opts.flags(EnvFlags::NO_SYNC) };
    // SAFETY: a folder of our own, made empty just now.
    let dst = unsafe { dst_opts.open(to) }.map_err(lmdb(to))?;
    // the unnamed database holds one record per named database, and nothing else
    let main =
        open_db(&src, None, from)?.ok_or_else(|| IndexError::Corrupt("no main database".into()))?;
    let mut names = Vec::new();
    {
        let rtxn = src.read_txn().map_err(lmdb(from))?;
        for item in main.iter(&rtxn).map_err(lmdb(from))? {
            let (name, _) = item.map_err(lmdb(from))?;
            let name = std::str::from_utf8(name)
                .map_err(|_| IndexError::Corrupt("a database name that is not UTF-8".into()))?;
            names.push(name.to_owned());
        }
    }
    for name in &names {
        let db = open_db(&src, Some(name), from)?
            .ok_or_else(|| IndexError::Corrupt(format!("database {name} listed but absent")))?;
        // heed makes a database in a commit of its own
        let wtxn = dst.write_txn().map_err(lmdb(to))?;
        let into = dst
            .create_databases_and_commit(wtxn, |dbo, wtxn| -> Result<_, heed::Error> {
                let db = dbo.create_database::<Bytes, Bytes>(wtxn, Some(name))?;
                Ok(CommitOrAbort::<_, ()>::Commit(db))
            })
            .map_err(lmdb(to))?
            .unwrap_commit();
        let rtxn = src.read_txn().map_err(lmdb(from))?;
        let mut wtxn = dst.write_txn().map_err(lmdb(to))?;
        for item in db.iter(&rtxn).map_err(lmdb(from))? {
            let (k, v) = item.map_err(lmdb(from))?;
            into.put_with_flags(&mut wtxn, PutFlags::APPEND, k, v)
                .map_err(lmdb(to))?;
        }
        wtxn.commit().map_err(lmdb(to))?;
    }
    dst.force_sync().map_err(lmdb(to))?;
    src.prepare_for_closing().wait();
    dst.prepare_for_closing().wait();
    Ok(())
}

/// The database `name` of `env` (the unnamed one for `None`), if it exists.
fn open_db<'e>(
    env: &'e Env<WithoutTls>,
    name: Option<&str>,
    path: &Path,
) -> Result<Option<Database<'e, Bytes, Bytes>>, IndexError> {
    let rtxn = env.read_txn().map_err(lmdb(path))?;
    Ok(env
        .open_databases_and_commit(rtxn, |dbo, rtxn| -> Result<_, heed::Error> {
            let db = dbo.open_database::<Bytes, Bytes>(rtxn, name)?;
            Ok(CommitOrAbort::<_, ()>::Commit(db))
        })
        .map_err(lmdb(path))?
        .unwrap_commit())
}

/// Maps a heed error on the env at `path` (a closure for `map_err`).
fn lmdb(path: &Path) -> impl Fn(heed::Error) -> IndexError + '_ {
    move |e| IndexError::lmdb(path, e)
}
