//! Editing the users file safely while the daemon reads it.
//!
//! Every edit: take an exclusive `flock(2)` on the side file `PATH.lock`, read the
//! current file fresh, build the whole new content, write it to a temporary file in
//! the same directory (same mode and owner as the old file, 0600 for a new one),
//! fsync it, `rename(2)` it over `PATH`, fsync the directory, release the lock.
//!
//! Readers never lock: rename is atomic, so they see either the old or the new file,
//! never a partial one. The lock lives on a separate file rather than on `PATH`
//! itself because `PATH` is replaced by every edit (a lock on the old inode would not
//! exclude the next writer). `flock` locks vanish when the holder dies, so there is
//! no stale-lock cleanup; the `.lock` file is left in place on purpose and must not be
//! deleted by hand while an edit runs. If `PATH` is a symlink, its target is edited
//! (and locked) so the link survives.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::RngCore;

use crate::file::{fold, parse_document, read_file, Document};
use crate::hash::PasswordHash;
use crate::name::validate_name;
use crate::AuthError;

/// How long an edit waits for another editor before giving up.
const LOCK_TIMEOUT: Duration = Duration::from_secs(10);
const LOCK_POLL: Duration = Duration::from_millis(20);

/// Mode of a users file created by [`add_user`]: it holds password hashes.
const NEW_FILE_MODE: u32 = 0o600;

/// Adds `name` with password `hash` at the end of the users file, creating the file
/// (mode 0600) if it does not exist.
///
/// Fails with [`AuthError::UserExists`] if the name is already present (compared
/// case-insensitively, since lookups are), and with [`AuthError::InvalidName`] /
/// [`AuthError::InvalidHash`] if the name or hash cannot be stored.
pub fn add_user(path: &Path, name: &str, hash: &PasswordHash) -> Result<(), AuthError> {
    validate_name(name)?;
    let field = hash_field(hash)?;
    edit(path, true, |doc| {
        if find(doc, name).is_some() {
            return Err(AuthError::UserExists {
                path: path.to_owned(),
                name: name.to_owned(),
            });
        }
        if let Some(last) = doc.lines.last_mut() {
            last.newline = true;
        }
        let mut bytes = Vec::with_capacity(name.len() + 1 + field.len());
        bytes.extend_from_slice(name.as_bytes());
        bytes.push(b':');
        bytes.extend_from_slice(field.as_bytes());
        doc.lines.push(crate::file::RawLine {
            bytes,
            newline: true,
            entry: None,
        });
        Ok(())
    })
}

/// Replaces the password field of `name`, keeping every other byte of its line.
/// Fails with [`AuthError::NoSuchUser`] if the name is absent (case-insensitive).
pub fn set_password(path: &Path, name: &str, hash: &PasswordHash) -> Result<(), AuthError> {
    validate_name(name)?;
    let field = hash_field(hash)?;
    edit(path, false, |doc| {
        let i = find(doc, name).ok_or_else(|| AuthError::NoSuchUser {
            path: path.to_owned(),
            name: name.to_owned(),
        })?;
        let line = &mut doc.lines[i].bytes;
        // Field 1 runs from the first ':' to the next ':' (or the line end, keeping a '\r').
        let end = if line.ends_with(b"\r") {
            line.len() - 1
        } else {
            line.len()
        };
        let new = match line[..end].iter().position(|&b| b == b':') {
            None => {
                let mut v = line[..end].to_vec();
                v.push(b':');
                v.extend_from_slice(field.as_bytes());
                v.extend_from_slice(&line[end..]);
                v
            }
            Some(start) => {
                let stop = line[start + 1..end]
                    .iter()
                    .position(|&b| b == b':')
                    .map_or(end, |p| start + 1 + p);
                let mut v = line[..=start].to_vec();
                v.extend_from_slice(field.as_bytes());
                v.extend_from_slice(&line[stop..]);
                v
            }
        };
        *line = new;
        Ok(())
    })
}

/// Removes the line of `name`. Fails with [`AuthError::NoSuchUser`] if absent.
pub fn remove_user(path: &Path, name: &str) -> Result<(), AuthError> {
    validate_name(name)?;
    edit(path, false, |doc| {
        let i = find(doc, name).ok_or_else(|| AuthError::NoSuchUser {
            path: path.to_owned(),
            name: name.to_owned(),
        })?;
        doc.lines.remove(i);
        Ok(())
    })
}

/// Index into `doc.lines` of the user line for `name`.
fn find(doc: &Document, name: &str) -> Option<usize> {
    let key = fold(name);
    doc.lines
        .iter()
        .position(|l| l.entry.is_some_and(|e| fold(&doc.entries[e].name) == key))
}

