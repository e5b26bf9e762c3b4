//! Crash test of the LMTP delivery path (issue 3, "Done when"): the real `maildex serve`
//! process takes a bounded LMTP load from several clients and is killed with SIGKILL in the
//! middle of it. After a restart on the same config:
//! - every (user, message) that got `250` is in that user's Maildir exactly once, and no
//!   message is there twice;
//! - `maildex index check --all` is clean (so every message has its full-text record);
//! - `UID SEARCH BODY` finds every load message in the Maildir, acknowledged or not, from
//!   the word in its base64 text part, and one message alone from its own token (issue 18:
//!   a crash between delivery and indexing never hides a delivered message from SEARCH);
//! - no file is left in any `tmp/` (each user's first use after the restart syncs the
//!   user's mail, which removes crash leftovers, see
//!   `maildex_maildir::deliver::clean_stale_tmp`).
//!
//! What is checked never depends on timing: the kill lands after a seeded random delay
//! counted from the first acknowledged delivery, and whatever was or was not acknowledged by
//! then, the invariants above must hold. `MAILDEX_CRASH_ITERATIONS` (default 24) sets the
//! number of kill/restart cycles, `MAILDEX_CRASH_SEED` the seed.
//!
//! `io_errors_at_each_delivery_step_answer_4xx_and_leave_nothing` injects EIO and ENOSPC
//! (`MAILDEX_FAULT`) at each write step of an LMTP delivery instead of a kill.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::support::imap::Client;
use crate::support::lmtp::Client as LmtpClient;
use crate::support::process::{
    assert_settled, env_or, free_port, kill_tests_shared, maildex_bin, Daemon,
};

const USERS: usize = 20;
const CLIENTS: usize = 4;
/// Transactions per client and load phase: the load is bounded in count, not only in time.
const PER_CLIENT: usize = 60;
const HEADER: &str = "X-Test-Id: ";
/// The word every load message's base64 text part holds (probes do not).
const SEARCH_WORD: &str = "Zustellnummer";

/// (user, test id) pairs.
type Acks = BTreeSet<(String, String)>;

#[test]
fn sigkill_during_lmtp_load_loses_and_duplicates_nothing() {
    let _kill_tests = kill_tests_shared();
    let iterations: usize = env_or("MAILDEX_CRASH_ITERATIONS", 24);
    let seed: u64 = env_or("MAILDEX_CRASH_SEED", 0x6c6d_7470);
    let bin = maildex_bin();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let imap_port = free_port();
    let config = write_config_imap(dir.path(), port, Some(imap_port), "");
    let users: Vec<String> = (0..USERS).map(|i| format!("user{i:02}")).collect();
    for u in &users {
        let hash = maildex_auth::PasswordHash::parse("{PLAIN}pw");
        maildex_auth::add_user(&dir.path().join("users"), u, &hash).unwrap();
    }
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut acked = Acks::new();
    let mut sent = Acks::new();
    let started = Instant::now();
    for iter in 0..iterations {
        let mut daemon = Daemon::start(&bin, &config, dir.path(), addr);
        let kill_after = Duration::from_millis(rng.gen_range(50..=800));
        let round = load_and_kill(&mut daemon, addr, iter, rng.gen(), kill_after, &users);
        eprintln!(
            "iteration {iter}: killed {kill_after:?} after the first 250; {} deliveries acknowledged, {} attempted",
            round.acked.len(),
            round.sent.len()
        );
        assert!(
            !round.acked.is_empty(),
            "the kill waits for a first 250, so some delivery must have been acknowledged"
        );
        acked.extend(round.acked);
        sent.extend(round.sent);

        // restart on the same config: each user's first use after the start (here a
        // delivery) syncs the user's mail, which repairs what the kill left
        let mut daemon = Daemon::start(&bin, &config, dir.path(), addr);
        let probe = format!("probe-{iter}");
        for user in &users {
            let r = deliver_one(addr, user, &probe);
            assert_eq!(r, Some(true), "the restarted daemon delivers");
            acked.insert((user.clone(), probe.clone()));
            sent.insert((user.clone(), probe.clone()));
        }
        // issue 18: what the kill left is found by SEARCH BODY, from the full-text index
        check_searchable(([127, 0, 0, 1], imap_port).into(), &users, iter);
        daemon.terminate();

        check_maildirs(dir.path(), &users, &acked, &sent);
        assert_settled(&bin, &config, dir.path(), &format!("iteration {iter}"));
    }
    eprintln!(
        "{iterations} kill/restart cycles in {:?}: {} deliveries acknowledged and found once each",
        started.elapsed(),
        acked.len()
    );
}

