//! COPY (RFC 3501 §6.4.7, COPYUID of RFC 4315 §3) and MOVE (RFC 6851).
//!
//! Order, as for delivery: the files first (linked or renamed into `dst`), then dst's
//! dovecot-uidlist (the UID authority: the UIDs are durable before the index uses them),
//! then one index commit. The index records are cloned from the source's (ENVELOPE,
//! BODYSTRUCTURE, header blocks): nothing is parsed again.
//!
//! **MOVE and crashes.** Each file is moved with one `rename(2)` that never replaces
//! (`transfer::move_file`), so at every instant each message is in exactly one folder. The
//! moved file gets a new base name in dst, because dst's dovecot-uidlist may still hold a
//! record of its old base (moved out earlier, not yet compacted away), whose UID must not be
//! given again:
//! - crash before a rename: the message is still in `src`, untouched;
//! - crash after the renames, before dst's uidlist append: the files sit in `dst` without
//!   UIDs; the next sync of `dst` numbers and indexes them (parsing them, the one case where
//!   a moved message is parsed again), and the next sync of `src` removes their records
//!   (files gone, confirmed on a complete listing). Nothing is lost or duplicated;
//! - crash after the append, before the index commit: as above, but the sync of `dst` finds
//!   their UIDs in the uidlist and keeps them;
//! - the index commit itself is atomic: src records removed and dst records added together.
//!
//! A COPY that fails after linking removes its links again (so a client's retry cannot
//! duplicate); a MOVE that fails after some renames (an I/O error at a rename, the fsync,
//! the uidlist append or the index commit) renames those files back into `src` under
//! their old names, so that the client's NO means nothing moved; a file that cannot go back
//! stays in `dst` and the syncs settle it as after a crash. Nothing is ever removed.

use std::collections::HashMap;
use std::path::PathBuf;

use maildex_index::{Cached, MessageRecord, MessageState};
use maildex_maildir::deliver::{fsync_dir, remove, Delivered};
use maildex_maildir::filename::{base_of, unique_base};
use maildex_maildir::transfer::{copy_file, find_base, move_file, MoveOutcome};
use maildex_maildir::{own_writes, Keywords, MaildirName, Sub, UidRecord};

use crate::convert;
use crate::opctx::{flags_of, keyword_names, Letters, Target};
use crate::{ModSeq, Uid};
use crate::{OpError, StoreError, UserStore};

/// What a COPY or MOVE did, for COPYUID (RFC 4315 §3).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CopyOutcome {
    /// UIDVALIDITY of the destination.
    pub uidvalidity: u32,
    /// (source UID, destination UID) for each message copied or moved, in source UID
    /// order. Source UIDs that were gone are absent.
    pub pairs: Vec<(Uid, Uid)>,
}

/// A source message as the index holds it.
struct Source {
    uid: Uid,
    state: MessageState,
    /// Cached data and header blocks; None when the index lacks them (then the copy is
    /// parsed from its file).
    data: Option<(Cached, Vec<u8>)>,
}

/// A file now in dst.
struct Placed {
    src_uid: Uid,
    sub: Sub,
    file_name: String,
    state: MessageState,
    data: Option<(Cached, Vec<u8>)>,
    /// MOVE: where the file was in src (folder and name), to put it back if the MOVE fails.
    origin: Option<(Sub, String)>,
}

impl Placed {
    fn base(&self) -> &str {
        base_of(&self.file_name)
    }
}

enum Numbered {
    /// UIDVALIDITY and a UID per placed file.
    Uids(u32, Vec<u32>),
    /// No usable uidlist: a sync settles it.
    Sync,
}

