//! The results section of docs/BENCHMARKS.md and the PNG plots, from a results document.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde_json::Value;

use crate::listing::LISTINGS;

/// Markers around the generated section of a mode in docs/BENCHMARKS.md.
pub fn markers(mode: &str) -> (String, String) {
    (
        format!(
            "<!-- maildex-bench all --{mode}: begin (generated, overwritten by the next run) -->"
        ),
        format!("<!-- maildex-bench all --{mode}: end -->"),
    )
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

fn fmt(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(x) if x >= 10_000.0 => {
            let s = format!("{x:.0}");
            // thousands separators
            let mut out = String::new();
            for (i, c) in s.chars().enumerate() {
                if i > 0 && (s.len() - i) % 3 == 0 {
                    out.push(',');
                }
                out.push(c);
            }
            out
        }
        Some(x) => format!("{x:.digits$}"),
        None => "n/a".into(),
    }
}

/// "a ÷ b" as "N.N×", or a dash when either side is missing or `b` shows as zero (a
/// ratio to a figure under the table's precision says nothing).
fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b >= 0.05 && a / b < 0.995 => format!("{:.2}×", a / b),
        (Some(a), Some(b)) if b >= 0.05 => format!("{:.1}×", a / b),
        _ => "–".into(),
    }
}

/// The figure at `path` for one server (`servers` object keyed by server name).
fn get<'a>(servers: &'a Value, server: &str, path: &[&str]) -> &'a Value {
    let mut v = &servers[server];
    for p in path {
        v = &v[*p];
    }
    v
}

/// One row: label, Dovecot, maildex, ratio (Dovecot ÷ maildex unless `higher_better`).
fn row(
    out: &mut String,
    label: &str,
    servers: &Value,
    path: &[&str],
    digits: usize,
    higher_better: bool,
) {
    let d = num(get(servers, "dovecot", path));
    let m = num(get(servers, "maildex", path));
    let r = if higher_better {
        ratio(m, d)
    } else {
        ratio(d, m)
    };
    let _ = writeln!(
        out,
        "| {label} | {} | {} | {r} |",
        fmt(d, digits),
        fmt(m, digits)
    );
}

