//! Turning a sequence set into messages of the view, shared by FETCH, STORE, COPY, MOVE,
//! SEARCH and UID EXPUNGE.

use maildex_proto::SequenceSet;

use super::selected::Selected;
use super::CmdError;

/// The (sequence number, UID) pairs `set` names in `sel`'s view, in order.
///
/// With `uid`, the set holds UIDs and UIDs that are not in the view are skipped
/// (RFC 3501 §6.4.8). Without it, a number above the message count is an error (RFC 3501
/// §9 seq-number: "non-existent" numbers are invalid; Dovecot answers BAD). `$` is the
/// saved SEARCHRES result (RFC 5182 §2.1), empty when nothing is saved.
pub(crate) fn resolve(
    sel: &Selected,
    set: &SequenceSet,
    uid: bool,
) -> Result<Vec<(u32, u32)>, CmdError> {
    let view = &sel.view;
    if matches!(set, SequenceSet::Saved) {
        let saved = sel.saved.as_deref().unwrap_or(&[]);
        return Ok(saved
            .iter()
            .filter_map(|&u| view.seq(u).map(|s| (s, u)))
            .collect());
    }
    let mut out = Vec::new();
    if uid {
        let largest = view.max_uid().unwrap_or(0);
        for (lo, hi) in set.resolve(largest).unwrap_or_default() {
            for (u, s) in view.uids_in(lo, hi) {
                out.push((s, u));
            }
        }
    } else {
        let largest = view.len();
        for (lo, hi) in set.resolve(largest).unwrap_or_default() {
            if lo == 0 || hi > largest {
                return Err(CmdError::Bad("Invalid messageset".into()));
            }
            for seq in lo..=hi {
                if let Some(u) = view.uid(seq) {
                    out.push((seq, u));
                }
            }
        }
    }
    Ok(out)
}

/// One message as the index has it, read for one command.
pub(crate) struct Loaded {
    /// Flags, sizes, dates, file name.
    pub state: maildex_index::MessageState,
    /// Listing data, when asked for.
    pub cached: Option<maildex_index::Cached>,
    /// Raw header blocks, when asked for.
    pub headers: Option<Vec<u8>>,
}

/// Reads messages `uids` (ascending) of mailbox `id` in one read transaction: states, and
/// the `fields` of the cached listing data and the header blocks when asked. Dense batches walk each database
/// once over the UID range, so every compressed segment is decoded once, not once per
/// message; sparse ones look each UID up. `None` for a UID that is gone.
pub(crate) fn load_batch(
    r: &maildex_index::Reader<'_>,
    id: u32,
    uids: &[u32],
    fields: maildex_index::CachedFields,
    headers: bool,
) -> Result<Vec<Option<Loaded>>, maildex_index::IndexError> {
    let cached = fields.any();
    use std::ops::ControlFlow;
    let (Some(&first), Some(&last)) = (uids.first(), uids.last()) else {
        return Ok(Vec::new());
    };
    let mut out: Vec<Option<Loaded>> = (0..uids.len()).map(|_| None).collect();
    let dense = u64::from(last - first) <= 4 * uids.len() as u64 + 64;
    if !dense {
        for (slot, &uid) in out.iter_mut().zip(uids) {
            let Some(state) = r.state(id, uid)? else {
                continue;
            };
            *slot = Some(Loaded {
                state,
                cached: if cached {
                    r.cached_fields(id, uid, fields)?
                } else {
                    None
                },
                headers: if headers { r.headers(id, uid)? } else { None },
            });
        }
        return Ok(out);
    }
    let slot = |uid: u32| uids.binary_search(&uid).ok();
    r.for_each_state(id, first..=last, |uid, state| {
        if let Some(i) = slot(uid) {
            out[i] = Some(Loaded {
                state,
                cached: None,
                headers: None,
            });
        }
        Ok(ControlFlow::Continue(()))
    })?;
    if cached {
        r.for_each_cached(id, first..=last, fields, |uid, c| {
            if let Some(Some(m)) = slot(uid).map(|i| out[i].as_mut()) {
                m.cached = Some(c);
            }
            Ok(ControlFlow::Continue(()))
        })?;
    }
    if headers {
        r.for_each_headers(id, first..=last, |uid, h| {
            if let Some(Some(m)) = slot(uid).map(|i| out[i].as_mut()) {
                m.headers = Some(h);
            }
            Ok(ControlFlow::Continue(()))
        })?;
    }
    Ok(out)
}
