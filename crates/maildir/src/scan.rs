//! Reading a mailbox's `new/` and `cur/` directories.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::filename::{sort_cmp, MaildirName};
use crate::MaildirError;

/// Which message directory a file is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sub {
    /// `new/`: delivered, not yet seen by any client; names carry no info.
    New,
    /// `cur/`: names carry `:2,<flags>`.
    Cur,
}

impl Sub {
    /// The directory name, `"new"` or `"cur"`.
    pub fn dir_name(self) -> &'static str {
        match self {
            Sub::New => "new",
            Sub::Cur => "cur",
        }
    }

    /// `mailbox/new` or `mailbox/cur`.
    pub fn path(self, mailbox: &Path) -> PathBuf {
        mailbox.join(self.dir_name())
    }
}

/// A message file found by [`scan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The directory it was in.
    pub sub: Sub,
    /// The exact file name on disk.
    pub file_name: String,
    /// The parsed name.
    pub name: MaildirName,
}

/// What a directory looked like: if neither changes, no file was added, removed or
/// renamed in it (Dovecot's maildir sync decides from `new/` and `cur/` mtimes too).
/// Plain numbers so the index can store them as they are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DirStamp {
    /// Modification time in nanoseconds since the Unix epoch.
    pub mtime_ns: i128,
    /// Inode number (changes if the directory is replaced).
    pub ino: u64,
}

impl DirStamp {
    fn of(meta: &fs::Metadata) -> DirStamp {
        DirStamp {
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ino: meta.ino(),
        }
    }

    /// Whether the mtime is at least one second older than `now`. Directory mtimes
    /// come from a coarse clock, so a change right after a stat can leave the mtime
    /// unchanged; Dovecot keeps a mailbox "dirty" while its directory mtime is within
    /// the last second (`MAILDIR_SYNC_SECS`). A caller should not trust an equal
    /// stamp that was not settled when it was taken.
    pub fn is_settled(&self, now: SystemTime) -> bool {
        let now_ns = match now.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(e) => -(e.duration().as_nanos() as i128),
        };
        now_ns - self.mtime_ns >= Duration::from_secs(1).as_nanos() as i128
    }

    /// 24 bytes, big-endian: mtime_ns then ino.
    pub fn to_bytes(&self) -> [u8; 24] {
        let mut out = [0u8; 24];
        out[..16].copy_from_slice(&self.mtime_ns.to_be_bytes());
        out[16..].copy_from_slice(&self.ino.to_be_bytes());
        out
    }

    /// Inverse of [`DirStamp::to_bytes`].
    pub fn from_bytes(b: [u8; 24]) -> DirStamp {
        let mut m = [0u8; 16];
        let mut i = [0u8; 8];
        m.copy_from_slice(&b[..16]);
        i.copy_from_slice(&b[16..]);
        DirStamp {
            mtime_ns: i128::from_be_bytes(m),
            ino: u64::from_be_bytes(i),
        }
    }
}

/// The stamps of `new/` and `cur/`, by `stat` only (no readdir). A `.Folder`, `new/` or
/// `cur/` that is a symbolic link is not followed: it is reported as not found, so the
/// mailbox is treated as absent (issue 15 #2).
pub fn stamps(mailbox: &Path) -> Result<(DirStamp, DirStamp), MaildirError> {
    let link = |p: &Path| {
        MaildirError::io(
            "stat",
            p,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "is a symbolic link; maildex does not follow links in a Maildir",
            ),
        )
    };
    let is_folder = mailbox
        .file_name()
        .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."));
    if is_folder && fs::symlink_metadata(mailbox).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(link(mailbox));
    }
    let stat = |sub: Sub| {
        let p = sub.path(mailbox);
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => Err(link(&p)),
            Ok(m) => Ok(DirStamp::of(&m)),
            Err(e) => Err(MaildirError::io("stat", &p, e)),
        }
    };
    Ok((stat(Sub::New)?, stat(Sub::Cur)?))
}

/// The result of [`scan`].
#[derive(Clone, Debug, Default)]
pub struct Scan {
    /// Message files of `new/` then `cur/`, each group in Dovecot's delivery order
    /// ([`sort_cmp`]).
    pub entries: Vec<Entry>,
    /// Files that are not Maildir messages: non-UTF-8 names and names
    /// [`MaildirName::parse`] rejects (full paths).
    pub bad_names: Vec<PathBuf>,
    /// Stamp of `new/`, taken before reading it.
    pub new: DirStamp,
    /// Stamp of `cur/`, taken before reading it.
    pub cur: DirStamp,
}

/// Lists the message files of a mailbox. The stamps are taken before the directories
/// are read, so a change that happens during the scan shows as a changed stamp next
/// time. Dotfiles and subdirectories are skipped.
pub fn scan(mailbox: &Path) -> Result<Scan, MaildirError> {
    let mut out = scan_unsorted(mailbox)?;
    // new/'s entries come first; each group sorted on its own
    let in_new = out.entries.partition_point(|e| e.sub == Sub::New);
    let (new, cur) = out.entries.split_at_mut(in_new);
    new.sort_by(|a, b| sort_cmp(&a.file_name, &b.file_name));
    cur.sort_by(|a, b| sort_cmp(&a.file_name, &b.file_name));
    Ok(out)
}

