//! Private PostgreSQL and MariaDB servers for the SQL user-directory tests: each started
//! once per test binary ([`Db::get`]) in a scratch folder, on a loopback port below the
//! ephemeral range (a readiness poll on an ephemeral port can connect to itself), as
//! /work/shared/notes/directories-in-tests.md describes. Tests share a server through
//! [`Db::shared`] (a read lock) and create users of their own; a test that stops the
//! server takes [`Db::exclusive`] (the write lock) so no other test sees it down.
//!
//! Each server runs under a small `sh` guardian, our child, that the kernel signals when
//! the thread that started it ends (`PR_SET_PDEATHSIG`); the guardian stops the server, so
//! none outlives the test binary. The servers are started from one long-lived thread, so
//! that signal comes at the binary's exit only.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";
/// The database and its application role (password below).
pub const DB: &str = "maildb";
pub const DB_USER: &str = "maildex";
pub const DB_PASSWORD: &str = "db-secret";
const PATIENCE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Postgres,
    Mariadb,
}

/// A running (or stopped) private server.
pub struct Db {
    pub kind: Kind,
    pub port: u16,
    pub dir: PathBuf,
    guardian: Mutex<Option<Child>>,
    lock: RwLock<()>,
}

/// Runs closures on one thread that lives as long as the process (see the module docs).
fn on_keeper<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    type Job = Box<dyn FnOnce() + Send>;
    static KEEPER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    let tx = KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("sqldb-keeper".into())
            .spawn(move || {
                for job in rx {
                    job();
                }
                // the senders live in a static: never reached
            })
            .unwrap();
        Mutex::new(tx)
    });
    let (done_tx, done_rx) = mpsc::channel();
    let job: Job = Box::new(move || {
        let _ = done_tx.send(f());
    });
    tx.lock().unwrap().send(job).unwrap();
    done_rx.recv().unwrap()
}

/// Runs `script` (a server and the `trap` that stops it) under `sh`, from the keeper
/// thread, with `PR_SET_PDEATHSIG` so the guardian is told to stop at the binary's exit.
pub fn spawn_guardian(script: String) -> Child {
    on_keeper(move || {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script).stdin(Stdio::null());
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.spawn().unwrap()
    })
}

