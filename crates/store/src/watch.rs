//! Watching Maildir folders for changes made by other processes (Dovecot, mutt, procmail,
//! `maildex deliver` run by postfix), so that IDLE sessions learn of them at once.
//!
//! One inotify instance serves the whole process (the kernel allows only 128 instances per
//! user by default, so one per IDLE session would not scale); each watched mailbox folder
//! has a reference count and a `watch` channel that the event task bumps. Written here
//! because the `notify` crate adds a thread and debouncing machinery we do not need, while
//! the `inotify` crate's stream fits the tokio reactor directly. It lives in the store, which
//! owns the Maildir layout: sessions ask for a [`crate::Mailbox`]'s changes, not a folder's. When inotify is not
//! available the sessions' periodic sync is the fallback (see `session::idle`).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use inotify::{Inotify, WatchDescriptor, WatchMask, Watches};
use maildex_maildir::own_writes;
use tokio::sync::watch;

struct Entry {
    wds: Vec<WatchDescriptor>,
    refs: usize,
    tx: watch::Sender<u64>,
}

#[derive(Default)]
struct Inner {
    dirs: HashMap<PathBuf, Entry>,
    /// Each watch's mailbox folder and its sub-folder (`new` or `cur`).
    wds: HashMap<WatchDescriptor, (PathBuf, &'static str)>,
}

/// The process's folder watcher.
pub struct DirWatcher {
    watches: Option<Mutex<Watches>>,
    inner: Mutex<Inner>,
}

/// A subscription to one mailbox folder's changes; dropping it removes the watch when no
/// other session needs it.
pub struct DirWatch {
    rx: watch::Receiver<u64>,
    dir: PathBuf,
    owner: Arc<DirWatcher>,
}

impl DirWatch {
    /// Waits for the next change in the folder's `new/` or `cur/`.
    pub async fn changed(&mut self) {
        if self.rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for DirWatch {
    fn drop(&mut self) {
        self.owner.release(&self.dir);
    }
}

/// The sub-folders watched: where messages are.
const SUBS: [&str; 2] = ["new", "cur"];

const MASK: WatchMask = WatchMask::CREATE
    .union(WatchMask::DELETE)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::MOVED_TO);

impl DirWatcher {
    /// Starts the watcher (and its event task on the current runtime). Without inotify the
    /// watcher hands out no subscriptions.
    pub fn start() -> Arc<DirWatcher> {
        let init = Inotify::init().and_then(|i| {
            let watches = i.watches();
            let stream = i.into_event_stream(vec![0u8; 16 * 1024])?;
            Ok((watches, stream))
        });
        match init {
            Ok((watches, stream)) => {
                let w = Arc::new(DirWatcher {
                    watches: Some(Mutex::new(watches)),
                    inner: Mutex::default(),
                });
                tokio::spawn(run(Arc::downgrade(&w), stream));
                w
            }
            Err(e) => {
                tracing::warn!(error = %e, "inotify unavailable; IDLE falls back to polling");
                DirWatcher::without_inotify()
            }
        }
    }

    /// A watcher that hands out no subscriptions: IDLE sessions rely on their periodic
    /// sync for other processes' changes.
    pub fn without_inotify() -> Arc<DirWatcher> {
        Arc::new(DirWatcher {
            watches: None,
            inner: Mutex::default(),
        })
    }

    /// Subscribes to changes of `mailbox`'s folder in `store` made by any process (its
    /// `new/` and `cur/`). `None` without inotify or when the folder cannot be watched.
    pub fn watch_mailbox(
        self: &Arc<Self>,
        store: &crate::UserStore,
        mailbox: &crate::Mailbox,
    ) -> Option<DirWatch> {
        let dir = store.mailbox_path(mailbox.name()).ok()?;
        self.watch(&dir)
    }