/// The password field text, checked to fit in one passwd-file field.
fn hash_field(hash: &PasswordHash) -> Result<String, AuthError> {
    let field = hash.to_string();
    if hash.data.is_empty() {
        return Err(AuthError::InvalidHash("empty password data"));
    }
    if field.contains(':') {
        return Err(AuthError::InvalidHash("':' separates passwd-file fields"));
    }
    if field.chars().any(|c| c.is_control()) {
        return Err(AuthError::InvalidHash("control characters are not allowed"));
    }
    if hash.scheme.is_empty() || hash.scheme.contains('}') {
        return Err(AuthError::InvalidHash("scheme must be a non-empty name"));
    }
    Ok(field)
}

/// Runs one locked read-modify-replace cycle.
fn edit(
    path: &Path,
    create: bool,
    change: impl FnOnce(&mut Document) -> Result<(), AuthError>,
) -> Result<(), AuthError> {
    // Replacing a symlink would turn it into a plain file: edit what it points to.
    let target;
    let path = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            target = std::fs::canonicalize(path)
                .map_err(|e| AuthError::io("resolve symlink", path, e))?;
            target.as_path()
        }
        _ => path,
    };
    let _lock = EditLock::acquire(path)?;
    let (doc, meta) = match read_file(path)? {
        Some((bytes, meta)) => (parse_document(path, &bytes)?, Some(meta)),
        None if create => (Document::default(), None),
        None => return Err(AuthError::NotFound(path.to_owned())),
    };
    let mut doc = doc;
    change(&mut doc)?;
    let mut out = Vec::new();
    for line in &doc.lines {
        out.extend_from_slice(&line.bytes);
        if line.newline {
            out.push(b'\n');
        }
    }
    replace_file(path, &out, meta.as_ref())
}

/// Writes `content` to a temporary file next to `path` and renames it over `path`.
fn replace_file(
    path: &Path,
    content: &[u8],
    old: Option<&std::fs::Metadata>,
) -> Result<(), AuthError> {
    let dir = parent_dir(path);
    let file_name = path.file_name().ok_or_else(|| {
        AuthError::io(
            "write",
            path,
            std::io::Error::other("path has no file name"),
        )
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(
        ".tmp.{}.{:016x}",
        std::process::id(),
        rand::rngs::OsRng.next_u64()
    ));
    let tmp = TempFile(dir.join(tmp_name));

    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(NEW_FILE_MODE)
        .open(&tmp.0)
        .map_err(|e| AuthError::io("create", &tmp.0, e))?;
    // Keep the old file's mode and owner: the daemon may run as another user than the
    // admin editing the file, and must still be able to read the new file.
    let mode = old.map_or(NEW_FILE_MODE, |m| m.mode() & 0o7777);
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(|e| AuthError::io("chmod", &tmp.0, e))?;
    if let Some(old) = old {
        let mine = file
            .metadata()
            .map_err(|e| AuthError::io("stat", &tmp.0, e))?;
        if mine.uid() != old.uid() || mine.gid() != old.gid() {
            std::os::unix::fs::fchown(&file, Some(old.uid()), Some(old.gid()))
                .map_err(|e| AuthError::io("chown (to keep the old owner)", &tmp.0, e))?;
        }
    }
    file.write_all(content)
        .map_err(|e| AuthError::io("write", &tmp.0, e))?;
    file.sync_all()
        .map_err(|e| AuthError::io("fsync", &tmp.0, e))?;
    drop(file);
    std::fs::rename(&tmp.0, path).map_err(|e| AuthError::io("rename", path, e))?;
    tmp.disarm();
    File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| AuthError::io("fsync directory", &dir, e))
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// Removes the temporary file on early return.
struct TempFile(PathBuf);

impl TempFile {
    fn disarm(self) {
        std::mem::forget(self);
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// An exclusive `flock` on `PATH.lock`, released on drop (closing the fd).
struct EditLock {
    _file: File,
}

impl EditLock {
    fn acquire(path: &Path) -> Result<EditLock, AuthError> {
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(".lock");
        let lock_path = PathBuf::from(lock_path);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(NEW_FILE_MODE)
            .open(&lock_path)
            .map_err(|e| AuthError::io("open lock file", &lock_path, e))?;
        let deadline = Instant::now() + LOCK_TIMEOUT;
        loop {
            // SAFETY: flock only reads the descriptor number; `file` keeps it open.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                return Ok(EditLock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EWOULDBLOCK) | Some(libc::EINTR) => {}
                _ => return Err(AuthError::io("flock", &lock_path, err)),
            }
            if Instant::now() >= deadline {
                return Err(AuthError::LockTimeout { path: lock_path });
            }
            std::thread::sleep(LOCK_POLL);
        }
    }
}
