//! Work on every core for the passes that read many message files (a first index, a
//! rebuild, the full text's extraction) and for `maildex index rebuild`'s users. Written
//! here rather than taken from rayon: two functions over scoped threads, no pool living on
//! in the daemon between passes.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// `f` of each of `items` on `workers` threads, each worker taking the next item not yet
/// taken (so one large item does not leave the others idle until a fixed share of the
/// rest is done) and keeping a state `S` of its own (a read buffer) from one item to the
/// next. `done` is called on this thread with each item's index and result, in the order
/// they finish; once it returns false no further item is started (those started finish
/// and are reported).
pub fn for_each_in_parallel<T: Sync, S: Default, R: Send>(
    items: &[T],
    workers: usize,
    f: impl Fn(&mut S, &T) -> R + Sync,
    mut done: impl FnMut(usize, R) -> bool,
) {
    if workers <= 1 || items.len() < 2 {
        let mut state = S::default();
        for (i, item) in items.iter().enumerate() {
            if !done(i, f(&mut state, item)) {
                break;
            }
        }
        return;
    }
    let (next, stop, f) = (AtomicUsize::new(0), AtomicBool::new(false), &f);
    let (next, stop) = (&next, &stop);
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..workers.min(items.len()) {
            let tx = tx.clone();
            scope.spawn(move || {
                work_through(items, next, stop, f, |i, r| tx.send((i, r)).is_ok());
            });
        }
        drop(tx);
        for (i, r) in rx {
            if !done(i, r) {
                stop.store(true, Ordering::SeqCst);
            }
        }
    });
}

/// One worker's loop: takes the next item not yet taken until none is left, `stop` is
/// set, or `emit` of a result returns false; its state `S` kept from item to item.
fn work_through<T, S: Default, R>(
    items: &[T],
    next: &AtomicUsize,
    stop: &AtomicBool,
    f: &impl Fn(&mut S, &T) -> R,
    mut emit: impl FnMut(usize, R) -> bool,
) {
    let mut state = S::default();
    while !stop.load(Ordering::SeqCst) {
        let i = next.fetch_add(1, Ordering::SeqCst);
        let Some(item) = items.get(i) else { break };
        if !emit(i, f(&mut state, item)) {
            break;
        }
    }
}

/// `f` of each of `items` on `workers` threads (this one among them), each taking the next
/// item not yet taken as in [`for_each_in_parallel`]; the results in `items`' order.
///
/// Each worker keeps its results until it runs out of items, rather than sending each one
/// back as it is made: a result sent through a channel woke the thread waiting on it, a
/// futex wake and two context switches per message file of a rebuild on two cores (about
/// a tenth of its CPU, `perf record`, issue 19 #1).
pub(crate) fn map_in_parallel<T: Sync, S: Default, R: Send>(
    items: &[T],
    workers: usize,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> Vec<R> {
    let workers = workers.min(items.len()).max(1);
    let (next, never) = (AtomicUsize::new(0), AtomicBool::new(false));
    let work = || {
        let mut out = Vec::new();
        work_through(items, &next, &never, &f, |i, r| {
            out.push((i, r));
            true
        });
        out
    };
    let parts: Vec<Vec<(usize, R)>> = std::thread::scope(|scope| {
        let others: Vec<_> = (1..workers).map(|_| scope.spawn(work)).collect();
        let mut parts = vec![work()];
        for o in others {
            parts.push(o.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        parts
    });
    let mut slots: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    for (i, r) in parts.into_iter().flatten() {
        slots[i] = Some(r);
    }
    // every item was taken by one worker
    slots.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_the_items_order_whatever_each_item_costs() {
        let items: Vec<u64> = (0..500).collect();
        for workers in [1, 2, 3, 8] {
            let out = map_in_parallel(&items, workers, |calls: &mut u64, &i| {
                *calls += 1;
                // uneven work: every seventh item is slow
                if i % 7 == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
                i * 2
            });
            assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        }
    }

    #[test]
    fn each_worker_keeps_its_state_across_items() {
        let items: Vec<u32> = (0..200).collect();
        let seen = map_in_parallel(&items, 2, |count: &mut u32, _| {
            *count += 1;
            *count
        });
        // two workers, each counting its own items: the counts sum to one per item
        let max_per_worker: u32 = seen.iter().copied().max().unwrap_or(0);
        assert!(
            max_per_worker >= 100,
            "a worker took at least half: {max_per_worker}"
        );
        assert_eq!(seen.len(), 200);
    }

    #[test]
    fn no_item_is_started_after_done_says_stop() {
        let items: Vec<u32> = (0..1000).collect();
        for workers in [1, 2, 4] {
            let mut reported = Vec::new();
            for_each_in_parallel(
                &items,
                workers,
                |_: &mut (), &i| {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    i
                },
                |i, r| {
                    assert_eq!(i as u32, r);
                    reported.push(i);
                    i != 10
                },
            );
            // the items started before the stop was seen finish; the rest never start
            assert!(reported.contains(&10));
            assert!(
                reported.len() < items.len(),
                "{workers} workers: none stopped"
            );
            if workers == 1 {
                assert_eq!(reported.len(), 11);
            }
        }
    }
}
