//! Group commit: writers queue their operations, one of them leads a batch in a single
//! write transaction and commits once for all (moved out of `env.rs`, which holds opening,
//! reads and map growth).

use std::any::Any;
use std::sync::{mpsc, Arc};

use heed::{Env, RwTxn, WithoutTls};

use super::{Dbs, Index};
use crate::txn::Writer;
use crate::IndexError;

type Outcome = Result<Box<dyn Any + Send>, IndexError>;
type WriteOp = Box<dyn FnOnce(&mut Writer<'_, '_>) -> Outcome + Send>;

struct Pending {
    op: WriteOp,
    reply: mpsc::SyncSender<Outcome>,
}

#[derive(Default)]
pub(super) struct Group {
    queue: Vec<Pending>,
    leader_active: bool,
}

/// Held by the thread that leads a batch; gives up leadership even if that thread unwinds,
/// so that no writer can be left waiting for a leader that is gone.
struct Leadership<'a>(&'a Index);

impl Drop for Leadership<'_> {
    fn drop(&mut self) {
        let mut group = self.0.group.lock().unwrap_or_else(|p| p.into_inner());
        group.leader_active = false;
        self.0.group_changed.notify_all();
    }
}

impl Index {
    /// Runs `f` in a write transaction shared with every other writer that queued meanwhile
    /// (group commit): a leader applies the queued operations, each in a nested transaction
    /// so that one failure does not undo the others, and commits once. A thread leads at most
    /// the batch that holds its own operation and then hands over, so under steady load no
    /// caller is kept serving others.
    ///
    /// `f` must not call `write` itself (it would wait for its own batch).
    pub fn write<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Writer<'_, '_>) -> Result<R, IndexError> + Send + 'static,
    ) -> Result<R, IndexError> {
        let (reply, rx) = mpsc::sync_channel(1);
        let op: WriteOp = Box::new(move |w| f(w).map(|r| Box::new(r) as Box<dyn Any + Send>));
        self.group
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .queue
            .push(Pending { op, reply });
        let out = loop {
            // a leader sends every result of its batch before it gives up leadership
            if let Ok(out) = rx.try_recv() {
                break out;
            }
            let mut group = self.group.lock().unwrap_or_else(|p| p.into_inner());
            if group.leader_active {
                drop(
                    self.group_changed
                        .wait(group)
                        .unwrap_or_else(|p| p.into_inner()),
                );
            } else if !group.queue.is_empty() {
                group.leader_active = true;
                let batch = std::mem::take(&mut group.queue);
                drop(group);
                let _leading = Leadership(self);
                self.run_batch(batch);
            }
        }?;
        out.downcast::<R>()
            .map(|b| *b)
            .map_err(|_| IndexError::Internal("write result of unexpected type".into()))
    }

    /// [`Index::write`] for an operation that can run more than once: when it meets a full
    /// map (which the commit then grows), it is run again, up to three times.
    pub fn write_retrying<R: Send + 'static>(
        &self,
        f: impl Fn(&mut Writer<'_, '_>) -> Result<R, IndexError> + Send + Sync + 'static,
    ) -> Result<R, IndexError> {
        let f = Arc::new(f);
        let mut tries = 0;
        loop {
            let op = Arc::clone(&f);
            match self.write(move |w| op(w)) {
                Err(e) if e.is_retryable() && tries < 3 => tries += 1,
                other => return other,
            }
        }
    }

    /// Waits until no batch is being led, then holds the next ones until the returned
    /// guard drops (a checkpoint, `crate::lazy`).
    pub(crate) fn lead(&self) -> impl Drop + '_ {
        let mut group = self.group.lock().unwrap_or_else(|p| p.into_inner());
        while group.leader_active {
            group = self
                .group_changed
                .wait(group)
                .unwrap_or_else(|p| p.into_inner());
        }
        group.leader_active = true;
        Leadership(self)
    }

    fn run_batch(&self, batch: Vec<Pending>) {
        if let Err(e) = self.before_commit() {
            for p in batch {
                let _ = p.reply.send(Err(e.duplicate()));
            }
            return;
        }
        if let Err(e) = self.grow_if_needed() {
            tracing::warn!(index = %self.path.display(), error = %e, "could not grow the LMDB map");
        }
        self.cell.with_dependent(|env, dbs| {
            let begun = loop {
                let guard = match self.resize.read() {
                    Ok(g) => g,
                    Err(_) => break Err(IndexError::Poisoned),
                };
                match env.write_txn() {
                    Ok(txn) => break Ok((guard, txn)),
                    Err(heed::Error::Mdb(heed::MdbError::MapResized)) => {
                        drop(guard);
                        if let Err(e) = self.adopt_map_size(env) {
                            break Err(e);
                        }
                    }
                    Err(e) => break Err(IndexError::lmdb(&self.path, e)),
                }
            };
            let (guard, mut wtxn) = match begun {
                Ok(pair) => pair,
                Err(e) => {
                    for p in batch {
                        let _ = p.reply.send(Err(e.duplicate()));
                    }
                    return;
                }
            };
            // LMDB ends a transaction that changed nothing without writing a new meta
            // page, so the last transaction id tells whether this batch wrote anything
            // (we hold the writer lock: no one else commits meanwhile).
            let txn_before = env.info().last_txn_id;
            let mut results = Vec::with_capacity(batch.len());
            let mut map_full = false;
            // A batch of one (the usual case when each user gets a message now and then)
            // runs in the batch's transaction itself: a nested one costs LMDB fresh page
            // lists (an mmap, page faults and a munmap per delivery), and there is no
            // other operation whose changes a failure must spare; the whole transaction
            // is aborted instead.
            let alone = batch.len() == 1;
            // whether an operation that succeeded changed mail (not only full text)
            let mut loud = false;
            for p in batch {
                let (ran, quiet) = if alone {
                    self.run_alone(dbs, &mut wtxn, p.op)
                } else {
                    self.run_one(env, dbs, &mut wtxn, p.op)
                };
                let outcome = match ran {
                    Err(IndexError::MapFull { .. }) => {
                        map_full = true;
                        Err(IndexError::MapFull { path: self.path.clone() })
                    }
                    other => other,
                };
                loud |= outcome.is_ok() && !quiet;
                results.push((p.reply, outcome));
            }
            let failed_alone = alone && results.iter().any(|(_, o)| o.is_err());
            let committed = if failed_alone {
                // its partial changes are in `wtxn` itself: nothing of it may stay
                wtxn.abort();
                Ok(())
            } else {
                // a planned fault fails the commit as LMDB would (the transaction is aborted)
                match maildex_faults::hit(maildex_faults::Point::IndexCommit) {
                    Ok(()) => wtxn.commit().map_err(|e| IndexError::lmdb(&self.path, e)),
                    Err(error) => Err(IndexError::Io {
                        path: self.path.clone(),
                        error,
                    }),
                }
            };
            match committed {
                Ok(()) => {
                    // Only a commit that changed something wakes the IDLE sessions: each
                    // woken session re-reads and may write (a \Recent claim, a sync), and
                    // waking everyone for those no-op writes too fed a storm of wake-ups.
                    // Nor does one whose every change was quiet (full text written after
                    // the delivery): no session has anything to report for it, and the
                    // background indexer would be woken by its own writes.
                    if loud && env.info().last_txn_id != txn_before {
                        let generation =
                            self.commits.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                        // published before the writers return, so a change a writer reports
                        // is visible to every reader woken by it
                        self.notify(generation);
                    }
                    for (reply, outcome) in results {
                        let _ = reply.send(outcome);
                    }
                }
                Err(e) => {
                    map_full |= matches!(e, IndexError::MapFull { .. });
                    for (reply, _) in results {
                        let _ = reply.send(Err(e.duplicate()));
                    }
                }
            }
            drop(guard);
            if map_full {
                if let Err(e) = self.grow(env, 2) {
                    tracing::warn!(index = %self.path.display(), error = %e, "map full and could not grow");
                }
            }
        })
    }

    /// Runs `op` in `wtxn` directly; on failure the caller must abort `wtxn`. Also returns
    /// whether the operation called [`Writer::quietly`].
    fn run_alone(&self, dbs: &Dbs<'_>, wtxn: &mut RwTxn<'_>, op: WriteOp) -> (Outcome, bool) {
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut w = Writer::new(dbs, wtxn);
            let out = op(&mut w);
            (out, w.is_quiet())
        }));
        ran.unwrap_or_else(|_| {
            tracing::error!(index = %self.path.display(), "index write operation panicked");
            let e = IndexError::Internal("index write operation panicked".into());
            (Err(e), true)
        })
    }

    fn run_one<'e>(
        &self,
        env: &'e Env<WithoutTls>,
        dbs: &Dbs<'_>,
        wtxn: &mut RwTxn<'e>,
        op: WriteOp,
    ) -> (Outcome, bool) {
        let mut child = match env.nested_write_txn(wtxn) {
            Ok(child) => child,
            Err(e) => return (Err(IndexError::lmdb(&self.path, e)), true),
        };
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut w = Writer::new(dbs, &mut child);
            let out = op(&mut w);
            (out, w.is_quiet())
        }));
        match ran {
            Ok((Ok(value), quiet)) => match child.commit() {
                Ok(()) => (Ok(value), quiet),
                Err(e) => (Err(IndexError::lmdb(&self.path, e)), true),
            },
            Ok((Err(e), _)) => {
                child.abort();
                (Err(e), true)
            }
            Err(_) => {
                child.abort();
                tracing::error!(index = %self.path.display(), "index write operation panicked");
                let e = IndexError::Internal("index write operation panicked".into());
                (Err(e), true)
            }
        }
    }

    /// Write operations waiting for the current leader's commit.
    pub fn queued(&self) -> usize {
        self.group.lock().map_or(0, |g| g.queue.len())
    }
}
