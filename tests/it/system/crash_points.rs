//! Kill and fault harness for the IMAP write paths (issue 5, "crash safety everywhere"):
//! the real `maildex serve` process, started with `MAILDEX_FAULT=<point>:<nth>:<action>`,
//! takes a bounded random load of APPEND, UID STORE, UID COPY, UID MOVE and UID EXPUNGE on
//! two mailboxes from one client until the fault fires: `kill` SIGKILLs the daemon at that
//! step; `eio` and `enospc` fail that step, and the command must answer NO. The load is
//! then stopped, the daemon (killed with SIGKILL if it still runs) is restarted without the
//! fault, and what the restarted daemon shows over IMAP must be what the client was told:
//! - every acknowledged change is there: messages with their flags, each exactly once;
//! - the one command that was cut short by the kill took effect wholly, partly per message,
//!   or not at all, as its crash cases allow (a MOVEd message in exactly one of the two
//!   mailboxes, a COPY at most once, a STORE old or new flags per message);
//! - a command that answered NO changed nothing;
//! - a UID is never given twice, UIDVALIDITY never changes;
//! - no file is left in `tmp/`, and `maildex index check` is clean.
//!
//! `MAILDEX_CRASH_POINT_ITERATIONS` (default 24) sets the number of cycles and
//! `MAILDEX_CRASH_SEED` the seed; the seed picks the faults and the commands, so a failure
//! replays. The figures of a long run are in docs/RELIABILITY.md.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::support::imap::{Client, Resp};
use crate::support::process::{
    assert_settled, env_or, free_port, kill_tests_alone, kill_tests_shared, maildex_bin, Daemon,
};

const MAILBOXES: [&str; 2] = ["INBOX", "Other"];
/// Every write step the store, maildir and index crates name (`crates/faults`).
const POINTS: [&str; 10] = [
    "tmp_write",
    "tmp_fsync",
    "link",
    "dir_fsync",
    "uidlist_append",
    "index_commit",
    "flag_rename",
    "unlink",
    "copy_link",
    "move_rename",
];
/// Commands per cycle at most (the fault usually fires long before).
const COMMANDS: usize = 60;
/// The flags the load sets and clears (`\Recent` is left out of every comparison).
const FLAGS: [&str; 4] = ["\\Seen", "\\Flagged", "\\Answered", "\\Deleted"];

/// One message in one mailbox: its subject (unique per APPEND, shared by copies) and flags.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Msg {
    subject: String,
    flags: BTreeSet<String>,
}

/// Mailbox index -> UID -> message.
type State = [BTreeMap<u32, Msg>; 2];

/// A command whose outcome the client does not know (the daemon died during it) or that
/// answered NO (then it must have changed nothing).
#[derive(Clone, Debug)]
enum Op {
    Append {
        mbox: usize,
        msg: Msg,
    },
    Store {
        mbox: usize,
        uids: Vec<u32>,
        add: bool,
        flag: String,
    },
    Copy {
        from: usize,
        uids: Vec<u32>,
    },
    Move {
        from: usize,
        uids: Vec<u32>,
    },
    Expunge {
        mbox: usize,
        uids: Vec<u32>,
    },
}

