//! Operations on delivered files: flag renames, expunge, `tmp/` cleanup.

use std::fs;
use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::filename::MaildirName;
use crate::flags::{Flags, Keywords};
use crate::own_writes::Change;
use crate::scan::Sub;
use crate::MaildirError;

/// Age after which Dovecot deletes files left in `tmp/` (`MAILDIR_TMP_DELETE_SECS`,
/// 36 hours).
pub const TMP_DELETE_AGE: Duration = Duration::from_secs(36 * 60 * 60);

/// Result of [`rename_flags`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RenameOutcome {
    /// The file is now in `cur/` under this name.
    Renamed(String),
    /// The source file is gone: another process expunged or renamed it.
    Vanished,
}

/// Hard-links `src` to `dest`, failing with `AlreadyExists` if `dest` exists. Where
/// the filesystem has no hard links, falls back to a rename that does not replace
/// (`renameat2(RENAME_NOREPLACE)` on Linux). Returns true when `src` still exists
/// (it was linked, not renamed).
pub(crate) fn link_noreplace(src: &Path, dest: &Path) -> io::Result<bool> {
    match fs::hard_link(src, dest) {
        Ok(()) => Ok(true),
        Err(e) if crate::transfer::link_unsupported(&e) => {
            rename_noreplace(src, dest).map(|()| false)
        }
        Err(e) => Err(e),
    }
}

#[cfg(target_os = "linux")]
pub(crate) fn rename_noreplace(src: &Path, dest: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let to_c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))
    };
    let (s, d) = (to_c(src)?, to_c(dest)?);
    // SAFETY: both pointers are valid NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            s.as_ptr(),
            libc::AT_FDCWD,
            d.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::ENOSYS) => rename_checked(src, dest),
        _ => Err(e),
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn rename_noreplace(src: &Path, dest: &Path) -> io::Result<()> {
    rename_checked(src, dest)
}

/// Last resort: check, then rename (racy, but names are unique per host and pid).
fn rename_checked(src: &Path, dest: &Path) -> io::Result<()> {
    if fs::symlink_metadata(dest).is_ok() {
        return Err(io::Error::from(io::ErrorKind::AlreadyExists));
    }
    fs::rename(src, dest)
}

/// Rejects names that would escape the directory.
fn check_plain_name(file_name: &str) -> Result<(), MaildirError> {
    if file_name.is_empty() || file_name == "." || file_name == ".." || file_name.contains('/') {
        return Err(MaildirError::BadFileName {
            name: file_name.to_string(),
            reason: "not a plain file name",
        });
    }
    Ok(())
}

/// Gives a message new flags by renaming it to `cur/<base>:2,<flags>` (a file in
/// `new/` moves to `cur/`, as any Maildir reader does once it has seen it). Unknown
/// flag letters in the old name are kept. `Vanished` when the source no longer
/// exists (another tool expunged or renamed it). The directory is not fsynced: a
/// flag change lost in a crash is only a flag change (Dovecot does not fsync here
/// either).
pub fn rename_flags(
    mailbox: &Path,
    sub: Sub,
    file_name: &str,
    flags: Flags,
    keywords: Keywords,
) -> Result<RenameOutcome, MaildirError> {
    let name = MaildirName::parse(file_name)?;
    let new_name = name.with_flags(flags, keywords).file_name();
    let src = sub.path(mailbox).join(file_name);
    let exists = |src: &Path| match fs::symlink_metadata(src) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(MaildirError::io("stat", src, e)),
    };
    if sub == Sub::Cur && new_name == file_name {
        return Ok(if exists(&src)? {
            RenameOutcome::Renamed(new_name)
        } else {
            RenameOutcome::Vanished
        });
    }
    let dest = Sub::Cur.path(mailbox).join(&new_name);
    crate::own_writes::note(&src);
    crate::own_writes::note(&dest);
    match maildex_faults::hit(maildex_faults::Point::FlagRename)
        .and_then(|()| fs::rename(&src, &dest))
    {
        Ok(()) => {
            crate::own_writes::done(&src, Change::Gone);
            crate::own_writes::done(&dest, Change::Appeared);
            Ok(RenameOutcome::Renamed(new_name))
        }
        // ENOENT can also mean cur/ is missing: only a missing source is "vanished".
        Err(e) if e.kind() == io::ErrorKind::NotFound && !exists(&src)? => {
            Ok(RenameOutcome::Vanished)
        }
        Err(e) => Err(MaildirError::io("rename", &dest, e)),
    }
}

