//! The LDAP backend of [`crate::userdb::UserDb`] (the `ldap3` crate), configured as
//! Dovecot's dovecot-ldap.conf.ext: a service account (`dn`, `dnpass`) searches `base`
//! with `pass_filter` / `user_filter` / `iterate_filter`, and `pass_attrs` / `user_attrs`
//! map the entry's attributes to fields (`ldapAttr=field`, or `ldapAttr=field=template`
//! with `%$` for the value, e.g. `mailQuota=quota_rule=*:bytes=%$`). With `auth_bind`
//! the password is checked by binding as the user's DN (found by the search, or made
//! from `auth_bind_userdn`) instead of reading `userPassword`.
//!
//! A login's `%u`, `%n` and `%d` are escaped where they are put: in a filter per RFC 4515
//! §3 (`*`, `(`, `)`, `\` and NUL as `\2a` ...), so a login `*)(uid=*` matches nobody
//! instead of everybody; in a DN (`base`, `auth_bind_userdn`) per RFC 4514 §2.4.
//!
//! ldap3 is async; the callers are synchronous (the daemon's blocking pool, `maildex
//! deliver`), so, as for SQL, the connections live on a runtime of their own (one worker
//! thread) and a lookup waits for its answer, at most `query_timeout`. Connections are
//! pooled (at most `max_connections`, searches bound as the service account, auth binds on
//! connections of their own, as Dovecot keeps a separate one), and a connection that
//! fails is dropped: the next lookup connects anew. A failure to reach the server, a
//! timeout or an error answer is [`Unavailable`], never "no such user" or a wrong password.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ldap3::adapters::PagedResults;
use ldap3::{Ldap, LdapConnAsync, LdapConnSettings, LdapError, Scope, SearchEntry, SearchOptions};
use maildex_auth::PasswordHash;
use maildex_config::{LdapConfig, LdapScope};

use crate::nets::AllowNets;
use crate::remote::{acceptable_name, Reachability};
use crate::userdb::{verify_hash, PassRecord, Unavailable, UserDb};
use crate::{quota, Owner, User};

mod map;

use map::{fields, parse_attrs, wanted, warn_unused, AttrMap, Escape, Part, Template};

/// Why `[auth.ldap]` is refused at start-up.
#[derive(Debug, thiserror::Error)]
pub enum LdapConfigError {
    /// A filter, DN template or attribute mapping that cannot be used.
    #[error("[auth.ldap] {key}: {reason}")]
    Setting {
        /// The key.
        key: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The runtime for the connections could not start.
    #[error("[auth.ldap]: cannot start the directory runtime: {0}")]
    Runtime(std::io::Error),
}

/// An operation sent to the directory.
#[derive(Debug, Clone)]
enum Op {
    /// A search for at most one entry (a second one is an error in the directory).
    One {
        base: String,
        filter: String,
        attrs: Vec<String>,
    },
    /// A paged search for every matching entry.
    All {
        base: String,
        filter: String,
        attrs: Vec<String>,
    },
    /// A simple bind as a user (RFC 4513 §5.1.3).
    Bind { dn: String, password: String },
}

/// An operation's answer.
#[derive(Debug)]
enum Answer {
    Entries(Vec<SearchEntry>),
    Bound(bool),
}

/// Why an operation failed.
#[derive(Debug)]
enum Fail {
    /// The server answered with an error (a bad filter, a base that does not exist).
    Answer(String),
    /// The server could not be reached or did not answer in time.
    Down(String),
}

/// The connections and what making one needs (on the directory runtime).
struct Pool {
    uris: Vec<String>,
    service: Option<(String, String)>,
    scope: Scope,
    timeout: Duration,
    /// Idle connections bound as the service account, for searches.
    searchers: Mutex<Vec<Ldap>>,
    /// Idle connections for auth binds (bound as whichever user last logged in).
    binders: Mutex<Vec<Ldap>>,
    /// One per connection in use: at most `max_connections`.
    permits: tokio::sync::Semaphore,
}

fn take(list: &Mutex<Vec<Ldap>>) -> Option<Ldap> {
    list.lock().unwrap_or_else(|p| p.into_inner()).pop()
}

fn put(list: &Mutex<Vec<Ldap>>, ldap: Ldap) {
    list.lock().unwrap_or_else(|p| p.into_inner()).push(ldap);
}

impl Pool {
    /// A new connection to the first server of `uris` that answers; searchers are bound
    /// as the service account.
    async fn connect(&self, searcher: bool) -> Result<Ldap, Fail> {
        let mut last = String::from("no uris");
        for uri in &self.uris {
            let settings = LdapConnSettings::new().set_conn_timeout(self.timeout);
            let (conn, mut ldap) = match LdapConnAsync::with_settings(settings, uri).await {
                Ok(c) => c,
                Err(e) => {
                    last = format!("{uri}: {e}");
                    continue;
                }
            };
            tokio::spawn(async move {
                if let Err(e) = conn.drive().await {
                    tracing::debug!(error = %e, "[auth.ldap] connection ended");
                }
            });
            if let (true, Some((dn, pw))) = (searcher, &self.service) {
                match ldap
                    .with_timeout(self.timeout)
                    .simple_bind(dn, pw)
                    .await
                    .and_then(|r| r.success())
                {
                    Ok(_) => {}
                    Err(LdapError::LdapResult { result }) => {
                        return Err(Fail::Answer(format!("bind as {dn}: {result}")))
                    }
                    Err(e) => {
                        last = format!("{uri}: {e}");
                        continue;
                    }
                }
            }
            return Ok(ldap);
        }
        Err(Fail::Down(last))
    }

