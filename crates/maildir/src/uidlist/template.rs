//! One file per process that every `dovecot-uidlist.lock` it takes is a hard link to,
//! instead of a new file per lock.
//!
//! Why: a dotlock made the usual way (Dovecot's `O_EXCL` create, or our unnamed file
//! linked in, `util::create_lock_with`) allocates an inode, and its release frees one.
//! Every delivery takes the uidlist lock, so a busy LMTP server churns one inode per
//! message. On ext4 without a journal the allocator skips inodes freed in the last
//! minutes (`recently_deleted`, which reads the inode table for each), so each freed
//! lock makes the next allocations in its block group slower: in the LMTP benchmark
//! (10,000 messages to 1,000 users) inode allocation was 47% of the server's CPU. A link
//! allocates nothing. To Dovecot the lock is the same: a file named
//! `dovecot-uidlist.lock` holding `<pid>:<host>` of a live process; it only reads it.
//!
//! The template is `uidlist-lock.<unique name>` in a folder the owner names (the user's
//! index folder): created at the first lock, removed when the [`LockTemplate`] is dropped,
//! and a dead process's file by [`LockTemplate::clean_stale`] (the unique name carries the
//! pid, as in `tmp/`). Where a link cannot work (the mailbox on another filesystem, a
//! template that cannot be written) the lock is made the usual way. A lock folder that
//! asks for another file mode than the last gets a new template.
//!
//! All locks of one template share an inode, so (dev, ino, ctime) can no longer tell
//! whether the lock on disk is still the one we took (another process may override a
//! stale lock and another thread of ours take it next): the template also records which
//! lock names it holds, each with its own token.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::util::{create_excl, escaped_hostname, process_exists};

/// Prefix of template file names.
const PREFIX: &str = "uidlist-lock.";

/// Mailbox folders remembered as unable to link the template before the set is cleared.
const MAX_FALLBACK_DIRS: usize = 1024;

/// The template of one process for the locks of one user (see the module docs).
#[derive(Debug)]
pub struct LockTemplate {
    dir: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    file: Option<Made>,
    /// Creating the template failed: every lock is made the usual way.
    broken: bool,
    /// Lock folders where linking failed (another filesystem...).
    fallback: HashSet<PathBuf>,
    /// Lock names held through the template, with the token of their holder.
    held: HashMap<PathBuf, u64>,
    next_token: u64,
}

#[derive(Debug)]
struct Made {
    path: PathBuf,
    dev: u64,
    ino: u64,
    content: Vec<u8>,
    /// The mode it was created with (the lock folder's file mode, as Dovecot's).
    mode: u32,
}

/// A lock taken through a template.
#[derive(Debug)]
pub(crate) struct Held {
    dev: u64,
    ino: u64,
    token: u64,
}

impl LockTemplate {
    /// A template kept in `dir` (which must exist); nothing is written before the first
    /// lock.
    pub fn new(dir: &Path) -> LockTemplate {
        LockTemplate {
            dir: dir.to_path_buf(),
            state: Mutex::default(),
        }
    }

    /// Removes the templates in `dir` that processes of this host left when they died.
    /// Returns how many.
    pub fn clean_stale(dir: &Path) -> usize {
        let Ok(rd) = fs::read_dir(dir) else {
            return 0;
        };
        let host = escaped_hostname();
        let mut removed = 0;
        for entry in rd.flatten() {
            let name = entry.file_name();
            let Some(unique) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
                continue;
            };
            let dead = crate::deliver::ops::local_pid(unique, host)
                .is_some_and(|pid| !process_exists(pid));
            if dead && fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Links the template as `lock_path` holding `content` with `mode`. `Ok(None)` when
    /// the template cannot serve this lock (the caller makes its own file);
    /// `AlreadyExists` when the lock exists.
    pub(crate) fn link(
        &self,
        lock_path: &Path,
        content: &[u8],
        mode: u32,
    ) -> io::Result<Option<Held>> {
        let lock_dir = lock_path.parent().unwrap_or(Path::new("."));
        let mut st = self.state();
        if st.broken || st.fallback.contains(lock_dir) {
            return Ok(None);
        }
        for attempt in 0..2 {
            // another mode (the folder's) or content: a new template
            let stale = st
                .file
                .as_ref()
                .is_some_and(|m| m.content != content || m.mode != mode);
            if st.file.is_none() || stale {
                if let Some(old) = st.file.take() {
                    let _ = fs::remove_file(&old.path);
                }
                match self.make(content, mode) {
                    Ok(m) => st.file = Some(m),
                    Err(e) => {
                        tracing::info!(dir = %self.dir.display(), error = %e, "cannot write a uidlist lock template; locks are made one file each");
                        st.broken = true;
                        return Ok(None);
                    }
                }
            }
            let Some((dev, ino)) = st.file.as_ref().map(|m| (m.dev, m.ino)) else {
                return Ok(None);
            };
            let linked = match st.file.as_ref() {
                Some(m) => fs::hard_link(&m.path, lock_path),
                None => return Ok(None),
            };
            match linked {
                Ok(()) => {
                    st.next_token += 1;
                    let token = st.next_token;
                    let held = Held { dev, ino, token };
                    st.held.insert(lock_path.to_path_buf(), token);
                    return Ok(Some(held));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(e),
                // the template went away (removed by hand?): make it again, once
                Err(e) if e.kind() == io::ErrorKind::NotFound && attempt == 0 => {
                    if st.file.as_ref().is_some_and(|m| m.path.exists()) {
                        return Err(e); // the lock's folder is missing
                    }
                    st.file = None;
                }
                Err(e) if crate::transfer::link_unsupported(&e) => {
                    if st.fallback.len() >= MAX_FALLBACK_DIRS {
                        st.fallback.clear();
                    }
                    st.fallback.insert(lock_dir.to_path_buf());
                    return Ok(None);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    fn make(&self, content: &[u8], mode: u32) -> io::Result<Made> {
        let path = self
            .dir
            .join(format!("{PREFIX}{}", crate::filename::unique_id()));
        let mut f = create_excl(&path, mode)?;
        let written = f.write_all(content).and_then(|()| f.metadata());
        match written {
            Ok(m) => Ok(Made {
                path,
                dev: m.dev(),
                ino: m.ino(),
                content: content.to_vec(),
                mode,
            }),
            Err(e) => {
                let _ = fs::remove_file(&path);
                Err(e)
            }
        }
    }

    /// Whether `lock_path`, whose metadata is `meta`, is still the lock `held`.
    pub(crate) fn holds(&self, lock_path: &Path, held: &Held, meta: &fs::Metadata) -> bool {
        meta.dev() == held.dev
            && meta.ino() == held.ino
            && self.state().held.get(lock_path) == Some(&held.token)
    }

    /// Forgets `lock_path` as held by `held` (after its unlink, or when it was lost).
    pub(crate) fn forget(&self, lock_path: &Path, held: &Held) {
        let mut st = self.state();
        if st.held.get(lock_path) == Some(&held.token) {
            st.held.remove(lock_path);
        }
    }
}

impl Drop for LockTemplate {
    fn drop(&mut self) {
        if let Some(m) = self.state().file.take() {
            // locks still linked to it keep the inode; only the template's name goes
            let _ = fs::remove_file(&m.path);
        }
    }
}

#[cfg(test)]
#[path = "template_tests.rs"]
mod tests;
