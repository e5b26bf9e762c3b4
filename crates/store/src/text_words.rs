//! SEARCH BODY/TEXT answered from the words of the stored text parts (`fts-words`, see
//! `maildex_index::words` for the rule that makes the answers exact), before any stored
//! text is decompressed: BODY with a needle of word characters is decided for every
//! message whose words are stored, any other BODY needle rules out the messages that lack
//! one of its words, and TEXT takes the messages whose text parts, subject or address
//! lines hold its needle (the rest of the header blocks have no words). What is left is
//! compared by its text, as before.

use std::ops::ControlFlow;

use maildex_index::{needle_runs, words, NeedleRun, Reader, WordKind};

use crate::{Mailbox, MailboxId, StoreError, Uid, UserStore};

/// Runs of word characters of one needle looked up (a hostile needle of a thousand
/// one-letter words costs eight passes over the words, not a thousand).
const MAX_RUNS: usize = 8;

/// A BODY or TEXT needle, normalised as the stored text is (maildex-text's `normalize`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextNeedle {
    /// The needle.
    pub needle: String,
    /// TEXT (header blocks and text parts); BODY otherwise (text parts only).
    pub headers: bool,
}

/// What the stored words say of a search's BODY/TEXT needles ([`UserStore::text_answers`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextAnswers {
    /// `answers[n][i]`: needle `n` in message `uids[i]`, when the words decide it.
    pub answers: Vec<Vec<Option<bool>>>,
    /// `headers_only[i]`: the words settle every needle's text parts for message
    /// `uids[i]` (each needle is decided, or is a TEXT needle that its text parts lack):
    /// comparing its header text is enough.
    pub headers_only: Vec<bool>,
    /// `lacking[n][i]`: the words show that no text part of message `uids[i]` holds
    /// needle `n` (it lacks a word the needle needs), whatever its header text holds.
    pub lacking: Vec<Vec<bool>>,
}

impl UserStore {
    /// What the stored words say of each of `needles` for each of `uids` (ascending) of
    /// `mailbox`: `answers[n][i]` is `Some(true)` when the words show that message
    /// `uids[i]` holds needle `n` (a needle of word characters found in a text part's
    /// words, or for TEXT in a word of the root header's Subject, From, To or Cc line:
    /// `maildex_index::words` says why that is exact), `Some(false)` when they show it
    /// does not (BODY only: a message whose words are stored lacks a word the needle
    /// needs), and `None` when only its text can tell (not covered yet, no words stored
    /// for it, a needle with other characters whose words it has, a needle without a
    /// word character, or TEXT not found by the words). One pass over the mailbox's words
    /// per run of word characters of each needle, and one over its header words per TEXT
    /// needle of word characters. All `None` with `[storage] full_text` off.
    pub fn text_answers(
        &self,
        mailbox: &Mailbox,
        uids: &[Uid],
        needles: &[TextNeedle],
    ) -> Result<TextAnswers, StoreError> {
        let undecided = || TextAnswers {
            answers: needles.iter().map(|_| vec![None; uids.len()]).collect(),
            headers_only: vec![false; uids.len()],
            lacking: needles.iter().map(|_| vec![false; uids.len()]).collect(),
        };
        if !self.opts.full_text || uids.is_empty() {
            return Ok(undecided());
        }
        let id = mailbox.id();
        Ok(self.index.read(|r| {
            let covered = r.words_covered(id)?;
            let overflow = r.words_overflow(id)?;
            let decidable: Vec<bool> = uids
                .iter()
                .map(|u| covered.binary_search(u).is_ok() && overflow.binary_search(u).is_err())
                .collect();
            if !decidable.contains(&true) {
                return Ok(undecided());
            }
            let slots = Slots::new(uids);
            let mut out = TextAnswers {
                answers: Vec::with_capacity(needles.len()),
                headers_only: decidable.clone(),
                lacking: Vec::with_capacity(needles.len()),
            };
            for n in needles {
                let mut runs = needle_runs(n.needle.as_bytes());
                // a needle of many runs is narrowed by its first few (each is a pass over
                // the words; any subset still only rules out non-matches)
                runs.truncate(MAX_RUNS);
                let exact = matches!(runs.as_slice(), [one] if !one.starts && !one.ends);
                if runs.is_empty() {
                    // nothing the words can say
                    out.answers.push(vec![None; uids.len()]);
                    out.lacking.push(vec![false; uids.len()]);
                    out.headers_only.iter_mut().for_each(|h| *h = false);
                    continue;
                }
                let mut all = vec![true; uids.len()];
                for run in &runs {
                    let has = holders(r, id, WordKind::Body, run, &slots)?;
                    for (a, h) in all.iter_mut().zip(has) {
                        *a &= h;
                    }
                }
                // TEXT of word characters: a header word holding it finds it too, covered
                // or not (the header words never rule a message out)
                let in_header = match runs.as_slice() {
                    [one] if n.headers && exact => holders(r, id, WordKind::Header, one, &slots)?,
                    _ => vec![false; uids.len()],
                };
                let answers: Vec<Option<bool>> = all
                    .iter()
                    .zip(&decidable)
                    .zip(&in_header)
                    .map(|((&holds, &d), &header)| match (d, holds) {
                        _ if header => Some(true),
                        (false, _) => None,
                        (true, true) => exact.then_some(true),
                        // a header block may still hold it
                        (true, false) if n.headers => None,
                        (true, false) => Some(false),
                    })
                    .collect();
                for ((h, a), &holds) in out.headers_only.iter_mut().zip(&answers).zip(&all) {
                    // settled: decided, or a TEXT needle its text parts lack
                    *h &= a.is_some() || (n.headers && !holds);
                }
                out.lacking.push(
                    all.iter()
                        .zip(&decidable)
                        .map(|(&holds, &d)| d && !holds)
                        .collect(),
                );
                out.answers.push(answers);
            }
            Ok(out)
        })?)
    }
}

