//! `[auth.ldap]`: users in an LDAP directory, configured as Dovecot's
//! dovecot-ldap.conf.ext (`uris`, `dn`, `dnpass`, `base`, `scope`, the filters, the
//! `attr=field` mappings, `auth_bind`, `auth_bind_userdn`). The filters, mappings and DN
//! template are checked when the directory is set up (maildex-accounts), as SQL queries
//! are; here only what needs no LDAP knowledge.

use std::time::Duration;

use serde::Deserialize;

use crate::raw::{NonEmpty, Seconds};

/// Default most connections to the directory (searches and auth binds together).
pub const DEFAULT_LDAP_MAX_CONNECTIONS: u32 = 5;

/// Default longest wait for a connection plus one operation's answer.
pub const DEFAULT_LDAP_QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Dovecot's default `user_filter` and `pass_filter`.
pub const DEFAULT_LDAP_FILTER: &str = "(&(objectClass=posixAccount)(uid=%u))";

/// Dovecot's default `iterate_filter`.
pub const DEFAULT_LDAP_ITERATE_FILTER: &str = "(objectClass=posixAccount)";

/// `[auth.ldap]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LdapConfig {
    /// `uris`: servers tried in order, `ldap://host[:port]` or `ldapi://%2Fpath` (a Unix
    /// socket); space-separated as in Dovecot.
    pub uris: Vec<String>,
    /// `dn`: the service account searches are done as (`None`: anonymous).
    pub dn: Option<String>,
    /// `dnpass`: its password.
    pub dnpass: Option<String>,
    /// `base`: where searches start; may hold `%u`, `%n`, `%d` (DN-escaped).
    pub base: String,
    /// `scope`: `base`, `onelevel` or `subtree` (the default).
    pub scope: LdapScope,
    /// `user_filter`: finds the user of a recipient or login (RFC 4515 filter, `%u` etc.
    /// escaped in it).
    pub user_filter: String,
    /// `pass_filter`: finds the entry a login's password is checked against.
    pub pass_filter: String,
    /// `iterate_filter`: every user (admin commands' `--all`).
    pub iterate_filter: String,
    /// `user_attrs`: `ldapAttr=field[=template]`, comma-separated.
    pub user_attrs: String,
    /// `pass_attrs`: the same for the password lookup.
    pub pass_attrs: String,
    /// `iterate_attrs`: which attribute names the user when iterating (`uid=user`).
    pub iterate_attrs: String,
    /// `auth_bind`: check a password by binding as the user's DN instead of reading it.
    pub auth_bind: bool,
    /// `auth_bind_userdn`: the user's DN from a template, without a search.
    pub auth_bind_userdn: Option<String>,
    /// `max_connections`: pool size.
    pub max_connections: u32,
    /// `query_timeout`: longest wait for a connection plus one operation's answer.
    pub query_timeout: Duration,
}

/// `[auth.ldap] scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LdapScope {
    /// The base entry only.
    Base,
    /// The base's children.
    Onelevel,
    /// The base and everything below.
    Subtree,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLdap {
    pub uris: NonEmpty,
    pub dn: Option<NonEmpty>,
    pub dnpass: Option<String>,
    pub base: String,
    pub scope: Option<LdapScope>,
    pub user_filter: Option<NonEmpty>,
    pub pass_filter: Option<NonEmpty>,
    pub iterate_filter: Option<NonEmpty>,
    pub user_attrs: Option<String>,
    pub pass_attrs: Option<String>,
    pub iterate_attrs: Option<NonEmpty>,
    pub auth_bind: Option<bool>,
    pub auth_bind_userdn: Option<NonEmpty>,
    pub max_connections: Option<u32>,
    pub query_timeout: Option<Seconds>,
}

/// Checks `[auth.ldap]`; errors are (key, message).
pub(crate) fn validate(raw: RawLdap) -> Result<LdapConfig, (&'static str, String)> {
    let uris: Vec<String> = raw.uris.0.split_whitespace().map(str::to_owned).collect();
    for u in &uris {
        let lower = u.to_ascii_lowercase();
        if lower.starts_with("ldaps://") {
            return Err((
                "auth.ldap.uris",
                format!("{u}: TLS to the directory is not supported; use ldapi:// or ldap:// on a trusted network"),
            ));
        }
        if !lower.starts_with("ldap://") && !lower.starts_with("ldapi://") {
            return Err((
                "auth.ldap.uris",
                format!("{u}: expected ldap://host[:port] or ldapi://%2Fpath%2Fto%2Fsocket"),
            ));
        }
    }
    let max_connections = raw.max_connections.unwrap_or(DEFAULT_LDAP_MAX_CONNECTIONS);
    if max_connections == 0 {
        return Err(("auth.ldap.max_connections", "must be at least 1".into()));
    }
    let query_timeout = raw
        .query_timeout
        .map_or(DEFAULT_LDAP_QUERY_TIMEOUT, |t| Duration::from_secs(t.0));
    if query_timeout.is_zero() {
        return Err((
            "auth.ldap.query_timeout",
            "must be at least 1 second".into(),
        ));
    }
    let dn = raw.dn.map(|d| d.0);
    if dn.is_some() != raw.dnpass.is_some() {
        return Err(("auth.ldap.dnpass", "set dn and dnpass together".into()));
    }
    let auth_bind = raw.auth_bind.unwrap_or(false);
    if raw.auth_bind_userdn.is_some() && !auth_bind {
        return Err((
            "auth.ldap.auth_bind_userdn",
            "only used with auth_bind = true".into(),
        ));
    }
    let pass_filter = raw.pass_filter.map(|f| f.0);
    let user_filter = raw.user_filter.map(|f| f.0);
    Ok(LdapConfig {
        uris,
        dn,
        dnpass: raw.dnpass,
        base: raw.base,
        scope: raw.scope.unwrap_or(LdapScope::Subtree),
        pass_filter: pass_filter.unwrap_or_else(|| DEFAULT_LDAP_FILTER.to_owned()),
        user_filter: user_filter.unwrap_or_else(|| DEFAULT_LDAP_FILTER.to_owned()),
        iterate_filter: raw
            .iterate_filter
            .map_or_else(|| DEFAULT_LDAP_ITERATE_FILTER.to_owned(), |f| f.0),
        user_attrs: raw.user_attrs.unwrap_or_default(),
        pass_attrs: raw
            .pass_attrs
            .unwrap_or_else(|| "uid=user,userPassword=password".to_owned()),
        iterate_attrs: raw
            .iterate_attrs
            .map_or_else(|| "uid=user".to_owned(), |a| a.0),
        auth_bind,
        auth_bind_userdn: raw.auth_bind_userdn.map(|d| d.0),
        max_connections,
        query_timeout,
    })
}
