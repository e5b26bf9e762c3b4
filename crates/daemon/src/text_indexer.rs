//! The background full-text indexer (issues 18 #3 and 19 #1): delivery, APPEND, COPY of a
//! file and a sync write a message's listing records but not its full text, and this
//! writes the text of what is pending, off the delivery path, as Dovecot's indexer does
//! for its FTS plugins. The store does the work ([`UserStore::index_pending_text`]); this
//! only schedules it:
//!
//! - every store the daemon opens gets a small task that waits on the store's change feed
//!   (the commits IDLE sessions wait on) and, every [`RECHECK`], for what other processes
//!   (`maildex deliver`, `maildex index rebuild --defer-text`) committed, and then queues
//!   its user; it ends when the store is closed;
//! - one thread of its own, at nice [`NICE`], takes the queued users in turn and writes
//!   their pending texts [`TEXT_BATCH`] messages per transaction, the user going back to
//!   the end of the queue after each batch, so that commands and deliveries (at nice 0)
//!   get the cores and the index first;
//! - before each batch it waits while a session (of any user) runs a command and for a
//!   moment after it, at most [`YIELD_AT_MOST`], so that a listing right after a bulk
//!   delivery does not share the cores and its user's writer with the indexer.
//!
//! A SEARCH BODY/TEXT never waits for it: it indexes what is still pending among the
//! messages it compares itself.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use maildex_accounts::Accounts;
use maildex_store::{Uid, UserStore, TEXT_BATCH};
use tokio_util::sync::CancellationToken;

/// How often a store's task looks again without a commit of this process.
pub const RECHECK: Duration = Duration::from_secs(30);

/// The indexer thread's nice value: under load it gets about a tenth of a core against a
/// thread at nice 0 (the kernel's weights: 110 against 1024).
pub const NICE: i32 = 10;

/// A user whose store may have pending texts, and where its walk goes on.
struct Queued {
    store: Weak<UserStore>,
    /// In the queue now (a commit meanwhile needs no second entry).
    queued: AtomicBool,
    /// Look again from the first mailbox after the current walk: a commit came meanwhile.
    again: AtomicBool,
    /// The walk in progress: mailboxes still to do, and the UID to go on from in the first.
    walk: Mutex<Option<(VecDeque<String>, Uid)>>,
    /// [`UserStore::index_version`] when a walk last found nothing pending ([`NOT_SEEN`]
    /// before): unchanged, a recheck needs no walk.
    complete_at: AtomicU64,
}

/// [`Queued::complete_at`] before any walk found the user's texts complete.
const NOT_SEEN: u64 = u64::MAX;

/// The queue the stores' tasks fill and the indexer thread empties.
#[derive(Default)]
struct Queue {
    users: Mutex<(VecDeque<Arc<Queued>>, bool)>,
    wake: Condvar,
}

impl Queue {
    fn push(&self, q: &Arc<Queued>) {
        if q.queued.swap(true, Ordering::AcqRel) {
            q.again.store(true, Ordering::Release);
            return;
        }
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        users.0.push_back(Arc::clone(q));
        self.wake.notify_one();
    }

    /// The next user, waiting for one; `None` once stopped.
    fn pop(&self) -> Option<Arc<Queued>> {
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if users.1 {
                return None;
            }
            if let Some(q) = users.0.pop_front() {
                return Some(q);
            }
            users = self.wake.wait(users).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn stop(&self) {
        self.users.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.wake.notify_all();
    }
}

/// Starts the indexer for the stores `accounts` opens from now on; the returned task ends
/// (and the thread with it, after its batch) at `shutdown`. Nothing runs with `[storage]
/// full_text` off.
pub fn start(
    accounts: &Arc<Accounts>,
    shutdown: CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    if !accounts.config().storage.full_text {
        return None;
    }
    let queue = Arc::new(Queue::default());
    let worker = {
        let (queue, shutdown) = (Arc::clone(&queue), shutdown.clone());
        std::thread::Builder::new()
            .name("text-indexer".into())
            .spawn(move || work(&queue, &shutdown))
    };
    let worker = match worker {
        Ok(w) => w,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the full-text indexer; SEARCH indexes what it needs");
            return None;
        }
    };
    let runtime = tokio::runtime::Handle::current();
    let hook_queue = Arc::clone(&queue);
    let hook_shutdown = shutdown.clone();
    accounts.on_store_opened(Arc::new(move |store: &Arc<UserStore>| {
        if hook_shutdown.is_cancelled() {
            return;
        }
        let q = Arc::new(Queued {
            store: Arc::downgrade(store),
            queued: AtomicBool::new(false),
            again: AtomicBool::new(false),
            walk: Mutex::new(None),
            complete_at: AtomicU64::new(NOT_SEEN),
        });
        let feed = store.change_feed();
        let (queue, shutdown) = (Arc::clone(&hook_queue), hook_shutdown.clone());
        runtime.spawn(watch_store(q, feed, queue, shutdown));
    }));
    Some(tokio::spawn(async move {
        shutdown.cancelled().await;
        queue.stop();
        let joined = tokio::task::spawn_blocking(move || worker.join()).await;
        if !matches!(joined, Ok(Ok(()))) {
            tracing::error!("the full-text indexer thread panicked");
        }
    }))
}

