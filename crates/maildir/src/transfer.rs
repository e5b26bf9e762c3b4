//! Moving and copying message files between mailboxes of one Maildir++ tree (IMAP COPY and
//! MOVE), and finding a message again after another tool renamed it.
//!
//! A copy is a hard link made through the destination's `tmp/` and then linked into `cur/`
//! or `new/` without replacing anything (Dovecot's maildir-copy does the same), so the copy
//! shares the source's bytes and mtime (INTERNALDATE). Where the filesystem refuses hard
//! links (EXDEV, EPERM, EOPNOTSUPP) the bytes are copied instead, with the mtime set from
//! the source. A move is one `rename(2)` that never replaces an existing file: atomic per
//! file, so a crash leaves each message in exactly one mailbox.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::deliver::{
    link_noreplace, link_unique, rename_noreplace, Delivered, LinkInto, LinkSource, NAME_ATTEMPTS,
};
use crate::filename::{base_of, unique_id};
use crate::flags::{Flags, Keywords};
use crate::own_writes::{self, Change};
use crate::scan::Sub;
use crate::util::create_excl;
use crate::MaildirError;

/// Finds the file whose base is `base` in `cur/` (first) or `new/` of `mailbox`: where a
/// message is now after another tool renamed it (a flag change keeps the base). Reads the
/// directories without parsing every name.
pub fn find_base(mailbox: &Path, base: &str) -> Result<Option<(Sub, String)>, MaildirError> {
    for sub in [Sub::Cur, Sub::New] {
        let dir = sub.path(mailbox);
        let rd = match fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(MaildirError::io("readdir", &dir, e)),
        };
        for de in rd {
            let de = de.map_err(|e| MaildirError::io("readdir", &dir, e))?;
            let name = de.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with(base) && base_of(name) == base {
                return Ok(Some((sub, name.to_string())));
            }
        }
    }
    Ok(None)
}

/// How often [`open_found`] looks a message up again by its base before it gives up: each
/// look-up follows one more rename. Dovecot's `maildir_file_do` tries as often
/// (`MAILDIR_RESYNC_RETRY_COUNT`).
const OPEN_CHASES: usize = 10;

/// Opens message file `name` in `sub` of `mailbox`, following it when it has been renamed:
/// a flag change (ours, committed to the index only after its rename, or another tool's)
/// keeps the base, so a file not at its name is looked for by its base (`find_base`) and
/// opened where it is now. The file and where it was opened; `None` when no file has the
/// base any longer (expunged), or when the listing missed a file renamed while it read
/// the folder (`readdir(3)` may skip an entry renamed during the walk), which a caller
/// that can ask its index for the name again tells apart. Opened as
/// [`crate::open_message`] opens (no links, regular files only). Without this, a reader
/// that took the name from the index just before a STORE renamed the file took the
/// message for expunged (FETCH answered NO [EXPUNGEISSUED], SEARCH BODY missed it).
pub fn open_found(
    mailbox: &Path,
    sub: Sub,
    name: &str,
) -> Result<Option<(fs::File, PathBuf)>, MaildirError> {
    let base = base_of(name);
    let mut at = (sub, name.to_string());
    for _ in 0..OPEN_CHASES {
        let path = at.0.path(mailbox).join(&at.1);
        match crate::files::open_message(&path) {
            Ok(f) => return Ok(Some((f, path))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(MaildirError::io("open", &path, e)),
        }
        match find_base(mailbox, base)? {
            Some(now) => at = now,
            None => return Ok(None),
        }
    }
    Err(MaildirError::io(
        "open",
        at.0.path(mailbox).join(&at.1),
        io::Error::new(
            io::ErrorKind::WouldBlock,
            "renamed again each time it was looked up; try again",
        ),
    ))
}

/// Whether a failed `link(2)` means "no hard link possible here" (another filesystem,
/// one without hard links, or a file at its link limit), so the caller copies instead.
pub fn link_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EXDEV | libc::EPERM | libc::EOPNOTSUPP | libc::ENOSYS | libc::EMLINK)
    )
}