    /// Subscribes to changes of the mailbox folder `dir` (its `new/` and `cur/`).
    fn watch(self: &Arc<Self>, dir: &Path) -> Option<DirWatch> {
        let watches = self.watches.as_ref()?;
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = inner.dirs.get_mut(dir) {
            e.refs += 1;
            let rx = e.tx.subscribe();
            return Some(DirWatch {
                rx,
                dir: dir.to_path_buf(),
                owner: Arc::clone(self),
            });
        }
        let mut wds = Vec::new();
        {
            let mut w = watches.lock().unwrap_or_else(|p| p.into_inner());
            for sub in SUBS {
                match w.add(dir.join(sub), MASK) {
                    Ok(wd) => wds.push(wd),
                    Err(e) => {
                        tracing::debug!(dir = %dir.display(), error = %e, "cannot watch");
                        for wd in wds.drain(..) {
                            let _ = w.remove(wd);
                        }
                        return None;
                    }
                }
            }
        }
        let (tx, rx) = watch::channel(0);
        for (wd, sub) in wds.iter().zip(SUBS) {
            inner.wds.insert(wd.clone(), (dir.to_path_buf(), sub));
            own_writes::watch(&dir.join(sub));
        }
        inner
            .dirs
            .insert(dir.to_path_buf(), Entry { wds, refs: 1, tx });
        Some(DirWatch {
            rx,
            dir: dir.to_path_buf(),
            owner: Arc::clone(self),
        })
    }

    /// Folders watched now (tests, stats).
    pub fn watched(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .dirs
            .len()
    }

    fn release(&self, dir: &Path) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Some(e) = inner.dirs.get_mut(dir) else {
            return;
        };
        e.refs -= 1;
        if e.refs > 0 {
            return;
        }
        if let Some(e) = inner.dirs.remove(dir) {
            for sub in SUBS {
                own_writes::unwatch(&dir.join(sub));
            }
            for wd in e.wds {
                inner.wds.remove(&wd);
                if let Some(w) = &self.watches {
                    let _ = w.lock().unwrap_or_else(|p| p.into_inner()).remove(wd);
                }
            }
        }
    }

    /// An event for file `name` in the folder of `wd`: the subscribers are woken unless
    /// this process made the change ([`own_writes`]: the index has it already).
    fn notify(&self, wd: &WatchDescriptor, name: Option<&OsStr>) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Some((dir, sub)) = inner.wds.get(wd) else {
            return;
        };
        if name.is_some_and(|n| own_writes::take(&dir.join(sub), n)) {
            return;
        }
        if let Some(e) = inner.dirs.get(dir) {
            e.tx.send_modify(|n| *n += 1);
        }
    }
}

async fn run(owner: Weak<DirWatcher>, mut stream: inotify::EventStream<Vec<u8>>) {
    use futures_util::StreamExt;
    while let Some(event) = stream.next().await {
        let Some(w) = owner.upgrade() else { return };
        match event {
            Ok(ev) => w.notify(&ev.wd, ev.name.as_deref()),
            Err(e) => {
                tracing::warn!(error = %e, "inotify read failed; IDLE falls back to polling");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_file_dropped_in_new_wakes_every_subscriber_once_shared() {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["new", "cur", "tmp"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        let w = DirWatcher::start();
        let mut a = w.watch(dir.path()).expect("inotify");
        let mut b = w.watch(dir.path()).expect("inotify");
        assert_eq!(w.watched(), 1);
        std::fs::write(dir.path().join("new/123.msg"), b"x").unwrap();
        for s in [&mut a, &mut b] {
            tokio::time::timeout(Duration::from_secs(5), s.changed())
                .await
                .expect("woken");
        }
        drop(a);
        assert_eq!(w.watched(), 1);
        drop(b);
        assert_eq!(w.watched(), 0);
    }

    #[tokio::test]
    async fn a_change_this_process_noted_wakes_no_one() {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["new", "cur", "tmp"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        let w = DirWatcher::start();
        let mut a = w.watch(dir.path()).expect("inotify");
        let own = dir.path().join("new/1.own");
        own_writes::note(&own);
        std::fs::write(&own, b"x").unwrap();
        let foreign = dir.path().join("new/2.foreign");
        std::fs::write(&foreign, b"x").unwrap();
        tokio::time::timeout(Duration::from_secs(5), a.changed())
            .await
            .expect("woken by the foreign file");
        // one event task reads the queue in order: the own file's event was handled before
        // the foreign one's, so the count is 2 had it woken the subscribers too
        assert_eq!(*a.rx.borrow(), 1);
    }
}
