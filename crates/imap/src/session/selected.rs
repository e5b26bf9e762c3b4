//! SELECT/EXAMINE, and keeping the selected mailbox's view in step with the index: the
//! untagged EXISTS / RECENT / EXPUNGE / FETCH FLAGS a session owes its client, sent only
//! where RFC 3501 §7.4.1 allows (no EXPUNGE while a FETCH, STORE or SEARCH runs).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use maildex_index::{flag, IndexError, MessageState, Reader};
use maildex_proto::{Mailbox, ResponseCode};
use maildex_store::UserStore;
use tokio::sync::watch;

use super::mailbox::imap_name;
use super::{blocking, CmdError, Done, Session, State};
use crate::view::View;

/// The selected mailbox as this session knows it.
pub(crate) struct Selected {
    /// UTF-8 name (the store's).
    pub name: String,
    /// Index id.
    pub id: u32,
    /// UIDVALIDITY at SELECT.
    pub uidvalidity: u32,
    /// EXAMINE, or SELECT of a mailbox we may not change.
    pub read_only: bool,
    /// Sequence numbers <-> UIDs as announced to the client.
    pub view: View,
    /// Highest modseq whose flag changes the client has been told about.
    pub modseq_seen: u64,
    /// UID ranges whose `\Recent` this session holds (RFC 3501 §2.3.2).
    pub recent: Vec<Range<u32>>,
    /// Keyword table size last announced in `* FLAGS`.
    pub keywords_announced: usize,
    /// The mailbox's keyword names (dovecot-keywords letters `a`.. in order).
    pub keywords: Vec<String>,
    /// SEARCHRES `$` (RFC 5182), as UIDs.
    pub saved: Option<Vec<u32>>,
    /// Flag changes this session made and reported itself: uid -> modseq (not echoed again).
    pub own: HashMap<u32, u64>,
    /// Index commit generations (wakes IDLE).
    pub changes: watch::Receiver<u64>,
}

impl Selected {
    /// Whether `uid` is `\Recent` for this session.
    pub fn is_recent(&self, uid: u32) -> bool {
        self.recent.iter().any(|r| r.contains(&uid))
    }

    fn recent_count(&self) -> u32 {
        // the claimed ranges are disjoint (each claim starts where the mailbox's unclaimed
        // UIDs began); counted through the view's runs, not UID by UID over every range
        // (that was quadratic: a session under load holds hundreds of ranges)
        self.recent
            .iter()
            .filter(|r| !r.is_empty())
            .map(|r| self.view.uids_in(r.start, r.end - 1).count())
            .sum::<usize>()
            .try_into()
            .unwrap_or(u32::MAX)
    }
}

/// Writes a flag list: system flags, keywords, `\Recent` (RFC 3501 §2.3.2).
pub(crate) fn write_flags(out: &mut Vec<u8>, st: &MessageState, keywords: &[String], recent: bool) {
    out.push(b'(');
    let start = out.len();
    let put = |out: &mut Vec<u8>, s: &[u8]| {
        if out.len() > start {
            out.push(b' ');
        }
        out.extend_from_slice(s);
    };
    for (bit, name) in [
        (flag::SEEN, &b"\\Seen"[..]),
        (flag::ANSWERED, b"\\Answered"),
        (flag::FLAGGED, b"\\Flagged"),
        (flag::DELETED, b"\\Deleted"),
        (flag::DRAFT, b"\\Draft"),
    ] {
        if st.flags & bit != 0 {
            put(out, name);
        }
    }
    for (i, k) in keywords.iter().enumerate().take(32) {
        if st.keywords & (1 << i) != 0 {
            put(out, k.as_bytes());
        }
    }
    if recent {
        put(out, b"\\Recent");
    }
    out.push(b')');
}

