//! Small filesystem and host helpers shared by the modules.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::OnceLock;

use crate::MaildirError;

/// The host name as `gethostname(2)` gives it (Dovecot's `my_hostname`); "localhost"
/// when it cannot be read or is empty.
pub(crate) fn raw_hostname() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        let h = hostname::get()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default();
        if h.is_empty() {
            "localhost".to_string()
        } else {
            h
        }
    })
}

/// The host name made safe for a Maildir file name: the Maildir convention (also
/// Dovecot's and Courier's) replaces `/` with `\057` and `:` with `\072`.
pub(crate) fn escaped_hostname() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| escape_hostname(raw_hostname()))
}

pub(crate) fn escape_hostname(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        match c {
            '/' => out.push_str("\\057"),
            ':' => out.push_str("\\072"),
            // A newline would break the line-based control files.
            '\n' | '\r' | '\0' => out.push('_'),
            c => out.push(c),
        }
    }
    out
}

/// Permission bits for control files created in `dir`: Dovecot derives the file
/// creation mode from the mailbox directory's mode (without the execute bits), so a
/// group-shared Maildir stays shared. Falls back to 0600.
pub(crate) fn file_mode_for(dir: &Path) -> u32 {
    match fs::metadata(dir) {
        Ok(m) => {
            let mode = m.mode() & 0o666;
            if mode & 0o600 == 0o600 {
                mode
            } else {
                0o600
            }
        }
        Err(_) => 0o600,
    }
}

/// True unless `kill(pid, 0)` says no such process (ESRCH); a process we may not signal
/// (EPERM) exists.
pub(crate) fn process_exists(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for the process; no signal is sent.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Opens `path` for writing with `O_CREAT|O_EXCL` and the given mode.
pub(crate) fn create_excl(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
}

/// Creates the lock file `path` already holding `content`, failing with
/// `AlreadyExists` when it exists. The content is written to an unnamed `O_TMPFILE`
/// in the same directory and linked in under the lock's name, so no one ever sees
/// the lock empty: a writer killed between `open(O_EXCL)` and `write` (as Dovecot's
/// `dotlock_use_excl` can be) leaves an empty lock whose owner nobody can check,
/// and waiters then have to sit out the 120 s stale timeout. A kill before the link
/// leaves nothing behind: the unnamed file goes with the process. Where `O_TMPFILE`
/// or `/proc/self/fd` is missing (old kernels, some network filesystems) this falls
/// back to `O_EXCL` and a write.
pub(crate) fn create_lock_with(path: &Path, content: &[u8], mode: u32) -> io::Result<File> {
    match link_tmpfile(path, content, mode) {
        Ok(f) => Ok(f),
        Err(e) if tmpfile_unsupported(&e) => {
            let mut f = create_excl(path, mode)?;
            if f.write_all(content).is_err() {
                // As Dovecot's file_write_pid: a lock we hold is left empty, not lost.
                let _ = f.set_len(0);
            }
            Ok(f)
        }
        Err(e) => Err(e),
    }
}

fn link_tmpfile(path: &Path, content: &[u8], mode: u32) -> io::Result<File> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::AsRawFd;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(mode)
        .open(dir)?;
    f.write_all(content)?;
    let from = std::ffi::CString::new(format!("/proc/self/fd/{}", f.as_raw_fd()))
        .map_err(io::Error::other)?;
    let to = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in lock path"))?;
    // SAFETY: both arguments are valid NUL-terminated strings that outlive the call;
    // linkat only reads them. AT_SYMLINK_FOLLOW makes /proc/self/fd/N name the open
    // file itself, the documented way to give an O_TMPFILE file a name (open(2)).
    let rc = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(f)
}

/// Errors that mean "this system cannot make an unnamed file and link it", as
/// opposed to "the lock exists" or a real I/O failure.
fn tmpfile_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL | libc::ENOSYS)
    ) || (e.kind() == io::ErrorKind::NotFound && !Path::new("/proc/self/fd").exists())
}

/// fsyncs a directory so a rename or link into it survives a crash.
pub fn fsync_dir(dir: &Path) -> Result<(), MaildirError> {
    let f = File::open(dir).map_err(|e| MaildirError::io("open", dir, e))?;
    maildex_faults::hit(maildex_faults::Point::DirFsync)
        .map_err(|e| MaildirError::io("fsync", dir, e))?;
    f.sync_all().map_err(|e| MaildirError::io("fsync", dir, e))
}

/// Writes `data` to `tmp` (truncating), fdatasyncs it (when `durable`) and renames it over
/// `dest`.
pub(crate) fn write_replace(
    tmp: &Path,
    dest: &Path,
    data: &[u8],
    mode: u32,
    durable: bool,
) -> Result<(), MaildirError> {
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(tmp)
            .map_err(|e| MaildirError::io("open", tmp, e))?;
        f.write_all(data)
            .map_err(|e| MaildirError::io("write", tmp, e))?;
        if durable {
            f.sync_data()
                .map_err(|e| MaildirError::io("fdatasync", tmp, e))?;
        }
        fs::rename(tmp, dest).map_err(|e| MaildirError::io("rename", dest, e))
    })();
    if result.is_err() {
        let _ = fs::remove_file(tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostname_escaping_follows_maildir_convention() {
        assert_eq!(escape_hostname("a/b:c"), "a\\057b\\072c");
        assert_eq!(escape_hostname("mail.example.org"), "mail.example.org");
        assert_eq!(escape_hostname("x\ny"), "x_y");
        assert!(!escaped_hostname().contains('/'));
        assert!(!escaped_hostname().contains(':'));
        assert!(!raw_hostname().is_empty());
    }

    #[test]
    fn write_replace_replaces_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("f");
        let tmp = dir.path().join("f.tmp");
        fs::write(&dest, b"old").unwrap();
        write_replace(&tmp, &dest, b"new", 0o600, true).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"new");
        assert!(!tmp.exists());
        // A destination whose parent is a file fails, and the temp file is removed.
        let bad = dir.path().join("f").join("x");
        assert!(write_replace(&tmp, &bad, b"x", 0o600, true).is_err());
        assert!(!tmp.exists());
    }

    #[test]
    fn fsync_dir_reports_missing_dir() {
        let dir = tempfile::tempdir().unwrap();
        fsync_dir(dir.path()).unwrap();
        let e = fsync_dir(&dir.path().join("nope")).unwrap_err();
        assert!(e.is_not_found());
    }
}