/// The markdown section (between the markers) for a results document.
pub fn markdown(r: &Value, command: &str, plots: &[(String, String)]) -> String {
    let mode = r["mode"].as_str().unwrap_or("?");
    let (begin, end) = markers(mode);
    let m = &r["machine"];
    let mut o = String::new();
    let _ = writeln!(o, "{begin}");
    let _ = writeln!(
        o,
        "\nReproduce: `{command}` ({:.0} s at commit {}).\n",
        num(&r["secs"]).unwrap_or(0.0),
        m["commit"].as_str().unwrap_or("?")
    );
    let _ = writeln!(
        o,
        "Machine: {} cores ({}), {} GiB, Linux {}, {}, Dovecot {}.",
        m["nproc"],
        m["cpu"].as_str().unwrap_or("?"),
        m["memory_gib"],
        m["kernel"].as_str().unwrap_or("?"),
        m["rustc"].as_str().unwrap_or("?"),
        m["dovecot"].as_str().unwrap_or("?")
    );
    if let Some(load) = m["loadavg_at_start"].as_str() {
        let _ = writeln!(
            o,
            "Load average when the run started: {load} (the machine is shared; both servers \
             ran workload by workload in turn under the same load)."
        );
    }
    let mx = &r["servers"]["maildex"];
    if mx["available"].as_bool() != Some(true) {
        let _ = writeln!(
            o,
            "\n**Dovecot side only**: maildex was not available in this run ({}). The maildex \
             column and the ratios fill in once `maildex serve` listens.",
            mx["reason"]
                .as_str()
                .unwrap_or("no reason given")
                .lines()
                .next()
                .unwrap_or("")
        );
    }
    let c = &r["corpus"];
    let _ = writeln!(
        o,
        "\nCorpus: maildex-corpus seed {}, size scale {}, all mail in INBOX. Both servers read \
         their own copy of the same generated Maildir. Ratios are Dovecot ÷ maildex for times \
         and memory, maildex ÷ Dovecot for throughput: above 1× maildex is ahead.",
        c["seed"], c["scale"]
    );
    let _ = writeln!(
        o,
        "\n### Listings (ms, median)\n\n\"first\" is the first listing after delivery on freshly \
         started server processes: Dovecot with its dovecot.index* and cache deleted (it keeps \
         dovecot-uidlist), maildex with the index it writes at delivery (here: `maildex serve` indexes the copied Maildir at start-up, before it listens). \
         \"warm\" repeats on new connections. Client CPU is the benchmark client's own CPU \
         time for the warm listing (Dovecot run), to show the client is not the bottleneck.\n"
    );
    let _ = writeln!(o, "| INBOX | command | Dovecot first | maildex first | ratio | Dovecot warm | maildex warm | ratio | client CPU | responses | MB |");
    let _ = writeln!(o, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    if let Some(sizes) = c["sizes"].as_array() {
        for size in sizes {
            let key = size.to_string();
            let s = &r["listing"][&key];
            for (name, _) in LISTINGS {
                let f = |srv: &str, k: &str| num(&s[srv][*name][k]["ms"]);
                let (df, mf, dw, mw) = (
                    f("dovecot", "first"),
                    f("maildex", "first"),
                    f("dovecot", "warm"),
                    f("maildex", "warm"),
                );
                let w = &s["dovecot"][*name]["warm"];
                let _ = writeln!(
                    o,
                    "| {} | {name} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} |",
                    fmt(num(size), 0),
                    fmt(df, 1),
                    fmt(mf, 1),
                    ratio(df, mf),
                    fmt(dw, 1),
                    fmt(mw, 1),
                    ratio(dw, mw),
                    fmt(num(&w["client_cpu_ms"]), 1),
                    w["untagged"],
                    num(&w["bytes"]).unwrap_or(0.0) / 1e6
                );
            }
        }
    }
    let _ = writeln!(
        o,
        "\nThe mutt listing as a whole session, as the IMAP issue times it: connect, greeting, \
         `LOGIN`, `SELECT INBOX` (median), plus the listing above (median).\n"
    );
    let _ = writeln!(
        o,
        "| INBOX | Dovecot first | maildex first | ratio | Dovecot warm | maildex warm | ratio |"
    );
    let _ = writeln!(o, "|---:|---:|---:|---:|---:|---:|---:|");
    if let Some(sizes) = c["sizes"].as_array() {
        for size in sizes {
            let s = &r["listing"][&size.to_string()];
            let f = |srv: &str, k: &str| {
                let m = &s[srv]["mutt"][k];
                Some(num(&m["login_select_ms"])? + num(&m["ms"])?)
            };
            let (df, mf, dw, mw) = (
                f("dovecot", "first"),
                f("maildex", "first"),
                f("dovecot", "warm"),
                f("maildex", "warm"),
            );
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} |",
                fmt(num(size), 0),
                fmt(df, 1),
                fmt(mf, 1),
                ratio(df, mf),
                fmt(dw, 1),
                fmt(mw, 1),
                ratio(dw, mw),
            );
        }
    }
    let _ = writeln!(
        o,
        "\n### Other figures\n\n| figure | Dovecot | maildex | ratio |\n|---|---:|---:|---:|"
    );
    let fo = &r["files_opened"];
    let size = fo["size"].to_string();
    row(
        &mut o,
        &format!("message files opened by the first mutt listing of {size} messages (strace)"),
        &fo["servers"],
        &["first"],
        0,
        false,
    );
    row(
        &mut o,
        "… by a warm mutt listing",
        &fo["servers"],
        &["warm"],
        0,
        false,
    );
    // no ratio: Dovecot here has no full-text indexer
    let indexer = |s| fmt(num(get(&fo["servers"], s, &["indexer_first"])), 0);
    let _ = writeln!(
        o,
        "| … meanwhile by maildex's background full-text indexer (the texts of delivered mail, not the listing), during the first | {} | {} | – |",
        indexer("dovecot"),
        indexer("maildex")
    );
    let se = &r["search"]["servers"];
    row(
        &mut o,
        &format!("`SEARCH SUBJECT` on {size} messages, ms"),
        se,
        &["header", "ms"],
        1,
        false,
    );
    row(&mut o, "… matches", se, &["header", "hits"], 0, false);
    row(
        &mut o,
        &format!("`SEARCH BODY` on {size} messages, ms"),
        se,
        &["body", "ms"],
        1,
        false,
    );
    row(&mut o, "… matches", se, &["body", "hits"], 0, false);
    // results written before the suite waited for maildex's indexer measured its progress
    let when = if r["index_bytes_settled"].as_bool() == Some(true) {
        "maildex: its full text included, once the background indexer is done"
    } else {
        "maildex: taken while its background indexer was still writing the full text"
    };
    if let Some(sizes) = c["sizes"].as_array() {
        for size in sizes {
            let key = size.to_string();
            let mail = num(&c["mail_bytes"][&key]).unwrap_or(0.0);
            let idx = &r["index_bytes"][&key];
            let pct = |s: &str| num(&idx[s]).map(|b| b * 100.0 / mail.max(1.0));
            let _ = writeln!(
                o,
                "| index (+cache) after the listings, {} messages ({:.1} MB of mail), % of mail bytes ({when}) | {} | {} | {} |",
                fmt(num(size), 0), mail / 1e6, fmt(pct("dovecot"), 1), fmt(pct("maildex"), 1), ratio(pct("dovecot"), pct("maildex"))
            );
        }
    }
    let rb = &r["rebuild"];
    if rb.is_object() {
        let n = rb["size"].to_string();
        row(
            &mut o,
            &format!("index rebuilt from the Maildir, {n} messages, ms (Dovecot `doveadm force-resync` with `dovecot.index*` deleted: index only, its cache fills at the next listing; maildex `maildex index rebuild`: everything a listing needs, the full text left to the daemon as Dovecot leaves its FTS index to `doveadm index`)"),
            &rb["servers"],
            &["rebuild_ms"],
            0,
            false,
        );
        row(
            &mut o,
            "… messages/s",
            &rb["servers"],
            &["messages_per_s"],
            0,
            true,
        );
        let total = |srv: &str| {
            let v = &rb["servers"][srv];
            num(&v["rebuild_ms"])
                .zip(num(&v["listing_ms"]))
                .map(|(a, b)| a + b)
        };
        let _ = writeln!(
            o,
            "| … then the first mutt listing: rebuild + listing, ms | {} | {} | {} |",
            fmt(total("dovecot"), 0),
            fmt(total("maildex"), 0),
            ratio(total("dovecot"), total("maildex"))
        );
    }
    let b = &r["bodies"];
    let label = format!(
        "{} × {} MiB",
        b["messages"],
        num(&b["message_bytes"]).unwrap_or(0.0) / 1048576.0
    );
    row(
        &mut o,
        &format!("`FETCH 1:* BODY.PEEK[]`, {label}: ms"),
        &b["servers"],
        &["ms"],
        0,
        false,
    );
    let mib = |v: &Value| num(v).map(|k| k / 1024.0);
    let bs = &b["servers"];
    let _ = writeln!(
        o,
        "| … server peak RSS over its RSS before the session (MiB, VmHWM summed over processes, after a first session) | {} | {} | {} |",
        fmt(mib(&bs["dovecot"]["growth_kib"]), 1),
        fmt(mib(&bs["maildex"]["growth_kib"]), 1),
        ratio(
            mib(&bs["dovecot"]["growth_kib"]),
            mib(&bs["maildex"]["growth_kib"])
        )
    );
    let l = &r["lmtp"]["servers"];
    let d = &l["dovecot"];
    let _ = writeln!(
        o,
        "| LMTP, {} messages to {} users over {} sessions (one process each), fsync on; mean of two runs each, in the order Dovecot, maildex, maildex, Dovecot: messages/s | {} | {} | {} |",
        d["messages"], d["users"], d["sessions"],
        fmt(num(&d["per_sec"]), 0), fmt(num(&l["maildex"]["per_sec"]), 0), ratio(num(&l["maildex"]["per_sec"]), num(&d["per_sec"]))
    );
    row(
        &mut o,
        "… server CPU time per message (user + system, all processes), ms",
        l,
        &["server_cpu_ms_per_message"],
        2,
        false,
    );
    let i = &r["idle"]["servers"];
    let n = &i["dovecot"]["connections"];
    row(
        &mut o,
        "memory per extra IDLE connection, from the first to the last count measured: KiB PSS",
        i,
        &["per_extra_connection_pss_kib"],
        1,
        false,
    );
    row(
        &mut o,
        &format!("… with one-time costs, {n} connections over 16 users: KiB PSS"),
        i,
        &["per_connection_pss_kib"],
        0,
        false,
    );
    row(
        &mut o,
        "… KiB RSS (summed per process, counts shared pages again)",
        i,
        &["per_connection_rss_kib"],
        0,
        false,
    );
    row(
        &mut o,
        &format!("time for all {n} IDLE connections to see one LMTP delivery to their 16 users, from its start, ms"),
        i,
        &["all_saw_ms"],
        1,
        false,
    );
    row(
        &mut o,
        "… from the LMTP acknowledgement, ms",
        i,
        &["all_saw_after_ack_ms"],
        1,
        false,
    );
    if let Some(note) = r["inotify"].as_str() {
        let _ = writeln!(o, "\nIDLE set-up: {note}.");
    }
    for (file, alt) in plots {
        let _ = writeln!(o, "\n![{alt}]({file})");
    }
    if !plots.is_empty() {
        let _ = writeln!(o, "\nPlots: blue Dovecot, red maildex; solid first listing, dashed warm (listing plot); PSS sum of all server processes (idle plot). Both servers are restarted before the IDLE workload, so its memory starts from fresh processes; maildex's then includes the LMDB index pages its start-up sync of every user read (file-backed mappings the kernel can drop), which is why its line starts higher and stays flat.");
    }
    let _ = writeln!(o, "\n{end}");
    o
}

