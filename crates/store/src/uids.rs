//! UID assignment with dovecot-uidlist as the authority.
//!
//! Under Dovecot's `dovecot-uidlist.lock` dotlock: read the list (or, when it is missing,
//! recreate it from the index, from Courier's `courierimapuiddb`, or start a new
//! UIDVALIDITY, in that order), give every file it does not know the next UID in Maildir
//! name order (as Dovecot does), and write the list back before anything is indexed, so a
//! crash after this point can only re-index, never renumber.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::SystemTime;

use maildex_maildir::filename::sort_cmp;
use maildex_maildir::{
    courier, scan, uidlist, Entry, MaildirError, UidRecord, Uidlist, UidlistLock,
};

use crate::convert::file_stamp;
use crate::StoreError;
use maildex_index::Stamp;

/// What the index knows of a mailbox's UIDs, used only to recreate a lost uidlist.
pub(crate) struct Known {
    pub uidvalidity: u32,
    pub uid_next: u32,
    pub files: Vec<(u32, String)>,
}

/// The outcome of [`assign`]; names borrowed from the listing.
pub(crate) struct Assigned<'a> {
    pub uidvalidity: u32,
    pub next_uid: u32,
    /// Base file name -> UID, for every present file.
    pub by_base: HashMap<&'a str, u32>,
    /// Every record of the list (present or not), in UID order.
    pub records: Vec<UidRecord>,
    /// The list's stamp once written, taken under the lock: a change by anyone after it
    /// shows as another stamp.
    pub stamp: Stamp,
}

/// Lists the folders and returns the base names found, but only when the listing is known
/// to be complete: the folders' stamps were more than a second old and did not change while
/// they were read. readdir can miss a file that another tool renames (a flag change) while
/// it runs, and anything dropped because of such a miss would be renumbered or shown as
/// expunged, so callers that drop or remove things rely on this and wait otherwise.
pub(crate) fn complete_listing(mailbox: &Path) -> Result<Option<HashSet<String>>, StoreError> {
    let listing = scan::scan_unsorted(mailbox)?;
    let after = scan::stamps(mailbox)?;
    let now = SystemTime::now();
    let quiet = (listing.new, listing.cur) == after
        && listing.new.is_settled(now)
        && listing.cur.is_settled(now);
    Ok(quiet.then(|| listing.entries.into_iter().map(|e| e.name.base).collect()))
}

/// Where the UIDs came from when dovecot-uidlist had to be (re)created.
fn recreate(
    mailbox: &Path,
    known: Option<Known>,
    broken: Option<String>,
) -> Result<Uidlist, StoreError> {
    let file = mailbox.join(uidlist::UIDLIST_NAME);
    if let Some(k) = known.filter(|k| k.uidvalidity != 0) {
        tracing::warn!(file = %file.display(), broken = ?broken, "dovecot-uidlist unusable or missing; recreating it from the index (UIDs kept)");
        let mut list = Uidlist::new(k.uidvalidity);
        list.next_uid = k.uid_next.max(1);
        list.records = k
            .files
            .into_iter()
            .map(|(uid, file_name)| UidRecord::new(uid, file_name))
            .collect();
        if let Some(max) = list.records.iter().map(|r| r.uid).max() {
            list.next_uid = list.next_uid.max(max + 1);
        }
        return Ok(list);
    }
    if let Some(reason) = broken {
        return Err(StoreError::UidlistUnusable { path: file, reason });
    }
    if let Some(list) = courier::read_courier_uiddb(mailbox)? {
        tracing::info!(mailbox = %mailbox.display(), "importing UIDs from courierimapuiddb");
        return Ok(list);
    }
    Ok(Uidlist::new(uidlist::new_uidvalidity()))
}

/// Assigns UIDs to `entries` (see the module docs). `known` is asked only when the list
/// has to be recreated.
pub(crate) fn assign<'a>(
    mailbox: &Path,
    entries: &'a [Entry],
    known: impl FnOnce() -> Result<Option<Known>, StoreError>,
    lock: impl FnOnce() -> Result<UidlistLock, StoreError>,
) -> Result<Assigned<'a>, StoreError> {
    let mut lock = lock()?;
    let (mut list, existed) = match lock.read() {
        Ok(Some(list)) => (list, true),
        Ok(None) => (recreate(mailbox, known()?, None)?, false),
        Err(MaildirError::Corrupt { path, line, reason }) => {
            let broken = format!("{}: line {line}: {reason}", path.display());
            let list = recreate(mailbox, known()?, Some(broken))?;
            // keep the unreadable file for the admin to look at
            let keep = mailbox.join(format!("{}.broken", uidlist::UIDLIST_NAME));
            if let Err(e) = std::fs::copy(&path, &keep) {
                tracing::warn!(file = %keep.display(), error = %e, "could not keep a copy of the broken uidlist");
            }
            (list, false)
        }
        Err(e) => return Err(e.into()),
    };

    // names borrowed, no String per record or file (a 30,000-message folder's sync made
    // 60,000 of them here)
    let mut by_base: HashMap<&'a str, u32> = HashMap::with_capacity(entries.len());
    {
        // a base recorded twice keeps its last record's UID
        let listed: HashMap<&str, u32> = list.records.iter().map(|r| (r.base(), r.uid)).collect();
        for e in entries {
            if let Some(&uid) = listed.get(e.name.base.as_str()) {
                by_base.insert(&e.name.base, uid);
            }
        }
    }
    let mut fresh: Vec<&Entry> = entries
        .iter()
        .filter(|e| !by_base.contains_key(e.name.base.as_str()))
        .collect();
    fresh.sort_by(|a, b| sort_cmp(&a.file_name, &b.file_name));
    fresh.dedup_by(|a, b| a.name.base == b.name.base);
    let mut added = Vec::with_capacity(fresh.len());
    for e in fresh {
        let uid = list.next_uid;
        list.next_uid = uid
            .checked_add(1)
            .ok_or_else(|| StoreError::UidlistUnusable {
                path: mailbox.join(uidlist::UIDLIST_NAME),
                reason: "UIDs exhausted (next UID would overflow)".into(),
            })?;
        by_base.insert(&e.name.base, uid);
        added.push(UidRecord::new(uid, e.file_name.clone()));
    }

    // (every file that has a record is in `by_base`, with the fresh ones not yet recorded)
    let stale = list
        .records
        .iter()
        .filter(|r| !by_base.contains_key(r.base()))
        .count();
    // Records of files that are gone stay in the list until enough accumulate to be worth
    // a rewrite (they are harmless: base names are never reused), as Dovecot does. They are
    // dropped only on a complete listing made under the lock (`entries` was listed before
    // the lock, so a file delivered since has a record but is missing from it).
    let compact = stale > 32 && stale * 4 > list.records.len();
    let now_present = if compact || (!existed && stale > 0) {
        complete_listing(mailbox)?
    } else {
        None
    };
    list.records.extend(added.iter().cloned());
    list.records.sort_by_key(|r| r.uid);
    if let Some(present) = &now_present {
        list.records.retain(|r| present.contains(r.base()));
    }
    if !existed || (compact && now_present.is_some()) {
        lock.rewrite(&list)?;
    } else if !added.is_empty() {
        lock.append(&added, list.next_uid)?;
    }
    let stamp = file_stamp(&mailbox.join(uidlist::UIDLIST_NAME))?;
    Ok(Assigned {
        uidvalidity: list.uidvalidity,
        next_uid: list.next_uid,
        by_base,
        records: list.records,
        stamp,
    })
}
