//! `maildex-bench search --xapian`: a third server, Dovecot with Debian's `dovecot-fts-xapian`
//! plugin, indexed with `doveadm index` before anything is timed (as its users run it), and
//! the indexing figures of both full-text indexes: Xapian's (doveadm index time, bytes of
//! `~/xapian-indexes`) and maildex's (`maildex index rebuild --fts-only`, the `fts-text`
//! bytes `maildex index dump` reports).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};

use crate::servers::{dir_bytes, DovecotServer, DOMAIN};

/// The plugin's settings, as its README (/usr/share/doc/dovecot-fts-xapian/README.md.gz)
/// recommends: `partial=3 full=20` are the n-gram lengths it indexes (3 for substrings of at
/// least three characters). No autoindexing: the folder is indexed by `doveadm index`
/// before timing; `fts_enforced = yes` so that a search never falls back to Dovecot's scan
/// (it indexes what is missing first instead). No `fts_decoder`: attachments are not
/// converted to text, as neither the scan nor maildex matches inside them.
pub const CONFIG: &str = "\
mail_plugins = $mail_plugins fts fts_xapian
plugin {
  fts = xapian
  fts_xapian = partial=3 full=20 verbose=0
  fts_autoindex = no
  fts_enforced = yes
}
service indexer-worker {
  vsz_limit = 2G
}";

/// The plugin's module, installed by Debian's `dovecot-fts-xapian`.
const MODULE: &str = "/usr/lib/dovecot/modules/lib21_fts_xapian_plugin.so";

/// Copies `template` (the corpus's mail root) to `work/xapian/mail`, starts Dovecot with
/// the plugin on it, and indexes `user`'s INBOX with `doveadm index`, timed. Returns the
/// server and the indexing figures (seconds, messages/s, index bytes, share of the mail).
pub fn start_indexed(
    work: &Path,
    template: &Path,
    user: &str,
    messages: usize,
    mail_bytes: u64,
    max_connections: usize,
    mail_fsync: &str,
) -> Result<(DovecotServer, Value)> {
    if !Path::new(MODULE).is_file() {
        bail!("{MODULE} is missing: apt-get install dovecot-fts-xapian (scripts/bench.sh does)");
    }
    let mail = work.join("xapian/mail");
    std::fs::create_dir_all(work.join("xapian"))?;
    let st = Command::new("cp")
        .arg("-a")
        .arg(template)
        .arg(&mail)
        .status()?;
    anyhow::ensure!(st.success(), "cp -a of the corpus failed");
    let s = DovecotServer::start_as(
        "xapian",
        &work.join("dx"),
        &mail,
        &[user.to_owned()],
        max_connections,
        mail_fsync,
        None,
        CONFIG,
    )?;
    let login = format!("{user}@{DOMAIN}");
    let cpu0 = children_cpu_s();
    let t = Instant::now();
    // without -q doveadm indexes in its own process: its CPU is ours as a child's
    s.dovecot()
        .doveadm(&["index", "-u", &login, "INBOX"])
        .context("doveadm index")?;
    let secs = t.elapsed().as_secs_f64();
    let cpu = children_cpu_s() - cpu0;
    // the plugin keeps its databases in a `xapian-indexes` folder: the mailbox's index
    // folder (here the Maildir) in 1.5, the user's home in other versions
    let home = s.dovecot().scratch().join("home").join(&login);
    let bytes = xapian_bytes(&home) + xapian_bytes(&mail);
    eprintln!(
        "  xapian   doveadm index of {messages} messages: {secs:.1} s ({:.0} messages/s, {cpu:.1} s CPU), index {:.1} MB ({:.1}% of the mail)",
        messages as f64 / secs,
        bytes as f64 / 1e6,
        100.0 * bytes as f64 / mail_bytes as f64
    );
    Ok((
        s,
        json!({
            "seconds": secs,
            "cpu_seconds": cpu,
            "messages_per_s": messages as f64 / secs,
            "fts_bytes": bytes,
            "fts_share": bytes as f64 / mail_bytes as f64,
        }),
    ))
}

/// User and system CPU seconds of this process's waited-for children so far.
fn children_cpu_s() -> f64 {
    // SAFETY: getrusage(2) fills the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(ru.ru_utime) + s(ru.ru_stime)
}