/// Copies the bytes of `src` into a new file `tmp` (O_EXCL) with the source's mtime,
/// fsynced when `durable`. None when `src` is gone.
fn copy_bytes(src: &Path, tmp: &Path, durable: bool) -> Result<Option<()>, MaildirError> {
    let mut input = match crate::files::open_message(src) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(MaildirError::io("open", src, e)),
    };
    let md = input
        .metadata()
        .map_err(|e| MaildirError::io("fstat", src, e))?;
    let result = (|| {
        let mut out = create_excl(tmp, 0o600).map_err(|e| MaildirError::io("create", tmp, e))?;
        io::copy(&mut input, &mut out).map_err(|e| MaildirError::io("copy", tmp, e))?;
        // INTERNALDATE is the mtime (RFC 3501 §2.3.3, as Dovecot keeps it for Maildir)
        if let Ok(t) = md.modified() {
            out.set_modified(t)
                .map_err(|e| MaildirError::io("set mtime", tmp, e))?;
        }
        if durable {
            out.sync_all()
                .map_err(|e| MaildirError::io("fsync", tmp, e))?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(tmp);
    }
    result.map(Some)
}

/// Copies message file `src` into mailbox `dst` under a new unique base that keeps the
/// `,S=` and `,W=` sizes: into `new/` when `sub` is New (no flags allowed, as in delivery),
/// else into `cur/` with `flags` and `keywords` (letters of dst's dovecot-keywords).
/// None when `src` no longer exists (the caller looks it up again with [`find_base`]).
/// The destination directory is not fsynced: callers copying many files fsync it once
/// ([`crate::deliver::fsync_dir`]); `durable` fsyncs a byte copy's data.
pub fn copy_file(
    src: &Path,
    dst: &Path,
    sub: Sub,
    flags: Flags,
    keywords: Keywords,
    sizes: (u64, u64),
    durable: bool,
) -> Result<Option<Delivered>, MaildirError> {
    // link(2) would copy a symbolic link itself: refuse anything but a regular file
    match crate::files::ensure_regular(src) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(MaildirError::io("copy", src, e)),
    }
    let tmp_dir = dst.join("tmp");
    let mut tmp: Option<PathBuf> = None;
    for _ in 0..NAME_ATTEMPTS {
        let candidate = tmp_dir.join(unique_id());
        match fs::hard_link(src, &candidate) {
            Ok(()) => {
                tmp = Some(candidate);
                break;
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            // ENOENT with tmp/ present is about the source, even if another tool's rename
            // brought a file of that name back since (the caller looks it up again)
            Err(e) if e.kind() == io::ErrorKind::NotFound && tmp_dir.is_dir() => return Ok(None),
            Err(e) if link_unsupported(&e) => match copy_bytes(src, &candidate, durable) {
                Ok(Some(())) => {
                    tmp = Some(candidate);
                    break;
                }
                Ok(None) => return Ok(None),
                Err(MaildirError::Io { error, .. })
                    if error.kind() == io::ErrorKind::AlreadyExists =>
                {
                    continue
                }
                Err(e) => return Err(e),
            },
            Err(e) => return Err(MaildirError::io("link", &candidate, e)),
        }
    }
    let Some(tmp) = tmp else {
        return Err(MaildirError::NameCollision {
            path: tmp_dir,
            attempts: NAME_ATTEMPTS,
        });
    };
    let to = LinkInto {
        mailbox: dst,
        sub,
        flags,
        keywords,
        sizes,
        first_id: None,
        fault: maildex_faults::Point::CopyLink,
        fsync: false,
        source: LinkSource::Consume,
    };
    link_unique(&tmp, to).map(Some).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}

/// Result of [`move_file`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MoveOutcome {
    /// The file is now `dst/<sub>/<file_name>`.
    Moved,
    /// The source is gone (another tool renamed or expunged it).
    Vanished,
}

