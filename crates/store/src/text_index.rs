//! The full text (`fts-text`, `fts-sig`, `fts-words`) written after the listing records
//! (issues 18 #3 and 19 #1). Delivery, APPEND, COPY of a file, a sync and `index rebuild`
//! write every listing record but no full text; extracting, normalising and compressing
//! the text was most of a delivery's CPU and two thirds of a rebuild's. A message whose
//! words are not stored is "not indexed yet" (with `[storage] full_text` on, even a
//! message without any text gets a record, an empty one, and is covered), and three
//! callers index such messages through [`UserStore::index_pending_text`] /
//! [`UserStore::index_texts_of`]: the daemon's background indexer (woken by commits, in
//! small batches), SEARCH BODY/TEXT for the messages it is about to compare (so no answer
//! misses a delivered message), and `maildex index rebuild` after it has committed the
//! listing records.
//!
//! Pending messages are found by a merge walk of the mailbox's UIDs (the `messages` keys,
//! no value decoded) against the `covered` list of `fts-words` (one value, the UIDs whose
//! words are stored): exact whoever wrote the index (another process, an older maildex),
//! and a message whose text came with a COPY but whose words did not is indexed again
//! from its file. A per-mailbox watermark would be cheaper but is wrong as soon as a COPY
//! brings records above messages still pending, or a rebuild in another process clears
//! the mailbox.

use maildex_index::{CachedFields, IndexError, MailboxId, MessageState, PartRecord, Reader};
use maildex_maildir::filename::base_of;

use crate::convert::{FileBuf, StoredText};
use crate::parallel::map_in_parallel;
use crate::{Mailbox, StoreError, Uid, UserStore};

/// Messages whose text one transaction writes (the background indexer's batch: a write
/// holds the user's index for a few milliseconds at most, between commands' writes).
pub const TEXT_BATCH: usize = 64;

/// What [`UserStore::index_pending_text`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextPass {
    /// Text records written.
    pub written: usize,
    /// Pending messages whose file could not be read (removed by another tool since the
    /// index saw it, or unreadable; one renamed is found by its base): left without a
    /// record, so a later pass (after a sync) tries again, and a SEARCH meanwhile reads the
    /// file if it can.
    pub unreadable: usize,
    /// Where a later call goes on when `limit` stopped this one; `None` when the walk
    /// reached the end of the mailbox.
    pub next: Option<Uid>,
}

/// UIDs read per step of the merge walk (so a walk that stops after a batch of pending
/// messages reads about that far, not the whole mailbox).
const WINDOW: usize = 4096;

/// The UIDs of mailbox `id` from `from` on whose words are not in `fts-words` (so whose
/// text is not indexed, or was copied without its words), ascending, at most `limit`; and
/// whether the limit stopped the walk.
fn pending_uids(
    r: &Reader<'_>,
    id: MailboxId,
    mut from: Uid,
    limit: usize,
) -> Result<(Vec<Uid>, bool), IndexError> {
    let covered = r.words_covered(id)?;
    let mut c = covered.partition_point(|&u| u < from);
    let mut pending = Vec::new();
    loop {
        let uids = r.uids_from(id, from, WINDOW)?;
        let Some(&last) = uids.last() else {
            return Ok((pending, false));
        };
        // both ascending: `c` catches up with each UID
        for &u in &uids {
            while covered.get(c).is_some_and(|&x| x < u) {
                c += 1;
            }
            if covered.get(c) == Some(&u) {
                continue;
            }
            if pending.len() == limit {
                return Ok((pending, true));
            }
            pending.push(u);
        }
        if uids.len() < WINDOW || last == Uid::MAX {
            return Ok((pending, false));
        }
        from = last.next();
    }
}

/// How many of the messages of mailbox `id` have no text record.
pub(crate) fn pending_count(r: &Reader<'_>, id: MailboxId) -> Result<usize, IndexError> {
    Ok(pending_uids(r, id, Uid::MIN, usize::MAX)?.0.len())
}

