//! Maildir++ folders (Courier's layout, Dovecot's default `LAYOUT=maildir++`): the root
//! directory is INBOX with its own `cur/ new/ tmp/`; every other mailbox is a
//! directory `.<name>` directly under the root, `.` separating hierarchy levels
//! (`.Foo.Bar` is `Foo.Bar`), the name in modified UTF-7, holding a `maildirfolder`
//! marker file.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::{mutf7, MaildirError};

/// The marker file Maildir++ puts in every folder (not in INBOX).
pub const MAILDIRFOLDER: &str = "maildirfolder";

/// Longest directory name we create: NAME_MAX on Linux filesystems.
pub const MAX_DIR_NAME_BYTES: usize = 255;

/// The directory Dovecot renames a mailbox to while deleting it; never listed.
const DOVECOT_TRASHED: &str = ".DOVECOT-TRASHED";

/// A mailbox found on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Folder {
    /// IMAP name in UTF-8 with `.` as separator; `"INBOX"` for the root.
    pub name: String,
    /// The mailbox directory (the one holding `cur/ new/ tmp/`).
    pub path: PathBuf,
}

/// Whether `path` is a mailbox folder maildex may use: its `cur/` is a directory, and
/// neither `cur/` nor the folder itself (a `.Folder`; the Maildir root may be a link the
/// admin made) is a symbolic link.
pub fn is_mailbox_dir(path: &Path) -> bool {
    let real_dir = |p: &Path| fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    let folder = path
        .file_name()
        .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."));
    (!folder || real_dir(path)) && real_dir(&path.join("cur"))
}

/// Lists INBOX (always, first) and every folder under `root`, the rest sorted by name.
///
/// Skips `.` and `..`, entries that are not directories, symbolic links (Dovecot follows
/// them; we do not, so no folder leads out of the Maildir), directories without `cur/`, Dovecot's `.DOVECOT-TRASHED`, and
/// names that are not valid mailbox names or not valid modified UTF-7 (with a
/// warning naming the directory).
pub fn list_folders(root: &Path) -> Result<Vec<Folder>, MaildirError> {
    let rd = fs::read_dir(root).map_err(|e| MaildirError::io("readdir", root, e))?;
    let mut folders = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| MaildirError::io("readdir", root, e))?;
        let os_name = entry.file_name();
        let Some(dir_name) = os_name.to_str() else {
            tracing::warn!(dir = %entry.path().display(), "skipping folder with non-UTF-8 name");
            continue;
        };
        let Some(encoded) = dir_name.strip_prefix('.') else {
            continue;
        };
        if encoded.is_empty() || encoded == "." || dir_name == DOVECOT_TRASHED {
            continue;
        }
        let path = entry.path();
        // a folder that is a symbolic link (or whose cur/ is) is never followed: it could
        // lead out of the user's Maildir (issue 15 #2)
        if fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            tracing::warn!(dir = %path.display(), "skipping folder: a symbolic link is not followed");
            continue;
        }
        if !is_mailbox_dir(&path) {
            continue;
        }
        let name = match mutf7::decode(encoded) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(dir = %path.display(), error = %e, "skipping folder: name is not valid modified UTF-7");
                continue;
            }
        };
        if let Err(e) = validate_name(&name) {
            tracing::warn!(dir = %path.display(), error = %e, "skipping folder with invalid name");
            continue;
        }
        if name.eq_ignore_ascii_case("INBOX") {
            // `.INBOX` would shadow the root INBOX; it cannot be addressed.
            tracing::warn!(dir = %path.display(), "skipping folder named INBOX");
            continue;
        }
        folders.push(Folder { name, path });
    }
    folders.sort_by(|a, b| a.name.cmp(&b.name));
    folders.insert(
        0,
        Folder {
            name: "INBOX".to_string(),
            path: root.to_path_buf(),
        },
    );
    Ok(folders)
}

/// Checks an IMAP mailbox name (not INBOX) against the Maildir++ rules Dovecot applies
/// (`maildir_is_valid_create_name`): no empty hierarchy level (so no leading,
/// trailing or doubled `.`), no `/`, no NUL; and not the reserved `DOVECOT-TRASHED`.
fn validate_name(name: &str) -> Result<(), MaildirError> {
    let bad = |reason| MaildirError::BadMailboxName {
        name: name.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(bad("empty name"));
    }
    if name.contains('/') {
        return Err(bad("contains '/'"));
    }
    if name.contains('\0') {
        return Err(bad("contains NUL"));
    }
    if name.starts_with('.') || name.ends_with('.') {
        return Err(bad("starts or ends with the '.' separator"));
    }
    if name.split('.').any(str::is_empty) {
        return Err(bad("empty hierarchy level ('..')"));
    }
    // `.DOVECOT-TRASHED` is where DELETE (ours and Dovecot's) moves a folder to remove
    // it, wiping whatever is there: never a mailbox
    if name.eq_ignore_ascii_case(&DOVECOT_TRASHED[1..]) {
        return Err(bad("reserved for DELETE (Dovecot's trash folder)"));
    }
    Ok(())
}

