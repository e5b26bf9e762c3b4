//! `maildex index rebuild`: every user's index rewritten from their Maildir, several users
//! at once (issue 19 #1). A user's own rebuild parses on every core only when it has many
//! messages to index; a site's users mostly have a few hundred, each rebuilt on one
//! thread that waits for its syncs, so one user after another left the cores idle (1,000
//! users of 30 messages: 0.8 of one core busy, `perf stat`).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use maildex_config::Config;
use maildex_store::parallel::for_each_in_parallel;
use maildex_store::UserStore;

use crate::cmd_index::{bar, progress_bar, rebuild_texts, show, text_bar, RebuildArgs};
use crate::common::{become_mail_owner, load_config, store_options, users, NO_MAIL_YET};

/// What rebuilding one user gave: the lines it prints and its counts.
#[derive(Default)]
struct Outcome {
    lines: String,
    messages: usize,
    mailboxes: usize,
    unreadable: usize,
    skipped: usize,
    texts: usize,
    text_time: Duration,
}

/// glibc's malloc gives the free memory at the top of its heap back to the kernel once
/// 128 KiB are free there, and `main` has it serve every block of 128 KiB or more with a
/// mapping of its own ([`maildex_index::keep_large_allocations_lazy`], for LMDB's lists).
/// A rebuild frees each batch's records, buffers and vectors of results (many of them
/// over 128 KiB) and then makes the next batch's, and paid for both ways: `brk`, `mmap`
/// and `munmap` calls, and the kernel zeroing and mapping every page again at its first
/// touch (`perf record`: sysmalloc and page faults). This process ends with the rebuild,
/// so it keeps what it frees (trim threshold 256 MiB) and serves blocks under 1 MiB from
/// the heap; LMDB's lists (1 and 2 MiB for each env open) stay lazy mappings. 30,000
/// messages of one user: a median 11% less wall time, eight alternating runs; 1,000 users
/// of 30 messages: the same time, peak RSS 23 -> 28 MiB (a 32 MiB threshold made it 41)
/// (issue 19 #1, docs/BENCHMARKS.md). The daemon keeps `main`'s setting.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets malloc's parameters; no other thread has been started
        let set = unsafe {
            libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20) == 1
                && libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20) == 1
        };
        if !set {
            tracing::debug!("mallopt refused the rebuild's malloc settings; glibc's kept");
        }
    }
}