    /// Runs `op`: on an idle connection if there is one (and, if that one turns out
    /// dead, as after a server restart, on a new one after dropping every idle one).
    async fn execute(&self, op: &Op) -> Result<Answer, Fail> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| Fail::Down("shut down".into()))?;
        let list = match op {
            Op::Bind { .. } => &self.binders,
            _ => &self.searchers,
        };
        if let Some(mut ldap) = take(list) {
            match self.perform(&mut ldap, op).await {
                Ok(a) => {
                    put(list, ldap);
                    return Ok(a);
                }
                Err(LdapError::LdapResult { result }) => {
                    put(list, ldap);
                    return Err(Fail::Answer(result.to_string()));
                }
                Err(e) => {
                    tracing::debug!(error = %e, "[auth.ldap] pooled connection failed; reconnecting");
                    self.searchers
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .clear();
                    self.binders
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .clear();
                }
            }
        }
        let mut ldap = self
            .connect(matches!(op, Op::One { .. } | Op::All { .. }))
            .await?;
        match self.perform(&mut ldap, op).await {
            Ok(a) => {
                put(list, ldap);
                Ok(a)
            }
            Err(LdapError::LdapResult { result }) => {
                put(list, ldap);
                Err(Fail::Answer(result.to_string()))
            }
            Err(e) => Err(Fail::Down(e.to_string())),
        }
    }

    async fn perform(&self, ldap: &mut Ldap, op: &Op) -> Result<Answer, LdapError> {
        match op {
            Op::One {
                base,
                filter,
                attrs,
            } => {
                let r = ldap
                    .with_timeout(self.timeout)
                    .with_search_options(SearchOptions::new().sizelimit(2))
                    .search(base, self.scope, filter, attrs)
                    .await?;
                // rc 4, sizeLimitExceeded: more than one entry, which the caller refuses
                if r.1.rc != 0 && !(r.1.rc == 4 && r.0.len() > 1) {
                    return Err(LdapError::LdapResult { result: r.1 });
                }
                Ok(Answer::Entries(
                    r.0.into_iter().map(SearchEntry::construct).collect(),
                ))
            }
            Op::All {
                base,
                filter,
                attrs,
            } => {
                let mut stream = ldap
                    .with_timeout(self.timeout)
                    .streaming_search_with(
                        PagedResults::new(500),
                        base,
                        self.scope,
                        filter,
                        attrs.clone(),
                    )
                    .await?;
                let mut entries = Vec::new();
                while let Some(e) = stream.next().await? {
                    entries.push(SearchEntry::construct(e));
                }
                stream.finish().await.success()?;
                Ok(Answer::Entries(entries))
            }
            Op::Bind { dn, password } => {
                let r = ldap
                    .with_timeout(self.timeout)
                    .simple_bind(dn, password)
                    .await?;
                match r.rc {
                    0 => Ok(Answer::Bound(true)),
                    // invalidCredentials, inappropriateAuthentication, unwillingToPerform,
                    // invalidDNSyntax, noSuchObject: this password does not log in
                    49 | 48 | 53 | 34 | 32 => Ok(Answer::Bound(false)),
                    _ => Err(LdapError::LdapResult { result: r }),
                }
            }
        }
    }
}

