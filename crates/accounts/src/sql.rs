//! The SQL backend of [`crate::userdb::UserDb`] (PostgreSQL, MariaDB/MySQL, SQLite through
//! sqlx), configured as Dovecot's dovecot-sql.conf.ext: `password_query`, `user_query` and
//! `iterate_query` with `%u`, `%n` and `%d` in them.
//!
//! The variables are never pasted into the SQL text: each one (with the quotes Dovecot's
//! queries put around it, `'%u'`) becomes a bound parameter (`$1` for PostgreSQL, `?` for
//! the others), so a login name such as `x' OR '1'='1` is compared as the string it is.
//!
//! sqlx is async; the daemon's callers are synchronous (they run on the blocking pool, or
//! in `maildex deliver`). So the pool lives on a runtime of its own (one worker thread),
//! and a lookup sends its query there and waits for the answer, at most `query_timeout`
//! (the wait for a free connection included). A failure of any kind (server down, refused
//! login, timeout, an SQL error in a query) is [`Unavailable`]: a temporary failure for
//! the client, never "no such user".

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;
use std::time::Duration;

use maildex_auth::PasswordHash;
use maildex_config::{SqlConfig, SqlDriver};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::AnyPool;
use sqlx::{Column, Row};

use crate::nets::AllowNets;
use crate::remote::{acceptable_name, Reachability};
use crate::userdb::{PassRecord, Unavailable, UserDb};
use crate::{quota, Owner, User};

/// A query variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Var {
    /// `%u`, `%{user}`: the whole login.
    User,
    /// `%n`, `%{username}`: the part before `@`.
    Local,
    /// `%d`, `%{domain}`: the part after `@` (empty without one).
    Domain,
}

/// A query as sent: the SQL text with placeholders and the variables bound to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Query {
    sql: String,
    vars: Vec<Var>,
}