/// Bytes in every `xapian-indexes` folder under `dir`.
fn xapian_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut total = 0;
    for e in rd.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            total += if e.file_name() == "xapian-indexes" {
                dir_bytes(&e.path(), &|_| true)
            } else {
                xapian_bytes(&e.path())
            };
        }
    }
    total
}

/// Runs `maildex ARGS --config CONF` and returns its stdout.
fn maildex(bin: &Path, conf: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new(bin)
        .args(args)
        .arg("--config")
        .arg(conf)
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    if !out.status.success() {
        bail!(
            "maildex {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The number before `suffix` in `text` (`"(4010 messages/s)"`, `"66 bytes stored"`).
fn number_before(text: &str, suffix: &str) -> Option<f64> {
    let head = &text[..text.find(suffix)?];
    let digits = head
        .trim_end()
        .rsplit(|c: char| !(c.is_ascii_digit() || c == '.'))
        .next()?;
    digits.parse().ok()
}

/// The full-text databases whose pages `maildex index dump` reports: maildex's full-text
/// index.
const FTS_DBS: [&str; 3] = ["fts-text", "fts-sig", "fts-words"];

/// The bytes of database `name` in `maildex index dump`'s page statistics (`  fts-text
/// 1893 entries, 8698 pages (...), 35627008 bytes`; the mailboxes' own `fts-text` lines
/// count records, not entries).
fn db_bytes(dump: &str, name: &str) -> Option<f64> {
    dump.lines()
        .map(str::trim_start)
        .find(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') && rest.contains(" entries, "))
        })
        .and_then(|l| number_before(l, "bytes"))
}

/// maildex's full-text indexing of the same INBOX: `maildex index rebuild --fts-only`
/// (every text record rewritten from the files, as a first indexing writes it; the server
/// runs meanwhile) timed, and the pages of the full-text databases (`fts-text`, `fts-sig`,
/// `fts-words`) that `maildex index dump` reports.
pub fn maildex_fts(
    bin: &Path,
    conf: &Path,
    user: &str,
    messages: usize,
    mail_bytes: u64,
) -> Result<Value> {
    let login = format!("{user}@{DOMAIN}");
    let t = Instant::now();
    let out = maildex(
        bin,
        conf,
        &["index", "rebuild", "--fts-only", "--user", &login],
    )?;
    let secs = t.elapsed().as_secs_f64();
    let dump = maildex(bin, conf, &["index", "dump", "-u", &login, "-m", "INBOX"])?;
    let share = |b: f64| 100.0 * b / mail_bytes as f64;
    let mut sizes = Map::new();
    let mut parts = Vec::new();
    let mut total = 0.0;
    for name in FTS_DBS {
        let bytes = db_bytes(&dump, name);
        if let Some(b) = bytes {
            total += b;
            parts.push(format!("{name} {:.1} MB ({:.1}%)", b / 1e6, share(b)));
        } else {
            parts.push(format!("{name} not in the dump"));
        }
        sizes.insert(name.to_string(), json!(bytes));
    }
    eprintln!(
        "  maildex  index rebuild --fts-only of {messages} messages: {secs:.1} s; {}; {}; full-text index {:.1} MB, {:.1}% of the mail",
        out.lines().next().unwrap_or("").trim(),
        parts.join(", "),
        total / 1e6,
        share(total)
    );
    Ok(json!({
        "seconds": secs,
        "messages_per_s": number_before(&out, "messages/s").unwrap_or(messages as f64 / secs),
        "fts_bytes": sizes,
        "fts_total_bytes": total,
        "fts_share": total / mail_bytes as f64,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_maildex_output() {
        let rebuild =
            "search@example.org: 1000 full-text records rewritten (3925 messages/s), 0 unreadable";
        assert_eq!(number_before(rebuild, "messages/s"), Some(3925.0));
        let dump = "mailbox 6 \"INBOX\"\n  fts-text         1000 records, 9000000 bytes uncompressed\n\
                    databases (pages of 4096 bytes)\n  fts-text         63 entries, 598 pages (3 leaf, 594 overflow, 1 branch), 2449408 bytes\n\
                    \x20 fts-words        20 entries, 7 pages (6 leaf, 0 overflow, 1 branch), 28672 bytes\n";
        assert_eq!(db_bytes(dump, "fts-text"), Some(2449408.0));
        assert_eq!(db_bytes(dump, "fts-words"), Some(28672.0));
        assert_eq!(db_bytes(dump, "fts-sig"), None);
        assert_eq!(number_before(dump, "absent"), None);
    }
}
