//! Message text for SEARCH BODY/TEXT: the normalised text stored in the index after the
//! message's listing records (the `fts-text` column, written through `convert::text` by
//! the background indexer, SEARCH itself or a rebuild: `text_index.rs`), so the IMAP crate
//! does no MIME work and no SEARCH opens a file.

use std::ops::ControlFlow;

use maildex_index::{Built, CachedFields, Fts, MessageState, TextRecord, TextRecordRef};
use maildex_text::{Html, MessageText, SearchText};

use crate::{Loaded, Mailbox, MailboxId, StoreError, Uid, UserStore};

/// The index record of a message from its bytes, built as delivery builds it (for tests
/// and tools that need a record, and so its part tree, without a Maildir).
pub fn build_record(bytes: &[u8], state: MessageState) -> Result<Built, StoreError> {
    let mut built = crate::convert::build(bytes, state)?;
    let t = crate::convert::text(bytes, &built.record.cached.parts)?;
    built.record.cached.text = t.text;
    built.record.cached.text_sig = t.sig;
    Ok(built)
}

/// Names a text record in a decoding error.
struct What(MailboxId, Uid);

impl std::fmt::Display for What {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}/{}",
            maildex_index::schema::DB_FTS_TEXT,
            self.0,
            self.1
        )
    }
}

/// Reads a stored text record of message `uid` of mailbox `id`.
pub(crate) fn decode_text(
    stored: &[u8],
    id: MailboxId,
    uid: Uid,
) -> Result<SearchText<'_>, StoreError> {
    Ok(SearchText::from_stored(TextRecordRef::decode(
        stored,
        &What(id, uid),
    )?))
}

