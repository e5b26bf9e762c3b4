//! Knowing, without listing a folder, that no other process touched it since the last
//! complete sync (issue 17: a QRESYNC after the daemon's own changes).
//!
//! Every rename, link or unlink moves the directory's mtime, so after any change (this
//! process's STOREs and EXPUNGEs included) the stamps no longer vouch for the index and the
//! next sync lists the folder: 30,000 names read, parsed and matched with the index, for
//! changes the index holds already. Trusting the mtime after our own change is not safe
//! (another process's change in the same timestamp tick leaves it as ours left it), so a
//! mailbox in use is watched instead:
//!
//! - An inotify watch on its `new/` and `cur/`, one instance for the process, read only
//!   here, synchronously (the IDLE watcher in `watch.rs` has its own instance: its event
//!   task would otherwise take events this reader must see). Events are queued by the
//!   kernel inside the system call that causes them, so once a call has returned its event
//!   is in the queue (or `IN_Q_OVERFLOW` is).
//! - This process's writes record what they did to which name
//!   ([`own_writes::done`]), confirmed only once the operation committed the index
//!   ([`own_writes::Scope`]): an operation that failed leaves its events unexplained.
//! - A sync, holding the mailbox exclusively (so every write of this process to it has
//!   returned and confirmed, see `MailboxSerial`), reads the queue empty ([`look`]) and
//!   matches each event of the folder with a confirmed record, as a multiset of (name,
//!   appeared/gone). If the folder's watch was in place before the last complete sync's
//!   look at the folder ([`settled`]: the *baseline*) and every event since is matched,
//!   nothing but this process's confirmed writes changed the folder, and the index holds
//!   them: the listing is skipped. Otherwise (an unmatched event: another process's change;
//!   `IN_Q_OVERFLOW`; `IN_IGNORED`, `IN_DELETE_SELF`, `IN_MOVE_SELF`, `IN_UNMOUNT`; a watch
//!   added at this look; a folder whose inode is no longer the watched one, say renamed
//!   away with its parent and replaced) the folder is listed as before, and a complete
//!   listing sets a new baseline.
//!
//! Why this cannot hide another process's change: each such change to `new/` or `cur/`
//! (create, link, rename, unlink) queues at least one event naming the file and what
//! happened to its name. To pass, that event must be matched by a confirmed record of ours
//! of the same name, folder and kind, whose own event must then also be in the queue (our
//! call succeeded, so it queued one) and be left unmatched: the counts cannot balance. A
//! record whose event never came (a rename onto the same file) is dropped at the end of
//! the look that finds it unmatched, so it cannot absorb a later event. The mtime plays no
//! part, so the timestamp tick does not matter.
//!
//! Bounded: at most [`MAX_FOLDERS`] mailboxes are tracked (two watches each); when a new
//! one would pass the bound, the eighth used least recently goes, and a mailbox not looked
//! at for [`IDLE_DROP`] is dropped (within a minute after). An
//! untracked mailbox is synced from its stamps as before. Events of folders not being
//! looked at are kept (at most [`MAX_PENDING`] per folder, then the folder counts as
//! changed) until their folder's own look, which alone can judge them: only then are the
//! writes to it known to be confirmed.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};
use maildex_maildir::own_writes::{self, Change};

/// Most mailboxes tracked at once (two inotify watches each).
pub const MAX_FOLDERS: usize = 512;
/// A mailbox not looked at for this long stops being tracked.
pub const IDLE_DROP: Duration = Duration::from_secs(15 * 60);
/// How often a look drops the idle mailboxes: a walk of every tracked mailbox at each
/// look cost about 80 us with 512 of them, most of a rebuild of many small users' CPU
/// (`perf record`, issue 19 #1), and a command's sync in a daemon serving that many.
const SWEEP_EVERY: Duration = Duration::from_secs(60);
/// Most events kept for one mailbox between its looks.
pub const MAX_PENDING: usize = 16 * 1024;

const SUBS: [&str; 2] = ["new", "cur"];

const MASK: WatchMask = WatchMask::CREATE
    .union(WatchMask::DELETE)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::DELETE_SELF)
    .union(WatchMask::MOVE_SELF)
    .union(WatchMask::ONLYDIR)
    .union(WatchMask::DONT_FOLLOW);

/// What a look found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Look {
    /// Since the baseline only this process's confirmed writes changed the folder.
    Clean,
    /// Since the baseline something else happened: list, whatever the stamps say.
    Changed,
    /// No baseline (not tracked, or watched only from this look on): the stamps decide.
    Unknown,
}

