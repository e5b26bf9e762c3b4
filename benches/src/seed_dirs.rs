//! The directories of the seed benchmark: a private MariaDB and a private OpenLDAP slapd
//! (Debian's), each started in a scratch folder on a loopback port below the ephemeral
//! range, as /work/shared/notes/directories-in-tests.md (and tests/support/sqldb.rs,
//! ldapdir.rs, which a bench cannot use: they are test modules) do it: in the foreground,
//! as our child in its own process group, stopped on drop and by the kernel if this
//! process dies first (`PR_SET_PDEATHSIG`). Users are loaded in bulk: one multi-row INSERT
//! per 1,000 users into MariaDB, `slapadd` before slapd starts.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The mail database and its read-only role.
pub const DB: &str = "maildb";
pub const DB_USER: &str = "maildex";
pub const DB_PASSWORD: &str = "db-secret";
pub const SUFFIX: &str = "dc=example,dc=org";
pub const PEOPLE: &str = "ou=people,dc=example,dc=org";
pub const ADMIN_DN: &str = "cn=admin,dc=example,dc=org";
pub const ADMIN_PW: &str = "admin-secret";
pub const SVC_DN: &str = "cn=svc,ou=services,dc=example,dc=org";
pub const SVC_PW: &str = "svc-secret";

/// Whether MariaDB's and slapd's programs and Dovecot's MySQL and LDAP drivers are installed:
/// (missing program or file, package).
pub fn missing() -> Vec<(&'static str, &'static str)> {
    [
        ("mariadbd", "mariadb-server"),
        ("mariadb-install-db", "mariadb-server"),
        ("mariadb", "mariadb-client"),
        ("slapd", "slapd"),
        ("slapadd", "slapd"),
        ("ldapsearch", "ldap-utils"),
        // Dovecot's drivers: without them its auth process fails every lookup, and the
        // benchmark would stop at the first RCPT with Dovecot's `451 4.3.0 Temporary
        // internal error`
        (
            "/usr/lib/dovecot/modules/auth/libdriver_mysql.so",
            "dovecot-mysql",
        ),
        (
            "/usr/lib/dovecot/modules/auth/libauthdb_ldap.so",
            "dovecot-ldap",
        ),
    ]
    .into_iter()
    .filter(|(p, _)| {
        if p.starts_with('/') {
            !std::path::Path::new(p).is_file()
        } else {
            !on_path(p)
        }
    })
    .collect()
}

fn on_path(prog: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin"].iter().map(PathBuf::from))
        .any(|d| d.join(prog).is_file())
}

/// A free loopback port below 32768 (a readiness poll on an ephemeral port can connect
/// to itself, the notes say).
fn free_low_port() -> Result<u16> {
    let seed = std::process::id() as usize;
    for k in 0..2_000usize {
        let p = 20_000 + (seed.wrapping_mul(7919) + k * 131) % 12_000;
        if std::net::TcpListener::bind(("127.0.0.1", p as u16)).is_ok() {
            return Ok(p as u16);
        }
    }
    bail!("no free port in 20000..32000")
}

/// Runs `cmd` (stdin from `input`), failing with its output.
fn run(cmd: &mut Command, input: &[u8]) -> Result<String> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("{cmd:?}"))?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let data = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output()?;
    let _ = writer.join();
    if !out.status.success() {
        bail!(
            "{cmd:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A server process, our child, in its own process group; stopped on drop.
struct Proc {
    child: Child,
    sig: libc::c_int,
}

impl Proc {
    fn spawn(cmd: &mut Command, log: &Path, sig: libc::c_int) -> Result<Proc> {
        let out = std::fs::File::create(log)?;
        cmd.stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0);
        // SAFETY: only prctl(2), async-signal-safe, runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = cmd.spawn().with_context(|| format!("{cmd:?}"))?;
        Ok(Proc { child, sig })
    }

    /// Waits until `ready` (at most 60 s), failing with `log` when the process exits.
    fn wait_ready(&mut self, log: &Path, ready: impl Fn() -> bool) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ready() {
            let text = || std::fs::read_to_string(log).unwrap_or_default();
            if let Some(st) = self.child.try_wait()? {
                bail!("{} exited ({st}):\n{}", log.display(), text());
            }
            if Instant::now() > deadline {
                bail!("not ready within 60 s:\n{}", text());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, self.sig) };
        let _ = self.child.wait();
    }
}

/// A private MariaDB with table `users (userid, password)` in [`DB`].
pub struct Mariadb {
    pub port: u16,
    dir: PathBuf,
    proc: Proc,
}