impl UserStore {
    /// Copies messages `uids` of `src` into `dst`: each file is hard-linked (or its bytes
    /// copied where links fail) through `dst/tmp/` into `cur/` or `new/` with its flags and
    /// INTERNALDATE, numbered in dst's dovecot-uidlist, and indexed in one commit from the
    /// source's records (nothing is parsed again). Keywords are mapped through dst's
    /// dovecot-keywords ([`OpError::KeywordLimit`] before anything is copied when they do not
    /// fit). The new messages are `\Recent` as delivered ones are. Files are fsynced as
    /// delivery does (`StoreOptions::fsync`).
    pub fn copy(&self, src: &str, dst: &str, uids: &[Uid]) -> Result<CopyOutcome, OpError> {
        self.transfer(src, dst, uids, false)
    }

    /// Moves messages `uids` of `src` into `dst` (RFC 6851): each file is renamed into dst
    /// (atomic per file; see the module docs for what a crash leaves), numbered in dst's
    /// dovecot-uidlist, and one index commit removes the source records and adds the
    /// destination ones. A move within one mailbox is a copy and an expunge of the originals.
    pub fn move_messages(
        &self,
        src: &str,
        dst: &str,
        uids: &[Uid],
    ) -> Result<CopyOutcome, OpError> {
        self.transfer(src, dst, uids, true)
    }

    fn transfer(
        &self,
        src: &str,
        dst: &str,
        uids: &[Uid],
        moving: bool,
    ) -> Result<CopyOutcome, OpError> {
        let s = self.target(src)?;
        let d = self.target(dst)?;
        let sources = self.read_sources(&s, uids)?;
        let src_table = crate::sync::keyword_names(&s.path)?;
        let mut names: Vec<String> = Vec::new();
        for m in &sources {
            for n in keyword_names(m.state.keywords, &src_table) {
                if !names.iter().any(|x| x.eq_ignore_ascii_case(&n)) {
                    names.push(n);
                }
            }
        }
        let letters = self.letters(&d, &names, true)?;
        let same = s.id == d.id;
        // A COPY only adds to dst: the source files it links may be renamed meanwhile (by
        // a STORE of this process as by another tool), which placing chases by base name,
        // so it does not queue behind the source mailbox's writers too, and it holds dst
        // as an APPEND does, beside its STOREs and EXPUNGEs (issue 15 item 22). A MOVE
        // removes the source records and holds both exclusively.
        let serial = if moving {
            self.serial(&[&s.name, &d.name])
        } else {
            self.serial(&[&d.name])
        };
        let place = || -> Result<_, OpError> {
            let placed = if moving && !same {
                self.place_moved(&s, &d, sources, &src_table, &letters)?
            } else {
                self.place_copies(&s, &d, sources, &src_table, &letters)?
            };
            if placed.is_empty() {
                return Ok((
                    Some(CopyOutcome {
                        uidvalidity: d.record.uidvalidity,
                        pairs: Vec::new(),
                    }),
                    Vec::new(),
                ));
            }
            let bases: Vec<(Uid, String)> = placed
                .iter()
                .map(|p| (p.src_uid, p.base().to_string()))
                .collect();
            let result = self.commit_placed(&s, &d, &placed, &letters, moving && !same);
            let outcome = match result {
                Ok(o) => o,
                Err(e) => {
                    if moving && !same {
                        self.unmove(&s, &d, &placed);
                    } else {
                        self.unplace(&d, &placed);
                    }
                    return Err(e);
                }
            };
            if outcome.is_some() && (!moving || same) {
                // a MOVE between mailboxes changes no total; within one the removal follows
                let bytes: u64 = placed.iter().map(|p| p.state.size).sum();
                let count = i64::try_from(placed.len()).unwrap_or(i64::MAX);
                self.quota_file_change(i64::try_from(bytes).unwrap_or(i64::MAX), count);
            }
            if let (Some(o), true, true) = (&outcome, moving, same) {
                // MOVE within one mailbox: the copies are in; now the originals go
                let wanted: Vec<Uid> = o.pairs.iter().map(|(s_uid, _)| *s_uid).collect();
                let id = s.id;
                let states = self.index.read(move |r| {
                    let mut out = Vec::new();
                    for uid in wanted {
                        if let Some(st) = r.state(id, uid)? {
                            out.push((uid, st));
                        }
                    }
                    Ok(out)
                })?;
                self.remove_messages(&s, states, false)?;
            }
            Ok((outcome, bases))
        };
        // the links and renames count as this process's for the syncs once the index has
        // them (sync_watch.rs), confirmed while the mailboxes are still held
        let work = || -> Result<_, OpError> {
            let scope = own_writes::Scope::begin();
            let (outcome, bases) = place()?;
            if outcome.is_some() {
                scope.confirm();
            }
            Ok((outcome, bases))
        };
        let (outcome, placed_bases) = if moving {
            serial.hold(work)?
        } else {
            serial.add(work)?
        };
        if let Some(o) = outcome {
            return Ok(o);
        }
        // the uidlist or the index could not take the UIDs as planned (missing or renumbered
        // uidlist, another process re-indexed dst): a sync numbers and indexes the files
        self.sync_mailbox(&d.name)?;
        if moving && !same {
            self.sync_mailbox(&s.name)?;
        }
        self.find_placed(&d, &placed_bases)
    }

