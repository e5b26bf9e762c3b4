//! Commands that change messages: STORE, EXPUNGE / UID EXPUNGE, CLOSE, UNSELECT, COPY,
//! MOVE (RFC 3501 §6.4.2-§6.4.7, RFC 4315, RFC 6851, RFC 3691).

use std::sync::Arc;

use maildex_imap_proto::{
    encode, Mailbox, ResponseCode, SeqNum, SeqRange, SequenceSet, StoreArgs, StoreMode,
};
use maildex_store::{FlagOp, ModSeq, Uid};

use super::append::split_flags;
use super::mailbox::imap_name;
use super::messages::resolve;
use super::selected::announce_keywords;
use super::{blocking, untagged, CmdError, Done, Session, State};

impl Session {
    /// Takes `uids` (ascending) out of the view and tells the client: an EXPUNGE each, or
    /// one VANISHED once QRESYNC is enabled (RFC 7162 §3.2.10).
    fn tell_expunged(&mut self, uids: &[Uid]) -> Result<(), CmdError> {
        let qresync = self.enabled.qresync;
        let (_, sel) = self.selected_parts()?;
        let mut lines = Vec::new();
        let mut vanished = Vec::new();
        for &uid in uids {
            if let Some(seq) = sel.view.remove(uid) {
                sel.expunged_pending.retain(|&u| u != uid);
                if qresync {
                    vanished.push(uid);
                } else {
                    untagged::expunge(&mut lines, seq);
                }
            }
        }
        untagged::vanished(&mut lines, false, &untagged::ranges_of(&vanished));
        self.out.extend_from_slice(&lines);
        Ok(())
    }

    fn selected_parts(
        &mut self,
    ) -> Result<
        (
            Arc<maildex_store::UserStore>,
            &mut super::selected::Selected,
        ),
        CmdError,
    > {
        match &mut self.state {
            State::Selected(a, s) => Ok((Arc::clone(&a.store), s)),
            _ => Err(CmdError::Bad("no mailbox selected".into())),
        }
    }

    pub(super) async fn store_flags(
        &mut self,
        uid_cmd: bool,
        set: SequenceSet,
        args: StoreArgs,
    ) -> Result<Done, CmdError> {
        // RFC 7162 §3.1: STORE (UNCHANGEDSINCE) enables CONDSTORE
        if args.unchanged_since.is_some() {
            self.enable_condstore();
        }
        let (condstore, qresync) = (self.enabled.condstore, self.enabled.qresync);
        let (store, sel) = self.selected_parts()?;
        if sel.read_only {
            return Err(CmdError::No(
                Some(ResponseCode::ReadOnly),
                "Mailbox is read-only.".into(),
            ));
        }
        let targets = resolve(sel, &set, uid_cmd)?;
        let (flags, keywords) = split_flags(&args.flags);
        let op = match args.mode {
            StoreMode::Replace => FlagOp::Replace,
            StoreMode::Add => FlagOp::Add,
            StoreMode::Remove => FlagOp::Remove,
        };
        let name = sel.name().to_string();
        let uids: Vec<Uid> = targets.iter().map(|&(_, u)| u).collect();
        let unchanged_since = args.unchanged_since.map(ModSeq);
        let outcome =
            blocking(move || store.set_flags(&name, &uids, op, flags, &keywords, unchanged_since))
                .await??;
        let (_, sel) = self.selected_parts()?;
        let mut lines = Vec::new();
        // RFC 3501 §7.2.6: FLAGS (and PERMANENTFLAGS) name a new keyword before a FETCH
        // carries it, in this session as in the others
        announce_keywords(&mut lines, sel, &outcome.keywords);
        for m in &outcome.messages {
            if m.changed {
                sel.own.insert(m.uid, m.modseq);
            }
            let Some(seq) = sel.view.seq(m.uid) else {
                continue;
            };
            let uid = (uid_cmd || qresync).then_some(m.uid);
            if args.silent {
                // RFC 7162 §3.1.3: a CONDSTORE client still learns each changed message's
                // new MODSEQ (as Dovecot sends it: UID and MODSEQ, no FLAGS)
                if condstore && m.changed {
                    untagged::fetch_modseq(&mut lines, seq, uid, m.modseq);
                }
                continue;
            }
            let f = untagged::FlagsOf {
                bits: m.flags.0,
                keywords: m.keywords.iter().map(String::as_str),
                recent: sel.is_recent(m.uid),
            };
            untagged::fetch_flags(&mut lines, seq, uid, f, condstore.then_some(m.modseq));
        }
        self.out.extend_from_slice(&lines);
        self.refresh_fast(uid_cmd).await?;
        if !outcome.modified.is_empty() {
            // RFC 7162 §3.1.3: the messages UNCHANGEDSINCE kept
            let (_, sel) = self.selected_parts()?;
            let ids: Vec<u32> = if uid_cmd {
                outcome.modified.iter().map(|u| u.get()).collect()
            } else {
                outcome
                    .modified
                    .iter()
                    .filter_map(|&u| sel.view.seq(u))
                    .collect()
            };
            return Ok(Done::OkCode(
                ResponseCode::Modified(untagged::uid_set(ids)),
                "Conditional store failed.".into(),
            ));
        }
        Ok(Done::ok("Store completed."))
    }

