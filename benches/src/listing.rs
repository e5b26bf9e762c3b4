//! Listing workloads: the mutt and Thunderbird header listings, ENVELOPE and BODYSTRUCTURE
//! of 1:*, first run after delivery (fresh server, no listing state) and warm; message
//! files opened during a listing (strace); SEARCH on a header field and on body text; index
//! size after the listings.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::imap_client::{Imap, Reply};
use crate::servers::{Server, PASSWORD};

/// mutt 2.x's header listing (imap/message.c `want_headers` plus the list headers newer
/// versions ask for), as a UID FETCH of everything.
pub const MUTT: &str = "UID FETCH 1:* (UID FLAGS INTERNALDATE RFC822.SIZE BODY.PEEK[HEADER.FIELDS (DATE FROM SENDER SUBJECT TO CC MESSAGE-ID REFERENCES CONTENT-TYPE CONTENT-DESCRIPTION IN-REPLY-TO REPLY-TO LINES LIST-POST LIST-SUBSCRIBE LIST-UNSUBSCRIBE X-LABEL X-ORIGINAL-TO)])";
/// Thunderbird's header listing (issue 4).
pub const THUNDERBIRD: &str = "UID FETCH 1:* (UID RFC822.SIZE FLAGS BODY.PEEK[HEADER.FIELDS (From To Cc Bcc Subject Date Message-ID Priority X-Priority References Newsgroups In-Reply-To Content-Type Reply-To)])";
/// ENVELOPE of every message.
pub const ENVELOPE: &str = "FETCH 1:* ENVELOPE";
/// BODYSTRUCTURE of every message.
pub const BODYSTRUCTURE: &str = "FETCH 1:* BODYSTRUCTURE";

/// The listing commands, with short names for results.
pub const LISTINGS: &[(&str, &str)] = &[
    ("mutt", MUTT),
    ("thunderbird", THUNDERBIRD),
    ("envelope", ENVELOPE),
    ("bodystructure", BODYSTRUCTURE),
];

/// A header-field search and a body-text search (words some of the corpus uses).
pub const SEARCHES: &[(&str, &str)] = &[
    ("header", "UID SEARCH SUBJECT \"invoice\""),
    ("body", "UID SEARCH BODY \"mutex\""),
];

/// Read timeout of listing connections.
pub const TIMEOUT: Duration = Duration::from_secs(300);

/// Median of durations in milliseconds.
pub fn median_ms(v: &[Duration]) -> f64 {
    let mut ms: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    match ms.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => ms[n / 2],
        n => (ms[n / 2 - 1] + ms[n / 2]) / 2.0,
    }
}

fn reply_json(runs: &[(Duration, Reply)]) -> Value {
    let walls: Vec<Duration> = runs.iter().map(|(_, r)| r.wall).collect();
    let cpus: Vec<Duration> = runs.iter().map(|(_, r)| r.client_cpu).collect();
    let selects: Vec<Duration> = runs.iter().map(|(s, _)| *s).collect();
    let last = runs.last().map(|(_, r)| *r).unwrap_or_default();
    json!({
        "runs": runs.len(),
        "ms": median_ms(&walls),
        "all_ms": walls.iter().map(|d| d.as_secs_f64() * 1e3).collect::<Vec<_>>(),
        "client_cpu_ms": median_ms(&cpus),
        "login_select_ms": median_ms(&selects),
        "bytes": last.bytes,
        "untagged": last.untagged,
    })
}

/// One listing: connect, LOGIN + SELECT (timed apart), the command.
pub(crate) fn one(server: &dyn Server, user: &str, command: &str) -> Result<(Duration, Reply)> {
    let t = Instant::now();
    let mut c = Imap::open(
        server.imap(),
        &format!("{user}@{}", crate::servers::DOMAIN),
        PASSWORD,
        "INBOX",
        TIMEOUT,
    )?;
    let sel = t.elapsed();
    let r = c.ok(command)?;
    let _ = c.run("LOGOUT");
    Ok((sel, r))
}

/// Cold and warm runs of every listing command on `user`'s INBOX.
pub fn listings(
    server: &mut dyn Server,
    user: &str,
    cold_runs: usize,
    warm_runs: usize,
) -> Result<Value> {
    let mut out = serde_json::Map::new();
    for (name, cmd) in LISTINGS {
        let mut cold = Vec::new();
        for _ in 0..cold_runs {
            server.cold_restart()?;
            cold.push(one(server, user, cmd).with_context(|| format!("{name} (first)"))?);
        }
        let mut warm = Vec::new();
        for _ in 0..warm_runs {
            warm.push(one(server, user, cmd).with_context(|| format!("{name} (warm)"))?);
        }
        eprintln!(
            "  {:8} {user} {name:14} first {:9.1} ms  warm {:8.1} ms  (client cpu {:.1} ms, {} responses, {:.1} MB)",
            server.name(),
            median_ms(&cold.iter().map(|(_, r)| r.wall).collect::<Vec<_>>()),
            median_ms(&warm.iter().map(|(_, r)| r.wall).collect::<Vec<_>>()),
            median_ms(&warm.iter().map(|(_, r)| r.client_cpu).collect::<Vec<_>>()),
            warm.last().map_or(0, |(_, r)| r.untagged),
            warm.last().map_or(0, |(_, r)| r.bytes) as f64 / 1e6,
        );
        out.insert(
            (*name).into(),
            json!({"first": reply_json(&cold), "warm": reply_json(&warm)}),
        );
    }
    Ok(Value::Object(out))
}

