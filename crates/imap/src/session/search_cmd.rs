//! SEARCH and UID SEARCH (RFC 3501 §6.4.4), with ESEARCH (RFC 4731) and SEARCHRES
//! (RFC 5182) results. Keys are evaluated by [`crate::search`] on index data, in stages
//! (cheap criteria first); no stage reads a message file (BODY/TEXT compare the text the
//! index stored when the message was indexed).

use std::sync::Arc;

use maildex_imap_proto::{ResponseCode, SearchArgs, SearchKey, Tag};
use maildex_store::records::{Cached, CachedFields, FlagState, MessageState, SearchView};
use maildex_store::text;
use maildex_store::{ModSeq, Uid, UserStore};

use super::condstore::uses_modseq;
use super::{blocking, CmdError, Done, Session, State};
use crate::search::{self, Candidate, Context, Stage};

/// Messages taken through the stages at a time when a later stage keeps data per message
/// (hot header fields, header blocks) or compares stored texts: what bounds a search's
/// memory (a Pending, and a copy of its search record, for each undecided message).
const BATCH: usize = 512;
/// Messages per hand-off to the blocking pool, each a hand-off there and back: at 512
/// the thread switches took a third of `UNSEEN FLAGGED`'s time on 30,000 messages, and a
/// quarter of `FLAGGED HEADER X-Mailer "outlook"`'s with the flags column; at 8,192, a
/// tenth of `UNSEEN FLAGGED`'s. When every stage decides each message as it is read and
/// keeps nothing of it, a batch is taken whole (it costs no memory); otherwise [`BATCH`]
/// at a time within it.
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

/// A matching message: sequence number, UID, modseq.
pub(super) type Hit = (u32, Uid, ModSeq);

/// SEARCH, SORT and THREAD take US-ASCII and UTF-8; another charset is `NO [BADCHARSET]`
/// naming those (RFC 3501 §6.4.4, RFC 5256 §3).
pub(super) fn check_charset(cs: &str) -> Result<(), CmdError> {
    if cs.eq_ignore_ascii_case("UTF-8") || cs.eq_ignore_ascii_case("US-ASCII") {
        return Ok(());
    }
    Err(CmdError::no(
        ResponseCode::BadCharset(vec!["US-ASCII".into(), "UTF-8".into()]),
        "Unsupported charset.",
    ))
}

impl Session {
    pub(super) async fn search(
        &mut self,
        tag: &Tag,
        uid_cmd: bool,
        args: SearchArgs,
    ) -> Result<Done, CmdError> {
        if let Some(cs) = &args.charset {
            check_charset(cs)?;
        }
        // RFC 7162 §3.1.5: SEARCH MODSEQ enables CONDSTORE and answers with the highest
        // modseq of what it found
        let with_modseq = uses_modseq(&args.keys);
        if with_modseq {
            self.enable_condstore();
        }
        let hits = self.matching(args.keys).await?;
        let uids: Vec<Uid> = hits.iter().map(|&(_, u, _)| u).collect();
        let numbers: Vec<u32> = if uid_cmd {
            uids.iter().map(|u| u.get()).collect()
        } else {
            hits.iter().map(|&(s, _, _)| s).collect()
        };
        // the highest modseq of the messages reported (MIN/MAX alone report only those)
        let modseq_of = |reported: &[Uid]| {
            hits.iter()
                .filter(|(_, u, _)| reported.binary_search(u).is_ok())
                .map(|&(_, _, m)| m)
                .max()
        };
        match &args.returns {
            Some(returns) => {
                let reported = search::save_result(returns, &uids);
                let modseq = with_modseq.then(|| modseq_of(&reported)).flatten();
                if returns.contains(&maildex_imap_proto::SearchReturn::Save) {
                    if let State::Selected(_, sel) = &mut self.state {
                        sel.saved = Some(reported);
                    }
                }
                search::esearch(&mut self.out, tag, uid_cmd, returns, &numbers, modseq);
            }
            None => {
                let modseq = with_modseq
                    .then(|| hits.iter().map(|h| h.2).max())
                    .flatten();
                search::search(&mut self.out, &numbers, modseq);
            }
        }
        // RFC 3501 §7.4.1: no EXPUNGE during SEARCH; UID SEARCH may carry them
        self.refresh_fast(uid_cmd).await?;
        Ok(Done::ok("Search completed."))
    }