/// Waits until `answers` (at most [`PATIENCE`]), failing with `dir/server.log` when the
/// guardian's server exits or does not get ready.
pub fn wait_ready(
    guardian: &Mutex<Option<Child>>,
    dir: &Path,
    what: &str,
    answers: impl Fn() -> bool,
) {
    let deadline = Instant::now() + PATIENCE;
    while !answers() {
        let exited = guardian
            .lock()
            .unwrap()
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_some());
        let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
        assert!(!exited, "{what} did not start:\n{log}");
        assert!(Instant::now() < deadline, "{what} not ready:\n{log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A free port below 32768.
pub fn free_low_port() -> u16 {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    loop {
        let p = rng.gen_range(20_000..32_000);
        if std::net::TcpListener::bind(("127.0.0.1", p)).is_ok() {
            return p;
        }
    }
}

pub fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether a test can run with `kind`: the tools are installed, or (a message printed) the
/// test is skipped; under `CI` (scripts/test-all.sh installs both) a missing server fails.
pub fn usable(kind: Kind) -> bool {
    if available(kind) {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{kind:?} is not installed; scripts/test-all.sh installs it"
    );
    eprintln!("skipped: {kind:?} is not installed (scripts/test-all.sh installs it)");
    false
}

/// Whether the tools for `kind` are installed (scripts/test-all.sh installs them).
pub fn available(kind: Kind) -> bool {
    match kind {
        Kind::Postgres => Path::new(PG_BIN).join("postgres").exists(),
        Kind::Mariadb => crate::support::imap::have_tool("mariadbd"),
    }
}

impl Db {
    /// The server of `kind`, started on first use.
    pub fn get(kind: Kind) -> &'static Db {
        static PG: OnceLock<Db> = OnceLock::new();
        static MARIA: OnceLock<Db> = OnceLock::new();
        let cell = match kind {
            Kind::Postgres => &PG,
            Kind::Mariadb => &MARIA,
        };
        cell.get_or_init(|| Db::create(kind))
    }

    /// The server for a test that needs it up: other tests may use it meanwhile.
    pub fn shared(kind: Kind) -> (&'static Db, RwLockReadGuard<'static, ()>) {
        let db = Db::get(kind);
        (db, db.lock.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The server for a test that stops it: no other test uses it meanwhile.
    pub fn exclusive(kind: Kind) -> (&'static Db, RwLockWriteGuard<'static, ()>) {
        let db = Db::get(kind);
        (db, db.lock.write().unwrap_or_else(|p| p.into_inner()))
    }

    fn create(kind: Kind) -> Db {
        let dir = PathBuf::from(format!("/tmp/mdx-sql-{}-{:?}", std::process::id(), kind));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let db = Db {
            kind,
            port: free_low_port(),
            dir,
            guardian: Mutex::new(None),
            lock: RwLock::new(()),
        };
        match kind {
            Kind::Postgres => db.init_postgres(),
            Kind::Mariadb => db.init_mariadb(),
        }
        db.start();
        db.create_schema();
        db
    }

    fn init_postgres(&self) {
        let d = &self.dir;
        run(Command::new("chown").arg("postgres:postgres").arg(d));
        std::fs::write(d.join("su.pw"), "su-secret\n").unwrap();
        run(Command::new("chown").arg("postgres").arg(d.join("su.pw")));
        run(Command::new("runuser")
            .current_dir(d)
            .args(["-u", "postgres", "--"])
            .arg(Path::new(PG_BIN).join("initdb"))
            .arg("-D")
            .arg(d.join("data"))
            .args([
                "-U",
                "postgres",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
            ])
            .args(["-E", "UTF8", "--locale=C.UTF-8", "--no-sync"])
            .arg(format!("--pwfile={}", d.join("su.pw").display())));
    }

    fn init_mariadb(&self) {
        let d = &self.dir;
        run(Command::new("mariadb-install-db")
            .args(["--no-defaults", "--user=root", "--skip-test-db"])
            .args(["--auth-root-authentication-method=normal"])
            .arg(format!("--datadir={}", d.join("data").display())));
    }

    /// The server's command line, run by the guardian.
    fn server_command(&self) -> String {
        let d = self.dir.display();
        let p = self.port;
        match self.kind {
            Kind::Postgres => format!(
                "setpriv --reuid=postgres --regid=postgres --init-groups {PG_BIN}/postgres \
                 -D {d}/data -p {p} -k {d} -c listen_addresses=127.0.0.1 -c fsync=off"
            ),
            Kind::Mariadb => format!(
                "mariadbd --no-defaults --user=root --datadir={d}/data --socket={d}/mysqld.sock \
                 --port={p} --bind-address=127.0.0.1 --pid-file={d}/mysqld.pid \
                 --log-error={d}/error.log --skip-log-bin --innodb-buffer-pool-size=32M \
                 --skip-name-resolve"
            ),
        }
    }

    /// Starts the server and waits until it answers.
    pub fn start(&self) {
        // SIGINT is PostgreSQL's fast shutdown, SIGTERM MariaDB's normal one
        let sig = match self.kind {
            Kind::Postgres => "INT",
            Kind::Mariadb => "TERM",
        };
        let script = format!(
            "{cmd} > {d}/server.log 2>&1 & pid=$!; \
             trap 'kill -{sig} $pid; wait $pid; rm -rf {d}; exit 0' TERM; wait $pid",
            cmd = self.server_command(),
            d = self.dir.display()
        );
        *self.guardian.lock().unwrap() = Some(spawn_guardian(script));
        wait_ready(
            &self.guardian,
            &self.dir,
            &format!("{:?}", self.kind),
            || self.answers(),
        );
    }

    /// Stops the server and waits until it is gone.
    pub fn stop(&self) {
        let Some(mut child) = self.guardian.lock().unwrap().take() else {
            return;
        };
        // the server itself (the guardian's TERM would also remove the scratch folder);
        // the guardian exits when it does
        let pid_file = match self.kind {
            Kind::Postgres => self.dir.join("data/postmaster.pid"),
            Kind::Mariadb => self.dir.join("mysqld.pid"),
        };
        let text = std::fs::read_to_string(&pid_file).unwrap();
        let pid: i32 = text.lines().next().unwrap().trim().parse().unwrap();
        // SAFETY: a plain syscall on the server's pid, which is alive (our grandchild)
        unsafe {
            libc::kill(
                pid,
                if self.kind == Kind::Postgres {
                    libc::SIGINT
                } else {
                    libc::SIGTERM
                },
            );
        }
        child.wait().unwrap();
        assert!(!self.answers(), "{:?} still answers after stop", self.kind);
    }

    fn answers(&self) -> bool {
        let port = self.port.to_string();
        let st = match self.kind {
            Kind::Postgres => Command::new(Path::new(PG_BIN).join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &port])
                .status(),
            Kind::Mariadb => Command::new("mariadb-admin")
                .args(["--no-defaults", "--protocol=tcp", "-h127.0.0.1", "-uroot"])
                .arg(format!("-P{port}"))
                .arg("ping")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status(),
        };
        st.is_ok_and(|s| s.success())
    }

    /// Runs SQL as the server's superuser (PostgreSQL: in the `postgres` database).
    pub fn exec(&self, sql: &str) {
        self.exec_in("postgres", sql)
    }

    fn exec_in(&self, db: &str, sql: &str) {
        let d = self.dir.display().to_string();
        match self.kind {
            Kind::Postgres => run(Command::new("psql")
                .args(["-h", &d, "-p", &self.port.to_string(), "-U", "postgres"])
                .args(["-d", db])
                .args(["-v", "ON_ERROR_STOP=1", "-q", "-c", sql])),
            Kind::Mariadb => run(Command::new("mariadb")
                .args(["--no-defaults", "-uroot"])
                .arg(format!("--socket={d}/mysqld.sock"))
                .args(["-e", sql])),
        }
    }

    /// One value of a query run as the superuser.
    pub fn query_one(&self, sql: &str) -> String {
        let d = self.dir.display().to_string();
        let out = match self.kind {
            Kind::Postgres => Command::new("psql")
                .args([
                    "-h",
                    &d,
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "postgres",
                    "-d",
                    DB,
                ])
                .args(["-At", "-c", sql])
                .output(),
            Kind::Mariadb => Command::new("mariadb")
                .args(["--no-defaults", "-uroot", "-N", "-B"])
                .arg(format!("--socket={d}/mysqld.sock"))
                .args(["-D", DB, "-e", sql])
                .output(),
        }
        .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn create_schema(&self) {
        let table = "CREATE TABLE users (userid VARCHAR(128) PRIMARY KEY, \
                     password VARCHAR(255) NOT NULL, quota_rule VARCHAR(64)); \
                     CREATE TABLE aliases (source VARCHAR(128) NOT NULL, \
                     destination VARCHAR(255) NOT NULL)";
        match self.kind {
            Kind::Postgres => {
                self.exec(&format!(
                    "CREATE ROLE {DB_USER} LOGIN PASSWORD '{DB_PASSWORD}'"
                ));
                self.exec(&format!("CREATE DATABASE {DB} OWNER {DB_USER}"));
                self.exec_db(&format!(
                    "{table}; ALTER TABLE users OWNER TO {DB_USER}; \
                     ALTER TABLE aliases OWNER TO {DB_USER}"
                ));
            }
            Kind::Mariadb => {
                self.exec(&format!(
                    "CREATE DATABASE {DB}; \
                     CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{DB_PASSWORD}'; \
                     GRANT SELECT ON {DB}.* TO '{DB_USER}'@'127.0.0.1'; \
                     USE {DB}; {table}"
                ));
            }
        }
    }

    /// Adds a user (`password` is stored as given, `{SCHEME}data`).
    pub fn add_user(&self, name: &str, password: &str, quota_rule: Option<&str>) {
        let q = quota_rule.map_or("NULL".to_owned(), |r| format!("'{r}'"));
        self.exec_db(&format!(
            "INSERT INTO users (userid, password, quota_rule) VALUES ('{name}', '{password}', {q})"
        ));
    }

    /// SQL in the mail database.
    pub fn exec_db(&self, sql: &str) {
        match self.kind {
            Kind::Postgres => self.exec_in(DB, sql),
            Kind::Mariadb => self.exec(&format!("USE {DB}; {sql}")),
        }
    }

    /// The `[auth]` body of a daemon using this server, with Dovecot-style queries.
    pub fn auth_config(&self, cache: &str) -> String {
        let driver = match self.kind {
            Kind::Postgres => "pgsql",
            Kind::Mariadb => "mysql",
        };
        format!(
            "{cache}\n[auth.sql]\ndriver = \"{driver}\"\n\
             connect = \"host=127.0.0.1 port={port} dbname={DB} user={DB_USER} password={DB_PASSWORD}\"\n\
             password_query = \"SELECT userid AS user, password FROM users WHERE userid = '%u'\"\n\
             user_query = \"SELECT userid AS user, quota_rule FROM users WHERE userid = '%u'\"\n\
             iterate_query = \"SELECT userid AS user FROM users\"\n\
             query_timeout = 3\n",
            port = self.port
        )
    }
}
