//! Commits left unsynced for a few seconds, covered by a marker of the machine's boot
//! (issue 15 #22: a flag change waited for an fdatasync of the index, where Dovecot syncs
//! nothing for one; issue 19 #4: the index commit was one of four flushes per delivery).
//!
//! LMDB keeps a database whole across a process crash whatever its sync settings (every
//! committed page is in the kernel's page cache), but with `MDB_NOSYNC` a power loss or
//! a kernel crash can leave the meta page on disk naming pages that never reached it.
//! So an env whose commits go unsynced is marked first: [`UNSYNCED_FILE`], holding the
//! kernel's id of this boot (`/proc/sys/kernel/random/boot_id`), its directory entry
//! made durable before the first unsynced commit. A checkpoint ([`Index::checkpoint`],
//! run by one background thread `delay` after the env was marked, and by
//! [`sync_unsynced`] when the daemon stops) syncs the env and removes the marker; the
//! next commit marks it again. The marker costs one flush per env per `delay`, where
//! syncing each commit cost one per commit.
//!
//! An opener that finds the marker ([`inspect`], before LMDB opens the env):
//! - from this boot: the machine did not go down since the commits, so the env is whole
//!   (a process crash loses nothing of the page cache); the opener that has it alone
//!   syncs it and removes the marker;
//! - from another boot, or unreadable (its content may not have reached the disk; the
//!   marker's file data is not synced, only its name): the env may be torn. It is deleted,
//!   and the store indexes the Maildir afresh, as after a rebuild cut short
//!   (docs/RELIABILITY.md): UIDs, UIDVALIDITY and keywords are in dovecot-uidlist and
//!   dovecot-keywords, flags in the file names, which every write makes durable before
//!   its index commit as it did when the commit was synced.
//!
//! Without a boot id (no /proc), commits are synced as before.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::fresh::{remove_if_there, sync_dir};
use crate::{Index, IndexError, DATA_FILE, LOCK_FILE};

/// The marker of an env with commits not yet synced; holds the boot id.
pub const UNSYNCED_FILE: &str = "unsynced.boot";

/// The kernel's id of the running boot, once per process; None where there is none.
fn boot_id() -> Option<&'static str> {
    static ID: OnceLock<Option<String>> = OnceLock::new();
    ID.get_or_init(|| {
        let id = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let id = id.trim();
        (!id.is_empty()).then(|| id.to_string())
    })
    .as_deref()
}

/// An env's unsynced-commit state ([`Index::lazy`]), for an env whose commits would
/// otherwise be synced.
pub(crate) struct Lazy {
    delay: Duration,
    /// When the marker was made durable; None while there is none.
    marked_at: Mutex<Option<Instant>>,
}

impl Lazy {
    /// Some when `opts` asks for unsynced commits and they can be covered.
    pub(crate) fn new(opts: &crate::OpenOptions) -> Option<Lazy> {
        let delay = opts.sync_delay?;
        (opts.durable && boot_id().is_some()).then(|| Lazy {
            delay,
            marked_at: Mutex::new(None),
        })
    }
}

/// What an opener that holds the env in `dir` alone (no process has it open) does about
/// a marker found there (see the module docs).
pub(crate) fn inspect(dir: &Path) -> Result<(), IndexError> {
    let marker = dir.join(UNSYNCED_FILE);
    let found = match fs::read_to_string(&marker) {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        // unreadable: treated as a marker of another boot
        Err(_) => String::new(),
    };
    let same_boot = boot_id().is_some_and(|id| found.trim() == id);
    if same_boot {
        // the page cache holds every commit: one sync makes them durable
        let data = dir.join(DATA_FILE);
        match File::open(&data).and_then(|f| f.sync_data()) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(IndexError::io(&data, e)),
        }
        remove_if_there(&marker)?;
        return sync_dir(dir);
    }
    tracing::warn!(index = %dir.display(), "index with commits unsynced when the machine went down; deleting it (the Maildir holds everything it held)");
    remove_if_there(&dir.join(DATA_FILE))?;
    remove_if_there(&dir.join(LOCK_FILE))?;
    remove_if_there(&marker)?;
    sync_dir(dir)
}

/// Envs with a marker, each with the time of its checkpoint, and the thread that runs
/// them. Holds the envs open until then.
struct Due {
    envs: Mutex<Vec<(Instant, Arc<Index>)>>,
    changed: Condvar,
}

