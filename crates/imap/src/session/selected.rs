//! SELECT/EXAMINE, and keeping the selected mailbox's view in step with the index: the
//! untagged EXISTS / RECENT / EXPUNGE / FETCH FLAGS a session owes its client, sent only
//! where RFC 3501 §7.4.1 allows (no EXPUNGE while a FETCH, STORE or SEARCH runs).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use maildex_imap_proto::{Mailbox, ResponseCode, SelectParams};
use maildex_store::{Contents, Expunged, ModSeq, Since, Snapshot, SnapshotRequest, SyncFirst, Uid};
use tokio::sync::watch;

use super::mailbox::imap_name;
use super::{blocking, untagged, CmdError, Done, Session, State};
use crate::view::View;

/// The selected mailbox as this session knows it.
pub(crate) struct Selected {
    /// The mailbox as the store opened it (name, index id, UIDVALIDITY at SELECT).
    pub mailbox: maildex_store::Mailbox,
    /// EXAMINE, or SELECT of a mailbox we may not change.
    pub read_only: bool,
    /// Sequence numbers <-> UIDs as announced to the client.
    pub view: View,
    /// Highest modseq whose changes the session has applied to its view.
    pub modseq_seen: ModSeq,
    /// UIDs the change log says are expunged but that are still in the view, because they
    /// could not be told yet (RFC 3501 §7.4.1: no EXPUNGE during FETCH, STORE, SEARCH).
    pub expunged_pending: Vec<Uid>,
    /// UID ranges whose `\Recent` this session holds (RFC 3501 §2.3.2).
    pub recent: Vec<Range<Uid>>,
    /// Keyword table size last announced in `* FLAGS`.
    pub keywords_announced: usize,
    /// The mailbox's keyword names (dovecot-keywords letters `a`.. in order).
    pub keywords: Vec<String>,
    /// SEARCHRES `$` (RFC 5182), as UIDs.
    pub saved: Option<Vec<Uid>>,
    /// Flag changes this session made and reported itself: uid -> modseq (not echoed again).
    pub own: HashMap<Uid, ModSeq>,
    /// Index commit generations (wakes IDLE).
    pub changes: watch::Receiver<u64>,
}

impl Selected {
    /// The mailbox's name (UTF-8, the store's).
    pub fn name(&self) -> &str {
        self.mailbox.name()
    }

    /// Whether `uid` is `\Recent` for this session.
    pub fn is_recent(&self, uid: Uid) -> bool {
        self.recent.iter().any(|r| r.contains(&uid))
    }

    fn recent_count(&self) -> u32 {
        // the claimed ranges are disjoint (each claim starts where the mailbox's unclaimed
        // UIDs began); counted through the view's runs, not UID by UID over every range
        // (that was quadratic: a session under load holds hundreds of ranges)
        self.recent
            .iter()
            .filter(|r| !r.is_empty())
            .map(|r| self.view.uids_in(r.start, Uid(r.end.get() - 1)).count())
            .sum::<usize>()
            .try_into()
            .unwrap_or(u32::MAX)
    }
}

/// New keywords: a new FLAGS list, and PERMANENTFLAGS unless read-only (RFC 3501 §7.2.6),
/// when `keywords` (the mailbox's, in letter order) differ from what `sel` announced.
pub(crate) fn announce_keywords(out: &mut Vec<u8>, sel: &mut Selected, keywords: &[String]) {
    if keywords.len() == sel.keywords_announced && keywords == sel.keywords {
        return;
    }
    untagged::flags(out, keywords);
    if !sel.read_only {
        untagged::permanent_flags(out, Some(keywords));
    }
    sel.keywords_announced = keywords.len();
    sel.keywords = keywords.to_vec();
}

