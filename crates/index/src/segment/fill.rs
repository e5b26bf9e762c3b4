//! Full segments that fill their LMDB pages (docs/INDEX-FORMAT.md, "Segments that fill
//! their pages").

use super::{encode, Packing, RAW, SEG};
use crate::IndexError;

/// LMDB's page on the machines we run on (the OS page, 4 KiB on x86-64 and arm64 Linux)
/// and the header of a run of overflow pages. A value over about 2 KB gets whole overflow
/// pages of its own; segments of a fixed [`SEG`] left the last one about half empty, a
/// fifth of the listing columns' pages (docs/INDEX-FORMAT.md, "Segments that fill their
/// pages"). Only how full pages are depends on it, not what is read back.
const PAGE: usize = 4096;
const PAGE_HEADER: usize = 16;
/// Entries in a segment at most: reading one message decompresses its whole segment.
pub(super) const MAX_SEG: usize = 4 * SEG;
/// A segment is grown while its pages are less than seven eighths full (an inline value
/// counts as one page: LMDB fills its leaf pages about half with values of 1-2 KB).
const FILL_EIGHTHS: usize = 7;
/// Encodings tried beyond the first, each of the estimated number of entries that fit.
const FILL_TRIES: usize = 4;
/// Segments are grown only while an encoding costs little: raw ones, or values of at most
/// this many bytes (the listing columns' segments of sixteen, 2-4 KB compressed). Growing
/// the header blocks' and the texts' too (15-20 KB, a zstd pass over 50-300 KB for each
/// miss of the estimate) made the index with full text 1.7% smaller, and the rebuild and
/// the full-text indexing 5-15% slower (`maildex-bench rebuild`, three runs each).
const FILL_MAX_VALUE: usize = 2 * PAGE;

/// The bytes that the pages holding a value of `len` bytes could hold.
fn room(len: usize) -> usize {
    (len + PAGE_HEADER).div_ceil(PAGE).max(1) * PAGE - PAGE_HEADER
}

/// Whether a stored segment value may take more entries: its encoding is cheap (raw,
/// or at most [`FILL_MAX_VALUE`] bytes) and its pages are less than [`FILL_EIGHTHS`]/8
/// full.
pub(super) fn has_room(value: &[u8]) -> bool {
    let cheap = value.first() == Some(&RAW) || value.len() <= FILL_MAX_VALUE;
    cheap && value.len() * 8 < room(value.len()) * FILL_EIGHTHS
}

thread_local! {
    /// Per column (by name), the encoded bytes per plain byte of the last full segment
    /// this thread wrote: what [`fill_pages`] sizes the next one by, so that it usually
    /// encodes a segment once (trying counts one after another cost an `index rebuild` a
    /// sixth of its time).
    static RATIOS: std::cell::RefCell<Vec<(&'static str, f64)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

fn last_ratio(name: &'static str) -> Option<f64> {
    RATIOS.with(|r| r.borrow().iter().find(|(n, _)| *n == name).map(|e| e.1))
}

fn keep_ratio(name: &'static str, ratio: f64) {
    RATIOS.with(|r| {
        let mut all = r.borrow_mut();
        match all.iter_mut().find(|(n, _)| *n == name) {
            Some(e) => e.1 = ratio,
            None => all.push((name, ratio)),
        }
    })
}

/// Encodes the first `start` or more of `entries` (`start` at least [`SEG`] and at most
/// their number) as one full segment that fills its pages, up to [`MAX_SEG`] entries:
/// as many as the column's last ratio of encoded to plain bytes says fit in the pages
/// that `start` entries take, then, while the pages are less than [`FILL_EIGHTHS`]/8
/// full, as many more as this segment's own ratio says fit. `name` is the column's.
/// Returns how many entries the segment holds and its value.
pub(super) fn fill_pages<D: AsRef<[u8]>>(
    entries: &[(u32, D)],
    start: usize,
    packing: Packing,
    name: &'static str,
) -> Result<(usize, Vec<u8>), IndexError> {
    let mut cap = entries.len().min(MAX_SEG.max(start));
    // plain bytes of the first k entries (a UID and a length of up to five bytes each)
    let mut sums = Vec::with_capacity(cap + 1);
    sums.push(0usize);
    for (_, d) in &entries[..cap] {
        sums.push(sums[sums.len() - 1] + d.as_ref().len() + 6);
    }
    // the most entries from `n` on whose estimated bytes stay under 15/16 of `room`
    let fit = |ratio: f64, n: usize, cap: usize, room: usize| {
        let goal = (room * 15 / 16) as f64;
        (n..=cap)
            .rev()
            .find(|&k| sums[k] as f64 * ratio <= goal)
            .unwrap_or(n)
    };
    let mut n = start;
    if let Some(ratio) = last_ratio(name) {
        let guess = (sums[start] as f64 * ratio) as usize;
        if packing == Packing::Raw || guess <= FILL_MAX_VALUE {
            n = fit(ratio, start, cap, room(guess));
        }
    }
    let mut value = encode(&entries[..n], packing)?;
    for _ in 0..FILL_TRIES {
        let ratio = value.len() as f64 / sums[n].max(1) as f64;
        keep_ratio(name, ratio);
        if n >= cap || !has_room(&value) {
            break;
        }
        let room = room(value.len());
        let raw = value.first() == Some(&RAW);
        let k = fit(ratio, n, cap, room).max(n + 1);
        let more = encode(&entries[..k], packing)?;
        // a raw segment stays raw (one over RAW_MAX would be compressed, and `cache-sort`
        // and `fts-sig` are read in place)
        if more.len() <= room && (!raw || more[0] == RAW) {
            n = k;
            value = more;
        } else {
            // too many: the next try stays below this count
            cap = k - 1;
        }
    }
    Ok((n, value))
}
