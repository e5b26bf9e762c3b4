//! Sort orders and threads kept between queries. A webmail frontend sorts the same folder the same way
//! on every page it shows, and a warm SORT then spent its time decoding every message's
//! keys again (the `cache-sort` segments, strings allocated and compared) where Dovecot
//! compares sort ids kept in its index. So the order of a whole mailbox under one sort
//! program is kept here, per user store, until a message is added to or removed from the
//! mailbox: flag changes (a message read, flagged) leave it valid. A query then takes the
//! kept order and keeps the messages it matched; THREAD of a whole folder takes its kept
//! threads the same way.
//!
//! Bounded: [`KEPT`] orders per store, least recently used first out, 4 bytes per message
//! each (120 KiB for a 30,000-message folder).

use std::any::Any;
use std::sync::{Arc, Mutex};

use maildex_index::SortNeed;

use crate::{Mailbox, MailboxId, SortEntry, StoreError, Uid, UserStore};

/// Orders kept per user store.
const KEPT: usize = 8;

/// One kept order.
struct Kept {
    mailbox: MailboxId,
    uidvalidity: u32,
    program: String,
    /// The mailbox's message count and next UID when the order was made: UIDs only grow,
    /// so a message added or removed changes one of them.
    stamp: (u32, Uid),
    value: Arc<dyn Any + Send + Sync>,
    used: u64,
}

/// The orders of one user store.
#[derive(Default)]
pub(crate) struct Orders {
    kept: Mutex<(Vec<Kept>, u64)>,
}

impl UserStore {
    /// What `compute` makes of the sort entries of every message of `mailbox` (their UIDs
    /// in sort order, or their threads; `need` says which keys it reads, `program` names
    /// what it makes, the same for the same criteria), kept between calls while no message
    /// is added to or removed from the mailbox. The caller keeps the messages it matched;
    /// a matched UID missing from it (a message this session still shows but another
    /// expunged) means the caller works on its matches itself.
    pub fn sort_order<T: Any + Send + Sync>(
        &self,
        mailbox: &Mailbox,
        program: &str,
        need: SortNeed,
        compute: impl FnOnce(Vec<SortEntry>) -> T,
    ) -> Result<Arc<T>, StoreError> {
        let id = mailbox.id();
        let stamp = |s: &UserStore| -> Result<(u32, Uid), StoreError> {
            let rec = s.index.read(|r| r.mailbox(id))?;
            Ok(rec.map_or((0, Uid(0)), |m| (m.counts.messages, m.uid_next)))
        };
        let before = stamp(self)?;
        {
            let mut guard = self.orders.kept.lock().unwrap_or_else(|p| p.into_inner());
            let (kept, clock) = &mut *guard;
            *clock += 1;
            let now = *clock;
            if let Some(k) = kept.iter_mut().find(|k| {
                k.mailbox == id
                    && k.uidvalidity == mailbox.uidvalidity()
                    && k.program == program
                    && k.stamp == before
            }) {
                if let Ok(value) = Arc::clone(&k.value).downcast::<T>() {
                    k.used = now;
                    return Ok(value);
                }
            }
        }
        // the UIDs from the keys alone: `sort_keys` decodes the states
        let uids = self.index.read(|r| r.uids(id))?;
        let made = uids.len();
        let value = Arc::new(compute(self.sort_keys(mailbox, &uids, need)?));
        // kept only when nothing changed while it was made
        if stamp(self)? == before && made == before.0 as usize {
            let mut guard = self.orders.kept.lock().unwrap_or_else(|p| p.into_inner());
            let (kept, clock) = &mut *guard;
            // this mailbox's orders that are stale, or this one's older copy, go
            kept.retain(|k| k.mailbox != id || (k.program != program && k.stamp == before));
            if kept.len() >= KEPT {
                if let Some(oldest) = (0..kept.len()).min_by_key(|&i| kept[i].used) {
                    kept.swap_remove(oldest);
                }
            }
            kept.push(Kept {
                mailbox: id,
                uidvalidity: mailbox.uidvalidity(),
                program: program.to_owned(),
                stamp: before,
                value: Arc::clone(&value) as Arc<dyn Any + Send + Sync>,
                used: *clock,
            });
        }
        Ok(value)
    }
}
