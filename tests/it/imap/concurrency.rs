//! Concurrency checker: many IMAP sessions on the same two mailboxes doing random APPEND,
//! STORE, EXPUNGE, COPY, MOVE, FETCH, SEARCH and IDLE against the real daemon, each keeping
//! a model built only from what the server told it. It fails on a sequence number never
//! announced, a UID map that changes other than by EXPUNGE, ENVELOPE / BODYSTRUCTURE /
//! RFC822.SIZE / INTERNALDATE / BODY[] of a UID that changes (also across COPY and MOVE),
//! a STORE that loses another session's concurrent change (each session toggles only its
//! own keyword `$sN`, so the keyword's final state is that session's last acknowledged STORE),
//! `\Recent` given to two sessions, a change made while a session idles that IDLE does not
//! announce, sessions that disagree after a NOOP at a checkpoint (all sessions stop at a
//! barrier; each compares its model with `UID SEARCH ALL`, `UID FETCH 1:* FLAGS`, STATUS
//! and the other sessions), and MODSEQ going back when the server sends MODSEQ.
//!
//! `MAILDEX_CONC_SECS` (default 3) bounds the run, `MAILDEX_CONC_SEED` picks the seed
//! (default: from the clock, printed). A failure names the session, the seed and the last
//! commands of every session.

mod model;
mod session;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::support::daemon::Server;
use crate::support::imap::parse;
use model::{Common, Effects, FactStore, Key, Model};

/// Sessions in a run; session `i` starts on mailbox `i % 2`.
const SESSIONS: usize = 6;
/// The mailboxes every session works on.
const MAILBOXES: [&str; 2] = ["INBOX", "Shared"];
/// Commands a session keeps in its history for a failure report.
const HISTORY: usize = 20;
/// How long a session waits at a checkpoint for the others (a bound, not a speed claim).
const GATE_PATIENCE: Duration = Duration::from_secs(90);

/// A barrier that a failing session can open for everyone (std's Barrier would leave the
/// others waiting forever).
pub struct Gate {
    n: usize,
    state: Mutex<(usize, u64, bool)>,
    cv: Condvar,
}

impl Gate {
    fn new(n: usize) -> Gate {
        Gate {
            n,
            state: Mutex::new((0, 0, false)),
            cv: Condvar::new(),
        }
    }

    /// Waits for all `n`; `Ok(true)` for the last to arrive, `Err` when the run was aborted.
    pub fn wait(&self) -> Result<bool, String> {
        let mut s = self.state.lock().unwrap();
        if s.2 {
            return Err("aborted".into());
        }
        let gen = s.1;
        s.0 += 1;
        if s.0 == self.n {
            s.0 = 0;
            s.1 += 1;
            self.cv.notify_all();
            return Ok(true);
        }
        let deadline = Instant::now() + GATE_PATIENCE;
        while s.1 == gen && !s.2 {
            let left = deadline
                .checked_duration_since(Instant::now())
                .ok_or("another session did not reach the checkpoint")?;
            s = self.cv.wait_timeout(s, left).unwrap().0;
        }
        if s.2 {
            return Err("aborted".into());
        }
        Ok(false)
    }

    pub fn abort(&self) {
        self.state.lock().unwrap().2 = true;
        self.cv.notify_all();
    }
}

/// One mailbox as a session saw it at a checkpoint: UID -> flags (lower case).
#[derive(Clone, Debug, PartialEq)]
pub struct Snap {
    pub mbox: usize,
    pub flags: BTreeMap<u32, BTreeSet<String>>,
}

