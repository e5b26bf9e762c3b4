//! `dovecot-keywords`: the map from keyword letters `a`..`z` to IMAP keyword names.
//!
//! Format (maildir-keywords.c): lines `<index> <name>`, index 0 for `a` up to 25 for
//! `z` (`MAILDIR_MAX_KEYWORDS`). Names are looked up case-insensitively (Dovecot's
//! hash uses `strcasecmp`). The file is never edited in place: it is written as
//! `dovecot-keywords.lock` and renamed over, while the writer holds the uidlist lock.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use crate::flags::Keywords;
use crate::util::{create_excl, file_mode_for, fsync_dir};
use crate::MaildirError;

/// The file name in each mailbox directory.
pub const KEYWORDS_NAME: &str = "dovecot-keywords";
const LOCK_NAME: &str = "dovecot-keywords.lock";

/// Keyword names by letter index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeywordMap {
    names: Vec<Option<String>>,
}

/// Whether a name can be stored in the line-based file (IMAP keywords are atoms,
/// RFC 3501 §9 `flag-keyword`, so no spaces or controls anyway).
fn storable(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c.is_whitespace() || c.is_control())
}

impl KeywordMap {
    /// An empty map.
    pub fn new() -> KeywordMap {
        KeywordMap::default()
    }

    /// Reads `dir/dovecot-keywords`. A missing file is an empty map; lines that do not
    /// parse are skipped with a warning naming the file and line.
    pub fn read(dir: &Path) -> Result<KeywordMap, MaildirError> {
        let path = dir.join(KEYWORDS_NAME);
        let data = match fs::read(&path) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(KeywordMap::new()),
            Err(e) => return Err(MaildirError::io("read", &path, e)),
        };
        Ok(KeywordMap::parse(&path, &data))
    }

    /// Parses `dovecot-keywords` bytes; `path` is only used in warnings.
    pub(crate) fn parse(path: &Path, data: &[u8]) -> KeywordMap {
        let mut map = KeywordMap::new();
        for (i, raw) in data.split(|&b| b == b'\n').enumerate() {
            if raw.is_empty() {
                continue;
            }
            let parsed = std::str::from_utf8(raw).ok().and_then(|line| {
                let (idx, name) = line.split_once(' ')?;
                let idx: u8 = idx.parse().ok().filter(|i| *i < Keywords::MAX)?;
                (!name.is_empty()).then(|| (idx, name.to_string()))
            });
            match parsed {
                Some((idx, name)) => map.set(idx, name),
                None => {
                    tracing::warn!(path = %path.display(), line = i + 1, "skipping corrupt dovecot-keywords line")
                }
            }
        }
        map
    }

    fn set(&mut self, idx: u8, name: String) {
        let i = usize::from(idx);
        if self.names.len() <= i {
            self.names.resize(i + 1, None);
        }
        self.names[i] = Some(name);
    }

    /// The letter (`b'a'`..=`b'z'`) of a keyword, matched without regard to ASCII case.
    pub fn letter_of(&self, name: &str) -> Option<u8> {
        self.names
            .iter()
            .position(|n| n.as_deref().is_some_and(|n| n.eq_ignore_ascii_case(name)))
            .map(|i| b'a' + i as u8)
    }

    /// The keyword a letter stands for.
    pub fn name_of(&self, letter: u8) -> Option<&str> {
        let i = usize::from(Keywords::index_of_letter(letter)?);
        self.names.get(i)?.as_deref()
    }

    /// The letter of `name`, giving it the first free letter if it has none. None
    /// when all 26 letters are taken or the name cannot be stored (empty, or with
    /// whitespace or control characters).
    pub fn get_or_add(&mut self, name: &str) -> Option<u8> {
        if let Some(l) = self.letter_of(name) {
            return Some(l);
        }
        if !storable(name) {
            return None;
        }
        let free = match self.names.iter().position(Option::is_none) {
            Some(i) => i,
            None if self.names.len() < usize::from(Keywords::MAX) => self.names.len(),
            None => return None,
        };
        self.set(free as u8, name.to_string());
        Some(b'a' + free as u8)
    }

    /// (letter, name) pairs in letter order.
    pub fn iter(&self) -> impl Iterator<Item = (u8, &str)> {
        self.names
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_deref().map(|n| (b'a' + i as u8, n)))
    }

    /// Number of assigned letters.
    pub fn len(&self) -> usize {
        self.names.iter().flatten().count()
    }

    /// True when no letter is assigned.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The file contents: `<index> <name>` lines in letter order; an error
    /// naming `path` for a name that cannot be stored.
    pub(crate) fn to_bytes(&self, path: &Path) -> Result<Vec<u8>, MaildirError> {
        let mut content = String::new();
        for (letter, name) in self.iter() {
            if !storable(name) {
                return Err(MaildirError::InvalidRecords {
                    path: path.to_path_buf(),
                    reason: format!("keyword {name:?} cannot be stored"),
                });
            }
            content.push_str(&format!("{} {name}\n", letter - b'a'));
        }
        Ok(content.into_bytes())
    }

    /// Writes `dir/dovecot-keywords` as Dovecot does (`maildir_keywords_commit`):
    /// remove a leftover `dovecot-keywords.lock`, create it with `O_EXCL`, write,
    /// make sure the mtime grows (readers cache by mtime), fsync, rename over the
    /// file. The caller must hold the uidlist lock ([`crate::UidlistLock`]): Dovecot
    /// relies on it instead of locking this file.
    pub fn write(&self, dir: &Path) -> Result<(), MaildirError> {
        let path = dir.join(KEYWORDS_NAME);
        let lock = dir.join(LOCK_NAME);
        let content = self.to_bytes(&path)?;
        let old_mtime = fs::metadata(&path).ok().map(|m| m.mtime());
        match fs::remove_file(&lock) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(MaildirError::io("unlink", &lock, e)),
        }
        let result = (|| {
            let mut f: File = create_excl(&lock, file_mode_for(dir))
                .map_err(|e| MaildirError::io("create", &lock, e))?;
            f.write_all(&content)
                .map_err(|e| MaildirError::io("write", &lock, e))?;
            let m = f
                .metadata()
                .map_err(|e| MaildirError::io("fstat", &lock, e))?;
            if let Some(old) = old_mtime {
                if m.mtime() <= old {
                    let t = UNIX_EPOCH + Duration::from_secs((old + 1).max(0) as u64);
                    f.set_modified(t)
                        .map_err(|e| MaildirError::io("utime", &lock, e))?;
                }
            }
            f.sync_all()
                .map_err(|e| MaildirError::io("fsync", &lock, e))?;
            fs::rename(&lock, &path).map_err(|e| MaildirError::io("rename", &path, e))
        })();
        if result.is_err() {
            let _ = fs::remove_file(&lock);
        }
        result?;
        fsync_dir(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mtime_secs(path: &Path) -> Option<i64> {
        fs::metadata(path).ok().map(|m| m.mtime())
    }

    #[test]
    fn read_parses_and_skips_corrupt_lines() {
        let d = tempfile::tempdir().unwrap();
        fs::write(
            d.path().join(KEYWORDS_NAME),
            b"0 $Junk\n1 $NonJunk\nnonsense\n30 TooHigh\n-1 Neg\n3 \n\xff\xfe\n4 $Label1\n",
        )
        .unwrap();
        let m = KeywordMap::read(d.path()).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m.name_of(b'a'), Some("$Junk"));
        assert_eq!(m.name_of(b'b'), Some("$NonJunk"));
        assert_eq!(m.name_of(b'c'), None);
        assert_eq!(m.name_of(b'e'), Some("$Label1"));
        assert_eq!(m.name_of(b'A'), None);
        assert_eq!(
            m.letter_of("$junk"),
            Some(b'a'),
            "case-insensitive like Dovecot"
        );
        assert_eq!(m.letter_of("nope"), None);
    }

    #[test]
    fn missing_file_is_empty() {
        let d = tempfile::tempdir().unwrap();
        assert!(KeywordMap::read(d.path()).unwrap().is_empty());
    }

    #[test]
    fn get_or_add_fills_gaps_then_runs_out() {
        let mut m = KeywordMap::new();
        m.set(1, "b".into());
        assert_eq!(m.get_or_add("first"), Some(b'a'));
        assert_eq!(m.get_or_add("B"), Some(b'b'));
        assert_eq!(m.get_or_add("third"), Some(b'c'));
        assert_eq!(m.get_or_add("has space"), None);
        assert_eq!(m.get_or_add(""), None);
        for i in 3..26 {
            assert_eq!(m.get_or_add(&format!("k{i}")), Some(b'a' + i as u8));
        }
        assert_eq!(m.len(), 26);
        assert_eq!(m.get_or_add("one-too-many"), None);
        assert_eq!(m.get_or_add("k25"), Some(b'z'));
    }

    #[test]
    fn write_round_trips_and_mtime_grows() {
        let d = tempfile::tempdir().unwrap();
        let mut m = KeywordMap::new();
        m.get_or_add("$Junk");
        m.get_or_add("$Label1");
        m.write(d.path()).unwrap();
        let path = d.path().join(KEYWORDS_NAME);
        assert_eq!(fs::read_to_string(&path).unwrap(), "0 $Junk\n1 $Label1\n");
        assert!(!d.path().join(LOCK_NAME).exists());
        let t1 = mtime_secs(&path).unwrap();
        m.get_or_add("$Label2");
        // A stale lock left by a crash does not block the write.
        fs::write(d.path().join(LOCK_NAME), b"junk").unwrap();
        m.write(d.path()).unwrap();
        assert!(mtime_secs(&path).unwrap() > t1);
        assert_eq!(KeywordMap::read(d.path()).unwrap(), m);
    }

    #[test]
    fn write_into_missing_dir_fails_cleanly() {
        let d = tempfile::tempdir().unwrap();
        let e = KeywordMap::new().write(&d.path().join("nope")).unwrap_err();
        assert!(e.is_not_found(), "{e}");
    }
}
