//! SUBSCRIBE, UNSUBSCRIBE and LSUB (RFC 3501 §6.3.6-§6.3.9) in Dovecot's own `subscriptions`
//! file at the Maildir root, so that moving back to Dovecot keeps them.
//!
//! Format (Dovecot's subscription-file.c): version 2 starts with the line `V<TAB>2` and an
//! empty line; each following line is one mailbox, its hierarchy levels separated by TAB,
//! each level tab-escaped (`\x01` -> `\x011`, TAB -> `\x01t`, CR -> `\x01r`, LF -> `\x01n`).
//! A file without that header is version 1: one name per line as it is. Names are
//! Dovecot's storage names, which for Maildir++ are modified UTF-7 (`&AMk-t&AOk-` for
//! `Été`). Dovecot 2.3 writes version 2 for a new file and keeps the version of an existing
//! one; so do we. Writes take `subscriptions.lock` with `O_EXCL`, write the new content into
//! it and rename it over the file (Dovecot's dotlock-and-replace), so a reader sees the old
//! or the new file, never half of one. Subscribing does not require the mailbox to exist
//! (RFC 3501 §6.3.6); RENAME and DELETE leave subscriptions alone, as Dovecot does.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use maildex_maildir::mutf7;

use crate::{OpError, StoreError, UserStore};

/// The file name at the Maildir root (Dovecot's maildir++ default).
pub const SUBSCRIPTIONS_FILE: &str = "subscriptions";
const LOCK_FILE: &str = "subscriptions.lock";
const V2_HEADER: &str = "V\t2\n\n";
/// Dovecot overrides a subscriptions lock that has not changed for this long
/// (`SUBSCRIPTION_FILE_CHANGE_TIMEOUT`).
const LOCK_STALE: Duration = Duration::from_secs(30);

fn tab_escape(level: &str, out: &mut String) {
    for c in level.chars() {
        match c {
            '\x01' => out.push_str("\x011"),
            '\t' => out.push_str("\x01t"),
            '\r' => out.push_str("\x01r"),
            '\n' => out.push_str("\x01n"),
            c => out.push(c),
        }
    }
}

