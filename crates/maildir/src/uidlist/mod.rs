//! `dovecot-uidlist`: the UID <-> file mapping Dovecot keeps in every Maildir.
//!
//! Formats (maildir-uidlist.c): version 1 (also Courier's `courierimapuiddb`) is a
//! header `1 <uidvalidity> <nextuid>` and lines `<uid> <filename>`; version 3 is a
//! header `3 V<uidvalidity> N<nextuid> G<guid> [<key><value> ...]` and lines
//! `<uid> [<key><value> ...] :<filename>`.
//!
//! File names: Dovecot v2 writes only the base (everything before the first `:`;
//! `maildir_uidlist_write_fd` cuts at the info separator), while older versions
//! wrote the full name with flags. We write the base too, and readers must match
//! records to files by base ([`UidRecord::base`]) either way.

mod lock;
mod template;

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::fs;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::filename::base_of;
use crate::MaildirError;

pub use lock::{UidlistLock, LOCK_STALE_TIMEOUT, LOCK_TIMEOUT};
pub use template::LockTemplate;

/// The file name in each mailbox directory.
pub const UIDLIST_NAME: &str = "dovecot-uidlist";

/// A parsed `dovecot-uidlist` (or `courierimapuiddb`, see [`crate::courier`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uidlist {
    /// Format version read (1 or 3). We always write 3.
    pub version: u32,
    /// IMAP UIDVALIDITY (nonzero).
    pub uidvalidity: u32,
    /// The UID the next new message gets; always greater than every record's UID.
    pub next_uid: u32,
    /// Dovecot's mailbox GUID (32 hex digits), if the file had a valid one.
    pub guid: Option<String>,
    /// Header fields we do not interpret (`<key><value>`, e.g. Dovecot's `P` POP3 UIDL
    /// format), preserved on write.
    pub header_extra: Vec<String>,
    /// Records in strictly increasing UID order.
    pub records: Vec<UidRecord>,
}

/// One `<uid> [ext ...] :<filename>` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UidRecord {
    /// The message UID (nonzero).
    pub uid: u32,
    /// Extension fields as `<key><value>` (`W1260` for a vsize, `G<guid>`, `P<uidl>`,
    /// `O<order>`), preserved.
    pub ext: Vec<String>,
    /// The file name as recorded: a base, or a full name with flags in old files.
    pub file_name: String,
}

impl UidRecord {
    /// A record without extension fields.
    pub fn new(uid: u32, file_name: impl Into<String>) -> UidRecord {
        UidRecord {
            uid,
            ext: Vec::new(),
            file_name: file_name.into(),
        }
    }

    /// The recorded name up to its first `:` — what to match files by.
    pub fn base(&self) -> &str {
        base_of(&self.file_name)
    }
}

/// A fresh UIDVALIDITY: the current time in seconds, as Dovecot uses, made strictly
/// increasing within this process so two mailboxes created in the same second differ.
pub fn new_uidvalidity() -> u32 {
    static LAST: AtomicU32 = AtomicU32::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(1)
        .max(1);
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last.wrapping_add(1)).max(1);
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(cur) => last = cur,
        }
    }
}

/// A new 128-bit mailbox GUID as 32 lowercase hex digits (the `G` header field).
pub fn new_guid() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    // RandomState is seeded from the OS; hashing time, pid and a counter with it
    // gives unpredictable, unique values without another dependency.
    let state = RandomState::new();
    let mut h1 = state.build_hasher();
    h1.write_u128(nanos);
    h1.write_u32(std::process::id());
    h1.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let a = h1.finish();
    let mut h2 = state.build_hasher();
    h2.write_u64(a);
    h2.write_u128(nanos);
    let b = h2.finish();
    format!("{a:016x}{b:016x}")
}