/// Which of the asked UIDs have a word of `kind` (a text part's, or a header word) that
/// fits `run`.
fn holders(
    r: &Reader<'_>,
    id: MailboxId,
    kind: WordKind,
    run: &NeedleRun,
    slots: &Slots<'_>,
) -> Result<Vec<bool>, maildex_index::IndexError> {
    let mut has = vec![false; slots.len()];
    // a long list comes in chunks: the word is tested once
    let mut last: Option<(&[u8], bool)> = None;
    r.for_each_word(id, kind, |word, list| {
        let fits = match last {
            Some((w, fits)) if w == word => fits,
            _ => run.fits(word),
        };
        last = Some((word, fits));
        if fits {
            words::for_each_posting(list, |uid| {
                if let Some(i) = slots.find(uid) {
                    has[i] = true;
                }
            });
        }
        ControlFlow::Continue(())
    })?;
    // the words of the messages indexed since the last merge into the lists
    r.for_each_recent_words(id, kind, |uid, words| {
        let Some(i) = slots.find(uid) else {
            return;
        };
        if !has[i]
            && words
                .split(|&b| b == 0)
                .any(|w| !w.is_empty() && run.fits(w))
        {
            has[i] = true;
        }
    })?;
    Ok(has)
}

/// The asked UIDs, found by a table of their span when it is dense enough (a search of a
/// whole mailbox: a posting is then one lookup) or by a binary search.
struct Slots<'u> {
    uids: &'u [Uid],
    first: u32,
    /// index + 1 of the UID `first + k`, 0 for a UID not asked for
    table: Vec<u32>,
}

/// A table is made when its span is at most this many times the UIDs asked for.
const DENSE: u64 = 16;