/// Maps an IMAP mailbox name to its directory: `"INBOX"` (any case) is `root`, any
/// other name `root/.<modified UTF-7 of name>`. Rejects names that are empty, have
/// an empty hierarchy level (leading, trailing or doubled `.`, which also rules out
/// `..`), contain `/` or NUL, or whose directory name would exceed 255 bytes.
pub fn folder_path(root: &Path, name: &str) -> Result<PathBuf, MaildirError> {
    if name.eq_ignore_ascii_case("INBOX") {
        return Ok(root.to_path_buf());
    }
    validate_name(name)?;
    let dir = format!(".{}", mutf7::encode(name));
    if dir.len() > MAX_DIR_NAME_BYTES {
        return Err(MaildirError::BadMailboxName {
            name: name.to_string(),
            reason: "directory name longer than 255 bytes",
        });
    }
    Ok(root.join(dir))
}

fn mkdir_0700(path: &Path) -> Result<(), MaildirError> {
    match DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(e) => Err(MaildirError::io("mkdir", path, e)),
    }
}

/// Creates a mailbox directory with `tmp/ new/ cur/` (mode 0700) and, for a folder,
/// the `maildirfolder` marker. Idempotent. `cur/` is made last because
/// [`list_folders`] only lists directories that have it, so a half-made folder is
/// never listed. The parent of `path` must exist.
pub fn create_mailbox(path: &Path, is_folder: bool) -> Result<(), MaildirError> {
    mkdir_0700(path)?;
    mkdir_0700(&path.join("tmp"))?;
    mkdir_0700(&path.join("new"))?;
    if is_folder {
        let marker = path.join(MAILDIRFOLDER);
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&marker)
            .map_err(|e| MaildirError::io("create", &marker, e))?;
    }
    mkdir_0700(&path.join("cur"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn folder_path_maps_names() {
        let root = Path::new("/m");
        assert_eq!(folder_path(root, "INBOX").unwrap(), root);
        assert_eq!(folder_path(root, "inBox").unwrap(), root);
        assert_eq!(
            folder_path(root, "Foo.Bar").unwrap(),
            Path::new("/m/.Foo.Bar")
        );
        assert_eq!(
            folder_path(root, "Entwürfe").unwrap(),
            Path::new("/m/.Entw&APw-rfe")
        );
        assert_eq!(folder_path(root, "A&B").unwrap(), Path::new("/m/.A&-B"));
        // INBOX children are ordinary folders.
        assert_eq!(
            folder_path(root, "INBOX.x").unwrap(),
            Path::new("/m/.INBOX.x")
        );
    }

    #[test]
    fn folder_path_rejects_bad_names() {
        let long = "x".repeat(255);
        for bad in [
            "",
            ".",
            "..",
            ".a",
            "a.",
            "a..b",
            "a/b",
            "../x",
            "a\0b",
            long.as_str(),
            "DOVECOT-TRASHED",
            "Dovecot-Trashed",
        ] {
            let e = folder_path(Path::new("/m"), bad).unwrap_err();
            assert!(matches!(e, MaildirError::BadMailboxName { .. }), "{bad:?}");
        }
        // only the top level is reserved
        assert!(folder_path(Path::new("/m"), "a.DOVECOT-TRASHED").is_ok());
        // 254 bytes plus the leading '.' is exactly the limit.
        assert!(folder_path(Path::new("/m"), &"x".repeat(254)).is_ok());
    }

    #[test]
    fn create_is_idempotent_and_listing_finds_folders() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        create_mailbox(root, false).unwrap();
        create_mailbox(root, false).unwrap();
        assert!(!root.join(MAILDIRFOLDER).exists());
        for name in ["Sent", "Archive.2024", "Entwürfe"] {
            let p = folder_path(root, name).unwrap();
            create_mailbox(&p, true).unwrap();
            create_mailbox(&p, true).unwrap();
            assert!(p.join(MAILDIRFOLDER).is_file());
            let mode = fs::metadata(p.join("cur")).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        // Things that must not be listed.
        fs::create_dir(root.join(".NoCur")).unwrap();
        fs::write(root.join(".afile"), b"x").unwrap();
        fs::create_dir_all(root.join(".&AGE-/cur")).unwrap(); // non-canonical
        fs::create_dir_all(root.join(".bad..name/cur")).unwrap();
        fs::create_dir_all(root.join(".DOVECOT-TRASHED/cur")).unwrap();
        fs::create_dir_all(root.join("plain/cur")).unwrap();
        // A symlink to a folder, or a folder whose cur/ is one, is not followed (issue 15 #2).
        std::os::unix::fs::symlink(root.join(".Sent"), root.join(".Linked")).unwrap();
        fs::create_dir(root.join(".LinkedCur")).unwrap();
        std::os::unix::fs::symlink(root.join(".Sent/cur"), root.join(".LinkedCur/cur")).unwrap();

        let got: Vec<String> = list_folders(root)
            .unwrap()
            .into_iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(got, vec!["INBOX", "Archive.2024", "Entwürfe", "Sent"]);
        let all = list_folders(root).unwrap();
        assert_eq!(all[0].path, root);
        assert_eq!(all[2].path, root.join(".Entw&APw-rfe"));
    }

    #[test]
    fn create_fails_without_parent_and_listing_fails_without_root() {
        let tmp = tempfile::tempdir().unwrap();
        let e = create_mailbox(&tmp.path().join("a/b"), true).unwrap_err();
        assert!(e.is_not_found(), "{e}");
        let e = list_folders(&tmp.path().join("missing")).unwrap_err();
        assert!(e.is_not_found());
    }
}
