//! Learned header fields: values of header fields a client searched, kept in the
//! `cache-search` record of every message of the mailbox (as Dovecot's cache decides to
//! keep a field once a client asked for it), so that HEADER on such a field is answered
//! from the search fields read in place instead of decompressing every header block.
//!
//! Which fields a mailbox learned is in [`MailboxRecord::learned_headers`]; the store
//! adds a field and fills the existing records ([`Writer::learn_header`],
//! [`Writer::fill_learned`]); [`Writer::insert_messages`] gives every message indexed
//! later the mailbox's learned fields, in the same transaction that reads the list, so no
//! message is missed. Each record lists the fields it holds: one that lacks a field says
//! nothing about it, and HEADER reads that message's header block as before.
//!
//! The values are computed by a function of the text crate (RFC 2047 decoding and
//! normalisation, what HEADER compares), which depends on this crate: the store hands it
//! over once with [`set_values_fn`], a process-wide hook rather than a dependency cycle.

use std::sync::OnceLock;

use crate::schema::{self, Cached, MailboxRecord, SearchFields, MAX_LEARNED};
use crate::txn::Writer;
use crate::{IndexError, MailboxId, Uid};

/// The occurrences of header field `name` (lower-case) in a message's header blocks (read
/// up to the end of the root block, its empty line), as HEADER compares them.
pub type ValuesFn = fn(header: &[u8], name: &str) -> Vec<String>;

static VALUES: OnceLock<ValuesFn> = OnceLock::new();

/// Sets the function that computes learned values (the first call wins: every caller
/// passes the same one).
pub fn set_values_fn(f: ValuesFn) {
    let _ = VALUES.set(f);
}

pub(crate) fn values_fn() -> Option<ValuesFn> {
    VALUES.get().copied()
}

/// Adds to `cached.search` the fields of `names` it does not hold yet.
/// `header_blocks` are the message's stored blocks, the root's first: the values are
/// read up to the root block's end (its empty line).
pub(crate) fn complete(cached: &mut Cached, header_blocks: &[u8], names: &[String], f: ValuesFn) {
    add_missing(&mut cached.search, header_blocks, names, f);
}

fn add_missing(search: &mut SearchFields, root: &[u8], names: &[String], f: ValuesFn) -> bool {
    let mut added = false;
    for name in names {
        if !search.learned.iter().any(|(n, _)| n == name) {
            search.learned.push((name.clone(), f(root, name)));
            added = true;
        }
    }
    added
}

/// Whether `name` can be learned: a lower-case field name (RFC 5322 §3.6.8: printable
/// ASCII but the colon), at most 64 bytes.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| (33..=126).contains(&b) && b != b':' && !b.is_ascii_uppercase())
}

impl Writer<'_, '_> {
    /// Adds `name` to the fields `mailbox` learns. False when it is there already, the
    /// mailbox learned [`MAX_LEARNED`] fields, or the name is not a field name.
    pub fn learn_header(&mut self, mailbox: MailboxId, name: &str) -> Result<bool, IndexError> {
        let mut m: MailboxRecord = self.reader().require_mailbox(mailbox)?;
        if !valid_name(name)
            || m.learned_headers.iter().any(|n| n == name)
            || m.learned_headers.len() >= MAX_LEARNED
        {
            return Ok(false);
        }
        m.learned_headers.push(name.to_string());
        self.put_mailbox(mailbox, &m)?;
        Ok(true)
    }

    /// Gives the messages of `root_headers` (uid, stored header blocks, read before this
    /// transaction: they never change) whose search record lacks one of `mailbox`'s
    /// learned fields that field. Returns how many
    /// records were rewritten; a message expunged meanwhile is skipped.
    pub fn fill_learned(
        &mut self,
        mailbox: MailboxId,
        root_headers: &[(Uid, Vec<u8>)],
    ) -> Result<usize, IndexError> {
        let Some(f) = values_fn() else {
            return Ok(0);
        };
        let names = self.reader().require_mailbox(mailbox)?.learned_headers;
        let mut filled = Vec::new();
        for (uid, root) in root_headers {
            let mut search: SearchFields = {
                let reader = self.reader();
                let Some(raw) = reader.search_fields(mailbox, *uid)? else {
                    continue;
                };
                let what = format_args!("{} {mailbox}/{uid}", schema::DB_CACHE_SEARCH);
                schema::decode(raw, &what)?
            };
            if add_missing(&mut search, root, &names, f) {
                filled.push((uid.get(), schema::encode(&search)?));
            }
        }
        let n = filled.len();
        self.dbs
            .cache()
            .search
            .put_many(self.txn, mailbox.get(), filled)?;
        Ok(n)
    }
}
