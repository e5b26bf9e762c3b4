//! Reading Courier-IMAP's control files, for people moving from Courier.
//!
//! `courierimapuiddb` (courier-libs imap/imapscanclient.c): a header
//! `1 <uidvalidity> <nextuid>` and lines `<uid> <filename>` where the file name is
//! cut before its `:` info. Courier skips lines it cannot parse and ignores a last
//! line without newline; so do we.
//!
//! `courierimapkeywords/` (courier-libs maildir/maildirkeywords2.c): the file
//! `:list` holds keyword names one per line, an empty line, then
//! `<base>:<index> <index> ...` per message. Updates not yet merged into `:list` are
//! files in the same directory, each listing one message's keyword names one per
//! line: `<base>` (newest) or `.<n>.<base>` (the highest `n` wins); they replace
//! that message's `:list` entry. `.tmp.*` files are scratch files.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::path::Path;

use crate::filename::base_of;
use crate::uidlist::{UidRecord, Uidlist};
use crate::MaildirError;

/// The uid database file name.
pub const UIDDB_NAME: &str = "courierimapuiddb";
/// The keyword directory name.
pub const KEYWORD_DIR: &str = "courierimapkeywords";

/// Complete lines of `data`; a last line without newline is dropped.
fn complete_lines(data: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let mut lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    lines.pop(); // empty after a final '\n', or an unterminated line
    lines.into_iter().enumerate().map(|(i, l)| (i + 1, l))
}

/// Reads `dir/courierimapuiddb` into a [`Uidlist`] (version 1, no GUID, records
/// sorted by UID); `None` if the file does not exist. A header that is not version
/// 1 with a nonzero UIDVALIDITY is an error; record lines Courier would skip are
/// skipped with a warning, and a repeated UID keeps its first line.
pub fn read_courier_uiddb(dir: &Path) -> Result<Option<Uidlist>, MaildirError> {
    let path = dir.join(UIDDB_NAME);
    let data = match fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(MaildirError::io("read", &path, e)),
    };
    parse_courier_uiddb(&path, &data).map(Some)
}

/// Parses `courierimapuiddb` bytes (see [`read_courier_uiddb`]); `path` is only
/// used in errors and warnings.
pub(crate) fn parse_courier_uiddb(path: &Path, data: &[u8]) -> Result<Uidlist, MaildirError> {
    let mut lines = complete_lines(data);
    let header = lines
        .next()
        .and_then(|(_, l)| std::str::from_utf8(l).ok())
        .ok_or_else(|| MaildirError::corrupt(path, 1, "missing or unreadable header"))?;
    let nums: Vec<Option<u32>> = header
        .split_ascii_whitespace()
        .take(3)
        .map(|t| t.parse().ok())
        .collect();
    let (uidvalidity, next_uid) = match nums.as_slice() {
        [Some(1), Some(v), Some(n)] if *v != 0 => (*v, *n),
        [Some(1), ..] => {
            return Err(MaildirError::corrupt(path, 1, "broken version 1 header"));
        }
        _ => {
            return Err(MaildirError::corrupt(
                path,
                1,
                "not a version 1 courierimapuiddb",
            ))
        }
    };
    let mut by_uid: BTreeMap<u32, String> = BTreeMap::new();
    for (lineno, raw) in lines {
        let parsed = std::str::from_utf8(raw).ok().and_then(|line| {
            let (uid, name) = line.split_once(' ')?;
            let uid: u32 = uid.parse().ok().filter(|u| *u != 0 && *u != u32::MAX)?;
            let name = base_of(name);
            (!name.is_empty() && !name.contains('/')).then(|| (uid, name.to_string()))
        });
        match parsed {
            Some((uid, name)) => {
                if let std::collections::btree_map::Entry::Vacant(v) = by_uid.entry(uid) {
                    v.insert(name);
                } else {
                    tracing::warn!(path = %path.display(), line = lineno, uid, "duplicate UID in courierimapuiddb; keeping the first");
                }
            }
            None => {
                tracing::warn!(path = %path.display(), line = lineno, "skipping unparsable courierimapuiddb line")
            }
        }
    }
    // Two UIDs naming one file: the higher one wins, as a dovecot-uidlist
    // keeps the later of two records for a base (found by fuzzing: the
    // migrated list kept both and read back without one).
    let mut newest: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    for (&uid, name) in &by_uid {
        if let Some(old) = newest.insert(name, uid) {
            tracing::warn!(path = %path.display(), base = %name, old_uid = old, new_uid = uid, "duplicate file in courierimapuiddb; keeping the later UID");
        }
    }
    let keep: std::collections::HashSet<u32> = newest.into_values().collect();
    by_uid.retain(|uid, _| keep.contains(uid));
    let last = by_uid.keys().next_back().copied().unwrap_or(0);
    Ok(Uidlist {
        version: 1,
        uidvalidity,
        next_uid: next_uid.max(last + 1).max(1),
        guid: None,
        header_extra: Vec::new(),
        records: by_uid
            .into_iter()
            .map(|(uid, name)| UidRecord::new(uid, name))
            .collect(),
    })
}

