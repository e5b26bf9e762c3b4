//! `maildex index dump|rebuild|check|compact`.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use maildex_index::dump;

use crate::common::{become_mail_owner, existing_paths, load_config, open_store, users};
use crate::{ConfigArg, UsersArg};

#[derive(Args, Debug)]
pub struct DumpArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// User whose index to dump.
    #[arg(long, short = 'u')]
    pub user: String,
    /// Only this mailbox.
    #[arg(long, short = 'm')]
    pub mailbox: Option<String>,
    /// Only this UID (also prints the stored header blocks).
    #[arg(long)]
    pub uid: Option<u32>,
}

#[derive(Args, Debug)]
pub struct RebuildArgs {
    #[command(flatten)]
    pub users: UsersCmdArgs,
    /// Only rewrite the full-text records (what SEARCH BODY/TEXT compare) from the files;
    /// UIDs, flags, modseqs and the other records stay as they are.
    #[arg(long)]
    pub fts_only: bool,
    /// Also index the full text (what SEARCH BODY/TEXT compare) in this run, after the
    /// listing records are committed. Without it the rebuild writes the listing records
    /// only, as Dovecot's `doveadm force-resync` leaves its FTS index to `doveadm index`,
    /// and the daemon indexes the text in the background at each user's next use (a
    /// SEARCH BODY/TEXT indexes what it compares itself, so its answers are whole either
    /// way).
    #[arg(long, conflicts_with = "fts_only")]
    pub with_text: bool,
    /// What a rebuild does without `--with-text` (the default since issue 19 #1); kept
    /// so that scripts written for earlier versions still run.
    #[arg(long, hide = true, conflicts_with_all = ["fts_only", "with_text"])]
    pub defer_text: bool,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    pub users: UsersCmdArgs,
    /// Rewrite what can be rewritten from the message files in place (the full-text
    /// records, and those not indexed yet); what remains needs `index rebuild`.
    #[arg(long)]
    pub repair: bool,
}

#[derive(Args, Debug)]
pub struct UsersCmdArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    #[command(flatten)]
    pub users: UsersArg,
}