/// One message to extract: UID, index state (its file name, whose base is checked again
/// when writing), part tree.
struct Work {
    uid: Uid,
    state: MessageState,
    parts: PartRecord,
}

/// Threads that extract texts for `n` messages at once: every core (up to 8) for a SEARCH
/// or a rebuild with many pending, one for a few.
pub(crate) fn text_workers(n: usize) -> usize {
    if n < 64 {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |c| c.get().min(8))
}

impl UserStore {
    /// How many messages of each indexed mailbox have no full-text record yet (none with
    /// `[storage] full_text` off, where no record is kept): for `index dump` and `index
    /// check`.
    pub fn pending_texts(&self) -> Result<Vec<(String, usize)>, StoreError> {
        if !self.opts.full_text {
            return Ok(Vec::new());
        }
        Ok(self.index.read(|r| {
            r.mailboxes()?
                .into_iter()
                .map(|(id, m)| Ok((m.name, pending_count(r, id)?)))
                .collect()
        })?)
    }

    /// A number that changes whenever any process commits to the user's index: the same
    /// number after a [`UserStore::pending_texts`] that found nothing means nothing can be
    /// pending yet (the background indexer's recheck skips its walk then).
    pub fn index_version(&self) -> u64 {
        self.index.last_txn_id()
    }

    /// Indexes the full text of at most `limit` messages of `mailbox` that have none yet,
    /// from UID `from` on, in UID order, [`TEXT_BATCH`] per write through the index's one
    /// write path: the daemon's background indexer calls it in small steps, `index
    /// rebuild` for a whole mailbox. A message expunged meanwhile gets no record (the write
    /// checks it is still indexed, under the same file). Nothing with `[storage]
    /// full_text` off, or for a mailbox the index does not know.
    pub fn index_pending_text(
        &self,
        mailbox: &str,
        from: Uid,
        limit: usize,
    ) -> Result<TextPass, StoreError> {
        if !self.opts.full_text {
            return Ok(TextPass::default());
        }
        let Some((id, _)) = self.indexed_mailbox(mailbox)? else {
            return Ok(TextPass::default());
        };
        let (uids, full) = self.index.read(|r| pending_uids(r, id, from, limit))?;
        let workers = if limit >= 256 {
            text_workers(uids.len())
        } else {
            1
        };
        let (written, unreadable) = self.write_texts(id, mailbox, &uids, workers)?;
        Ok(TextPass {
            written,
            unreadable,
            next: full.then(|| uids.last().map(|u| u.next())).flatten(),
        })
    }

    /// Indexes the full text of those of `uids` (ascending) of `mailbox` that have none
    /// yet: SEARCH BODY/TEXT calls it before it compares texts, so its answer never misses
    /// a message the background indexer has not reached (issue 18 #3). Every core extracts
    /// when many are pending (a SEARCH right after a bulk delivery). Returns how many were
    /// written.
    pub fn index_texts_of(&self, mailbox: &Mailbox, uids: &[Uid]) -> Result<usize, StoreError> {
        if !self.opts.full_text || uids.is_empty() {
            return Ok(0);
        }
        let id = mailbox.id();
        let covered = self.index.read(|r| r.words_covered(id))?;
        let missing: Vec<Uid> = uids
            .iter()
            .copied()
            .filter(|u| covered.binary_search(u).is_err())
            .collect();
        if missing.is_empty() {
            return Ok(0);
        }
        let workers = text_workers(missing.len());
        Ok(self.write_texts(id, mailbox.name(), &missing, workers)?.0)
    }