    /// The index records of `uids` in `t`, in UID order (missing UIDs skipped).
    fn read_sources(&self, t: &Target, uids: &[Uid]) -> Result<Vec<Source>, OpError> {
        let mut uids = uids.to_vec();
        uids.sort_unstable();
        uids.dedup();
        let id = t.id;
        Ok(self.index.read(move |r| {
            let mut out = Vec::with_capacity(uids.len());
            for uid in uids {
                let Some(state) = r.state(id, uid)? else {
                    continue;
                };
                let data = match (r.cached(id, uid)?, r.headers(id, uid)?) {
                    (Some(c), Some(h)) => Some((c, h)),
                    _ => None,
                };
                out.push(Source { uid, state, data });
            }
            Ok(out)
        })?)
    }

    /// The flags and dst keyword letters of a source message.
    fn dst_flags(
        m: &Source,
        src_table: &[String],
        letters: &Letters,
    ) -> (maildex_maildir::Flags, Keywords) {
        let mut kw = Keywords::EMPTY;
        for n in keyword_names(m.state.keywords, src_table) {
            if let Some(i) = letters
                .table
                .iter()
                .position(|x| x.eq_ignore_ascii_case(&n))
            {
                kw.insert(i as u8);
            }
        }
        (flags_of(m.state.flags), kw)
    }

    /// Links (or byte-copies) each source file into dst.
    fn place_copies(
        &self,
        s: &Target,
        d: &Target,
        sources: Vec<Source>,
        src_table: &[String],
        letters: &Letters,
    ) -> Result<Vec<Placed>, OpError> {
        let mut placed: Vec<Placed> = Vec::with_capacity(sources.len());
        for m in sources {
            let (flags, kw) = Self::dst_flags(&m, src_table, letters);
            // a file in new/ stays unseen-by-any-client in new/ (it has no flags to carry)
            let sub = if m.state.in_new && flags.is_empty() && kw.is_empty() {
                Sub::New
            } else {
                Sub::Cur
            };
            let sizes = (m.state.size, m.state.vsize);
            let mut path = Self::file_path(s, &m.state);
            let mut delivered: Option<Delivered> = None;
            for _ in 0..2 {
                let placed_now = copy_file(&path, &d.path, sub, flags, kw, sizes, self.opts.fsync);
                match placed_now {
                    Ok(Some(dl)) => {
                        delivered = Some(dl);
                        break;
                    }
                    Ok(None) => match find_base(&s.path, base_of(&m.state.file_name))? {
                        // renamed by another tool: copy it from where it is now
                        Some((sub_now, name_now)) => path = sub_now.path(&s.path).join(name_now),
                        None => break,
                    },
                    Err(e) => {
                        self.unplace(d, &placed);
                        return Err(e.into());
                    }
                }
            }
            let Some(dl) = delivered else {
                tracing::debug!(mailbox = %s.name, uid = m.uid.get(), "message gone before COPY; skipped");
                continue;
            };
            let state = MessageState {
                file_name: dl.file_name.clone(),
                in_new: sub == Sub::New,
                flags: convert::flag_bits(flags),
                keywords: kw.0,
                modseq: ModSeq(0),
                internal_date: m.state.internal_date,
                save_date: convert::now_secs(),
                size: m.state.size,
                vsize: m.state.vsize,
            };
            placed.push(Placed {
                src_uid: m.uid,
                sub,
                file_name: dl.file_name,
                state,
                data: m.data,
                origin: None,
            });
        }
        if self.opts.fsync && !placed.is_empty() {
            if let Err(e) = Self::fsync_subs(&d.path) {
                self.unplace(d, &placed);
                return Err(e);
            }
        }
        Ok(placed)
    }

