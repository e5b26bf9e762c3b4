//! Dovecot's `dovecot-uidlist.lock` dotlock (lib/file-dotlock.c, as used by
//! maildir-uidlist.c), so maildex and Dovecot can write the same uidlist.
//!
//! The lock is a file holding `<pid>:<hostname>`, linked in whole under its name
//! (see `util::create_lock_with`) rather than Dovecot's `O_EXCL` create and write,
//! so a crash never leaves it empty. With a [`LockTemplate`] it is a link to the
//! process's template file instead, which costs no inode (see `template`).
//! A waiter overrides it as stale when (a) it is older than 2 s, names our host and
//! its pid no longer exists, or (b) neither the lock file nor `dovecot-uidlist`
//! changed for `MAILDIR_UIDLIST_LOCK_STALE_TIMEOUT` (120 s). Dovecot waits at most
//! that plus 2 s. Rewrites go to `dovecot-uidlist.tmp` and are renamed over the
//! uidlist while the lock is held, as `maildir_uidlist_recreate` does; appends go to
//! the end of the existing file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::template::{Held, LockTemplate};
use super::{record_line, validate_records, UidRecord, Uidlist, UIDLIST_NAME};
use crate::util::{
    create_lock_with, file_mode_for, fsync_dir, process_exists, raw_hostname, write_replace,
};
use crate::MaildirError;

/// Dovecot's `MAILDIR_UIDLIST_LOCK_STALE_TIMEOUT`: a lock with no change to it or to
/// the uidlist for this long is overridden.
pub const LOCK_STALE_TIMEOUT: Duration = Duration::from_secs(120);

/// How long Dovecot waits for the uidlist lock (stale timeout + 2 s).
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(122);

const LOCK_NAME: &str = "dovecot-uidlist.lock";
const TMP_NAME: &str = "dovecot-uidlist.tmp";

/// Dovecot does not check the pid of a lock younger than this (`STALE_PID_CHECK_SECS`).
const STALE_PID_CHECK_SECS: i64 = 2;

/// Tail of the uidlist read to find the last record on append.
const TAIL_BYTES: u64 = 16 * 1024;

/// What we last saw of a file, to notice changes (Dovecot's `file_change_info`).
#[derive(Clone, Copy, PartialEq, Eq)]
struct ChangeInfo {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    ctime: i64,
}

impl ChangeInfo {
    fn of(m: &fs::Metadata) -> ChangeInfo {
        ChangeInfo {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: m.mtime(),
            ctime: m.ctime(),
        }
    }
}

/// Tracks when the lock or the uidlist last changed while we wait.
struct Watch {
    lock: Option<ChangeInfo>,
    file: Option<ChangeInfo>,
    last_change: i64,
}

impl Watch {
    /// Records `info`; on first sight the change time is the file's own timestamp
    /// (mtime if newer than ctime and not in the future), later changes count as now.
    fn update(slot: &mut Option<ChangeInfo>, info: ChangeInfo, now: i64, last_change: &mut i64) {
        if *slot == Some(info) {
            return;
        }
        let t = if slot.is_none() {
            if info.mtime <= now && info.mtime > info.ctime {
                info.mtime
            } else {
                info.ctime
            }
        } else {
            now
        };
        *last_change = (*last_change).max(t);
        *slot = Some(info);
    }
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The pid in a lock file if it names a process on this host (Dovecot's
/// `read_local_pid`: content `<pid>:<host>`, host must be ours).
fn read_local_pid(lock_path: &Path) -> Option<i32> {
    let mut buf = Vec::new();
    File::open(lock_path)
        .ok()?
        .take(512)
        .read_to_end(&mut buf)
        .ok()?;
    let s = std::str::from_utf8(&buf).ok()?.trim_end_matches('\n');
    let (pid, host) = s.split_once(':')?;
    if host != raw_hostname() {
        return None;
    }
    pid.parse::<i32>().ok().filter(|p| *p > 0)
}

/// Holds `dovecot-uidlist.lock` in a mailbox directory. Dropping it removes the
/// lock (if it is still ours).
#[derive(Debug)]
pub struct UidlistLock {
    dir: PathBuf,
    lock_path: PathBuf,
    dev: u64,
    ino: u64,
    /// ctime of our lock file in ns: inode numbers are reused at once on some
    /// filesystems, so (dev, ino) alone cannot tell a replaced lock from ours.
    ctime_ns: i128,
    /// Set when the lock is a link to a template, which then says whether it is ours.
    via: Option<(Arc<LockTemplate>, Held)>,
    released: bool,
    /// Whether writes are synced (see [`UidlistLock::set_durable`]).
    durable: bool,
}

fn ctime_ns(m: &fs::Metadata) -> i128 {
    i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec())
}

impl UidlistLock {
    /// Takes the lock, waiting up to `timeout` (Dovecot waits [`LOCK_TIMEOUT`]) and
    /// overriding a stale lock with a warning.
    pub fn acquire(dir: &Path, timeout: Duration) -> Result<UidlistLock, MaildirError> {
        Self::acquire_with_stale_timeout(dir, timeout, LOCK_STALE_TIMEOUT)
    }