#[test]
fn one_unusable_maildir_at_start_up_does_not_keep_the_others_down() {
    let _kill_tests = kill_tests_shared();
    let bin = maildex_bin();
    let (dir, config, addr) = alice_and_bob();
    // bob's Maildir path is taken by a plain file: his mail cannot be opened (the start
    // does not look: issue 20 #3)
    std::fs::create_dir_all(dir.path().join("mail")).unwrap();
    std::fs::write(dir.path().join("mail/bob"), b"not a Maildir").unwrap();
    let mut daemon = Daemon::start(&bin, &config, dir.path(), addr);
    assert_eq!(deliver_one(addr, "alice", "to-alice"), Some(true));
    // bob's delivery fails temporarily (postfix keeps the message and retries)
    assert_eq!(deliver_one(addr, "bob", "to-bob"), Some(false));
    let log = daemon.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains("user=bob") && l.contains("mail/bob")),
        "the failure is logged with the user: {log}"
    );
    daemon.terminate();
    check_maildirs(
        dir.path(),
        &["alice".to_string()],
        &Acks::from([("alice".to_string(), "to-alice".to_string())]),
        &Acks::from([("alice".to_string(), "to-alice".to_string())]),
    );
}

/// Issue 3, "Limits and faults": a full disk or an I/O error at any step of a delivery
/// answers the recipients it hit `452 4.3.1` (ENOSPC) or `451 4.3.0` (EIO), so postfix keeps
/// the message, and leaves no partial file: what got `250` is there once, what got 4xx is
/// not there at all, `tmp/` is empty, `index check` is clean, and the retry (postfix's)
/// delivers it exactly once. The fault is the real daemon's `MAILDEX_FAULT` at the first hit
/// of each write step a delivery takes, for a message to two users.
#[test]
fn io_errors_at_each_delivery_step_answer_4xx_and_leave_nothing() {
    let _kill_tests = kill_tests_shared();
    let bin = maildex_bin();
    let users = ["alice".to_string(), "bob".to_string()];
    let points = [
        "tmp_write",
        "tmp_fsync",
        "link",
        "dir_fsync",
        "uidlist_append",
        "index_commit",
    ];
    for point in points {
        for (action, code) in [("eio", "451 4.3.0"), ("enospc", "452 4.3.1")] {
            let what = format!("{point}:1:{action}");
            let dir = tempfile::tempdir().unwrap();
            let port = free_port();
            let config = write_config(dir.path(), port, "quota = \"1GiB\"");
            for u in &users {
                let hash = maildex_auth::PasswordHash::parse("{PLAIN}pw");
                maildex_auth::add_user(&dir.path().join("users"), u, &hash).unwrap();
            }
            let addr: SocketAddr = ([127, 0, 0, 1], port).into();
            let mut sent = Acks::new();
            // Maildirs and indexes exist before the fault is armed
            let mut daemon = Daemon::start(&bin, &config, dir.path(), addr);
            for u in &users {
                assert_eq!(deliver_one(addr, u, &format!("warm-{u}")), Some(true));
                sent.insert((u.clone(), format!("warm-{u}")));
            }
            daemon.terminate();

            // the first hit of the step that comes after the delivery has begun writing
            // its message (`after=tmp_write`): each user's first use after the start syncs
            // the user's mail and may hit the step first (index_commit does, once per
            // mailbox when cur/ changed within the last second), which a count from the
            // start could not tell apart from the delivery's
            let plan = if point == "tmp_write" {
                format!("{point}:1:{action}")
            } else {
                format!("{point}:1:{action}:after=tmp_write")
            };
            let mut daemon =
                Daemon::start_with(&bin, &config, dir.path(), addr, &[("MAILDEX_FAULT", &plan)])
                    .unwrap_or_else(|e| panic!("{plan}: {e}"));
            let id = format!("fault-{point}-{action}");
            let mut c = Conn::open(addr).expect("LMTP session");
            let replies = c
                .replies(
                    &["alice", "bob"],
                    format!("{HEADER}{id}\r\n\r\nbody\r\n").as_bytes(),
                )
                .unwrap_or_else(|| panic!("{what}: the session broke: {}", daemon.log_text()));
            let _ = c.send(b"QUIT\r\n");
            assert!(
                daemon.log_text().contains("maildex-fault: fired"),
                "{what}: the fault never fired: {replies:?}\n{}",
                daemon.log_text()
            );
            let mut acked: Acks = sent.iter().cloned().collect();
            let mut failed = Vec::new();
            for (u, r) in users.iter().zip(&replies) {
                sent.insert((u.clone(), id.clone()));
                if r.starts_with("250 ") {
                    acked.insert((u.clone(), id.clone()));
                } else {
                    assert!(r.starts_with(code), "{what}: {u} got {r:?}, not {code}");
                    failed.push(u.clone());
                }
            }
            assert!(
                !failed.is_empty(),
                "{what}: every recipient got 250: {replies:?}"
            );
            // nothing of a failed delivery is there: a retry must not find a copy
            check_maildirs(dir.path(), &users, &acked, &acked);
            assert!(crate::support::process::tmp_files(&dir.path().join("mail")).is_empty());
            daemon.terminate();
            assert_settled(&bin, &config, dir.path(), &what);

            // postfix retries the recipients that got 4xx
            let mut daemon = Daemon::start(&bin, &config, dir.path(), addr);
            for u in &failed {
                assert_eq!(
                    deliver_one(addr, u, &id),
                    Some(true),
                    "{what}: retry for {u}"
                );
                acked.insert((u.clone(), id.clone()));
            }
            daemon.terminate();
            check_maildirs(dir.path(), &users, &acked, &acked);
            assert_settled(&bin, &config, dir.path(), &what);
        }
    }
}