pub fn dump(a: &DumpArgs) -> Result<ExitCode> {
    let config = load_config(&a.config.config)?;
    become_mail_owner(&config, std::slice::from_ref(&a.user))?;
    if existing_paths(&config, &a.user)?.is_none() {
        return Ok(ExitCode::SUCCESS);
    }
    let store = open_store(&config, &a.user)?;
    let pending: std::collections::HashMap<String, usize> =
        store.pending_texts()?.into_iter().collect();
    let index = store.index();
    let out = index.read(|r| {
        let mut out = String::new();
        for (id, m) in r.mailboxes()? {
            if a.mailbox.as_deref().is_some_and(|want| {
                want != m.name && !(want.eq_ignore_ascii_case("INBOX") && m.name == "INBOX")
            }) {
                continue;
            }
            out.push_str(&dump::mailbox(id, &m));
            out.push_str(&dump::text_stats(r, id)?);
            if let Some(n) = pending.get(&m.name) {
                out.push_str(&format!(
                    "  fts-pending      {n} messages whose full text is not indexed yet\n"
                ));
            }
            let records = match a.uid {
                Some(uid) => {
                    let uid = maildex_store::Uid(uid);
                    r.message(id, uid)?.map(|m| (uid, m)).into_iter().collect()
                }
                None => r.messages(id)?,
            };
            for (uid, rec) in records {
                let headers = r.headers(id, uid)?.unwrap_or_default();
                out.push_str(&dump::message(uid, &rec, &m.keywords, headers.len()));
                if a.uid.is_some() {
                    out.push_str("    header blocks\n");
                    for line in String::from_utf8_lossy(&headers).lines() {
                        out.push_str("      ");
                        out.push_str(line);
                        out.push('\n');
                    }
                }
            }
        }
        if !out.is_empty() {
            out.push_str(&dump::page_stats(
                &r.page_stats()?,
                maildex_index::page_size(),
            ));
        }
        Ok(out)
    })?;
    if out.is_empty() {
        bail!("nothing in the index matches");
    }
    std::io::stdout().write_all(out.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// A progress bar of mailboxes for a user's rebuild, on a terminal.
pub(crate) fn progress_bar(tty: bool, user: &str) -> Option<indicatif::ProgressBar> {
    bar(
        tty,
        user,
        0,
        "{prefix} [{bar:30}] {pos}/{len} mailboxes, {msg}",
    )
}

/// A progress bar of messages for a rebuild's full-text phase, on a terminal.
pub(crate) fn text_bar(tty: bool, user: &str, total: usize) -> Option<indicatif::ProgressBar> {
    let template = "{prefix} full text [{bar:30}] {pos}/{len} messages, {per_sec}";
    bar(tty, user, total, template)
}

/// A progress bar of `len` steps drawn by `template`, on a terminal.
pub(crate) fn bar(
    tty: bool,
    user: &str,
    len: usize,
    template: &str,
) -> Option<indicatif::ProgressBar> {
    tty.then(|| {
        let bar = indicatif::ProgressBar::new(len as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_prefix(user.to_string());
        bar
    })
}

/// Moves a rebuild's progress bar to `p`.
pub(crate) fn show(bar: Option<&indicatif::ProgressBar>, p: &maildex_store::Progress) {
    if let Some(bar) = bar {
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
        bar.set_message(format!("{} messages", p.messages));
    }
}

/// `index rebuild --fts-only`: the full-text records of every indexed message rewritten
/// from the files; a user without an index yet is skipped (its first use indexes it whole).
pub(crate) fn rebuild_texts(a: &UsersCmdArgs) -> Result<ExitCode> {
    let config = load_config(&a.config.config)?;
    let names = users(&config, &a.users)?;
    become_mail_owner(&config, &names)?;
    let tty = std::io::stderr().is_terminal();
    let (mut messages, mut unreadable) = (0, 0);
    let started = std::time::Instant::now();
    for user in names {
        if existing_paths(&config, &user)?.is_none() {
            continue;
        }
        let store = open_store(&config, &user)?;
        let bar = progress_bar(tty, &user);
        let t = std::time::Instant::now();
        let (n, bad) = store.rebuild_texts(&mut |p| show(bar.as_ref(), p))?;
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        let rate = n as f64 / t.elapsed().as_secs_f64().max(1e-9);
        println!(
            "{user}: {n} full-text records rewritten ({rate:.0} messages/s), {bad} unreadable"
        );
        messages += n;
        unreadable += bad;
    }
    println!(
        "total: {messages} full-text records, {unreadable} unreadable, {:.2}s",
        started.elapsed().as_secs_f64()
    );
    Ok(if unreadable > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Reads only: a user without a Maildir or an index is reported and nothing is created.
/// A folder never indexed yet is reported but is not a difference (exit 0): the daemon
/// indexes it when it is first opened.
pub fn check(c: &CheckArgs) -> Result<ExitCode> {
    let a = &c.users;
    let config = load_config(&a.config.config)?;
    let names = users(&config, &a.users)?;
    become_mail_owner(&config, &names)?;
    let mut total = 0;
    for user in names {
        if existing_paths(&config, &user)?.is_none() {
            continue;
        }
        let store = open_store(&config, &user)?;
        let (pending, first): (Vec<_>, Vec<_>) =
            store.check()?.into_iter().partition(|d| !d.is_drift());
        for d in &pending {
            println!("{user}: {d}");
        }
        // messages whose full text is not indexed yet: listed, not differences
        let mut texts_pending = false;
        for (mailbox, n) in store.pending_texts()? {
            if n > 0 {
                texts_pending = true;
                println!(
                    "{user}: {mailbox}: {n} messages whose full text is not indexed yet \
                     (the daemon, a SEARCH or `index check --repair` indexes them; not a difference)"
                );
            }
        }
        if c.repair && texts_pending {
            let t = store.index_all_pending_text(&mut |_| {})?;
            println!(
                "{user}: full text of {} messages indexed, {} unreadable",
                t.written, t.unreadable
            );
        }
        // a delivery or sync in flight shows as a passing difference: report only what is
        // still there a moment later
        let diffs = if first.is_empty() {
            first
        } else {
            std::thread::sleep(Duration::from_millis(1500));
            let second = store.check()?;
            second
                .into_iter()
                .filter(|d| d.is_drift() && first.contains(d))
                .collect()
        };
        for d in &diffs {
            println!("{user}: {d}");
            let repaired = match d {
                maildex_store::Difference::Text { mailbox, uid, .. } if c.repair => {
                    store.repair_text(mailbox, *uid)?
                }
                maildex_store::Difference::FlagColumn { mailbox, uid } if c.repair => {
                    store.repair_flag_column(mailbox, *uid)?
                }
                _ => false,
            };
            if repaired {
                println!("{user}: {d}: repaired");
            } else {
                total += 1;
            }
        }
    }
    if total == 0 {
        println!("index and Maildir agree");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("{total} differences (run `maildex index rebuild` to re-index from the Maildir)");
        Ok(ExitCode::from(1))
    }
}

pub fn compact(a: &UsersCmdArgs) -> Result<ExitCode> {
    let config = load_config(&a.config.config)?;
    let names = users(&config, &a.users)?;
    become_mail_owner(&config, &names)?;
    let mut failed = 0;
    for user in names {
        let paths = config
            .storage
            .paths_for(&user)
            .with_context(|| format!("user {user}"))?;
        if !paths.index_dir.join(maildex_index::DATA_FILE).exists() {
            println!("{user}: no index yet");
            continue;
        }
        match maildex_index::compact(&paths.index_dir) {
            Ok((before, after)) => println!("{user}: {before} -> {after} bytes"),
            Err(e) => {
                eprintln!("{user}: {e}");
                failed += 1;
            }
        }
    }
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