impl<'u> Slots<'u> {
    fn new(uids: &'u [Uid]) -> Slots<'u> {
        let (first, last) = match (uids.first(), uids.last()) {
            (Some(f), Some(l)) => (f.get(), l.get()),
            _ => (0, 0),
        };
        let span = u64::from(last - first) + 1;
        let mut table = Vec::new();
        if span <= DENSE * uids.len() as u64 {
            table = vec![0u32; span as usize];
            for (i, u) in uids.iter().enumerate() {
                table[(u.get() - first) as usize] = i as u32 + 1;
            }
        }
        Slots { uids, first, table }
    }

    fn len(&self) -> usize {
        self.uids.len()
    }

    fn find(&self, uid: u32) -> Option<usize> {
        if self.table.is_empty() {
            return self.uids.binary_search(&Uid(uid)).ok();
        }
        let k = uid.checked_sub(self.first)? as usize;
        match self.table.get(k) {
            Some(&i) if i > 0 => Some(i as usize - 1),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DeliverOptions, StoreOptions};

    #[test]
    fn words_decide_body_exactly_and_leave_the_rest_to_the_text() {
        let dir = tempfile::tempdir().unwrap();
        let opts = StoreOptions {
            fsync: false,
            ..StoreOptions::default()
        };
        let s = UserStore::open(&dir.path().join("mail"), &dir.path().join("index"), opts).unwrap();
        let long = "q".repeat(maildex_index::words::MAX_WORD + 1);
        for body in [
            "The migration starts next week.",
            "Subject words are not body words",
            "nothing here",
            long.as_str(),
        ] {
            let msg = format!("Subject: invoice\r\n\r\n{body}\r\n");
            s.deliver("INBOX", &mut msg.as_bytes(), &DeliverOptions::default())
                .unwrap();
        }
        let req = crate::SnapshotRequest {
            sync: crate::SyncFirst::Never,
            since: None,
            claim_recent: false,
            first_unseen: false,
        };
        let inbox = s.snapshot("INBOX", &req).unwrap().expect("INBOX").mailbox;
        let uids: Vec<Uid> = (1..=4).map(Uid).collect();
        let ask = |needle: &str, headers: bool| {
            let n = TextNeedle {
                needle: needle.into(),
                headers,
            };
            s.text_answers(&inbox, &uids, &[n])
                .unwrap()
                .answers
                .remove(0)
        };
        // nothing indexed yet: nothing decided
        assert_eq!(ask("igrat", false), [None; 4]);
        s.index_pending_text("INBOX", Uid::MIN, 100).unwrap();
        // a needle of word characters: exact for every covered message but the one whose
        // word is too long to be stored
        assert_eq!(
            ask("igrat", false),
            [Some(true), Some(false), Some(false), None]
        );
        assert_eq!(ask("s", false)[..3], [Some(true), Some(true), Some(false)]);
        // other characters: the words rule out, the text decides the rest
        assert_eq!(
            ask("xt week", false),
            [None, Some(false), Some(false), None]
        );
        assert_eq!(ask(" -- ", false), [None; 4]);
        // TEXT: found in a text part or a subject or address word (even the message
        // whose body words are not stored), or left to the header blocks (the field's
        // name is not a header word)
        assert_eq!(ask("nothing", true), [None, None, Some(true), None]);
        assert_eq!(ask("nvoi", true), [Some(true); 4]);
        assert_eq!(ask("subject", true), [None, Some(true), None, None]);
        assert_eq!(ask("in voice", true), [None; 4]);
        // the same once the words waiting as one value per message are merged into the
        // lists
        let asked = [
            ("igrat", false),
            ("s", false),
            ("xt week", false),
            ("the", false),
            ("zz", false),
            ("nvoi", true),
            ("subject", true),
        ];
        let before: Vec<_> = asked.iter().map(|&(n, h)| ask(n, h)).collect();
        let id = inbox.id();
        s.index.write(move |w| w.fold_words(id)).unwrap();
        let after: Vec<_> = asked.iter().map(|&(n, h)| ask(n, h)).collect();
        assert_eq!(before, after);
        // what only the header text can still decide
        let needles = |list: &[(&str, bool)]| -> Vec<TextNeedle> {
            list.iter()
                .map(|(n, h)| TextNeedle {
                    needle: n.to_string(),
                    headers: *h,
                })
                .collect()
        };
        let only = |list: &[(&str, bool)]| {
            s.text_answers(&inbox, &uids, &needles(list))
                .unwrap()
                .headers_only
        };
        assert_eq!(only(&[("invoice", true)]), [true, true, true, false]);
        assert_eq!(
            only(&[("invoice", true), ("igrat", false)]),
            [true, true, true, false]
        );
        assert_eq!(
            only(&[("invoice", true), ("xt week", false)]),
            [false, true, true, false]
        );
        // TEXT with other characters: settled when a text part lacks one of its words
        assert_eq!(only(&[("in voice", true)]), [true, true, true, false]);
        assert_eq!(only(&[("xt week", true)]), [false, true, true, false]);
        let lacking = |list: &[(&str, bool)]| {
            s.text_answers(&inbox, &uids, &needles(list))
                .unwrap()
                .lacking
                .remove(0)
        };
        assert_eq!(lacking(&[("xt week", true)]), [false, true, true, false]);
        assert_eq!(lacking(&[("igrat", false)]), [false, true, true, false]);
        assert_eq!(lacking(&[(" -- ", false)]), [false; 4]);
    }
}