/// What the index says about a mailbox now.
struct Snapshot {
    id: u32,
    uidvalidity: u32,
    uid_next: u32,
    highest_modseq: u64,
    /// Messages no session has claimed as `\Recent` yet.
    unclaimed: bool,
    /// The first UID no session has claimed as `\Recent` (the unclaimed are this up to
    /// `uid_next`).
    first_recent_uid: u32,
    keywords: Vec<String>,
    /// With `known`: the UIDs above the view's maximum, and every UID only when messages
    /// disappeared (`complete`); without it: every UID.
    uids: Vec<u32>,
    /// Whether `uids` lists every message (so expunges can be told).
    complete: bool,
    changed: Vec<(u32, MessageState)>,
    first_unseen_uid: Option<u32>,
    claimed: Option<Range<u32>>,
}

/// Whether `name` has messages no session has claimed as \Recent yet.
fn recent_unclaimed(store: &UserStore, name: &str) -> Result<bool, CmdError> {
    let index = store.index();
    Ok(index.read(|r| {
        Ok(match r.mailbox_id(name)? {
            Some(id) => r
                .mailbox(id)?
                .is_some_and(|m| m.first_recent_uid < m.uid_next),
            None => false,
        })
    })?)
}

/// Where a refresh learns of changes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Source {
    /// Sync with the Maildir first (two `stat`s when nothing changed).
    Maildir,
    /// As `Maildir` unless this process synced the mailbox in the last few seconds
    /// ([`UserStore::sync_mailbox_fast`]).
    MaildirFast,
    /// Only the index.
    Index,
}