/// Issue 19 #4: a new user's Maildir, default folders and index are made without syncing,
/// then made durable once before the first delivery is acknowledged. A creation cut short
/// (an I/O error or a kill at its first directory sync, or an index left torn by a power
/// loss with its creation marker) is made again by the next delivery: `250`, the same
/// folders as a user made in one go, no marker left, `index check` clean.
#[test]
fn a_new_users_skeleton_cut_short_is_made_again_by_the_next_delivery() {
    let _kill_tests = kill_tests_shared();
    let bin = maildex_bin();
    let folders = |root: &Path, u: &str| -> BTreeSet<String> {
        std::fs::read_dir(root.join("mail").join(u))
            .unwrap()
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    for case in ["eio", "kill", "torn"] {
        let (dir, config, addr) = alice_and_bob();
        // maildex_index::PENDING_FILE
        let marker = dir.path().join("index/alice/create.pending");
        let mut acked = Acks::new();
        if case == "torn" {
            // what a power loss before the final sync can leave: the folders, an index
            // whose pages never reached the disk, and its creation marker
            let mut daemon = Daemon::start(&bin, &config, dir.path(), addr);
            assert_eq!(deliver_one(addr, "bob", "bob-1"), Some(true));
            daemon.terminate();
            std::fs::create_dir_all(dir.path().join("mail/alice")).unwrap();
            for sub in ["tmp", "new", "cur"] {
                std::fs::create_dir(dir.path().join("mail/alice").join(sub)).unwrap();
            }
            std::fs::create_dir_all(dir.path().join("index/alice")).unwrap();
            std::fs::write(dir.path().join("index/alice/data.mdb"), vec![0x5a; 8192]).unwrap();
            std::fs::write(&marker, b"").unwrap();
        } else {
            let plan = format!("dir_fsync:1:{case}");
            let mut daemon =
                Daemon::start_with(&bin, &config, dir.path(), addr, &[("MAILDEX_FAULT", &plan)])
                    .unwrap();
            let first = deliver_one(addr, "alice", "alice-1");
            assert!(
                daemon.log_text().contains("maildex-fault: fired"),
                "{case}: the fault never fired: {first:?}\n{}",
                daemon.log_text()
            );
            // no 250 for a delivery into a skeleton that is not durable
            assert_ne!(first, Some(true), "{case}");
            assert!(marker.exists(), "{case}: the creation marker is gone");
            if case == "eio" {
                // the same process, the fault spent: the retry makes the skeleton again
                assert_eq!(deliver_one(addr, "alice", "alice-2"), Some(true), "{case}");
                acked.insert(("alice".to_string(), "alice-2".to_string()));
                daemon.terminate();
            } else {
                // the connection closes as the process dies, a moment before it can be reaped
                let t0 = Instant::now();
                while !daemon.exited() && t0.elapsed() < Duration::from_secs(10) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                assert!(
                    daemon.exited(),
                    "{case}: the kill fault did not end the daemon"
                );
            }
            let mut daemon = Daemon::start(&bin, &config, dir.path(), addr);
            assert_eq!(deliver_one(addr, "bob", "bob-1"), Some(true));
            daemon.terminate();
        }
        let mut daemon = Daemon::start(&bin, &config, dir.path(), addr);
        assert_eq!(
            deliver_one(addr, "alice", "alice-3"),
            Some(true),
            "{case}: {}",
            daemon.log_text()
        );
        acked.insert(("alice".to_string(), "alice-3".to_string()));
        daemon.terminate();
        assert!(!marker.exists(), "{case}: the creation marker stayed");
        assert_eq!(
            folders(dir.path(), "alice"),
            folders(dir.path(), "bob"),
            "{case}"
        );
        let sent: Acks = [1, 2, 3]
            .iter()
            .map(|n| ("alice".to_string(), format!("alice-{n}")))
            .collect();
        check_maildirs(dir.path(), &["alice".to_string()], &acked, &sent);
        assert_settled(&bin, &config, dir.path(), case);
    }
}

/// A scratch folder with the daemon's config (no `[storage]` extras) and the users alice
/// and bob; the config and the LMTP address.
fn alice_and_bob() -> (tempfile::TempDir, PathBuf, SocketAddr) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(dir.path(), port, "");
    for u in ["alice", "bob"] {
        let hash = maildex_auth::PasswordHash::parse("{PLAIN}pw");
        maildex_auth::add_user(&dir.path().join("users"), u, &hash).unwrap();
    }
    (dir, config, ([127, 0, 0, 1], port).into())
}