/// Longest wait for the whole list of users (`iterate`), page after page.
const ITERATE_TIMEOUT: Duration = Duration::from_secs(600);

/// Users in an LDAP directory. See the module docs.
pub(crate) struct LdapDb {
    runtime: Option<tokio::runtime::Runtime>,
    pool: Arc<Pool>,
    base: Template,
    pass_filter: Template,
    user_filter: Template,
    iterate_filter: String,
    pass_attrs: Vec<AttrMap>,
    user_attrs: Vec<AttrMap>,
    iterate_attrs: Vec<AttrMap>,
    auth_bind: bool,
    auth_bind_userdn: Option<Template>,
    timeout: Duration,
    default_quota: Option<u64>,
    queries: AtomicU64,
    timing_reference: Option<PasswordHash>,
    reachability: Reachability,
}

impl std::fmt::Debug for LdapDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LdapDb")
            .field("uris", &self.pool.uris)
            .field("auth_bind", &self.auth_bind)
            .finish_non_exhaustive()
    }
}

impl Drop for LdapDb {
    fn drop(&mut self) {
        // may run inside the daemon's runtime, where a blocking shutdown would panic
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl LdapDb {
    /// Checks the filters, templates and mappings and sets up the pool. Connects lazily:
    /// a directory that is down at start-up fails the lookups (temporarily), not the start.
    pub(crate) fn new(
        config: &LdapConfig,
        default_quota: Option<u64>,
    ) -> Result<LdapDb, LdapConfigError> {
        let filter = |key, text: &str| -> Result<Template, LdapConfigError> {
            let t = Template::parse(key, text, Escape::Filter)?;
            // the filter must parse with any value put in (an escaped one cannot break it)
            ldap3::parse_filter(t.expand("x@y")).map_err(|_| LdapConfigError::Setting {
                key,
                reason: format!("{text:?} is not an RFC 4515 filter"),
            })?;
            Ok(t)
        };
        let pass_filter = filter("pass_filter", &config.pass_filter)?;
        let user_filter = filter("user_filter", &config.user_filter)?;
        let iterate = filter("iterate_filter", &config.iterate_filter)?;
        if iterate.parts.iter().any(|p| matches!(p, Part::Var(_))) {
            return Err(LdapConfigError::Setting {
                key: "iterate_filter",
                reason: "has no user to put in %u, %n or %d".into(),
            });
        }
        let pass_attrs = parse_attrs("pass_attrs", &config.pass_attrs)?;
        let user_attrs = parse_attrs("user_attrs", &config.user_attrs)?;
        let iterate_attrs = parse_attrs("iterate_attrs", &config.iterate_attrs)?;
        if !iterate_attrs.iter().any(|m| m.field == "user") {
            return Err(LdapConfigError::Setting {
                key: "iterate_attrs",
                reason: "map an attribute to the user field, e.g. uid=user".into(),
            });
        }
        if !config.auth_bind && !pass_attrs.iter().any(|m| m.field == "password") {
            return Err(LdapConfigError::Setting {
                key: "pass_attrs",
                reason: "map an attribute to the password field (userPassword=password), \
                         or set auth_bind = true"
                    .into(),
            });
        }
        warn_unused("pass_attrs", &pass_attrs);
        warn_unused("user_attrs", &user_attrs);
        let auth_bind_userdn = config
            .auth_bind_userdn
            .as_deref()
            .map(|t| Template::parse("auth_bind_userdn", t, Escape::Dn))
            .transpose()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("maildex-ldap")
            .enable_all()
            .build()
            .map_err(LdapConfigError::Runtime)?;
        let pool = Pool {
            uris: config.uris.clone(),
            service: config
                .dn
                .clone()
                .map(|dn| (dn, config.dnpass.clone().unwrap_or_default())),
            scope: match config.scope {
                LdapScope::Base => Scope::Base,
                LdapScope::Onelevel => Scope::OneLevel,
                LdapScope::Subtree => Scope::Subtree,
            },
            timeout: config.query_timeout,
            searchers: Mutex::default(),
            binders: Mutex::default(),
            permits: tokio::sync::Semaphore::new(config.max_connections as usize),
        };
        Ok(LdapDb {
            runtime: Some(runtime),
            pool: Arc::new(pool),
            base: Template::parse("base", &config.base, Escape::Dn)?,
            pass_filter,
            user_filter,
            iterate_filter: config.iterate_filter.replace("%%", "%"),
            pass_attrs,
            user_attrs,
            iterate_attrs,
            auth_bind: config.auth_bind,
            auth_bind_userdn,
            timeout: config.query_timeout,
            default_quota,
            queries: AtomicU64::new(0),
            // an auth bind has no hash to time an unknown user's failure against; with a
            // search first, an unknown user costs the search only (as in Dovecot)
            timing_reference: if config.auth_bind {
                Some(PasswordHash::parse("{PLAIN}"))
            } else {
                maildex_auth::hash_password(b"timing reference").ok()
            },
            reachability: Reachability::new("[auth.ldap]"),
        })
    }

    /// Runs `op` on the directory runtime and waits (BLOCKING, at most the timeout).
    fn run(&self, op: Op) -> Result<Answer, Unavailable> {
        self.reachability.check()?;
        let rt = self
            .runtime
            .as_ref()
            .ok_or_else(|| Unavailable("shut down".into()))?;
        self.queries.fetch_add(1, Ordering::Relaxed);
        // a lookup's whole wait is query_timeout; listing every user pages through the
        // directory, each page within query_timeout, the whole within ITERATE_TIMEOUT
        let overall = match op {
            Op::All { .. } => ITERATE_TIMEOUT.max(self.timeout),
            _ => self.timeout,
        };
        let answer = wait(rt, overall, {
            let pool = Arc::clone(&self.pool);
            async move { pool.execute(&op).await }
        });
        let (answer, unreachable) = match answer {
            Ok(a) => (Ok(a), false),
            Err(Fail::Answer(e)) => (Err(Unavailable(format!("[auth.ldap]: {e}"))), false),
            Err(Fail::Down(e)) => (Err(Unavailable(format!("[auth.ldap]: {e}"))), true),
        };
        self.reachability.record(unreachable, &answer);
        answer
    }

    /// The one entry `filter` finds for `login` (`None`: no such user).
    fn one(
        &self,
        filter: &Template,
        maps: &[AttrMap],
        login: &str,
    ) -> Result<Option<SearchEntry>, Unavailable> {
        let op = Op::One {
            base: self.base.expand(login),
            filter: filter.expand(login),
            attrs: wanted(maps),
        };
        let Answer::Entries(mut entries) = self.run(op)? else {
            return Err(Unavailable("[auth.ldap]: unexpected answer".into()));
        };
        if entries.len() > 1 {
            // Dovecot: "Multiple replies found for user"
            return Err(Unavailable(format!(
                "[auth.ldap]: more than one entry for user {}; the filter must match one",
                maildex_auth::LogName::new(login)
            )));
        }
        Ok(entries.pop())
    }

    /// The user an entry's fields name (the `user` field, else the login) and the quota.
    fn user_of(&self, fields: &HashMap<String, String>, login: &str) -> Result<User, Unavailable> {
        let name = fields
            .get("user")
            .filter(|u| !u.is_empty())
            .map_or_else(|| login.to_owned(), |u| u.to_ascii_lowercase());
        let mut quota = self.default_quota;
        for f in ["userdb_quota_rule", "quota_rule"] {
            if let Some(rule) = fields.get(f) {
                match quota::rule_from_extra(&[format!("quota_rule={rule}")]) {
                    Ok(Some(q)) => quota = q,
                    Ok(None) => {}
                    Err(e) => return Err(Unavailable(format!("user {name}: {e}"))),
                }
            }
        }
        // Dovecot's userdb fields, with or without the `userdb_` prefix (crate::owner)
        let field = |f: &str| {
            fields
                .get(&format!("userdb_{f}"))
                .or_else(|| fields.get(f))
                .map(String::as_str)
        };
        let owner = Owner::parse(field("uid"), field("gid"))
            .map_err(|e| Unavailable(format!("user {name}: {e}")))?;
        Ok(User { name, quota, owner })
    }
}

/// Runs `fut` on `rt` and waits for its answer, at most `timeout` (plus a second for the
/// runtime itself). A panic in the task (ldap3 panics on a malformed entry) is a failure.
fn wait<T: Send + 'static>(
    rt: &tokio::runtime::Runtime,
    timeout: Duration,
    fut: impl Future<Output = Result<T, Fail>> + Send + 'static,
) -> Result<T, Fail> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    rt.spawn(async move {
        let r = match tokio::time::timeout(timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(Fail::Down(format!(
                "no answer within {} s",
                timeout.as_secs()
            ))),
        };
        let _ = tx.send(r);
    });
    rx.recv_timeout(timeout + Duration::from_secs(1))
        .unwrap_or_else(|_| {
            Err(Fail::Down(
                "the directory task ended without an answer".into(),
            ))
        })
}

