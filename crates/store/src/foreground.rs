//! Whether a session is running a command now, so that background work (the daemon's
//! full-text indexer) can step aside: its extraction competes for the cores and its
//! commits for the index's writer, and a client waiting for a listing should get both
//! first (issue 17's "no regression of listings" right after a bulk delivery). One
//! [`Foreground`] is shared by every store a daemon opens ([`crate::StoreOptions`]): a
//! listing of one user is slowed as much by the texts of others as by its own.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long after a command ends background work still waits: clients send their commands
/// one after another (mutt's SELECT, FETCH of the headers, FETCH of the flags), and a
/// batch started in the gap would hold the writer when the next one wants it.
pub const GRACE: Duration = Duration::from_millis(20);

/// How often a waiting background task looks again.
const POLL: Duration = Duration::from_millis(5);

/// The session commands in progress, and when the last one ended; clones share them.
#[derive(Clone, Debug)]
pub struct Foreground {
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    running: AtomicUsize,
    /// Milliseconds after `epoch` when the last command ended.
    last_end: AtomicU64,
    epoch: Instant,
}

impl Default for Foreground {
    fn default() -> Self {
        Foreground {
            state: Arc::new(State {
                running: AtomicUsize::new(0),
                last_end: AtomicU64::new(0),
                epoch: Instant::now(),
            }),
        }
    }
}

/// Held while a session's command runs ([`crate::UserStore::foreground`]).
#[must_use = "the command counts as running only while this is held"]
#[derive(Debug)]
pub struct ForegroundCommand {
    state: Arc<State>,
}

impl Drop for ForegroundCommand {
    fn drop(&mut self) {
        let s = &self.state;
        s.last_end.store(s.millis(), Ordering::Relaxed);
        s.running.fetch_sub(1, Ordering::AcqRel);
    }
}

impl State {
    fn millis(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A command runs, or one ended less than [`GRACE`] ago.
    fn busy(&self) -> bool {
        if self.running.load(Ordering::Acquire) > 0 {
            return true;
        }
        let last = self.last_end.load(Ordering::Relaxed);
        last != 0 && self.millis().saturating_sub(last) < GRACE.as_millis() as u64
    }
}

impl Foreground {
    pub(crate) fn begin(&self) -> ForegroundCommand {
        self.state.running.fetch_add(1, Ordering::AcqRel);
        ForegroundCommand {
            state: Arc::clone(&self.state),
        }
    }

    /// Blocks (the calling thread, never an async task) until no command has run for
    /// [`GRACE`], or for `at_most`: background work is deferred, never starved, by a
    /// session that is never quiet. Returns whether the sessions are quiet.
    pub(crate) fn wait_quiet(&self, at_most: Duration) -> bool {
        let start = Instant::now();
        loop {
            if !self.state.busy() {
                return true;
            }
            if start.elapsed() >= at_most {
                return false;
            }
            std::thread::sleep(POLL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_the_command_and_its_grace_and_no_longer_than_asked() {
        let fg = Foreground::default();
        assert!(fg.wait_quiet(Duration::ZERO), "quiet at first");
        let cmd = fg.begin();
        let start = Instant::now();
        assert!(
            !fg.wait_quiet(Duration::from_millis(50)),
            "a running command"
        );
        assert!(
            start.elapsed() >= Duration::from_millis(50),
            "waited as asked"
        );
        drop(cmd);
        // (whether the grace has passed by now depends on the scheduler: not asserted)
        assert_ne!(
            fg.state.last_end.load(Ordering::Relaxed),
            0,
            "its end noted"
        );
        assert!(fg.wait_quiet(Duration::from_secs(60)), "then it goes on");
        assert!(!fg.state.busy());
    }
}