impl Session {
    /// SELECT / EXAMINE (RFC 3501 §6.3.1, §6.3.2).
    pub(super) async fn select(
        &mut self,
        mailbox: Mailbox,
        read_only: bool,
        params: SelectParams,
    ) -> Result<Done, CmdError> {
        let name = imap_name(&mailbox)?;
        // RFC 7162 §3.2.5: QRESYNC without ENABLE QRESYNC is a BAD command
        if params.qresync.is_some() && !self.enabled.qresync {
            return Err(CmdError::Bad("QRESYNC is not enabled.".into()));
        }
        // RFC 7162 §3.1.8: SELECT (CONDSTORE) enables CONDSTORE
        if params.condstore {
            self.enable_condstore();
        }
        // a SELECT deselects first, even when it fails (RFC 3501 §6.3.1)
        let authed = match std::mem::replace(&mut self.state, State::Logout) {
            State::Selected(a, _) => {
                // RFC 7162 §3.2.11: where the old mailbox's responses end
                if self.enabled.qresync {
                    untagged::ok(
                        &mut self.out,
                        ResponseCode::Closed,
                        "Previous mailbox closed.",
                    );
                }
                a
            }
            State::Authenticated(a) => a,
            other => {
                self.state = other;
                return Err(CmdError::Bad("not logged in".into()));
            }
        };
        let store = Arc::clone(&authed.store);
        self.state = State::Authenticated(authed);
        let req = SnapshotRequest {
            sync: SyncFirst::Always,
            since: None,
            claim_recent: !read_only,
            first_unseen: true,
        };
        let snap = blocking(move || store.snapshot(&name, &req)).await??;
        let Some(snap) = snap else {
            return Err(CmdError::no(
                ResponseCode::NonExistent,
                "Mailbox doesn't exist.",
            ));
        };
        let Contents::All(uids) = &snap.contents else {
            return Err(CmdError::server("SELECT read changes, not the mailbox"));
        };
        let store = self.store()?;
        let view = View::from_uids(uids.iter().copied());
        let mut sel = Selected {
            mailbox: snap.mailbox.clone(),
            read_only,
            modseq_seen: snap.highest_modseq,
            expunged_pending: Vec::new(),
            // RFC 3501 §2.3.2: a read-only session shows the unclaimed messages as
            // \Recent without claiming them, so a later SELECT still gets them (Dovecot)
            recent: if read_only {
                snap.unclaimed_from(Uid::MIN).into_iter().collect()
            } else {
                snap.claimed.clone().into_iter().collect()
            },
            keywords_announced: snap.keywords.len(),
            keywords: snap.keywords.clone(),
            saved: None,
            own: HashMap::new(),
            changes: store.change_feed(),
            view,
        };
        sel.changes.mark_unchanged();
        let out = &mut self.out;
        untagged::flags(out, &sel.keywords);
        untagged::permanent_flags(out, (!read_only).then_some(&sel.keywords[..]));
        untagged::exists(out, sel.view.len());
        untagged::recent(out, sel.recent_count());
        if let Some(seq) = snap.first_unseen_uid.and_then(|u| sel.view.seq(u)) {
            untagged::ok(out, ResponseCode::Unseen(seq), "First unseen.");
        }
        let uidvalidity = sel.mailbox.uidvalidity();
        untagged::ok(out, ResponseCode::UidValidity(uidvalidity), "UIDs valid");
        untagged::ok(
            out,
            ResponseCode::UidNext(snap.uid_next.get()),
            "Predicted next UID",
        );
        // RFC 7162 §3.1.2.1: HIGHESTMODSEQ once CONDSTORE is enabled
        if self.enabled.condstore {
            untagged::ok(
                out,
                ResponseCode::HighestModSeq(snap.highest_modseq.get()),
                "Highest",
            );
        }
        let authed = match std::mem::replace(&mut self.state, State::Logout) {
            State::Authenticated(a) => a,
            _ => return Err(CmdError::Server("state changed during SELECT".into())),
        };
        self.state = State::Selected(authed, Box::new(sel));
        if let Some(q) = &params.qresync {
            self.qresync_select(q, snap.uid_next).await?;
        }
        let (code, verb) = if read_only {
            (ResponseCode::ReadOnly, "Examine")
        } else {
            (ResponseCode::ReadWrite, "Select")
        };
        Ok(Done::OkCode(code, format!("{verb} completed.")))
    }

    /// Brings the selected mailbox's view up to date and writes the untagged responses
    /// the client is owed. `expunges_allowed` is false during FETCH, STORE and SEARCH
    /// (RFC 3501 §7.4.1); expunged messages then stay in the view until a later command.
    pub(super) async fn refresh(&mut self, expunges_allowed: bool) -> Result<(), CmdError> {
        self.refresh_from(SyncFirst::Always, expunges_allowed).await
    }

    /// [`Self::refresh`] after FETCH, STORE, SEARCH, COPY, MOVE, APPEND and EXPUNGE: the
    /// Maildir is looked at only when no session of this process has in the last seconds
    /// (Dovecot syncs after most of these with `MAILBOX_SYNC_FLAG_FAST`, see
    /// [`maildex_store::UserStore::sync_mailbox_fast`]); NOOP, CHECK, IDLE, STATUS and
    /// SELECT always look.
    pub(super) async fn refresh_fast(&mut self, expunges_allowed: bool) -> Result<(), CmdError> {
        self.refresh_from(SyncFirst::Fast, expunges_allowed).await
    }

