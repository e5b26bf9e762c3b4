//! SORT, UID SORT (RFC 5256 §3; ESORT's RETURN, RFC 5267 §3; SORT=DISPLAY, RFC 5957) and
//! THREAD, UID THREAD (RFC 5256 §4). The criteria are SEARCH's, evaluated by
//! [`Session::matching`]; the keys of the matches come from the index through
//! [`UserStore::sort_keys`] (no message file is opened, no header parsed); ordering and
//! threading are the pure [`crate::sort`] and [`crate::thread`].

use std::sync::Arc;

use maildex_imap_proto::{
    SearchKey, SearchReturn, SortArgs, SortCriterion, Tag, ThreadAlgorithm, ThreadArgs,
};
use maildex_store::records::SortNeed;
use maildex_store::{Mailbox, ModSeq, SortEntry, Uid, UserStore};

use super::condstore::uses_modseq;
use super::search_cmd::{check_charset, Hit};
use super::{blocking, CmdError, Done, Session, State};
use crate::{sort, thread};

/// Messages whose keys are read per read transaction.
const BATCH: usize = 8192;
/// Folders from this many messages sort through the order the store keeps.
const KEEP_ORDER_FROM: u32 = 256;

impl Session {
    pub(super) async fn sort(
        &mut self,
        tag: &Tag,
        uid_cmd: bool,
        args: SortArgs,
    ) -> Result<Done, CmdError> {
        check_charset(&args.charset)?;
        // RFC 7162 §3.1.5 (and §3.1.6 for ESORT): MODSEQ enables CONDSTORE and adds the
        // highest modseq of what is reported
        let with_modseq = uses_modseq(&args.keys);
        if with_modseq {
            self.enable_condstore();
        }
        let hits = self.matches(args.keys).await?;
        let need = sort::need(&args.criteria);
        let order = match self.kept_order(&hits, &args.criteria, need).await? {
            Some(order) => order,
            None => {
                let entries = self.sort_entries(&hits, need).await?;
                sort::order(&entries, &args.criteria, sort::pair)
            }
        };
        let hit = |i: usize| hits[i];
        let numbers: Vec<u32> = order
            .iter()
            .map(|&i| if uid_cmd { hit(i).1.get() } else { hit(i).0 })
            .collect();
        match &args.returns {
            Some(returns) => {
                let uids: Vec<Uid> = order.iter().map(|&i| hit(i).1).collect();
                let saved = sort::save_sorted(returns, &uids);
                if returns.contains(&SearchReturn::Save) {
                    if let State::Selected(_, sel) = &mut self.state {
                        sel.saved = Some(saved.clone());
                    }
                }
                // MIN/MAX alone report only those messages; their modseq is the highest
                let reported: Vec<Uid> = if returns.is_empty()
                    || returns
                        .iter()
                        .any(|r| matches!(r, SearchReturn::All | SearchReturn::Count))
                {
                    uids
                } else {
                    sort::save_sorted(returns, &uids)
                };
                let modseq = with_modseq
                    .then(|| {
                        hits.iter()
                            .filter(|h| reported.contains(&h.1))
                            .map(|h| h.2)
                            .max()
                    })
                    .flatten();
                sort::esort(&mut self.out, tag, uid_cmd, returns, &numbers, modseq);
            }
            None => {
                let modseq = with_modseq
                    .then(|| hits.iter().map(|h| h.2).max())
                    .flatten();
                sort::sort_response(&mut self.out, &numbers, modseq);
            }
        }
        // RFC 3501 §7.4.1: no EXPUNGE during SORT; UID SORT may carry them
        self.refresh_fast(uid_cmd).await?;
        Ok(Done::ok("Sort completed."))
    }

    pub(super) async fn thread(
        &mut self,
        uid_cmd: bool,
        args: ThreadArgs,
    ) -> Result<Done, CmdError> {
        check_charset(&args.charset)?;
        let whole = matches!(args.keys.as_slice(), [SearchKey::All]);
        let hits = self.matches(args.keys).await?;
        if whole {
            if let Some(threads) = self.kept_threads(&hits, args.algorithm, uid_cmd).await? {
                thread::thread_response(&mut self.out, &threads);
                self.refresh_fast(uid_cmd).await?;
                return Ok(Done::ok("Thread completed."));
            }
        }
        let entries = self.sort_entries(&hits, SortNeed::ALL).await?;
        let msgs: Vec<thread::Msg<'_>> = entries
            .iter()
            .map(|(seq, entry)| thread::Msg {
                number: if uid_cmd { entry.uid.get() } else { *seq },
                entry,
            })
            .collect();
        // REFS orders tied threads by where their Message-IDs first occur in the mailbox
        let every = if args.algorithm == ThreadAlgorithm::Refs && !whole {
            let all = self.matches(vec![SearchKey::All]).await?;
            self.sort_entries(&all, SortNeed::ALL).await?
        } else {
            Vec::new()
        };
        let every: Vec<thread::Msg<'_>> = every
            .iter()
            .map(|(seq, entry)| thread::Msg {
                number: *seq,
                entry,
            })
            .collect();
        let all = (!every.is_empty()).then_some(every.as_slice());
        let threads = thread::threads(args.algorithm, &msgs, all);
        thread::thread_response(&mut self.out, &threads);
        self.refresh_fast(uid_cmd).await?;
        Ok(Done::ok("Thread completed."))
    }

    /// The store and the selected mailbox when the mailbox is large enough for the orders
    /// and threads the store keeps ([`KEEP_ORDER_FROM`]); `None` for a smaller one.
    fn large_selected(&self) -> Result<Option<(Arc<UserStore>, Mailbox)>, CmdError> {
        let State::Selected(authed, sel) = &self.state else {
            return Err(CmdError::Bad("no mailbox selected".into()));
        };
        Ok((sel.view.len() >= KEEP_ORDER_FROM)
            .then(|| (Arc::clone(&authed.store), sel.mailbox.clone())))
    }

