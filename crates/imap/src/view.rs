//! A session's view of the selected mailbox: message sequence numbers and UIDs.
//!
//! RFC 3501 §2.3.1.2: sequence numbers are 1..=n over the messages the session knows, in
//! UID order, and only change by EXPUNGE responses (and grow by EXISTS). The view is a list
//! of runs of consecutive UIDs, so a mailbox whose UIDs have few gaps costs a few bytes
//! whatever its size (the design brief: memory per session does not grow with the mailbox),
//! and the worst case (every other UID expunged) costs what a plain `Vec<u32>` would.
//! The runs hold bare numbers; what goes in and out is a [`Uid`].

use maildex_store::Uid;

/// A run of consecutive UIDs `first..first + len`, at sequence numbers `seq..seq + len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    first: u32,
    len: u32,
    /// Sequence number of `first` (1-based).
    seq: u32,
}

impl Run {
    fn last(&self) -> u32 {
        self.first + (self.len - 1)
    }
}

/// The UIDs of a mailbox as one session sees them, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    runs: Vec<Run>,
    count: u32,
}

impl View {
    /// An empty view.
    pub fn new() -> View {
        View::default()
    }

    /// A view over `uids`, which must be strictly increasing (index order).
    pub fn from_uids(uids: impl IntoIterator<Item = Uid>) -> View {
        let mut v = View::new();
        for uid in uids {
            v.push(uid);
        }
        v
    }

    /// Number of messages (the EXISTS count).
    pub fn len(&self) -> u32 {
        self.count
    }

    /// True when the view holds no message.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Number of runs (what the view costs in memory, for tests and stats).
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Highest UID in the view.
    pub fn max_uid(&self) -> Option<Uid> {
        self.runs.last().map(|r| Uid(r.last()))
    }

    /// Appends a UID above every UID already in the view (a new message: EXISTS). Returns
    /// false, changing nothing, when `uid` is not above the current maximum.
    pub fn push(&mut self, uid: Uid) -> bool {
        if uid == Uid(0) || self.max_uid().is_some_and(|m| uid <= m) {
            return false;
        }
        let uid = uid.get();
        self.count += 1;
        match self.runs.last_mut() {
            Some(r) if r.last() + 1 == uid => r.len += 1,
            _ => self.runs.push(Run {
                first: uid,
                len: 1,
                seq: self.count,
            }),
        }
        true
    }

    /// The UID at sequence number `seq` (1-based).
    pub fn uid(&self, seq: u32) -> Option<Uid> {
        if seq == 0 || seq > self.count {
            return None;
        }
        let i = self.runs.partition_point(|r| r.seq <= seq) - 1;
        let r = &self.runs[i];
        Some(Uid(r.first + (seq - r.seq)))
    }

    /// The sequence number of `uid`, if the view holds it.
    pub fn seq(&self, uid: Uid) -> Option<u32> {
        let uid = uid.get();
        let i = self
            .runs
            .partition_point(|r| r.first <= uid)
            .checked_sub(1)?;
        let r = &self.runs[i];
        (uid <= r.last()).then(|| r.seq + (uid - r.first))
    }

    /// Removes `uid` (an EXPUNGE) and returns the sequence number it had, which is what the
    /// `* n EXPUNGE` response carries (RFC 3501 §7.4.1: later numbers shift down at once).
    pub fn remove(&mut self, uid: Uid) -> Option<u32> {
        let uid = uid.get();
        let i = self
            .runs
            .partition_point(|r| r.first <= uid)
            .checked_sub(1)?;
        let r = self.runs[i];
        if uid > r.last() {
            return None;
        }
        let seq = r.seq + (uid - r.first);
        // every run after this one moves down one place
        for later in &mut self.runs[i + 1..] {
            later.seq -= 1;
        }
        if r.len == 1 {
            self.runs.remove(i);
        } else if uid == r.first {
            self.runs[i] = Run {
                first: uid + 1,
                len: r.len - 1,
                seq: r.seq,
            };
        } else if uid == r.last() {
            self.runs[i].len -= 1;
        } else {
            let head = uid - r.first;
            self.runs[i].len = head;
            self.runs.insert(
                i + 1,
                Run {
                    first: uid + 1,
                    len: r.len - head - 1,
                    seq,
                },
            );
        }
        self.count -= 1;
        Some(seq)
    }