/// The daemon's config; `storage_extra` goes into `[storage]`.
fn write_config(root: &Path, port: u16, storage_extra: &str) -> PathBuf {
    write_config_imap(root, port, None, storage_extra)
}

/// [`write_config`] with IMAP listening on `imap` (plain, loopback) when given.
fn write_config_imap(root: &Path, port: u16, imap: Option<u16>, storage_extra: &str) -> PathBuf {
    let r = root.display();
    let path = root.join("maildex.toml");
    let imap = imap.map_or(String::new(), |p| format!("\"127.0.0.1:{p}\""));
    std::fs::write(
        &path,
        format!(
            "[imap]\nlisten = [{imap}]\nlisten_tls = []\n\
             [lmtp]\nlisten = [\"127.0.0.1:{port}\"]\n\
             [storage]\nmail_location = \"{r}/mail/%u\"\nindex_root = \"{r}/index/%u\"\n\
             fsync = true\nindex_map_size = \"16MiB\"\n{storage_extra}\n\
             [auth]\nusers_file = \"{r}/users\"\n"
        ),
    )
    .unwrap();
    path
}

/// An LMTP connection (the tests' client) on which every I/O error or timeout reads as
/// `None` (not acknowledged).
struct Conn(LmtpClient);

impl Conn {
    fn new(stream: TcpStream) -> Conn {
        let c = LmtpClient::wrap(stream);
        let _ = c.stream.set_read_timeout(Some(Duration::from_secs(30)));
        Conn(c)
    }

