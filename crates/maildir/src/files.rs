//! Opening the files of a Maildir without following what another user could plant there
//! (issue 15 #2): a message file is opened with `O_NOFOLLOW` and must be a regular file, so
//! a symbolic link in `cur/` to `/etc/passwd` (or a FIFO that would block the reader) is
//! refused, whoever the daemon runs as.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens the message file `path` for reading: `O_NOFOLLOW` (a symbolic link fails with
/// `ELOOP`), `O_NONBLOCK` (opening a FIFO does not wait for a writer), and then refuses
/// anything but a regular file. `NotFound` stays `NotFound`, so callers can still tell a
/// message that was renamed or expunged by another tool.
pub fn open_message(path: &Path) -> io::Result<File> {
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
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "is not a regular file; maildex reads only regular message files",
        ));
    }
    Ok(file)
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
