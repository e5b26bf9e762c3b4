//! maildex benchmarks. Each subcommand prints what it measured and the command line that
//! reproduces it; docs/BENCHMARKS.md keeps the figures.
//!
//! - `maildex-bench rebuild`: index build and rebuild throughput and index size.
//! - `maildex-bench all --smoke|--quick|--full`: maildex and Dovecot side by side on copies
//!   of one generated Maildir (listings, files opened, SEARCH, FETCH BODY[], LMTP, IDLE);
//!   writes benches/results/MODE.json, PNG plots and a section of docs/BENCHMARKS.md.
//!   Until `maildex serve` listens, the maildex side is reported "not available".
//! - `maildex-bench idle-cost`: server CPU per IDLE session per delivery on a big INBOX
//!   and a small one (maildex only).
//! - `maildex-bench resync`: a reconnecting client's QRESYNC resync against a full one,
//!   Dovecot and maildex side by side.
//! - `maildex-bench mixed`: per-command latency percentiles of N clients running a random
//!   mix of APPEND, STORE, EXPUNGE, FETCH, SEARCH and COPY on shared mailboxes, maildex
//!   and Dovecot in one run.
//! - `maildex-bench search`: SEARCH on header and metadata criteria, warm, with server CPU,
//!   hit counts and the message files opened, Dovecot and maildex side by side; with
//!   `--xapian` also Dovecot with fts-xapian, and both full-text indexes' rate and size.
//! - `maildex-bench seed`: the seed benchmark (issue 20): LMTP to unique users kept in
//!   MariaDB and in OpenLDAP, logins per second with and without the auth cache, start-up
//!   with many SQL users; Dovecot with the same directories side by side.
//! - `maildex-bench sort`: SORT and THREAD REFERENCES of a whole INBOX, first after
//!   delivery and warm, files opened, Dovecot and maildex side by side.
//! - `maildex-bench delivered`: the first mutt listing of mail delivered over LMTP one
//!   message at a time, against the same mail indexed in one go, Dovecot and maildex.

mod delivered;
mod idle_cost;
mod imap_client;
mod listing;
mod lmtp_client;
mod load;
mod mixed;
mod plot;
mod rebuild;
mod report;
mod resync;
mod search;
mod seed;
mod seed_dirs;
mod servers;
mod sort;
mod suite;
mod xapian;

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{ArgGroup, Parser, Subcommand};