impl UserDb for LdapDb {
    fn password(&self, login: &str) -> Result<Option<PassRecord>, Unavailable> {
        let login = login.to_ascii_lowercase();
        if !acceptable_name(&login) {
            return Ok(None);
        }
        let bind_marker = || PasswordHash {
            scheme: "LDAP-AUTH-BIND".into(),
            data: String::new(),
        };
        if let Some(userdn) = &self.auth_bind_userdn {
            // Dovecot's auth_bind_userdn: no search; the bind tells
            return Ok(Some(PassRecord {
                user: User {
                    name: login.clone(),
                    quota: self.default_quota,
                    owner: None,
                },
                password: bind_marker(),
                allow_nets: None,
                bind_dn: Some(userdn.expand(&login)),
            }));
        }
        let Some(entry) = self.one(&self.pass_filter, &self.pass_attrs, &login)? else {
            return Ok(None);
        };
        let fields = fields(&entry, &self.pass_attrs);
        let user = self.user_of(&fields, &login)?;
        let allow_nets = fields
            .get("allow_nets")
            .map(|v| AllowNets::parse(v))
            .transpose()
            .map_err(|e| Unavailable(format!("user {}: {e}", user.name)))?;
        let (password, bind_dn) = if self.auth_bind {
            (bind_marker(), Some(entry.dn))
        } else {
            // no password attribute: nothing verifies
            let p = fields.get("password").map_or("", String::as_str);
            if p.is_empty() {
                tracing::warn!(
                    user = %user.name,
                    "[auth.ldap] the entry gives no password (may the service account read \
                     userPassword? or set auth_bind = true); the login fails"
                );
            }
            (PasswordHash::parse(p), None)
        };
        Ok(Some(PassRecord {
            user,
            password,
            allow_nets,
            bind_dn,
        }))
    }

