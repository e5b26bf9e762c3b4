//! `maildex-bench sort`: SORT ARRIVAL/DATE/FROM/SUBJECT, REVERSE DATE and THREAD
//! REFERENCES of a whole INBOX (issue 17), Dovecot and maildex on copies of the same
//! generated Maildir, in one run: the first query after delivery (Dovecot's index and
//! cache dropped, as a listing's `first`; maildex's index is written at delivery) and warm
//! (the median of `--rounds` repeats), wall time and server CPU, the ratios, and the
//! message files each server opened for the first query (strace).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{json, Map, Value};

use crate::imap_client::Imap;
use crate::listing::{median_ms, Trace, TIMEOUT};
use crate::servers::{Server, DOMAIN, PASSWORD};

/// The user whose INBOX is sorted.
const USER: &str = "sorter";

/// The queries, with short names for results.
pub const QUERIES: &[(&str, &str)] = &[
    ("arrival", "SORT (ARRIVAL) UTF-8 ALL"),
    ("date", "SORT (DATE) UTF-8 ALL"),
    ("from", "SORT (FROM) UTF-8 ALL"),
    ("subject", "SORT (SUBJECT) UTF-8 ALL"),
    ("reverse_date", "SORT (REVERSE DATE) UTF-8 ALL"),
    ("thread_references", "THREAD REFERENCES UTF-8 ALL"),
    // a Roundcube page as Roundcube 1.6 asks for it (its IMAP log): the folder sorted by
    // date, then the list fields of the first 50
    ("roundcube_page", ROUNDCUBE_PAGE),
];

/// The pseudo-query of a Roundcube page load (see [`once`]).
const ROUNDCUBE_PAGE: &str = "UID SORT (DATE) US-ASCII ALL, then UID FETCH of 50";

/// The FETCH Roundcube 1.6 sends for a page of the message list.
const ROUNDCUBE_FETCH: &str = "(UID RFC822.SIZE FLAGS INTERNALDATE BODY.PEEK[HEADER.FIELDS \
     (DATE FROM TO SUBJECT CONTENT-TYPE CC REPLY-TO LIST-POST DISPOSITION-NOTIFICATION-TO \
     X-PRIORITY)])";

/// Options of `maildex-bench sort`.
pub struct SortOpts {
    /// INBOX sizes, one corpus each.
    pub sizes: Vec<usize>,
    /// Warm repeats of each query.
    pub rounds: usize,
    /// The maildex binary.
    pub maildex_bin: PathBuf,
    /// Work folder.
    pub work: PathBuf,
    /// Dovecot's `mail_fsync`.
    pub dovecot_mail_fsync: String,
    /// Where to draw SORT time against folder size (PNG), if anywhere.
    pub plot: Option<PathBuf>,
}

fn login(server: &dyn Server) -> Result<Imap> {
    let mut c = Imap::connect_from(server.imap(), None, TIMEOUT)?;
    c.ok(&format!("LOGIN \"{USER}@{DOMAIN}\" \"{PASSWORD}\""))?;
    c.ok("SELECT INBOX")?;
    Ok(c)
}

/// One run of `query` on a new connection: (wall, server CPU ms, bytes). The Roundcube
/// page is its two commands, timed together.
fn once(server: &dyn Server, query: &str) -> Result<(Duration, f64, u64)> {
    let mut c = login(server)?;
    let cpu0 = crate::load::server_cpu_ms(server);
    let (wall, bytes) = if query == ROUNDCUBE_PAGE {
        c.capture = true;
        let sorted = c.ok("UID SORT (DATE) US-ASCII ALL")?;
        c.capture = false;
        let mut uids: Vec<String> = std::mem::take(&mut c.captured)
            .iter()
            .filter_map(|l| l.strip_prefix("* SORT"))
            .flat_map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
            .collect();
        // Roundcube's default: newest first, 50 a page
        uids.reverse();
        uids.truncate(50);
        let page = c.ok(&format!("UID FETCH {} {ROUNDCUBE_FETCH}", uids.join(",")))?;
        (sorted.wall + page.wall, sorted.bytes + page.bytes)
    } else {
        let r = c.ok(query)?;
        (r.wall, r.bytes)
    };
    let cpu = crate::load::server_cpu_ms(server) - cpu0;
    c.ok("LOGOUT")?;
    Ok((wall, cpu, bytes))
}