impl UserStore {
    /// Calls `f` with (index in `uids`, text) for each message of `mailbox` in `uids`
    /// (ascending): what SEARCH BODY and TEXT compare. The bodies' text is the stored
    /// record (`fts-text`); with `headers` (a TEXT key) the header text is decoded from
    /// the stored header blocks (the record does not repeat them). A message without a
    /// record (indexed while `[storage] full_text` was off, or pending and its file
    /// unreadable when SEARCH tried to index it: [`UserStore::index_texts_of`]) has its
    /// file read and extracted by the same rule instead, so no answer misses it. A UID not called
    /// for is not in the index (expunged meanwhile), or has no record and a file that
    /// cannot be read (renamed or removed by another tool since).
    ///
    /// With `headers`, a message for which `headers_only` is true (the words settled what
    /// its text parts hold: [`crate::TextAnswers::headers_only`]) gets its header text and
    /// no bodies, and its record is not decompressed.
    pub fn visit_search_texts(
        &self,
        mailbox: &Mailbox,
        uids: &[Uid],
        headers: bool,
        headers_only: impl Fn(Uid) -> bool,
        mut f: impl FnMut(usize, SearchText<'_>),
    ) -> Result<(), StoreError> {
        if uids.is_empty() {
            return Ok(());
        }
        let id = mailbox.id();
        let parts = CachedFields {
            parts: true,
            ..CachedFields::default()
        };
        // the header blocks and part trees, read before the texts (dense batches walk
        // each segment once)
        let mut blocks = if headers {
            self.load(mailbox, uids, parts, true)?
        } else {
            Vec::new()
        };
        let mut stored = vec![false; uids.len()];
        // the messages whose stored bodies are read
        let mut with_bodies = Vec::with_capacity(uids.len());
        for (i, &uid) in uids.iter().enumerate() {
            if !headers || !headers_only(uid) {
                with_bodies.push(uid);
                continue;
            }
            if let Some(Loaded {
                cached: Some(c),
                headers: Some(h),
                ..
            }) = blocks.get_mut(i).and_then(Option::take)
            {
                stored[i] = true;
                f(i, SearchText::default().with_header_blocks(h, c.parts));
            }
        }
        let (Some(&first), Some(&last)) = (with_bodies.first(), with_bodies.last()) else {
            return Ok(());
        };
        self.index.read(|r| {
            let mut failed = None;
            let mut visit = |i: usize, uid: Uid, raw: &[u8]| match decode_text(raw, id, uid) {
                Ok(t) => {
                    stored[i] = true;
                    let t = match blocks.get_mut(i).and_then(Option::take) {
                        Some(Loaded {
                            cached: Some(c),
                            headers: Some(h),
                            ..
                        }) => t.with_header_blocks(h, c.parts),
                        _ => t,
                    };
                    f(i, t)
                }
                Err(e) => {
                    failed.get_or_insert(e);
                }
            };
            if crate::read::walk_whole_range(first, last, with_bodies.len()) {
                r.for_each_fts(Fts::Text, id, first..=last, |uid, raw| {
                    if with_bodies.binary_search(&uid).is_ok() {
                        if let Ok(i) = uids.binary_search(&uid) {
                            visit(i, uid, raw);
                        }
                    }
                    Ok(ControlFlow::Continue(()))
                })?;
            } else {
                r.fts_of(Fts::Text, id, &with_bodies, |uid, raw| {
                    if let Ok(i) = uids.binary_search(&uid) {
                        visit(i, uid, raw);
                    }
                    Ok(ControlFlow::Continue(()))
                })?;
            }
            Ok(failed.map_or(Ok(()), Err))
        })??;
        let missing: Vec<Uid> = uids
            .iter()
            .zip(&stored)
            .filter_map(|(&uid, &s)| (!s).then_some(uid))
            .collect();
        // the files are read outside the read transaction, a batch of part trees at a time
        for chunk in missing.chunks(FILE_BATCH) {
            for (&uid, m) in chunk.iter().zip(self.load(mailbox, chunk, parts, false)?) {
                let Some(Loaded {
                    state,
                    cached: Some(cached),
                    ..
                }) = m
                else {
                    continue;
                };
                let (Ok(i), Some(bytes)) = (
                    uids.binary_search(&uid),
                    self.read_message(mailbox, uid, &state),
                ) else {
                    continue;
                };
                let text = MessageText::extract(&bytes, &cached.parts, Html::AsWritten);
                f(i, SearchText::new(text));
            }
        }
        Ok(())
    }
}

/// Calls `f` with (index in `uids`, stored value of `column`) of each of `uids`
/// (ascending) of mailbox `id` that has one: a walk of the whole range for a dense set,
/// a lookup of each segment for a sparse one.
pub(crate) fn visit_fts(
    r: &maildex_index::Reader<'_>,
    column: Fts,
    id: MailboxId,
    uids: &[Uid],
    mut f: impl FnMut(usize, &[u8]),
) -> Result<(), maildex_index::IndexError> {
    let (Some(&first), Some(&last)) = (uids.first(), uids.last()) else {
        return Ok(());
    };
    if crate::read::walk_whole_range(first, last, uids.len()) {
        r.for_each_fts(column, id, first..=last, |uid, v| {
            if let Ok(i) = uids.binary_search(&uid) {
                f(i, v);
            }
            Ok(ControlFlow::Continue(()))
        })
    } else {
        let mut at = crate::read::positions(uids);
        r.fts_of(column, id, uids, |uid, v| {
            if let Some(i) = at(uid) {
                f(i, v);
            }
            Ok(ControlFlow::Continue(()))
        })
    }
}

/// Messages without a stored text whose part trees are loaded at once.
const FILE_BATCH: usize = 256;

impl UserStore {
    /// Which messages of `mailbox` in `uids` (ascending) may hold every one of `needles`
    /// (already normalised; a BODY needle in a text part, a TEXT needle in a text part or
    /// a header text), by their candidate signatures ([`maildex_index::SigProbe`]): false
    /// only for a message that certainly lacks one. `lacking(n, i)`: the text parts of
    /// message `uids[i]` are known to lack `needles[n]` ([`crate::TextAnswers::lacking`]),
    /// so a TEXT needle is asked of its header text alone. A message without a signature
    /// may hold anything.
    pub fn text_candidates(
        &self,
        mailbox: &Mailbox,
        uids: &[Uid],
        needles: &[crate::TextNeedle],
        lacking: impl Fn(usize, usize) -> bool,
    ) -> Result<Vec<bool>, StoreError> {
        let mut out = vec![true; uids.len()];
        if uids.is_empty() || needles.is_empty() {
            return Ok(out);
        }
        let id = mailbox.id();
        let probes: Vec<(maildex_index::SigProbe, bool)> = needles
            .iter()
            .map(|n| (maildex_index::SigProbe::new(n.needle.as_bytes()), n.headers))
            .collect();
        let passes = |sig: &[u8], i: usize| {
            probes.iter().enumerate().all(|(n, (p, headers))| {
                (!lacking(n, i) && p.in_bodies(sig)) || (*headers && p.in_headers(sig))
            })
        };
        self.index.read(|r| {
            visit_fts(r, Fts::Sig, id, uids, |i, sig| {
                if let Some(o) = out.get_mut(i) {
                    *o = passes(sig, i);
                }
            })
        })?;
        Ok(out)
    }
}

impl UserStore {
    /// Whether the stored text record of message `uid` of mailbox `id` is missing
    /// (`Some(true)`: not indexed yet, the file is not read) or differs from what its file
    /// `path` gives (`Some(false)`), for `index check`. `None`: it agrees, or the file
    /// cannot be read (reported otherwise). With `[storage] full_text` off a missing
    /// record is nothing (BODY/TEXT read the file then), but a stored one is still
    /// compared: SEARCH uses it.
    pub(crate) fn text_drift(
        &self,
        id: MailboxId,
        uid: Uid,
        path: &std::path::Path,
        state: &MessageState,
    ) -> Result<Option<bool>, StoreError> {
        if self
            .index
            .read(|r| Ok(r.fts(Fts::Text, id, uid)?.is_none()))?
        {
            return Ok(self.opts.full_text.then_some(true));
        }
        let Ok((built, _)) = crate::convert::index_file_with_text(path, state.clone()) else {
            return Ok(None);
        };
        let want = TextRecord::decode(&built.record.cached.text, &What(id, uid))?;
        let want_sig = built.record.cached.text_sig;
        let stored = self.index.read(|r| {
            let (text, sig) = (r.fts(Fts::Text, id, uid)?, r.fts(Fts::Sig, id, uid)?);
            Ok(match (text, sig) {
                (Some(t), Some(s)) => {
                    let t = TextRecord::decode(&t, &What(id, uid)).ok();
                    Some((t, s == want_sig))
                }
                _ => None,
            })
        })?;
        Ok(match stored {
            None => Some(true),
            Some((Some(have), true)) if have == want => None,
            Some(_) => Some(false),
        })
    }