/// Syncs `name` with its Maildir (with [`Source::Maildir`]) and reads what a session needs to catch up. `known` is
/// the view's (message count, highest UID): then only UIDs above it are read, plus the
/// whole UID list when the mailbox holds fewer messages than that explains (something was
/// expunged). A thousand IDLE sessions woken by one delivery each read a few keys, not the
/// whole mailbox.
#[allow(clippy::too_many_arguments)]
fn snapshot(
    store: &UserStore,
    name: &str,
    source: Source,
    since_modseq: Option<u64>,
    known: Option<(u32, u32)>,
    claim_recent: bool,
    want_unseen: bool,
) -> Result<Option<Snapshot>, CmdError> {
    let synced = match source {
        Source::Maildir => Some(store.sync_mailbox(name)),
        Source::MaildirFast => Some(store.sync_mailbox_fast(name)),
        Source::Index => None,
    };
    if let Some(synced) = synced {
        match synced {
            Ok(_) => {}
            Err(maildex_store::StoreError::NoMailbox(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    }
    let index = store.index();
    let Some(id) = index.read(|r| r.mailbox_id(name))? else {
        return Ok(None);
    };
    // claim \Recent only when there is something to claim: a write commit wakes every
    // IDLE session of the user, which must not answer with commits of its own
    let unclaimed = claim_recent
        && index
            .read(|r| r.mailbox(id))?
            .is_some_and(|m| m.first_recent_uid < m.uid_next);
    if !unclaimed {
        let snap = index.read(|r| read_snapshot(r, id, known, since_modseq, want_unseen))?;
        // a message that arrived since the check is claimed with the read below
        if !(claim_recent && snap.as_ref().is_some_and(|s| s.unclaimed)) {
            return Ok(snap);
        }
    }
    // RFC 3501 §2.3.2: the claim and the read in one transaction, so that every message
    // this session is told of was claimed by it or by a session before it. Read after the
    // claim's commit, a message delivered in between was announced unclaimed and went to
    // whichever session claimed next, possibly one that had already announced it without
    // \Recent (found by tests/concurrency.rs).
    let (claimed, snap) = index.write(move |w| {
        let claimed = w.claim_recent(id)?;
        let snap = read_snapshot(&w.reader(), id, known, since_modseq, want_unseen)?;
        Ok((claimed, snap))
    })?;
    Ok(snap.map(|mut s| {
        s.claimed = Some(claimed);
        s
    }))
}

/// What a session needs of mailbox `id` in one transaction (see [`snapshot`]).
fn read_snapshot(
    r: &Reader<'_>,
    id: u32,
    known: Option<(u32, u32)>,
    since_modseq: Option<u64>,
    want_unseen: bool,
) -> Result<Option<Snapshot>, IndexError> {
    let Some(m) = r.mailbox(id)? else {
        return Ok(None);
    };
    let (uids, complete) = match known {
        None => (r.uids(id)?, true),
        Some((count, max_uid)) => {
            let mut new = Vec::new();
            r.for_each_state(id, max_uid.saturating_add(1)..=u32::MAX, |uid, _| {
                new.push(uid);
                Ok(std::ops::ControlFlow::Continue(()))
            })?;
            if count as usize + new.len() == m.counts.messages as usize {
                (new, false)
            } else {
                (r.uids(id)?, true)
            }
        }
    };
    let changed = match since_modseq {
        Some(s) if m.highest_modseq > s => r.changed_since(id, s)?,
        _ => Vec::new(),
    };
    let mut first_unseen_uid = None;
    if want_unseen && m.counts.unseen > 0 {
        r.for_each_state(id, 1..=u32::MAX, |uid, st| {
            if st.is_unseen() {
                first_unseen_uid = Some(uid);
                return Ok(std::ops::ControlFlow::Break(()));
            }
            Ok(std::ops::ControlFlow::Continue(()))
        })?;
    }
    Ok(Some(Snapshot {
        id,
        uidvalidity: m.uidvalidity,
        uid_next: m.uid_next,
        highest_modseq: m.highest_modseq,
        unclaimed: m.first_recent_uid < m.uid_next,
        first_recent_uid: m.first_recent_uid,
        keywords: m.keywords,
        uids,
        complete,
        changed,
        first_unseen_uid,
        claimed: None,
    }))
}

/// New keywords: a new FLAGS list, and PERMANENTFLAGS unless read-only (RFC 3501 §7.2.6),
/// when `keywords` (the mailbox's, in letter order) differ from what `sel` announced.
pub(crate) fn announce_keywords(out: &mut Vec<u8>, sel: &mut Selected, keywords: &[String]) {
    if keywords.len() == sel.keywords_announced && keywords == sel.keywords {
        return;
    }
    flags_line(out, keywords);
    if !sel.read_only {
        let mut perm = String::from("\\Answered \\Flagged \\Deleted \\Seen \\Draft");
        for k in keywords {
            perm.push(' ');
            perm.push_str(k);
        }
        out.extend_from_slice(
            format!("* OK [PERMANENTFLAGS ({perm} \\*)] Flags permitted.\r\n").as_bytes(),
        );
    }
    sel.keywords_announced = keywords.len();
    sel.keywords = keywords.to_vec();
}

/// The UIDs from `from` on that no session has claimed as `\Recent`, if any.
fn unclaimed_from(snap: &Snapshot, from: u32) -> Option<Range<u32>> {
    let range = snap.first_recent_uid.max(from)..snap.uid_next;
    (!range.is_empty()).then_some(range)
}

fn flags_line(out: &mut Vec<u8>, keywords: &[String]) {
    let mut kw = String::new();
    for k in keywords {
        kw.push(' ');
        kw.push_str(k);
    }
    out.extend_from_slice(
        format!("* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft{kw})\r\n").as_bytes(),
    );
}

impl Session {
    /// SELECT / EXAMINE (RFC 3501 §6.3.1, §6.3.2).
    pub(super) async fn select(
        &mut self,
        mailbox: Mailbox,
        read_only: bool,
    ) -> Result<Done, CmdError> {
        let name = imap_name(&mailbox)?;
        // a SELECT deselects first, even when it fails (RFC 3501 §6.3.1)
        let authed = match std::mem::replace(&mut self.state, State::Logout) {
            State::Selected(a, _) | State::Authenticated(a) => a,
            other => {
                self.state = other;
                return Err(CmdError::Bad("not logged in".into()));
            }
        };
        let store = Arc::clone(&authed.store);
        self.state = State::Authenticated(authed);
        let n = name.clone();
        let snap =
            blocking(move || snapshot(&store, &n, Source::Maildir, None, None, !read_only, true))
                .await??;
        let Some(snap) = snap else {
            return Err(CmdError::no(
                ResponseCode::NonExistent,
                "Mailbox doesn't exist.",
            ));
        };
        let store = self.store()?;
        let view = View::from_uids(snap.uids.iter().copied());
        let mut sel = Selected {
            name,
            id: snap.id,
            uidvalidity: snap.uidvalidity,
            read_only,
            modseq_seen: snap.highest_modseq,
            // RFC 3501 §2.3.2: a read-only session shows the unclaimed messages as
            // \Recent without claiming them, so a later SELECT still gets them (Dovecot)
            recent: if read_only {
                unclaimed_from(&snap, 1).into_iter().collect()
            } else {
                snap.claimed.into_iter().collect()
            },
            keywords_announced: snap.keywords.len(),
            keywords: snap.keywords,
            saved: None,
            own: HashMap::new(),
            changes: store.change_feed(),
            view,
        };
        sel.changes.mark_unchanged();
        flags_line(&mut self.out, &sel.keywords);
        let mut perm = String::from("\\Answered \\Flagged \\Deleted \\Seen \\Draft");
        for k in &sel.keywords {
            perm.push(' ');
            perm.push_str(k);
        }
        perm.push_str(" \\*");
        let out = &mut self.out;
        if read_only {
            out.extend_from_slice(b"* OK [PERMANENTFLAGS ()] Read-only mailbox.\r\n");
        } else {
            out.extend_from_slice(
                format!("* OK [PERMANENTFLAGS ({perm})] Flags permitted.\r\n").as_bytes(),
            );
        }
        out.extend_from_slice(format!("* {} EXISTS\r\n", sel.view.len()).as_bytes());
        out.extend_from_slice(format!("* {} RECENT\r\n", sel.recent_count()).as_bytes());
        if let Some(seq) = snap.first_unseen_uid.and_then(|u| sel.view.seq(u)) {
            out.extend_from_slice(format!("* OK [UNSEEN {seq}] First unseen.\r\n").as_bytes());
        }
        out.extend_from_slice(
            format!("* OK [UIDVALIDITY {}] UIDs valid\r\n", sel.uidvalidity).as_bytes(),
        );
        out.extend_from_slice(
            format!("* OK [UIDNEXT {}] Predicted next UID\r\n", snap.uid_next).as_bytes(),
        );
        let authed = match std::mem::replace(&mut self.state, State::Logout) {
            State::Authenticated(a) => a,
            _ => return Err(CmdError::Server("state changed during SELECT".into())),
        };
        self.state = State::Selected(authed, Box::new(sel));
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
        self.refresh_from(Source::Maildir, expunges_allowed).await
    }

    /// [`Self::refresh`] after FETCH, STORE, SEARCH, COPY, MOVE, APPEND and EXPUNGE: the
    /// Maildir is looked at only when no session of this process has in the last seconds
    /// (Dovecot syncs after most of these with `MAILBOX_SYNC_FLAG_FAST`, see
    /// [`UserStore::sync_mailbox_fast`]); NOOP, CHECK, IDLE, STATUS and SELECT always look.
    pub(super) async fn refresh_fast(&mut self, expunges_allowed: bool) -> Result<(), CmdError> {
        self.refresh_from(Source::MaildirFast, expunges_allowed)
            .await
    }

    /// [`Self::refresh`] from `source`: [`Source::Index`] when an index commit of this
    /// process woke an IDLE session (what it changed is already in the index; the Maildir
    /// is looked at when inotify or the periodic tick says so).
    pub(super) async fn refresh_from(
        &mut self,
        source: Source,
        expunges_allowed: bool,
    ) -> Result<(), CmdError> {
        let State::Selected(authed, sel) = &mut self.state else {
            return Ok(());
        };
        let store = Arc::clone(&authed.store);
        let name = sel.name.clone();
        let since = sel.modseq_seen;
        let claim = !sel.read_only;
        let known = Some((sel.view.len(), sel.view.max_uid().unwrap_or(0)));
        sel.changes.mark_unchanged();
        let mut inline = None;
        if source == Source::Index && !(claim && recent_unclaimed(&store, &name)?) {
            // Reads only (a few keys, on pages the waking commit just wrote): done here
            // rather than by a hop to the blocking pool for each of the hundreds of
            // sessions one delivery wakes. A message that arrived since the check must be
            // claimed before it is announced: that takes the blocking path.
            let snap = snapshot(&store, &name, source, Some(since), known, false, false)?;
            if !(claim && snap.as_ref().is_some_and(|s| s.unclaimed)) {
                inline = Some(snap);
            }
        }
        let snap = match inline {
            Some(snap) => snap,
            None => {
                blocking(move || snapshot(&store, &name, source, Some(since), known, claim, false))
                    .await??
            }
        };
        let State::Selected(_, sel) = &mut self.state else {
            return Ok(());
        };
        let Some(snap) = snap.filter(|s| s.id == sel.id && s.uidvalidity == sel.uidvalidity) else {
            // deleted, renamed away or renumbered under us: nothing the view can say
            return Err(CmdError::Bye(
                "Selected mailbox was deleted or renumbered, have to disconnect.".into(),
            ));
        };
        if let Some(c) = snap.claimed.clone().filter(|r| !r.is_empty()) {
            match sel.recent.last_mut() {
                // one range for consecutive claims (is_recent looks at every range)
                Some(last) if last.end == c.start => last.end = c.end,
                _ => sel.recent.push(c),
            }
        }
        let out = &mut self.out;
        // EXPUNGE first (RFC 3501 §7.4.1: each shifts the numbers after it at once)
        if expunges_allowed && snap.complete {
            let present: std::collections::HashSet<u32> = if sel.view.len() as usize > 0 {
                snap.uids.iter().copied().collect()
            } else {
                Default::default()
            };
            let gone: Vec<u32> = sel.view.uids().filter(|u| !present.contains(u)).collect();
            for uid in gone {
                if let Some(seq) = sel.view.remove(uid) {
                    out.extend_from_slice(format!("* {seq} EXPUNGE\r\n").as_bytes());
                }
                sel.own.remove(&uid);
            }
        }
        announce_keywords(out, sel, &snap.keywords);
        // new messages: EXISTS (and RECENT)
        let max = sel.view.max_uid().unwrap_or(0);
        let mut added = false;
        for &uid in snap.uids.iter().filter(|&&u| u > max) {
            added |= sel.view.push(uid);
        }
        if added {
            if sel.read_only {
                sel.recent
                    .extend(unclaimed_from(&snap, max.saturating_add(1)));
            }
            out.extend_from_slice(format!("* {} EXISTS\r\n", sel.view.len()).as_bytes());
            out.extend_from_slice(format!("* {} RECENT\r\n", sel.recent_count()).as_bytes());
        }
        // flag changes made elsewhere
        for (uid, st) in &snap.changed {
            if sel.own.get(uid).is_some_and(|&m| m == st.modseq) {
                continue;
            }
            if uid > &max {
                continue; // new message: the client fetches it itself
            }
            if let Some(seq) = sel.view.seq(*uid) {
                out.extend_from_slice(format!("* {seq} FETCH (UID {uid} FLAGS ").as_bytes());
                write_flags(out, st, &sel.keywords, sel.is_recent(*uid));
                out.extend_from_slice(b")\r\n");
            }
        }
        sel.own.clear();
        sel.modseq_seen = sel.modseq_seen.max(snap.highest_modseq);
        Ok(())
    }
}