#[derive(Parser)]
#[command(name = "maildex-bench")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Index build and rebuild throughput, and index size, on a generated corpus.
    Rebuild {
        /// Messages in the corpus (one user, spread over Maildir++ folders).
        #[arg(long, default_value_t = 10_000)]
        messages: usize,
        /// Corpus seed.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Size multiplier (1.0 = real mail sizes).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        /// Work folder (default: a temporary one, removed afterwards).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// maildex and Dovecot side by side: every workload, JSON results, plots, docs section.
    #[command(group(ArgGroup::new("mode").required(true).args(["smoke", "quick", "full"])))]
    All {
        /// A few hundred small messages, seconds; checks the suite works (writes no docs).
        #[arg(long)]
        smoke: bool,
        /// A few minutes: INBOXes of 1,000-10,000 messages, 1,000 idle connections.
        #[arg(long)]
        quick: bool,
        /// The sizes: 10,000-message INBOX and more, 10,000 LMTP messages to 1,000
        /// users, 1,000 idle connections.
        #[arg(long)]
        full: bool,
        /// The maildex binary (default: `maildex` next to this program).
        #[arg(long)]
        maildex_bin: Option<PathBuf>,
        /// Work folder, kept afterwards (default: a temporary one under /tmp, removed).
        #[arg(long)]
        work: Option<PathBuf>,
        /// Write JSON, plots and the docs section even in smoke mode / never in others
        /// (default: not in smoke mode and not with --only).
        #[arg(long)]
        write: Option<bool>,
        /// Only these workloads, comma-separated: listing, files, search, bodies, lmtp,
        /// idle (default: all).
        #[arg(long, value_delimiter = ',', value_parser = ["listing", "files", "search", "rebuild", "bodies", "lmtp", "idle"])]
        only: Vec<String>,
        /// Dovecot's `mail_fsync`: `optimized` (its default, what the recorded runs use)
        /// syncs the message file, `new/` and dovecot-uidlist (strace, issue 19 #4);
        /// `always` also its index and dotlocks, about what maildex makes durable. Another value than the default
        /// writes no docs (as --only).
        #[arg(long, default_value = "optimized", value_parser = ["optimized", "always", "never"])]
        dovecot_mail_fsync: String,
    },
    /// Per-command latency under concurrent load: N clients doing a random mix of APPEND,
    /// STORE, EXPUNGE, FETCH, SEARCH and COPY on one user's two mailboxes, Dovecot and
    /// maildex on copies of the same Maildir; prints p50/p90/p99/max per command.
    Mixed {
        /// Client counts (one run per count and server per round).
        #[arg(long, value_delimiter = ',', default_values_t = [10, 50])]
        clients: Vec<usize>,
        /// Seconds per run.
        #[arg(long, default_value_t = 20)]
        secs: u64,
        /// Messages in INBOX at the start.
        #[arg(long, default_value_t = 2_000)]
        messages: usize,
        /// Rounds of all runs.
        #[arg(long, default_value_t = 1)]
        rounds: usize,
        /// The maildex binary (default: `maildex` next to this program).
        #[arg(long)]
        maildex_bin: Option<PathBuf>,
        /// Work folder, kept afterwards (default: a temporary one under /tmp, removed).
        #[arg(long)]
        work: Option<PathBuf>,
        /// Dovecot's `mail_fsync` (see `all`).
        #[arg(long, default_value = "optimized", value_parser = ["optimized", "always", "never"])]
        dovecot_mail_fsync: String,
        /// Offer this many commands per second in all (each client paced on a fixed
        /// schedule, latency timed from the scheduled send), so both servers serve the same
        /// load; without it each client sends its next command as soon as it has the answer.
        #[arg(long)]
        rate: Option<f64>,
        /// Also write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Server CPU per IDLE session per delivery on a big INBOX and a small one (maildex
    /// only): a woken session must cost the same whatever the mailbox's size.
    IdleCost {
        /// Messages in the big INBOX.
        #[arg(long, default_value_t = 30_000)]
        big: usize,
        /// Messages in the small INBOX.
        #[arg(long, default_value_t = 100)]
        small: usize,
        /// IDLE sessions per user.
        #[arg(long, default_value_t = 100)]
        sessions: usize,
        /// Deliveries measured per user.
        #[arg(long, default_value_t = 100)]
        deliveries: usize,
        /// Rounds of both users.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// The maildex binary (default: `maildex` next to this program).
        #[arg(long)]
        maildex_bin: Option<PathBuf>,
        /// Also write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// A reconnecting client's resync after flag changes and expunges: QRESYNC against a
    /// full resync, Dovecot and maildex on copies of the same Maildir.
    Resync {
        /// Messages in INBOX.
        #[arg(long, default_value_t = 30_000)]
        messages: usize,
        /// Flag changes made while the client is away.
        #[arg(long, default_value_t = 100)]
        flags: usize,
        /// Expunges made while the client is away.
        #[arg(long, default_value_t = 50)]
        expunges: usize,
        /// Rounds.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// The maildex binary (default: `maildex` next to this program).
        #[arg(long)]
        maildex_bin: Option<PathBuf>,
        /// Dovecot's `mail_fsync` (see `all`).
        #[arg(long, default_value = "optimized", value_parser = ["optimized", "always", "never"])]
        dovecot_mail_fsync: String,
        /// Also write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// SEARCH on header and metadata criteria (SUBJECT, FROM, TO, CC, HEADER of a hot and a
    /// non-hot field, SENTSINCE, LARGER, flags, OR/NOT), warm: Dovecot and maildex on copies
    /// of the same INBOX, wall time, server CPU, hits and message files opened (strace).
    Search {
        /// INBOX sizes.
        #[arg(long, value_delimiter = ',', default_values_t = [10_000, 30_000])]
        sizes: Vec<usize>,
        /// Warm runs per query.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Also Dovecot with fts-xapian (dovecot-fts-xapian), indexed by `doveadm index` first.
        #[arg(long)]
        xapian: bool,
        /// Draw SEARCH BODY time against INBOX size into this PNG (docs/bench/search_body.png).
        #[arg(long)]
        plot: Option<PathBuf>,
        /// The maildex binary (default: `maildex` next to this program).
        #[arg(long)]
        maildex_bin: Option<PathBuf>,
        /// Dovecot's `mail_fsync` (see `all`).
        #[arg(long, default_value = "optimized", value_parser = ["optimized", "always", "never"])]
        dovecot_mail_fsync: String,
        /// Also write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// The first mutt listing of mail delivered over LMTP one message at a time, and of the
    /// same mail as a copied Maildir indexed in one go, Dovecot and maildex side by side.
    Delivered {
        /// Messages delivered (one run each).
        #[arg(long, value_delimiter = ',', default_values_t = [2_000])]
        sizes: Vec<usize>,
        /// Warm listings after the first.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// The maildex binary (default: `maildex` next to this program).
        #[arg(long)]
        maildex_bin: Option<PathBuf>,
        /// Dovecot's `mail_fsync` (see `all`).
        #[arg(long, default_value = "optimized", value_parser = ["optimized", "always", "never"])]
        dovecot_mail_fsync: String,
        /// Also write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// SORT ARRIVAL/DATE/FROM/SUBJECT, REVERSE DATE and THREAD REFERENCES of a whole
    /// INBOX, first after delivery and warm, Dovecot and maildex side by side.
    Sort {
        /// INBOX sizes (one generated corpus each).
        #[arg(long, value_delimiter = ',', default_values_t = [10_000, 30_000])]
        sizes: Vec<usize>,
        /// Warm repeats of each query (the median is reported).
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Draw SORT time against folder size into this PNG (docs/bench/sort.png).
        #[arg(long)]
        plot: Option<PathBuf>,
        /// The maildex binary (default: `maildex` next to this program).
        #[arg(long)]
        maildex_bin: Option<PathBuf>,
        /// Dovecot's `mail_fsync` (see `all`).
        #[arg(long, default_value = "optimized", value_parser = ["optimized", "always", "never"])]
        dovecot_mail_fsync: String,
        /// Also write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// The seed benchmark: LMTP to unique users whose accounts live in MariaDB, then in
    /// OpenLDAP (both started on loopback by the benchmark), logins per second with the
    /// cache on and off, start-up with many users in MariaDB; Dovecot side by side.
    #[command(group(ArgGroup::new("size").required(true).args(["quick", "full"])))]
    Seed {
        /// 100 users, 10 logins, 10,000 users at start-up: under a minute.
        #[arg(long)]
        quick: bool,
        /// The sizes: 10,000 users, 1,000 logins, 100,000 users at start-up.
        #[arg(long)]
        full: bool,
        /// The maildex binary (default: `maildex` next to this program).
        #[arg(long)]
        maildex_bin: Option<PathBuf>,
        /// Also write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Draw LMTP messages/s by directory for both servers into this PNG.
        #[arg(long)]
        plot: Option<PathBuf>,
        /// Users (one message each) instead of the size's.
        #[arg(long)]
        users: Option<usize>,
        /// Only these parts, comma-separated (default: all).
        #[arg(long, value_delimiter = ',', value_parser = ["lmtp", "logins", "startup"])]
        only: Vec<String>,
    },
    /// Rewrites the plots and the docs section of a mode from benches/results/MODE.json
    /// (after a change of the report, without measuring again).
    Report {
        /// smoke, quick or full.
        #[arg(long)]
        mode: String,
    },
    /// One LMTP client session (run by `all` as its own process; not for direct use).
    #[command(hide = true)]
    LmtpClient {
        #[arg(long)]
        addr: SocketAddr,
        #[arg(long)]
        session: usize,
        #[arg(long)]
        messages: usize,
        #[arg(long)]
        users: usize,
        #[arg(long)]
        first: usize,
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        scale: f64,
    },
}

fn all(
    mode: &str,
    maildex_bin: Option<PathBuf>,
    work: Option<PathBuf>,
    write: Option<bool>,
    only: Vec<String>,
    dovecot_mail_fsync: String,
) -> Result<()> {
    let params = suite::Params::for_mode(mode)?;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("workspace root")?
        .to_owned();
    let maildex_bin = maildex_bin_or_default(maildex_bin)?;
    // A short work path: Dovecot's unix sockets live under it.
    let tmp;
    let work = match work {
        Some(w) => w,
        None => {
            tmp = tempfile::Builder::new().prefix("mxb").tempdir_in("/tmp")?;
            tmp.path().to_owned()
        }
    };
    let command = format!("cargo run --release -p maildex-benches -- all --{mode}");
    eprintln!("maildex-bench all --{mode}: work folder {}", work.display());
    let partial = !only.is_empty() || dovecot_mail_fsync != "optimized";
    let r = suite::run(
        &params,
        &suite::RunOpts {
            work,
            maildex_bin,
            only,
            dovecot_mail_fsync,
        },
    )?;
    if !write.unwrap_or(mode != "smoke" && !partial) {
        eprintln!(
            "done in {:.1} s (smoke: no files written)",
            r["secs"].as_f64().unwrap_or(0.0)
        );
        return Ok(());
    }
    write_outputs(&root, mode, &r, &command)
}

/// The maildex binary given, or `maildex` next to this program.
fn maildex_bin_or_default(given: Option<PathBuf>) -> Result<PathBuf> {
    match given {
        Some(b) => Ok(b),
        None => Ok(std::env::current_exe()?.with_file_name("maildex")),
    }
}

/// Writes benches/results/MODE.json, the PNG plots and the docs section for a results
/// document.
fn write_outputs(
    root: &std::path::Path,
    mode: &str,
    r: &serde_json::Value,
    command: &str,
) -> Result<()> {
    let results = root.join("benches/results");
    std::fs::create_dir_all(&results)?;
    let json_path = results.join(format!("{mode}.json"));
    std::fs::write(&json_path, serde_json::to_string_pretty(r)? + "\n")?;
    let plots_dir = root.join("docs/bench");
    std::fs::create_dir_all(&plots_dir)?;
    let mut plots = Vec::new();
    for (name, alt, f) in [
        (
            "listing",
            "mutt listing time against INBOX size",
            plot::listing as fn(&serde_json::Value, &std::path::Path) -> Result<()>,
        ),
        ("idle", "server memory against idle connections", plot::idle),
    ] {
        let file = format!("{mode}-{name}.png");
        match f(r, &plots_dir.join(&file)) {
            Ok(()) => plots.push((format!("bench/{file}"), alt.to_owned())),
            Err(e) => eprintln!("plot {file}: {e:#}"),
        }
    }
    let section = report::markdown(r, command, &plots);
    let heading = format!("## Side by side with Dovecot: `maildex-bench all --{mode}`");
    report::update_doc(&root.join("docs/BENCHMARKS.md"), mode, &section, &heading)?;
    eprintln!(
        "wrote {}, docs/BENCHMARKS.md and {} plots in docs/bench/",
        json_path.display(),
        plots.len()
    );
    Ok(())
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Rebuild {
            messages,
            seed,
            scale,
            dir,
        } => rebuild::rebuild(messages, seed, scale, dir),
        Cmd::All {
            smoke,
            quick,
            full: _,
            maildex_bin,
            work,
            write,
            only,
            dovecot_mail_fsync,
        } => {
            let mode = if smoke {
                "smoke"
            } else if quick {
                "quick"
            } else {
                "full"
            };
            all(mode, maildex_bin, work, write, only, dovecot_mail_fsync)
        }
        Cmd::Mixed {
            clients,
            secs,
            messages,
            rounds,
            maildex_bin,
            work,
            dovecot_mail_fsync,
            rate,
            json,
        } => {
            let maildex_bin = maildex_bin_or_default(maildex_bin)?;
            let tmp = scratch("mxm")?;
            let work = work.unwrap_or_else(|| tmp.path().to_owned());
            let r = mixed::run(&mixed::MixedOpts {
                clients,
                secs,
                messages,
                rounds,
                maildex_bin,
                work,
                dovecot_mail_fsync,
                rate,
            })?;
            write_json(json, &r)
        }
        Cmd::IdleCost {
            big,
            small,
            sessions,
            deliveries,
            rounds,
            maildex_bin,
            json,
        } => {
            let maildex_bin = maildex_bin_or_default(maildex_bin)?;
            let tmp = scratch("mxi")?;
            let r = idle_cost::run(&idle_cost::IdleCostOpts {
                big,
                small,
                sessions,
                deliveries,
                rounds,
                maildex_bin,
                work: tmp.path().to_owned(),
            })?;
            write_json(json, &r)
        }
        Cmd::Resync {
            messages,
            flags,
            expunges,
            rounds,
            maildex_bin,
            dovecot_mail_fsync,
            json,
        } => {
            let maildex_bin = maildex_bin_or_default(maildex_bin)?;
            let tmp = scratch("mxr")?;
            let r = resync::run(&resync::ResyncOpts {
                messages,
                flags,
                expunges,
                rounds,
                maildex_bin,
                work: tmp.path().to_owned(),
                dovecot_mail_fsync,
            })?;
            write_json(json, &r)
        }
        Cmd::Search {
            sizes,
            runs,
            xapian,
            plot,
            maildex_bin,
            dovecot_mail_fsync,
            json,
        } => {
            let maildex_bin = maildex_bin_or_default(maildex_bin)?;
            let tmp = scratch("mxs")?;
            let r = search::run(&search::SearchOpts {
                sizes,
                runs,
                maildex_bin,
                work: tmp.path().to_owned(),
                dovecot_mail_fsync,
                xapian,
                plot,
            })?;
            write_json(json, &r)
        }
        Cmd::Sort {
            sizes,
            rounds,
            plot,
            maildex_bin,
            dovecot_mail_fsync,
            json,
        } => {
            let maildex_bin = maildex_bin_or_default(maildex_bin)?;
            let tmp = scratch("mxs")?;
            let r = sort::run(&sort::SortOpts {
                sizes,
                rounds,
                plot,
                maildex_bin,
                work: tmp.path().to_owned(),
                dovecot_mail_fsync,
            })?;
            write_json(json, &r)
        }
        Cmd::Delivered {
            sizes,
            rounds,
            maildex_bin,
            dovecot_mail_fsync,
            json,
        } => {
            let maildex_bin = maildex_bin_or_default(maildex_bin)?;
            let tmp = scratch("mxv")?;
            let r = delivered::run(&delivered::DeliveredOpts {
                sizes,
                rounds,
                maildex_bin,
                work: tmp.path().to_owned(),
                dovecot_mail_fsync,
            })?;
            write_json(json, &r)
        }
        Cmd::Seed {
            quick,
            full: _,
            maildex_bin,
            json,
            plot,
            users: given_users,
            only,
        } => {
            let tmp = scratch("mxd")?;
            let (users, sessions, login_users, folder_users, startup_users) = if quick {
                (100, 4, 10, 20, 10_000)
            } else {
                (10_000, 10, 1_000, 1_000, 100_000)
            };
            let r = seed::run(&seed::SeedOpts {
                users: given_users.unwrap_or(users),
                parts: only,
                sessions,
                login_users,
                login_clients: 4,
                startup_users,
                folder_users,
                maildex_bin: maildex_bin_or_default(maildex_bin)?,
                work: tmp.path().to_owned(),
                seed: 42,
                scale: 1.0,
            })?;
            if let Some(p) = plot {
                plot::seed_lmtp(&r, &p)?;
            }
            write_json(json, &r)
        }
        Cmd::Report { mode } => {
            let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .context("workspace root")?
                .to_owned();
            let path = root.join(format!("benches/results/{mode}.json"));
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let r: serde_json::Value = serde_json::from_str(&text)?;
            let command = format!("cargo run --release -p maildex-benches -- all --{mode}");
            write_outputs(&root, &mode, &r, &command)
        }
        Cmd::LmtpClient {
            addr,
            session,
            messages,
            users,
            first,
            seed,
            scale,
        } => load::lmtp_client_main(addr, session, messages, users, first, seed, scale),
    }
}

/// A work folder under /tmp (short: Dovecot's sockets live under it), or under
/// `MAILDEX_BENCH_DIR` (another filesystem: a journaled ext4 mounted for the run, say),
/// removed when dropped.
fn scratch(prefix: &str) -> Result<tempfile::TempDir> {
    let under =
        std::env::var_os("MAILDEX_BENCH_DIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    Ok(tempfile::Builder::new().prefix(prefix).tempdir_in(under)?)
}

/// Writes a results document to `path` when one was asked for (`--json`).
fn write_json(path: Option<PathBuf>, r: &serde_json::Value) -> Result<()> {
    if let Some(path) = path {
        std::fs::write(&path, serde_json::to_string_pretty(r)? + "\n")?;
    }
    Ok(())
}
