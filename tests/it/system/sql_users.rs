//! Issue 20 #1: users in PostgreSQL and MariaDB (`[auth.sql]`, Dovecot's password_query /
//! user_query / iterate_query), against real servers this binary starts once each in a
//! scratch folder on loopback (tests/support/sqldb.rs): IMAP login, LMTP delivery, unknown
//! users, wrong passwords, login names that try SQL injection, the database stopped while
//! the daemon runs (`NO [UNAVAILABLE]`, `451 4.3.0`, `maildex deliver` exit 75; recovery
//! without a restart) and the lookup cache (a repeated login sends no query).
//!
//! Each test makes users of its own (a name prefix), so the tests share a server; the one
//! that stops it holds it alone.

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::support::daemon::{Opts, Server};
use crate::support::lmtp::{self, Client as LmtpClient};
use crate::support::process::maildex_bin;
use crate::support::sqldb::{self, Db, Kind};

const KINDS: [Kind; 2] = [Kind::Postgres, Kind::Mariadb];

/// A daemon whose users are in `db`; `cache` is `[auth]` lines (cache_size...).
fn server(db: &Db, cache: &str) -> Server {
    Server::start_with(Opts {
        auth: Some(db.auth_config(cache)),
        ..Opts::default()
    })
}

/// The tagged answer of a LOGIN on a fresh connection.
pub(super) fn login(s: &Server, user: &str, password: &str) -> String {
    let quote = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"");
    // each from an address of its own: failed logins of one address are delayed more and
    // more (penalties), which would only slow these tests down
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut c = s.connect_from(Ipv4Addr::new(127, 3, (n / 250) as u8, (n % 250 + 1) as u8));
    c.cmd(&format!(
        "LOGIN \"{}\" \"{}\"",
        quote(user),
        quote(password)
    ))
    .done
    .text()
}

/// The reply to `RCPT TO:<rcpt>` in a fresh transaction.
pub(super) fn rcpt(c: &mut LmtpClient, rcpt: &str) -> String {
    c.send("RSET\r\n");
    c.expect("250");
    c.send("MAIL FROM:<sender@example.net>\r\n");
    c.expect("250");
    c.send(format!("RCPT TO:<{rcpt}>\r\n"));
    c.reply()
}

/// The database servers to test with (both, in CI).
fn installed() -> impl Iterator<Item = Kind> {
    KINDS.into_iter().filter(|&k| !skip(k))
}

fn skip(kind: Kind) -> bool {
    !sqldb::usable(kind)
}

#[test]
fn sql_users_log_in_and_receive_mail_and_unknown_or_wrong_fail() {
    for kind in installed() {
        let (db, _shared) = Db::shared(kind);
        let hash = maildex_auth::hash_password(b"alice secret").unwrap();
        db.add_user("t1-alice@example.org", &hash.to_string(), None);
        db.add_user("t1-bob@example.org", "{PLAIN}bob-pw", Some("*:storage=1k"));
        let s = server(db, "");

        let ok = login(&s, "t1-alice@example.org", "alice secret");
        assert!(ok.contains("OK"), "{kind:?}: {ok}");
        // the name is looked up as Dovecot's %Lu: lower-cased
        let ok = login(&s, "T1-Bob@Example.org", "bob-pw");
        assert!(ok.contains("OK"), "{kind:?}: {ok}");
        for (user, pw) in [
            ("t1-alice@example.org", "wrong"),
            ("t1-nobody@example.org", "alice secret"),
            ("t1-bob@example.org", ""),
        ] {
            let no = login(&s, user, pw);
            assert!(
                no.contains("NO [AUTHENTICATIONFAILED]"),
                "{kind:?} {user}: {no}"
            );
        }
        // AUTHENTICATE PLAIN takes the same path
        let mut c = s.connect();
        let r = c.cmd("AUTHENTICATE PLAIN AHQxLWJvYkBleGFtcGxlLm9yZwBib2ItcHc=");
        assert_eq!(r.status(), "OK", "{kind:?}: {}", r.all());

        // LMTP: a database user gets the message, an unknown one is 550 5.1.1
        s.deliver("t1-alice", &lmtp::message("sql"));
        assert_eq!(s.count("t1-alice@example.org", "new"), 1, "{kind:?}");
        let mut c = s.lmtp_session();
        assert!(
            rcpt(&mut c, "t1-nobody@example.org").starts_with("550 5.1.1"),
            "{kind:?}"
        );
        // bob's quota_rule column (1 KiB): a declared 2 KiB message is refused
        c.send("RSET\r\nMAIL FROM:<s@example.net> SIZE=2048\r\n");
        c.expect("250");
        c.expect("250");
        c.send("RCPT TO:<t1-bob@example.org>\r\n");
        let r = c.reply();
        assert!(r.starts_with("552 5.2.2"), "{kind:?}: {r}");

        // iterate_query: the admin commands' user list
        let names = s.accounts.user_names().unwrap();
        assert!(
            names.iter().any(|n| n == "t1-alice@example.org"),
            "{kind:?}: {names:?}"
        );
        // ... and through `maildex index rebuild --all`: alice's mail is indexed, the users
        // without mail here are skipped
        let out = Command::new(maildex_bin())
            .args(["index", "rebuild", "--all", "--config"])
            .arg(write_config(&s))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{kind:?}: {text}");
        assert!(
            text.contains("t1-alice@example.org: 1 mailboxes, 1 messages"),
            "{kind:?}: {text}"
        );
        assert!(text.contains("users with no mail yet"), "{kind:?}: {text}");
    }
}

