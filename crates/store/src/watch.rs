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
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use inotify::{Inotify, WatchDescriptor, WatchMask, Watches};
use tokio::sync::watch;

struct Entry {
    wds: Vec<WatchDescriptor>,
    refs: usize,
    tx: watch::Sender<u64>,
}

#[derive(Default)]
struct Inner {
    dirs: HashMap<PathBuf, Entry>,
    wds: HashMap<WatchDescriptor, PathBuf>,
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
            for sub in ["new", "cur"] {
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
        for wd in &wds {
            inner.wds.insert(wd.clone(), dir.to_path_buf());
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
            for wd in e.wds {
                inner.wds.remove(&wd);
                if let Some(w) = &self.watches {
                    let _ = w.lock().unwrap_or_else(|p| p.into_inner()).remove(wd);
                }
            }
        }
    }

    fn notify(&self, wd: &WatchDescriptor) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = inner.wds.get(wd).and_then(|d| inner.dirs.get(d)) {
            e.tx.send_modify(|n| *n += 1);
        }
    }
}

async fn run(owner: Weak<DirWatcher>, mut stream: inotify::EventStream<Vec<u8>>) {
    use futures_util::StreamExt;
    while let Some(event) = stream.next().await {
        let Some(w) = owner.upgrade() else { return };
        match event {
            Ok(ev) => {
                let _: Option<OsString> = ev.name;
                w.notify(&ev.wd);
            }
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
}