/// What all sessions share.
pub struct Shared {
    pub seed: u64,
    pub deadline: Instant,
    pub condstore: AtomicBool,
    pub facts: Mutex<FactStore>,
    pub recent: Mutex<HashMap<Key, usize>>,
    /// ((mailbox, uid), session) -> whether that session's keyword must be set: its last
    /// acknowledged STORE, APPEND or own COPY/MOVE of the message.
    pub keywords: Mutex<HashMap<(Key, usize), bool>>,
    pub removed: Mutex<HashSet<Key>>,
    /// Messages added by a command sent after `mark`: (message, mark).
    pub added: Mutex<Vec<(Key, u64)>>,
    /// Orders commands across sessions (taken before each is sent).
    pub mark: AtomicU64,
    pub snaps: Mutex<Vec<Option<Snap>>>,
    pub history: Vec<Mutex<VecDeque<String>>>,
    pub gate: Gate,
    pub failed: AtomicBool,
    pub stop: AtomicBool,
    pub stats: Mutex<BTreeMap<String, u64>>,
    /// `MAILDEX_CONC_LOG`: every command and response of every session, in full.
    pub log: Option<Mutex<std::io::BufWriter<std::fs::File>>>,
}

impl Shared {
    pub fn common(&self) -> Common<'_> {
        Common {
            facts: &self.facts,
            recent: &self.recent,
            removed: &self.removed,
        }
    }

    pub fn count(&self, what: &str) {
        *self.stats.lock().unwrap().entry(what.into()).or_default() += 1;
    }

    fn histories(&self) -> String {
        let mut out = String::new();
        for (i, h) in self.history.iter().enumerate() {
            out.push_str(&format!("--- session {i}, last {HISTORY} commands:\n"));
            for line in h.lock().unwrap().iter() {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
    )
}

/// Runs `SESSIONS` sessions for `secs` seconds with `seed`; the failures, if any.
fn run(server: &Server, seed: u64, secs: u64) -> (Vec<String>, Arc<Shared>) {
    let shared = Arc::new(Shared {
        seed,
        deadline: Instant::now() + Duration::from_secs(secs),
        condstore: AtomicBool::new(false),
        facts: Mutex::default(),
        recent: Mutex::default(),
        keywords: Mutex::default(),
        removed: Mutex::default(),
        added: Mutex::default(),
        mark: AtomicU64::new(1),
        snaps: Mutex::new(vec![None; SESSIONS]),
        history: (0..SESSIONS).map(|_| Mutex::default()).collect(),
        gate: Gate::new(SESSIONS),
        failed: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        stats: Mutex::default(),
        log: std::env::var_os("MAILDEX_CONC_LOG").map(|p| {
            let f = std::fs::File::create(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            Mutex::new(std::io::BufWriter::new(f))
        }),
    });
    let failures = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..SESSIONS)
        .map(|id| {
            let sh = Arc::clone(&shared);
            let fails = Arc::clone(&failures);
            let addr = server.imap;
            std::thread::spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    session::Session::start(id, addr, Arc::clone(&sh)).run()
                }));
                if let Err(p) = r {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "panic".into());
                    // a session that stopped because another failed says nothing
                    if !(msg.contains("aborted") && sh.failed.load(Ordering::SeqCst)) {
                        fails.lock().unwrap().push(format!("session {id}: {msg}"));
                    }
                    sh.failed.store(true, Ordering::SeqCst);
                    sh.gate.abort();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    if let Some(log) = &shared.log {
        std::io::Write::flush(&mut *log.lock().unwrap()).unwrap();
    }
    let f = failures.lock().unwrap().clone();
    (f, shared)
}

/// Puts a few messages in each mailbox before the sessions start.
fn seed_mailboxes(server: &Server) {
    let mut c = server.login("alice");
    c.ok(&format!("CREATE {}", MAILBOXES[1]));
    for (i, mbox) in MAILBOXES.iter().enumerate() {
        for k in 0..8 {
            let msg = session::message(&format!("seed{i}-{k}"), k * 97 + 20, k % 3 == 0);
            let r = c.cmd(&format!("APPEND {mbox} {{{}+}}\r\n{msg}", msg.len()));
            assert_eq!(r.status(), "OK", "{}", r.all());
        }
    }
    c.ok("LOGOUT");
}