/// First after delivery, message files opened then, and warm, for one query.
fn measure(
    server: &mut dyn Server,
    query: &str,
    rounds: usize,
    scratch: &std::path::Path,
) -> Result<Value> {
    server.cold_restart()?;
    let (first, first_cpu, bytes) = once(server, query)?;
    // the files opened by the first query, on another cold start (strace slows it)
    server.cold_restart()?;
    let pid = server.root_pid().context("server not running")?;
    let maildir = server.maildir(USER);
    let t = Trace::attach(pid, &scratch.join(format!("{}-sort.strace", server.name())))?;
    once(server, query)?;
    let files = t.finish(&maildir)?.sessions;
    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    for _ in 0..rounds.max(1) {
        let (w, c, _) = once(server, query)?;
        walls.push(w);
        cpus.push(c);
    }
    cpus.sort_by(f64::total_cmp);
    Ok(json!({
        "first_ms": first.as_secs_f64() * 1e3,
        "first_cpu_ms": first_cpu,
        "first_files_opened": files,
        "warm_ms": median_ms(&walls),
        "warm_cpu_ms": cpus[cpus.len() / 2],
        "bytes": bytes,
    }))
}

/// Runs the measurement (see the module docs) and prints a table.
pub fn run(o: &SortOpts) -> Result<Value> {
    maildex_dovecot_harness::check_installed()?;
    let mut sizes = Vec::new();
    let mut table = String::from(
        "| messages | query | Dovecot first ms | maildex first ms | ratio | Dovecot warm ms | maildex warm ms | ratio | files opened first (Dovecot / maildex) | bytes sent (Dovecot / maildex) |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for &n in &o.sizes {
        let work = o.work.join(format!("n{n}"));
        std::fs::create_dir_all(&work)?;
        let (template, bytes) = crate::mixed::one_user_corpus(&work, USER, n, 17)?;
        eprintln!(
            "== sort: INBOX of {n} messages ({:.1} MB)",
            bytes as f64 / 1e6
        );
        let users = vec![USER.to_owned()];
        let mut servers = crate::mixed::start_both(
            &work,
            &template,
            &users,
            16,
            &o.dovecot_mail_fsync,
            &o.maildex_bin,
        )?;
        let mut by_query = Map::new();
        for (name, query) in QUERIES {
            let mut by_server = Map::new();
            for s in servers.iter_mut() {
                let r = measure(s.as_mut(), query, o.rounds, &work)
                    .with_context(|| format!("{} {name}", s.name()))?;
                eprintln!(
                    "  {n:6} {name:18} {:8} first {:9.1} ms ({:2} files) warm {:8.1} ms",
                    s.name(),
                    r["first_ms"].as_f64().unwrap_or(0.0),
                    r["first_files_opened"],
                    r["warm_ms"].as_f64().unwrap_or(0.0),
                );
                by_server.insert(s.name().into(), r);
            }
            let f = |server: &str, k: &str| by_server[server][k].as_f64().unwrap_or(f64::NAN);
            table.push_str(&format!(
                "| {n} | {query} | {:.1} | {:.1} | {:.1}x | {:.1} | {:.1} | {:.1}x | {} / {} | {} / {} |\n",
                f("dovecot", "first_ms"),
                f("maildex", "first_ms"),
                f("dovecot", "first_ms") / f("maildex", "first_ms"),
                f("dovecot", "warm_ms"),
                f("maildex", "warm_ms"),
                f("dovecot", "warm_ms") / f("maildex", "warm_ms"),
                by_server["dovecot"]["first_files_opened"],
                by_server["maildex"]["first_files_opened"],
                by_server["dovecot"]["bytes"],
                by_server["maildex"]["bytes"],
            ));
            by_query.insert((*name).into(), Value::Object(by_server));
        }
        drop(servers);
        std::fs::remove_dir_all(&work)?;
        sizes.push(json!({"messages": n, "mail_bytes": bytes, "queries": by_query}));
    }
    eprintln!("{table}");
    let r = json!({
        "machine": crate::suite::machine(),
        "rounds": o.rounds,
        "sizes": sizes,
        "table": table,
    });
    if let Some(path) = &o.plot {
        crate::plot::sort(&r, path)?;
    }
    Ok(r)
}