    /// The messages of the selected mailbox that match every key (RFC 3501 §6.4.4), in
    /// sequence order, as (sequence number, UID, modseq). SEARCH, SORT and THREAD share it:
    /// it is the one place a criterion is evaluated.
    ///
    /// Per batch of messages, in stages ([`search::Stage`]): the states first (flags, sizes,
    /// dates, sets, MODSEQ decide most keys), then, only for the messages still undecided,
    /// the stored search fields, the hot header fields, the header blocks and last the
    /// stored message text, each loaded only when some key needs it.
    pub(super) async fn matching(
        &mut self,
        mut keys: Vec<SearchKey>,
    ) -> Result<Vec<Hit>, CmdError> {
        let State::Selected(authed, sel) = &mut self.state else {
            return Err(CmdError::Bad("no mailbox selected".into()));
        };
        let store: Arc<UserStore> = Arc::clone(&authed.store);
        // (sequence number, UID) and the UIDs alone, shared by the batches, which slice them
        let targets: Arc<Vec<(u32, Uid)>> = Arc::new(
            sel.view
                .uids_in(Uid::MIN, Uid::MAX)
                .map(|(u, s)| (s, u))
                .collect(),
        );
        let all_uids: Arc<Vec<Uid>> = Arc::new(targets.iter().map(|&(_, u)| u).collect());
        let need = search::needs(&keys);
        search::prepare(&mut keys);
        let mailbox = sel.mailbox.clone();
        let keywords = sel.keywords.clone();
        let saved = sel.saved.clone();
        let recent = sel.recent.clone();
        let max_seq = sel.view.len();
        let max_uid = sel.view.max_uid().unwrap_or(Uid(0));
        // BODY/TEXT: the store's word lists answer once for every message of the view
        // (a pass over the mailbox's words per needle), before any batch; what they leave
        // open is compared by its text in the batches' last stage
        let needles = if need.body {
            search::text_needles(&keys)
        } else {
            Vec::new()
        };
        // first the texts not indexed yet (delivered since the background indexer's last
        // pass), once for the whole view: the words then answer for them too, and no
        // answer misses one (issue 18 #3); asked per batch, the mailbox's list of indexed
        // messages was read sixty times for a TEXT search of 30,000 messages
        let words = if need.body {
            let (s, m) = (Arc::clone(&store), mailbox.clone());
            let uids = Vec::clone(&all_uids);
            blocking(move || -> Result<Option<search::WordAnswers>, CmdError> {
                s.index_texts_of(&m, &uids)?;
                if needles.is_empty() {
                    return Ok(None);
                }
                let answers = s.text_answers(&m, &uids, &needles)?;
                Ok(Some(search::WordAnswers::new(needles, uids, answers)))
            })
            .await??
            .map(Arc::new)
        } else {
            None
        };
        let keys = Arc::new(keys);
        let mut hits: Vec<Hit> = Vec::new();
        // whether some message's HEADER key had to read its header blocks
        let mut read_blocks = false;
        for start in (0..targets.len()).step_by(READ_IN_PLACE_BATCH) {
            let range = start..targets.len().min(start + READ_IN_PLACE_BATCH);
            let (targets, all_uids) = (Arc::clone(&targets), Arc::clone(&all_uids));
            let wa = words.clone();
            let (s, k, kw, sv, rc, m) = (
                Arc::clone(&store),
                Arc::clone(&keys),
                keywords.clone(),
                saved.clone(),
                recent.clone(),
                mailbox.clone(),
            );
            let found = blocking(move || -> Result<(Vec<Hit>, bool), CmdError> {
                let mut read_blocks = false;
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64);
                let ctx = Context {
                    max_seq,
                    max_uid,
                    keywords: &kw,
                    saved: sv.as_deref(),
                    now,
                    tz_offset_secs: 0,
                    words: wa.as_deref(),
                };
                let is_recent = |uid: Uid| rc.iter().any(|x| x.contains(&uid));
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
                    store: &s,
                    mailbox: &m,
                    keys: &k,
                    ctx: &ctx,
                };
                // when a later stage keeps data per message (hot fields, header blocks) or
                // compares texts, both stages take BATCH messages at a time: what a search
                // holds stays bounded (a Pending and a copy of its search record for every
                // undecided message), with one hand-off to the blocking pool for them all
                let step = if need.hot || need.headers || need.body {
                    BATCH
                } else {
                    READ_IN_PLACE_BATCH
                };
                let (all, all_uids) = (&targets[range.clone()], &all_uids[range]);
                for (batch, uids) in all.chunks(step).zip(all_uids.chunks(step)) {
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
                        match search::decide(&k, c, &ctx, None) {
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
                        s.visit_flags(&m, uids, |i, f| visit(i, with_flags(f)))?;
                    } else if need.search {
                        // the search fields first, decided as read (FROM, SUBJECT...): a
                        // Pending only for what a later stage must decide (30,000 of them
                        // were a seventh of a `SEARCH SUBJECT`); a UID gone meanwhile is
                        // dropped
                        s.visit_search_fields(&m, uids, |i, raw| {
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
                    s.visit_flags(&m, &uids, |i, f| modseqs[i] = Some(f.modseq))?;
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
            })
            .await??;
            hits.extend(found.0);
            read_blocks |= found.1;
        }
        let learn = search::learnable_headers(&keys);
        if read_blocks && !learn.is_empty() {
            // the next such search reads the search fields instead (the store decides
            // whether the mailbox learns them); the answer does not wait for it
            tokio::task::spawn_blocking(move || {
                if let Err(e) = store.learn_headers(&mailbox, &learn) {
                    tracing::warn!(mailbox = %mailbox.name(), error = %e, "could not learn header fields for SEARCH");
                }
            });
        }
        Ok(hits)
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