    /// Rewrites the full-text record of message `uid` of `mailbox` from its file (`index
    /// check --repair`). False when the message or its file is gone.
    pub fn repair_text(&self, mailbox: &str, uid: Uid) -> Result<bool, StoreError> {
        let Some((id, _)) = self.indexed_mailbox(mailbox)? else {
            return Ok(false);
        };
        let Some(state) = self.index.read(|r| r.state(id, uid))? else {
            return Ok(false);
        };
        let sub = if state.in_new {
            maildex_maildir::Sub::New
        } else {
            maildex_maildir::Sub::Cur
        };
        let path = sub
            .path(&self.mailbox_path(mailbox)?)
            .join(&state.file_name);
        let (built, words) = match crate::convert::index_file_with_text(&path, state) {
            Ok(b) => b,
            Err(StoreError::Io { error, .. }) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(false)
            }
            Err(e) => return Err(e),
        };
        let (text, sig) = (built.record.cached.text, built.record.cached.text_sig);
        Ok(self
            .index
            .write_retrying(move |w| w.put_text(id, uid, text.clone(), sig.clone(), &words))?)
    }
}

impl UserStore {
    /// `maildex index rebuild --fts-only`: rewrites the full-text record of every indexed
    /// message from its file (after a change of the text rules, after `[storage]
    /// full_text` was turned on, or to repair them all), leaving UIDs, flags and modseqs as
    /// they are; with `full_text` off it removes them instead (no file is read). Reports
    /// after each mailbox. Returns (records written or removed, files that could not be
    /// read: renamed or removed meanwhile, which the next sync takes care of).
    pub fn rebuild_texts(
        &self,
        progress: &mut dyn FnMut(&crate::rebuild::Progress),
    ) -> Result<(usize, usize), StoreError> {
        let boxes = self.index.read(|r| r.mailboxes())?;
        let total = boxes.len();
        let (mut written, mut unreadable) = (0, 0);
        for (done, (id, m)) in boxes.into_iter().enumerate() {
            let dir = self.mailbox_path(&m.name)?;
            let states = self.index.read(|r| r.states(id))?;
            // the words are written afresh (no expunged UID left in them); meanwhile a
            // SEARCH compares the texts of the messages not covered again yet
            self.index.write_retrying(move |w| w.clear_words(id))?;
            for chunk in states.chunks(256) {
                if !self.opts.full_text {
                    let uids: Vec<Uid> = chunk.iter().map(|(uid, _)| *uid).collect();
                    written += self.index.write_retrying(move |w| {
                        for &uid in &uids {
                            w.remove_text(id, uid)?;
                        }
                        Ok(uids.len())
                    })?;
                    continue;
                }
                let mut batch = Vec::with_capacity(chunk.len());
                for (uid, state) in chunk {
                    let sub = if state.in_new {
                        maildex_maildir::Sub::New
                    } else {
                        maildex_maildir::Sub::Cur
                    };
                    let path = sub.path(&dir).join(&state.file_name);
                    match crate::convert::index_file_with_text(&path, state.clone()) {
                        Ok((b, words)) => {
                            let c = b.record.cached;
                            batch.push((*uid, c.text, c.text_sig, words));
                        }
                        Err(e) => {
                            tracing::debug!(error = %e, "not re-extracted");
                            unreadable += 1;
                        }
                    }
                }
                written += self.index.write_retrying(move |w| {
                    let items: Vec<_> = batch
                        .iter()
                        .map(|(uid, t, s, words)| (*uid, &t[..], &s[..], words))
                        .collect();
                    w.put_texts(id, &items)
                })?;
            }
            // the words of the last batch merged too: the index left is compact
            self.index.write_retrying(move |w| w.fold_words(id))?;
            progress(&crate::rebuild::Progress {
                mailbox: m.name,
                done: done + 1,
                total,
                messages: written,
            });
        }
        Ok((written, unreadable))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DeliverOptions, Difference, StoreOptions};