fn is_guid(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Header fields of either version.
struct Header {
    version: u32,
    uidvalidity: u32,
    next_uid: u32,
    guid: Option<String>,
    extra: Vec<String>,
}

fn parse_header(path: &Path, line: &str) -> Result<Header, MaildirError> {
    let bad = |reason: String| MaildirError::corrupt(path, 1, reason);
    let b = line.as_bytes();
    if b.len() < 2 || !b[0].is_ascii_digit() || b[1] != b' ' {
        return Err(bad("corrupted header (invalid version number)".into()));
    }
    let version = u32::from(b[0] - b'0');
    let rest = &line[2..];
    let mut h = Header {
        version,
        uidvalidity: 0,
        next_uid: 0,
        guid: None,
        extra: Vec::new(),
    };
    match version {
        1 => {
            let mut it = rest.split_ascii_whitespace().map(str::parse::<u32>);
            match (it.next(), it.next()) {
                (Some(Ok(v)), Some(Ok(n))) => {
                    h.uidvalidity = v;
                    h.next_uid = n;
                }
                _ => return Err(bad("corrupted header (version 1)".into())),
            }
        }
        3 => {
            for field in rest.split(' ').filter(|f| !f.is_empty()) {
                let (key, value) = field.split_at(field.chars().next().map_or(0, char::len_utf8));
                match key {
                    "V" => h.uidvalidity = value.parse().unwrap_or(0),
                    "N" => h.next_uid = value.parse().unwrap_or(0),
                    "G" if is_guid(value) => h.guid = Some(value.to_ascii_lowercase()),
                    "G" => {
                        tracing::warn!(path = %path.display(), guid = value, "ignoring invalid mailbox GUID in uidlist header");
                    }
                    _ => h.extra.push(field.to_string()),
                }
            }
        }
        v => return Err(bad(format!("unsupported version {v}"))),
    }
    if h.uidvalidity == 0 || h.next_uid == 0 {
        return Err(bad(format!(
            "broken header (uidvalidity = {}, next_uid = {})",
            h.uidvalidity, h.next_uid
        )));
    }
    Ok(h)
}

/// Parses one record line (`lineno` is 1-based, for errors).
fn parse_record(
    path: &Path,
    lineno: usize,
    version: u32,
    line: &str,
) -> Result<UidRecord, MaildirError> {
    let bad = |reason: String| MaildirError::corrupt(path, lineno, reason);
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    let uid: u64 = line[..digits].parse().unwrap_or(0);
    if uid == 0 || line.as_bytes().get(digits) != Some(&b' ') {
        return Err(bad(format!("invalid data: {line:?}")));
    }
    // Dovecot: "UID too high" at (uint32_t)-1.
    let uid = u32::try_from(uid)
        .ok()
        .filter(|u| *u != u32::MAX)
        .ok_or_else(|| bad(format!("UID too high ({uid})")))?;
    let mut rest = line[digits..].trim_start_matches(' ');
    let mut ext = Vec::new();
    if version == 3 {
        loop {
            if let Some(name) = rest.strip_prefix(':') {
                rest = name;
                break;
            }
            if rest.is_empty() {
                return Err(bad("truncated record: no ':<filename>'".into()));
            }
            let end = rest.find(' ').unwrap_or(rest.len());
            let field = &rest[..end];
            if field.as_bytes()[0].is_ascii_uppercase() {
                ext.push(field.to_string());
            } else {
                tracing::warn!(path = %path.display(), line = lineno, field, "dropping invalid uidlist extension field");
            }
            rest = rest[end..].trim_start_matches(' ');
        }
    }
    if rest.is_empty() {
        return Err(bad("record without file name".into()));
    }
    if rest.contains('/') {
        return Err(bad(format!("broken file name: {rest:?}")));
    }
    Ok(UidRecord {
        uid,
        ext,
        file_name: rest.to_string(),
    })
}

impl Uidlist {
    /// An empty version-3 list with a fresh GUID; `next_uid` is 1.
    pub fn new(uidvalidity: u32) -> Uidlist {
        Uidlist {
            version: 3,
            uidvalidity,
            next_uid: 1,
            guid: Some(new_guid()),
            header_extra: Vec::new(),
            records: Vec::new(),
        }
    }

    /// Reads `dir/dovecot-uidlist`; `None` if it does not exist. No lock is needed
    /// for reading (the file is only appended to or replaced by rename).
    pub fn read(dir: &Path) -> Result<Option<Uidlist>, MaildirError> {
        let path = dir.join(UIDLIST_NAME);
        match fs::read(&path) {
            Ok(data) => Uidlist::parse(&path, &data).map(Some),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(MaildirError::io("read", &path, e)),
        }
    }

    /// Parses uidlist bytes; `path` is only used in errors and warnings.
    ///
    /// Errors (naming file and line) on a bad header, a malformed or non-UTF-8
    /// record, a zero UID or UIDs not strictly increasing. A last line without its
    /// newline is an append cut short by a crash: it is ignored with a warning. A
    /// `next_uid` not above every UID is raised (Dovecot does the same; it is the
    /// normal state after appends, which do not rewrite the header). When two UIDs name the same base, the later one wins, as in Dovecot.
    pub fn parse(path: &Path, data: &[u8]) -> Result<Uidlist, MaildirError> {
        let mut lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
        // split() yields a final empty piece after a trailing '\n'.
        let partial = match lines.last() {
            Some([]) => {
                lines.pop();
                None
            }
            Some(_) if lines.len() > 1 => lines.pop(),
            _ => None,
        };
        let Some(first) = lines.first() else {
            return Err(MaildirError::corrupt(path, 1, "empty file"));
        };
        let header_line = std::str::from_utf8(first)
            .map_err(|_| MaildirError::corrupt(path, 1, "header is not UTF-8"))?;
        let h = parse_header(path, header_line)?;
        let mut list = Uidlist {
            version: h.version,
            uidvalidity: h.uidvalidity,
            next_uid: h.next_uid,
            guid: h.guid,
            header_extra: h.extra,
            records: Vec::with_capacity(lines.len().saturating_sub(1)),
        };
        let mut by_base: HashMap<String, usize> = HashMap::new();
        let mut dropped = Vec::new();
        let mut prev = 0u32;
        for (i, raw) in lines.iter().enumerate().skip(1) {
            let lineno = i + 1;
            let line = std::str::from_utf8(raw)
                .map_err(|_| MaildirError::corrupt(path, lineno, "record is not UTF-8"))?;
            let rec = parse_record(path, lineno, h.version, line)?;
            if rec.uid <= prev {
                return Err(MaildirError::corrupt(
                    path,
                    lineno,
                    format!("UIDs not ordered ({} after {prev})", rec.uid),
                ));
            }
            prev = rec.uid;
            if let Some(old) = by_base.insert(rec.base().to_string(), list.records.len()) {
                tracing::warn!(path = %path.display(), line = lineno, base = rec.base(), old_uid = list.records[old].uid, new_uid = rec.uid, "duplicate file entry in uidlist; keeping the later UID");
                dropped.push(old);
            }
            list.records.push(rec);
        }
        if !dropped.is_empty() {
            dropped.sort_unstable();
            let mut idx = 0;
            list.records.retain(|_| {
                let keep = dropped.binary_search(&idx).is_err();
                idx += 1;
                keep
            });
        }
        if let Some(p) = partial {
            tracing::warn!(path = %path.display(), line = lines.len() + 1, bytes = p.len(), "ignoring unterminated last line of uidlist (interrupted append)");
        }
        if prev != 0 && list.next_uid <= prev {
            // Normal: Dovecot appends records without updating the header.
            tracing::debug!(path = %path.display(), next_uid = list.next_uid, last_uid = prev, "uidlist next_uid not above last UID; raising it");
            list.next_uid = prev + 1;
        }
        Ok(list)
    }

    /// Checks what [`Uidlist::to_bytes`] would write can be read back: nonzero
    /// UIDVALIDITY, UIDs nonzero and strictly increasing and below `next_uid`, file
    /// names non-empty without `/`, CR or LF, fields `<A-Z><value>` without spaces.
    pub fn validate(&self, path: &Path) -> Result<(), MaildirError> {
        let bad = |reason: String| MaildirError::InvalidRecords {
            path: path.to_path_buf(),
            reason,
        };
        if self.uidvalidity == 0 {
            return Err(bad("uidvalidity is 0".into()));
        }
        let field_ok = |f: &str| !f.is_empty() && !f.contains([' ', '\n', '\r', '\0']);
        for f in &self.header_extra {
            if !field_ok(f) || matches!(f.as_bytes()[0], b'V' | b'N' | b'G') {
                return Err(bad(format!("invalid header field {f:?}")));
            }
        }
        if let Some(g) = &self.guid {
            if !is_guid(g) {
                return Err(bad(format!("invalid GUID {g:?}")));
            }
        }
        validate_records(path, &self.records, 0)?;
        if let Some(last) = self.records.last() {
            if self.next_uid <= last.uid {
                return Err(bad(format!(
                    "next_uid {} not above last UID {}",
                    self.next_uid, last.uid
                )));
            }
        }
        if self.next_uid == 0 {
            return Err(bad("next_uid is 0".into()));
        }
        Ok(())
    }

    /// The file contents, version 3, one record per line, file names cut to their
    /// base as Dovecot writes them.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = format!("3 V{} N{}", self.uidvalidity, self.next_uid);
        if let Some(g) = &self.guid {
            out.push_str(" G");
            out.push_str(g);
        }
        for f in &self.header_extra {
            out.push(' ');
            out.push_str(f);
        }
        out.push('\n');
        let mut bytes = out.into_bytes();
        for r in &self.records {
            record_line(&mut bytes, r);
        }
        bytes
    }

    /// The record whose base is `base`.
    pub fn find_base(&self, base: &str) -> Option<&UidRecord> {
        self.records.iter().find(|r| r.base() == base)
    }

    /// Base -> UID for every record.
    pub fn uids_by_base(&self) -> HashMap<&str, u32> {
        self.records.iter().map(|r| (r.base(), r.uid)).collect()
    }
}

