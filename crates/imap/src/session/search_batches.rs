//! The batches of one SEARCH (RFC 3501 §6.4.4): the messages of the view taken through
//! the stages of [`crate::search::Stage`] a batch at a time, on the blocking pool, and on
//! more than one of its threads when a stage decompresses stored data (header blocks,
//! texts).

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use maildex_imap_proto::SearchKey;
use maildex_store::records::{Cached, CachedFields, FlagState, MessageState, SearchView};
use maildex_store::text;
use maildex_store::{ModSeq, Uid, UserStore};

use super::search_cmd::Hit;
use super::CmdError;
use crate::search::{self, Candidate, Context, Stage};

/// Messages taken through the stages at a time when a later stage keeps data per message
/// (hot header fields, header blocks) or compares stored texts: what bounds a search's
/// memory (a Pending, and a copy of its search record, for each undecided message).
const BATCH: usize = 512;
/// Messages per batch when every stage decides each message as it is read and keeps
/// nothing of it (a batch then costs no memory). Each task of the blocking pool takes all
/// its batches in one hand-off: when each batch of 512 was a hand-off there and back, the
/// thread switches took a third of `UNSEEN FLAGGED`'s time on 30,000 messages, and a
/// quarter of `FLAGGED HEADER X-Mailer "outlook"`'s with the flags column.
const READ_IN_PLACE_BATCH: usize = 32_768;

/// A state holding what the flags column gives: all that the state keys read.
fn with_flags(f: FlagState) -> MessageState {
    MessageState {
        flags: f.flags,
        keywords: f.keywords,
        modseq: f.modseq,
        vsize: f.vsize,
        internal_date: f.internal_date,
        ..MessageState::default()
    }
}

/// Threads one search takes batches on at most, when its stages decompress stored data
/// (texts, header blocks): the phrase `BODY "next week"` of a 30,000-message INBOX spent
/// two thirds of its time in zstd (`perf record`), one core's work while the other waited.
const MAX_WORKERS: usize = 4;

/// Helper threads the searches of this process hold now, beyond each search's own thread.
static HELPERS: AtomicUsize = AtomicUsize::new(0);

/// The cores this process may run on, asked once (std asks the scheduler's affinity and
/// the cgroup's quota, reading files, at each call).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// Helper threads one search holds, given back when the last of its tasks drops them.
/// All searches together hold at most one fewer than there are cores: a search spreads
/// over the cores no other search is using, and on a server busy with searches each runs
/// on one thread, as before, rather than all of them contending for the same cores.
struct Helpers {
    pool: &'static AtomicUsize,
    held: usize,
}

impl Helpers {
    /// Up to `want` helpers from `pool`, of which at most `limit` may be held at once.
    fn take(pool: &'static AtomicUsize, want: usize, limit: usize) -> Helpers {
        let mut held = 0;
        // the closure may run again if another search took or gave some meanwhile
        let _ = pool.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
            held = want.min(limit.saturating_sub(used));
            Some(used + held)
        });
        Helpers { pool, held }
    }
}

impl Drop for Helpers {
    fn drop(&mut self) {
        self.pool.fetch_sub(self.held, Ordering::AcqRel);
    }
}

/// Everything the batches of one search share, handed to the blocking pool once.
pub(super) struct Run {
    pub store: Arc<UserStore>,
    pub mailbox: maildex_store::Mailbox,
    pub keys: Vec<SearchKey>,
    pub need: search::Needs,
    pub keywords: Vec<String>,
    pub saved: Option<Vec<Uid>>,
    pub recent: Vec<Range<Uid>>,
    pub max_seq: u32,
    pub max_uid: Uid,
    pub words: Option<search::WordAnswers>,
    /// (sequence number, UID) of every message of the view, in order.
    pub targets: Vec<(u32, Uid)>,
    /// The UIDs of `targets` alone.
    pub uids: Vec<Uid>,
}