struct Folder {
    /// Watches of `new/` and `cur/`.
    wds: [WatchDescriptor; 2],
    /// Inodes of `new/` and `cur/` when they were watched.
    inos: [u64; 2],
    /// A complete sync set a baseline (since it was watched).
    baseline: bool,
    /// Since the baseline nothing unexplained happened.
    clean: bool,
    /// Events of `new/` and `cur/` not judged yet.
    pending: [Vec<(OsString, Change)>; 2],
    last_used: Instant,
    /// Listings of the folder while it was tracked (tests).
    listings: u64,
}

struct Tracker {
    inotify: Inotify,
    folders: HashMap<PathBuf, Folder>,
    by_wd: HashMap<WatchDescriptor, (PathBuf, usize)>,
    buf: Vec<u8>,
    /// `IN_Q_OVERFLOW`s read (tests).
    overflows: u64,
    /// When the idle mailboxes were last dropped ([`SWEEP_EVERY`]).
    swept: Instant,
}

/// `None` inside: inotify could not be started (every mailbox is synced as before).
static TRACKER: Mutex<Option<Option<Tracker>>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut Tracker) -> R) -> Option<R> {
    let mut guard = TRACKER.lock().unwrap_or_else(|p| p.into_inner());
    let slot = guard.get_or_insert_with(|| match Tracker::new() {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!(error = %e, "inotify unavailable; every sync after a change lists the folder");
            None
        }
    });
    slot.as_mut().map(f)
}

/// Looks at mailbox folder `dir`, whose `new/` and `cur/` have the inodes `inos` now (the
/// caller stat'ed them before this call). The caller holds the mailbox exclusively. With
/// `watch`, a folder not tracked yet is watched from now on ([`Look::Unknown`] this time).
pub(crate) fn look(dir: &Path, inos: [u64; 2], watch: bool) -> Look {
    with(|t| t.look(dir, inos, watch)).unwrap_or(Look::Unknown)
}

/// A sync of `dir` that began with [`look`] saw the folders completely (a listing, or
/// stamps stat'ed after the look) and the index holds what they hold: the baseline. The
/// caller still holds the mailbox exclusively.
pub(crate) fn settled(dir: &Path) {
    with(|t| t.settled(dir));
}

/// A sync of `dir` lists its folders: no baseline until it completes ([`settled`]).
pub(crate) fn listed(dir: &Path) {
    with(|t| {
        if let Some(f) = t.folders.get_mut(dir) {
            f.listings += 1;
            f.clean = false;
        }
    });
}

/// How many times the folder of a tracked mailbox was listed since it became tracked;
/// `None` when it is not tracked. For tests: a sync that skipped the listing leaves it.
#[doc(hidden)]
pub fn listings(dir: &Path) -> Option<u64> {
    with(|t| t.folders.get(dir).map(|f| f.listings)).flatten()
}

/// Stops tracking `dir` (tests: a mailbox without a held watch).
#[doc(hidden)]
pub fn forget(dir: &Path) {
    with(|t| t.remove(dir));
}

impl Tracker {
    fn new() -> std::io::Result<Tracker> {
        Ok(Tracker {
            inotify: Inotify::init()?,
            folders: HashMap::new(),
            by_wd: HashMap::new(),
            buf: vec![0u8; 64 * 1024],
            overflows: 0,
            swept: Instant::now(),
        })
    }

    /// See [`look`].
    fn look(&mut self, dir: &Path, inos: [u64; 2], watch: bool) -> Look {
        self.drain();
        self.sweep(dir);
        let Some(f) = self.folders.get_mut(dir) else {
            if watch {
                self.add(dir, inos);
            }
            return Look::Unknown;
        };
        f.last_used = Instant::now();
        let baseline = f.baseline;
        let mut clean = f.clean && f.inos == inos;
        for (i, sub) in SUBS.iter().enumerate() {
            // every write of this process to the folder is confirmed by now: a record
            // left unmatched is dropped here, never matched with a later event
            let mut done = own_writes::take_done(&dir.join(sub));
            clean &= !done.overflowed;
            for (name, change) in f.pending[i].drain(..) {
                clean &= done.take(&name, change);
            }
        }
        f.clean = clean;
        if f.inos != inos {
            // the watched inodes are not the folders at these paths any more
            self.remove(dir);
            if watch {
                self.add(dir, inos);
            }
        }
        match (clean, baseline) {
            (true, _) => Look::Clean,
            (false, true) => Look::Changed,
            (false, false) => Look::Unknown,
        }
    }

    fn settled(&mut self, dir: &Path) {
        if let Some(f) = self.folders.get_mut(dir) {
            f.baseline = true;
            f.clean = true;
        }
    }

