//! CONDSTORE and QRESYNC (RFC 7162): what enables them, and what SELECT (QRESYNC ...) and
//! UID FETCH (CHANGEDSINCE m VANISHED) tell a client that was away. What changed comes from
//! the store's change log: a resync after 100 flag changes and 50 expunges reads about 150
//! records, whatever the mailbox's size.

use std::sync::Arc;

use maildex_imap_proto::{SearchKey, SequenceSet};
use maildex_store::{ChangeSet, ModSeq, Uid};

use super::{blocking, untagged, CmdError, Done, Session, State};

/// Whether a search uses the MODSEQ criterion (then SEARCH answers with the highest
/// modseq of what it found, RFC 7162 §3.1.5).
pub(crate) fn uses_modseq(keys: &[SearchKey]) -> bool {
    keys.iter().any(|k| match k {
        SearchKey::ModSeq(_) => true,
        SearchKey::And(ks) => uses_modseq(ks),
        SearchKey::Not(k) => uses_modseq(std::slice::from_ref(k)),
        SearchKey::Or(a, b) => {
            uses_modseq(std::slice::from_ref(a)) || uses_modseq(std::slice::from_ref(b))
        }
        _ => false,
    })
}

/// The UIDs below `uid_next` that are not in `present` (ascending), as ranges, limited to
/// `known` when the client named the UIDs it knows: what VANISHED (EARLIER) reports when
/// the change log no longer reaches back to the client's modseq (RFC 7162 §3.2.5.2 lets
/// the server list UIDs the client never saw).
fn absent_ranges(present: &[Uid], uid_next: Uid, known: Option<&SequenceSet>) -> Vec<(Uid, Uid)> {
    let uid_next = uid_next.get();
    let mut gaps = Vec::new();
    let mut next = 1u32;
    let present = present.iter().map(|u| u.get());
    for u in present.chain(std::iter::once(uid_next)) {
        if u > next {
            gaps.push((next, u - 1));
        }
        next = next.max(u.saturating_add(1));
    }
    let typed = |v: Vec<(u32, u32)>| v.into_iter().map(|(a, b)| (Uid(a), Uid(b))).collect();
    let Some(known) = known else {
        return typed(gaps);
    };
    let known = known
        .resolve(uid_next.saturating_sub(1))
        .unwrap_or_default();
    let mut out = Vec::new();
    for (a, b) in gaps {
        for &(ka, kb) in &known {
            let (lo, hi) = (a.max(ka), b.min(kb));
            if lo <= hi {
                out.push((lo, hi));
            }
        }
    }
    out.sort_unstable();
    typed(out)
}

