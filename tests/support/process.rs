//! What the kill tests share: the `maildex` binary, a `maildex serve` process they can
//! SIGKILL and restart, and the checks made after a restart (no file left in `tmp/`,
//! `maildex index check` clean).
//!
//! The binary: `cargo test --workspace` builds it into the target folder next to the test
//! executables; `cargo test -p maildex-tests` alone does not (a package cannot depend on
//! another package's binary on stable cargo), so it is built then, or `MAILDEX_BIN` names it.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[allow(unused_imports)] // tests/hostile starts no process
pub use super::postfix::free_port;

/// The maildex binary: `$MAILDEX_BIN`, else the one in this test's target folder, built
/// first (a no-op when it is up to date, so a stale binary is never tested), once per test
/// process: the tests asking for it run in parallel threads.
pub fn maildex_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("MAILDEX_BIN") {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
        let bin = dir.join("maildex");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = Command::new(cargo)
            .args(["build", "-q", "-p", "maildex", "--bin", "maildex"])
            .status()
            .unwrap();
        assert!(st.success(), "building the maildex binary failed");
        assert!(bin.exists(), "no maildex binary at {}", bin.display());
        bin
    })
    .clone()
}

/// The kill and fault harnesses (system::crash_points, lmtp::crash) restart and SIGKILL
/// daemons dozens of times under load. In separate test binaries the IMAP one never ran
/// beside the LMTP ones; in one binary it would, so it takes this lock exclusively
/// ([`kill_tests_alone`]) and the LMTP ones, which always ran side by side, share it
/// ([`kill_tests_shared`]).
static KILL_TESTS: RwLock<()> = RwLock::new(());

/// Held by a kill test that no other kill test may run beside.
pub fn kill_tests_alone() -> RwLockWriteGuard<'static, ()> {
    KILL_TESTS.write().unwrap_or_else(|p| p.into_inner())
}

/// Held by a kill test that others holding this may run beside.
pub fn kill_tests_shared() -> RwLockReadGuard<'static, ()> {
    KILL_TESTS.read().unwrap_or_else(|p| p.into_inner())
}

/// A `maildex serve` process.
pub struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    /// Starts `maildex serve` and waits until `addr` greets (LMTP `220` or IMAP `* OK`).
    pub fn start(bin: &Path, config: &Path, root: &Path, addr: SocketAddr) -> Daemon {
        Daemon::start_with(bin, config, root, addr, &[]).unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`Daemon::start`] with extra environment; `Err` with the log when the process
    /// exits before it greets (a fault injected into the start-up sync does that).
    pub fn start_with(
        bin: &Path,
        config: &Path,
        root: &Path,
        addr: SocketAddr,
        env: &[(&str, &str)],
    ) -> Result<Daemon, String> {
        let log = root.join("serve.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(bin)
            .args(["serve", "--config"])
            .arg(config)
            .env("MAILDEX_LOG", "warn")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        let mut d = Daemon { child, log };
        let t0 = Instant::now();
        loop {
            if let Some(st) = d.child.try_wait().unwrap() {
                return Err(format!("maildex serve exited with {st}: {}", d.log_text()));
            }
            if greets(addr) {
                return Ok(d);
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "maildex serve does not listen: {}",
                d.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to exit.
    pub fn wait(&mut self) -> std::process::ExitStatus {
        self.child.wait().unwrap()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the process has exited (a `kill` fault fired).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    pub fn sigkill(&mut self) {
        let _ = self.child.kill();
        self.child.wait().unwrap();
    }

    /// SIGTERM, and the process must exit cleanly.
    pub fn terminate(&mut self) {
        let st = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        let st = self.child.wait().unwrap();
        assert!(
            st.success(),
            "maildex serve after SIGTERM: {st}: {}",
            self.log_text()
        );
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Whether a connection to `addr` gets a greeting.
fn greets(addr: SocketAddr) -> bool {
    let Ok(s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut line = String::new();
    let ok = BufReader::new(&s).read_line(&mut line).is_ok()
        && (line.starts_with("220 ") || line.starts_with("* OK"));
    let quit: &[u8] = if line.starts_with("220") {
        b"QUIT\r\n"
    } else {
        b"a LOGOUT\r\n"
    };
    let _ = std::io::Write::write_all(&mut &s, quit);
    ok
}

/// Files left in any `tmp/` under `root`.
pub fn tmp_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if d.file_name().is_some_and(|n| n == "tmp") {
                out.push(p);
            }
        }
    }
    out
}

/// What every restart must leave, checked after the daemon stopped: no file in any `tmp/`
/// under `root/mail`, and `maildex index check --all` clean. Panics naming `what`.
pub fn assert_settled(bin: &Path, config: &Path, root: &Path, what: &str) {
    let tmp = tmp_files(&root.join("mail"));
    assert!(tmp.is_empty(), "{what}: left in tmp/: {tmp:?}");
    if let Err(report) = index_check(bin, config) {
        panic!("{what}: index check: {report}");
    }
}

/// `maildex index check --all`: `Err` with its report when it is not clean.
pub fn index_check(bin: &Path, config: &Path) -> Result<(), String> {
    let out = Command::new(bin)
        .args(["index", "check", "--all", "--config"])
        .arg(config)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
