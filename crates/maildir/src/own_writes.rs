//! The changes this process makes to watched Maildir folders, so that a folder watcher
//! (inotify, in the store) can tell them from other processes' changes.
//!
//! A delivery, flag change, copy, move or expunge made through maildex is in the index by
//! the time anyone reads it; waking every IDLE session on the folder to sync it with the
//! Maildir again costs a listing of the whole folder per change (30,000 entries for a big
//! INBOX, found by `maildex-bench idle-cost`). So each write to a watched `new/` or `cur/`
//! is noted here just before its system call, and the watcher drops the one inotify event
//! it causes. Another process's change is never noted and still wakes the sessions.
//!
//! Bounded: at most [`MAX_EXPECTED`] notes wait for their event; beyond that they are all
//! forgotten, which costs only the syncs this exists to save. A note whose event never
//! comes (the system call failed, the watch went away) is dropped the same way or with
//! its folder's watch.
//!
//! Second, for the sync (`crates/store/src/sync_watch.rs`): what this process's writes did
//! to the names of *tracked* folders, recorded after each system call succeeded
//! ([`done`]) and handed over only when the store confirms the whole operation, index
//! commit included ([`Scope::confirm`]). A sync that finds every inotify event since its
//! last complete look explained by confirmed records skips listing the folder. Records of
//! an operation that failed, panicked or ran outside a [`Scope`] are never confirmed, so
//! their events count as another process's and the folder is listed: a missing record
//! costs a listing, never a missed change.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Most notes waiting for their inotify event.
pub const MAX_EXPECTED: usize = 4096;

#[derive(Default)]
struct Registry {
    /// Watched folders (`new/`, `cur/`): how many watches each has.
    watched: HashMap<PathBuf, usize>,
    /// (folder, file name) -> events still expected.
    expected: HashMap<(PathBuf, OsString), u32>,
    /// Folders the sync tracks, with the confirmed changes not yet taken.
    tracked: HashMap<PathBuf, Done>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    let mut guard = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    f(guard.get_or_insert_with(Registry::default))
}

/// A watcher now watches `folder` (a `new/` or `cur/`).
pub fn watch(folder: &Path) {
    with(|r| *r.watched.entry(folder.to_path_buf()).or_insert(0) += 1);
}

/// A watcher stopped watching `folder`; its notes go when no watch is left.
pub fn unwatch(folder: &Path) {
    with(|r| {
        let Some(n) = r.watched.get_mut(folder) else {
            return;
        };
        *n -= 1;
        if *n == 0 {
            r.watched.remove(folder);
            r.expected.retain(|(f, _), _| f != folder);
        }
    });
}

/// This process is about to create, remove or rename away the file `path` (one inotify
/// event in its folder). Nothing is kept when the folder is not watched.
pub fn note(path: &Path) {
    let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    with(|r| {
        if !r.watched.contains_key(folder) {
            return;
        }
        if r.expected.len() >= MAX_EXPECTED {
            r.expected.clear();
        }
        *r.expected
            .entry((folder.to_path_buf(), name.to_os_string()))
            .or_insert(0) += 1;
    });
}

/// Whether an event for `name` in `folder` is one this process noted (and forgets that
/// note).
pub fn take(folder: &Path, name: &OsStr) -> bool {
    with(|r| {
        let key = (folder.to_path_buf(), name.to_os_string());
        match r.expected.get_mut(&key) {
            Some(n) if *n > 1 => {
                *n -= 1;
                true
            }
            Some(_) => {
                r.expected.remove(&key);
                true
            }
            None => false,
        }
    })
}

/// What a write did to a name in a folder: one inotify event of its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Change {
    /// The name appeared (`IN_CREATE` or `IN_MOVED_TO`: link, rename into the folder).
    Appeared,
    /// The name went (`IN_DELETE` or `IN_MOVED_FROM`: unlink, rename out of the folder).
    Gone,
}

/// Most confirmed changes kept per tracked folder; beyond that the folder is marked
/// [`Done::overflowed`] (the sync lists it).
pub const MAX_DONE: usize = 16 * 1024;

/// Confirmed changes of one tracked folder since the sync last took them.
#[derive(Debug, Default)]
pub struct Done {
    /// (file name, change) -> how many times.
    pub changes: HashMap<(OsString, Change), u32>,
    /// More than [`MAX_DONE`] changes came: they were dropped.
    pub overflowed: bool,
    /// Changes kept (the sum of `changes`' counts).
    kept: usize,
}

impl Done {
    /// Takes one `change` of `name`, if one is left.
    pub fn take(&mut self, name: &OsStr, change: Change) -> bool {
        let key = (name.to_os_string(), change);
        match self.changes.get_mut(&key) {
            Some(n) if *n > 1 => {
                *n -= 1;
                self.kept -= 1;
                true
            }
            Some(_) => {
                self.changes.remove(&key);
                self.kept -= 1;
                true
            }
            None => false,
        }
    }
}

/// The sync tracks `folder` (a `new/` or `cur/`): confirmed changes are kept for it.
pub fn track(folder: &Path) {
    with(|r| {
        r.tracked.entry(folder.to_path_buf()).or_default();
    });
}

/// The sync stopped tracking `folder`; its records go.
pub fn untrack(folder: &Path) {
    with(|r| {
        r.tracked.remove(folder);
    });
}

