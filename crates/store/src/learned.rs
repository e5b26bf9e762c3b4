//! Learning header fields for SEARCH (see `maildex_index::learned`): when HEADER on a
//! field outside the stored and hot ones had to read header blocks, the session asks the
//! store to learn the field for the mailbox; from then on every message indexed into it
//! keeps the field's values in its search record, and the records already there are
//! filled here, a chunk per transaction. Dovecot's cache does the same with its
//! "temp"/"yes" decisions for a field a client searched.

use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::sync::Mutex;

use maildex_index::{SearchView, HOT_HEADERS, SEARCH_HEADERS};

use crate::{Mailbox, MailboxId, StoreError, Uid, UserStore};

/// A mailbox with fewer messages learns nothing: reading its header blocks costs little.
pub const LEARN_MIN_MESSAGES: u32 = 100;
/// Messages whose records are filled per write transaction.
const CHUNK: u32 = 2048;

/// Fills running in this process: (index directory, mailbox id). A second search of the
/// field while one runs does not start another.
static FILLING: Mutex<BTreeSet<(std::path::PathBuf, MailboxId)>> = Mutex::new(BTreeSet::new());

/// Removes its entry from [`FILLING`] when the fill ends, whichever way.
struct Filling((std::path::PathBuf, MailboxId));

impl Drop for Filling {
    fn drop(&mut self) {
        FILLING
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.0);
    }
}

impl UserStore {
    /// Learns header fields `names` (as a HEADER search key names them) for `mailbox` and
    /// fills the records of its messages that lack them. Names that are stored or hot
    /// anyway, or not field names, are ignored, as is a mailbox under
    /// [`LEARN_MIN_MESSAGES`] messages or one that learned
    /// [`maildex_index::MAX_LEARNED`] fields. Returns how many records were filled.
    pub fn learn_headers(&self, mailbox: &Mailbox, names: &[String]) -> Result<usize, StoreError> {
        let names: Vec<String> = names
            .iter()
            .map(|n| n.to_ascii_lowercase())
            .filter(|n| maildex_index::learned::valid_name(n))
            .filter(|n| {
                let b = n.as_bytes();
                !SEARCH_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(b))
                    && !HOT_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(b))
            })
            .collect();
        if names.is_empty() {
            return Ok(0);
        }
        let key = (self.index.path().to_path_buf(), mailbox.id());
        if !FILLING
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone())
        {
            return Ok(0);
        }
        let _filling = Filling(key);
        let id = mailbox.id();
        // a write only when a field is new and fits: a search of a field the mailbox cannot
        // learn (the cap) must not cost a commit each time
        let m = self.index.read(|r| r.require_mailbox(id))?;
        if m.counts.messages < LEARN_MIN_MESSAGES {
            return Ok(0);
        }
        let room = maildex_index::MAX_LEARNED.saturating_sub(m.learned_headers.len());
        let new = names.iter().any(|n| !m.learned_headers.contains(n));
        let m = if new && room > 0 {
            let wanted = names.clone();
            self.index.write(move |w| {
                for n in &wanted {
                    w.learn_header(id, n)?;
                }
                w.reader().require_mailbox(id)
            })?
        } else {
            m
        };
        let learned: Vec<String> = names
            .into_iter()
            .filter(|n| m.learned_headers.contains(n))
            .collect();
        let last = m.uid_next.get().saturating_sub(1);
        if learned.is_empty() {
            return Ok(0);
        }
        let mut filled = 0;
        let mut first = 1u32;
        while first <= last {
            let end = first.saturating_add(CHUNK - 1).min(last);
            let blocks = self.index.read(|r| {
                let mut lacking = Vec::new();
                r.for_each_search(id, Uid(first)..=Uid(end), |uid, raw| {
                    let holds = SearchView::parse(raw)
                        .is_some_and(|v| learned.iter().all(|n| v.header(n.as_bytes()).is_some()));
                    if !holds {
                        lacking.push(uid);
                    }
                    Ok(ControlFlow::Continue(()))
                })?;
                let mut blocks = Vec::with_capacity(lacking.len());
                if let (Some(&lo), Some(&hi)) = (lacking.first(), lacking.last()) {
                    r.for_each_headers(id, lo..=hi, |uid, h| {
                        if lacking.binary_search(&uid).is_ok() {
                            blocks.push((uid, h));
                        }
                        Ok(ControlFlow::Continue(()))
                    })?;
                }
                Ok(blocks)
            })?;
            if !blocks.is_empty() {
                filled += self.index.write(move |w| w.fill_learned(id, &blocks))?;
            }
            first = match end.checked_add(1) {
                Some(n) => n,
                None => break,
            };
        }
        tracing::debug!(mailbox = %mailbox.name(), fields = ?learned, filled, "learned header fields for SEARCH");
        Ok(filled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::tests::store;
    use crate::{DeliverOptions, SnapshotRequest, SyncFirst};

    fn deliver(s: &UserStore, n: usize) {
        for i in 0..n {
            let msg =
                format!("Subject: m{i}\r\nX-Mailer: =?UTF-8?Q?M=C3=A4iler?= {i}\r\n\r\nb\r\n");
            s.deliver("INBOX", &mut msg.as_bytes(), &DeliverOptions::default())
                .unwrap();
        }
    }

    fn inbox(s: &UserStore) -> Mailbox {
        let req = SnapshotRequest {
            sync: SyncFirst::Never,
            since: None,
            claim_recent: false,
            first_unseen: false,
        };
        s.snapshot("INBOX", &req).unwrap().expect("INBOX").mailbox
    }

    fn learned(s: &UserStore, m: &Mailbox) -> Vec<String> {
        let id = m.id();
        s.index
            .read(|r| Ok(r.require_mailbox(id)?.learned_headers))
            .unwrap()
    }

    #[test]
    fn a_small_mailbox_learns_nothing_and_stored_or_hot_fields_are_never_learned() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        deliver(&s, LEARN_MIN_MESSAGES as usize - 1);
        let m = inbox(&s);
        assert_eq!(s.learn_headers(&m, &["X-Mailer".into()]).unwrap(), 0);
        assert!(learned(&s, &m).is_empty());
        deliver(&s, 1);
        let names = ["Subject", "Message-ID", "List-Id", "bad name", "x:y", ""];
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        assert_eq!(s.learn_headers(&m, &names).unwrap(), 0);
        assert!(learned(&s, &m).is_empty());
        assert_eq!(s.learn_headers(&m, &["X-Mailer".into()]).unwrap(), 100);
        assert_eq!(learned(&s, &m), ["x-mailer"]);
        // learned once: nothing left to fill
        assert_eq!(s.learn_headers(&m, &["x-mailer".into()]).unwrap(), 0);
    }

    #[test]
    fn a_mailbox_learns_at_most_max_learned_fields() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        deliver(&s, LEARN_MIN_MESSAGES as usize);
        let m = inbox(&s);
        let names: Vec<String> = (0..20).map(|i| format!("x-field-{i}")).collect();
        s.learn_headers(&m, &names).unwrap();
        assert_eq!(
            learned(&s, &m),
            names[..maildex_index::MAX_LEARNED].to_vec()
        );
        s.learn_headers(&m, &["x-mailer".into()]).unwrap();
        assert_eq!(learned(&s, &m).len(), maildex_index::MAX_LEARNED);
    }
}
