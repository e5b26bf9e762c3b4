//! `maildex-bench search`: SEARCH on header and metadata criteria (issue 18 #1) and BODY/
//! TEXT (issue 18 #2), warm,
//! Dovecot and maildex on copies of the same generated INBOX, in one run: wall time, the
//! server's CPU per run, hit counts (which must agree), and the message files each server
//! opens during all the searches (strace, as the listing's zero-files check counts them).
//! With `--xapian` a third server, Dovecot with the fts-xapian plugin (benches/src/xapian.rs),
//! runs the same searches, and both full-text indexes' rate and size are recorded.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{json, Map, Value};

use crate::imap_client::Imap;
use crate::listing::{median_ms, Trace};
use crate::servers::{Server, DOMAIN, MAILDEX_CONFIG, PASSWORD};

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
    /// Also a third server: Dovecot with fts-xapian, indexed by `doveadm index` first.
    pub xapian: bool,
    /// Draw SEARCH BODY time against INBOX size into this PNG.
    pub plot: Option<PathBuf>,
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
    // attached before the login: Dovecot forks the imap process that searches then, and
    // `strace -f -p` follows only processes forked after it attached
    let t = Trace::attach(
        pid,
        &scratch.join(format!("{}-search.strace", server.name())),
    )?;
    let mut c = open(server)?;
    let mut hits = Vec::new();
    for (_, q) in QUERIES {
        c.ok(q)?;
        hits.push(c.search_hits);
    }
    let files = t.finish(&server.maildir(USER))?.sessions;
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

/// Column heads of the servers in a table.
fn heading(name: &str) -> &'static str {
    match name {
        "dovecot" => "Dovecot",
        "xapian" => "Dovecot+xapian",
        _ => "maildex",
    }
}

/// A table cell `a/b` as a ratio, or "-" when either is not above zero (CPU time is
/// counted in clock ticks: a short query may show none).
fn ratio(a: f64, b: f64) -> String {
    if a > 0.0 && b > 0.0 {
        format!(" {:.1}x |", a / b)
    } else {
        " - |".into()
    }
}

/// The markdown table of one size: per query each server's ms, its ratio to maildex, the
/// server CPU per run and the hit counts, servers in the order of `names` (maildex last).
fn table(n: usize, bytes: u64, names: &[&str], by_server: &Map<String, Value>) -> String {
    let others = &names[..names.len() - 1];
    let mut head = String::from("| query |");
    let mut rule = String::from("|---|");
    for (servers, before, after) in [
        (names, "", " ms"),
        (others, "ratio ", ""),
        (names, "", " CPU ms"),
        (others, "ratio (CPU) ", ""),
    ] {
        for s in servers {
            head.push_str(&format!(" {before}{}{after} |", heading(s)));
            rule.push_str("---:|");
        }
    }
    let hits: Vec<&str> = names.iter().map(|s| heading(s)).collect();
    head.push_str(&format!(" hits {} |", hits.join("/")));
    rule.push_str("---|");
    let mut t = format!(
        "{n} messages ({:.1} MB):\n\n{head}\n{rule}\n",
        bytes as f64 / 1e6
    );
    for (name, q) in QUERIES {
        let f = |s: &str, k: &str| by_server[s][*name][k].as_f64().unwrap_or(f64::NAN);
        t.push_str(&format!(
            "| `{}` |",
            q.trim_start_matches("UID SEARCH ").replace("{7+}\r\n", "")
        ));
        for s in names {
            t.push_str(&format!(" {:.1} |", f(s, "ms")));
        }
        for s in others {
            t.push_str(&ratio(f(s, "ms"), f("maildex", "ms")));
        }
        for s in names {
            t.push_str(&format!(" {:.1} |", f(s, "server_cpu_ms")));
        }
        for s in others {
            t.push_str(&ratio(f(s, "server_cpu_ms"), f("maildex", "server_cpu_ms")));
        }
        let hits: Vec<String> = names.iter().map(|s| f(s, "hits").to_string()).collect();
        t.push_str(&format!(" {} |\n", hits.join("/")));
    }
    let per = |k: &str| -> Vec<String> {
        names
            .iter()
            .map(|s| format!("{} {}", heading(s), by_server[*s][k]))
            .collect()
    };
    t.push_str(&format!(
        "\nMessage files opened by all {} searches (strace): {}; index bytes: {}.\n\n",
        QUERIES.len(),
        per("files_opened").join(", "),
        per("index_bytes").join(", "),
    ));
    t
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
        // the xapian server first: its copy of the corpus is taken before start_both
        // removes the template, and its indexing runs with the other servers not started
        let xapian = if o.xapian {
            let (s, indexing) = crate::xapian::start_indexed(
                &work,
                &template,
                USER,
                n,
                bytes,
                16,
                &o.dovecot_mail_fsync,
            )?;
            Some((s, indexing))
        } else {
            None
        };
        let mut servers = crate::mixed::start_both(
            &work,
            &template,
            &users,
            16,
            &o.dovecot_mail_fsync,
            &o.maildex_bin,
        )?;
        let mut fts = Map::new();
        if let Some((s, indexing)) = xapian {
            fts.insert("xapian".into(), indexing);
            servers.insert(1, Box::new(s));
        }
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
        if o.xapian {
            // after the searches: maildex indexes a user at first login, which they did
            fts.insert(
                "maildex".into(),
                crate::xapian::maildex_fts(
                    &o.maildex_bin,
                    &work.join("mx").join(MAILDEX_CONFIG),
                    USER,
                    n,
                    bytes,
                )?,
            );
        }
        let names: Vec<&str> = servers.iter().map(|s| s.name()).collect();
        let table = table(n, bytes, &names, &by_server);
        eprintln!("{table}");
        tables.push_str(&table);
        sizes.push(json!({"messages": n, "mail_bytes": bytes, "servers": by_server, "full_text_indexing": fts}));
        drop(servers);
        let _ = std::fs::remove_dir_all(&work);
    }
    let r = json!({
        "machine": crate::suite::machine(),
        "runs": o.runs,
        "sizes": sizes,
        "table": tables,
    });
    if let Some(path) = &o.plot {
        crate::plot::search_body(&r, path)?;
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_a_column_per_server_and_ratios_to_maildex() {
        let mut by_server = Map::new();
        for (s, ms, cpu, hits) in [
            ("dovecot", 40.0, 30.0, 5),
            ("xapian", 2.0, 0.0, 4),
            ("maildex", 4.0, 10.0, 5),
        ] {
            let mut r = Map::new();
            for (name, _) in QUERIES {
                r.insert(
                    (*name).into(),
                    json!({"ms": ms, "server_cpu_ms": cpu, "hits": hits}),
                );
            }
            r.insert("files_opened".into(), json!(0));
            r.insert("index_bytes".into(), json!(1));
            by_server.insert(s.into(), Value::Object(r));
        }
        let t = table(10, 1000, &["dovecot", "xapian", "maildex"], &by_server);
        assert!(t.contains(
            "| query | Dovecot ms | Dovecot+xapian ms | maildex ms | ratio Dovecot | ratio Dovecot+xapian | Dovecot CPU ms | Dovecot+xapian CPU ms | maildex CPU ms | ratio (CPU) Dovecot | ratio (CPU) Dovecot+xapian | hits Dovecot/Dovecot+xapian/maildex |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
        ), "{t}");
        assert!(t.contains(
            "| `BODY \"postpone\"` | 40.0 | 2.0 | 4.0 | 10.0x | 0.5x | 30.0 | 0.0 | 10.0 | 3.0x | - | 5/4/5 |\n"
        ), "{t}");
    }
}