    /// Renames each source file into dst under a new base (see below); its name carries dst's
    /// keyword letters.
    fn place_moved(
        &self,
        s: &Target,
        d: &Target,
        sources: Vec<Source>,
        src_table: &[String],
        letters: &Letters,
    ) -> Result<Vec<Placed>, OpError> {
        let mut placed: Vec<Placed> = Vec::with_capacity(sources.len());
        let moved = self.move_each(s, d, sources, src_table, letters, &mut placed);
        let synced = match moved {
            Ok(()) if self.opts.fsync && !placed.is_empty() => {
                Self::fsync_subs(&d.path).and_then(|()| Self::fsync_subs(&s.path))
            }
            other => other,
        };
        if let Err(e) = synced {
            // the client is told NO: the messages moved so far go back where they were
            self.unmove(s, d, &placed);
            return Err(e);
        }
        Ok(placed)
    }

    /// The loop of [`UserStore::place_moved`]: each moved file is pushed to `placed` as soon
    /// as it is in dst, so that a failure part-way can put them back.
    fn move_each(
        &self,
        s: &Target,
        d: &Target,
        sources: Vec<Source>,
        src_table: &[String],
        letters: &Letters,
        placed: &mut Vec<Placed>,
    ) -> Result<(), OpError> {
        for m in sources {
            let (flags, kw) = Self::dst_flags(&m, src_table, letters);
            let mut sub = if m.state.in_new { Sub::New } else { Sub::Cur };
            let mut name = m.state.file_name.clone();
            let mut origin = None;
            // A new base in dst: dst's dovecot-uidlist may still hold a record of the old
            // base (a message moved out and back keeps its record until the list is
            // compacted), and reusing that record's UID would reuse a UID.
            let new_base = unique_base(m.state.size, m.state.vsize);
            for _ in 0..3 {
                let target_name = if sub == Sub::New {
                    new_base.clone()
                } else {
                    MaildirName::parse(&new_base)?
                        .with_flags(flags, kw)
                        .file_name()
                };
                let from = sub.path(&s.path).join(&name);
                match move_file(&from, &d.path, sub, &target_name, self.opts.fsync)? {
                    MoveOutcome::Moved => {
                        origin = Some(std::mem::replace(&mut name, target_name));
                        break;
                    }
                    MoveOutcome::Vanished => match find_base(&s.path, base_of(&name))? {
                        Some((sub_now, name_now)) => {
                            sub = sub_now;
                            name = name_now;
                        }
                        None => break,
                    },
                }
            }
            let Some(origin) = origin else {
                tracing::debug!(mailbox = %s.name, uid = m.uid.get(), "message gone before MOVE; skipped");
                continue;
            };
            let state = MessageState {
                file_name: name.clone(),
                in_new: sub == Sub::New,
                flags: if sub == Sub::New {
                    0
                } else {
                    convert::flag_bits(flags)
                },
                keywords: if sub == Sub::New { 0 } else { kw.0 },
                modseq: ModSeq(0),
                save_date: convert::now_secs(),
                ..m.state.clone()
            };
            placed.push(Placed {
                src_uid: m.uid,
                sub,
                file_name: name,
                state,
                data: m.data,
                origin: Some((sub, origin)),
            });
        }
        Ok(())
    }