/// Index rebuilds of `user`'s INBOX from the Maildir (see [`Server::rebuild_index`]), each
/// followed by the first mutt listing: median times, messages per second, index size.
pub fn rebuilds(
    server: &mut dyn Server,
    user: &str,
    messages: usize,
    runs: usize,
) -> Result<Value> {
    let mut rebuild = Vec::new();
    let mut listing = Vec::new();
    for _ in 0..runs {
        rebuild.push(server.rebuild_index(user).context("rebuild")?);
        listing.push(
            one(server, user, MUTT)
                .context("mutt listing after the rebuild")?
                .1
                .wall,
        );
    }
    let (r, l) = (median_ms(&rebuild), median_ms(&listing));
    eprintln!(
        "  {:8} {user} rebuild {r:9.1} ms ({:.0} messages/s), then the mutt listing {l:8.1} ms",
        server.name(),
        messages as f64 / (r / 1e3),
    );
    Ok(json!({
        "runs": runs,
        "messages": messages,
        "rebuild_ms": r,
        "all_rebuild_ms": rebuild.iter().map(|d| d.as_secs_f64() * 1e3).collect::<Vec<_>>(),
        "listing_ms": l,
        "messages_per_s": messages as f64 / (r / 1e3),
        "index_bytes": server.index_bytes(user),
    }))
}

/// SEARCH runs (warm), median time, the server's CPU time per run (less disturbed than the
/// wall time by other load on the machine) and hit count.
pub fn searches(server: &dyn Server, user: &str, runs: usize) -> Result<Value> {
    let mut out = serde_json::Map::new();
    let mut c = Imap::open(
        server.imap(),
        &format!("{user}@{}", crate::servers::DOMAIN),
        PASSWORD,
        "INBOX",
        TIMEOUT,
    )?;
    for (name, cmd) in SEARCHES {
        let mut walls = Vec::new();
        let cpu0 = crate::load::server_cpu_ms(server);
        for _ in 0..runs.max(1) {
            walls.push(c.ok(cmd)?.wall);
        }
        let cpu = (crate::load::server_cpu_ms(server) - cpu0) / runs.max(1) as f64;
        eprintln!(
            "  {:8} {user} search {name:6} {:8.1} ms, server cpu {cpu:8.1} ms, {} hits",
            server.name(),
            median_ms(&walls),
            c.search_hits
        );
        out.insert(
            (*name).into(),
            json!({"command": cmd, "ms": median_ms(&walls), "server_cpu_ms": cpu, "hits": c.search_hits}),
        );
    }
    let _ = c.run("LOGOUT");
    Ok(Value::Object(out))
}

/// strace attached to a server's process tree, following forks.
pub struct Trace {
    child: Child,
    out: PathBuf,
    pid: u32,
}

/// Message files a trace saw opened: by the server's sessions, and by maildex's background
/// full-text indexer (its `text-indexer` thread reads the files of messages delivered
/// before, whose text it writes after the `250`; that is not the listing's doing, as
/// Dovecot's `indexer-worker` is not its `imap` process's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Opens {
    pub sessions: usize,
    pub indexer: usize,
}

/// The thread name of maildex's background full-text indexer (`daemon::text_indexer`).
const INDEXER_THREAD: &str = "text-indexer";

impl Trace {
    pub fn attach(pid: u32, out: &Path) -> Result<Trace> {
        let err_path = out.with_extension("stderr");
        let child = Command::new("strace")
            .args(["-f", "-e", "trace=open,openat,openat2", "-o"])
            .arg(out)
            .args(["-p", &pid.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err_path)?)
            .spawn()
            .context("running strace (apt-get install strace)")?;
        let mut t = Trace {
            child,
            out: out.to_owned(),
            pid,
        };
        // strace reports "Process N attached" once it traces.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if std::fs::read_to_string(&err_path).is_ok_and(|s| s.contains("attached")) {
                break;
            }
            if let Ok(Some(st)) = t.child.try_wait() {
                bail!(
                    "strace exited ({st}): {}",
                    std::fs::read_to_string(&err_path)
                        .unwrap_or_default()
                        .trim()
                );
            }
            if Instant::now() > deadline {
                bail!("strace did not attach to {pid} within 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
        Ok(t)
    }

    /// Detaches and returns the distinct message files under `maildir` opened successfully.
    pub fn finish(mut self, maildir: &Path) -> Result<Opens> {
        // the indexer's thread ids, read while the traced process still runs
        let indexer = threads_named(self.pid, INDEXER_THREAD);
        // SAFETY: kill(2) on our own child.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGINT);
        }
        let _ = self.child.wait();
        let text = std::fs::read_to_string(&self.out)?;
        let (mut sessions, mut background) = (String::new(), String::new());
        for line in text.lines() {
            let tid = line.split_whitespace().next().unwrap_or("");
            let to = if indexer.iter().any(|t| t == tid) {
                &mut background
            } else {
                &mut sessions
            };
            to.push_str(line);
            to.push('\n');
        }
        Ok(Opens {
            sessions: count_message_opens(&sessions, maildir),
            indexer: count_message_opens(&background, maildir),
        })
    }
}