fn due() -> &'static Due {
    static DUE: OnceLock<Due> = OnceLock::new();
    static THREAD: OnceLock<()> = OnceLock::new();
    let d = DUE.get_or_init(|| Due {
        envs: Mutex::new(Vec::new()),
        changed: Condvar::new(),
    });
    THREAD.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("index-checkpoint".into())
            .spawn(checkpoint_loop);
        if let Err(e) = spawned {
            // the envs then wait for `sync_unsynced` or their next open
            tracing::error!(error = %e, "could not start the index checkpoint thread");
        }
    });
    d
}

fn checkpoint_loop() {
    let d = due();
    loop {
        let ready: Vec<Arc<Index>> = {
            let mut envs = d.envs.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            match envs.iter().map(|(at, _)| *at).min() {
                None => {
                    drop(d.changed.wait(envs).unwrap_or_else(|p| p.into_inner()));
                    continue;
                }
                Some(at) if at > now => {
                    drop(d.changed.wait_timeout(envs, at - now));
                    continue;
                }
                Some(_) => {
                    let (ready, later) = std::mem::take(&mut *envs)
                        .into_iter()
                        .partition(|(at, _)| *at <= now);
                    *envs = later;
                    ready.into_iter().map(|(_, index)| index).collect()
                }
            }
        };
        for index in ready {
            if let Err(e) = index.checkpoint() {
                tracing::warn!(index = %index.path().display(), error = %e, "index checkpoint failed; trying again later");
                let at = Instant::now() + index.lazy.as_ref().map_or(Duration::ZERO, |l| l.delay);
                d.envs
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((at, index));
            }
        }
    }
}

/// Syncs every env of this process that has unsynced commits and removes their markers
/// (the daemon calls it as it stops). Blocks; the first error is returned, after the
/// others were tried.
pub fn sync_unsynced() -> Result<(), IndexError> {
    let all = std::mem::take(&mut *due().envs.lock().unwrap_or_else(|p| p.into_inner()));
    tracing::debug!(envs = all.len(), "syncing the indexes' unsynced commits");
    let mut first = Ok(());
    for (_, index) in all {
        let done = index.checkpoint();
        if first.is_ok() {
            first = done;
        }
    }
    first
}