pub fn rebuild(r: &RebuildArgs) -> Result<ExitCode> {
    keep_freed_memory();
    if r.fts_only {
        return rebuild_texts(&r.users);
    }
    let a = &r.users;
    let config = load_config(&a.config.config)?;
    let names = users(&config, &a.users)?;
    become_mail_owner(&config, &names)?;
    let tty = std::io::stderr().is_terminal();
    // twice the cores: a small user's rebuild mostly waits for its syncs (1,000 users of
    // 30 messages, 2 cores: 9.3 s one at a time, 6.8 s two, 5.3 s four, 4.9 s eight)
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get().saturating_mul(2).min(8))
        .min(names.len())
        .max(1);
    // a bar per user when one is rebuilt at a time, else one of users
    let users_bar = bar(
        tty && workers > 1,
        "rebuild",
        names.len(),
        "{prefix} [{bar:30}] {pos}/{len} users, {per_sec}",
    );
    let started = std::time::Instant::now();
    let mut total = Outcome::default();
    let mut failed = None;
    // printed in the users' order: every user started is reported, so none is missing
    let mut waiting = BTreeMap::new();
    let mut printed = 0;
    for_each_in_parallel(
        &names,
        workers,
        |_: &mut (), user| rebuild_user(&config, user, r, tty && workers == 1),
        |i, out| {
            // after an error no further user is started (as one at a time stopped)
            let mut go_on = out.is_ok();
            waiting.insert(i, out);
            while let Some(out) = waiting.remove(&printed) {
                printed += 1;
                if let Some(bar) = &users_bar {
                    bar.inc(1);
                }
                let o = match out {
                    Ok(o) => o,
                    Err(e) => {
                        failed.get_or_insert(e);
                        continue;
                    }
                };
                let written = match &users_bar {
                    Some(bar) => {
                        o.lines.lines().for_each(|line| bar.println(line));
                        Ok(())
                    }
                    None => std::io::stdout().write_all(o.lines.as_bytes()),
                };
                if let Err(e) = written {
                    // stdout closed (a pipe into `head`): no further user is started
                    go_on = false;
                    failed.get_or_insert(anyhow::Error::from(e).context("writing the report"));
                }
                total.messages += o.messages;
                total.mailboxes += o.mailboxes;
                total.unreadable += o.unreadable;
                total.skipped += o.skipped;
                total.texts += o.texts;
                total.text_time += o.text_time;
            }
            go_on
        },
    );
    if let Some(bar) = users_bar {
        bar.finish_and_clear();
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let Outcome {
        messages,
        mailboxes,
        unreadable,
        skipped,
        texts,
        text_time,
        ..
    } = total;
    println!(
        "total: {mailboxes} mailboxes, {messages} messages, full text of {texts} in {:.2}s, \
         {unreadable} unreadable, {skipped} users with no mail yet, {:.2}s",
        text_time.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    Ok(if unreadable > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Rebuilds `user`'s index (and with `--with-text` its full text); `bars`: progress bars
/// of its own on the terminal.
fn rebuild_user(config: &Config, user: &str, r: &RebuildArgs, bars: bool) -> Result<Outcome> {
    use std::fmt::Write as _;
    let mut o = Outcome::default();
    let paths = config
        .storage
        .paths_for(user)
        .with_context(|| format!("user {user}"))?;
    if std::fs::symlink_metadata(&paths.maildir)
        .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
    {
        // nothing to index, and nothing is created for a user who has no mail yet
        let _ = writeln!(o.lines, "{user}: {NO_MAIL_YET}");
        o.skipped = 1;
        return Ok(o);
    }
    let (store, aside) =
        UserStore::open_for_rebuild(&paths.maildir, &paths.index_dir, store_options(config))
            .with_context(|| format!("opening the mail of {user}"))?;
    if let Some(aside) = aside {
        eprintln!("{user}: unusable index moved aside to {}", aside.display());
    }
    let bar = progress_bar(bars, user);
    let report = store
        .rebuild(&mut |p| show(bar.as_ref(), p))
        .with_context(|| format!("rebuilding the index of {user}"))?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let rate = report.sync.added as f64 / report.elapsed.as_secs_f64().max(1e-9);
    // the listing records are committed: listings use the index from here on; then the
    // full text, in this run or by the daemon
    let text = if !r.with_text || !config.storage.full_text {
        let pending: usize = store.pending_texts()?.iter().map(|(_, n)| n).sum();
        format!("full text of {pending} messages left to the daemon")
    } else {
        let total: usize = store.pending_texts()?.iter().map(|(_, n)| n).sum();
        let bar = text_bar(bars, user, total);
        let t = store.index_all_pending_text(&mut |p| {
            if let Some(bar) = &bar {
                bar.set_position(p.messages as u64);
            }
        })?;
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        o.texts = t.written;
        o.text_time = t.elapsed;
        o.unreadable += t.unreadable;
        let rate = t.written as f64 / t.elapsed.as_secs_f64().max(1e-9);
        format!(
            "full text of {} messages in {:.2}s ({rate:.0} messages/s)",
            t.written,
            t.elapsed.as_secs_f64()
        )
    };
    let _ = writeln!(
        o.lines,
        "{user}: {} mailboxes, {} messages indexed in {:.2}s ({rate:.0} messages/s), {text}, {} unreadable",
        report.sync.mailboxes,
        report.sync.added,
        report.elapsed.as_secs_f64(),
        report.sync.unreadable.len()
    );
    for f in &report.sync.unreadable {
        let _ = writeln!(o.lines, "  unreadable: {}", f.display());
    }
    o.messages = report.sync.added;
    o.mailboxes = report.sync.mailboxes;
    o.unreadable += report.sync.unreadable.len();
    Ok(o)
}