    fn store(dir: &std::path::Path) -> UserStore {
        let opts = StoreOptions {
            fsync: false,
            ..StoreOptions::default()
        };
        UserStore::open(&dir.join("mail"), &dir.join("index"), opts).unwrap()
    }

    fn texts(s: &UserStore, uids: &[u32]) -> Vec<(usize, SearchText<'static>)> {
        let req = crate::SnapshotRequest {
            sync: crate::SyncFirst::Never,
            since: None,
            claim_recent: false,
            first_unseen: false,
        };
        let snap = s.snapshot("INBOX", &req).unwrap().expect("INBOX");
        let mut out = Vec::new();
        let uids: Vec<Uid> = uids.iter().copied().map(Uid).collect();
        s.visit_search_texts(
            &snap.mailbox,
            &uids,
            true,
            |_| false,
            |i, t| out.push((i, t.into_owned())),
        )
        .unwrap();
        out
    }

    #[test]
    fn check_finds_a_missing_or_wrong_text_record_and_repair_rewrites_it() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        let opts = DeliverOptions::default();
        for body in ["first body", "second body", "third body next week"] {
            let msg = format!("Subject: the plan\r\n\r\n{body}\r\n");
            s.deliver("INBOX", &mut msg.as_bytes(), &opts).unwrap();
        }
        // delivery writes no full text: not indexed yet, which is no drift
        let pending = |n: usize| vec![("INBOX".to_string(), n)];
        assert_eq!(s.check().unwrap(), vec![]);
        assert_eq!(s.pending_texts().unwrap(), pending(3));
        let pass = s.index_pending_text("INBOX", Uid::MIN, 100).unwrap();
        assert_eq!((pass.written, pass.unreadable, pass.next), (3, 0, None));
        assert_eq!(s.check().unwrap(), vec![]);
        let got = texts(&s, &[1, 2, 3]);
        assert_eq!(got.len(), 3);
        assert!(got[1].1.body_contains("second"));
        // the candidate signatures rule out the messages without the needle's word pair
        // (BODY), or without it in their header text either (TEXT)
        let req = crate::SnapshotRequest {
            sync: crate::SyncFirst::Never,
            since: None,
            claim_recent: false,
            first_unseen: false,
        };
        let inbox = s.snapshot("INBOX", &req).unwrap().expect("INBOX").mailbox;
        let cand = |w: &[(&str, bool)]| {
            let w: Vec<crate::TextNeedle> = w
                .iter()
                .map(|&(n, headers)| crate::TextNeedle {
                    needle: n.to_string(),
                    headers,
                })
                .collect();
            s.text_candidates(&inbox, &[Uid(1), Uid(2), Uid(3)], &w, |_, _| false)
                .unwrap()
        };
        assert_eq!(cand(&[("second body", false)]), [false, true, false]);
        assert_eq!(
            cand(&[("body next", false), ("xt week", false)]),
            [false, false, true]
        );
        assert_eq!(
            cand(&[("second", false)]),
            [true, true, true],
            "no word pair: the words' to answer"
        );
        assert_eq!(cand(&[("the plan", false)]), [false, false, false]);
        assert_eq!(cand(&[("the plan", true)]), [true, true, true]);
        assert_eq!(
            cand(&[("third body nexx", true)]),
            [false, false, true],
            "a candidate by its word pairs, to be compared"
        );
        assert_eq!(
            cand(&[("body, next", false)]),
            [true, true, true],
            "pairs are kept across one space only"
        );
        assert_eq!(
            cand(&[("d body", true)]),
            [true, true, true],
            "no pair with both sides known"
        );
        // drift: UID 2's record replaced by another text, UID 3's removed
        let (id, _) = s.indexed_mailbox("INBOX").unwrap().unwrap();
        let other = SearchText::new(maildex_text::MessageText {
            headers: vec![],
            bodies: vec!["other".into()],
        });
        let other = other.into_record();
        let (other, sig, words) = (
            other.encode().unwrap(),
            maildex_index::signature(&other),
            maildex_index::message_words(&other),
        );
        s.index
            .write_retrying(move |w| {
                w.put_text(id, Uid(2), other.clone(), sig.clone(), &words)?;
                w.remove_text(id, Uid(3))
            })
            .unwrap();
        let mut diffs = s.check().unwrap();
        diffs.sort_by_key(|d| d.to_string());
        let text = |uid| Difference::Text {
            mailbox: "INBOX".into(),
            uid,
        };
        assert_eq!(diffs, vec![text(Uid(2))]);
        assert_eq!(s.pending_texts().unwrap(), pending(1));
        assert_eq!(
            diffs[0].to_string(),
            "INBOX: UID 2 differs from its file in its full-text record"
        );
        assert!(diffs[0].is_drift());
        // a search sees what is stored (UID 2 the wrong one), and UID 3's file
        let got = texts(&s, &[1, 2, 3]);
        assert_eq!(got.len(), 3);
        assert!(!got[1].1.body_contains("second"));
        assert_eq!(got[2].0, 2);
        assert!(got[2].1.body_contains("third"));
        assert!(s.repair_text("INBOX", Uid(2)).unwrap());
        assert!(s.repair_text("INBOX", Uid(3)).unwrap());
        assert!(!s.repair_text("INBOX", Uid(9)).unwrap());
        assert_eq!(s.check().unwrap(), vec![]);
        let got = texts(&s, &[1, 2, 3]);
        assert_eq!(got.len(), 3);
        assert!(got[1].1.body_contains("second") && got[2].1.body_contains("third"));
        // rebuild --fts-only rewrites them all, nothing else
        s.index
            .write_retrying(move |w| w.remove_text(id, Uid(1)))
            .unwrap();
        let before = s.index.read(|r| r.states(id)).unwrap();
        let mut reports = Vec::new();
        let (written, unreadable) = s.rebuild_texts(&mut |p| reports.push(p.clone())).unwrap();
        assert_eq!((written, unreadable), (3, 0));
        assert_eq!(reports.last().map(|p| p.messages), Some(3));
        assert_eq!(s.index.read(|r| r.states(id)).unwrap(), before);
        assert_eq!(s.check().unwrap(), vec![]);
    }
}