#[test]
fn sql_injection_in_a_login_name_is_a_string_not_sql() {
    for kind in installed() {
        let (db, _shared) = Db::shared(kind);
        db.add_user("t2-carol@example.org", "{PLAIN}carol-pw", None);
        let s = server(db, "cache_size = 0");
        for name in [
            "x' OR '1'='1",
            "' OR 1=1 --",
            "t2-carol@example.org' --",
            "t2-carol@example.org'; DROP TABLE users; --",
            "x' UNION SELECT 't2-carol@example.org', '{PLAIN}carol-pw' --",
            "t2-carol@example.org\\",
        ] {
            let no = login(&s, name, "carol-pw");
            assert!(
                no.contains("NO [AUTHENTICATIONFAILED]"),
                "{kind:?} {name:?}: {no}"
            );
            let mut c = s.lmtp_session();
            let r = rcpt(&mut c, &format!("\"{name}\"@example.org"));
            assert!(
                r.starts_with("550 5.1.1") || r.starts_with("501"),
                "{kind:?} {name:?}: {r}"
            );
        }
        // the table is still there and carol still logs in
        let ok = login(&s, "t2-carol@example.org", "carol-pw");
        assert!(ok.contains("OK"), "{kind:?}: {ok}");
        assert_eq!(
            db.query_one("SELECT COUNT(*) FROM users WHERE userid = 't2-carol@example.org'"),
            "1"
        );
    }
}

#[test]
fn a_repeated_login_or_recipient_is_answered_from_the_cache_without_a_query() {
    for kind in installed() {
        let (db, _shared) = Db::shared(kind);
        db.add_user("t3-dave@example.org", "{PLAIN}dave-pw", None);
        let s = server(db, "cache_size = 100");
        let queries = || s.accounts.directory_queries();

        assert!(login(&s, "t3-dave@example.org", "dave-pw").contains("OK"));
        let first = queries();
        assert!(first >= 1, "{kind:?}: the first login asks the database");
        for _ in 0..3 {
            assert!(login(&s, "t3-dave@example.org", "dave-pw").contains("OK"));
        }
        assert_eq!(
            queries(),
            first,
            "{kind:?}: logins again within the TTL: no query"
        );

        // a wrong password is not answered from the cache, nor cached as a success
        let no = login(&s, "t3-dave@example.org", "not-dave");
        assert!(no.contains("NO [AUTHENTICATIONFAILED]"), "{kind:?}: {no}");
        assert!(queries() > first, "{kind:?}: a wrong password asks again");
        let no = login(&s, "t3-dave@example.org", "not-dave");
        assert!(no.contains("NO [AUTHENTICATIONFAILED]"), "{kind:?}: {no}");

        // unknown users: asked once, then the negative entry answers
        let before = queries();
        for _ in 0..3 {
            let no = login(&s, "t3-nobody@example.org", "x");
            assert!(no.contains("NO [AUTHENTICATIONFAILED]"), "{kind:?}: {no}");
        }
        assert_eq!(
            queries(),
            before + 1,
            "{kind:?}: one query for an unknown user"
        );

        // recipients: one user lookup, then none
        let mut c = s.lmtp_session();
        assert!(rcpt(&mut c, "t3-dave@example.org").starts_with("250"));
        let after_rcpt = queries();
        for _ in 0..3 {
            assert!(rcpt(&mut c, "t3-dave@example.org").starts_with("250"));
        }
        assert_eq!(queries(), after_rcpt, "{kind:?}: cached recipient");
    }
}