    /// The order of `hits` (indices, sorted) from the mailbox's order that the store keeps
    /// between queries ([`UserStore::sort_order`]: made once from every message's keys,
    /// valid until a message comes or goes): a warm SORT of a large folder then reads and
    /// compares no key. `None` for a small folder (sorting the matches is as cheap) or
    /// when a match is missing from the kept order (expunged by another session, still
    /// in this one's view): the caller sorts the matches itself.
    async fn kept_order(
        &self,
        hits: &[Hit],
        criteria: &[SortCriterion],
        need: SortNeed,
    ) -> Result<Option<Vec<usize>>, CmdError> {
        let Some((store, mailbox)) = self.large_selected()? else {
            return Ok(None);
        };
        let criteria = criteria.to_vec();
        let program = format!("{criteria:?}");
        let order = blocking(move || {
            store.sort_order(&mailbox, &program, need, |entries| {
                // ties by UID here are ties by sequence number in every view
                sort::order(&entries, &criteria, |e| (e.uid.get(), e))
                    .into_iter()
                    .map(|i| entries[i].uid)
                    .collect::<Vec<Uid>>()
            })
        })
        .await??;
        // the matches are in sequence order, which is UID order
        let ranked: Vec<usize> = order
            .iter()
            .filter_map(|uid| hits.binary_search_by_key(uid, |h| h.1).ok())
            .collect();
        Ok((ranked.len() == hits.len()).then_some(ranked))
    }

    /// The threads of a whole folder (`hits` being every message of the view) from the
    /// ones the store keeps between queries, numbered for the answer; `None` for a small
    /// folder or when the kept threads do not hold exactly the view's messages.
    async fn kept_threads(
        &self,
        hits: &[Hit],
        algorithm: ThreadAlgorithm,
        uid_cmd: bool,
    ) -> Result<Option<Vec<thread::Node>>, CmdError> {
        let Some((store, mailbox)) = self.large_selected()? else {
            return Ok(None);
        };
        let program = format!("thread {algorithm:?}");
        let kept = blocking(move || {
            store.sort_order(&mailbox, &program, SortNeed::ALL, |entries| {
                // numbered by UID here; the threads do not depend on the numbers
                let msgs: Vec<thread::Msg<'_>> = entries
                    .iter()
                    .map(|entry| thread::Msg {
                        number: entry.uid.get(),
                        entry,
                    })
                    .collect();
                thread::threads(algorithm, &msgs, None)
            })
        })
        .await??;
        // renumbered for this view: every kept message must be one of the matches, and
        // every match in it (the matches are in UID order)
        fn renumber(
            nodes: &[thread::Node],
            number: &dyn Fn(u32) -> Option<u32>,
            seen: &mut usize,
        ) -> Option<Vec<thread::Node>> {
            nodes
                .iter()
                .map(|n| {
                    let num = match n.number {
                        Some(uid) => {
                            *seen += 1;
                            Some(number(uid)?)
                        }
                        None => None,
                    };
                    Some(thread::Node {
                        number: num,
                        children: renumber(&n.children, number, seen)?,
                    })
                })
                .collect()
        }
        let number = |uid: u32| {
            let at = hits.binary_search_by_key(&Uid(uid), |h| h.1).ok()?;
            Some(if uid_cmd { uid } else { hits[at].0 })
        };
        let mut seen = 0;
        let threads = renumber(&kept, &number, &mut seen);
        Ok(threads.filter(|_| seen == hits.len()))
    }

    /// The messages the criteria match: for a lone `ALL` (how webmail sorts and threads
    /// a folder) every message of the view, without a pass over the index (nothing can
    /// fail to match; the modseqs are not needed, as ALL is no MODSEQ criterion);
    /// otherwise SEARCH's one evaluator.
    async fn matches(&mut self, keys: Vec<SearchKey>) -> Result<Vec<Hit>, CmdError> {
        if let ([SearchKey::All], State::Selected(_, sel)) = (keys.as_slice(), &self.state) {
            return Ok(sel
                .view
                .uids_in(Uid::MIN, Uid::MAX)
                .map(|(uid, seq)| (seq, uid, ModSeq(0)))
                .collect());
        }
        self.matching(keys).await
    }

    /// The sort keys of `hits` (in sequence order), with their sequence numbers, read
    /// from the index in batches. A message expunged meanwhile by another session gets
    /// empty keys: it is still in this session's view, so it is still answered.
    async fn sort_entries(
        &mut self,
        hits: &[Hit],
        need: SortNeed,
    ) -> Result<Vec<(u32, SortEntry)>, CmdError> {
        let State::Selected(authed, sel) = &self.state else {
            return Err(CmdError::Bad("no mailbox selected".into()));
        };
        let store: Arc<UserStore> = Arc::clone(&authed.store);
        let mut out: Vec<(u32, SortEntry)> = Vec::with_capacity(hits.len());
        for batch in hits.chunks(BATCH) {
            let uids: Vec<Uid> = batch.iter().map(|h| h.1).collect();
            let (s, m) = (Arc::clone(&store), sel.mailbox.clone());
            let found = blocking(move || s.sort_keys(&m, &uids, need)).await??;
            let mut found = found.into_iter().peekable();
            for &(seq, uid, _) in batch {
                let entry = match found.peek() {
                    Some(e) if e.uid == uid => found.next().unwrap_or_default(),
                    _ => SortEntry {
                        uid,
                        ..SortEntry::default()
                    },
                };
                out.push((seq, entry));
            }
        }
        Ok(out)
    }
}
