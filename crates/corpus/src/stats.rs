//! Corpus statistics: counts per folder and size quantiles.

use std::collections::BTreeMap;
use std::fmt;

/// Size quantiles of a set of messages, in bytes (nearest-rank method).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SizeQuantiles {
    /// Median size.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest message.
    pub max: u64,
}

/// Nearest-rank quantiles of `sizes` (sorted in place); all zero when empty.
pub fn size_quantiles(sizes: &mut [u64]) -> SizeQuantiles {
    if sizes.is_empty() {
        return SizeQuantiles::default();
    }
    sizes.sort_unstable();
    let rank = |p: f64| {
        let r = (p * sizes.len() as f64).ceil() as usize;
        sizes[r.clamp(1, sizes.len()) - 1]
    };
    SizeQuantiles {
        p50: rank(0.50),
        p90: rank(0.90),
        p99: rank(0.99),
        max: sizes[sizes.len() - 1],
    }
}

/// What [`generate`](crate::generate) wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Number of users (Maildirs).
    pub users: usize,
    /// Number of message files.
    pub messages: usize,
    /// Total size of the message files in bytes (LF line endings, as stored).
    pub bytes: u64,
    /// Messages per IMAP mailbox name (UTF-8, e.g. `INBOX`, `Lists.rust`, `Réunions`),
    /// summed over users.
    pub per_folder: BTreeMap<String, usize>,
    /// Messages left in `new/` (no flags, \Recent for the first session).
    pub in_new: usize,
    /// Messages without the \Seen flag (including those in `new/`).
    pub unseen: usize,
    /// Size quantiles over all messages.
    pub sizes: SizeQuantiles,
}

/// Per-user accumulation, merged into [`Stats`].
pub(crate) struct UserStats {
    folders: Vec<String>,
    counts: Vec<usize>,
    sizes: Vec<u64>,
    in_new: usize,
    unseen: usize,
}

impl UserStats {
    pub(crate) fn new<'a>(folders: impl Iterator<Item = &'a str>) -> Self {
        let folders: Vec<String> = folders.map(str::to_owned).collect();
        let counts = vec![0; folders.len()];
        UserStats {
            folders,
            counts,
            sizes: Vec::new(),
            in_new: 0,
            unseen: 0,
        }
    }

    pub(crate) fn add(&mut self, folder: usize, size: u64, in_new: bool, unseen: bool) {
        self.counts[folder] += 1;
        self.sizes.push(size);
        self.in_new += usize::from(in_new);
        self.unseen += usize::from(unseen);
    }
}

/// Merges per-user statistics (in user order) into corpus statistics.
pub(crate) fn merge(users: Vec<UserStats>) -> Stats {
    let mut stats = Stats {
        users: users.len(),
        ..Stats::default()
    };
    let mut sizes = Vec::new();
    for u in users {
        for (name, n) in u.folders.iter().zip(&u.counts) {
            *stats.per_folder.entry(name.clone()).or_insert(0) += n;
        }
        stats.messages += u.sizes.len();
        stats.bytes += u.sizes.iter().sum::<u64>();
        stats.in_new += u.in_new;
        stats.unseen += u.unseen;
        sizes.extend(u.sizes);
    }
    stats.sizes = size_quantiles(&mut sizes);
    stats
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "users:     {}", self.users)?;
        writeln!(
            f,
            "messages:  {} ({} in new/, {} unseen)",
            self.messages, self.in_new, self.unseen
        )?;
        writeln!(
            f,
            "bytes:     {} ({:.1} MiB)",
            self.bytes,
            self.bytes as f64 / 1_048_576.0
        )?;
        writeln!(
            f,
            "sizes:     p50 {} B, p90 {} B, p99 {} B, max {} B",
            self.sizes.p50, self.sizes.p90, self.sizes.p99, self.sizes.max
        )?;
        writeln!(f, "folders:")?;
        for (name, n) in &self.per_folder {
            writeln!(f, "  {name:<16} {n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let mut v: Vec<u64> = (1..=100).rev().collect();
        let q = size_quantiles(&mut v);
        assert_eq!(
            q,
            SizeQuantiles {
                p50: 50,
                p90: 90,
                p99: 99,
                max: 100
            }
        );
        assert_eq!(size_quantiles(&mut []), SizeQuantiles::default());
        assert_eq!(size_quantiles(&mut [7]).p50, 7);
    }
}