#[test]
fn sql_database_down_gives_temporary_failures_then_recovers() {
    for kind in installed() {
        let (db, _alone) = Db::exclusive(kind);
        db.add_user("t4-erin@example.org", "{PLAIN}erin-pw", None);
        let s = server(db, "cache_size = 0");
        assert!(login(&s, "t4-erin@example.org", "erin-pw").contains("OK"));
        let mut held = s.connect();
        held.ok("LOGIN t4-erin@example.org erin-pw");

        db.stop();
        // RFC 5530 UNAVAILABLE at login, never "wrong password"
        let no = login(&s, "t4-erin@example.org", "erin-pw");
        assert!(no.contains("NO [UNAVAILABLE]"), "{kind:?}: {no}");
        let no = login(&s, "t4-erin@example.org", "wrong");
        assert!(no.contains("NO [UNAVAILABLE]"), "{kind:?}: {no}");
        // LMTP: 451 4.3.0, the sender's MTA keeps the message and retries
        let mut c = s.lmtp_session();
        let r = rcpt(&mut c, "t4-erin@example.org");
        assert!(r.starts_with("451 4.3.0"), "{kind:?}: {r}");
        let r = rcpt(&mut c, "t4-nobody@example.org");
        assert!(r.starts_with("451 4.3.0"), "{kind:?}: {r}");
        // `maildex deliver` (postfix's pipe): EX_TEMPFAIL, postfix defers
        let code = deliver_cli(&s, "t4-erin@example.org");
        assert_eq!(code, Some(75), "{kind:?}");
        // a session already logged in goes on
        assert_eq!(held.cmd("NOOP").status(), "OK");

        // a daemon started while the database is down serves, and fails logins temporarily
        let late = server(db, "cache_size = 0");
        let no = login(&late, "t4-erin@example.org", "erin-pw");
        assert!(no.contains("NO [UNAVAILABLE]"), "{kind:?}: {no}");

        db.start();
        // back by itself: the pool reconnects (bounded wait, no restart of the daemon)
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let a = login(&s, "t4-erin@example.org", "erin-pw");
            if a.contains("OK") {
                break;
            }
            assert!(Instant::now() < deadline, "{kind:?}: no recovery: {a}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let r = rcpt(&mut c, "t4-erin@example.org");
        assert!(r.starts_with("250"), "{kind:?}: {r}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !login(&late, "t4-erin@example.org", "erin-pw").contains("OK") {
            assert!(
                Instant::now() < deadline,
                "{kind:?}: the late daemon did not recover"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(deliver_cli(&s, "t4-erin@example.org"), Some(0), "{kind:?}");
    }
}

#[test]
fn alias_query_sends_an_address_to_its_targets() {
    for kind in installed() {
        let (db, _shared) = Db::shared(kind);
        db.add_user("t5-a@example.org", "{PLAIN}a", None);
        db.add_user("t5-b@example.org", "{PLAIN}b", None);
        db.exec_db(
            "INSERT INTO aliases VALUES ('t5-team@example.org', 't5-a@example.org'), \
             ('t5-team@example.org', 't5-b@example.org'), \
             ('t5-list@example.org', 't5-a@example.org, t5-nobody@example.org')",
        );
        let auth = db.auth_config("")
            + "alias_query = \"SELECT destination FROM aliases WHERE source = '%u'\"\n";
        let s = Server::start_with(Opts {
            auth: Some(auth),
            ..Opts::default()
        });
        s.deliver("t5-team", &lmtp::message("team"));
        assert_eq!(s.count("t5-a@example.org", "new"), 1, "{kind:?}");
        assert_eq!(s.count("t5-b@example.org", "new"), 1, "{kind:?}");
        // a comma-separated row; a target that is no user is skipped
        s.deliver("t5-list", &lmtp::message("list"));
        assert_eq!(s.count("t5-a@example.org", "new"), 2, "{kind:?}");
        // a plain user still gets mail; an address that is neither is unknown
        s.deliver("t5-b", &lmtp::message("direct"));
        assert_eq!(s.count("t5-b@example.org", "new"), 2, "{kind:?}");
        let mut c = s.lmtp_session();
        assert!(
            rcpt(&mut c, "t5-none@example.org").starts_with("550 5.1.1"),
            "{kind:?}"
        );
        // cached: the alias again sends no query
        let before = s.accounts.directory_queries();
        assert!(
            rcpt(&mut c, "t5-team@example.org").starts_with("250"),
            "{kind:?}"
        );
        assert_eq!(s.accounts.directory_queries(), before, "{kind:?}");
        // an alias is not a login
        let no = login(&s, "t5-team@example.org", "a");
        assert!(no.contains("NO [AUTHENTICATIONFAILED]"), "{kind:?}: {no}");
    }
}

/// `maildex deliver -u USER` with the daemon's config, a small message on stdin; its exit code.
fn deliver_cli(s: &Server, user: &str) -> Option<i32> {
    deliver_with_config(&write_config(s), user)
}

/// `maildex deliver --config CONFIG -u USER`, a small message on stdin; its exit code.
pub(super) fn deliver_with_config(config: &std::path::Path, user: &str) -> Option<i32> {
    let mut child = Command::new(maildex_bin())
        .args(["deliver", "--config"])
        .arg(config)
        .args(["-u", user])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(lmtp::message("cli").as_bytes());
    child.wait().unwrap().code()
}

/// The daemon's config as a file for the `maildex` commands; its path.
fn write_config(s: &Server) -> std::path::PathBuf {
    let path = s.dir.path().join("maildex.toml");
    std::fs::write(&path, config_text(s)).unwrap();
    path
}

fn config_text(s: &Server) -> String {
    let c = &s.config;
    let sql = c.auth.sql.as_ref().unwrap();
    let driver = match sql.driver {
        maildex_config::SqlDriver::Pgsql => "pgsql",
        maildex_config::SqlDriver::Mysql => "mysql",
        maildex_config::SqlDriver::Sqlite => "sqlite",
    };
    let r = s.dir.path().display();
    format!(
        "[storage]\nmail_location = \"{r}/mail/%u\"\nindex_root = \"{r}/index/%u\"\n\
         fsync = false\nindex_map_size = \"16MiB\"\n[auth]\ncache_size = 0\n[auth.sql]\n\
         driver = \"{driver}\"\nconnect = {:?}\npassword_query = {:?}\nuser_query = {:?}\n\
         iterate_query = {:?}\nquery_timeout = 3\n[mailboxes]\n",
        sql.connect,
        sql.password_query,
        sql.user_query,
        sql.iterate_query.as_deref().unwrap_or_default()
    )
}

/// Item 5's measurement (docs/BENCHMARKS.md), not a test of speed: logins per second
/// (LOGIN + LOGOUT, one connection each, Argon2id hashes) and LMTP deliveries per second
/// (one transaction per message, a different user each) with the users in each database,
/// the cache off ("cold": every login a password hash and two queries, every recipient a
/// query) and on after a first round ("warm"). Prints a table; asserts only that the
/// logins and deliveries worked.
/// `cargo test --release -p maildex-tests --test it sql_rates -- --ignored --nocapture`
#[test]
#[ignore]
fn sql_rates() {
    const N: usize = 200;
    let mut rows = Vec::new();
    for kind in installed() {
        let (db, _shared) = Db::shared(kind);
        let hash = maildex_auth::hash_password(b"bench-pw")
            .unwrap()
            .to_string();
        let values: Vec<String> = (0..N)
            .map(|i| format!("('b{i}@example.org', '{hash}', NULL)"))
            .collect();
        db.exec_db(&format!(
            "INSERT INTO users (userid, password, quota_rule) VALUES {}",
            values.join(", ")
        ));
        for (label, cache) in [("cold", "cache_size = 0"), ("warm", "cache_size = 10000")] {
            let s = server(db, cache);
            rows.push(format!(
                "| {kind:?} | {label} | {} |",
                rates(&s, N, label == "warm")
            ));
        }
    }
    print_rates("database", &rows);
}

/// Logins (`b{i}@example.org`, password `bench-pw`) then deliveries to the same `n` users:
/// "logins/s | queries/login | deliveries/s | queries/delivery", after a first round when
/// `warm` (the `*_rates` measurements).
pub(super) fn rates(s: &Server, n: usize, warm: bool) -> String {
    let logins = |s: &Server| {
        let t = Instant::now();
        for i in 0..n {
            let mut c = s.connect();
            c.ok(&format!("LOGIN b{i}@example.org bench-pw"));
            c.cmd("LOGOUT");
        }
        n as f64 / t.elapsed().as_secs_f64()
    };
    let deliveries = |s: &Server| {
        let t = Instant::now();
        let mut c = s.lmtp_session();
        for i in 0..n {
            let rcpt = format!("b{i}@example.org");
            assert_eq!(
                lmtp::transaction(&mut c, &[&rcpt], &lmtp::message("b")).len(),
                1
            );
        }
        n as f64 / t.elapsed().as_secs_f64()
    };
    if warm {
        logins(s);
        deliveries(s);
    }
    let q0 = s.accounts.directory_queries();
    let l = logins(s);
    let q1 = s.accounts.directory_queries();
    let d = deliveries(s);
    let q2 = s.accounts.directory_queries();
    format!(
        "{l:.0} | {:.2} | {d:.0} | {:.2}",
        (q1 - q0) as f64 / n as f64,
        (q2 - q1) as f64 / n as f64
    )
}

/// Prints the rows of [`rates`] under their header.
pub(super) fn print_rates(first: &str, rows: &[String]) {
    println!("| {first} | cache | logins/s | queries/login | deliveries/s | queries/delivery |");
    println!("|---|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
}