impl Run {
    /// Messages per batch: [`BATCH`] when a later stage keeps data per message (hot
    /// fields, header blocks) or compares texts, so what a search holds stays bounded (a
    /// Pending and a copy of its search record for every undecided message); otherwise
    /// every stage decides each message as it is read and [`READ_IN_PLACE_BATCH`] go in
    /// one hand-off to the blocking pool.
    fn step(&self) -> usize {
        let n = self.need;
        if n.hot || n.headers || n.body {
            BATCH
        } else {
            READ_IN_PLACE_BATCH
        }
    }

    /// The matches in sequence order, and whether some HEADER key read header blocks.
    ///
    /// The batches ([`Run::step`] messages each) are taken by tasks of the blocking pool,
    /// one hand-off each: one task, and when batches are [`BATCH`] (a stage decompresses
    /// texts or header blocks) one more for each of the [`Helpers`] this search got, up to
    /// [`MAX_WORKERS`] in all. The pool's threads keep their decompression buffers and
    /// contexts from one search to the next (scoped threads, as `maildex_store::parallel`
    /// has them, would start without). Each task takes the next batch not taken yet, so
    /// that one batch full of long texts does not leave the other threads idle; a batch's
    /// memory bound holds per thread.
    pub async fn all(run: &Arc<Run>) -> Result<(Vec<Hit>, bool), CmdError> {
        let (n, step) = (run.targets.len(), run.step());
        let batches = n.div_ceil(step);
        let cores = cores();
        let want = if step == BATCH {
            cores.min(MAX_WORKERS).min(batches).saturating_sub(1)
        } else {
            0
        };
        let helpers = Arc::new(Helpers::take(&HELPERS, want, cores.saturating_sub(1)));
        let next = Arc::new(AtomicUsize::new(0));
        // spawned at once (an async `blocking` would start each only when awaited)
        let tasks: Vec<_> = (0..=helpers.held)
            .map(|_| {
                let (run, next) = (Arc::clone(run), Arc::clone(&next));
                // held until the last task ends, even if this search is dropped first
                let helpers = Arc::clone(&helpers);
                tokio::task::spawn_blocking(move || {
                    let _helpers = helpers;
                    let taken = std::iter::from_fn(|| {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        (i < batches).then(|| i * step..n.min((i + 1) * step))
                    });
                    let r = run.batches(taken);
                    if r.is_err() {
                        // the others take no further batch
                        next.store(batches, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        let mut hits = Vec::new();
        let mut read_blocks = false;
        for t in tasks {
            let found = t
                .await
                .map_err(|e| CmdError::Server(format!("blocking task failed: {e}")))??;
            hits.extend(found.0);
            read_blocks |= found.1;
        }
        hits.sort_unstable();
        Ok((hits, read_blocks))
    }

    /// The matches among the batches `taken` (ranges of indexes into `targets`), sorted,
    /// and whether header blocks were read.
    fn batches(
        &self,
        taken: impl Iterator<Item = Range<usize>>,
    ) -> Result<(Vec<Hit>, bool), CmdError> {
        let (s, k, m, need) = (&*self.store, &self.keys, &self.mailbox, self.need);
        let mut read_blocks = false;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let ctx = Context {
            max_seq: self.max_seq,
            max_uid: self.max_uid,
            keywords: &self.keywords,
            saved: self.saved.as_deref(),
            now,
            tz_offset_secs: 0,
            words: self.words.as_ref(),
        };
        let is_recent = |uid: Uid| self.recent.iter().any(|x| x.contains(&uid));
        let mut out = Vec::new();
        // the stage read first, deciding each message as it is read (below)
        let first = if need.state {
            Stage::State
        } else {
            Stage::Search
        };
        let mut first_loaded: Vec<Stage> = Vec::new();
        if need.has(first) {
            first_loaded.push(first);
        }
        let later: Vec<Stage> = Stage::ALL
            .into_iter()
            .filter(|&st| st != Stage::State && st != first && need.has(st))
            .collect();
        let run = Later {
            store: s,
            mailbox: m,
            keys: k,
            ctx: &ctx,
        };
        for range in taken {
            let (batch, uids) = (&self.targets[range.clone()], &self.uids[range]);
            // the states only when a key reads them; otherwise only for the hits
            // (their modseq), at the end
            let mut undecided: Vec<Pending> = Vec::with_capacity(batch.len());
            let pending = |seq, uid, state| Pending {
                seq,
                uid,
                recent: is_recent(uid),
                state,
                cached: None,
                headers: None,
                search: None,
            };
            // a match goes out (its modseq 0 until the hits' are read below, when
            // no state was); true when a later stage must decide the message
            let mut undecided_after = |c: &Candidate, modseq: ModSeq| {
                match search::decide(k, c, &ctx, None) {
                    Some(true) => out.push((c.seq, c.uid, modseq)),
                    Some(false) => {}
                    None => return true,
                }
                false
            };
            if need.state {
                // decided as read: only the messages a later stage must decide are
                // kept (a Pending only for those: building one per message was a
                // fifth of an `UNSEEN FLAGGED` of 30,000 messages)
                let mut visit = |i: usize, state: MessageState| {
                    let (seq, uid) = batch[i];
                    let c = Candidate {
                        state: Some(&state),
                        ..Candidate::bare(seq, uid, is_recent(uid))
                    };
                    if undecided_after(&c, state.modseq) {
                        undecided.push(pending(seq, uid, state));
                    }
                };
                // what the state keys read, the flags column has
                s.visit_flags(m, uids, |i, f| visit(i, with_flags(f)))?;
            } else if need.search {
                // the search fields first, decided as read (FROM, SUBJECT...): a
                // Pending only for what a later stage must decide (30,000 of them
                // were a seventh of a `SEARCH SUBJECT`); a UID gone meanwhile is
                // dropped
                s.visit_search_fields(m, uids, |i, raw| {
                    let (seq, uid) = batch[i];
                    let c = Candidate {
                        search: SearchView::parse(raw),
                        ..Candidate::bare(seq, uid, is_recent(uid))
                    };
                    if undecided_after(&c, ModSeq(0)) {
                        let mut p = pending(seq, uid, MessageState::default());
                        p.search = Some(raw.to_vec());
                        undecided.push(p);
                    }
                })?;
            } else {
                // what needs no data (ALL, UID and sequence sets) is decided before
                // a Pending is made: 30,000 of them were a third of a `SEARCH ALL`
                for &(seq, uid) in batch {
                    let c = Candidate::bare(seq, uid, is_recent(uid));
                    if undecided_after(&c, ModSeq(0)) {
                        undecided.push(pending(seq, uid, MessageState::default()));
                    }
                }
            }
            read_blocks |= run.stages(undecided, first_loaded.clone(), &later, &mut out)?;
        }
        out.sort_unstable();
        if !need.state && !out.is_empty() {
            // the hits' modseqs (and whether they are still there)
            let uids: Vec<Uid> = out.iter().map(|h| h.1).collect();
            let mut modseqs: Vec<Option<ModSeq>> = vec![None; uids.len()];
            s.visit_flags(m, &uids, |i, f| modseqs[i] = Some(f.modseq))?;
            let mut modseqs = modseqs.into_iter();
            out.retain_mut(|h| match modseqs.next().flatten() {
                Some(modseq) => {
                    h.2 = modseq;
                    true
                }
                None => false,
            });
        }
        Ok((out, read_blocks))
    }
}

/// What the stages after the first share for one batch: the store, the mailbox, the
/// keys and the evaluation context.
struct Later<'a> {
    store: &'a UserStore,
    mailbox: &'a maildex_store::Mailbox,
    keys: &'a [SearchKey],
    ctx: &'a Context<'a>,
}

impl Later<'_> {
    /// Takes `undecided` (with the data of the `loaded` stages) through the `later`
    /// stages in order, each loaded only for the messages the ones before left undecided,
    /// and pushes the matches to `out`. Returns whether header blocks were read.
    fn stages(
        &self,
        mut undecided: Vec<Pending>,
        mut loaded: Vec<Stage>,
        later: &[Stage],
        out: &mut Vec<Hit>,
    ) -> Result<bool, CmdError> {
        let (k, ctx) = (self.keys, self.ctx);
        let mut read_blocks = false;
        let mut next = later.iter();
        loop {
            undecided.retain(|p| {
                let c = p.candidate(&loaded);
                let answer = search::decide(k, &c, ctx, None);
                if answer == Some(true) {
                    out.push((p.seq, p.uid, p.state.modseq));
                }
                answer.is_none()
            });
            let Some(&stage) = next.next() else { break };
            if undecided.is_empty() {
                break;
            }
            match stage {
                Stage::Body => {
                    self.body(undecided, &loaded, out)?;
                    break;
                }
                Stage::Search => self.search_fields(&mut undecided, &loaded, out)?,
                _ => {
                    read_blocks |= stage == Stage::Headers;
                    load_stage(self.store, self.mailbox, stage, &mut undecided)?;
                }
            }
            loaded.push(stage);
        }
        Ok(read_blocks)
    }

    /// The search fields, read in place and decided as read; only the messages a later
    /// stage must decide keep a copy of theirs.
    fn search_fields(
        &self,
        undecided: &mut Vec<Pending>,
        loaded: &[Stage],
        out: &mut Vec<Hit>,
    ) -> Result<(), CmdError> {
        let uids: Vec<Uid> = undecided.iter().map(|p| p.uid).collect();
        let mut answers: Vec<Option<Option<bool>>> = vec![None; uids.len()];
        self.store
            .visit_search_fields(self.mailbox, &uids, |i, raw| {
                let Some(p) = undecided.get_mut(i) else {
                    return;
                };
                let c = Candidate {
                    search: SearchView::parse(raw),
                    ..p.candidate(loaded)
                };
                let answer = search::decide(self.keys, &c, self.ctx, None);
                if answer.is_none() {
                    p.search = Some(raw.to_vec());
                }
                answers[i] = Some(answer);
            })?;
        let mut answers = answers.into_iter();
        undecided.retain(|p| match answers.next().flatten() {
            Some(Some(true)) => {
                out.push((p.seq, p.uid, p.state.modseq));
                false
            }
            Some(None) => true,
            // false, or gone from the index meanwhile
            _ => false,
        });
        Ok(())
    }

    /// The last stage: every message is decided here, as its stored text is read
    /// (decompressed one at a time, never kept; the texts not indexed yet were indexed
    /// before the batches). First the candidate signatures drop the messages whose text
    /// certainly lacks a string the keys require.
    fn body(
        &self,
        mut undecided: Vec<Pending>,
        loaded: &[Stage],
        out: &mut Vec<Hit>,
    ) -> Result<(), CmdError> {
        let (k, ctx, s, m) = (self.keys, self.ctx, self.store, self.mailbox);
        let needles = search::required_texts(k);
        let before = undecided.len();
        if !needles.is_empty() {
            let uids: Vec<Uid> = undecided.iter().map(|p| p.uid).collect();
            // a TEXT needle the words found in no text part of a message is asked of its
            // header text alone
            let rows: Vec<Option<usize>> = needles
                .iter()
                .map(|n| ctx.words.and_then(|w| w.needle_index(n)))
                .collect();
            let lacking = |n: usize, i: usize| {
                let row = rows.get(n).copied().flatten();
                match (ctx.words, row, uids.get(i)) {
                    (Some(w), Some(k), Some(&uid)) => w.lacking(k, uid),
                    _ => false,
                }
            };
            let pass = s.text_candidates(m, &uids, &needles, lacking)?;
            let mut pass = pass.into_iter();
            undecided.retain(|_| pass.next().unwrap_or(true));
        }
        tracing::debug!(
            undecided = before,
            compared = undecided.len(),
            "SEARCH texts compared after the words and signatures"
        );
        let uids: Vec<Uid> = undecided.iter().map(|p| p.uid).collect();
        let mut visited = vec![false; uids.len()];
        let mut decide = |p: &Pending, t: Option<text::SearchText>| {
            let c = p.candidate(loaded);
            let mut t = t;
            let mut body = || t.take();
            if search::decide(k, &c, ctx, Some(&mut body)) == Some(true) {
                out.push((p.seq, p.uid, p.state.modseq));
            }
        };
        // a message whose text parts the words settled: its header text
        let headers_only = |uid| ctx.words.is_some_and(|w| w.headers_only(uid));
        let with_headers = search::has_text_key(k);
        s.visit_search_texts(m, &uids, with_headers, headers_only, |i, t| {
            if let Some(p) = undecided.get(i) {
                visited[i] = true;
                decide(p, Some(t));
            }
        })?;
        // not visited: expunged meanwhile, or no stored text and a file another tool
        // renamed or removed since: no text matches
        for (p, _) in undecided.iter().zip(&visited).filter(|(_, v)| !**v) {
            decide(p, None);
        }
        Ok(())
    }
}

/// A message not yet decided, with what has been loaded of it.
struct Pending {
    seq: u32,
    uid: Uid,
    recent: bool,
    /// Flags, sizes, dates, file name; default until [`Stage::State`] is loaded.
    state: MessageState,
    /// Listing data of the loaded stages (boxed: most messages never get any).
    cached: Option<Box<Cached>>,
    /// The header blocks, once [`Stage::Headers`] is loaded.
    headers: Option<Vec<u8>>,
    /// The stored search fields, once [`Stage::Search`] left the message undecided.
    search: Option<Vec<u8>>,
}

impl Pending {
    /// The message as [`search::decide`] sees it with the `loaded` stages.
    fn candidate(&self, loaded: &[Stage]) -> Candidate<'_> {
        let has = |st| loaded.contains(&st);
        let cached = self.cached.as_deref();
        Candidate {
            seq: self.seq,
            uid: self.uid,
            state: Some(&self.state).filter(|_| has(Stage::State)),
            search: self
                .search
                .as_deref()
                .filter(|_| has(Stage::Search))
                .and_then(SearchView::parse),
            hot: cached
                .filter(|_| has(Stage::Hot))
                .map(|c| c.hot_headers.as_slice()),
            headers: self.headers.as_deref().filter(|_| has(Stage::Headers)),
            recent: self.recent,
        }
    }
}

/// Loads the data of `stage` ([`Stage::Hot`] or [`Stage::Headers`]; the search fields and
/// the text are read in place) for the `undecided` messages from the index, and drops
/// those the index no longer has (expunged meanwhile).
fn load_stage(
    store: &UserStore,
    mailbox: &maildex_store::Mailbox,
    stage: Stage,
    undecided: &mut Vec<Pending>,
) -> Result<(), CmdError> {
    let fields = CachedFields {
        hot_headers: stage == Stage::Hot,
        ..CachedFields::default()
    };
    let uids: Vec<Uid> = undecided.iter().map(|p| p.uid).collect();
    let headers = stage == Stage::Headers;
    let got = store.load_more(mailbox, &uids, fields, headers)?;
    let mut got = got.into_iter();
    undecided.retain_mut(|p| {
        let Some(Some(new)) = got.next() else {
            return false;
        };
        match stage {
            Stage::Headers => p.headers = new.headers,
            _ => {
                let Some(new) = new.cached else {
                    return false;
                };
                match &mut p.cached {
                    Some(have) => have.hot_headers = new.hot_headers,
                    None => p.cached = Some(new),
                }
            }
        }
        true
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_together_hold_at_most_the_limit_of_helpers() {
        static POOL: AtomicUsize = AtomicUsize::new(0);
        let a = Helpers::take(&POOL, 3, 3);
        assert_eq!(a.held, 3);
        // none left: the next search runs on its own thread
        assert_eq!(Helpers::take(&POOL, 1, 3).held, 0);
        drop(a);
        let b = Helpers::take(&POOL, 2, 3);
        let c = Helpers::take(&POOL, 2, 3);
        assert_eq!((b.held, c.held), (2, 1));
        drop((b, c));
        assert_eq!(POOL.load(Ordering::Acquire), 0);
        // one core: never a helper
        assert_eq!(Helpers::take(&POOL, 1, 0).held, 0);
    }
}
