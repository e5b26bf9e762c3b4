//! STORE (RFC 3501 §6.4.6, RFC 7162 §3.1.3 UNCHANGEDSINCE): flag changes as Maildir renames.
//!
//! Order: keyword letters first (dovecot-keywords; a keyword that does not fit fails the
//! STORE before anything changes), then one rename per changed message (a file in `new/`
//! moves to `cur/` with its `:2,` info, as Dovecot does), then one index commit giving each
//! changed message the next modseq. Another Maildir tool may rename or delete a file at any
//! moment: a rename that meets ENOENT looks the message up by its base name (stable across
//! flag changes) and applies the change to the flags it has now; a message whose file is
//! gone is reported as vanished and left for the sync to remove. A STORE that fails (a
//! rename or the index commit) renames the files it already renamed back, so that its NO
//! means nothing changed.

use maildex_index::MessageState;
use maildex_maildir::deliver::{rename_flags, RenameOutcome};
use maildex_maildir::filename::base_of;
use maildex_maildir::transfer::find_base;
use maildex_maildir::{own_writes, Flags, Keywords, MaildirName, Sub};

use crate::convert::flag_bits;
use crate::opctx::{flags_of, keyword_names, newer_keywords, Target};
use crate::{ModSeq, Uid};
use crate::{OpError, StoreError, UserStore};

/// How STORE combines the given flags with a message's flags (RFC 3501 §6.4.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagOp {
    /// `+FLAGS`: add these.
    Add,
    /// `-FLAGS`: remove these.
    Remove,
    /// `FLAGS`: exactly these (Maildir's `P`, which IMAP has no flag for, is kept).
    Replace,
}

/// One message after a STORE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlagState {
    /// Its UID.
    pub uid: Uid,
    /// System flags now.
    pub flags: Flags,
    /// Keyword names now (from the mailbox's dovecot-keywords), in letter order.
    pub keywords: Vec<String>,
    /// Its modseq (the new one when `changed`).
    pub modseq: ModSeq,
    /// Whether this STORE changed it (an unchanged message kept its modseq and file name).
    pub changed: bool,
}

/// What a STORE did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlagsOutcome {
    /// Every message of the set that still exists and passed UNCHANGEDSINCE, in UID order,
    /// changed or not (the session sends FETCH FLAGS for these unless .SILENT; with
    /// CONDSTORE only for the changed ones, RFC 7162 §3.1.3).
    pub messages: Vec<FlagState>,
    /// UIDs whose modseq was above UNCHANGEDSINCE: not changed (`[MODIFIED ...]`,
    /// RFC 7162 §3.1.3).
    pub modified: Vec<Uid>,
    /// UIDs of the set that are gone (expunged by another session or tool; unknown UIDs
    /// too). The session ignores them (RFC 3501 §6.4.6 asks nothing for them).
    pub vanished: Vec<Uid>,
    /// The mailbox's highest modseq after the change.
    pub highest_modseq: ModSeq,
    /// The mailbox's keyword names after the change, in dovecot-keywords letter order (a
    /// session announces a new one in FLAGS before a FETCH carries it).
    pub keywords: Vec<String>,
}

impl FlagOp {
    /// The flags and keywords a message with `old` gets.
    fn apply(self, old: (Flags, Keywords), flags: Flags, kw: Keywords) -> (Flags, Keywords) {
        match self {
            FlagOp::Add => (old.0 | flags, Keywords(old.1 .0 | kw.0)),
            FlagOp::Remove => (Flags(old.0 .0 & !flags.0), Keywords(old.1 .0 & !kw.0)),
            // Maildir `P` has no IMAP flag, so a client cannot mean to clear it
            FlagOp::Replace => (
                Flags((flags.0 & !Flags::PASSED.0) | (old.0 .0 & Flags::PASSED.0)),
                kw,
            ),
        }
    }
}

/// A rename done on disk, for the index commit.
struct Renamed {
    uid: Uid,
    file_name: String,
    flags: Flags,
    keywords: Keywords,
    /// Where this STORE renamed the file from (None when another tool had already given it
    /// these flags), to put it back if the STORE fails.
    from: Option<(Sub, String)>,
}

/// How many times a rename chases a file that another tool keeps renaming.
const CHASES: usize = 4;

