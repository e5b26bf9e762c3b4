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
}