    /// Puts the files of a MOVE that failed back into src under their old names (one
    /// rename each, as they came), so that the client's NO holds: the mailboxes are as
    /// before. A file that cannot go back stays in dst, where the syncs settle it as after
    /// a crash (see the module docs); nothing is lost either way.
    fn unmove(&self, s: &Target, d: &Target, placed: &[Placed]) {
        for p in placed {
            let Some((sub, name)) = &p.origin else {
                continue;
            };
            let from = p.sub.path(&d.path).join(&p.file_name);
            match move_file(&from, &s.path, *sub, name, self.opts.fsync) {
                Ok(MoveOutcome::Moved) => {}
                Ok(MoveOutcome::Vanished) => {
                    tracing::error!(mailbox = %d.name, file = %p.file_name, "a moved file vanished before it could go back after a failed MOVE");
                }
                Err(e) => {
                    tracing::error!(mailbox = %d.name, file = %p.file_name, error = %e, "could not put a file back after a failed MOVE; the next syncs settle it");
                }
            }
        }
        if self.opts.fsync && !placed.is_empty() {
            if let Err(e) = Self::fsync_subs(&s.path).and_then(|()| Self::fsync_subs(&d.path)) {
                tracing::error!(mailbox = %s.name, error = %e, "fsync after putting back a failed MOVE");
            }
        }
    }

    fn file_path(t: &Target, state: &MessageState) -> PathBuf {
        let sub = if state.in_new { Sub::New } else { Sub::Cur };
        sub.path(&t.path).join(&state.file_name)
    }

    fn fsync_subs(path: &std::path::Path) -> Result<(), OpError> {
        fsync_dir(&Sub::Cur.path(path))?;
        fsync_dir(&Sub::New.path(path))?;
        Ok(())
    }

    /// Removes copies made by a COPY that failed (so that a retry cannot duplicate them).
    fn unplace(&self, d: &Target, placed: &[Placed]) {
        for p in placed {
            if let Err(e) = remove(&d.path, p.sub, &p.file_name) {
                tracing::error!(mailbox = %d.name, file = %p.file_name, error = %e, "could not remove a copy after a failed COPY");
            }
        }
    }

    /// Numbers the placed files in dst's dovecot-uidlist (files a concurrent sync numbered
    /// already keep their UID).
    fn number(&self, d: &Target, placed: &[Placed]) -> Result<Numbered, OpError> {
        let mut lock = self.uidlist_lock(&d.path)?;
        let Ok(Some(list)) = lock.read() else {
            return Ok(Numbered::Sync);
        };
        let mut next = list.next_uid;
        let mut uids = Vec::with_capacity(placed.len());
        let mut records = Vec::new();
        for p in placed {
            if let Some(r) = list.find_base(p.base()) {
                uids.push(r.uid);
                continue;
            }
            let uid = next;
            let Some(after) = uid.checked_add(1).filter(|a| *a != u32::MAX) else {
                return Ok(Numbered::Sync);
            };
            next = after;
            uids.push(uid);
            records.push(UidRecord::new(uid, p.file_name.clone()));
        }
        if !records.is_empty() {
            lock.append(&records, next)?;
        }
        Ok(Numbered::Uids(list.uidvalidity, uids))
    }