    /// [`Self::refresh`], syncing as `sync` says: [`SyncFirst::Never`] when an index commit
    /// of this process woke an IDLE session (what it changed is already in the index; the
    /// Maildir is looked at when inotify or the periodic tick says so). What changed comes
    /// from the store's change log since the view's modseq: one delivery costs a woken
    /// session a few records, whatever the mailbox's size.
    pub(super) async fn refresh_from(
        &mut self,
        sync: SyncFirst,
        expunges_allowed: bool,
    ) -> Result<(), CmdError> {
        let State::Selected(authed, sel) = &mut self.state else {
            return Ok(());
        };
        let store = Arc::clone(&authed.store);
        let name = sel.name().to_string();
        let count = (sel.view.len() as usize).saturating_sub(sel.expunged_pending.len());
        let mut req = SnapshotRequest {
            sync,
            since: Some(Since {
                messages: u32::try_from(count).unwrap_or(u32::MAX),
                max_uid: sel.view.max_uid().unwrap_or(Uid(0)),
                modseq: sel.modseq_seen,
            }),
            claim_recent: false,
            first_unseen: false,
        };
        let claim = !sel.read_only;
        sel.changes.mark_unchanged();
        let mut inline = None;
        if sync == SyncFirst::Never {
            // Reads only (a few keys, on pages the waking commit just wrote): done here
            // rather than by a hop to the blocking pool for each of the hundreds of
            // sessions one delivery wakes. A message no session has claimed must be
            // claimed before it is announced: that takes the blocking path.
            let snap = store.snapshot(&name, &req)?;
            if !(claim && snap.as_ref().is_some_and(Snapshot::unclaimed)) {
                inline = Some(snap);
            }
        }
        req.claim_recent = claim;
        let snap = match inline {
            Some(snap) => snap,
            None => blocking(move || store.snapshot(&name, &req)).await??,
        };
        let State::Selected(_, sel) = &mut self.state else {
            return Ok(());
        };
        let Some(snap) = snap.filter(|s| s.mailbox == sel.mailbox) else {
            // deleted, renamed away or renumbered under us: nothing the view can say
            return Err(CmdError::Bye(
                "Selected mailbox was deleted or renumbered, have to disconnect.".into(),
            ));
        };
        let Contents::Changes(changes) = &snap.contents else {
            return Err(CmdError::server("a catch-up read the whole mailbox"));
        };
        if let Some(c) = snap.claimed.clone().filter(|r| !r.is_empty()) {
            match sel.recent.last_mut() {
                // one range for consecutive claims (is_recent looks at every range)
                Some(last) if last.end == c.start => last.end = c.end,
                _ => sel.recent.push(c),
            }
        }
        let out = &mut self.out;
        // the view's messages that are gone, told now or kept for a later command
        match &changes.expunged {
            Expunged::Uids(gone) => sel
                .expunged_pending
                .extend(gone.iter().copied().filter(|&u| sel.view.seq(u).is_some())),
            Expunged::Present(present) => {
                let present: std::collections::HashSet<Uid> = present.iter().copied().collect();
                sel.expunged_pending = sel.view.uids().filter(|u| !present.contains(u)).collect();
            }
        }
        sel.expunged_pending.sort_unstable();
        sel.expunged_pending.dedup();
        // EXPUNGE first (RFC 3501 §7.4.1: each shifts the numbers after it at once), or
        // one VANISHED once QRESYNC is enabled (RFC 7162 §3.2.10)
        let (condstore, qresync) = (self.enabled.condstore, self.enabled.qresync);
        let mut vanished = Vec::new();
        if expunges_allowed {
            for uid in std::mem::take(&mut sel.expunged_pending) {
                if let Some(seq) = sel.view.remove(uid) {
                    if qresync {
                        vanished.push(uid);
                    } else {
                        untagged::expunge(out, seq);
                    }
                }
                sel.own.remove(&uid);
            }
        }
        untagged::vanished(out, false, &untagged::ranges_of(&vanished));
        announce_keywords(out, sel, &snap.keywords);
        // new messages: EXISTS (and RECENT)
        let max = sel.view.max_uid().unwrap_or(Uid(0));
        let mut added = false;
        for &uid in changes.added.iter().filter(|&&u| u > max) {
            added |= sel.view.push(uid);
        }
        if added {
            if sel.read_only {
                sel.recent.extend(snap.unclaimed_from(max.next()));
            }
            untagged::exists(out, sel.view.len());
            untagged::recent(out, sel.recent_count());
        }
        // flag changes made elsewhere
        for (uid, st) in &changes.changed {
            if sel.own.get(uid).is_some_and(|&m| m == st.modseq) {
                continue;
            }
            if let Some(seq) = sel.view.seq(*uid) {
                let f =
                    untagged::flags_of(st.flags, st.keywords, &sel.keywords, sel.is_recent(*uid));
                untagged::fetch_flags(out, seq, Some(*uid), f, condstore.then_some(st.modseq));
            }
        }
        sel.own.clear();
        // RFC 7162 §3.2.10: expunges raise HIGHESTMODSEQ without a FETCH that says so
        if !vanished.is_empty() && snap.highest_modseq > sel.modseq_seen {
            untagged::ok(
                out,
                ResponseCode::HighestModSeq(snap.highest_modseq.get()),
                "Highest",
            );
        }
        sel.modseq_seen = sel.modseq_seen.max(snap.highest_modseq);
        Ok(())
    }
}