fn tab_unescape(level: &str) -> String {
    let mut out = String::with_capacity(level.len());
    let mut it = level.chars();
    while let Some(c) = it.next() {
        if c != '\x01' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('1') => out.push('\x01'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// A line of the file for IMAP name `name` (UTF-8, `.` separated).
fn line_of(name: &str, version: u32) -> String {
    if name == "INBOX" {
        return name.to_string();
    }
    let storage = mutf7::encode(name);
    if version < 2 {
        return storage;
    }
    let mut out = String::with_capacity(storage.len());
    for (i, level) in storage.split('.').enumerate() {
        if i > 0 {
            out.push('\t');
        }
        tab_escape(level, &mut out);
    }
    out
}

/// The IMAP name of a line (names that are not valid modified UTF-7 are kept as they are).
fn name_of(line: &str, version: u32) -> String {
    let storage = if version < 2 {
        line.to_string()
    } else {
        line.split('\t')
            .map(tab_unescape)
            .collect::<Vec<_>>()
            .join(".")
    };
    if storage.eq_ignore_ascii_case("INBOX") {
        return "INBOX".to_string();
    }
    mutf7::decode(&storage).unwrap_or(storage)
}

/// The file's version and its lines (as stored).
fn read_lines(path: &Path) -> Result<(u32, Vec<String>), StoreError> {
    let data = match fs::read(path) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((2, Vec::new())),
        Err(e) => return Err(StoreError::io(path, e)),
    };
    let text = String::from_utf8_lossy(&data);
    let (version, body) = match text.strip_prefix(V2_HEADER) {
        Some(rest) => (2, rest.to_string()),
        None => (1, text.into_owned()),
    };
    let lines = body
        .split('\n')
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    Ok((version, lines))
}

/// Dovecot's dotlock on the subscriptions file: the lock file is also the new content.
struct Dotlock {
    path: std::path::PathBuf,
    file: Option<fs::File>,
}

impl Dotlock {
    fn acquire(root: &Path, timeout: Duration) -> Result<Dotlock, StoreError> {
        let path = root.join(LOCK_FILE);
        let started = Instant::now();
        loop {
            // 0600 as every file of the user's mail (docs/SECURITY.md); the lock becomes
            // the file
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(file) => {
                    return Ok(Dotlock {
                        path,
                        file: Some(file),
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let stale = fs::metadata(&path).ok().and_then(|m| {
                        let changed = SystemTime::UNIX_EPOCH
                            + Duration::from_secs(m.ctime().max(m.mtime()).max(0) as u64);
                        SystemTime::now().duration_since(changed).ok()
                    });
                    if stale.is_some_and(|age| age > LOCK_STALE) {
                        tracing::warn!(lock = %path.display(), "overriding a stale subscriptions lock");
                        let _ = fs::remove_file(&path);
                        continue;
                    }
                    if started.elapsed() > timeout {
                        return Err(StoreError::io(
                            &path,
                            io::Error::new(
                                io::ErrorKind::TimedOut,
                                "timed out waiting for the lock",
                            ),
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(StoreError::io(&path, e)),
            }
        }
    }

    /// Writes `content` into the lock file and renames it over `dest`.
    fn replace(mut self, dest: &Path, content: &[u8], fsync: bool) -> Result<(), StoreError> {
        let mut file = self
            .file
            .take()
            .ok_or_else(|| StoreError::io(&self.path, io::Error::other("lock already used")))?;
        file.write_all(content)
            .map_err(|e| StoreError::io(&self.path, e))?;
        if fsync {
            file.sync_all().map_err(|e| StoreError::io(&self.path, e))?;
        }
        drop(file);
        fs::rename(&self.path, dest).map_err(|e| StoreError::io(dest, e))?;
        self.path = std::path::PathBuf::new();
        Ok(())
    }
}

impl Drop for Dotlock {
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.path);
        }
    }
}

impl UserStore {
    /// Adds `name` to the subscriptions (RFC 3501 §6.3.6: it need not exist).
    pub fn subscribe(&self, name: &str) -> Result<(), OpError> {
        self.set_subscribed(name, true)
    }

    /// Removes `name` from the subscriptions (no error when it was not subscribed).
    pub fn unsubscribe(&self, name: &str) -> Result<(), OpError> {
        self.set_subscribed(name, false)
    }

    /// The subscribed names (UTF-8, `.` separated), in file order.
    pub fn subscriptions(&self) -> Result<Vec<String>, OpError> {
        let (version, lines) = read_lines(&self.root.join(SUBSCRIPTIONS_FILE))?;
        Ok(lines.iter().map(|l| name_of(l, version)).collect())
    }

    fn set_subscribed(&self, name: &str, on: bool) -> Result<(), OpError> {
        let name = Self::canonical(name);
        // the same names CREATE accepts (no escaping the Maildir, no empty levels)
        self.mailbox_path(name)?;
        let file = self.root.join(SUBSCRIPTIONS_FILE);
        let lock = Dotlock::acquire(&self.root, self.opts.lock_timeout)?;
        let (version, mut lines) = read_lines(&file)?;
        let line = line_of(name, version);
        let present = lines.contains(&line);
        if present == on {
            return Ok(());
        }
        if on {
            lines.push(line);
        } else {
            lines.retain(|l| *l != line);
        }
        let mut content = String::new();
        if version >= 2 {
            content.push_str(V2_HEADER);
        }
        for l in &lines {
            content.push_str(l);
            content.push('\n');
        }
        lock.replace(&file, content.as_bytes(), self.opts.fsync)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_match_dovecot_2_3() {
        // what `doveadm mailbox subscribe` wrote for these names
        assert_eq!(line_of("a.b", 2), "a\tb");
        assert_eq!(line_of("Été", 2), "&AMk-t&AOk-");
        assert_eq!(line_of("INBOX", 2), "INBOX");
        assert_eq!(line_of("a.b", 1), "a.b");
        assert_eq!(name_of("a\tb", 2), "a.b");
        assert_eq!(name_of("&AMk-t&AOk-", 2), "Été");
        assert_eq!(name_of("inbox", 1), "INBOX");
    }

    #[test]
    fn tab_escape_round_trips() {
        for s in ["plain", "x\ty", "\x01", "a\r\nb", "\x01t"] {
            let mut e = String::new();
            tab_escape(s, &mut e);
            assert!(!e.contains(['\t', '\n', '\r']), "{e:?}");
            assert_eq!(tab_unescape(&e), s);
        }
    }
}