    fn check_password(&self, rec: &PassRecord, password: &[u8]) -> Result<bool, Unavailable> {
        let Some(dn) = &rec.bind_dn else {
            return Ok(verify_hash(rec, password));
        };
        // RFC 4513 §5.1.2: a simple bind with an empty password is an unauthenticated
        // bind, which servers accept; it never logs in here
        let Ok(password) = std::str::from_utf8(password) else {
            return Ok(false);
        };
        if password.is_empty() {
            return Ok(false);
        }
        match self.run(Op::Bind {
            dn: dn.clone(),
            password: password.to_owned(),
        })? {
            Answer::Bound(ok) => Ok(ok),
            Answer::Entries(_) => Err(Unavailable("[auth.ldap]: unexpected answer".into())),
        }
    }

    fn user(&self, login: &str) -> Result<Option<User>, Unavailable> {
        let login = login.to_ascii_lowercase();
        if !acceptable_name(&login) {
            return Ok(None);
        }
        let Some(entry) = self.one(&self.user_filter, &self.user_attrs, &login)? else {
            return Ok(None);
        };
        self.user_of(&fields(&entry, &self.user_attrs), &login)
            .map(Some)
    }

    fn login_user(&self, rec: &PassRecord) -> Result<Option<User>, Unavailable> {
        // Dovecot's userdb lookup after the passdb's: the quota comes from user_attrs
        self.user(&rec.user.name)
    }