/// What numbering one new file needs from a uidlist, found without parsing its records
/// (see [`scan_for_append`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendScan {
    pub uidvalidity: u32,
    /// The UID the next appended record gets: above the header's and every record's.
    pub next_uid: u32,
    /// The UID the file already has (the last record of its base, as [`Uidlist::parse`]
    /// keeps the later of two).
    pub existing: Option<u32>,
}

/// Reads what a delivery needs from the uidlist bytes `data`: UIDVALIDITY, the next UID
/// and whether a record for `base` is there already (a sync in another process may have
/// numbered a file between its rename into `new/` and the lock). A delivery does this for
/// every message, and parsing every record of a 10,000-message mailbox to learn three
/// numbers cost more than the rest of the delivery; this looks at the header, the last
/// line and the places `base` occurs. None when the file is not a whole version-3 file
/// (the caller then parses it, which reports what is wrong).
pub fn scan_for_append(path: &Path, data: &[u8], base: &str) -> Option<AppendScan> {
    if base.is_empty() || data.last() != Some(&b'\n') {
        return None;
    }
    let hdr_end = memchr::memchr(b'\n', data)?;
    let h = parse_header(path, std::str::from_utf8(&data[..hdr_end]).ok()?).ok()?;
    if h.version != 3 {
        return None;
    }
    let body = &data[hdr_end + 1..];
    let mut next_uid = h.next_uid;
    if body.len() > 1 {
        let last_start = memchr::memrchr(b'\n', &body[..body.len() - 1]).map_or(0, |p| p + 1);
        next_uid = next_uid.max(record_uid(&body[last_start..])?.checked_add(1)?);
    }
    // only the lines where `base` occurs are parsed, and count when their base is it
    let mut existing = None;
    for at in memchr::memmem::find_iter(body, base.as_bytes()) {
        let start = memchr::memrchr(b'\n', &body[..at]).map_or(0, |p| p + 1);
        let end = memchr::memchr(b'\n', &body[at..]).map_or(body.len(), |p| at + p);
        let line = std::str::from_utf8(&body[start..end]).ok()?;
        let rec = parse_record(path, 0, 3, line).ok()?;
        if rec.base() == base {
            existing = Some(rec.uid);
        }
    }
    Some(AppendScan {
        uidvalidity: h.uidvalidity,
        next_uid,
        existing,
    })
}

