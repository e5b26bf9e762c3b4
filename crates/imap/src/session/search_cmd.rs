//! SEARCH and UID SEARCH (RFC 3501 §6.4.4), with ESEARCH (RFC 4731) and SEARCHRES
//! (RFC 5182) results. Keys are evaluated by [`crate::search`] on index data, in stages
//! (cheap criteria first); no stage reads a message file (BODY/TEXT compare the text the
//! index stored when the message was indexed).

use std::sync::Arc;

use maildex_imap_proto::{ResponseCode, SearchArgs, SearchKey, Tag};
use maildex_store::{ModSeq, Uid, UserStore};

use super::condstore::uses_modseq;
use super::search_batches::Run;
use super::{blocking, CmdError, Done, Session, State};
use crate::search;

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
        let targets: Vec<(u32, Uid)> = sel
            .view
            .uids_in(Uid::MIN, Uid::MAX)
            .map(|(u, s)| (s, u))
            .collect();
        let all_uids: Vec<Uid> = targets.iter().map(|&(_, u)| u).collect();
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
        } else {
            None
        };
        let run = Arc::new(Run {
            store: Arc::clone(&store),
            mailbox: mailbox.clone(),
            keys,
            need,
            keywords,
            saved,
            recent,
            max_seq,
            max_uid,
            words,
            targets,
            uids: all_uids,
        });
        // whether some message's HEADER key had to read its header blocks
        let (hits, read_blocks) = Run::all(&run).await?;
        let learn = search::learnable_headers(&run.keys);
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
