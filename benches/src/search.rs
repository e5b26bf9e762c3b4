//! `maildex-bench search`: SEARCH on header and metadata criteria (issue 18 #1) and BODY/
//! TEXT (issue 18 #2), warm,
//! Dovecot and maildex on copies of the same generated INBOX, in one run: wall time, the
//! server's CPU per run, hit counts (which must agree), and the message files each server
//! opens during all the searches (strace, as the listing's zero-files check counts them).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{json, Map, Value};

use crate::imap_client::Imap;
use crate::listing::{median_ms, Trace};
use crate::servers::{Server, DOMAIN, PASSWORD};

/// The user whose INBOX is searched.
const USER: &str = "search";

/// The searches, with short names for results: every header criterion the index answers,
/// metadata criteria, and combinations where a cheap criterion decides first.
pub const QUERIES: &[(&str, &str)] = &[
    ("subject", "UID SEARCH SUBJECT \"invoice\""),
    ("from", "UID SEARCH FROM \"martin\""),
    ("to", "UID SEARCH TO \"example.net\""),
    ("cc", "UID SEARCH CC \"smith\""),
    ("header_hot", "UID SEARCH HEADER List-Id \"rust\""),
    ("header_cold", "UID SEARCH HEADER X-Mailer \"outlook\""),
    ("sentsince", "UID SEARCH SENTSINCE 1-Jun-2023"),
    ("larger", "UID SEARCH LARGER 20000"),
    ("flags", "UID SEARCH UNSEEN FLAGGED"),
    (
        "or_not",
        "UID SEARCH OR FROM \"martin\" SUBJECT \"invoice\" NOT SEEN",
    ),
    (
        "flagged_cold",
        "UID SEARCH FLAGGED HEADER X-Mailer \"outlook\"",
    ),
    // issue 18 #2: BODY and TEXT (maildex: the text stored at indexing; Dovecot without an
    // fts plugin: its scan of the files)
    ("body_rare", "UID SEARCH BODY \"postpone\""),
    ("body_common", "UID SEARCH BODY \"the\""),
    ("body_phrase", "UID SEARCH BODY \"next week\""),
    ("body_substring", "UID SEARCH BODY \"igrat\""),
    // LITERAL+ (RFC 7888), which both servers announce: "Grüße", 7 bytes of UTF-8
    (
        "body_non_ascii",
        "UID SEARCH CHARSET UTF-8 BODY {7+}\r\nGr\u{fc}\u{df}e",
    ),
    ("text", "UID SEARCH TEXT \"invoice\""),
];

/// Options of `maildex-bench search`.
pub struct SearchOpts {
    /// INBOX sizes, one corpus and one server pair each.
    pub sizes: Vec<usize>,
    /// Warm runs per query.
    pub runs: usize,
    /// The maildex binary.
    pub maildex_bin: PathBuf,
    /// Work folder.
    pub work: PathBuf,
    /// Dovecot's `mail_fsync`.
    pub dovecot_mail_fsync: String,
}

fn open(server: &dyn Server) -> Result<Imap> {
    Imap::open(
        server.imap(),
        &format!("{USER}@{DOMAIN}"),
        PASSWORD,
        "INBOX",
        Duration::from_secs(300),
    )
}

/// Every query once (the server's caches warm), under strace: the message files opened.
fn files_opened(server: &dyn Server, scratch: &std::path::Path) -> Result<(usize, Vec<u64>)> {
    let pid = server.root_pid().context("server not running")?;
    let mut c = open(server)?;
    let t = Trace::attach(
        pid,
        &scratch.join(format!("{}-search.strace", server.name())),
    )?;
    let mut hits = Vec::new();
    for (_, q) in QUERIES {
        c.ok(q)?;
        hits.push(c.search_hits);
    }
    let files = t.finish(&server.maildir(USER))?;
    let _ = c.run("LOGOUT");
    Ok((files, hits))
}