/// Queues the store's user now (what a first use finds pending), after each commit of
/// this process, and every [`RECHECK`]; ends when the store is closed or at `shutdown`.
async fn watch_store(
    q: Arc<Queued>,
    mut feed: tokio::sync::watch::Receiver<u64>,
    queue: Arc<Queue>,
    shutdown: CancellationToken,
) {
    loop {
        if q.store.strong_count() == 0 {
            return;
        }
        feed.borrow_and_update();
        queue.push(&q);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            changed = feed.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(RECHECK) => {}
        }
    }
}

/// The indexer thread: one batch of one user at a time, the user queued again while its
/// walk is not done.
fn work(queue: &Queue, shutdown: &CancellationToken) {
    lower_priority();
    while let Some(q) = queue.pop() {
        if shutdown.is_cancelled() {
            return;
        }
        let Some(store) = q.store.upgrade() else {
            continue;
        };
        if nothing_new(&store, &q) {
            q.queued.store(false, Ordering::Release);
            // a commit after the check queued nothing (`queued` was still set)
            if q.again.swap(false, Ordering::AcqRel) {
                queue.push(&q);
            }
            continue;
        }
        // the sessions' commands first (a listing of any user), for a while
        store.wait_for_commands(YIELD_AT_MOST);
        let more = step(&store, &q);
        drop(store);
        // a commit while the walk ran queued nothing (it was in the queue or running):
        // start a new walk after this one
        let again = q.again.swap(false, Ordering::AcqRel);
        q.queued.store(false, Ordering::Release);
        if more || again {
            queue.push(&q);
        }
    }
}

/// How long a batch waits for the daemon's session commands to pause
/// ([`UserStore::wait_for_commands`]): sessions that never pause defer the text, they do
/// not stop it (at least [`TEXT_BATCH`] messages a second are written under any load,
/// and a SEARCH BODY/TEXT writes what it needs itself).
pub const YIELD_AT_MOST: Duration = Duration::from_secs(1);

/// No walk is in progress and no process has committed to the user's index since a walk
/// found every text written: a recheck (every [`RECHECK`] for each open store) costs one
/// read of LMDB's meta page instead of a walk over every UID (12.5 ms at 30,000).
fn nothing_new(store: &UserStore, q: &Queued) -> bool {
    let walking = q.walk.lock().unwrap_or_else(|p| p.into_inner()).is_some();
    !walking && store.index_version() == q.complete_at.load(Ordering::Acquire)
}

/// One batch of `q`'s walk over its user's mailboxes. Returns whether the walk goes on.
fn step(store: &UserStore, q: &Queued) -> bool {
    let mut walk = q.walk.lock().unwrap_or_else(|p| p.into_inner());
    if walk.is_none() {
        // read before the walk: a commit during it makes the next check walk again
        let version = store.index_version();
        match store.pending_texts() {
            Ok(boxes) => {
                let names: VecDeque<String> = boxes
                    .into_iter()
                    .filter(|(_, n)| *n > 0)
                    .map(|(name, _)| name)
                    .collect();
                if names.is_empty() {
                    q.complete_at.store(version, Ordering::Release);
                    return false;
                }
                *walk = Some((names, Uid::MIN));
            }
            Err(e) => {
                tracing::warn!(maildir = %store.root().display(), error = %e, "full-text indexer: cannot read the index");
                return false;
            }
        }
    }
    let Some((names, from)) = walk.as_mut() else {
        return false;
    };
    let Some(name) = names.front().cloned() else {
        *walk = None;
        return false;
    };
    match store.index_pending_text(&name, *from, TEXT_BATCH) {
        Ok(pass) => {
            if pass.written > 0 || pass.unreadable > 0 {
                tracing::debug!(maildir = %store.root().display(), mailbox = name, written = pass.written, unreadable = pass.unreadable, "full text indexed");
            }
            match pass.next {
                Some(next) => *from = next,
                None => {
                    names.pop_front();
                    *from = Uid::MIN;
                }
            }
        }
        Err(e) => {
            tracing::warn!(maildir = %store.root().display(), mailbox = name, error = %e, "full-text indexer: mailbox skipped");
            names.pop_front();
            *from = Uid::MIN;
        }
    }
    if names.is_empty() {
        *walk = None;
        return false;
    }
    true
}

/// Puts this thread (only) at nice [`NICE`]: Linux applies `setpriority` to one thread
/// when given its thread id. A failure leaves it at the process's priority.
fn lower_priority() {
    // SAFETY: gettid has no arguments and cannot fail; setpriority takes plain integers
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    let Ok(tid) = libc::id_t::try_from(tid) else {
        return;
    };
    // SAFETY: as above
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, NICE) } != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "full-text indexer left at normal priority");
    }
}
