//! Opening the files of a Maildir without following what another user could plant there
//! (issue 15 #2): a message file is opened with `O_NOFOLLOW` and must be a regular file, so
//! a symbolic link in `cur/` to `/etc/passwd` (or a FIFO that would block the reader) is
//! refused, whoever the daemon runs as. And permission errors that say what to fix
//! (issue 15 #9): who we run as, and the owner and mode of what we may not use.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens the message file `path` for reading: `O_NOFOLLOW` (a symbolic link fails with
/// `ELOOP`), `O_NONBLOCK` (opening a FIFO does not wait for a writer), and then refuses
/// anything but a regular file. `NotFound` stays `NotFound`, so callers can still tell a
/// message that was renamed or expunged by another tool.
pub fn open_message(path: &Path) -> io::Result<File> {
    open_message_with_metadata(path).map(|(file, _)| file)
}

/// [`open_message`], with the metadata it read to check the file (so that a caller who
/// needs the size or mtime makes no second `fstat`).
pub fn open_message_with_metadata(path: &Path) -> io::Result<(File, std::fs::Metadata)> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => io::Error::new(
                io::ErrorKind::InvalidInput,
                "is a symbolic link; maildex does not follow links in a Maildir",
            ),
            _ => e,
        })?;
    let md = file.metadata()?;
    if !md.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "is not a regular file; maildex reads only regular message files",
        ));
    }
    Ok((file, md))
}

/// Whether `path` is a regular file, not following a symbolic link (`lstat`); `NotFound`
/// when it does not exist. Checked before a message file is hard-linked or copied.
pub fn ensure_regular(path: &Path) -> io::Result<()> {
    let m = std::fs::symlink_metadata(path)?;
    if m.is_file() {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "is not a regular file (a symbolic link?); maildex does not link or copy it",
        ))
    }
}

/// `e` with, when it is a permission error (`EACCES`, `EPERM`) on `path`, what Dovecot
/// says in that case appended to its text ([`permission_detail`]); other errors unchanged.
/// The kind stays `PermissionDenied`.
pub fn explain_denied(path: &Path, e: io::Error) -> io::Error {
    if e.kind() != io::ErrorKind::PermissionDenied {
        return e;
    }
    io::Error::new(e.kind(), format!("{e} {}", permission_detail(path)))
}

/// Who lacks which permission where, in Dovecot's style (`eacces_error_get`):
/// `(euid=112(vmail) lacks write permission on /var/vmail/a/cur, owned by 0(root)
/// mode=0700)`. The first folder on the way to `path` that the effective ids may not
/// search is named; else `path` itself when it exists and cannot be read or written; else
/// its folder when a file cannot be created in it. Checked with `faccessat(AT_EACCESS)`.
pub fn permission_detail(path: &Path) -> String {
    // SAFETY: geteuid cannot fail and has no side effects.
    let euid = unsafe { libc::geteuid() };
    let who = format!("euid={euid}({})", user_name(euid));
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    let mut ancestors: Vec<&Path> = parent
        .map(|p| {
            p.ancestors()
                .filter(|a| !a.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    ancestors.reverse();
    let lacking = ancestors
        .into_iter()
        .find(|d| !may(d, libc::X_OK))
        .map(|d| (d, "search (x)"))
        .or_else(|| match std::fs::symlink_metadata(path) {
            Ok(_) if !may(path, libc::R_OK) => Some((path, "read")),
            Ok(_) if !may(path, libc::W_OK) => Some((path, "write")),
            Ok(_) => None,
            Err(_) => parent.filter(|p| !may(p, libc::W_OK)).map(|p| (p, "write")),
        });
    let owned = |p: &Path| match std::fs::symlink_metadata(p) {
        Ok(m) => {
            use std::os::unix::fs::MetadataExt;
            format!(
                "owned by {}({}) mode={:04o}",
                m.uid(),
                user_name(m.uid()),
                m.mode() & 0o7777
            )
        }
        Err(e) => format!("cannot stat: {e}"),
    };
    match lacking {
        Some((p, what)) => format!(
            "({who} lacks {what} permission on {}, {})",
            p.display(),
            owned(p)
        ),
        None => format!("({who}; {} {})", path.display(), owned(path)),
    }
}

/// Whether the effective ids have `mode` (`R_OK`, `W_OK`, `X_OK`) on `path`.
fn may(path: &Path, mode: libc::c_int) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path that outlives the call; faccessat only reads it.
    unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), mode, libc::AT_EACCESS) == 0 }
}

/// The user name of `uid`, or `?` when it has none.
fn user_name(uid: u32) -> String {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: passwd is plain old data; getpwuid_r writes it and its strings into `buf`,
    // which outlives every use, and reports through `found`.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut found);
        if rc == 0 && !found.is_null() && !pw.pw_name.is_null() {
            return std::ffi::CStr::from_ptr(pw.pw_name)
                .to_string_lossy()
                .into_owned();
        }
    }
    "?".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_fifos_and_folders_are_refused_and_files_open() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("msg");
        std::fs::write(&file, b"Subject: x\n\nbody\n").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);

        assert!(open_message(&file).is_ok());
        ensure_regular(&file).unwrap();
        for bad in [&link, &fifo, &dir.path().to_path_buf()] {
            let e = open_message(bad).unwrap_err();
            assert_eq!(
                e.kind(),
                io::ErrorKind::InvalidInput,
                "{}: {e}",
                bad.display()
            );
            assert!(ensure_regular(bad).is_err(), "{}", bad.display());
        }
        // a permission error is explained; others are left as they are
        let e = explain_denied(&file, io::Error::from_raw_os_error(libc::EACCES));
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(e.to_string().contains("euid="), "{e}");
        assert!(e.to_string().contains("mode=0"), "{e}");
        let e = explain_denied(&file, io::Error::from_raw_os_error(libc::ENOSPC));
        assert!(!e.to_string().contains("euid="), "{e}");
        let gone = dir.path().join("gone");
        assert_eq!(
            open_message(&gone).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            ensure_regular(&gone).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }
}