/// `(base file name, keyword names)` per message, as [`read_courier_keywords`] returns.
pub type CourierKeywords = Vec<(String, Vec<String>)>;

/// Keyword names, one per line, up to an empty line or the end.
fn name_lines(data: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for raw in data.split(|&b| b == b'\n') {
        if raw.is_empty() {
            break;
        }
        if let Ok(s) = std::str::from_utf8(raw) {
            out.push(s.to_string());
        }
    }
    out
}

fn dedup(names: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    names
        .into_iter()
        .filter(|n| seen.insert(n.clone()))
        .collect()
}

/// Reads Courier's keywords: `(base file name, keyword names)` for every message
/// with at least one keyword, sorted by base; `None` if `dir/courierimapkeywords/`
/// does not exist. Pending per-message update files override `:list`. Entries for
/// files that no longer exist are returned too; match them to files by base.
pub fn read_courier_keywords(dir: &Path) -> Result<Option<CourierKeywords>, MaildirError> {
    let kwdir = dir.join(KEYWORD_DIR);
    let rd = match fs::read_dir(&kwdir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(MaildirError::io("readdir", &kwdir, e)),
    };
    let mut map: HashMap<String, Vec<String>> = HashMap::new();
    let list_path = kwdir.join(":list");
    match fs::read(&list_path) {
        Ok(data) => {
            // Courier's rl_read also returns an unterminated last line.
            let mut lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
            if lines.last().is_some_and(|l| l.is_empty()) {
                lines.pop();
            }
            let split = lines
                .iter()
                .position(|l| l.is_empty())
                .unwrap_or(lines.len());
            // Lossy so that an odd name keeps the positions of those after it.
            let names: Vec<String> = lines[..split]
                .iter()
                .map(|l| String::from_utf8_lossy(l).into_owned())
                .collect();
            for (i, raw) in lines.iter().enumerate().skip(split + 1) {
                let lineno = i + 1;
                let Some((base, idx)) = std::str::from_utf8(raw)
                    .ok()
                    .and_then(|l| l.split_once(':'))
                else {
                    tracing::warn!(path = %list_path.display(), line = lineno, "skipping unparsable keyword line");
                    continue;
                };
                let mut kws = Vec::new();
                for tok in idx.split(' ').filter(|t| !t.is_empty()) {
                    match tok.parse::<usize>().ok().and_then(|n| names.get(n)) {
                        Some(name) => kws.push(name.clone()),
                        None => {
                            tracing::warn!(path = %list_path.display(), line = lineno, index = tok, "ignoring unknown keyword index")
                        }
                    }
                }
                map.insert(base.to_string(), kws);
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(MaildirError::io("read", &list_path, e)),
    }
    // Pending updates: per base, the plain file beats every numbered one, and among
    // numbered ones the highest number wins.
    let mut updates: HashMap<String, (u64, String)> = HashMap::new();
    for de in rd {
        let de = de.map_err(|e| MaildirError::io("readdir", &kwdir, e))?;
        let Ok(fname) = de.file_name().into_string() else {
            continue;
        };
        if fname.starts_with(':') || fname.starts_with(".tmp.") {
            continue;
        }
        let (rank, base) = match fname.strip_prefix('.') {
            Some(rest) => {
                let Some((n, base)) = rest.split_once('.') else {
                    continue;
                };
                match n.parse::<u64>() {
                    Ok(n) if n > 0 && !base.is_empty() => (n, base.to_string()),
                    _ => continue,
                }
            }
            None => (u64::MAX, fname.clone()),
        };
        let better = updates.get(&base).is_none_or(|(r, _)| rank > *r);
        if better {
            updates.insert(base, (rank, fname));
        }
    }
    for (base, (_, fname)) in updates {
        let p = kwdir.join(&fname);
        match fs::read(&p) {
            Ok(data) => {
                map.insert(base, name_lines(&data));
            }
            // Courier retries the whole read when this races with its own merge.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(MaildirError::io("read", &p, e)),
        }
    }
    let mut out: Vec<(String, Vec<String>)> = map
        .into_iter()
        .map(|(b, k)| (b, dedup(k)))
        .filter(|(_, k)| !k.is_empty())
        .collect();
    out.sort();
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_uiddb() {
        let d = tempfile::tempdir().unwrap();
        fs::write(
            d.path().join(UIDDB_NAME),
            "1 1234567 10\n3 1000.a.host\n1 999.b.host:2,S\nnonsense\n0 zero\n3 dup\n7 x.y.z\n8 cut",
        )
        .unwrap();
        let l = read_courier_uiddb(d.path()).unwrap().unwrap();
        assert_eq!((l.version, l.uidvalidity, l.next_uid), (1, 1234567, 10));
        let recs: Vec<(u32, &str)> = l
            .records
            .iter()
            .map(|r| (r.uid, r.file_name.as_str()))
            .collect();
        assert_eq!(
            recs,
            vec![(1, "999.b.host"), (3, "1000.a.host"), (7, "x.y.z")]
        );
        assert!(l.guid.is_none());
        l.validate(&d.path().join(UIDDB_NAME)).unwrap();
    }

    #[test]
    fn uiddb_next_uid_is_raised_and_bad_headers_fail() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(UIDDB_NAME);
        fs::write(&p, "1 5 2\n9 a\n").unwrap();
        assert_eq!(read_courier_uiddb(d.path()).unwrap().unwrap().next_uid, 10);
        for bad in ["", "2 5 2\n", "1 0 2\n", "1 x 2\n", "garbage\n", "1 5\n"] {
            fs::write(&p, bad).unwrap();
            let e = read_courier_uiddb(d.path()).unwrap_err();
            assert!(
                matches!(e, MaildirError::Corrupt { line: 1, .. }),
                "{bad:?}: {e}"
            );
        }
        fs::remove_file(&p).unwrap();
        assert!(read_courier_uiddb(d.path()).unwrap().is_none());
    }

    #[test]
    fn reads_keywords_list_and_updates() {
        let d = tempfile::tempdir().unwrap();
        assert!(read_courier_keywords(d.path()).unwrap().is_none());
        let kw = d.path().join(KEYWORD_DIR);
        fs::create_dir(&kw).unwrap();
        assert_eq!(read_courier_keywords(d.path()).unwrap().unwrap(), vec![]);
        fs::write(
            kw.join(":list"),
            "$Junk\nwork\nhome\n\n1000.a.host:0 2\n1001.b.host:1\nbroken line\n1002.c.host:9 1\n1003.d.host:0\n",
        )
        .unwrap();
        // Newest update for b replaces its list entry; for d a numbered update
        // empties it; the higher number wins over the lower; scratch files ignored.
        fs::write(kw.join("1001.b.host"), "home\n$Junk\nhome\n").unwrap();
        fs::write(kw.join(".5.1001.b.host"), "older\n").unwrap();
        fs::write(kw.join(".3.1003.d.host"), "stale\n").unwrap();
        fs::write(kw.join(".4.1003.d.host"), "").unwrap();
        fs::write(kw.join(".7.1004.e.host"), "new\n").unwrap();
        fs::write(kw.join(".tmp.123.x"), "ignored\n").unwrap();
        let got = read_courier_keywords(d.path()).unwrap().unwrap();
        let want: Vec<(String, Vec<String>)> = vec![
            ("1000.a.host".into(), vec!["$Junk".into(), "home".into()]),
            ("1001.b.host".into(), vec!["home".into(), "$Junk".into()]),
            ("1002.c.host".into(), vec!["work".into()]),
            ("1004.e.host".into(), vec!["new".into()]),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn keywords_without_message_section() {
        let d = tempfile::tempdir().unwrap();
        let kw = d.path().join(KEYWORD_DIR);
        fs::create_dir(&kw).unwrap();
        fs::write(kw.join(":list"), "$Junk\nwork\n").unwrap();
        assert_eq!(read_courier_keywords(d.path()).unwrap().unwrap(), vec![]);
        // A non-UTF-8 name keeps the index of the names after it; the last line
        // may lack its newline.
        fs::write(kw.join(":list"), b"\xff\xfe\nwork\n\nm1:1").unwrap();
        let got = read_courier_keywords(d.path()).unwrap().unwrap();
        assert_eq!(got, vec![("m1".to_string(), vec!["work".to_string()])]);
    }
}