/// `uids` as ranges (sorted, merged), those outside `known` dropped.
fn uid_ranges(uids: &[Uid], known: Option<&SequenceSet>, largest: Uid) -> Vec<(Uid, Uid)> {
    let known = known.map(|k| k.resolve(largest.get()).unwrap_or_default());
    let mut v: Vec<Uid> = uids
        .iter()
        .copied()
        .filter(|u| {
            known
                .as_ref()
                .is_none_or(|k| k.iter().any(|&(a, b)| (a..=b).contains(&u.get())))
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    untagged::ranges_of(&v)
}

impl Session {
    /// ENABLE (RFC 5161 §3.1): CONDSTORE and QRESYNC (which implies CONDSTORE, RFC 7162
    /// §3.2.3); other names are ignored. `* ENABLED` lists what the command enabled.
    pub(super) fn enable(&mut self, capabilities: &[String]) -> Done {
        let mut now: Vec<&str> = Vec::new();
        for c in capabilities {
            if c.eq_ignore_ascii_case("CONDSTORE") {
                self.enabled.condstore = true;
                now.push("CONDSTORE");
            } else if c.eq_ignore_ascii_case("QRESYNC") {
                self.enabled.condstore = true;
                self.enabled.qresync = true;
                now.push("QRESYNC");
            }
        }
        now.dedup();
        self.out.extend_from_slice(b"* ENABLED");
        for c in now {
            self.out.push(b' ');
            self.out.extend_from_slice(c.as_bytes());
        }
        self.out.extend_from_slice(b"\r\n");
        Done::ok("Enabled.")
    }

    /// A CONDSTORE enabling command was given (RFC 7162 §3.1: SELECT/EXAMINE (CONDSTORE),
    /// STATUS HIGHESTMODSEQ, FETCH MODSEQ or CHANGEDSINCE, SEARCH MODSEQ, STORE
    /// UNCHANGEDSINCE): from now on flag FETCHes carry MODSEQ.
    pub(super) fn enable_condstore(&mut self) {
        self.enabled.condstore = true;
    }

    /// What changed in the selected mailbox since `modseq`, read by the store.
    async fn changes_since(&self, modseq: ModSeq) -> Result<ChangeSet, CmdError> {
        let State::Selected(authed, sel) = &self.state else {
            return Err(CmdError::Bad("no mailbox selected".into()));
        };
        let (store, mailbox) = (Arc::clone(&authed.store), sel.mailbox.clone());
        Ok(blocking(move || store.changes_since(&mailbox, modseq)).await??)
    }

    /// SELECT/EXAMINE (QRESYNC (uidvalidity modseq [known-uids ...])) after the mailbox's
    /// own responses (RFC 7162 §3.2.5): `* VANISHED (EARLIER)` for what was expunged since
    /// `modseq` and a FETCH (UID FLAGS MODSEQ) for each message changed since. Nothing
    /// when the UIDVALIDITY is not the client's (its cache is void; a full sync follows).
    pub(super) async fn qresync_select(
        &mut self,
        q: &maildex_imap_proto::Qresync,
        uid_next: Uid,
    ) -> Result<(), CmdError> {
        let State::Selected(_, sel) = &self.state else {
            return Ok(());
        };
        if q.uidvalidity != sel.mailbox.uidvalidity() {
            return Ok(());
        }
        let changes = self.changes_since(ModSeq(q.modseq)).await?;
        let State::Selected(_, sel) = &mut self.state else {
            return Ok(());
        };
        let known = q.known_uids.as_ref();
        let largest = Uid(uid_next.get().saturating_sub(1));
        let vanished = match &changes.expunged {
            Some(gone) => uid_ranges(gone, known, largest),
            None => {
                let present: Vec<Uid> = sel.view.uids().collect();
                absent_ranges(&present, uid_next, known)
            }
        };
        untagged::vanished(&mut self.out, true, &vanished);
        // FETCH for the changed messages the client knows (all of them when it did not say
        // which it knows), as Dovecot does: a new one is told by EXISTS
        let known = known.map(|k| k.resolve(largest.get()).unwrap_or_default());
        let knows = |uid: Uid| {
            known
                .as_ref()
                .is_none_or(|k| k.iter().any(|&(a, b)| (a..=b).contains(&uid.get())))
        };
        for (uid, st) in changes.changed.iter().filter(|(u, _)| knows(*u)) {
            if let Some(seq) = sel.view.seq(*uid) {
                let recent = sel.is_recent(*uid);
                let f = untagged::flags_of(st.flags, st.keywords, &sel.keywords, recent);
                untagged::fetch_flags(&mut self.out, seq, Some(*uid), f, Some(st.modseq));
            }
        }
        Ok(())
    }

    /// UID FETCH (CHANGEDSINCE m VANISHED) (RFC 7162 §3.2.6): `* VANISHED (EARLIER)` for
    /// the UIDs of `set` expunged since `m`, before the FETCHes.
    pub(super) async fn fetch_vanished(
        &mut self,
        set: &SequenceSet,
        modseq: ModSeq,
    ) -> Result<(), CmdError> {
        let changes = self.changes_since(modseq).await?;
        let State::Selected(_, sel) = &self.state else {
            return Ok(());
        };
        let largest = sel.view.max_uid().unwrap_or(Uid(0)).max(
            changes
                .expunged
                .as_ref()
                .and_then(|g| g.iter().max().copied())
                .unwrap_or(Uid(0)),
        );
        let vanished = match &changes.expunged {
            Some(gone) => uid_ranges(gone, Some(set), largest),
            None => {
                let present: Vec<Uid> = sel.view.uids().collect();
                absent_ranges(&present, largest.next(), Some(set))
            }
        };
        untagged::vanished(&mut self.out, true, &vanished);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use maildex_imap_proto::{SeqNum, SeqRange};

    fn set(ranges: &[(u32, u32)]) -> SequenceSet {
        SequenceSet::Ranges(
            ranges
                .iter()
                .map(|&(a, b)| SeqRange {
                    start: SeqNum::Value(a),
                    end: SeqNum::Value(b),
                })
                .collect(),
        )
    }

    fn uids(list: &[u32]) -> Vec<Uid> {
        list.iter().copied().map(Uid).collect()
    }

    fn bare(ranges: Vec<(Uid, Uid)>) -> Vec<(u32, u32)> {
        ranges
            .into_iter()
            .map(|(a, b)| (a.get(), b.get()))
            .collect()
    }

    #[test]
    fn absent_uids_are_the_gaps_below_uid_next_within_the_known_ones() {
        assert_eq!(
            bare(absent_ranges(&uids(&[2, 3, 7]), Uid(10), None)),
            [(1, 1), (4, 6), (8, 9)]
        );
        assert_eq!(bare(absent_ranges(&[], Uid(1), None)), []);
        assert_eq!(
            bare(absent_ranges(
                &uids(&[2, 3, 7]),
                Uid(10),
                Some(&set(&[(3, 5), (9, 20)]))
            )),
            [(4, 5), (9, 9)]
        );
    }

    #[test]
    fn expunged_uids_become_merged_ranges_within_the_known_ones() {
        let gone = uids(&[5, 3, 4, 9]);
        assert_eq!(bare(uid_ranges(&gone, None, Uid(9))), [(3, 5), (9, 9)]);
        assert_eq!(
            bare(uid_ranges(&gone, Some(&set(&[(4, 9)])), Uid(9))),
            [(4, 5), (9, 9)]
        );
    }

    #[test]
    fn modseq_criteria_are_found_at_any_depth() {
        let m = SearchKey::ModSeq(5);
        assert!(uses_modseq(&[SearchKey::Not(Box::new(m.clone()))]));
        assert!(uses_modseq(&[SearchKey::And(vec![SearchKey::All, m])]));
        assert!(!uses_modseq(&[SearchKey::All]));
    }
}
