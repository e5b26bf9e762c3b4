//! A private OpenLDAP slapd for the LDAP user-directory tests, as tests/support/sqldb.rs
//! runs PostgreSQL and MariaDB: started once per test binary ([`Slapd::get`]) in the
//! foreground (`-d 0`) under the same guardian, in a scratch folder, on a loopback port
//! below the ephemeral range, with the slapd.conf of
//! /work/shared/notes/directories-in-tests.md section 3, plus a read grant on
//! userPassword for the service account, a one-attribute schema for `mailQuota`, and a
//! size limit for the service account as a site sets one: 500 entries per search (slapd's
//! default), any number through paged results (RFC 2696).
//! Tests share it through [`Slapd::shared`] and add users of their own; the one that stops
//! it takes [`Slapd::exclusive`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::sqldb::{free_low_port, run, spawn_guardian, wait_ready};

pub const SUFFIX: &str = "dc=example,dc=org";
pub const PEOPLE: &str = "ou=people,dc=example,dc=org";
pub const ADMIN_DN: &str = "cn=admin,dc=example,dc=org";
pub const ADMIN_PW: &str = "admin-secret";
pub const SVC_DN: &str = "cn=svc,ou=services,dc=example,dc=org";
pub const SVC_PW: &str = "svc-secret";

/// A running (or stopped) private slapd.
pub struct Slapd {
    pub port: u16,
    pub dir: PathBuf,
    guardian: Mutex<Option<Child>>,
    lock: RwLock<()>,
}

/// Whether slapd and the ldap-utils are installed (scripts/test-all.sh installs them).
pub fn available() -> bool {
    Path::new("/usr/sbin/slapd").exists() && crate::support::imap::have_tool("ldapadd")
}