impl Index {
    /// Called by a batch's leader before its write transaction begins: marks the env
    /// (once per checkpoint) so that the commit can go unsynced, or, when the marker
    /// cannot be made, turns syncing back on for this commit. An error (syncing could
    /// not be turned back on for an unmarked env) fails the batch: an unmarked env must
    /// not take an unsynced commit.
    pub(crate) fn before_commit(&self) -> Result<(), IndexError> {
        let Some(lazy) = &self.lazy else {
            return Ok(());
        };
        if self.deferred.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut marked_at = lazy.marked_at.lock().unwrap_or_else(|p| p.into_inner());
        // an env still being opened (its schema's commit) has no `Arc` to hand to the
        // checkpoint thread yet: that commit is synced
        let me = self.me.get().and_then(std::sync::Weak::upgrade);
        if let (None, Some(me)) = (*marked_at, me) {
            match self.write_marker() {
                Ok(()) => {
                    let now = Instant::now();
                    *marked_at = Some(now);
                    let d = due();
                    d.envs
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((now + lazy.delay, me));
                    d.changed.notify_all();
                }
                Err(e) => {
                    tracing::warn!(index = %self.path().display(), error = %e, "could not mark the index; syncing its commits");
                }
            }
        }
        let unsynced = marked_at.is_some();
        if unsynced != self.unsynced.load(Ordering::SeqCst) {
            match self.set_synced(!unsynced) {
                Ok(()) => {}
                // marked and still synced: safe, only slower
                Err(e) if unsynced => {
                    tracing::warn!(index = %self.path().display(), error = %e, "could not stop syncing the index's commits");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The marker: its name made durable (one flush), its content (the boot id) not (a
    /// marker found empty is taken for another boot's, which is the safe side).
    fn write_marker(&self) -> Result<(), IndexError> {
        let id = boot_id().unwrap_or_default();
        let marker = self.path().join(UNSYNCED_FILE);
        fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&marker)
            .and_then(|mut f| f.write_all(id.as_bytes()))
            .map_err(|e| IndexError::io(&marker, e))?;
        sync_dir(self.path())
    }

    /// Makes this env's unsynced commits durable and removes its marker (see the module
    /// docs); nothing to do when it has none. Waits for the batch being committed, and
    /// holds the next ones until done.
    pub fn checkpoint(&self) -> Result<(), IndexError> {
        let Some(lazy) = &self.lazy else {
            return Ok(());
        };
        let _leading = self.lead();
        let mut marked_at = lazy.marked_at.lock().unwrap_or_else(|p| p.into_inner());
        if marked_at.is_none() {
            return Ok(());
        }
        self.force_sync()?;
        remove_if_there(&self.path().join(UNSYNCED_FILE))?;
        *marked_at = None;
        // a removal lost in a power loss only costs the env a rebuild
        sync_dir(self.path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OpenOptions;

    fn opts() -> OpenOptions {
        OpenOptions {
            map_size: 1 << 20,
            durable: true,
            sync_delay: Some(Duration::from_secs(3600)),
        }
    }

    /// The tests share the process's checkpoint list ([`sync_unsynced`] takes every
    /// env's), so they run one at a time.
    fn alone() -> std::sync::MutexGuard<'static, ()> {
        static ONE: Mutex<()> = Mutex::new(());
        ONE.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The env in `dir` holding INBOX, synced and closed (no checkpoint pending).
    fn closed_with_inbox(dir: &Path) {
        let index = Index::open(dir, &opts()).unwrap();
        index.write(|w| w.create_mailbox("INBOX", 7)).unwrap();
        sync_unsynced().unwrap();
    }

    fn marked(dir: &Path) -> Option<String> {
        fs::read_to_string(dir.join(UNSYNCED_FILE)).ok()
    }

    #[test]
    fn a_commit_marks_the_env_and_a_checkpoint_unmarks_it() {
        if boot_id().is_none() {
            return; // no /proc: commits are synced, nothing to mark
        }
        let _one = alone();
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("idx");
        let index = Index::open(&dir, &opts()).unwrap();
        index.write(|w| w.create_mailbox("INBOX", 7)).unwrap();
        assert_eq!(marked(&dir).as_deref(), boot_id());
        let mode = fs::metadata(dir.join(UNSYNCED_FILE)).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
            0o600
        );
        index.checkpoint().unwrap();
        assert_eq!(marked(&dir), None);
        // the next commit marks it again; sync_unsynced clears every env
        index.write(|w| w.create_mailbox("Sent", 8)).unwrap();
        assert!(marked(&dir).is_some());
        sync_unsynced().unwrap();
        assert_eq!(marked(&dir), None);
        assert_eq!(index.read(|r| r.mailboxes()).unwrap().len(), 2);
    }

    #[test]
    fn a_marker_of_this_boot_keeps_the_env_and_one_of_another_boot_deletes_it() {
        if boot_id().is_none() {
            return;
        }
        let _one = alone();
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("idx");
        closed_with_inbox(&dir);
        // a process killed with its marker in place: same boot, the env is whole
        fs::write(dir.join(UNSYNCED_FILE), boot_id().unwrap()).unwrap();
        let index = Index::open(&dir, &opts()).unwrap();
        assert_eq!(marked(&dir), None);
        assert_eq!(index.read(|r| r.mailboxes()).unwrap().len(), 1);
        drop(index);
        // the machine went down: another boot's id, or an empty marker
        for left in ["00000000-0000-0000-0000-000000000000", ""] {
            closed_with_inbox(&dir);
            fs::write(dir.join(UNSYNCED_FILE), left).unwrap();
            let index = Index::open(&dir, &opts()).unwrap();
            assert_eq!(index.read(|r| r.mailboxes()).unwrap().len(), 0, "{left:?}");
            // the new env's first commit (its schema, during the open) was synced
            assert_eq!(marked(&dir), None);
        }
    }

    #[test]
    fn a_marker_is_left_alone_while_another_opener_has_the_env() {
        if boot_id().is_none() {
            return;
        }
        let _one = alone();
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("idx");
        closed_with_inbox(&dir);
        // another process has the env open (its shared lock): the marker is its own
        let other = crate::env::open_lock_file(&dir).unwrap();
        crate::env::flock(&other, libc::LOCK_SH).unwrap();
        fs::write(dir.join(UNSYNCED_FILE), "another boot").unwrap();
        let index = Index::open(&dir, &opts()).unwrap();
        assert_eq!(marked(&dir).as_deref(), Some("another boot"));
        assert_eq!(index.read(|r| r.mailboxes()).unwrap().len(), 1);
    }

    #[test]
    fn without_a_delay_commits_are_synced_and_unmarked() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("idx");
        let synced = OpenOptions {
            sync_delay: None,
            ..opts()
        };
        let index = Index::open(&dir, &synced).unwrap();
        index.write(|w| w.create_mailbox("INBOX", 7)).unwrap();
        assert_eq!(marked(&dir), None);
    }
}