/// `runs` warm runs of each query: median ms, server CPU ms per run, hits.
fn timed(server: &dyn Server, runs: usize) -> Result<Value> {
    let mut c = open(server)?;
    let mut out = Map::new();
    for (name, q) in QUERIES {
        c.ok(q)?; // warm
        let cpu0 = crate::load::server_cpu_ms(server);
        let mut walls = Vec::new();
        for _ in 0..runs.max(1) {
            walls.push(c.ok(q)?.wall);
        }
        let cpu = (crate::load::server_cpu_ms(server) - cpu0) / runs.max(1) as f64;
        out.insert(
            (*name).into(),
            json!({"ms": median_ms(&walls), "server_cpu_ms": cpu, "hits": c.search_hits}),
        );
    }
    let _ = c.run("LOGOUT");
    Ok(Value::Object(out))
}

/// Runs the measurement (see the module docs) and prints a table per size.
pub fn run(o: &SearchOpts) -> Result<Value> {
    maildex_dovecot_harness::check_installed()?;
    let mut sizes = Vec::new();
    let mut tables = String::new();
    for &n in &o.sizes {
        let work = o.work.join(format!("n{n}"));
        std::fs::create_dir_all(&work)?;
        let (template, bytes) = crate::mixed::one_user_corpus(&work, USER, n, 11)?;
        eprintln!(
            "== search: INBOX of {n} messages ({:.1} MB)",
            bytes as f64 / 1e6
        );
        let users = vec![USER.to_owned()];
        let servers = crate::mixed::start_both(
            &work,
            &template,
            &users,
            16,
            &o.dovecot_mail_fsync,
            &o.maildex_bin,
        )?;
        let mut by_server = Map::new();
        for s in &servers {
            // index the folder and fill the caches (Dovecot's cache learns the fields
            // searched) before anything is measured
            for _ in 0..2 {
                let mut c = open(s.as_ref())?;
                for (_, q) in QUERIES {
                    c.ok(q)?;
                }
                let _ = c.run("LOGOUT");
            }
            let (files, hits) = files_opened(s.as_ref(), &work)?;
            let mut r = timed(s.as_ref(), o.runs)?;
            r["files_opened"] = json!(files);
            r["hits_traced"] = json!(hits);
            r["index_bytes"] = json!(s.index_bytes(USER));
            eprintln!(
                "  {:8} {n} messages: {files} message files opened by the searches",
                s.name()
            );
            by_server.insert(s.name().into(), r);
        }
        let mut table = format!(
            "{n} messages ({:.1} MB):\n\n| query | Dovecot ms | maildex ms | ratio | Dovecot CPU ms | maildex CPU ms | ratio (CPU) | hits D/m |\n|---|---:|---:|---:|---:|---:|---:|---|\n",
            bytes as f64 / 1e6
        );
        for (name, q) in QUERIES {
            let f = |s: &str, k: &str| by_server[s][*name][k].as_f64().unwrap_or(f64::NAN);
            let (d, m) = (f("dovecot", "ms"), f("maildex", "ms"));
            let (dc, mc) = (f("dovecot", "server_cpu_ms"), f("maildex", "server_cpu_ms"));
            table.push_str(&format!(
                "| `{}` | {d:.1} | {m:.1} | {:.1}x | {dc:.1} | {mc:.1} | {:.1}x | {}/{} |\n",
                q.trim_start_matches("UID SEARCH ").replace("{7+}\r\n", ""),
                d / m,
                dc / mc,
                f("dovecot", "hits"),
                f("maildex", "hits"),
            ));
        }
        let files = |s: &str| by_server[s]["files_opened"].as_u64().unwrap_or(0);
        table.push_str(&format!(
            "\nMessage files opened by all {} searches (strace): Dovecot {}, maildex {}; index bytes: Dovecot {}, maildex {}.\n\n",
            QUERIES.len(),
            files("dovecot"),
            files("maildex"),
            by_server["dovecot"]["index_bytes"],
            by_server["maildex"]["index_bytes"],
        ));
        eprintln!("{table}");
        tables.push_str(&table);
        sizes.push(json!({"messages": n, "mail_bytes": bytes, "servers": by_server}));
        drop(servers);
        let _ = std::fs::remove_dir_all(&work);
    }
    Ok(json!({
        "machine": crate::suite::machine(),
        "runs": o.runs,
        "sizes": sizes,
        "table": tables,
    }))
}