#[test]
fn faults_at_every_write_step_lose_and_duplicate_nothing() {
    let _kill_tests = kill_tests_alone();
    let iterations: usize = env_or("MAILDEX_CRASH_POINT_ITERATIONS", 24);
    let seed: u64 = env_or("MAILDEX_CRASH_SEED", 0x6372_6173);
    let bin = maildex_bin();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(dir.path(), port, "");
    let hash = maildex_auth::PasswordHash::parse("{PLAIN}pw");
    maildex_auth::add_user(&dir.path().join("users"), "alice", &hash).unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);

    let mut daemon = Daemon::start(&bin, &config, dir.path(), addr);
    let mut c = Raw::login(addr).expect("log in");
    c.ok("CREATE Other").expect("CREATE");
    drop(c);
    daemon.terminate();
    let mut model: State = Default::default();
    let mut validity = [0u32; 2];
    let mut highest = [0u32; 2];
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    let started = Instant::now();
    for iter in 0..iterations {
        let point = POINTS[rng.gen_range(0..POINTS.len())];
        let action = ["kill", "kill", "eio", "enospc"][rng.gen_range(0..4)];
        let nth = rng.gen_range(1..=6);
        let plan = format!("{point}:{nth}:{action}");
        let what = format!("iteration {iter} ({plan}, replay with MAILDEX_CRASH_SEED={seed})");
        let open = Daemon::start_with(&bin, &config, dir.path(), addr, &[("MAILDEX_FAULT", &plan)]);
        let (outcome, daemon) = match open {
            // fired in the start-up sync: nothing was asked, nothing may change
            Err(log) => {
                assert!(log.contains("maildex-fault: fired"), "{what}: {log}");
                ("start-up".to_string(), None)
            }
            Ok(mut d) => {
                let (pending, no, fired) = load(addr, &mut rng, iter, &mut model, &highest);
                if d.exited() {
                    // only the injected kill may end the daemon
                    let log = d.log_text();
                    assert!(
                        action == "kill" && log.contains("maildex-fault: fired"),
                        "{what}: the daemon died by itself: {log}"
                    );
                } else {
                    d.sigkill();
                }
                let outcome = match (&pending, &no, fired) {
                    (_, Some(op), _) => format!("NO to {}", op_name(op)),
                    (Some(op), None, _) => format!("killed in {}", op_name(op)),
                    (None, None, true) => "fired between commands".into(),
                    (None, None, false) => "not reached; SIGKILL".into(),
                };
                let daemon_log = d.log_text();
                if let Some(op) = &no {
                    assert!(
                        daemon_log.contains("maildex-fault: fired"),
                        "{what}: NO to {op:?} without the fault: {daemon_log}"
                    );
                }
                (outcome, Some((pending, no)))
            }
        };
        *tally
            .entry(format!("{point} {action}: {outcome}"))
            .or_default() += 1;
        // A sync removes a record whose file is gone only on a listing of folders that have
        // been quiet for a second (a rename by another tool can hide a file from readdir):
        // let them settle, so the start-up sync settles what the fault left.
        std::thread::sleep(Duration::from_millis(1100));

        let mut restarted = Daemon::start(&bin, &config, dir.path(), addr);
        let mut c = Raw::login(addr).unwrap_or_else(|| panic!("{what}: log in after restart"));
        let mut actual: State = Default::default();
        for (i, name) in MAILBOXES.iter().enumerate() {
            let (v, msgs) = c
                .read_mailbox(name)
                .unwrap_or_else(|| panic!("{what}: read {name}"));
            if validity[i] == 0 {
                validity[i] = v;
            }
            assert_eq!(v, validity[i], "{what}: UIDVALIDITY of {name} changed");
            actual[i] = msgs;
        }
        let (pending, no) = daemon.unwrap_or((None, None));
        let allowed = match (&pending, &no) {
            // EXPUNGE unlinks before its index commit: a NO after that leaves the messages
            // the client asked to remove gone (the next sync drops their records)
            (_, Some(op @ Op::Expunge { .. })) => Some(op),
            (_, Some(_)) => None,
            (Some(op), None) => Some(op),
            (None, None) => None,
        };
        if let Err(e) = explain(&model, &actual, allowed, &highest) {
            panic!(
                "{what}: {e}\n  in flight: {pending:?}\n  answered NO: {no:?}\n  expected: {model:?}\n  found: {actual:?}\n  files: {:?}\n  daemon log: {}",
                message_files(&dir.path().join("mail")),
                restarted.log_text()
            );
        }
        for i in 0..2 {
            highest[i] = highest[i].max(actual[i].keys().copied().max().unwrap_or(0));
        }
        model = actual;
        c.logout();
        restarted.terminate();
        assert_settled(&bin, &config, dir.path(), &what);
    }
    eprintln!(
        "{iterations} fault/restart cycles in {:?}; {} messages at the end",
        started.elapsed(),
        model[0].len() + model[1].len()
    );
    for (k, n) in &tally {
        eprintln!("  {n:3} × {k}");
    }
}