    /// [`UidlistLock::acquire`] as a link to `template` where it can be (see
    /// [`LockTemplate`]).
    pub fn acquire_via(
        dir: &Path,
        timeout: Duration,
        template: &Arc<LockTemplate>,
    ) -> Result<UidlistLock, MaildirError> {
        Self::acquire_inner(dir, timeout, LOCK_STALE_TIMEOUT, Some(template))
    }

    /// [`UidlistLock::acquire`] with another stale timeout (tests, tools).
    pub fn acquire_with_stale_timeout(
        dir: &Path,
        timeout: Duration,
        stale_timeout: Duration,
    ) -> Result<UidlistLock, MaildirError> {
        Self::acquire_inner(dir, timeout, stale_timeout, None)
    }

    fn acquire_inner(
        dir: &Path,
        timeout: Duration,
        stale_timeout: Duration,
        template: Option<&Arc<LockTemplate>>,
    ) -> Result<UidlistLock, MaildirError> {
        let lock_path = dir.join(LOCK_NAME);
        let uidlist_path = dir.join(UIDLIST_NAME);
        let mode = file_mode_for(dir);
        let start = Instant::now();
        let stale = stale_timeout.as_secs() as i64;
        let mut watch = Watch {
            lock: None,
            file: None,
            last_change: 0,
        };
        let mut wait = Duration::from_millis(5);
        loop {
            // Dovecot's file_write_pid: "<pid>:<host>".
            let content = format!("{}:{}", std::process::id(), raw_hostname());
            let linked = match template {
                Some(t) => t.link(&lock_path, content.as_bytes(), mode),
                None => Ok(None),
            };
            let created = match linked {
                Ok(Some(held)) => {
                    return Ok(UidlistLock {
                        dir: dir.to_path_buf(),
                        lock_path,
                        dev: 0,
                        ino: 0,
                        ctime_ns: 0,
                        via: template.map(|t| (Arc::clone(t), held)),
                        released: false,
                        durable: true,
                    });
                }
                Ok(None) => create_lock_with(&lock_path, content.as_bytes(), mode),
                Err(e) => Err(e),
            };
            match created {
                Ok(f) => {
                    let m = f
                        .metadata()
                        .map_err(|e| MaildirError::io("fstat", &lock_path, e))?;
                    return Ok(UidlistLock {
                        dir: dir.to_path_buf(),
                        lock_path,
                        dev: m.dev(),
                        ino: m.ino(),
                        ctime_ns: ctime_ns(&m),
                        via: None,
                        released: false,
                        durable: true,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(MaildirError::io("create", &lock_path, e)),
            }
            let now = now_secs();
            let lock_meta = match fs::symlink_metadata(&lock_path) {
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // Released between our create and stat: try again at once.
                    if start.elapsed() >= timeout {
                        return Err(MaildirError::LockTimeout {
                            path: lock_path,
                            waited: start.elapsed(),
                        });
                    }
                    continue;
                }
                Err(e) => return Err(MaildirError::io("stat", &lock_path, e)),
            };
            let lock_info = ChangeInfo::of(&lock_meta);
            Watch::update(&mut watch.lock, lock_info, now, &mut watch.last_change);
            let mut override_reason = None;
            if lock_info.mtime < now - STALE_PID_CHECK_SECS {
                if let Some(pid) = read_local_pid(&lock_path) {
                    // Our own pid means another thread of ours holds it: alive.
                    if pid as u32 != std::process::id() && !process_exists(pid) {
                        override_reason = Some(format!("its process {pid} no longer exists"));
                    }
                }
            }
            if override_reason.is_none() && now > watch.last_change + stale {
                match fs::metadata(&uidlist_path) {
                    Ok(m) => Watch::update(
                        &mut watch.file,
                        ChangeInfo::of(&m),
                        now,
                        &mut watch.last_change,
                    ),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(MaildirError::io("stat", &uidlist_path, e)),
                }
                if now > watch.last_change + stale {
                    override_reason = Some(format!(
                        "neither it nor the uidlist changed for {} s",
                        now - watch.last_change
                    ));
                }
            }
            if let Some(reason) = override_reason {
                // Only remove the lock we judged: it must not have been replaced.
                let same = fs::symlink_metadata(&lock_path)
                    .map(|m| ChangeInfo::of(&m) == lock_info)
                    .unwrap_or(false);
                if same {
                    tracing::warn!(lock = %lock_path.display(), reason, "overriding stale uidlist lock");
                    match fs::remove_file(&lock_path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err(MaildirError::io("unlink", &lock_path, e)),
                    }
                    // As Dovecot: pause so a concurrent overrider cannot unlink the
                    // lock we are about to create.
                    std::thread::sleep(Duration::from_millis(
                        100 + u64::from(std::process::id() % 100),
                    ));
                }
                watch = Watch {
                    lock: None,
                    file: None,
                    last_change: 0,
                };
                continue;
            }
            let waited = start.elapsed();
            if waited >= timeout {
                return Err(MaildirError::LockTimeout {
                    path: lock_path,
                    waited,
                });
            }
            std::thread::sleep(wait.min(timeout - waited));
            wait = (wait * 2).min(Duration::from_millis(200));
        }
    }

    /// The mailbox directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the lock file on disk is still the one we created.
    pub fn is_held(&self) -> bool {
        fs::symlink_metadata(&self.lock_path)
            .map(|m| match &self.via {
                Some((t, held)) => t.holds(&self.lock_path, held, &m),
                None => m.dev() == self.dev && m.ino() == self.ino && ctime_ns(&m) == self.ctime_ns,
            })
            .unwrap_or(false)
    }

    /// Unlinks the lock (known to be ours) and tells its template.
    fn unlink(&self) -> io::Result<()> {
        let r = fs::remove_file(&self.lock_path);
        self.forget();
        r
    }

    fn forget(&self) {
        if let Some((t, held)) = &self.via {
            t.forget(&self.lock_path, held);
        }
    }

    fn check_held(&self) -> Result<(), MaildirError> {
        if self.is_held() {
            Ok(())
        } else {
            Err(MaildirError::LockLost {
                path: self.lock_path.clone(),
            })
        }
    }

    /// Updates the lock's mtime so waiters do not judge it stale during long work
    /// (Dovecot's `file_dotlock_touch`).
    pub fn touch(&mut self) -> Result<(), MaildirError> {
        self.check_held()?;
        let f = File::options()
            .write(true)
            .open(&self.lock_path)
            .map_err(|e| MaildirError::io("open", &self.lock_path, e))?;
        f.set_modified(SystemTime::now())
            .map_err(|e| MaildirError::io("utime", &self.lock_path, e))?;
        if self.via.is_none() {
            let m = f
                .metadata()
                .map_err(|e| MaildirError::io("fstat", &self.lock_path, e))?;
            self.ctime_ns = ctime_ns(&m);
        }
        Ok(())
    }

    /// Whether [`UidlistLock::write`] and [`UidlistLock::append`] sync what they write
    /// (default true). Off only while a new user's folders are made, which are made
    /// durable together once they all exist (the store's `skeleton.rs`).
    pub fn set_durable(&mut self, durable: bool) {
        self.durable = durable;
    }

    /// Reads the uidlist fresh (under the lock nobody else changes it).
    pub fn read(&self) -> Result<Option<Uidlist>, MaildirError> {
        Uidlist::read(&self.dir)
    }

    /// [`super::scan_for_append`] of the uidlist as it is now. Ok(None) when the file is
    /// missing or not a whole version-3 file.
    pub fn scan_for_append(&self, base: &str) -> Result<Option<super::AppendScan>, MaildirError> {
        let path = self.uidlist_path();
        match fs::read(&path) {
            Ok(data) => Ok(super::scan_for_append(&path, &data, base)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(MaildirError::io("read", &path, e)),
        }
    }

    fn uidlist_path(&self) -> PathBuf {
        self.dir.join(UIDLIST_NAME)
    }

    /// Replaces the whole uidlist with `list` (written as version 3; a GUID is made
    /// if it has none) and keeps the lock: write `dovecot-uidlist.tmp`, fdatasync,
    /// rename over `dovecot-uidlist`, fsync the directory.
    pub fn write(&mut self, list: &Uidlist) -> Result<(), MaildirError> {
        let path = self.uidlist_path();
        list.validate(&path)?;
        let mut list = list.clone();
        list.version = 3;
        if list.guid.is_none() {
            list.guid = Some(super::new_guid());
        }
        let mode = fs::metadata(&path)
            .map(|m| m.mode() & 0o666)
            .unwrap_or_else(|_| file_mode_for(&self.dir));
        self.check_held()?;
        write_replace(
            &self.dir.join(TMP_NAME),
            &path,
            &list.to_bytes(),
            mode,
            self.durable,
        )?;
        if self.durable {
            fsync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// [`UidlistLock::write`], then releases the lock.
    pub fn rewrite(mut self, list: &Uidlist) -> Result<(), MaildirError> {
        self.write(list)?;
        self.release()
    }

    /// Releases the lock, reporting a failure that Drop would only log.
    pub fn release(mut self) -> Result<(), MaildirError> {
        self.released = true;
        if !self.is_held() {
            self.forget();
            return Err(MaildirError::LockLost {
                path: self.lock_path.clone(),
            });
        }
        self.unlink()
            .map_err(|e| MaildirError::io("unlink", &self.lock_path, e))
    }

    /// Adds `records` (UIDs strictly increasing, all at or above the file's next
    /// UID) to the end of the uidlist and fdatasyncs it, as Dovecot appends new
    /// messages. `next_uid` is what the next UID must be afterwards; the header is
    /// only rewritten (whole file, by rename) when it must move beyond the last
    /// record's UID + 1, when the file is in the old version-1 format or its last
    /// line was cut short. A missing file is created with a new UIDVALIDITY (callers
    /// that know the UIDVALIDITY should [`UidlistLock::write`] instead).
    pub fn append(&mut self, records: &[UidRecord], next_uid: u32) -> Result<(), MaildirError> {
        let path = self.uidlist_path();
        validate_records(&path, records, 0)?;
        self.check_held()?;
        maildex_faults::hit(maildex_faults::Point::UidlistAppend)
            .map_err(|e| MaildirError::io("write", &path, e))?;
        let mut f = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                tracing::warn!(path = %path.display(), "uidlist missing on append; creating it with a new UIDVALIDITY");
                let mut list = Uidlist::new(super::new_uidvalidity());
                return self.append_full(&path, &mut list, records, next_uid);
            }
            Err(e) => return Err(MaildirError::io("open", &path, e)),
        };
        match self.tail_state(&path, &mut f)? {
            Some((hdr_next, last_uid)) => {
                let min = hdr_next.max(last_uid.saturating_add(1));
                let Some(first) = records.first() else {
                    if next_uid <= min {
                        return Ok(());
                    }
                    return self.append_reread(&path, records, next_uid);
                };
                if first.uid < min {
                    return Err(MaildirError::InvalidRecords {
                        path,
                        reason: format!("UID {} is below the next UID {min}", first.uid),
                    });
                }
                let after = records.last().map_or(min, |r| r.uid.saturating_add(1));
                if next_uid > after {
                    return self.append_reread(&path, records, next_uid);
                }
                let mut buf = Vec::with_capacity(records.len() * 64);
                for r in records {
                    record_line(&mut buf, r);
                }
                f.seek(SeekFrom::End(0))
                    .map_err(|e| MaildirError::io("seek", &path, e))?;
                f.write_all(&buf)
                    .map_err(|e| MaildirError::io("write", &path, e))?;
                if !self.durable {
                    return Ok(());
                }
                f.sync_data()
                    .map_err(|e| MaildirError::io("fdatasync", &path, e))
            }
            None => self.append_reread(&path, records, next_uid),
        }
    }

    /// Header next UID and last record UID of a version-3 file that ends with a
    /// newline; None when the file needs a full rewrite instead.
    fn tail_state(&self, path: &Path, f: &mut File) -> Result<Option<(u32, u32)>, MaildirError> {
        let len = f
            .metadata()
            .map_err(|e| MaildirError::io("fstat", path, e))?
            .len();
        let mut head = vec![0u8; len.min(4096) as usize];
        f.read_exact(&mut head)
            .map_err(|e| MaildirError::io("read", path, e))?;
        let Some(hdr_end) = head.iter().position(|&b| b == b'\n') else {
            return Ok(None);
        };
        let Ok(line) = std::str::from_utf8(&head[..hdr_end]) else {
            return Ok(None);
        };
        let Ok(h) = super::parse_header(path, line) else {
            return Ok(None);
        };
        if h.version != 3 {
            return Ok(None);
        }
        let body_start = hdr_end as u64 + 1;
        if len == body_start {
            return Ok(Some((h.next_uid, 0)));
        }
        let start = body_start.max(len.saturating_sub(TAIL_BYTES));
        let mut tail = vec![0u8; (len - start) as usize];
        f.seek(SeekFrom::Start(start))
            .map_err(|e| MaildirError::io("seek", path, e))?;
        f.read_exact(&mut tail)
            .map_err(|e| MaildirError::io("read", path, e))?;
        if tail.last() != Some(&b'\n') {
            return Ok(None);
        }
        let body = &tail[..tail.len() - 1];
        let line_start = match body.iter().rposition(|&b| b == b'\n') {
            Some(p) => p + 1,
            None if start == body_start => 0,
            None => return Ok(None),
        };
        let last = &body[line_start..];
        let digits = last.iter().take_while(|b| b.is_ascii_digit()).count();
        let uid = std::str::from_utf8(&last[..digits])
            .ok()
            .and_then(|s| s.parse::<u32>().ok());
        Ok(uid.filter(|u| *u != 0).map(|u| (h.next_uid, u)))
    }

    /// Full read, append in memory, rewrite.
    fn append_reread(
        &mut self,
        path: &Path,
        records: &[UidRecord],
        next_uid: u32,
    ) -> Result<(), MaildirError> {
        let mut list = match self.read()? {
            Some(l) => l,
            None => Uidlist::new(super::new_uidvalidity()),
        };
        self.append_full(path, &mut list, records, next_uid)
    }

    fn append_full(
        &mut self,
        path: &Path,
        list: &mut Uidlist,
        records: &[UidRecord],
        next_uid: u32,
    ) -> Result<(), MaildirError> {
        if let Some(first) = records.first() {
            if first.uid < list.next_uid {
                return Err(MaildirError::InvalidRecords {
                    path: path.to_path_buf(),
                    reason: format!("UID {} is below the next UID {}", first.uid, list.next_uid),
                });
            }
        }
        list.records.extend_from_slice(records);
        let after = records.last().map_or(0, |r| r.uid.saturating_add(1));
        list.next_uid = list.next_uid.max(after).max(next_uid);
        self.write(list)
    }
}

impl Drop for UidlistLock {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        if !self.is_held() {
            self.forget();
            tracing::warn!(lock = %self.lock_path.display(), "our uidlist lock was overridden or deleted");
            return;
        }
        if let Err(e) = self.unlink() {
            tracing::warn!(lock = %self.lock_path.display(), error = %e, "could not remove uidlist lock");
        }
    }
}