/// Why a query or a connect string is refused at start-up.
#[derive(Debug, thiserror::Error)]
pub enum SqlConfigError {
    /// A query the variables cannot be bound in.
    #[error("[auth.sql] {key}: {reason}")]
    Query {
        /// `password_query`, `user_query` or `iterate_query`.
        key: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A connect string that is not understood.
    #[error("[auth.sql] connect: {0}")]
    Connect(String),
    /// The runtime for the pool could not start.
    #[error("[auth.sql]: cannot start the database runtime: {0}")]
    Runtime(std::io::Error),
}

/// Turns a Dovecot query into SQL with placeholders. Outside quotes, `%u` becomes a
/// placeholder; a quoted string that is exactly one variable (`'%u'`) becomes one
/// placeholder without the quotes; a variable inside a longer quoted string
/// (`'%n@%d'`) is refused (it would need pasting). `%%` is a `%`; `%L` before a variable
/// (Dovecot's lower-case modifier) is accepted: names are lower-cased anyway.
pub(crate) fn parse_query(
    key: &'static str,
    text: &str,
    driver: SqlDriver,
) -> Result<Query, SqlConfigError> {
    let err = |reason: String| SqlConfigError::Query { key, reason };
    let mut sql = String::with_capacity(text.len());
    let mut vars = Vec::new();
    let mut chars = text.chars().peekable();
    let placeholder = |vars: &mut Vec<Var>, sql: &mut String, v: Var| {
        vars.push(v);
        match driver {
            SqlDriver::Pgsql => sql.push_str(&format!("${}", vars.len())),
            SqlDriver::Mysql | SqlDriver::Sqlite => sql.push('?'),
        }
    };
    // (quote char, literal text so far, variables in it)
    let mut literal: Option<(char, String, Vec<Var>)> = None;
    while let Some(c) = chars.next() {
        if c == '%' {
            let v = match read_var(&mut chars).map_err(err)? {
                None => {
                    match &mut literal {
                        Some((_, s, _)) => s.push('%'),
                        None => sql.push('%'),
                    }
                    continue;
                }
                Some(v) => v,
            };
            match &mut literal {
                Some((_, _, lv)) => lv.push(v),
                None => placeholder(&mut vars, &mut sql, v),
            }
            continue;
        }
        match &mut literal {
            None if c == '\'' || c == '"' => literal = Some((c, String::new(), Vec::new())),
            None => sql.push(c),
            Some((q, s, lv)) if c == *q => {
                if chars.peek() == Some(q) {
                    // a doubled quote inside the literal
                    chars.next();
                    s.push(c);
                    s.push(c);
                    continue;
                }
                match (lv.as_slice(), s.is_empty()) {
                    ([], _) => {
                        sql.push(*q);
                        sql.push_str(s);
                        sql.push(*q);
                    }
                    ([v], true) => placeholder(&mut vars, &mut sql, *v),
                    _ => {
                        return Err(err(format!(
                            "a %-variable must stand alone in its quotes ({q}%u{q}); \
                             join parts in SQL instead, e.g. CONCAT({q}%n{q}, '@', {q}%d{q})"
                        )))
                    }
                }
                literal = None;
            }
            Some((_, s, _)) => s.push(c),
        }
    }
    if literal.is_some() {
        return Err(err("unterminated quote".into()));
    }
    Ok(Query { sql, vars })
}

/// Reads what follows a `%`: `None` for `%%`.
pub(crate) fn read_var(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
) -> Result<Option<Var>, String> {
    if chars.peek() == Some(&'L') {
        chars.next();
    }
    match chars.next() {
        Some('%') => Ok(None),
        Some('u') => Ok(Some(Var::User)),
        Some('n') => Ok(Some(Var::Local)),
        Some('d') => Ok(Some(Var::Domain)),
        Some('{') => {
            let name: String = chars.by_ref().take_while(|&c| c != '}').collect();
            match name.as_str() {
                "user" => Ok(Some(Var::User)),
                "username" => Ok(Some(Var::Local)),
                "domain" => Ok(Some(Var::Domain)),
                _ => Err(format!("unknown variable %{{{name}}} (known: %u %n %d)")),
            }
        }
        Some(c) => Err(format!(
            "unknown variable %{c} (known: %u %n %d, %% for a %)"
        )),
        None => Err("a % at the end".into()),
    }
}

/// The URL sqlx connects with, from Dovecot's `host=... dbname=...` form (or a URL as is).
pub(crate) fn connect_url(driver: SqlDriver, connect: &str) -> Result<String, SqlConfigError> {
    let connect = connect.trim();
    if connect.contains("://") || connect.starts_with("sqlite:") {
        return Ok(connect.to_owned());
    }
    if driver == SqlDriver::Sqlite {
        return Ok(format!("sqlite://{connect}"));
    }
    let (mut host, mut port, mut db, mut user, mut password) = (None, None, None, None, None);
    let mut params = Vec::new();
    for pair in connect.split_whitespace() {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| SqlConfigError::Connect(format!("{pair:?} is not key=value")))?;
        match k {
            "host" => host = Some(v),
            "port" => port = Some(v),
            "dbname" => db = Some(v),
            "user" => user = Some(v),
            "password" => password = Some(v),
            "sslmode" if driver == SqlDriver::Pgsql => params.push(format!("sslmode={v}")),
            _ => return Err(SqlConfigError::Connect(format!("unknown key {k:?}"))),
        }
    }
    let scheme = match driver {
        SqlDriver::Pgsql => "postgres",
        _ => "mysql",
    };
    let mut url = format!("{scheme}://");
    if let Some(u) = user {
        url.push_str(&encode(u));
        if let Some(p) = password {
            url.push(':');
            url.push_str(&encode(p));
        }
        url.push('@');
    }
    match host {
        Some(h) if h.starts_with('/') => {
            url.push_str("localhost");
            let key = if driver == SqlDriver::Pgsql {
                "host"
            } else {
                "socket"
            };
            params.push(format!("{key}={}", encode(h)));
        }
        Some(h) => url.push_str(h),
        None => url.push_str("localhost"),
    }
    if let Some(p) = port {
        url.push(':');
        url.push_str(p);
    }
    url.push('/');
    if let Some(d) = db {
        url.push_str(&encode(d));
    }
    if !params.is_empty() {
        url.push('?');
        url.push_str(&params.join("&"));
    }
    Ok(url)
}

