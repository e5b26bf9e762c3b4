//! `[auth]`: where users come from (the passwd-file, an SQL database or an LDAP directory,
//! as Dovecot's passdb/userdb) and the cache of lookups (Dovecot's `auth_cache_*`).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::ldap::RawLdap;
pub use crate::ldap::{LdapConfig, LdapScope};
use crate::raw::{NonEmpty, Seconds};

/// Default most cached lookups (0 turns the cache off).
pub const DEFAULT_AUTH_CACHE_SIZE: usize = 10_000;

/// Default life of a cached successful lookup: Dovecot's `auth_cache_ttl` (1 hour).
pub const DEFAULT_AUTH_CACHE_TTL: Duration = Duration::from_secs(3600);

/// Default life of a cached "no such user": Dovecot's `auth_cache_negative_ttl` (1 hour).
pub const DEFAULT_AUTH_CACHE_NEGATIVE_TTL: Duration = Duration::from_secs(3600);

/// Default most connections to the SQL server (Dovecot's `maxconns` of a connect string).
pub const DEFAULT_SQL_MAX_CONNECTIONS: u32 = 5;

/// Default longest wait for a connection or a query's answer.
pub const DEFAULT_SQL_QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// `[auth]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthConfig {
    /// The users file, Dovecot passwd-file format (absolute path); `None` when the users
    /// are in SQL ([`AuthConfig::sql`]).
    pub users_file: Option<PathBuf>,
    /// `[auth.sql]`: the users are in a database.
    pub sql: Option<SqlConfig>,
    /// `[auth.ldap]`: the users are in an LDAP directory.
    pub ldap: Option<LdapConfig>,
    /// `cache_size`: most lookups kept (0: no cache).
    pub cache_size: usize,
    /// `cache_ttl`: how long a successful login or a found user is kept.
    pub cache_ttl: Duration,
    /// `cache_negative_ttl`: how long "no such user" is kept.
    pub cache_negative_ttl: Duration,
}

impl AuthConfig {
    /// Users from the passwd-file `users_file`, default cache.
    pub fn file(users_file: PathBuf) -> AuthConfig {
        AuthConfig {
            users_file: Some(users_file),
            sql: None,
            ldap: None,
            cache_size: DEFAULT_AUTH_CACHE_SIZE,
            cache_ttl: DEFAULT_AUTH_CACHE_TTL,
            cache_negative_ttl: DEFAULT_AUTH_CACHE_NEGATIVE_TTL,
        }
    }
}

/// `[auth.sql]`, as Dovecot's dovecot-sql.conf.ext: a driver, a connect string and the
/// queries, with `%u` (whole login), `%n` (local part) and `%d` (domain) in them. They are
/// passed to the server as bound parameters, never pasted into the SQL text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlConfig {
    /// `driver`: `pgsql`, `mysql` or `sqlite`.
    pub driver: SqlDriver,
    /// `connect`: Dovecot's `host=... port=... dbname=... user=... password=...` (for
    /// sqlite a file path), or a URL (`postgres://`, `mysql://`, `sqlite://`).
    pub connect: String,
    /// `password_query`: one row with a `password` column (`{SCHEME}data`) for a login;
    /// optional `user` (the canonical name), `allow_nets` and `userdb_quota_rule` /
    /// `quota_rule` columns.
    pub password_query: String,
    /// `user_query`: one row for a user or recipient (LMTP, `maildex deliver`); optional
    /// `user` and `quota_rule` columns.
    pub user_query: String,
    /// `iterate_query`: every user, in a `user` or `username` column (admin commands).
    pub iterate_query: Option<String>,
    /// `alias_query` (maildex's own, not Dovecot's): the targets of an LMTP recipient
    /// address, one per row in a `destination` column (or the first); no row: not an
    /// alias. Asked after the `[lmtp] aliases_file`, before `user_query`.
    pub alias_query: Option<String>,
    /// `max_connections`: pool size.
    pub max_connections: u32,
    /// `query_timeout`: longest wait for a connection plus a query's answer.
    pub query_timeout: Duration,
}

/// `[auth.sql] driver`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SqlDriver {
    /// PostgreSQL.
    Pgsql,
    /// MariaDB or MySQL.
    Mysql,
    /// SQLite (a file).
    Sqlite,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAuth {
    pub users_file: Option<PathBuf>,
    pub cache_size: Option<usize>,
    pub cache_ttl: Option<Seconds>,
    pub cache_negative_ttl: Option<Seconds>,
    pub sql: Option<RawSql>,
    pub ldap: Option<RawLdap>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSql {
    pub driver: SqlDriver,
    pub connect: NonEmpty,
    pub password_query: NonEmpty,
    pub user_query: NonEmpty,
    pub iterate_query: Option<NonEmpty>,
    pub alias_query: Option<NonEmpty>,
    pub max_connections: Option<u32>,
    pub query_timeout: Option<Seconds>,
}

/// Checks `[auth]`; errors are (key, message).
pub(crate) fn validate(
    raw: Option<RawAuth>,
    resolve: impl Fn(PathBuf) -> PathBuf,
) -> Result<AuthConfig, (&'static str, String)> {
    let raw = raw.unwrap_or_default();
    let sql = match raw.sql {
        None => None,
        Some(s) => {
            let max_connections = s.max_connections.unwrap_or(DEFAULT_SQL_MAX_CONNECTIONS);
            if max_connections == 0 {
                return Err(("auth.sql.max_connections", "must be at least 1".into()));
            }
            let query_timeout = s
                .query_timeout
                .map_or(DEFAULT_SQL_QUERY_TIMEOUT, |t| Duration::from_secs(t.0));
            if query_timeout.is_zero() {
                return Err(("auth.sql.query_timeout", "must be at least 1 second".into()));
            }
            Some(SqlConfig {
                driver: s.driver,
                connect: s.connect.0,
                password_query: s.password_query.0,
                user_query: s.user_query.0,
                iterate_query: s.iterate_query.map(|q| q.0),
                alias_query: s.alias_query.map(|q| q.0),
                max_connections,
                query_timeout,
            })
        }
    };
    let ldap = raw.ldap.map(crate::ldap::validate).transpose()?;
    let users_file = raw.users_file.map(resolve);
    match [users_file.is_some(), sql.is_some(), ldap.is_some()]
        .iter()
        .filter(|&&set| set)
        .count()
    {
        0 => {
            return Err((
                "auth.users_file",
                "missing (or set [auth.sql] or [auth.ldap])".into(),
            ))
        }
        1 => {}
        _ => {
            return Err((
                "auth.users_file",
                "set exactly one of users_file, [auth.sql] and [auth.ldap]".into(),
            ))
        }
    }
    Ok(AuthConfig {
        users_file,
        sql,
        ldap,
        cache_size: raw.cache_size.unwrap_or(DEFAULT_AUTH_CACHE_SIZE),
        cache_ttl: raw
            .cache_ttl
            .map_or(DEFAULT_AUTH_CACHE_TTL, |t| Duration::from_secs(t.0)),
        cache_negative_ttl: raw
            .cache_negative_ttl
            .map_or(DEFAULT_AUTH_CACHE_NEGATIVE_TTL, |t| {
                Duration::from_secs(t.0)
            }),
    })
}