/// Moves message file `src` to `dst/<sub>/<file_name>` with one `rename(2)` that never
/// replaces a file (atomic: the message is in exactly one place at every moment). Across
/// filesystems (EXDEV, folders on different mounts) the bytes are copied through `dst/tmp/`
/// and linked into place before the source is unlinked: a crash in between leaves two
/// copies, never none. The directories are not fsynced (the caller does it once).
pub fn move_file(
    src: &Path,
    dst: &Path,
    sub: Sub,
    file_name: &str,
    durable: bool,
) -> Result<MoveOutcome, MaildirError> {
    let dest = sub.path(dst).join(file_name);
    own_writes::note(src);
    own_writes::note(&dest);
    let renamed = maildex_faults::hit(maildex_faults::Point::MoveRename)
        .and_then(|()| rename_noreplace(src, &dest));
    match renamed {
        Ok(()) => {
            own_writes::done(src, Change::Gone);
            own_writes::done(&dest, Change::Appeared);
            Ok(MoveOutcome::Moved)
        }
        // ENOENT with the destination folder present is about the source (even if a file
        // of that name is back by now: another tool renamed it away and back)
        Err(e) if e.kind() == io::ErrorKind::NotFound && sub.path(dst).is_dir() => {
            Ok(MoveOutcome::Vanished)
        }
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            let tmp = dst.join("tmp").join(unique_id());
            if copy_bytes(src, &tmp, durable)?.is_none() {
                return Ok(MoveOutcome::Vanished);
            }
            if let Err(e) = link_noreplace(&tmp, &dest) {
                let _ = fs::remove_file(&tmp);
                return Err(MaildirError::io("link", &dest, e));
            }
            let _ = fs::remove_file(&tmp);
            match fs::remove_file(src) {
                Ok(()) => Ok(MoveOutcome::Moved),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(MoveOutcome::Moved),
                Err(e) => Err(MaildirError::io("unlink", src, e)),
            }
        }
        Err(e) => Err(MaildirError::io("rename", &dest, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::folder::create_mailbox;
    use std::os::unix::fs::MetadataExt;

    fn boxes() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        let b = t.path().join("b");
        create_mailbox(&a, false).unwrap();
        create_mailbox(&b, true).unwrap();
        (t, a, b)
    }

    /// A file renamed since its name was read (new flags, or new/ to cur/) is opened where
    /// it is now; one whose base is nowhere is gone; a link is refused even when found by
    /// its base.
    #[test]
    fn open_found_follows_a_rename_by_base() {
        let (_t, a, _b) = boxes();
        fs::write(a.join("cur/1.M1P1.h:2,S"), b"one").unwrap();
        let (mut f, path) = open_found(&a, Sub::Cur, "1.M1P1.h:2,").unwrap().unwrap();
        assert_eq!(path, a.join("cur/1.M1P1.h:2,S"));
        let mut got = String::new();
        io::Read::read_to_string(&mut f, &mut got).unwrap();
        assert_eq!(got, "one");
        // asked in new/, found in cur/
        let (_, path) = open_found(&a, Sub::New, "1.M1P1.h").unwrap().unwrap();
        assert_eq!(path, a.join("cur/1.M1P1.h:2,S"));
        assert!(open_found(&a, Sub::Cur, "2.M2P2.h:2,S").unwrap().is_none());
        std::os::unix::fs::symlink("/etc/passwd", a.join("cur/3.M3P3.h:2,S")).unwrap();
        assert!(open_found(&a, Sub::Cur, "3.M3P3.h:2,").is_err());
    }

    #[test]
    fn copy_links_into_cur_with_new_base_and_same_inode() {
        let (_t, a, b) = boxes();
        let src = a.join("cur/1.M1P1.h,S=5,W=6:2,S");
        fs::write(&src, b"hello").unwrap();
        let d = copy_file(&src, &b, Sub::Cur, Flags::SEEN, Keywords(1), (5, 6), false)
            .unwrap()
            .unwrap();
        assert!(d.file_name.ends_with(",S=5,W=6:2,Sa"), "{}", d.file_name);
        assert_ne!(base_of(&d.file_name), "1.M1P1.h,S=5,W=6");
        assert_eq!(
            fs::metadata(&src).unwrap().ino(),
            fs::metadata(&d.path).unwrap().ino()
        );
        assert_eq!(fs::read_dir(b.join("tmp")).unwrap().count(), 0);
        // gone source: None, nothing left behind
        fs::remove_file(&src).unwrap();
        let none = copy_file(&src, &b, Sub::Cur, Flags::SEEN, Keywords(0), (5, 6), false).unwrap();
        assert!(none.is_none());
        assert_eq!(fs::read_dir(b.join("tmp")).unwrap().count(), 0);
        assert!(copy_file(
            &d.path,
            &b,
            Sub::New,
            Flags::SEEN,
            Keywords(0),
            (5, 6),
            false
        )
        .is_err());
    }

    #[test]
    fn byte_copy_keeps_mtime() {
        let (_t, a, b) = boxes();
        let src = a.join("new/2.M1P1.h");
        fs::write(&src, b"x\n").unwrap();
        let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        fs::File::options()
            .write(true)
            .open(&src)
            .unwrap()
            .set_modified(when)
            .unwrap();
        let tmp = b.join("tmp/x");
        copy_bytes(&src, &tmp, true).unwrap().unwrap();
        assert_eq!(fs::read(&tmp).unwrap(), b"x\n");
        assert_eq!(fs::metadata(&tmp).unwrap().modified().unwrap(), when);
        assert!(copy_bytes(&a.join("new/none"), &b.join("tmp/y"), false)
            .unwrap()
            .is_none());
    }

    #[test]
    fn move_renames_and_reports_vanished_and_find_base_locates() {
        let (_t, a, b) = boxes();
        let src = a.join("cur/3.M1P1.h:2,F");
        fs::write(&src, b"m").unwrap();
        assert_eq!(
            find_base(&a, "3.M1P1.h").unwrap(),
            Some((Sub::Cur, "3.M1P1.h:2,F".into()))
        );
        assert_eq!(
            find_base(&a, "3.M1P1").unwrap(),
            None,
            "a prefix is not a base"
        );
        assert_eq!(
            move_file(&src, &b, Sub::Cur, "3.M1P1.h:2,FS", false).unwrap(),
            MoveOutcome::Moved
        );
        assert!(!src.exists());
        assert!(b.join("cur/3.M1P1.h:2,FS").exists());
        assert_eq!(
            move_file(&src, &b, Sub::Cur, "3.M1P1.h:2,FS", false).unwrap(),
            MoveOutcome::Vanished
        );
        // never replaces
        fs::write(&src, b"other").unwrap();
        assert!(move_file(&src, &b, Sub::Cur, "3.M1P1.h:2,FS", false).is_err());
        assert_eq!(fs::read(b.join("cur/3.M1P1.h:2,FS")).unwrap(), b"m");
    }
}