/// `slappasswd -s password`: the `{SSHA}` form slapd's tools write.
pub fn slappasswd(password: &str) -> String {
    let out = Command::new("slappasswd")
        .args(["-s", password])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

impl Slapd {
    /// The server, started on first use.
    pub fn get() -> &'static Slapd {
        static SLAPD: OnceLock<Slapd> = OnceLock::new();
        SLAPD.get_or_init(Slapd::create)
    }

    /// The server for a test that needs it up: other tests may use it meanwhile.
    pub fn shared() -> (&'static Slapd, RwLockReadGuard<'static, ()>) {
        let s = Slapd::get();
        (s, s.lock.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The server for a test that stops it: no other test uses it meanwhile.
    pub fn exclusive() -> (&'static Slapd, RwLockWriteGuard<'static, ()>) {
        let s = Slapd::get();
        (s, s.lock.write().unwrap_or_else(|p| p.into_inner()))
    }

    fn create() -> Slapd {
        let dir = PathBuf::from(format!("/tmp/mdx-ldap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("db")).unwrap();
        let d = dir.display();
        std::fs::write(
            dir.join("maildex.schema"),
            "attributetype ( 1.3.6.1.4.1.99999.20.1.1 NAME 'mailQuota' \
             DESC 'storage quota in bytes' EQUALITY integerMatch \
             SYNTAX 1.3.6.1.4.1.1466.115.121.1.27 SINGLE-VALUE )\n\
             objectclass ( 1.3.6.1.4.1.99999.20.2.1 NAME 'maildexUser' SUP top AUXILIARY \
             MAY ( mailQuota ) )\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("slapd.conf"),
            format!(
                "include /etc/ldap/schema/core.schema\n\
                 include /etc/ldap/schema/cosine.schema\n\
                 include /etc/ldap/schema/nis.schema\n\
                 include /etc/ldap/schema/inetorgperson.schema\n\
                 include {d}/maildex.schema\n\
                 modulepath /usr/lib/ldap\nmoduleload back_mdb\n\
                 pidfile {d}/slapd.pid\nargsfile {d}/slapd.args\n\
                 database mdb\nmaxsize 104857600\nsuffix \"{SUFFIX}\"\n\
                 rootdn \"{ADMIN_DN}\"\nrootpw {root}\ndirectory {d}/db\n\
                 index objectClass eq\nindex uid,mail eq\n\
                 limits dn.exact=\"{SVC_DN}\" size.soft=500 size.hard=500 \
                 size.prtotal=unlimited\n\
                 access to attrs=userPassword\n  by self write\n  by anonymous auth\n\
                 \x20 by dn.exact=\"{SVC_DN}\" read\n  by * none\n\
                 access to *\n  by dn.exact=\"{SVC_DN}\" read\n  by self read\n  by * none\n",
                root = slappasswd(ADMIN_PW)
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("base.ldif"),
            format!(
                "dn: {SUFFIX}\nobjectClass: top\nobjectClass: dcObject\nobjectClass: organization\n\
                 o: Example\ndc: example\n\n\
                 dn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people\n\n\
                 dn: ou=services,{SUFFIX}\nobjectClass: organizationalUnit\nou: services\n\n\
                 dn: {SVC_DN}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\n\
                 cn: svc\nuserPassword: {}\n",
                slappasswd(SVC_PW)
            ),
        )
        .unwrap();
        let conf = dir.join("slapd.conf");
        run(Command::new("slaptest").args(["-u", "-Q", "-f"]).arg(&conf));
        run(Command::new("slapadd")
            .args(["-q", "-f"])
            .arg(&conf)
            .arg("-l")
            .arg(dir.join("base.ldif")));
        let s = Slapd {
            port: free_low_port(),
            dir,
            guardian: Mutex::new(None),
            lock: RwLock::new(()),
        };
        s.start();
        s
    }

    /// `ldap://127.0.0.1:PORT`.
    pub fn uri(&self) -> String {
        format!("ldap://127.0.0.1:{}", self.port)
    }

    /// `ldapi://` and the socket's path, percent-encoded (RFC 4516 as OpenLDAP reads it).
    pub fn ldapi_uri(&self) -> String {
        format!(
            "ldapi://{}",
            self.dir
                .join("ldapi")
                .display()
                .to_string()
                .replace('/', "%2F")
        )
    }

    /// Starts slapd and waits until it answers.
    pub fn start(&self) {
        let d = self.dir.display();
        let script = format!(
            "slapd -d 0 -f {d}/slapd.conf -h 'ldap://127.0.0.1:{p}/ {ldapi}' > {d}/server.log 2>&1 & \
             pid=$!; trap 'kill -TERM $pid; wait $pid; rm -rf {d}; exit 0' TERM; wait $pid",
            p = self.port,
            ldapi = self.ldapi_uri()
        );
        *self.guardian.lock().unwrap() = Some(spawn_guardian(script));
        wait_ready(&self.guardian, &self.dir, "slapd", || self.answers());
    }

    /// Stops slapd (by its pid; the guardian then exits) and waits until it is gone.
    pub fn stop(&self) {
        let Some(mut child) = self.guardian.lock().unwrap().take() else {
            return;
        };
        let text = std::fs::read_to_string(self.dir.join("slapd.pid")).unwrap();
        let pid: i32 = text.trim().parse().unwrap();
        // SAFETY: a plain syscall on slapd's pid, which is alive (our grandchild)
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        child.wait().unwrap();
        assert!(!self.answers(), "slapd still answers after stop");
    }

    fn answers(&self) -> bool {
        Command::new("ldapsearch")
            .args([
                "-x",
                "-H",
                &self.uri(),
                "-s",
                "base",
                "-b",
                "",
                "namingContexts",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Adds LDIF as the rootdn.
    pub fn add(&self, ldif: &str) {
        use std::io::Write;
        let mut child = Command::new("ldapadd")
            .args(["-x", "-H", &self.uri(), "-D", ADMIN_DN, "-w", ADMIN_PW])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(ldif.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "ldapadd: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Adds a user `uid=NAME,ou=people` with `mail: NAME@example.org`, the given
    /// userPassword (as stored: `{SSHA}...`, `{ARGON2ID}...`) and an optional mailQuota.
    pub fn add_user(&self, name: &str, password: &str, quota: Option<u64>) {
        self.add(&user_ldif(name, password, quota));
    }

    /// Adds users `NAME` of `names` as [`Slapd::add_user`] does, in one ldapadd.
    pub fn add_users(&self, names: impl Iterator<Item = String>, password: &str) {
        let ldif: Vec<String> = names.map(|n| user_ldif(&n, password, None)).collect();
        self.add(&ldif.join("\n"));
    }

    /// The `[auth]` body of a daemon using this server: users found by `mail`, Dovecot's
    /// attribute mapping; `extra` is more `[auth.ldap]` lines (`auth_bind = true` ...).
    pub fn auth_config(&self, cache: &str, extra: &str) -> String {
        self.auth_config_at(&self.uri(), cache, extra)
    }

    /// [`Slapd::auth_config`] with `uris` as given.
    pub fn auth_config_at(&self, uris: &str, cache: &str, extra: &str) -> String {
        format!(
            "{cache}\n[auth.ldap]\nuris = \"{uris}\"\ndn = \"{SVC_DN}\"\ndnpass = \"{SVC_PW}\"\n\
             base = \"{PEOPLE}\"\n\
             pass_filter = \"(&(objectClass=posixAccount)(mail=%u))\"\n\
             pass_attrs = \"mail=user,userPassword=password\"\n\
             user_filter = \"(&(objectClass=posixAccount)(mail=%u))\"\n\
             user_attrs = \"mail=user,mailQuota=quota_rule=*:bytes=%$\"\n\
             iterate_filter = \"(objectClass=posixAccount)\"\n\
             iterate_attrs = \"mail=user\"\nquery_timeout = 3\n{extra}"
        )
    }
}

/// The LDIF of one user of [`Slapd::add_user`].
fn user_ldif(name: &str, password: &str, quota: Option<u64>) -> String {
    let quota = quota.map_or(String::new(), |q| {
        format!("objectClass: maildexUser\nmailQuota: {q}\n")
    });
    format!(
        "dn: uid={name},{PEOPLE}\nobjectClass: inetOrgPerson\nobjectClass: posixAccount\n\
         {quota}uid: {name}\ncn: {name}\nsn: {name}\nmail: {name}@example.org\n\
         uidNumber: 10001\ngidNumber: 10001\nhomeDirectory: /home/{name}\n\
         userPassword: {password}\n"
    )
}