    fn iterate(&self) -> Result<Vec<String>, Unavailable> {
        let op = Op::All {
            base: self.base.expand(""),
            filter: self.iterate_filter.clone(),
            attrs: wanted(&self.iterate_attrs),
        };
        let Answer::Entries(entries) = self.run(op)? else {
            return Err(Unavailable("[auth.ldap]: unexpected answer".into()));
        };
        Ok(entries
            .iter()
            .filter_map(|e| fields(e, &self.iterate_attrs).remove("user"))
            .filter(|n| !n.is_empty())
            .map(|n| n.to_ascii_lowercase())
            .collect())
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

    fn config() -> LdapConfig {
        LdapConfig {
            // port 1 on loopback: connection refused
            uris: vec!["ldap://127.0.0.1:1".into()],
            dn: None,
            dnpass: None,
            base: "ou=people,dc=example,dc=org".into(),
            scope: LdapScope::Subtree,
            user_filter: "(uid=%n)".into(),
            pass_filter: "(uid=%n)".into(),
            iterate_filter: "(objectClass=posixAccount)".into(),
            user_attrs: String::new(),
            pass_attrs: "uid=user,userPassword=password".into(),
            iterate_attrs: "uid=user".into(),
            auth_bind: false,
            auth_bind_userdn: None,
            max_connections: 2,
            query_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn an_unreachable_server_is_unavailable_and_not_waited_for_by_every_lookup() {
        let db = LdapDb::new(&config(), None).unwrap();
        assert!(db.password("a").is_err());
        assert_eq!(db.queries(), 1);
        // within RETRY_AFTER: failed without another try
        assert!(db.user("a").is_err());
        assert!(db.iterate().is_err());
        assert_eq!(db.queries(), 1);
        // names that cannot be anyone's are not sent at all
        assert!(db.password("").unwrap().is_none());
    }

    #[test]
    fn settings_that_cannot_work_are_refused_at_start_up() {
        let refused = |f: fn(&mut LdapConfig)| {
            let mut c = config();
            f(&mut c);
            LdapDb::new(&c, None).is_err()
        };
        assert!(refused(|c| c.pass_attrs = "uid=user".into()), "no password");
        assert!(refused(|c| c.iterate_attrs = "uid=home".into()), "no user");
        assert!(refused(|c| c.iterate_filter = "(uid=%u)".into()));
        assert!(refused(|c| c.user_filter = "(uid=%u".into()), "unbalanced");
        assert!(refused(|c| c.user_attrs = "q=quota_rule=%{ldap:x}".into()));
        assert!(refused(|c| c.base = "ou=%x".into()));
        // auth_bind needs no password mapping
        assert!(!refused(|c| {
            c.auth_bind = true;
            c.pass_attrs = "uid=user".into();
        }));
    }
}