#[test]
fn sessions_agree_under_concurrent_changes() {
    let seed = env_u64("MAILDEX_CONC_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let secs = env_u64("MAILDEX_CONC_SECS").unwrap_or(3);
    eprintln!("concurrency: MAILDEX_CONC_SEED={seed} MAILDEX_CONC_SECS={secs}");
    let server = Server::start();
    seed_mailboxes(&server);
    let (failures, shared) = run(&server, seed, secs);
    let stats = shared.stats.lock().unwrap().clone();
    eprintln!("concurrency: seed {seed}: {stats:?}");
    if !failures.is_empty() {
        panic!(
            "concurrency checker failed (replay: MAILDEX_CONC_SEED={seed} MAILDEX_CONC_SECS={secs} \
             cargo test -p maildex-tests --test it concurrency)\n{}\n{}",
            failures.join("\n"),
            shared.histories()
        );
    }
    assert!(
        stats.get("checkpoint").copied().unwrap_or(0) >= SESSIONS as u64,
        "no checkpoint ran: {stats:?}"
    );
    server.assert_clean("alice");
}

/// The checker trips on wrong answers: each of these responses, fed to a model, is refused.
#[test]
fn checker_refuses_inconsistent_responses() {
    let facts = Mutex::default();
    let recent = Mutex::default();
    let removed = Mutex::default();
    let sh = Common {
        facts: &facts,
        recent: &recent,
        removed: &removed,
    };
    let fresh = || {
        let mut m = Model::default();
        let mut ef = Effects::default();
        for line in [
            "* 3 EXISTS\r\n",
            "* 1 FETCH (UID 4 FLAGS (\\Seen) RFC822.SIZE 100)\r\n",
            "* 2 FETCH (UID 7 FLAGS ())\r\n",
            "* 3 FETCH (UID 9 FLAGS (\\Recent))\r\n",
        ] {
            m.apply(&sh, &parse(line.as_bytes().to_vec()), &mut ef)
                .unwrap();
        }
        m
    };
    let refused = |line: &str, m: &mut Model| {
        m.apply(
            &sh,
            &parse(line.as_bytes().to_vec()),
            &mut Effects::default(),
        )
        .expect_err(line)
    };
    // a sequence number never announced
    assert!(refused("* 4 FETCH (UID 10 FLAGS ())\r\n", &mut fresh()).contains("never announced"));
    assert!(refused("* 5 EXPUNGE\r\n", &mut fresh()).contains("never announced"));
    // the UID map changed without EXPUNGE
    assert!(refused("* 2 FETCH (UID 8)\r\n", &mut fresh()).contains("UID map changed"));
    // EXISTS going down
    assert!(refused("* 2 EXISTS\r\n", &mut fresh()).contains("EXISTS"));
    // an immutable fact that changes
    assert!(refused("* 1 FETCH (UID 4 RFC822.SIZE 101)\r\n", &mut fresh()).contains("RFC822.SIZE"));
    // \Recent for a second session, and lost within a selection
    let mut other = fresh();
    other.id = 1;
    other.recent.clear();
    assert!(refused("* 3 FETCH (UID 9 FLAGS (\\Recent))\r\n", &mut other).contains("\\Recent"));
    assert!(refused("* 3 FETCH (UID 9 FLAGS ())\r\n", &mut fresh()).contains("\\Recent"));
    // MODSEQ going back
    let mut m = fresh();
    m.apply(
        &sh,
        &parse(b"* 2 FETCH (UID 7 MODSEQ (20))\r\n".to_vec()),
        &mut Effects::default(),
    )
    .unwrap();
    assert!(refused("* 2 FETCH (UID 7 MODSEQ (19))\r\n", &mut m).contains("MODSEQ"));
    // a copy whose facts differ from its source
    let mut f = facts.lock().unwrap();
    f.link((0, 4), (1, 30)).unwrap();
    let wrong = model::Facts {
        size: Some(99),
        ..Default::default()
    };
    assert!(f.record((1, 30), &wrong).is_err());
}
