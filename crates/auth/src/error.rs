//! The error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong while reading, editing or checking a users file.
///
/// Variants that concern a file name it, so the message a CLI or a log prints is
/// enough to find the problem.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The users file does not exist.
    #[error("users file {0} does not exist")]
    NotFound(PathBuf),

    /// Reading, writing, locking or renaming a file failed.
    #[error("{op} {path}: {error}")]
    Io {
        /// What we were doing ("read", "rename", ...).
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error (in the message; not a `source()`).
        error: std::io::Error,
    },

    /// A line of the users file is not a valid passwd-file entry.
    #[error("{path}:{line}: {reason}")]
    Parse {
        /// The users file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with the line.
        reason: String,
    },

    /// The `{SCHEME}` of a password is not one this crate can verify.
    #[error("unsupported password scheme {0}")]
    UnsupportedScheme(String),

    /// The password data does not have the shape its scheme requires.
    #[error("malformed {scheme} password hash: {reason}")]
    MalformedHash {
        /// The scheme whose format was violated.
        scheme: String,
        /// What is wrong.
        reason: String,
    },

    /// Hashing a new password failed.
    #[error("hashing the password failed: {0}")]
    Hash(String),

    /// A user name that cannot be stored in a users file (or used in a path).
    #[error("invalid user name {name:?}: {reason}")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// Which rule it breaks.
        reason: &'static str,
    },

    /// A password hash that cannot be written to a passwd-file line.
    #[error("password hash cannot be stored in a passwd-file line: {0}")]
    InvalidHash(&'static str),

    /// `add_user` found the name already present.
    #[error("{path}: user {name} already exists")]
    UserExists {
        /// The users file.
        path: PathBuf,
        /// The name that exists.
        name: String,
    },

    /// `set_password` / `remove_user` did not find the name.
    #[error("{path}: no user {name}")]
    NoSuchUser {
        /// The users file.
        path: PathBuf,
        /// The name that was asked for.
        name: String,
    },

    /// Another process held the edit lock for too long.
    #[error(
        "{path}: timed out waiting for the edit lock (another `maildex user` command running?)"
    )]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
    },
}

impl AuthError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        AuthError::Io {
            op,
            path: path.into(),
            error: source,
        }
    }
}
