//! Delivering messages: stream into `tmp/`, fsync, link into `new/` or `cur/` under a
//! unique name, fsync the directory (the qmail delivery protocol as Dovecot does it).
//! Also flag renames, expunges and `tmp/` cleanup.

mod link;
pub(crate) mod ops;

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use maildex_faults::Point;

use crate::filename::{unique_id, MaildirName};
use crate::flags::{Flags, Keywords};
use crate::scan::Sub;
use crate::util::create_excl;
use crate::MaildirError;

pub use crate::util::fsync_dir;
pub use link::{link_unique, LinkInto, LinkSource};
pub use ops::{clean_stale_tmp, clean_tmp, remove, rename_flags, RenameOutcome, TMP_DELETE_AGE};
pub(crate) use ops::{link_noreplace, rename_noreplace};

/// How many unique names we try before giving up (a collision needs another writer
/// with our pid, host, time and counter: in practice only a clock jump).
pub(crate) const NAME_ATTEMPTS: u32 = 10;

/// Buffer between callers' small writes and the file.
const BUF_SIZE: usize = 64 * 1024;

/// A message being written into `tmp/`. Writing counts the physical size and the
/// CRLF size (a LF not preceded by CR counts two, also across `write` calls).
/// Dropping it without [`TmpFile::commit`] removes the file.
#[derive(Debug)]
pub struct TmpFile {
    mailbox: PathBuf,
    id: String,
    path: PathBuf,
    out: Option<BufWriter<File>>,
    size: u64,
    vsize: u64,
    prev: u8,
    dirty: bool,
    mtime: Option<SystemTime>,
    done: bool,
    durable: bool,
}

/// A committed delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivered {
    /// Full path of the message file.
    pub path: PathBuf,
    /// Its file name in `new/` or `cur/`.
    pub file_name: String,
    /// The parsed name (base with `,S=` and `,W=`).
    pub name: MaildirName,
    /// Bytes in the file.
    pub size: u64,
    /// Size with CRLF line ends (RFC822.SIZE).
    pub vsize: u64,
}

impl TmpFile {
    /// Creates `mailbox/tmp/<unique>` with `O_CREAT|O_EXCL`, mode 0600.
    pub fn create(mailbox: &Path) -> Result<TmpFile, MaildirError> {
        let tmp = mailbox.join("tmp");
        for _ in 0..NAME_ATTEMPTS {
            let id = unique_id();
            let path = tmp.join(&id);
            match create_excl(&path, 0o600) {
                Ok(f) => {
                    return Ok(TmpFile {
                        mailbox: mailbox.to_path_buf(),
                        id,
                        path,
                        out: Some(BufWriter::with_capacity(BUF_SIZE, f)),
                        size: 0,
                        vsize: 0,
                        prev: 0,
                        // A new file has never been fsynced.
                        dirty: true,
                        mtime: None,
                        done: false,
                        durable: true,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(MaildirError::io("create", &path, e)),
            }
        }
        Err(MaildirError::NameCollision {
            path: tmp,
            attempts: NAME_ATTEMPTS,
        })
    }

    /// The file's path in `tmp/`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes written so far, counting each bare LF as CRLF.
    pub fn vsize(&self) -> u64 {
        self.vsize
    }

    /// Sets the modification time the delivered file will have (IMAP INTERNALDATE,
    /// RFC 3501 §2.3.3, which Dovecot reads from the file's mtime). Applied when
    /// syncing, after the last write.
    pub fn set_mtime(&mut self, mtime: SystemTime) {
        self.mtime = Some(mtime);
        self.dirty = true;
    }

    fn out(&mut self) -> Result<&mut BufWriter<File>, MaildirError> {
        let path = &self.path;
        self.out.as_mut().ok_or_else(|| {
            MaildirError::io(
                "write",
                path,
                io::Error::other("temporary file already closed"),
            )
        })
    }

    /// Whether [`TmpFile::sync`] and [`TmpFile::commit`] fsync the file and the folder
    /// (default true). Off only where a crash may lose mail: tests and benchmarks.
    pub fn set_durable(&mut self, durable: bool) {
        self.durable = durable;
    }

    /// Flushes buffered bytes, applies the mtime, and fsyncs the file (when durable).
    pub fn sync(&mut self) -> Result<(), MaildirError> {
        let path = self.path.clone();
        let (mtime, durable) = (self.mtime, self.durable);
        let out = self.out()?;
        maildex_faults::hit(Point::TmpWrite).map_err(|e| MaildirError::io("write", &path, e))?;
        out.flush()
            .map_err(|e| MaildirError::io("write", &path, e))?;
        let f = out.get_ref();
        if let Some(t) = mtime {
            f.set_modified(t)
                .map_err(|e| MaildirError::io("set mtime", &path, e))?;
        }
        if durable {
            maildex_faults::hit(Point::TmpFsync)
                .map_err(|e| MaildirError::io("fsync", &path, e))?;
            f.sync_all()
                .map_err(|e| MaildirError::io("fsync", &path, e))?;
        }
        self.dirty = false;
        Ok(())
    }

    /// Moves the file into `new/` (no flags allowed) or `cur/` (with `:2,<flags>`)
    /// under `unique_base(size, vsize)` keeping its `tmp/` unique part, never
    /// overwriting ([`link_unique`]). Syncs the file first if needed and fsyncs the
    /// destination directory after (when durable).
    pub fn commit(
        mut self,
        sub: Sub,
        flags: Flags,
        keywords: Keywords,
    ) -> Result<Delivered, MaildirError> {
        if self.dirty {
            self.sync()?;
        }
        // Close before linking; the data is on disk.
        self.out = None;
        let to = LinkInto {
            mailbox: &self.mailbox,
            sub,
            flags,
            keywords,
            sizes: (self.size, self.vsize),
            first_id: Some(self.id.clone()),
            fault: Point::Link,
            fsync: self.durable,
            source: LinkSource::Consume,
        };
        let delivered = link_unique(&self.path, to)?;
        self.done = true;
        Ok(delivered)
    }

    fn count(&mut self, data: &[u8]) {
        let Some(&last) = data.last() else {
            return;
        };
        let n = data.len() as u64;
        self.size += n;
        self.vsize += n + bare_lfs(self.prev, data);
        self.prev = last;
    }
}

/// LFs in `data` not preceded by CR, `prev` being the byte before `data` (0 at the start).
/// Jumps from LF to LF with memchr: a delivery counts every byte it writes, and the plain
/// byte loop was 2% of the LMTP server's CPU.
pub(crate) fn bare_lfs(prev: u8, data: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', data)
        .filter(|&i| {
            let before = if i == 0 { prev } else { data[i - 1] };
            before != b'\r'
        })
        .count() as u64
}

/// Removes a file that a failed step made visible, so that a retry cannot duplicate it.
pub fn unlink_after_failure(path: &Path) {
    if let Err(e) = fs::remove_file(path) {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::error!(path = %path.display(), error = %e, "could not remove a message whose delivery failed");
        }
    }
}

impl Write for TmpFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let out = self
            .out
            .as_mut()
            .ok_or_else(|| io::Error::other("temporary file already closed"))?;
        let n = out.write(buf)?;
        self.count(&buf[..n]);
        if n > 0 {
            self.dirty = true;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.out.as_mut() {
            Some(out) => out.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for TmpFile {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.out = None;
        match fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "could not remove abandoned temporary file")
            }
        }
    }
}

#[cfg(test)]
mod tests;