/// Percent-encodes all but RFC 3986's unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Users in an SQL database. See the module docs.
pub(crate) struct SqlDb {
    runtime: Option<tokio::runtime::Runtime>,
    pool: AnyPool,
    password_query: Query,
    user_query: Query,
    iterate_query: Option<Query>,
    alias_query: Option<Query>,
    timeout: Duration,
    default_quota: Option<u64>,
    queries: AtomicU64,
    /// An Argon2id hash with `hash_password`'s parameters: what a failed login is timed
    /// against (the database's schemes are not known in advance).
    timing_reference: Option<PasswordHash>,
    /// Whether a lookup just found the server unreachable.
    reachability: Reachability,
    /// Columns seen that mean nothing here, warned about once each.
    warned: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl std::fmt::Debug for SqlDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlDb")
            .field("password_query", &self.password_query.sql)
            .finish_non_exhaustive()
    }
}

impl Drop for SqlDb {
    fn drop(&mut self) {
        // may run inside the daemon's runtime, where a blocking shutdown would panic
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

static DRIVERS: Once = Once::new();

impl SqlDb {
    /// Checks the queries and sets up the pool. Connects lazily: a database that is down at
    /// start-up fails the lookups (temporarily) until it is back, not the start.
    pub(crate) fn new(
        config: &SqlConfig,
        default_quota: Option<u64>,
    ) -> Result<SqlDb, SqlConfigError> {
        DRIVERS.call_once(sqlx::any::install_default_drivers);
        let d = config.driver;
        let password_query = parse_query("password_query", &config.password_query, d)?;
        let user_query = parse_query("user_query", &config.user_query, d)?;
        let iterate_query = config
            .iterate_query
            .as_deref()
            .map(|q| parse_query("iterate_query", q, d))
            .transpose()?;
        let alias_query = config
            .alias_query
            .as_deref()
            .map(|q| parse_query("alias_query", q, d))
            .transpose()?;
        let url = connect_url(d, &config.connect)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("maildex-sql")
            .enable_all()
            .build()
            .map_err(SqlConfigError::Runtime)?;
        let pool = {
            let _rt = runtime.enter();
            AnyPoolOptions::new()
                .max_connections(config.max_connections)
                .min_connections(0)
                .acquire_timeout(config.query_timeout)
                .idle_timeout(Some(Duration::from_secs(60)))
                .connect_lazy(&url)
                .map_err(|e| SqlConfigError::Connect(e.to_string()))?
        };
        Ok(SqlDb {
            runtime: Some(runtime),
            pool,
            password_query,
            user_query,
            iterate_query,
            alias_query,
            timeout: config.query_timeout,
            default_quota,
            queries: AtomicU64::new(0),
            timing_reference: maildex_auth::hash_password(b"timing reference").ok(),
            reachability: Reachability::new("[auth.sql]"),
            warned: Default::default(),
        })
    }

    /// Runs `query` for `login` and returns its rows (BLOCKING, at most the timeout).
    fn run(&self, query: &Query, login: &str) -> Result<Vec<AnyRow>, Unavailable> {
        let (local, domain) = login.split_once('@').unwrap_or((login, ""));
        let binds: Vec<String> = query
            .vars
            .iter()
            .map(|v| {
                match v {
                    Var::User => login,
                    Var::Local => local,
                    Var::Domain => domain,
                }
                .to_owned()
            })
            .collect();
        let sql = query.sql.clone();
        let pool = self.pool.clone();
        let timeout = self.timeout;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.reachability.check()?;
        let rt = self
            .runtime
            .as_ref()
            .ok_or_else(|| Unavailable("shut down".into()))?;
        self.queries.fetch_add(1, Ordering::Relaxed);
        rt.spawn(async move {
            let mut q = sqlx::query(&sql);
            for b in binds {
                q = q.bind(b);
            }
            let r = tokio::time::timeout(timeout, q.fetch_all(&pool)).await;
            let _ = tx.send(r);
        });
        let (answer, unreachable) = match rx.recv_timeout(timeout + Duration::from_secs(1)) {
            Ok(Ok(Ok(rows))) => (Ok(rows), false),
            // an SQL error is the query's, not the server's state
            Ok(Ok(Err(e @ sqlx::Error::Database(_)))) => (Err(Unavailable(e.to_string())), false),
            Ok(Ok(Err(e))) => (Err(Unavailable(e.to_string())), true),
            Ok(Err(_)) | Err(_) => (
                Err(Unavailable(format!(
                    "no answer within {} s",
                    timeout.as_secs()
                ))),
                true,
            ),
        };
        self.reachability.record(unreachable, &answer);
        answer
    }

    /// The one row a lookup expects; more than one is a directory error (Dovecot logs
    /// it and fails the lookup).
    fn one_row(&self, query: &Query, login: &str) -> Result<Option<AnyRow>, Unavailable> {
        if !acceptable_name(login) {
            return Ok(None);
        }
        let mut rows = self.run(query, login)?;
        if rows.len() > 1 {
            return Err(Unavailable(format!(
                "{} rows for one user; the query must return at most one",
                rows.len()
            )));
        }
        Ok(rows.pop())
    }

    fn user_from_row(&self, row: &AnyRow, login: &str) -> Result<User, Unavailable> {
        // Dovecot's forms: `user` (whole name), or `username` and `domain`; a `user`
        // without a domain gets the `domain` column's
        let user = match text(row, "user")? {
            Some(u) => Some(u),
            None => text(row, "username")?,
        };
        let name = match (user, text(row, "domain")?) {
            (Some(u), Some(d)) if !u.contains('@') && !d.is_empty() => format!("{u}@{d}"),
            (Some(u), _) => u,
            (None, _) => login.to_owned(),
        };
        let mut quota = self.default_quota;
        for col in ["userdb_quota_rule", "quota_rule"] {
            if let Some(rule) = text(row, col)? {
                let field = vec![format!("quota_rule={rule}")];
                match quota::rule_from_extra(&field) {
                    Ok(Some(q)) => quota = q,
                    Ok(None) => {}
                    Err(e) => return Err(Unavailable(format!("user {name}: {e}"))),
                }
            }
        }
        // Dovecot's userdb fields, with or without the `userdb_` prefix (crate::owner)
        let uid = match text(row, "userdb_uid")? {
            Some(v) => Some(v),
            None => text(row, "uid")?,
        };
        let gid = match text(row, "userdb_gid")? {
            Some(v) => Some(v),
            None => text(row, "gid")?,
        };
        let owner = Owner::parse(uid.as_deref(), gid.as_deref())
            .map_err(|e| Unavailable(format!("user {name}: {e}")))?;
        Ok(User { name, quota, owner })
    }

    /// Warns once per column that this server does not use.
    fn note_columns(&self, row: &AnyRow, known: &[&str]) {
        for c in row.columns() {
            let n = c.name();
            if known.contains(&n) {
                continue;
            }
            let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
            if warned.insert(n.to_owned()) {
                tracing::warn!(column = n, "[auth.sql] query column not supported; ignored");
            }
        }
    }
}

/// A column as text (a number as its digits); `None` for NULL or a missing column.
fn text(row: &AnyRow, col: &str) -> Result<Option<String>, Unavailable> {
    if row.columns().iter().all(|c| c.name() != col) {
        return Ok(None);
    }
    let bad = |e: sqlx::Error| Unavailable(format!("column {col}: {e}"));
    if let Ok(v) = row.try_get::<Option<String>, _>(col) {
        return Ok(v);
    }
    if let Ok(v) = row.try_get::<Option<i64>, _>(col) {
        return Ok(v.map(|n| n.to_string()));
    }
    if let Ok(v) = row.try_get::<Option<i32>, _>(col) {
        return Ok(v.map(|n| n.to_string()));
    }
    row.try_get::<Option<Vec<u8>>, _>(col)
        .map(|v| v.map(|b| String::from_utf8_lossy(&b).into_owned()))
        .map_err(bad)
}

const PASS_COLUMNS: &[&str] = &[
    "password",
    "user",
    "username",
    "domain",
    "allow_nets",
    "quota_rule",
    "userdb_quota_rule",
    "uid",
    "gid",
    "userdb_uid",
    "userdb_gid",
];
const USER_COLUMNS: &[&str] = &[
    "user",
    "username",
    "domain",
    "quota_rule",
    "userdb_quota_rule",
    "uid",
    "gid",
    "userdb_uid",
    "userdb_gid",
];

impl UserDb for SqlDb {
    fn password(&self, login: &str) -> Result<Option<PassRecord>, Unavailable> {
        let login = login.to_ascii_lowercase();
        let Some(row) = self.one_row(&self.password_query, &login)? else {
            return Ok(None);
        };
        self.note_columns(&row, PASS_COLUMNS);
        let user = self.user_from_row(&row, &login)?;
        // NULL: no password, which never verifies
        let password = PasswordHash::parse(&text(&row, "password")?.unwrap_or_default());
        let allow_nets = text(&row, "allow_nets")?
            .map(|v| AllowNets::parse(&v))
            .transpose()
            .map_err(|e| Unavailable(format!("user {}: {e}", user.name)))?;
        Ok(Some(PassRecord {
            user,
            password,
            allow_nets,
            bind_dn: None,
        }))
    }

    fn user(&self, login: &str) -> Result<Option<User>, Unavailable> {
        let login = login.to_ascii_lowercase();
        let Some(row) = self.one_row(&self.user_query, &login)? else {
            return Ok(None);
        };
        self.note_columns(&row, USER_COLUMNS);
        self.user_from_row(&row, &login).map(Some)
    }

    fn login_user(&self, rec: &PassRecord) -> Result<Option<User>, Unavailable> {
        // Dovecot's userdb lookup after the passdb's: the quota comes from user_query
        self.user(&rec.user.name)
    }

    fn has_aliases(&self) -> bool {
        self.alias_query.is_some()
    }

    fn aliases(&self, address: &str) -> Result<Option<Vec<String>>, Unavailable> {
        let Some(q) = &self.alias_query else {
            return Ok(None);
        };
        let address = address.to_ascii_lowercase();
        if !acceptable_name(&address) {
            return Ok(None);
        }
        let mut targets = Vec::new();
        for row in self.run(q, &address)? {
            let col = match row.columns().iter().any(|c| c.name() == "destination") {
                true => "destination".to_owned(),
                false => match row.columns().first() {
                    Some(c) => c.name().to_owned(),
                    None => continue,
                },
            };
            // a row may list several targets, comma-separated (postfix's alias form)
            if let Some(v) = text(&row, &col)? {
                targets.extend(
                    v.split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(str::to_owned),
                );
            }
        }
        Ok((!targets.is_empty()).then_some(targets))
    }

    fn iterate(&self) -> Result<Vec<String>, Unavailable> {
        let Some(q) = &self.iterate_query else {
            return Err(Unavailable("[auth.sql] iterate_query is not set".into()));
        };
        let rows = self.run(q, "")?;
        let mut names = Vec::with_capacity(rows.len());
        for row in &rows {
            let name = match text(row, "user")? {
                Some(n) => Some(n),
                None => text(row, "username")?,
            };
            let name = match name {
                Some(n) => n,
                None => match row.columns().first() {
                    Some(c) => text(row, c.name())?.unwrap_or_default(),
                    None => continue,
                },
            };
            if !name.is_empty() {
                names.push(name);
            }
        }
        Ok(names)
    }

    fn timing_reference(&self) -> Option<PasswordHash> {
        self.timing_reference.clone()
    }

    fn in_memory(&self) -> bool {
        false
    }

    fn queries(&self) -> u64 {
        self.queries.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(q: &str, d: SqlDriver) -> Result<Query, SqlConfigError> {
        parse_query("password_query", q, d)
    }

    #[test]
    fn variables_become_placeholders_without_their_quotes() {
        let q = parse(
            "SELECT password FROM users WHERE userid = '%u' AND domain = \"%d\" AND n = %Ln",
            SqlDriver::Pgsql,
        )
        .unwrap();
        assert_eq!(
            q.sql,
            "SELECT password FROM users WHERE userid = $1 AND domain = $2 AND n = $3"
        );
        assert_eq!(q.vars, vec![Var::User, Var::Domain, Var::Local]);
        let q = parse(
            "SELECT 'it''s %%' AS x, password FROM u WHERE a = '%{user}' AND b LIKE 'x%%'",
            SqlDriver::Mysql,
        )
        .unwrap();
        assert_eq!(
            q.sql,
            "SELECT 'it''s %' AS x, password FROM u WHERE a = ? AND b LIKE 'x%'"
        );
        for bad in [
            "WHERE a = '%n@%d'",
            "WHERE a = 'x%u'",
            "WHERE a = %q",
            "a = '%u",
            "%",
        ] {
            assert!(parse(bad, SqlDriver::Pgsql).is_err(), "{bad}");
        }
    }

    /// A SQLite file with `rows` in `users(userid, password, quota_rule)`.
    fn sqlite_file(path: &std::path::Path, rows: &[(&str, &str, Option<&str>)]) {
        DRIVERS.call_once(sqlx::any::install_default_drivers);
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let pool = AnyPool::connect(&url).await.unwrap();
            sqlx::query(
                "CREATE TABLE users (userid TEXT PRIMARY KEY, password TEXT, quota_rule TEXT)",
            )
            .execute(&pool)
            .await
            .unwrap();
            for (u, p, q) in rows {
                sqlx::query("INSERT INTO users VALUES (?, ?, ?)")
                    .bind(*u)
                    .bind(*p)
                    .bind(q.map(str::to_owned))
                    .execute(&pool)
                    .await
                    .unwrap();
            }
            pool.close().await;
        });
    }

    fn sqlite_config(path: &std::path::Path, password_query: &str) -> SqlConfig {
        SqlConfig {
            driver: SqlDriver::Sqlite,
            connect: path.display().to_string(),
            password_query: password_query.into(),
            user_query: "SELECT userid AS user, quota_rule FROM users WHERE userid = '%u'".into(),
            iterate_query: Some("SELECT userid AS username FROM users".into()),
            alias_query: None,
            max_connections: 2,
            query_timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn sqlite_lookups_bind_the_name_and_read_the_fields() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.db");
        sqlite_file(
            &path,
            &[
                ("alice@example.org", "{PLAIN}pw", Some("*:storage=1k")),
                ("bob@example.org", "{PLAIN}pw2", None),
            ],
        );
        let db = SqlDb::new(
            &sqlite_config(
                &path,
                "SELECT userid AS user, password FROM users \
                 WHERE userid = '%n' || '@' || '%d'",
            ),
            Some(7),
        )
        .unwrap();
        let rec = db.password("Alice@Example.org").unwrap().unwrap();
        assert_eq!(rec.user.name, "alice@example.org");
        assert_eq!(rec.password.to_string(), "{PLAIN}pw");
        // Dovecot's `username` + `domain` columns make the name
        let split = SqlDb::new(
            &sqlite_config(
                &path,
                "SELECT substr(userid, 1, instr(userid, '@') - 1) AS username, \
                 substr(userid, instr(userid, '@') + 1) AS domain, password FROM users \
                 WHERE userid = '%u'",
            ),
            None,
        )
        .unwrap();
        let rec = split.password("bob@example.org").unwrap().unwrap();
        assert_eq!(rec.user.name, "bob@example.org");
        for attack in ["x' OR '1'='1", "alice@example.org' --", "' OR 1=1 --@x"] {
            assert!(db.password(attack).unwrap().is_none(), "{attack}");
        }
        assert!(db.password("").unwrap().is_none());
        assert!(db.password("alice@example.org\0").unwrap().is_none());
        // the quota: the user's rule, else the config's default
        assert_eq!(
            db.user("alice@example.org").unwrap().unwrap().quota,
            Some(1024)
        );
        assert_eq!(db.user("bob@example.org").unwrap().unwrap().quota, Some(7));
        assert!(db.user("carol@example.org").unwrap().is_none());
        let mut all = db.iterate().unwrap();
        all.sort();
        assert_eq!(all, ["alice@example.org", "bob@example.org"]);
        // two names refused before any query (empty, NUL), seven queries sent
        assert_eq!(db.queries(), 8);
    }

    #[test]
    fn a_failing_query_is_unavailable_not_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.db");
        sqlite_file(&path, &[("a", "{PLAIN}x", None), ("b", "{PLAIN}y", None)]);
        let db = SqlDb::new(
            &sqlite_config(&path, "SELECT password FROM no_such_table WHERE u = '%u'"),
            None,
        )
        .unwrap();
        assert!(db.password("a").is_err());
        // two rows for one user: an error in the directory, not a login
        let db = SqlDb::new(
            &sqlite_config(
                &path,
                "SELECT password FROM users WHERE userid <> '%u' OR 1 = 1",
            ),
            None,
        )
        .unwrap();
        assert!(db.password("a").is_err());
    }

    #[test]
    fn an_unreachable_server_is_unavailable_and_not_waited_for_by_every_lookup() {
        // port 1 on loopback: connection refused
        let mut config = sqlite_config(std::path::Path::new("unused"), "SELECT 1 WHERE '%u'");
        config.driver = SqlDriver::Pgsql;
        config.connect = "host=127.0.0.1 port=1 dbname=x user=x".into();
        config.query_timeout = Duration::from_secs(1);
        let db = SqlDb::new(&config, None).unwrap();
        assert!(db.password("a").is_err());
        assert_eq!(db.queries(), 1);
        // within RETRY_AFTER: failed without another try
        assert!(db.user("a").is_err());
        assert_eq!(db.queries(), 1);
    }

    #[test]
    fn dovecot_connect_strings() {
        assert_eq!(
            connect_url(
                SqlDriver::Pgsql,
                "host=127.0.0.1 port=15432 dbname=mail user=app password=p@ss:w/rd"
            )
            .unwrap(),
            "postgres://app:p%40ss%3Aw%2Frd@127.0.0.1:15432/mail"
        );
        assert_eq!(
            connect_url(
                SqlDriver::Mysql,
                "host=/run/mysqld/mysqld.sock dbname=mail user=m"
            )
            .unwrap(),
            "mysql://m@localhost/mail?socket=%2Frun%2Fmysqld%2Fmysqld.sock"
        );
        assert_eq!(
            connect_url(SqlDriver::Sqlite, "/var/lib/users.db").unwrap(),
            "sqlite:///var/lib/users.db"
        );
        assert!(connect_url(SqlDriver::Pgsql, "host=x bogus=1").is_err());
    }
}