/// The ids of `pid`'s threads whose name is `name` (none when it has no such thread).
fn threads_named(pid: u32, name: &str) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .map(|t| t.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Distinct files in `maildir`'s cur/ or new/ (any folder) that an strace log shows opened
/// without error.
pub fn count_message_opens(strace: &str, maildir: &Path) -> usize {
    let prefix = maildir.to_string_lossy();
    let is_message =
        |p: &str| p.starts_with(&*prefix) && (p.contains("/cur/") || p.contains("/new/"));
    let succeeded = |line: &str| {
        line.rsplit_once(" = ")
            .is_some_and(|(_, r)| !r.trim_start().starts_with('-'))
    };
    let mut files = std::collections::BTreeSet::new();
    // With -f, a call another process interrupts is split: "PID openat(..., "path", ...
    // <unfinished ...>" then "PID <... openat resumed>) = FD".
    let mut pending: std::collections::HashMap<&str, &str> = Default::default();
    for line in strace.lines() {
        let pid = line.split_whitespace().next().unwrap_or("");
        if line.contains(" resumed>") {
            if let Some(path) = pending.remove(pid) {
                if succeeded(line) {
                    files.insert(path.to_owned());
                }
            }
            continue;
        }
        let Some(q) = line.find('"') else { continue };
        let rest = &line[q + 1..];
        let Some(end) = rest.find('"') else { continue };
        let path = &rest[..end];
        if !is_message(path) {
            continue;
        }
        if line.ends_with("<unfinished ...>") {
            pending.insert(pid, path);
        } else if succeeded(line) {
            files.insert(path.to_owned());
        }
    }
    files.len()
}

/// Message files opened by the mutt listing, first after delivery and warm.
pub fn files_opened(server: &mut dyn Server, user: &str, scratch: &Path) -> Result<Value> {
    let maildir = server.maildir(user);
    server.cold_restart()?;
    let pid = server.root_pid().context("server not running")?;
    let t = Trace::attach(
        pid,
        &scratch.join(format!("{}-first.strace", server.name())),
    )?;
    let first = one(server, user, MUTT)?.1;
    let first_files = t.finish(&maildir)?;
    let t = Trace::attach(pid, &scratch.join(format!("{}-warm.strace", server.name())))?;
    let warm = one(server, user, MUTT)?.1;
    let warm_files = t.finish(&maildir)?;
    eprintln!(
        "  {:8} {user} mutt listing opens {} message files first, {} warm ({} messages); the background full-text indexer meanwhile {} and {}",
        server.name(),
        first_files.sessions,
        warm_files.sessions,
        first.untagged.max(warm.untagged),
        first_files.indexer,
        warm_files.indexer,
    );
    Ok(json!({
        "first": first_files.sessions,
        "warm": warm_files.sessions,
        "messages": warm.untagged,
        "indexer_first": first_files.indexer,
        "indexer_warm": warm_files.indexer,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strace_lines_counted_once_per_message_file() {
        let log = r#"123 openat(AT_FDCWD, "/m/u/Maildir/cur/1.M1:2,S", O_RDONLY) = 7
124 openat(AT_FDCWD, "/m/u/Maildir/cur/1.M1:2,S", O_RDONLY) = 8
124 openat(AT_FDCWD, "/m/u/Maildir/.Sent/new/2.M2", O_RDONLY) = 9
124 openat(AT_FDCWD, "/m/u/Maildir/cur/3.M3", O_RDONLY) = -1 ENOENT (No such file or directory)
124 openat(AT_FDCWD, "/m/u/Maildir/dovecot.index", O_RDWR) = 10
124 open("/m/other/Maildir/cur/4", O_RDONLY) = 11
125 openat(AT_FDCWD, "/m/u/Maildir/cur/5.M5", O_RDONLY <unfinished ...>
126 openat(AT_FDCWD, "/m/u/Maildir/cur/6.M6", O_RDONLY <unfinished ...>
124 <... openat resumed>) = 12
125 <... openat resumed>) = 13
126 <... openat resumed>) = -1 EACCES (Permission denied)"#;
        assert_eq!(count_message_opens(log, Path::new("/m/u/Maildir")), 3);
    }

    #[test]
    fn medians() {
        let d = |ms| Duration::from_millis(ms);
        assert_eq!(median_ms(&[d(3), d(1), d(2)]), 2.0);
        assert_eq!(median_ms(&[d(4), d(1), d(2), d(3)]), 2.5);
        assert!(median_ms(&[]).is_nan());
    }
}