/// [`scan`] without the sort: `new/`'s entries then `cur/`'s, each group in directory
/// order. For a caller that looks names up rather than numbering them (the sync of a
/// folder of 30,000 messages spent a fifth of its time in that sort).
pub fn scan_unsorted(mailbox: &Path) -> Result<Scan, MaildirError> {
    let (new, cur) = stamps(mailbox)?;
    let mut out = Scan {
        new,
        cur,
        ..Scan::default()
    };
    for sub in [Sub::New, Sub::Cur] {
        let dir = sub.path(mailbox);
        let rd = fs::read_dir(&dir).map_err(|e| MaildirError::io("readdir", &dir, e))?;
        for de in rd {
            let de = de.map_err(|e| MaildirError::io("readdir", &dir, e))?;
            let os_name = de.file_name();
            if os_name.as_encoded_bytes().first() == Some(&b'.') {
                continue;
            }
            // d_type when the filesystem gives it, lstat otherwise. A file that
            // vanished since readdir is simply skipped; so is a symbolic link, which is
            // never followed (issue 15 #2). Other files that are not regular (a FIFO) are
            // listed and refused when opened (`files::open_message`), as unreadable.
            match de.file_type() {
                Ok(t) if t.is_dir() => continue,
                Ok(t) if t.is_symlink() => {
                    tracing::warn!(file = %de.path().display(), "skipping a message file that is a symbolic link (not followed)");
                    continue;
                }
                Ok(_) => {}
                Err(_) => continue,
            }
            let Ok(file_name) = os_name.into_string() else {
                out.bad_names.push(de.path());
                continue;
            };
            match MaildirName::parse(&file_name) {
                Ok(name) => out.entries.push(Entry {
                    sub,
                    file_name,
                    name,
                }),
                Err(_) => out.bad_names.push(de.path()),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::folder::create_mailbox;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn scan_lists_messages_and_bad_names() {
        let tmp = tempfile::tempdir().unwrap();
        let mb = tmp.path();
        create_mailbox(mb, false).unwrap();
        fs::write(mb.join("new/1700000002.M1P1Q1.h,S=3,W=3"), b"abc").unwrap();
        fs::write(mb.join("cur/1700000001.M1P1Q1.h:2,S"), b"x").unwrap();
        fs::write(mb.join("cur/1700000000.M1P1Q1.h:2,"), b"x").unwrap();
        fs::write(mb.join("cur/.hidden"), b"x").unwrap();
        fs::write(mb.join("cur/weird:1,x"), b"x").unwrap();
        fs::create_dir(mb.join("cur/subdir")).unwrap();
        let raw = OsStr::from_bytes(b"bad\xffname");
        fs::write(mb.join("new").join(raw), b"x").unwrap();

        let s = scan(mb).unwrap();
        let names: Vec<(Sub, &str)> = s
            .entries
            .iter()
            .map(|e| (e.sub, e.file_name.as_str()))
            .collect();
        assert_eq!(
            names,
            vec![
                (Sub::New, "1700000002.M1P1Q1.h,S=3,W=3"),
                (Sub::Cur, "1700000000.M1P1Q1.h:2,"),
                (Sub::Cur, "1700000001.M1P1Q1.h:2,S"),
            ]
        );
        assert_eq!(s.entries[0].name.size, Some(3));
        let mut bad = s.bad_names.clone();
        bad.sort();
        assert_eq!(
            bad,
            vec![mb.join("cur/weird:1,x"), mb.join("new").join(raw)]
        );
        assert_eq!((s.new, s.cur), stamps(mb).unwrap());
    }

    #[test]
    fn stamps_change_when_a_file_is_added() {
        let tmp = tempfile::tempdir().unwrap();
        let mb = tmp.path();
        create_mailbox(mb, false).unwrap();
        let (n1, c1) = stamps(mb).unwrap();
        // Force a distinct mtime even on coarse clocks.
        std::thread::sleep(Duration::from_millis(20));
        fs::write(mb.join("new/x"), b"1").unwrap();
        let (n2, c2) = stamps(mb).unwrap();
        assert_ne!(n1, n2);
        assert_eq!(c1, c2);
        assert_eq!(DirStamp::from_bytes(n2.to_bytes()), n2);
    }

    #[test]
    fn settled_needs_a_second() {
        let s = DirStamp {
            mtime_ns: 10_000_000_000,
            ino: 1,
        };
        assert!(!s.is_settled(UNIX_EPOCH + Duration::from_millis(10_500)));
        assert!(s.is_settled(UNIX_EPOCH + Duration::from_millis(11_000)));
        assert!(!s.is_settled(UNIX_EPOCH));
    }

    #[test]
    fn missing_dirs_are_errors_naming_the_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let e = scan(tmp.path()).unwrap_err();
        assert!(e.is_not_found());
        assert_eq!(e.path(), tmp.path().join("new"));
    }
}