impl UserStore {
    /// Changes the flags and keywords of messages `uids` of `mailbox` (see the module docs).
    /// Maildir first (a rename per changed message; a file in `new/` moves to `cur/`), then
    /// one index commit with a new modseq per changed message (RFC 7162 §3.1: modseqs
    /// strictly increase, HIGHESTMODSEQ follows). `unchanged_since` is RFC 7162's
    /// UNCHANGEDSINCE (§3.1.3): a message whose modseq is above it is left alone and listed
    /// in `modified`. A keyword that does not fit in the 26 Maildir letters fails the whole
    /// STORE with [`OpError::KeywordLimit`] before anything changes. Unchanged messages
    /// cost no rename and no modseq.
    pub fn set_flags(
        &self,
        mailbox: &str,
        uids: &[Uid],
        op: FlagOp,
        flags: Flags,
        keywords: &[String],
        unchanged_since: Option<ModSeq>,
    ) -> Result<FlagsOutcome, OpError> {
        let t = self.target(mailbox)?;
        let letters = self.letters(&t, keywords, op != FlagOp::Remove)?;
        let mut uids = uids.to_vec();
        uids.sort_unstable();
        uids.dedup();
        // shared with STOREs of other messages, whose commits this one's can then join
        // (see `MailboxSerial`); the UIDs claimed against STOREs and EXPUNGEs of them
        let serial = self.mailbox_lock(&t.name);
        let shared = serial.share();
        let _claim = serial.claim(&shared, &uids);
        // the renames count as this process's for the sync once the index has them
        // (sync_watch.rs), confirmed while the mailbox is still held
        let scope = own_writes::Scope::begin();
        let out = self.set_flags_locked(&t, &uids, op, flags, letters, unchanged_since)?;
        scope.confirm();
        Ok(out)
    }

    fn set_flags_locked(
        &self,
        t: &Target,
        uids: &[Uid],
        op: FlagOp,
        flags: Flags,
        letters: crate::opctx::Letters,
        unchanged_since: Option<ModSeq>,
    ) -> Result<FlagsOutcome, OpError> {
        let id = t.id;
        let wanted = uids.to_vec();
        let states: Vec<(Uid, Option<MessageState>)> = self.index.read(move |r| {
            wanted
                .iter()
                .map(|&uid| Ok((uid, r.state(id, uid)?)))
                .collect()
        })?;
        let mut out = FlagsOutcome::default();
        let mut renamed: Vec<Renamed> = Vec::new();
        // (uid, state) of messages left as they were
        let mut unchanged: Vec<(Uid, MessageState)> = Vec::new();
        for (uid, state) in states {
            let Some(state) = state else {
                out.vanished.push(uid);
                continue;
            };
            // RFC 7162 §3.1.3: only messages not changed since the given modseq
            if unchanged_since.is_some_and(|u| state.modseq > u) {
                out.modified.push(uid);
                continue;
            }
            match self.rename_one(t, uid, &state, op, flags, letters.bits) {
                Ok(Some(Some(r))) => renamed.push(r),
                Ok(Some(None)) => unchanged.push((uid, state)),
                Ok(None) => out.vanished.push(uid),
                Err(e) => {
                    // the client is told NO: the files renamed so far get their names back
                    Self::unrename(t, &renamed);
                    return Err(e);
                }
            }
        }

        let table = letters.table.clone();
        let changes: Vec<(Uid, String, u8, u32)> = renamed
            .iter()
            .map(|r| (r.uid, r.file_name.clone(), flag_bits(r.flags), r.keywords.0))
            .collect();
        let committed = self.index.write_retrying(move |w| {
            let mut m = w.reader().require_mailbox(id)?;
            if let Some(table) = newer_keywords(&m.keywords, &table) {
                m.keywords = table;
                w.put_mailbox(id, &m)?;
            }
            let mut done = Vec::with_capacity(changes.len());
            for (uid, file_name, fl, kw) in &changes {
                // the file is renamed already: the record follows it (gone only if an
                // expunge committed meanwhile, which then stays)
                if let Some(modseq) = w.update_message(id, *uid, *fl, *kw, file_name, false)? {
                    done.push((*uid, modseq));
                }
            }
            let m = w.reader().require_mailbox(id)?;
            Ok((done, m.highest_modseq, m.keywords))
        });
        let (done, highest, keywords) = match committed {
            Ok(c) => c,
            Err(e) => {
                Self::unrename(t, &renamed);
                return Err(e.into());
            }
        };
        out.highest_modseq = highest;
        out.keywords = keywords;
        // names from the table as committed, not from `letters.table`: that was read before
        // the mailbox was held, and a file may carry a letter another STORE added since
        // (a STORE of \Answered answered FLAGS without that keyword: found by
        // tests/it/imap/concurrency.rs)
        let table = &out.keywords;
        for r in renamed {
            match done.iter().find(|(u, _)| *u == r.uid) {
                Some(&(_, modseq)) => out.messages.push(FlagState {
                    uid: r.uid,
                    flags: r.flags,
                    keywords: keyword_names(r.keywords.0, table),
                    modseq,
                    changed: true,
                }),
                None => out.vanished.push(r.uid),
            }
        }
        for (uid, s) in unchanged {
            out.messages.push(FlagState {
                uid,
                flags: flags_of(s.flags),
                keywords: keyword_names(s.keywords, table),
                modseq: s.modseq,
                changed: false,
            });
        }
        out.messages.sort_by_key(|m| m.uid);
        out.vanished.sort_unstable();
        Ok(out)
    }

