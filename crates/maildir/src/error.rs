//! The one error type of this crate.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Every failure of the Maildir layer. Each variant names the file, directory or
/// name involved so a log line is actionable on its own.
#[derive(Debug, thiserror::Error)]
pub enum MaildirError {
    /// A system call failed on `path`.
    #[error("{op} {}: {error}", path.display())]
    Io {
        /// What we were doing (`"open"`, `"rename"`, ...).
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error (in the message; not a `source()`).
        error: io::Error,
    },
    /// A string that cannot be a Maildir message file name.
    #[error("invalid maildir file name {name:?}: {reason}")]
    BadFileName {
        /// The rejected file name (as given, no directory).
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// An IMAP mailbox name that cannot be mapped to a Maildir++ folder.
    #[error("invalid mailbox name {name:?}: {reason}")]
    BadMailboxName {
        /// The rejected mailbox name.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A control file (`dovecot-uidlist`, `courierimapuiddb`, ...) that does not parse.
    #[error("{} line {line}: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number where the problem was found.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// `dovecot-uidlist.lock` stayed held by a live process past the timeout.
    #[error("timed out after {waited:?} waiting for lock {}", path.display())]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How long we waited.
        waited: Duration,
    },
    /// Our lock file was removed or replaced by another process (it judged it stale).
    #[error("lock {} was overridden by another process", path.display())]
    LockLost {
        /// The lock file.
        path: PathBuf,
    },
    /// Records handed to the uidlist writer that would corrupt it.
    #[error("{}: {reason}", path.display())]
    InvalidRecords {
        /// The uidlist file.
        path: PathBuf,
        /// What is wrong with the records.
        reason: String,
    },
    /// Flags were asked for on a delivery to `new/` (files in `new/` carry no info).
    #[error("{}: flags can only be given for a delivery to cur/", path.display())]
    FlagsInNew {
        /// The mailbox directory.
        path: PathBuf,
    },
    /// Could not find an unused unique file name.
    #[error("{}: no unused unique file name after {attempts} attempts", path.display())]
    NameCollision {
        /// The directory we tried to create a file in.
        path: PathBuf,
        /// How many names were tried.
        attempts: u32,
    },
}

impl MaildirError {
    /// Builds an [`MaildirError::Io`]; a permission error names who lacks what
    /// ([`crate::files::explain_denied`]).
    pub(crate) fn io(op: &'static str, path: impl AsRef<Path>, source: io::Error) -> Self {
        let path = path.as_ref().to_path_buf();
        MaildirError::Io {
            op,
            error: crate::files::explain_denied(&path, source),
            path,
        }
    }

    /// Builds a [`MaildirError::Corrupt`].
    pub(crate) fn corrupt(path: &Path, line: usize, reason: impl Into<String>) -> Self {
        MaildirError::Corrupt {
            path: path.to_path_buf(),
            line,
            reason: reason.into(),
        }
    }

    /// The kind of the underlying I/O error, if this is an I/O failure.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            MaildirError::Io { error, .. } => Some(error.kind()),
            _ => None,
        }
    }

    /// True when a file or directory did not exist (`ENOENT`).
    pub fn is_not_found(&self) -> bool {
        self.io_kind() == Some(io::ErrorKind::NotFound)
    }

    /// The path (or name) this error is about.
    pub fn path(&self) -> &Path {
        match self {
            MaildirError::Io { path, .. }
            | MaildirError::Corrupt { path, .. }
            | MaildirError::LockTimeout { path, .. }
            | MaildirError::LockLost { path }
            | MaildirError::InvalidRecords { path, .. }
            | MaildirError::FlagsInNew { path }
            | MaildirError::NameCollision { path, .. } => path,
            MaildirError::BadFileName { name, .. } | MaildirError::BadMailboxName { name, .. } => {
                Path::new(name.as_str())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_error_names_path_and_kind() {
        let e = MaildirError::io("open", "/x/y", io::Error::from(io::ErrorKind::NotFound));
        assert!(e.is_not_found());
        assert_eq!(e.path(), Path::new("/x/y"));
        assert!(e.to_string().contains("/x/y"), "{e}");
        let c = MaildirError::corrupt(Path::new("/m/dovecot-uidlist"), 7, "bad");
        assert_eq!(c.io_kind(), None);
        assert!(!c.is_not_found());
        assert_eq!(c.to_string(), "/m/dovecot-uidlist line 7: bad");
    }
}
