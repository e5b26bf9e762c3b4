//! Sequence sets (RFC 3501 §9 `sequence-set`, RFC 9051 §9).

use std::fmt;

/// One end of a range: a number or `*` (RFC 3501 §9 `seq-number`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SeqNum {
    /// A non-zero number (`nz-number`).
    Value(u32),
    /// `*`: the largest number in use (RFC 3501 §9 `seq-number`).
    Largest,
}

impl SeqNum {
    /// The number, with `*` taken as `largest`.
    pub fn resolve(self, largest: u32) -> u32 {
        match self {
            SeqNum::Value(n) => n,
            SeqNum::Largest => largest,
        }
    }
}

impl fmt::Display for SeqNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SeqNum::Value(n) => write!(f, "{n}"),
            SeqNum::Largest => f.write_str("*"),
        }
    }
}

/// One element of a set: `n` (`start == end`) or `n:m` as the client wrote
/// it (RFC 3501 §9 `seq-range`; `n:m` and `m:n` mean the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SeqRange {
    /// First number as written.
    pub start: SeqNum,
    /// Second number as written (equal to `start` for a single number).
    pub end: SeqNum,
}

impl SeqRange {
    /// The range as `(low, high)` with `*` taken as `largest`
    /// (RFC 3501 §9: "the order of the numbers does not matter").
    pub fn resolve(&self, largest: u32) -> (u32, u32) {
        let a = self.start.resolve(largest);
        let b = self.end.resolve(largest);
        (a.min(b), a.max(b))
    }
}

/// A sequence set: message sequence numbers or UIDs depending on the
/// command (RFC 3501 §9 `sequence-set`), or `$`, the saved search result
/// (RFC 5182 §2).
///
/// The number of ranges is bounded by [`crate::Limits::max_items`] when
/// parsed, so a client cannot make the server allocate without bound.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SequenceSet {
    /// Explicit ranges, in the client's order, never empty.
    Ranges(Vec<SeqRange>),
    /// `$`: the result saved by an earlier `SEARCH RETURN (SAVE)`
    /// (RFC 5182 §2.1).
    Saved,
}

impl SequenceSet {
    /// A set of one number.
    pub fn single(n: u32) -> SequenceSet {
        SequenceSet::Ranges(vec![SeqRange {
            start: SeqNum::Value(n),
            end: SeqNum::Value(n),
        }])
    }

    /// A set of one range `a:b`.
    pub fn range(a: SeqNum, b: SeqNum) -> SequenceSet {
        SequenceSet::Ranges(vec![SeqRange { start: a, end: b }])
    }

    /// The ranges, or `None` for `$`.
    pub fn ranges(&self) -> Option<&[SeqRange]> {
        match self {
            SequenceSet::Ranges(r) => Some(r),
            SequenceSet::Saved => None,
        }
    }

    /// Resolves `*` to `largest` and returns sorted, merged, inclusive
    /// ranges (RFC 3501 §6.4.8: with UIDs, `*` is the largest UID in use, and
    /// `n:*` includes the last message even when `n` is larger). `$` gives
    /// `None`: the caller substitutes its saved result. With `largest == 0`
    /// (empty mailbox) `*` resolves to 0, so `1:*` gives `[(0, 1)]`; callers
    /// intersect with what exists.
    pub fn resolve(&self, largest: u32) -> Option<Vec<(u32, u32)>> {
        let ranges = self.ranges()?;
        let mut out: Vec<(u32, u32)> = ranges.iter().map(|r| r.resolve(largest)).collect();
        out.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(out.len());
        for (lo, hi) in out {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        Some(merged)
    }

    /// True when `n` is in the set, `*` taken as `largest`; `$` is never
    /// matched here.
    pub fn contains(&self, n: u32, largest: u32) -> bool {
        self.ranges().is_some_and(|rs| {
            rs.iter().any(|r| {
                let (lo, hi) = r.resolve(largest);
                (lo..=hi).contains(&n)
            })
        })
    }
}

impl fmt::Display for SequenceSet {
    /// The wire form, as parsed (`1:5,7,9:*` or `$`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SequenceSet::Saved => f.write_str("$"),
            SequenceSet::Ranges(rs) => {
                for (i, r) in rs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    if r.start == r.end {
                        write!(f, "{}", r.start)?;
                    } else {
                        write!(f, "{}:{}", r.start, r.end)?;
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(rs: &[(u32, u32)]) -> SequenceSet {
        SequenceSet::Ranges(
            rs.iter()
                .map(|&(a, b)| SeqRange {
                    start: if a == 0 {
                        SeqNum::Largest
                    } else {
                        SeqNum::Value(a)
                    },
                    end: if b == 0 {
                        SeqNum::Largest
                    } else {
                        SeqNum::Value(b)
                    },
                })
                .collect(),
        )
    }

    #[test]
    fn resolve_sorts_merges_and_swaps() {
        let s = set(&[(9, 7), (1, 2), (3, 3), (20, 0)]);
        assert_eq!(s.resolve(15), Some(vec![(1, 3), (7, 9), (15, 20)]));
        assert_eq!(s.to_string(), "9:7,1:2,3,20:*");
        assert!(s.contains(16, 15));
        assert!(!s.contains(5, 15));
        assert_eq!(SequenceSet::Saved.resolve(3), None);
    }

    #[test]
    fn star_alone_is_largest() {
        assert_eq!(set(&[(0, 0)]).resolve(42), Some(vec![(42, 42)]));
        assert_eq!(set(&[(0, 0)]).to_string(), "*");
    }
}