    /// Extracts and writes the texts of `uids` (ascending) of mailbox `id`, a batch per
    /// transaction, on `workers` threads. Returns (written, unreadable).
    fn write_texts(
        &self,
        id: MailboxId,
        name: &str,
        uids: &[Uid],
        workers: usize,
    ) -> Result<(usize, usize), StoreError> {
        if uids.is_empty() {
            return Ok((0, 0));
        }
        let dir = self.mailbox_path(name)?;
        let fields = CachedFields {
            parts: true,
            ..CachedFields::default()
        };
        let batch = if workers > 1 { 256 } else { TEXT_BATCH };
        let (mut written, mut unreadable) = (0, 0);
        for chunk in uids.chunks(batch) {
            let loaded = self
                .index
                .read(|r| crate::read::load_batch(r, id, chunk, fields, false, true))?;
            let work: Vec<Work> = chunk
                .iter()
                .zip(loaded)
                .filter_map(|(&uid, l)| {
                    // gone meanwhile: nothing to index
                    let l = l?;
                    let parts = l.cached?.parts;
                    Some(Work {
                        uid,
                        state: l.state,
                        parts,
                    })
                })
                .collect();
            // in `work`'s order, on `workers` threads; `None` for a message that is gone
            let texts = map_in_parallel(
                &work,
                workers,
                |buf: &mut FileBuf, w| -> Result<Option<StoredText>, StoreError> {
                    match self.open_state(&dir, id, w.uid, &w.state)? {
                        Some(found) => {
                            crate::convert::text_of_opened(found, &w.parts, buf).map(Some)
                        }
                        None => Ok(None),
                    }
                },
            );
            let mut items = Vec::with_capacity(work.len());
            for (w, t) in work.into_iter().zip(texts) {
                match t {
                    Ok(Some(text)) => {
                        items.push((w.uid, base_of(&w.state.file_name).to_owned(), text))
                    }
                    // no file has its base (removed by another tool): left for a later pass
                    Ok(None) => unreadable += 1,
                    Err(e) => {
                        tracing::debug!(error = %e, "full text not indexed yet: file unreadable");
                        unreadable += 1;
                    }
                }
            }
            if items.is_empty() {
                continue;
            }
            written += self.index.write_retrying(move |w| {
                // text only: no session has anything to report for it
                w.quietly();
                let mut put = Vec::with_capacity(items.len());
                for (uid, base, t) in &items {
                    // still the message whose file was read (a UIDVALIDITY change renumbers)
                    if let Some(s) = w.reader().state(id, *uid)? {
                        if base_of(&s.file_name) == base.as_str() {
                            put.push((*uid, &t.text[..], &t.sig[..], &t.words));
                        }
                    }
                }
                w.put_texts(id, &put)
            })?;
        }
        Ok((written, unreadable))
    }
}

/// What [`UserStore::index_all_pending_text`] did.
#[derive(Clone, Debug, Default)]
pub struct TextReport {
    /// Text records written.
    pub written: usize,
    /// Pending messages whose file could not be read (left pending).
    pub unreadable: usize,
    /// Wall time.
    pub elapsed: std::time::Duration,
}

impl UserStore {
    /// Indexes the full text of every pending message of every mailbox, on every core
    /// (`maildex index rebuild` after its listing records are committed, `index check
    /// --repair`), reporting after each thousand messages or so: `done` and `total` count
    /// the mailboxes with pending messages, `messages` the records written so far.
    pub fn index_all_pending_text(
        &self,
        progress: &mut dyn FnMut(&crate::Progress),
    ) -> Result<TextReport, StoreError> {
        let started = std::time::Instant::now();
        let boxes: Vec<String> = self
            .pending_texts()?
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(name, _)| name)
            .collect();
        let mut report = TextReport::default();
        for (done, name) in boxes.iter().enumerate() {
            let mut from = Uid::MIN;
            loop {
                let pass = self.index_pending_text(name, from, 1024)?;
                report.written += pass.written;
                report.unreadable += pass.unreadable;
                progress(&crate::Progress {
                    mailbox: name.clone(),
                    done: done + usize::from(pass.next.is_none()),
                    total: boxes.len(),
                    messages: report.written,
                });
                match pass.next {
                    Some(next) => from = next,
                    None => break,
                }
            }
            // the words of the last batch merged too: the index left is compact
            if let Some((id, _)) = self.indexed_mailbox(name)? {
                self.index.write_retrying(move |w| w.fold_words(id))?;
            }
        }
        report.elapsed = started.elapsed();
        Ok(report)
    }
}
