//! Turning a sequence set into messages of the view, shared by FETCH, STORE, COPY, MOVE,
//! SEARCH and UID EXPUNGE.

use maildex_imap_proto::SequenceSet;
use maildex_store::Uid;

use super::selected::Selected;
use super::CmdError;

/// The (sequence number, UID) pairs `set` names in `sel`'s view, in order: where the
/// numbers of a command become [`Uid`]s.
///
/// With `uid`, the set holds UIDs and UIDs that are not in the view are skipped
/// (RFC 3501 §6.4.8). Without it, a number above the message count is an error (RFC 3501
/// §9 seq-number: "non-existent" numbers are invalid; Dovecot answers BAD). `$` is the
/// saved SEARCHRES result (RFC 5182 §2.1), empty when nothing is saved.
pub(crate) fn resolve(
    sel: &Selected,
    set: &SequenceSet,
    uid: bool,
) -> Result<Vec<(u32, Uid)>, CmdError> {
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
        let largest = view.max_uid().map_or(0, Uid::get);
        for (lo, hi) in set.resolve(largest).unwrap_or_default() {
            for (u, s) in view.uids_in(Uid(lo), Uid(hi)) {
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