/// Replaces (or appends) the section of `mode` in the markdown file at `path`.
pub fn update_doc(path: &Path, mode: &str, section: &str, heading: &str) -> Result<()> {
    let doc = std::fs::read_to_string(path).unwrap_or_default();
    let (begin, end) = markers(mode);
    let new = match (doc.find(&begin), doc.find(&end)) {
        (Some(b), Some(e)) if e > b => {
            format!(
                "{}{}{}",
                &doc[..b],
                section.trim_end(),
                &doc[e + end.len()..]
            )
        }
        _ => format!("{}\n{heading}\n\n{}\n", doc.trim_end(), section.trim_end()),
    };
    std::fs::write(path, new)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_and_numbers() {
        assert_eq!(ratio(Some(30.0), Some(10.0)), "3.0×");
        assert_eq!(ratio(Some(30.0), None), "–");
        assert_eq!(ratio(Some(1.0), Some(25.0)), "0.04×");
        assert_eq!(ratio(Some(1.0), Some(0.0)), "–");
        assert_eq!(fmt(Some(12345.6), 1), "12,346");
        assert_eq!(fmt(Some(1234.56), 1), "1234.6");
        assert_eq!(fmt(None, 1), "n/a");
    }

    #[test]
    fn doc_section_replaced_in_place() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("B.md");
        std::fs::write(&p, "# Benchmarks\n\nintro\n").unwrap();
        let (b, e) = markers("quick");
        update_doc(&p, "quick", &format!("{b}\none\n{e}\n"), "## Results").unwrap();
        std::fs::write(&p, std::fs::read_to_string(&p).unwrap() + "\n## After\n").unwrap();
        update_doc(&p, "quick", &format!("{b}\ntwo\n{e}\n"), "## Results").unwrap();
        let doc = std::fs::read_to_string(&p).unwrap();
        assert!(doc.contains("two") && !doc.contains("one"), "{doc}");
        assert_eq!(doc.matches("## Results").count(), 1);
        assert!(doc.trim_end().ends_with("## After"), "{doc}");
    }
}
