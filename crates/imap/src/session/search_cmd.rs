//! SEARCH and UID SEARCH (RFC 3501 §6.4.4), with ESEARCH (RFC 4731) and SEARCHRES
//! (RFC 5182) results. Keys are evaluated by [`crate::search`] on index data; only
//! BODY/TEXT read message files.

use std::sync::Arc;

use maildex_imap_proto::{ResponseCode, SearchArgs, SearchKey, Tag};
use maildex_store::text::Html;
use maildex_store::UserStore;

use super::condstore::uses_modseq;
use super::{blocking, CmdError, Done, Session, State};
use crate::search::{self, Candidate, Context};

/// Messages evaluated per read transaction.
const BATCH: usize = 512;

/// A matching message: sequence number, UID, modseq.
pub(super) type Hit = (u32, u32, u64);

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
        let uids: Vec<u32> = hits.iter().map(|&(_, u, _)| u).collect();
        let numbers: Vec<u32> = if uid_cmd {
            uids.clone()
        } else {
            hits.iter().map(|&(s, _, _)| s).collect()
        };
        // the highest modseq of the messages reported (MIN/MAX alone report only those)
        let modseq_of = |reported: &[u32]| {
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
    pub(super) async fn matching(&mut self, keys: Vec<SearchKey>) -> Result<Vec<Hit>, CmdError> {
        let State::Selected(authed, sel) = &mut self.state else {
            return Err(CmdError::Bad("no mailbox selected".into()));
        };
        let store: Arc<UserStore> = Arc::clone(&authed.store);
        let targets: Vec<(u32, u32)> = sel.view.uids_in(1, u32::MAX).map(|(u, s)| (s, u)).collect();
        let need = search::needs(&keys);
        // search reads only the hot header fields of the cached data, and the part tree
        // for BODY/TEXT
        let fields = maildex_store::records::CachedFields {
            hot_headers: need.cached,
            parts: need.body,
            ..Default::default()
        };
        let mailbox = sel.mailbox.clone();
        let keywords = sel.keywords.clone();
        let saved = sel.saved.clone();
        let recent = sel.recent.clone();
        let max_seq = sel.view.len();
        let max_uid = sel.view.max_uid().unwrap_or(0);
        let keys = Arc::new(keys);
        let mut hits: Vec<Hit> = Vec::new();
        for batch in targets.chunks(BATCH) {
            let batch = batch.to_vec();
            let (s, k, kw, sv, rc, m) = (
                Arc::clone(&store),
                Arc::clone(&keys),
                keywords.clone(),
                saved.clone(),
                recent.clone(),
                mailbox.clone(),
            );
            let found = blocking(move || -> Result<Vec<Hit>, CmdError> {
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
                };
                let uids: Vec<u32> = batch.iter().map(|&(_, u)| u).collect();
                let loaded = s.load(&m, &uids, fields, need.headers)?;
                let mut out = Vec::new();
                for (&(seq, uid), msg) in batch.iter().zip(loaded) {
                    let Some(msg) = msg else { continue };
                    let c = Candidate {
                        seq,
                        uid,
                        state: &msg.state,
                        cached: msg.cached.as_ref(),
                        headers: msg.headers.as_deref(),
                        recent: rc.iter().any(|x| x.contains(&uid)),
                    };
                    // BODY/TEXT: the file's text, read only when such a key is reached
                    let mut body = || {
                        let parts = &msg.cached.as_ref()?.parts;
                        s.message_text(&m, &msg.state, parts, Html::AsWritten)
                    };
                    if search::matches(&k, &c, &ctx, &mut body) {
                        out.push((seq, uid, msg.state.modseq));
                    }
                }
                Ok(out)
            })
            .await??;
            hits.extend(found);
        }
        Ok(hits)
    }
}