impl Mariadb {
    /// Creates the data folder under `dir` (short: the socket path is limited), starts
    /// the server and creates the database, its role and the table.
    pub fn start(dir: &Path) -> Result<Mariadb> {
        std::fs::create_dir_all(dir)?;
        let data = dir.join("data");
        run(
            Command::new("mariadb-install-db")
                .args(["--no-defaults", "--user=root", "--skip-test-db"])
                .arg("--auth-root-authentication-method=normal")
                .arg(format!("--datadir={}", data.display())),
            b"",
        )?;
        let port = free_low_port()?;
        let d = dir.display();
        let log = dir.join("server.log");
        let mut proc = Proc::spawn(
            Command::new("mariadbd")
                .args(["--no-defaults", "--user=root"])
                .arg(format!("--datadir={d}/data"))
                .arg(format!("--socket={d}/mysqld.sock"))
                .arg(format!("--port={port}"))
                .arg(format!("--pid-file={d}/mysqld.pid"))
                .arg(format!("--log-error={d}/error.log"))
                .args(["--bind-address=127.0.0.1", "--skip-log-bin"])
                .args(["--innodb-buffer-pool-size=64M", "--skip-name-resolve"])
                // more than the default 151: both servers' pools and the auth workers
                .arg("--max-connections=500"),
            &log,
            libc::SIGTERM,
        )?;
        let sock = format!("--socket={}", dir.join("mysqld.sock").display());
        proc.wait_ready(&dir.join("error.log"), || {
            // `ping` succeeds once the server answers (even "access denied")
            Command::new("mariadb-admin")
                .args(["--no-defaults", "-uroot", &sock, "ping"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })?;
        let m = Mariadb {
            port,
            dir: dir.to_owned(),
            proc,
        };
        m.sql(&format!(
            "CREATE DATABASE {DB}; \
             CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{DB_PASSWORD}'; \
             GRANT SELECT ON {DB}.* TO '{DB_USER}'@'127.0.0.1'; \
             CREATE TABLE {DB}.users (userid VARCHAR(128) PRIMARY KEY, \
             password VARCHAR(255) NOT NULL)"
        ))?;
        Ok(m)
    }

    /// Runs SQL as root over the socket; returns the output (tab-separated, no headers).
    pub fn sql(&self, sql: &str) -> Result<String> {
        run(
            Command::new("mariadb")
                .args(["--no-defaults", "-uroot", "-N", "-B"])
                .arg(format!(
                    "--socket={}",
                    self.dir.join("mysqld.sock").display()
                )),
            sql.as_bytes(),
        )
    }

    /// Adds `users` (full addresses), all with the stored `password` (`{SCHEME}data`).
    pub fn add_users(&self, users: impl Iterator<Item = String>, password: &str) -> Result<()> {
        let users: Vec<String> = users.collect();
        let mut sql = String::new();
        for chunk in users.chunks(1_000) {
            sql.push_str(&format!("INSERT INTO {DB}.users VALUES "));
            let rows: Vec<String> = chunk
                .iter()
                .map(|u| format!("('{u}','{password}')"))
                .collect();
            sql.push_str(&rows.join(","));
            sql.push_str(";\n");
        }
        self.sql(&sql).map(drop)
    }

    /// Deletes every user.
    pub fn clear_users(&self) -> Result<()> {
        self.sql(&format!("DELETE FROM {DB}.users")).map(drop)
    }

    /// `Com_select`: SELECT statements the server has run so far (any client).
    pub fn selects(&self) -> Result<u64> {
        let out = self.sql("SHOW GLOBAL STATUS LIKE 'Com_select'")?;
        out.split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("Com_select: {out:?}"))
    }

    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// `connect` of a maildex `[auth.sql]` or Dovecot dovecot-sql.conf.ext.
    pub fn connect(&self) -> String {
        format!(
            "host=127.0.0.1 port={} dbname={DB} user={DB_USER} password={DB_PASSWORD}",
            self.port
        )
    }
}

/// A private slapd with `ou=people` users found by `mail`, a service account that may read
/// them (and their userPassword), and the monitor backend (search counts).
pub struct Slapd {
    pub port: u16,
    proc: Proc,
}

/// `slappasswd -s password`.
fn slappasswd(password: &str) -> Result<String> {
    Ok(run(Command::new("slappasswd").args(["-s", password]), b"")?
        .trim()
        .to_owned())
}

impl Slapd {
    /// Writes slapd.conf under `dir`, loads the base entries and `users` (full addresses,
    /// all with the stored `password`) with slapadd, and starts slapd.
    pub fn start(dir: &Path, users: impl Iterator<Item = String>, password: &str) -> Result<Slapd> {
        std::fs::create_dir_all(dir.join("db"))?;
        let d = dir.display();
        let conf = dir.join("slapd.conf");
        std::fs::write(
            &conf,
            format!(
                "include /etc/ldap/schema/core.schema\n\
                 include /etc/ldap/schema/cosine.schema\n\
                 include /etc/ldap/schema/nis.schema\n\
                 include /etc/ldap/schema/inetorgperson.schema\n\
                 modulepath /usr/lib/ldap\nmoduleload back_mdb\nmoduleload back_monitor\n\
                 pidfile {d}/slapd.pid\nargsfile {d}/slapd.args\n\
                 database mdb\nmaxsize 1073741824\nsuffix \"{SUFFIX}\"\n\
                 rootdn \"{ADMIN_DN}\"\nrootpw {root}\ndirectory {d}/db\n\
                 index objectClass eq\nindex uid,mail eq\n\
                 limits dn.exact=\"{SVC_DN}\" size=unlimited\n\
                 access to attrs=userPassword\n  by anonymous auth\n\
                 \x20 by dn.exact=\"{SVC_DN}\" read\n  by * none\n\
                 access to *\n  by dn.exact=\"{SVC_DN}\" read\n  by self read\n  by * none\n\
                 database monitor\n\
                 access to *\n  by dn.exact=\"{ADMIN_DN}\" read\n  by * none\n",
                root = slappasswd(ADMIN_PW)?
            ),
        )?;
        let mut ldif = format!(
            "dn: {SUFFIX}\nobjectClass: top\nobjectClass: dcObject\nobjectClass: organization\n\
             o: Example\ndc: example\n\n\
             dn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people\n\n\
             dn: ou=services,{SUFFIX}\nobjectClass: organizationalUnit\nou: services\n\n\
             dn: {SVC_DN}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\n\
             cn: svc\nuserPassword: {}\n",
            slappasswd(SVC_PW)?
        );
        for (i, mail) in users.enumerate() {
            let name = mail.split('@').next().unwrap_or(&mail).to_owned();
            ldif.push_str(&format!(
                "\ndn: uid={name},{PEOPLE}\nobjectClass: inetOrgPerson\n\
                 objectClass: posixAccount\nuid: {name}\ncn: {name}\nsn: {name}\n\
                 mail: {mail}\nuidNumber: {}\ngidNumber: 10000\n\
                 homeDirectory: /home/{name}\nuserPassword: {password}\n",
                20_000 + i
            ));
        }
        let ldif_path = dir.join("data.ldif");
        std::fs::write(&ldif_path, ldif)?;
        run(
            Command::new("slapadd")
                .args(["-q", "-f"])
                .arg(&conf)
                .arg("-l")
                .arg(&ldif_path),
            b"",
        )?;
        let port = free_low_port()?;
        let log = dir.join("server.log");
        let mut proc = Proc::spawn(
            Command::new("slapd")
                .args(["-d", "0", "-f"])
                .arg(&conf)
                .args(["-h", &format!("ldap://127.0.0.1:{port}/")]),
            &log,
            libc::SIGTERM,
        )?;
        let uri = format!("ldap://127.0.0.1:{port}");
        proc.wait_ready(&log, || {
            Command::new("ldapsearch")
                .args(["-x", "-H", &uri, "-s", "base", "-b", "", "namingContexts"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })?;
        Ok(Slapd { port, proc })
    }

    pub fn uri(&self) -> String {
        format!("ldap://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// Completed searches and binds so far (the monitor backend), less the monitor
    /// searches of this function itself: one per earlier call is counted.
    pub fn ops(&self) -> Result<(u64, u64)> {
        let out = run(
            Command::new("ldapsearch")
                .args([
                    "-x",
                    "-LLL",
                    "-H",
                    &self.uri(),
                    "-D",
                    ADMIN_DN,
                    "-w",
                    ADMIN_PW,
                ])
                .args(["-b", "cn=Operations,cn=Monitor", "-s", "one"])
                .args(["(|(cn=Search)(cn=Bind))", "cn", "monitorOpCompleted"]),
            b"",
        )?;
        let (mut search, mut bind, mut cn) = (None, None, String::new());
        for line in out.lines() {
            if let Some(v) = line.strip_prefix("cn: ") {
                cn = v.trim().to_owned();
            } else if let Some(v) = line.strip_prefix("monitorOpCompleted: ") {
                let n: u64 = v.trim().parse().context("monitorOpCompleted")?;
                match cn.as_str() {
                    "Search" => search = Some(n),
                    "Bind" => bind = Some(n),
                    _ => {}
                }
            }
        }
        match (search, bind) {
            (Some(s), Some(b)) => Ok((s, b)),
            _ => bail!("slapd monitor: {out}"),
        }
    }
}