/// The UID a record line starts with (nonzero, followed by a space).
fn record_uid(line: &[u8]) -> Option<u32> {
    let digits = line.iter().take_while(|b| b.is_ascii_digit()).count();
    if line.get(digits) != Some(&b' ') {
        return None;
    }
    std::str::from_utf8(&line[..digits])
        .ok()?
        .parse::<u32>()
        .ok()
        .filter(|&u| u != 0 && u != u32::MAX)
}

/// Appends `<uid>[ <ext>...] :<base>\n`.
fn record_line(out: &mut Vec<u8>, r: &UidRecord) {
    out.extend_from_slice(r.uid.to_string().as_bytes());
    for e in &r.ext {
        out.push(b' ');
        out.extend_from_slice(e.as_bytes());
    }
    out.extend_from_slice(b" :");
    out.extend_from_slice(r.base().as_bytes());
    out.push(b'\n');
}

/// Records must have UIDs above `after`, strictly increasing, below u32::MAX, and
/// writable names and fields.
fn validate_records(path: &Path, records: &[UidRecord], after: u32) -> Result<(), MaildirError> {
    let bad = |reason: String| MaildirError::InvalidRecords {
        path: path.to_path_buf(),
        reason,
    };
    let mut prev = after;
    for r in records {
        if r.uid == 0 || r.uid == u32::MAX {
            return Err(bad(format!("invalid UID {}", r.uid)));
        }
        if r.uid <= prev {
            return Err(bad(format!("UID {} not above {prev}", r.uid)));
        }
        prev = r.uid;
        let base = r.base();
        if base.is_empty() || base.contains(['/', '\n', '\r', '\0']) {
            return Err(bad(format!(
                "UID {}: invalid file name {:?}",
                r.uid, r.file_name
            )));
        }
        for e in &r.ext {
            if e.is_empty()
                || !e.as_bytes()[0].is_ascii_uppercase()
                || e.contains([' ', '\n', '\r', '\0'])
            {
                return Err(bad(format!("UID {}: invalid extension field {e:?}", r.uid)));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