    pub(super) async fn expunge(&mut self, uids: Option<SequenceSet>) -> Result<Done, CmdError> {
        let (store, sel) = self.selected_parts()?;
        if sel.read_only {
            return Err(CmdError::No(
                Some(ResponseCode::ReadOnly),
                "Mailbox is read-only.".into(),
            ));
        }
        let only: Option<Vec<Uid>> = match &uids {
            Some(set) => Some(
                resolve(sel, set, true)?
                    .into_iter()
                    .map(|(_, u)| u)
                    .collect(),
            ),
            None => None,
        };
        let name = sel.name().to_string();
        let gone = blocking(move || store.expunge(&name, only.as_deref())).await??;
        let mut gone = gone;
        gone.sort_unstable();
        self.tell_expunged(&gone)?;
        self.refresh_fast(true).await?;
        Ok(Done::ok("Expunge completed."))
    }

    /// CLOSE (expunges silently, RFC 3501 §6.4.2) or UNSELECT (RFC 3691).
    pub(super) async fn close(&mut self, expunge: bool) -> Result<Done, CmdError> {
        let (store, sel) = self.selected_parts()?;
        if expunge && !sel.read_only {
            let name = sel.name().to_string();
            blocking(move || store.expunge(&name, None)).await??;
        }
        if let State::Selected(a, _) = std::mem::replace(&mut self.state, State::Logout) {
            self.state = State::Authenticated(a);
        }
        Ok(Done::ok(if expunge {
            "Close completed."
        } else {
            "Unselect completed."
        }))
    }

    pub(super) async fn copy(
        &mut self,
        uid_cmd: bool,
        set: SequenceSet,
        mailbox: Mailbox,
        is_move: bool,
    ) -> Result<Done, CmdError> {
        let dst = imap_name(&mailbox)?;
        let (store, sel) = self.selected_parts()?;
        if is_move && sel.read_only {
            return Err(CmdError::No(
                Some(ResponseCode::ReadOnly),
                "Mailbox is read-only.".into(),
            ));
        }
        let targets = resolve(sel, &set, uid_cmd)?;
        let src = sel.name().to_string();
        let (s, d) = (Arc::clone(&store), dst.clone());
        let exists = blocking(move || s.mailbox_exists(&d).unwrap_or(false)).await?;
        if !exists {
            // RFC 3501 §6.4.7: TRYCREATE when the destination does not exist
            return Err(CmdError::no(
                ResponseCode::TryCreate,
                "Mailbox doesn't exist.",
            ));
        }
        if targets.is_empty() {
            return Ok(Done::ok(if uid_cmd {
                "No messages found."
            } else {
                "Copy completed."
            }));
        }
        let uids: Vec<Uid> = targets.iter().map(|&(_, u)| u).collect();
        let outcome = blocking(move || {
            if is_move {
                store.move_messages(&src, &dst, &uids)
            } else {
                store.copy(&src, &dst, &uids)
            }
        })
        .await??;
        let code = (!outcome.pairs.is_empty()).then(|| ResponseCode::CopyUid {
            uidvalidity: outcome.uidvalidity,
            source: SequenceSet::Ranges(
                outcome
                    .pairs
                    .iter()
                    .map(|&(s, _)| SeqRange {
                        start: SeqNum::Value(s.get()),
                        end: SeqNum::Value(s.get()),
                    })
                    .collect(),
            ),
            dest: SequenceSet::Ranges(
                outcome
                    .pairs
                    .iter()
                    .map(|&(_, d)| SeqRange {
                        start: SeqNum::Value(d.get()),
                        end: SeqNum::Value(d.get()),
                    })
                    .collect(),
            ),
        });
        if !is_move {
            self.refresh_fast(uid_cmd).await?;
            return Ok(match code {
                Some(c) => Done::OkCode(c, "Copy completed.".into()),
                // RFC 3501 §6.4.8: UIDs that no longer exist are skipped, not an error
                None if uid_cmd => Done::ok("No messages found."),
                None => Done::NoCode(
                    ResponseCode::ExpungeIssued,
                    "Some of the requested messages no longer exist.".into(),
                ),
            });
        }
        // RFC 6851 §4.3: COPYUID in an untagged OK before the EXPUNGEs
        if let Some(c) = &code {
            encode::status_line(
                &mut self.out,
                None,
                encode::Status::Ok,
                Some(c),
                "Moved UIDs.",
            );
        }
        let mut moved: Vec<Uid> = outcome.pairs.iter().map(|&(s, _)| s).collect();
        moved.sort_unstable();
        self.tell_expunged(&moved)?;
        self.refresh_fast(true).await?;
        Ok(Done::ok("Move completed."))
    }
}