/// Every file under `root` (for a failure report).
fn message_files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(root).unwrap_or(&p).display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// The index's commits left unsynced between checkpoints (`[storage] index_sync_delay`,
/// `crates/index/src/lazy.rs`): after a kill (the same boot) the index is kept as it is;
/// after a power loss (simulated: the marker holds another boot's id) it is deleted and
/// made again from the Maildir with the same UIDs, flags and UIDVALIDITY, no expunged
/// message back, and the next UID after the last one given; a clean stop leaves no
/// marker.
#[test]
fn an_index_with_unsynced_commits_is_kept_after_a_kill_and_rebuilt_after_a_power_loss() {
    let _kill_tests = kill_tests_shared();
    let Ok(boot) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") else {
        return; // no boot id: every commit is synced, nothing is marked
    };
    let bin = maildex_bin();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // long enough that no checkpoint runs during the test: the marker stays until a stop
    let config = write_config(dir.path(), port, "index_sync_delay = \"300s\"");
    let hash = maildex_auth::PasswordHash::parse("{PLAIN}pw");
    maildex_auth::add_user(&dir.path().join("users"), "alice", &hash).unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let marker = dir.path().join("index/alice/unsynced.boot");
    let lost = "index with commits unsynced when the machine went down";

    let mut daemon = Daemon::start(&bin, &config, dir.path(), addr);
    let mut c = Raw::login(addr).expect("log in");
    for i in 1..=6 {
        let body = format!("Subject: m{i}\r\n\r\nbody {i}\r\n");
        let (_, status) = c.append("INBOX", "", body.as_bytes()).expect("APPEND");
        assert!(status.starts_with("OK"), "APPEND: {status}");
    }
    c.ok("SELECT INBOX").unwrap();
    c.ok("UID STORE 2 +FLAGS (\\Flagged)").unwrap();
    c.ok("UID STORE 4 +FLAGS (\\Seen \\Answered)").unwrap();
    c.ok("UID STORE 5 +FLAGS (\\Deleted)").unwrap();
    c.ok("EXPUNGE").unwrap();
    let before = c.read_mailbox("INBOX").expect("read INBOX");
    assert_eq!(
        before.1.keys().copied().collect::<Vec<_>>(),
        [1, 2, 3, 4, 6]
    );
    assert_eq!(
        std::fs::read_to_string(&marker).ok().as_deref(),
        Some(boot.trim()),
        "the commits are unsynced and marked"
    );

    // a kill: the machine is up, the page cache holds every commit; the index is kept
    daemon.sigkill();
    let mut daemon = Daemon::start(&bin, &config, dir.path(), addr);
    let mut c = Raw::login(addr).expect("log in after the kill");
    assert_eq!(c.read_mailbox("INBOX").as_ref(), Some(&before));
    let (_, status) = c
        .append("INBOX", "", b"Subject: m7\r\n\r\nbody 7\r\n")
        .unwrap();
    assert!(
        status.contains("[APPENDUID ") && status.contains(" 7]"),
        "{status}"
    );
    let before = c.read_mailbox("INBOX").expect("read INBOX");
    assert!(!daemon.log_text().contains(lost), "{}", daemon.log_text());

    // a power loss: the marker left is another boot's; the index is made again
    daemon.sigkill();
    assert!(marker.exists(), "a kill leaves the marker");
    std::fs::write(&marker, "00000000-0000-0000-0000-000000000000").unwrap();
    let mut daemon = Daemon::start(&bin, &config, dir.path(), addr);
    let mut c = Raw::login(addr).expect("log in after the power loss");
    assert_eq!(c.read_mailbox("INBOX").as_ref(), Some(&before));
    assert!(daemon.log_text().contains(lost), "{}", daemon.log_text());
    let (_, status) = c
        .append("INBOX", "", b"Subject: m8\r\n\r\nbody 8\r\n")
        .unwrap();
    assert!(
        status.contains("[APPENDUID ") && status.contains(" 8]"),
        "{status}"
    );
    c.logout();
    daemon.terminate();
    assert!(
        !marker.exists(),
        "a clean stop syncs the index and removes its marker: {}",
        daemon.log_text()
    );
    assert_settled(&bin, &config, dir.path(), "after the simulated power loss");
}

fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Append { .. } => "APPEND",
        Op::Store { .. } => "STORE",
        Op::Copy { .. } => "COPY",
        Op::Move { .. } => "MOVE",
        Op::Expunge { .. } => "EXPUNGE",
    }
}

/// The daemon's config; `storage_extra` goes into `[storage]`.
fn write_config(root: &Path, port: u16, storage_extra: &str) -> PathBuf {
    let r = root.display();
    let path = root.join("maildex.toml");
    std::fs::write(
        &path,
        format!(
            "[imap]\nlisten = [\"127.0.0.1:{port}\"]\nlisten_tls = []\n\
             [lmtp]\nlisten = []\n\
             [storage]\nmail_location = \"{r}/mail/%u\"\nindex_root = \"{r}/index/%u\"\n\
             fsync = true\nindex_map_size = \"16MiB\"\n{storage_extra}\n\
             [auth]\nusers_file = \"{r}/users\"\n"
        ),
    )
    .unwrap();
    path
}

/// Runs random commands until the daemon dies, a command answers NO, or `COMMANDS` ran;
/// `model` follows every acknowledged command. Returns the command cut short by the
/// daemon's death, the command that answered NO, and whether the daemon died.
fn load(
    addr: SocketAddr,
    rng: &mut ChaCha8Rng,
    iter: usize,
    model: &mut State,
    highest: &[u32; 2],
) -> (Option<Op>, Option<Op>, bool) {
    let mut highest = *highest;
    let Some(mut c) = Raw::login(addr) else {
        return (None, None, true);
    };
    for k in 0..COMMANDS {
        let mbox = rng.gen_range(0..2);
        let uids: Vec<u32> = model[mbox].keys().copied().collect();
        let pick = |rng: &mut ChaCha8Rng| -> Vec<u32> {
            let n = rng.gen_range(1..=3.min(uids.len()));
            let mut v: Vec<u32> = (0..n).map(|_| uids[rng.gen_range(0..uids.len())]).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let choice = if uids.is_empty() {
            0
        } else {
            rng.gen_range(0..10)
        };
        let op = match choice {
            0..=2 => {
                let mut flags = BTreeSet::new();
                for f in &FLAGS[..3] {
                    if rng.gen_bool(0.3) {
                        flags.insert(f.to_string());
                    }
                }
                let subject = format!("m{iter}-{k}");
                Op::Append {
                    mbox,
                    msg: Msg { subject, flags },
                }
            }
            3..=5 => Op::Store {
                mbox,
                uids: pick(rng),
                add: rng.gen_bool(0.6),
                flag: FLAGS[rng.gen_range(0..4)].to_string(),
            },
            6 => Op::Copy {
                from: mbox,
                uids: pick(rng),
            },
            7 => Op::Move {
                from: mbox,
                uids: pick(rng),
            },
            _ => {
                let deleted: Vec<u32> = model[mbox]
                    .iter()
                    .filter(|(_, m)| m.flags.contains("\\Deleted"))
                    .map(|(u, _)| *u)
                    .collect();
                if deleted.is_empty() {
                    Op::Store {
                        mbox,
                        uids: pick(rng),
                        add: true,
                        flag: "\\Deleted".into(),
                    }
                } else {
                    Op::Expunge {
                        mbox,
                        uids: deleted,
                    }
                }
            }
        };
        match run(&mut c, &op, model, &mut highest) {
            Answer::Ok => {}
            Answer::No => return (None, Some(op), false),
            Answer::Died => return (Some(op), None, true),
        }
    }
    (None, None, false)
}

enum Answer {
    Ok,
    No,
    Died,
}

fn set(uids: &[u32]) -> String {
    uids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Sends `op` (selecting its mailbox first) and applies an acknowledged one to `model`.
fn run(c: &mut Raw, op: &Op, model: &mut State, highest: &mut [u32; 2]) -> Answer {
    let mbox = match op {
        Op::Append { .. } => None,
        Op::Store { mbox, .. } | Op::Expunge { mbox, .. } => Some(*mbox),
        Op::Copy { from, .. } | Op::Move { from, .. } => Some(*from),
    };
    if let Some(m) = mbox {
        match c.cmd(&format!("SELECT {}", MAILBOXES[m])) {
            Some((_, st)) if st.starts_with("OK") => {}
            // an injected error in the sync SELECT runs: `op` was never sent
            Some((_, st)) if st.starts_with("NO") => return Answer::No,
            Some((_, st)) => panic!("SELECT: {st}"),
            None => return Answer::Died,
        }
    }
    let reply = match op {
        Op::Append { mbox, msg } => {
            let body = format!(
                "From: load@example.net\r\nSubject: {}\r\nMessage-ID: <{}@crash.test>\r\n\r\nbody of {}\r\n",
                msg.subject, msg.subject, msg.subject
            );
            let flags = msg.flags.iter().cloned().collect::<Vec<_>>().join(" ");
            c.append(MAILBOXES[*mbox], &flags, body.as_bytes())
        }
        Op::Store {
            uids, add, flag, ..
        } => {
            let sign = if *add { '+' } else { '-' };
            c.cmd(&format!(
                "UID STORE {} {sign}FLAGS.SILENT ({flag})",
                set(uids)
            ))
        }
        Op::Copy { from, uids } => {
            c.cmd(&format!("UID COPY {} {}", set(uids), MAILBOXES[1 - from]))
        }
        Op::Move { from, uids } => {
            c.cmd(&format!("UID MOVE {} {}", set(uids), MAILBOXES[1 - from]))
        }
        Op::Expunge { uids, .. } => c.cmd(&format!("UID EXPUNGE {}", set(uids))),
    };
    let Some((untagged, status)) = reply else {
        return Answer::Died;
    };
    if status.starts_with("NO") {
        return Answer::No;
    }
    assert!(status.starts_with("OK"), "{op:?}: {status}");
    match op {
        Op::Append { mbox, msg } => {
            let (_, _, dst) = copyuid(&status, "APPENDUID").expect("APPENDUID");
            model[*mbox].insert(dst[0], msg.clone());
            highest[*mbox] = highest[*mbox].max(dst[0]);
        }
        Op::Store {
            mbox,
            uids,
            add,
            flag,
        } => {
            for u in uids {
                if let Some(m) = model[*mbox].get_mut(u) {
                    if *add {
                        m.flags.insert(flag.clone());
                    } else {
                        m.flags.remove(flag);
                    }
                }
            }
        }
        Op::Copy { from, .. } | Op::Move { from, .. } => {
            let text = format!("{status}\n{}", untagged.join("\n"));
            if let Some((_, src, dst)) = copyuid(&text, "COPYUID") {
                for (s, d) in src.iter().zip(&dst) {
                    let m = if matches!(op, Op::Move { .. }) {
                        model[*from].remove(s)
                    } else {
                        model[*from].get(s).cloned()
                    };
                    model[1 - from].insert(*d, m.expect("COPYUID names a known UID"));
                    highest[1 - from] = highest[1 - from].max(*d);
                }
            }
        }
        Op::Expunge { mbox, uids } => {
            for u in uids {
                model[*mbox].remove(u);
            }
        }
    }
    Answer::Ok
}

/// `[NAME validity src dst]` in `text`, with both sets expanded (`dst` alone for APPENDUID).
fn copyuid(text: &str, name: &str) -> Option<(u32, Vec<u32>, Vec<u32>)> {
    let at = text.find(&format!("[{name} "))?;
    let inner = &text[at + name.len() + 2..];
    let inner = &inner[..inner.find(']')?];
    let parts: Vec<&str> = inner.split(' ').collect();
    let expand = |s: &str| -> Vec<u32> {
        s.split(',')
            .flat_map(|r| match r.split_once(':') {
                Some((a, b)) => {
                    let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                    (a.min(b)..=a.max(b)).collect::<Vec<_>>()
                }
                None => vec![r.parse().unwrap()],
            })
            .collect()
    };
    match parts.as_slice() {
        [v, d] => Some((v.parse().ok()?, Vec::new(), expand(d))),
        [v, s, d] => Some((v.parse().ok()?, expand(s), expand(d))),
        _ => None,
    }
}

/// Whether `actual` is `expected` changed by at most `pending` (wholly, partly per message,
/// or not at all). New UIDs must be above `highest` (never given before).
fn explain(
    expected: &State,
    actual: &State,
    pending: Option<&Op>,
    highest: &[u32; 2],
) -> Result<(), String> {
    for i in 0..2 {
        // messages that stayed where they were, with flags the pending op may explain
        for (uid, want) in &expected[i] {
            match actual[i].get(uid) {
                Some(got) if got == want => {}
                Some(got) => match pending {
                    Some(Op::Store {
                        mbox,
                        uids,
                        add,
                        flag,
                    }) if *mbox == i && uids.contains(uid) => {
                        let mut changed = want.flags.clone();
                        if *add {
                            changed.insert(flag.clone());
                        } else {
                            changed.remove(flag);
                        }
                        if got.subject != want.subject || got.flags != changed {
                            return Err(format!(
                                "{} UID {uid} is {got:?}, was {want:?}",
                                MAILBOXES[i]
                            ));
                        }
                    }
                    _ => {
                        return Err(format!(
                            "{} UID {uid} is {got:?}, was {want:?}",
                            MAILBOXES[i]
                        ))
                    }
                },
                None => {
                    let may_go = match pending {
                        Some(Op::Move { from, uids }) => *from == i && uids.contains(uid),
                        Some(Op::Expunge { mbox, uids }) => {
                            *mbox == i && uids.contains(uid) && want.flags.contains("\\Deleted")
                        }
                        _ => false,
                    };
                    if !may_go {
                        return Err(format!(
                            "{} UID {uid} ({}) is gone",
                            MAILBOXES[i], want.subject
                        ));
                    }
                }
            }
        }
        // messages that appeared: only what the pending op adds, each under a new UID
        let mut added: Vec<&Msg> = Vec::new();
        for (uid, got) in &actual[i] {
            if expected[i].contains_key(uid) {
                continue;
            }
            if *uid <= highest[i] {
                return Err(format!("{} UID {uid} given again ({got:?})", MAILBOXES[i]));
            }
            added.push(got);
        }
        let may_add: Vec<Msg> = match pending {
            Some(Op::Append { mbox, msg }) if *mbox == i => vec![msg.clone()],
            Some(Op::Copy { from, uids }) | Some(Op::Move { from, uids }) if 1 - from == i => uids
                .iter()
                .filter_map(|u| expected[*from].get(u).cloned())
                .collect(),
            _ => Vec::new(),
        };
        let mut left = may_add.clone();
        for got in added {
            let Some(at) = left.iter().position(|m| m == got) else {
                return Err(format!(
                    "{} has {got:?}, which nothing explains",
                    MAILBOXES[i]
                ));
            };
            left.remove(at);
        }
    }
    // a MOVEd message is in exactly one of the two mailboxes
    if let Some(Op::Move { from, uids }) = pending {
        for u in uids {
            let Some(m) = expected[*from].get(u) else {
                continue;
            };
            let here = usize::from(actual[*from].contains_key(u));
            let there = actual[1 - from].values().filter(|x| *x == m).count()
                - expected[1 - from].values().filter(|x| *x == m).count();
            if here + there != 1 {
                return Err(format!(
                    "moved UID {u} ({}) is in {} mailboxes",
                    m.subject,
                    here + there
                ));
            }
        }
    }
    Ok(())
}

/// How long a session waits for a response of a daemon that may have been killed.
const WAIT: Duration = Duration::from_secs(60);

/// An IMAP session (the tests' client, every response parsed by imap-codec) that reads a
/// dead daemon as `None` instead of failing.
struct Raw(Client);

impl Raw {
    fn login(addr: SocketAddr) -> Option<Raw> {
        let mut c = Raw(Client::try_connect(addr, WAIT)?);
        c.ok("LOGIN alice pw")?;
        Some(c)
    }

    /// Sends `command` (literals non-synchronizing, CRLF added) and reads to its tagged
    /// response: the untagged responses, and the status ("OK ...", "NO ...").
    fn exchange(&mut self, command: &[u8]) -> Option<(Vec<Resp>, String)> {
        let r = self.0.try_cmd(command, WAIT)?;
        let done = r.done.text();
        let status = done.split_once(' ').map_or("", |(_, s)| s).trim_end();
        Some((r.untagged, status.to_string()))
    }

    /// [`Raw::exchange`] with the untagged responses as text.
    fn cmd(&mut self, command: &str) -> Option<(Vec<String>, String)> {
        let (untagged, status) = self.exchange(command.as_bytes())?;
        Some((untagged.iter().map(Resp::text).collect(), status))
    }

    fn ok(&mut self, command: &str) -> Option<Vec<String>> {
        let (lines, status) = self.cmd(command)?;
        assert!(status.starts_with("OK"), "{command}: {status}");
        Some(lines)
    }

    fn append(&mut self, mbox: &str, flags: &str, body: &[u8]) -> Option<(Vec<String>, String)> {
        let mut cmd = format!("APPEND {mbox} ({flags}) {{{}+}}\r\n", body.len()).into_bytes();
        cmd.extend_from_slice(body);
        let (untagged, status) = self.exchange(&cmd)?;
        Some((untagged.iter().map(Resp::text).collect(), status))
    }

    /// UIDVALIDITY and every message (subject, flags without `\Recent`), parsed with
    /// imap-codec.
    fn read_mailbox(&mut self, name: &str) -> Option<(u32, BTreeMap<u32, Msg>)> {
        let lines = self.ok(&format!("EXAMINE {name}"))?;
        let validity = lines.iter().find_map(|l| {
            let at = l.find("[UIDVALIDITY ")?;
            l[at + 13..].split(']').next()?.parse().ok()
        })?;
        let (untagged, status) =
            self.exchange(b"UID FETCH 1:* (UID FLAGS BODY.PEEK[HEADER.FIELDS (SUBJECT)])")?;
        assert!(status.starts_with("OK"), "FETCH: {status}");
        let mut out = BTreeMap::new();
        for resp in untagged {
            let Some((_, items)) = resp.fetch() else {
                continue;
            };
            let mut uid = None;
            let mut flags = BTreeSet::new();
            let mut subject = String::new();
            for item in items {
                use imap_codec::imap_types::fetch::MessageDataItem;
                use imap_codec::imap_types::flag::FlagFetch;
                match item {
                    MessageDataItem::Uid(u) => uid = Some(u.get()),
                    MessageDataItem::Flags(fs) => {
                        for f in fs {
                            match f {
                                FlagFetch::Recent => {}
                                FlagFetch::Flag(f) => {
                                    flags.insert(f.to_string());
                                }
                            }
                        }
                    }
                    MessageDataItem::BodyExt { data, .. } => {
                        let bytes = data.0.map(|d| d.as_ref().to_vec()).unwrap_or_default();
                        let text = String::from_utf8_lossy(&bytes);
                        subject = text
                            .trim()
                            .strip_prefix("Subject: ")
                            .unwrap_or(&text)
                            .trim()
                            .to_string();
                    }
                    _ => {}
                }
            }
            out.insert(uid?, Msg { subject, flags });
        }
        Some((validity, out))
    }

    fn logout(&mut self) {
        let _ = self.cmd("LOGOUT");
    }
}