    fn send(&mut self, data: &[u8]) -> Option<()> {
        self.0.try_send(data)
    }

    /// One complete reply, or `None` at EOF or on an error.
    fn reply(&mut self) -> Option<String> {
        self.0.try_reply()
    }

    fn expect(&mut self, code: &str) -> Option<String> {
        self.reply().filter(|r| r.starts_with(code))
    }

    /// Connects and says LHLO.
    fn open(addr: SocketAddr) -> Option<Conn> {
        let mut c = Conn::new(TcpStream::connect(addr).ok()?);
        c.expect("220 ")?;
        c.send(b"LHLO crash.test\r\n")?;
        c.expect("250")?;
        Some(c)
    }

    /// MAIL, an accepted RCPT for each of `rcpts`, DATA, `data` (CRLF, dot-stuffed) and
    /// the final dot; the replies after the data are the caller's to read.
    fn send_message(&mut self, rcpts: &[&str], data: &[u8]) -> Option<()> {
        self.send(b"MAIL FROM:<load@example.net>\r\n")?;
        self.expect("250 ")?;
        for r in rcpts {
            self.send(format!("RCPT TO:<{r}@example.org>\r\n").as_bytes())?;
            self.expect("250 ")?;
        }
        self.send(b"DATA\r\n")?;
        self.expect("354 ")?;
        self.send(data)?;
        self.send(b".\r\n")
    }

    /// One transaction whose recipients are all accepted; the reply to each after the
    /// data, in RCPT order.
    fn replies(&mut self, rcpts: &[&str], data: &[u8]) -> Option<Vec<String>> {
        self.send_message(rcpts, data)?;
        rcpts.iter().map(|_| self.reply()).collect()
    }

    /// One transaction; the recipients that got `250` after the data. `None` when the
    /// connection broke (what was acknowledged before the break is in `acked`).
    fn transaction(&mut self, rcpts: &[&str], data: &[u8], acked: &mut Vec<String>) -> Option<()> {
        self.send_message(rcpts, data)?;
        // RFC 2033 §4.2: one reply per recipient, in RCPT order
        for r in rcpts {
            let reply = self.reply()?;
            assert!(
                reply.starts_with("250 ") || reply.starts_with('4'),
                "unexpected reply for {r}: {reply:?}"
            );
            if reply.starts_with("250 ") {
                acked.push((*r).to_string());
            }
        }
        Some(())
    }
}