    /// Numbers the placed files and commits the index (src records removed when moving).
    /// None when a sync must settle dst instead.
    fn commit_placed(
        &self,
        s: &Target,
        d: &Target,
        placed: &[Placed],
        letters: &Letters,
        remove_src: bool,
    ) -> Result<Option<CopyOutcome>, OpError> {
        let (uidvalidity, uids) = match self.number(d, placed)? {
            Numbered::Uids(v, u) => (v, u),
            Numbered::Sync => {
                if remove_src {
                    self.drop_sources(s, placed)?;
                }
                return Ok(None);
            }
        };
        // records built outside the transaction; parsed from the new file only when the
        // source's cached data was missing
        let mut items: Vec<(Uid, MessageRecord, Vec<u8>)> = Vec::with_capacity(placed.len());
        for (p, &uid) in placed.iter().zip(&uids) {
            let (record, headers) = match &p.data {
                Some((cached, headers)) => (
                    MessageRecord {
                        state: p.state.clone(),
                        cached: cached.clone(),
                    },
                    headers.clone(),
                ),
                None => {
                    let file = p.sub.path(&d.path).join(&p.file_name);
                    let built = convert::index_file(&file, p.state.clone())?;
                    (built.record, built.headers)
                }
            };
            items.push((Uid(uid), record, headers));
        }
        // the copied text records come with their words (else the copies would be indexed
        // again from their files)
        let words: Vec<(Uid, maildex_index::MessageWords)> = items
            .iter()
            .filter_map(|(uid, rec, _)| {
                convert::words_of_stored(&rec.cached.text).map(|w| (*uid, w))
            })
            .collect();
        let (dst_id, src_id) = (d.id, s.id);
        let src_uids: Vec<Uid> = placed.iter().map(|p| p.src_uid).collect();
        let table = letters.table.clone();
        let committed = self.index.write_retrying(move |w| {
            if remove_src {
                for &u in &src_uids {
                    w.remove_message(src_id, u)?;
                }
            }
            // as for delivery: the UIDs were taken under this UIDVALIDITY and must not name
            // other files; otherwise a sync of dst settles it (src removals still commit)
            let mut m = w.reader().require_mailbox(dst_id)?;
            if m.uidvalidity != uidvalidity {
                return Ok(false);
            }
            for (uid, rec, _) in &items {
                if let Some(old) = w.reader().state(dst_id, *uid)? {
                    if base_of(&old.file_name) != base_of(&rec.state.file_name) {
                        return Ok(false);
                    }
                }
            }
            if let Some(table) = crate::opctx::newer_keywords(&m.keywords, &table) {
                m.keywords = table;
                w.put_mailbox(dst_id, &m)?;
            }
            let refs: Vec<_> = items.iter().map(|(u, r, h)| (*u, r, &h[..])).collect();
            w.insert_message_refs(dst_id, &refs)?;
            let words: Vec<_> = words.iter().map(|(u, w)| (*u, w)).collect();
            w.put_words(dst_id, &words)?;
            Ok(true)
        })?;
        if !committed {
            tracing::warn!(mailbox = %d.name, "index changed under a COPY/MOVE; syncing the mailbox");
            return Ok(None);
        }
        Ok(Some(CopyOutcome {
            uidvalidity,
            pairs: placed
                .iter()
                .map(|p| p.src_uid)
                .zip(uids.into_iter().map(Uid))
                .collect(),
        }))
    }

    /// Removes the source records of moved files (they are in dst now).
    fn drop_sources(&self, s: &Target, placed: &[Placed]) -> Result<(), OpError> {
        let id = s.id;
        let uids: Vec<Uid> = placed.iter().map(|p| p.src_uid).collect();
        self.index.write_retrying(move |w| {
            for &u in &uids {
                w.remove_message(id, u)?;
            }
            Ok(())
        })?;
        Ok(())
    }

    /// After a sync: the dst UIDs of files by base.
    fn find_placed(&self, d: &Target, bases: &[(Uid, String)]) -> Result<CopyOutcome, OpError> {
        let name = d.name.clone();
        let (id, m) = self
            .indexed_mailbox(&name)?
            .ok_or(OpError::Store(StoreError::NoMailbox(name)))?;
        let by_base: HashMap<String, Uid> = self.index.read(move |r| {
            Ok(r.states(id)?
                .into_iter()
                .map(|(u, st)| (base_of(&st.file_name).to_string(), u))
                .collect())
        })?;
        Ok(CopyOutcome {
            uidvalidity: m.uidvalidity,
            pairs: bases
                .iter()
                .filter_map(|(src_uid, b)| by_base.get(b).map(|u| (*src_uid, *u)))
                .collect(),
        })
    }
}
