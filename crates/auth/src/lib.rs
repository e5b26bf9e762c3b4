//! maildex-auth: the users file.
//!
//! Users live in a file in Dovecot's passwd-file format, so an existing Dovecot
//! users file works unchanged and a file written by `maildex user add` works in
//! Dovecot. This crate loads it ([`UsersFile`]), looks logins up with maildex's
//! address rules ([`UsersFile::lookup`]), verifies passwords in the schemes Dovecot
//! installations use ([`verify`]), hashes new ones with Argon2id ([`hash_password`])
//! and edits the file atomically while the daemon reads it ([`add_user`],
//! [`set_password`], [`remove_user`]).

#![warn(missing_docs)]

mod digest;
mod edit;
mod error;
mod file;
mod hash;
mod name;

pub use edit::{add_user, remove_user, set_password};
pub use error::AuthError;
pub use file::{UserEntry, UsersFile};
pub use hash::{hash_password, verify, verify_unknown_user, PasswordHash};
pub use name::{validate_name, LogName, LOG_NAME_MAX, MAX_NAME_LEN};