    /// Gives the files a failed STORE renamed their old names back (a STORE that answers
    /// NO changes nothing); one that cannot go back keeps its new flags, which the next
    /// sync takes into the index.
    fn unrename(t: &Target, renamed: &[Renamed]) {
        for r in renamed {
            let Some((sub, old)) = &r.from else {
                continue;
            };
            if *sub == Sub::Cur && *old == r.file_name {
                continue;
            }
            let now = Sub::Cur.path(&t.path).join(&r.file_name);
            if let Err(e) = std::fs::rename(&now, sub.path(&t.path).join(old)) {
                tracing::error!(mailbox = %t.name, file = %r.file_name, error = %e, "could not undo a flag change after a failed STORE");
            }
        }
    }

    /// Renames one message's file to carry its new flags. `Some(Some)` renamed, `Some(None)`
    /// nothing to change, `None` the file is gone.
    fn rename_one(
        &self,
        t: &Target,
        uid: Uid,
        state: &MessageState,
        op: FlagOp,
        flags: Flags,
        kw: Keywords,
    ) -> Result<Option<Option<Renamed>>, OpError> {
        let base = base_of(&state.file_name).to_string();
        let mut sub = if state.in_new { Sub::New } else { Sub::Cur };
        let mut file_name = state.file_name.clone();
        let mut old = (flags_of(state.flags), Keywords(state.keywords));
        for _ in 0..CHASES {
            let (nf, nk) = op.apply(old, flags, kw);
            let same = (nf, nk) == old;
            if same && file_name == state.file_name {
                return Ok(Some(None));
            }
            if same && sub == Sub::Cur {
                // another tool already gave it these flags: only the index follows
                return Ok(Some(Some(Renamed {
                    uid,
                    file_name,
                    flags: nf,
                    keywords: nk,
                    from: None,
                })));
            }
            let renamed = match rename_flags(&t.path, sub, &file_name, nf, nk) {
                // ENOENT although the source "exists": another tool renamed it away and back
                // between our rename and rename_flags' check; look it up again
                Err(e) if e.is_not_found() && Sub::Cur.path(&t.path).is_dir() => {
                    RenameOutcome::Vanished
                }
                other => other?,
            };
            match renamed {
                RenameOutcome::Renamed(new_name) => {
                    return Ok(Some(Some(Renamed {
                        uid,
                        file_name: new_name,
                        flags: nf,
                        keywords: nk,
                        from: Some((sub, file_name)),
                    })))
                }
                RenameOutcome::Vanished => {
                    // renamed (new flags) or expunged by another tool: find it by its base
                    let Some((now_sub, now_name)) = find_base(&t.path, &base)? else {
                        return Ok(None);
                    };
                    let parsed = MaildirName::parse(&now_name)
                        .map_err(|e| OpError::Store(StoreError::Maildir(e)))?;
                    sub = now_sub;
                    file_name = now_name;
                    old = (parsed.flags, parsed.keywords);
                }
            }
        }
        Err(OpError::Store(StoreError::Busy(t.name.clone())))
    }
}
