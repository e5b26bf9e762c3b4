//! Work on every core for the passes that read many message files (a first index, a
//! rebuild, the full text's extraction). Written here rather than taken from rayon: one
//! function, scoped threads, no pool living on in the daemon between passes.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` of each of `items` on `workers` threads, the results in `items`' order. Each
/// worker takes the next item not yet taken, so one large message does not leave the
/// other workers idle until a fixed share of the rest is done, and keeps a state `S`
/// of its own (a read buffer) from one item to the next.
pub(crate) fn map_in_parallel<T: Sync, S: Default, R: Send>(
    items: &[T],
    workers: usize,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> Vec<R> {
    if workers <= 1 || items.len() < 2 {
        let mut state = S::default();
        return items.iter().map(|item| f(&mut state, item)).collect();
    }
    let next = AtomicUsize::new(0);
    let (f, next) = (&f, &next);
    let done: Vec<Vec<(usize, R)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers.min(items.len()))
            .map(|_| {
                scope.spawn(move || {
                    let mut state = S::default();
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        out.push((i, f(&mut state, item)));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut slots: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    for (i, r) in done.into_iter().flatten() {
        slots[i] = Some(r);
    }
    // every index below items.len() was taken by exactly one worker
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
}