/// A corpus message of realistic size, nested as `message/rfc822` after a base64 text part
/// that holds the id's search token ([`token`]), with our id header first, as DATA text:
/// CRLF line ends, dot-stuffed (RFC 5321 §4.5.2).
fn data_text(rng: &mut ChaCha8Rng, n: usize, id: &str) -> Vec<u8> {
    use base64::Engine as _;
    let inner = maildex_corpus::message(rng, n, 1.0);
    let text = format!("{SEARCH_WORD} {}\n", token(id));
    let mut raw = format!(
        "{HEADER}{id}\nSubject: crash load {n}\nMIME-Version: 1.0\n\
         Content-Type: multipart/mixed; boundary=\"crash-b\"\n\n\
         --crash-b\nContent-Type: text/plain; charset=utf-8\n\
         Content-Transfer-Encoding: base64\n\n{}\n\
         --crash-b\nContent-Type: message/rfc822\n\n",
        base64::engine::general_purpose::STANDARD.encode(text)
    )
    .into_bytes();
    raw.extend_from_slice(&inner);
    raw.extend_from_slice(b"\n--crash-b--\n");
    let mut out = Vec::with_capacity(raw.len() + raw.len() / 32);
    for line in raw.split_inclusive(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.first() == Some(&b'.') {
            out.push(b'.');
        }
        out.extend_from_slice(line);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Delivers one small message; `Some(true)` on `250`.
fn deliver_one(addr: SocketAddr, user: &str, id: &str) -> Option<bool> {
    let mut c = Conn::open(addr)?;
    let mut acked = Vec::new();
    let data = format!("{HEADER}{id}\r\nSubject: {id}\r\n\r\nafter the restart\r\n");
    c.transaction(&[user], data.as_bytes(), &mut acked)?;
    Some(acked.len() == 1)
}

/// The search token of test id `id`, unique as a substring among the ids of a run
/// (`crash-3-1-17` is `crashx3x1x17z`: no other id's token holds it).
fn token(id: &str) -> String {
    format!("{}z", id.replace('-', "x"))
}

/// Issue 18, "a crash between delivery and indexing never leaves a delivered message that
/// a SEARCH cannot find": on the restarted daemon, `UID SEARCH BODY` of the word in every
/// load message's base64 text part finds exactly the load messages in each user's INBOX
/// (acknowledged or not: whatever the kill left in the Maildir), and the token of one of
/// them finds that message alone.
fn check_searchable(imap: SocketAddr, users: &[String], iter: usize) {
    let t0 = Instant::now();
    let mut c = loop {
        if let Some(c) = Client::try_connect(imap, Duration::from_secs(30)) {
            break c;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "IMAP does not listen"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    for user in users {
        let what = format!("iteration {iter}, {user}");
        c.ok(&format!("LOGIN {user} pw"));
        c.ok("EXAMINE INBOX");
        let found = search_uids(&mut c, &format!("UID SEARCH BODY {SEARCH_WORD}"));
        let r = c.ok("UID FETCH 1:* (UID BODY.PEEK[HEADER.FIELDS (X-Test-Id)])");
        let mut ids: BTreeMap<u32, String> = BTreeMap::new();
        for (_, resp) in r.fetches() {
            let (_, items) = resp.fetch().expect("FETCH");
            let uid = items.iter().find_map(|i| match i {
                imap_codec::imap_types::fetch::MessageDataItem::Uid(u) => Some(u.get()),
                _ => None,
            });
            let header = resp.body_sections().into_iter().flatten().next();
            let id = header.as_deref().and_then(test_id);
            ids.insert(uid.expect("UID"), id.unwrap_or_default());
        }
        let load: BTreeSet<u32> = ids
            .iter()
            .filter(|(_, id)| id.starts_with("crash-"))
            .map(|(uid, _)| *uid)
            .collect();
        assert_eq!(found, load, "{what}: SEARCH BODY {SEARCH_WORD}");
        if let Some((uid, id)) = ids.iter().rev().find(|(_, id)| id.starts_with("crash-")) {
            let one = search_uids(&mut c, &format!("UID SEARCH BODY {}", token(id)));
            assert_eq!(one, BTreeSet::from([*uid]), "{what}: SEARCH BODY of {id}");
        }
        c.ok("LOGOUT");
        c = Client::connect(imap);
    }
}

/// The UIDs of a `UID SEARCH`'s `* SEARCH` line.
fn search_uids(c: &mut Client, command: &str) -> BTreeSet<u32> {
    let r = c.ok(command);
    r.lines("* SEARCH")
        .iter()
        .flat_map(|l| {
            l["* SEARCH".len()..]
                .split_whitespace()
                .map(|n| n.parse::<u32>().unwrap())
        })
        .collect()
}

struct Round {
    acked: Acks,
    sent: Acks,
}

/// Runs the client threads and SIGKILLs the daemon `kill_after` the first `250`.
fn load_and_kill(
    daemon: &mut Daemon,
    addr: SocketAddr,
    iter: usize,
    seed: u64,
    kill_after: Duration,
    users: &[String],
) -> Round {
    let acked = Arc::new(Mutex::new(Acks::new()));
    let sent = Arc::new(Mutex::new(Acks::new()));
    let first_ack = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(CLIENTS + 1));
    let mut threads = Vec::new();
    for t in 0..CLIENTS {
        let (acked, sent, first_ack, start) = (
            Arc::clone(&acked),
            Arc::clone(&sent),
            Arc::clone(&first_ack),
            Arc::clone(&start),
        );
        let users = users.to_vec();
        threads.push(std::thread::spawn(move || {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (t as u64).wrapping_mul(0x9e37_79b9));
            start.wait();
            let Some(mut c) = Conn::open(addr) else {
                return;
            };
            for n in 0..PER_CLIENT {
                let id = format!("crash-{iter}-{t}-{n}");
                let count = rng.gen_range(1..=3);
                let mut rcpts: Vec<&str> = Vec::new();
                while rcpts.len() < count {
                    let u = users[rng.gen_range(0..users.len())].as_str();
                    if !rcpts.contains(&u) {
                        rcpts.push(u);
                    }
                }
                let data = data_text(&mut rng, n, &id);
                sent.lock()
                    .unwrap()
                    .extend(rcpts.iter().map(|u| (u.to_string(), id.clone())));
                let mut ok = Vec::new();
                let done = c.transaction(&rcpts, &data, &mut ok);
                if !ok.is_empty() {
                    first_ack.store(true, Ordering::SeqCst);
                }
                acked
                    .lock()
                    .unwrap()
                    .extend(ok.into_iter().map(|u| (u, id.clone())));
                if done.is_none() {
                    return;
                }
            }
            let _ = c.send(b"QUIT\r\n");
        }));
    }
    start.wait();
    let t0 = Instant::now();
    while !first_ack.load(Ordering::SeqCst) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no delivery acknowledged: {}",
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(kill_after);
    daemon.sigkill();
    for t in threads {
        t.join().unwrap();
    }
    let take = |m: Arc<Mutex<Acks>>| std::mem::take(&mut *m.lock().unwrap());
    Round {
        acked: take(acked),
        sent: take(sent),
    }
}

/// Every acknowledged (user, id) is present exactly once; nothing is present twice; every
/// message found is one that was sent to that user.
fn check_maildirs(root: &Path, users: &[String], acked: &Acks, sent: &Acks) {
    for user in users {
        let mut found: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        let mut files = Vec::new();
        message_files(&root.join("mail").join(user), &mut files);
        for f in files {
            let text = std::fs::read(&f).unwrap();
            let id = test_id(&text).unwrap_or_else(|| panic!("no {HEADER}in {}", f.display()));
            found.entry(id).or_default().push(f);
        }
        for (id, paths) in &found {
            assert_eq!(paths.len(), 1, "{user}: {id} is there twice: {paths:?}");
            assert!(
                sent.contains(&(user.clone(), id.clone())),
                "{user}: {id} was never sent to this user"
            );
        }
        for (u, id) in acked.iter().filter(|(u, _)| u == user) {
            assert!(found.contains_key(id), "{u}: acknowledged {id} is lost");
        }
    }
}

/// The id header in a message's header block (the store keeps LF line ends).
fn test_id(text: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(text);
    text.lines()
        .take_while(|l| !l.trim_end().is_empty())
        .find_map(|l| l.strip_prefix(HEADER))
        .map(|id| id.trim_end().to_string())
}

/// Files in every `new/` and `cur/` under `dir` (INBOX and `.Folder`s).
fn message_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if !p.is_dir() {
            continue;
        }
        match p.file_name().and_then(|n| n.to_str()) {
            Some("new" | "cur") => {
                out.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()))
            }
            Some("tmp") => {}
            _ => message_files(&p, out),
        }
    }
}