/// Removes a message file. Returns whether it existed.
pub fn remove(mailbox: &Path, sub: Sub, file_name: &str) -> Result<bool, MaildirError> {
    check_plain_name(file_name)?;
    let path = sub.path(mailbox).join(file_name);
    crate::own_writes::note(&path);
    match fs::remove_file(&path) {
        Ok(()) => {
            crate::own_writes::done(&path, Change::Gone);
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(MaildirError::io("unlink", &path, e)),
    }
}

/// Removes files in `mailbox/tmp/` whose mtime and ctime are both older than
/// `older_than` (Dovecot uses [`TMP_DELETE_AGE`]); ctime protects a file whose mtime
/// was just set into the past for its INTERNALDATE. Returns how many were removed.
pub fn clean_tmp(mailbox: &Path, older_than: Duration) -> Result<usize, MaildirError> {
    clean_tmp_where(mailbox, |_, age| age > older_than)
}

/// Removes what crashed writers left in `mailbox/tmp/`, never a file a live delivery is
/// writing. A file goes when either
/// - its mtime and ctime are older than [`TMP_DELETE_AGE`] (36 h, Dovecot's
///   `MAILDIR_TMP_DELETE_SECS` rule, for any writer), or
/// - its name is a unique name as maildex and Dovecot make them
///   (`<secs>.<...>P<pid><...>.<host>`, see [`crate::filename::unique_id`]) naming this
///   host and a pid that no longer exists (`kill(pid, 0)` gives ESRCH): the writer is
///   dead, so nobody will ever rename the file. The pid is part of the name from the
///   `O_EXCL` create on, so there is no window in which a live writer's file looks
///   abandoned (unlike a dotlock's content, which Dovecot trusts only after 2 s). A pid
///   reused by a newer process keeps the file until the 36 h rule.
///
/// Names that carry no pid (other tools) and files of other hosts (a Maildir on NFS) wait
/// for the 36 h rule. The rule assumes every writer on this host sees the same pid space
/// (no two containers with one hostname writing one Maildir).
pub fn clean_stale_tmp(mailbox: &Path) -> Result<usize, MaildirError> {
    let host = crate::util::escaped_hostname();
    clean_tmp_where(mailbox, |name, age| {
        age > TMP_DELETE_AGE
            || local_pid(name, host).is_some_and(|pid| !crate::util::process_exists(pid))
    })
}

/// The pid in a unique Maildir name `<secs>.<middle>.<host>[,...][:...]` whose host is
/// `host` and whose middle holds `P<digits>` (maildex and Dovecot: `M<usecs>P<pid>Q<n>`,
/// `M<usecs>P<pid>`, `P<pid>V<dev>I<ino>`); `None` for any other name.
pub(crate) fn local_pid(name: &str, host: &str) -> Option<i32> {
    let (secs, rest) = name.split_once('.')?;
    if secs.is_empty() || !secs.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (middle, rest) = rest.split_once('.')?;
    let name_host = rest.split(':').next()?;
    let name_host = name_host.strip_prefix(host)?;
    if !(name_host.is_empty() || name_host.starts_with(',')) {
        return None;
    }
    let at = middle.find('P')?;
    let digits: String = middle[at + 1..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse::<i32>().ok().filter(|p| *p > 0)
}

/// Removes the plain files of `mailbox/tmp/` for which `remove(name, age)` says so; `age`
/// counts from the newer of mtime and ctime.
fn clean_tmp_where(
    mailbox: &Path,
    remove: impl Fn(&str, Duration) -> bool,
) -> Result<usize, MaildirError> {
    use std::os::unix::fs::MetadataExt;
    let dir = mailbox.join("tmp");
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as i128;
    let ns = |secs: i64, nsec: i64| i128::from(secs) * 1_000_000_000 + i128::from(nsec);
    let rd = fs::read_dir(&dir).map_err(|e| MaildirError::io("readdir", &dir, e))?;
    let mut removed = 0;
    for de in rd {
        let de = de.map_err(|e| MaildirError::io("readdir", &dir, e))?;
        let path = de.path();
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(MaildirError::io("stat", &path, e)),
        };
        if meta.is_dir() {
            continue;
        }
        let newest = ns(meta.mtime(), meta.mtime_nsec()).max(ns(meta.ctime(), meta.ctime_nsec()));
        let age = Duration::from_nanos(u64::try_from(now - newest).unwrap_or(0));
        let name = de.file_name();
        if !remove(&name.to_string_lossy(), age) {
            continue;
        }
        match fs::remove_file(&path) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(MaildirError::io("unlink", &path, e)),
        }
    }
    Ok(removed)
}

#[cfg(test)]
pub(super) fn rename_noreplace_for_test(src: &Path, dest: &Path) -> io::Result<()> {
    rename_noreplace(src, dest)
}