/// The confirmed changes of tracked `folder` since the last call (empty if untracked).
pub fn take_done(folder: &Path) -> Done {
    with(|r| r.tracked.get_mut(folder).map(std::mem::take)).unwrap_or_default()
}

#[derive(Default)]
struct Staged {
    /// Open [`Scope`]s on this thread.
    depth: usize,
    /// An inner scope ended without confirming: the outer one must not confirm either.
    poisoned: bool,
    changes: Vec<(PathBuf, Change)>,
}

thread_local! {
    static STAGED: RefCell<Staged> = RefCell::new(Staged::default());
}

/// Records that this thread's last system call did `change` to the file `path`; kept only
/// inside a [`Scope`], and only counted once the scope is confirmed.
pub fn done(path: &Path, change: Change) {
    STAGED.with(|s| {
        let mut s = s.borrow_mut();
        if s.depth > 0 && s.changes.len() < MAX_DONE {
            s.changes.push((path.to_path_buf(), change));
        } else if s.depth > 0 {
            // too many for one operation: confirming nothing makes the sync list
            s.poisoned = true;
        }
    });
}

/// One operation of the store on this thread: its [`done`] records count once it is
/// [`confirm`](Scope::confirm)ed, when the index holds what the files say. Scopes nest;
/// only the outermost hands the records over.
#[must_use]
pub struct Scope {
    confirmed: bool,
}

impl Scope {
    /// Opens a scope on this thread.
    pub fn begin() -> Scope {
        STAGED.with(|s| {
            let mut s = s.borrow_mut();
            if s.depth == 0 {
                s.changes.clear();
                s.poisoned = false;
            }
            s.depth += 1;
        });
        Scope { confirmed: false }
    }

    /// The operation succeeded and the index holds its changes: its records count (once
    /// the outermost scope is confirmed). Call while still holding the mailbox lock.
    pub fn confirm(mut self) {
        self.confirmed = true;
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let staged = STAGED.with(|s| {
            let mut s = s.borrow_mut();
            s.depth = s.depth.saturating_sub(1);
            if !self.confirmed {
                s.poisoned = true;
            }
            if s.depth > 0 {
                return Vec::new();
            }
            let changes = std::mem::take(&mut s.changes);
            let poisoned = std::mem::replace(&mut s.poisoned, false);
            if poisoned {
                Vec::new()
            } else {
                changes
            }
        });
        if staged.is_empty() {
            return;
        }
        with(|r| {
            for (path, change) in staged {
                let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
                    continue;
                };
                let Some(done) = r.tracked.get_mut(folder) else {
                    continue;
                };
                if done.overflowed {
                    continue;
                }
                if done.kept >= MAX_DONE {
                    done.changes.clear();
                    done.kept = 0;
                    done.overflowed = true;
                    continue;
                }
                done.kept += 1;
                *done
                    .changes
                    .entry((name.to_os_string(), change))
                    .or_insert(0) += 1;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_kept_for_watched_folders_only_and_taken_once() {
        let dir = tempfile::tempdir().unwrap();
        let (new, other) = (dir.path().join("new"), dir.path().join("cur"));
        note(&new.join("a"));
        watch(&new);
        note(&new.join("b"));
        note(&other.join("c"));
        assert!(!take(&new, OsStr::new("a")), "noted before the watch");
        assert!(take(&new, OsStr::new("b")));
        assert!(!take(&new, OsStr::new("b")), "taken once");
        assert!(!take(&other, OsStr::new("c")), "not watched");
        note(&new.join("d"));
        unwatch(&new);
        watch(&new);
        assert!(!take(&new, OsStr::new("d")), "dropped with the watch");
        for i in 0..MAX_EXPECTED + 10 {
            note(&new.join(i.to_string()));
        }
        assert!(with(|r| r.expected.len()) <= MAX_EXPECTED);
        unwatch(&new);
    }

    #[test]
    fn changes_count_only_when_the_outermost_scope_confirms_and_nothing_failed() {
        let dir = tempfile::tempdir().unwrap();
        let cur = dir.path().join("cur");
        let file = |n: &str| cur.join(n);
        let took = |n: &str| take_done(&cur).take(OsStr::new(n), Change::Appeared);
        track(&cur);
        done(&file("outside"), Change::Appeared);
        {
            let outer = Scope::begin();
            done(&file("a"), Change::Appeared);
            let inner = Scope::begin();
            done(&file("b"), Change::Appeared);
            inner.confirm();
            assert!(!took("a"), "not before the outermost confirms");
            outer.confirm();
        }
        let mut d = take_done(&cur);
        assert!(d.take(OsStr::new("a"), Change::Appeared));
        assert!(d.take(OsStr::new("b"), Change::Appeared));
        assert!(!d.take(OsStr::new("b"), Change::Gone), "kinds differ");
        assert!(!d.take(OsStr::new("outside"), Change::Appeared), "no scope");
        {
            let outer = Scope::begin();
            done(&file("c"), Change::Appeared);
            drop(Scope::begin()); // an inner operation failed
            outer.confirm();
        }
        assert!(!took("c"), "a failed inner scope spoils the outer");
        {
            let _failed = Scope::begin();
            done(&file("d"), Change::Appeared);
        }
        assert!(!took("d"), "never confirmed");
        untrack(&cur);
    }
}