    /// Reads every queued event, keeping each with its folder.
    fn drain(&mut self) {
        let mut buf = std::mem::take(&mut self.buf);
        loop {
            let events: Vec<_> = match self.inotify.read_events(&mut buf) {
                Ok(events) => events
                    .map(|ev| (ev.wd, ev.mask, ev.name.map(OsStr::to_os_string)))
                    .collect(),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::warn!(error = %e, "inotify read failed; listing every tracked folder");
                    self.dirty_all();
                    break;
                }
            };
            for (wd, mask, name) in events {
                if mask.contains(EventMask::Q_OVERFLOW) {
                    self.overflows += 1;
                    self.dirty_all();
                    continue;
                }
                let Some((dir, i)) = self.by_wd.get(&wd) else {
                    continue;
                };
                let (dir, i) = (dir.clone(), *i);
                let Some(f) = self.folders.get_mut(&dir) else {
                    continue;
                };
                let change = if mask.intersects(EventMask::CREATE | EventMask::MOVED_TO) {
                    Some(Change::Appeared)
                } else if mask.intersects(EventMask::DELETE | EventMask::MOVED_FROM) {
                    Some(Change::Gone)
                } else {
                    None
                };
                match (change, name) {
                    (Some(change), Some(name)) if f.pending[i].len() < MAX_PENDING => {
                        f.pending[i].push((name, change));
                    }
                    // IN_IGNORED, IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT, too many
                    _ => {
                        f.clean = false;
                        f.pending[i].clear();
                    }
                }
                if mask.contains(EventMask::IGNORED) {
                    // the kernel dropped the watch: watch anew at the next look
                    self.remove(&dir);
                }
            }
        }
        self.buf = buf;
    }

    fn dirty_all(&mut self) {
        for f in self.folders.values_mut() {
            f.clean = false;
            for p in &mut f.pending {
                p.clear();
            }
        }
    }

    /// Drops folders idle for [`IDLE_DROP`] (looked for every [`SWEEP_EVERY`]), and, when
    /// `keep` is not tracked and the bound is reached, the eighth used least recently.
    fn sweep(&mut self, keep: &Path) {
        let now = Instant::now();
        if now.duration_since(self.swept) >= SWEEP_EVERY {
            self.swept = now;
            let idle: Vec<PathBuf> = self
                .folders
                .iter()
                .filter(|(d, f)| now.duration_since(f.last_used) > IDLE_DROP && d.as_path() != keep)
                .map(|(d, _)| d.clone())
                .collect();
            for d in idle {
                self.remove(&d);
            }
        }
        if self.folders.len() >= MAX_FOLDERS && !self.folders.contains_key(keep) {
            // the least recently used eighth at once, so that one walk serves the next
            // MAX_FOLDERS / 8 new mailboxes instead of one
            let mut used: Vec<Instant> = self.folders.values().map(|f| f.last_used).collect();
            let drop = (MAX_FOLDERS / 8).max(self.folders.len() + 1 - MAX_FOLDERS);
            let (_, &mut cut, _) = used.select_nth_unstable(drop - 1);
            let oldest: Vec<PathBuf> = self
                .folders
                .iter()
                .filter(|(_, f)| f.last_used <= cut)
                .map(|(d, _)| d.clone())
                .collect();
            for d in oldest {
                self.remove(&d);
            }
        }
    }

    /// Watches `dir`'s `new/` and `cur/` (no baseline yet).
    fn add(&mut self, dir: &Path, inos: [u64; 2]) {
        let mut wds = Vec::with_capacity(2);
        for sub in SUBS {
            match self.inotify.watches().add(dir.join(sub), MASK) {
                Ok(wd) => wds.push(wd),
                Err(e) => {
                    tracing::debug!(dir = %dir.display(), error = %e, "cannot watch for the sync");
                    for wd in wds {
                        let _ = self.inotify.watches().remove(wd);
                    }
                    return;
                }
            }
        }
        let [new, cur]: [WatchDescriptor; 2] = match wds.try_into() {
            Ok(wds) => wds,
            Err(_) => return,
        };
        for (i, (wd, sub)) in [&new, &cur].into_iter().zip(SUBS).enumerate() {
            self.by_wd.insert(wd.clone(), (dir.to_path_buf(), i));
            own_writes::track(&dir.join(sub));
        }
        self.folders.insert(
            dir.to_path_buf(),
            Folder {
                wds: [new, cur],
                inos,
                baseline: false,
                clean: false,
                pending: [Vec::new(), Vec::new()],
                last_used: Instant::now(),
                listings: 0,
            },
        );
    }

    fn remove(&mut self, dir: &Path) {
        let Some(f) = self.folders.remove(dir) else {
            return;
        };
        for (wd, sub) in f.wds.into_iter().zip(SUBS) {
            self.by_wd.remove(&wd);
            own_writes::untrack(&dir.join(sub));
            // fails harmlessly when the kernel dropped it already
            let _ = self.inotify.watches().remove(wd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use maildex_maildir::deliver::rename_flags;
    use maildex_maildir::{Flags, Keywords, Sub};
    use std::os::unix::fs::MetadataExt;

    /// A mailbox folder with `files` in `cur/`.
    fn folder(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["new", "cur", "tmp"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        for f in files {
            std::fs::write(dir.path().join("cur").join(f), b"x").unwrap();
        }
        dir
    }

    fn inos(dir: &Path) -> [u64; 2] {
        SUBS.map(|s| std::fs::metadata(dir.join(s)).unwrap().ino())
    }

    /// Watched with a baseline, in a tracker of its own (no other test reads its queue).
    fn tracked(t: &mut Tracker, dir: &Path) {
        assert_eq!(t.look(dir, inos(dir), true), Look::Unknown);
        t.settled(dir);
        assert_eq!(t.look(dir, inos(dir), true), Look::Clean);
    }

    #[test]
    fn past_the_bound_the_least_recently_used_go_and_the_rest_keep_their_baseline() {
        let mut t = Tracker::new().unwrap();
        let dirs: Vec<tempfile::TempDir> = (0..MAX_FOLDERS + 40).map(|_| folder(&[])).collect();
        for (i, d) in dirs.iter().enumerate() {
            tracked(&mut t, d.path());
            assert!(
                t.folders.len() <= MAX_FOLDERS,
                "{} tracked after {i}",
                t.folders.len()
            );
            // the first one stays in use all along
            assert_eq!(
                t.look(dirs[0].path(), inos(dirs[0].path()), true),
                Look::Clean
            );
        }
        // the least recently used went (the second and third), the last added and the one
        // in use kept their baseline
        for gone in [&dirs[1], &dirs[2]] {
            assert!(!t.folders.contains_key(gone.path()));
        }
        for kept in [&dirs[0], &dirs[MAX_FOLDERS + 39], &dirs[MAX_FOLDERS]] {
            assert_eq!(t.look(kept.path(), inos(kept.path()), true), Look::Clean);
        }
    }

    /// A STORE's rename of `cur/name` to `flags`, confirmed or not.
    fn store(dir: &Path, name: &str, flags: Flags, confirm: bool) {
        let scope = own_writes::Scope::begin();
        rename_flags(dir, Sub::Cur, name, flags, Keywords::EMPTY).unwrap();
        if confirm {
            scope.confirm();
        }
    }

    #[test]
    fn confirmed_own_writes_are_clean_and_anything_else_is_a_change() {
        let a = folder(&["1.M1P1.h:2,", "2.M1P1.h:2,"]);
        let dir = a.path();
        let mut t = Tracker::new().unwrap();
        tracked(&mut t, dir);
        store(dir, "1.M1P1.h:2,", Flags::SEEN, true);
        assert_eq!(t.look(dir, inos(dir), true), Look::Clean);
        // a failed operation confirms nothing
        store(dir, "1.M1P1.h:2,S", Flags::FLAGGED, false);
        assert_eq!(t.look(dir, inos(dir), true), Look::Changed);
        t.settled(dir);
        // ours and another process's in the same instant
        store(dir, "2.M1P1.h:2,", Flags::SEEN, true);
        std::fs::write(dir.join("new/3.M1P1.h"), b"x").unwrap();
        assert_eq!(t.look(dir, inos(dir), true), Look::Changed);
        t.settled(dir);
        // a record whose event was read in an earlier look cannot absorb a later event:
        // records left unmatched are dropped at each look
        let scope = own_writes::Scope::begin();
        own_writes::done(&dir.join("cur/4.M1P1.h:2,"), Change::Appeared);
        scope.confirm();
        assert_eq!(t.look(dir, inos(dir), true), Look::Clean);
        std::fs::write(dir.join("cur/4.M1P1.h:2,"), b"x").unwrap();
        assert_eq!(t.look(dir, inos(dir), true), Look::Changed);
        t.settled(dir);
        // the folder itself moved away
        std::fs::rename(dir.join("new"), dir.join("new.old")).unwrap();
        std::fs::create_dir(dir.join("new")).unwrap();
        assert_eq!(t.look(dir, inos(dir), true), Look::Changed);
        assert_eq!(t.look(dir, inos(dir), true), Look::Unknown, "watched anew");
    }

    #[test]
    fn an_overflowed_queue_is_a_change_of_every_folder() {
        let max: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(16384);
        let (a, b) = (folder(&[]), folder(&["0"]));
        let mut t = Tracker::new().unwrap();
        tracked(&mut t, a.path());
        tracked(&mut t, b.path());
        // another mailbox's churn fills the queue (two events a rename)...
        let cur = b.path().join("cur");
        for i in 0..max / 2 + 1 {
            std::fs::rename(cur.join(i.to_string()), cur.join((i + 1).to_string())).unwrap();
        }
        // ...so this file's event is dropped
        std::fs::write(a.path().join("new/1.M1P1.h"), b"x").unwrap();
        assert_eq!(t.look(a.path(), inos(a.path()), true), Look::Changed);
        assert_eq!(t.overflows, 1);
    }
}
