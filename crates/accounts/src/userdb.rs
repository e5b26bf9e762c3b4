//! The user directory behind [`crate::Accounts`], as Dovecot's passdb and userdb: a
//! [`UserDb`] answers password lookups (IMAP login), user lookups (LMTP RCPT, `maildex
//! deliver`) and lists every user (admin commands). The passwd-file
//! ([`crate::filedb::FileDb`]), SQL ([`crate::sql::SqlDb`]) and LDAP
//! ([`crate::ldap::LdapDb`]) are the backends; a lookup
//! that cannot be done (database down, timeout) is [`Unavailable`], never "no such user".

use maildex_auth::PasswordHash;

use crate::nets::AllowNets;
use crate::User;

/// A lookup that could not be done now (the directory is down or slow): the caller
/// answers with a temporary failure (`NO [UNAVAILABLE]`, `451 4.3.0`, EX_TEMPFAIL).
#[derive(Debug, Clone, thiserror::Error)]
#[error("user directory unavailable: {0}")]
pub struct Unavailable(pub String);

/// What a password lookup found.
#[derive(Debug, Clone)]
pub struct PassRecord {
    /// The user (canonical name and quota).
    pub user: User,
    /// The stored password, `{SCHEME}data`.
    pub password: PasswordHash,
    /// Where the user may log in from (`allow_nets`); `None`: anywhere.
    pub(crate) allow_nets: Option<AllowNets>,
    /// LDAP `auth_bind`: the DN whose bind checks the password (`password` is then unused).
    pub(crate) bind_dn: Option<String>,
}

/// One source of users. Lookups BLOCK (file system or network): call them off the
/// async reactor unless [`UserDb::in_memory`].
pub trait UserDb: Send + Sync + std::fmt::Debug {
    /// The password record of a login (passdb), `Ok(None)` when there is no such user.
    fn password(&self, login: &str) -> Result<Option<PassRecord>, Unavailable>;
    /// Whether `password` is the login's: the stored hash checked by the scheme's
    /// verifier, or (LDAP `auth_bind`) a bind as the user. A hash this server cannot
    /// check fails like a wrong password.
    fn check_password(&self, rec: &PassRecord, password: &[u8]) -> Result<bool, Unavailable> {
        Ok(verify_hash(rec, password))
    }
    /// The user a login name or a recipient address names (userdb).
    fn user(&self, login: &str) -> Result<Option<User>, Unavailable>;
    /// The user a password record logs in as: the record's own (the passwd-file), or a
    /// userdb lookup after the passdb's (SQL: `user_query` gives the quota).
    fn login_user(&self, rec: &PassRecord) -> Result<Option<User>, Unavailable> {
        Ok(Some(rec.user.clone()))
    }
    /// The targets of `address` when the directory has it as an alias (`Ok(None)`: not an
    /// alias). Only SQL's `alias_query`; the aliases file is read by [`crate::Accounts`].
    fn aliases(&self, _address: &str) -> Result<Option<Vec<String>>, Unavailable> {
        Ok(None)
    }
    /// Whether [`UserDb::aliases`] can find anything (an `alias_query` is set).
    fn has_aliases(&self) -> bool {
        false
    }
    /// Every user's name (`iterate_query`; the admin commands' `--all`).
    fn iterate(&self) -> Result<Vec<String>, Unavailable>;
    /// The hash an unknown user's password is checked against, so that a failed login
    /// takes the same time whether or not the user exists.
    fn timing_reference(&self) -> Option<PasswordHash>;
    /// True when lookups need neither the file system nor the network.
    fn in_memory(&self) -> bool;
    /// `(user, scheme)` for each user with a weak password scheme, where the backend can
    /// tell without a query (the passwd-file); empty otherwise.
    fn weak_schemes(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Queries sent to a database so far (tests and the cache's log lines); 0 for a file.
    fn queries(&self) -> u64 {
        0
    }
}

/// `password` checked against the record's stored hash by its scheme's verifier; a hash
/// this server cannot check fails like a wrong password (logged at debug).
pub(crate) fn verify_hash(rec: &PassRecord, password: &[u8]) -> bool {
    maildex_auth::verify(&rec.password, password).unwrap_or_else(|e| {
        tracing::debug!(user = %rec.user.name, error = %e, "password hash cannot be checked");
        false
    })
}