    /// The UIDs in the view, in order.
    pub fn uids(&self) -> impl Iterator<Item = Uid> + '_ {
        self.runs.iter().flat_map(|r| (r.first..=r.last()).map(Uid))
    }

    /// The UIDs in the view that lie in `lo..=hi`, in order, with their sequence numbers.
    pub fn uids_in(&self, lo: Uid, hi: Uid) -> impl Iterator<Item = (Uid, u32)> + '_ {
        let (lo, hi) = (lo.get(), hi.get());
        let start = self.runs.partition_point(|r| r.last() < lo);
        self.runs[start..]
            .iter()
            .take_while(move |r| r.first <= hi)
            .flat_map(move |r| {
                let a = r.first.max(lo);
                let b = r.last().min(hi);
                (a..=b).map(move |u| (Uid(u), r.seq + (u - r.first)))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn uids(list: &[u32]) -> Vec<Uid> {
        list.iter().copied().map(Uid).collect()
    }

    #[test]
    fn runs_stay_few_for_consecutive_uids() {
        let v = View::from_uids((1..=10_000).map(Uid));
        assert_eq!(v.len(), 10_000);
        assert_eq!(v.runs(), 1);
        assert_eq!(v.uid(10_000), Some(Uid(10_000)));
        assert_eq!(v.seq(Uid(5_000)), Some(5_000));
    }

    #[test]
    fn expunge_in_the_middle_shifts_later_numbers() {
        let mut v = View::from_uids(uids(&[3, 4, 5, 6, 10, 11]));
        assert_eq!(v.remove(Uid(5)), Some(3));
        assert_eq!(v.uids().collect::<Vec<_>>(), uids(&[3, 4, 6, 10, 11]));
        assert_eq!(v.seq(Uid(6)), Some(3));
        assert_eq!(v.seq(Uid(10)), Some(4));
        assert_eq!(v.uid(5), Some(Uid(11)));
        assert_eq!(v.remove(Uid(5)), None);
        assert_eq!(
            v.uids_in(Uid(4), Uid(10)).collect::<Vec<_>>(),
            [(Uid(4), 2), (Uid(6), 3), (Uid(10), 4)]
        );
    }

    #[test]
    fn push_refuses_uids_not_above_the_maximum() {
        let mut v = View::from_uids(uids(&[2, 7]));
        assert!(!v.push(Uid(7)));
        assert!(!v.push(Uid(3)));
        assert!(v.push(Uid(8)));
        assert_eq!(v.runs(), 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// The view answers like a plain sorted vector under any pushes and removals.
        #[test]
        fn matches_a_vector(
            start in proptest::collection::btree_set(1u32..400, 0..120),
            ops in proptest::collection::vec((any::<bool>(), 1u32..500), 0..80),
        ) {
            let mut model: Vec<Uid> = start.iter().copied().map(Uid).collect();
            let mut v = View::from_uids(model.iter().copied());
            for (push, n) in ops {
                let n = Uid(n);
                if push {
                    let ok = v.push(n);
                    prop_assert_eq!(ok, model.last().is_none_or(|&m| n > m));
                    if ok { model.push(n); }
                } else {
                    let want = model.iter().position(|&u| u == n).map(|i| i as u32 + 1);
                    prop_assert_eq!(v.remove(n), want);
                    model.retain(|&u| u != n);
                }
                prop_assert_eq!(v.len() as usize, model.len());
            }
            prop_assert_eq!(v.uids().collect::<Vec<_>>(), model.clone());
            for (i, &u) in model.iter().enumerate() {
                prop_assert_eq!(v.uid(i as u32 + 1), Some(u));
                prop_assert_eq!(v.seq(u), Some(i as u32 + 1));
            }
            prop_assert_eq!(v.uid(model.len() as u32 + 1), None);
            let got: Vec<_> = v.uids_in(Uid(100), Uid(300)).map(|(u, _)| u).collect();
            let want: Vec<_> = model
                .iter()
                .copied()
                .filter(|u| (Uid(100)..=Uid(300)).contains(u))
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
