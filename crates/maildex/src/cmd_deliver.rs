//! `maildex deliver`: a local delivery agent for postfix's `mailbox_command` or a `pipe`
//! transport. Reads one message on stdin and delivers it through the store's one write
//! path (file, dovecot-uidlist and index), streaming: the message is never held whole.
//!
//! Exit codes are sysexits(3), which postfix maps to retry or bounce: 0 delivered,
//! 64 EX_USAGE, 65 EX_DATAERR (empty message), 67 EX_NOUSER (unknown user, bounced),
//! 75 EX_TEMPFAIL (anything that may pass later: I/O, a full disk, a busy lock; postfix
//! keeps the message and retries), 77 EX_NOPERM (over quota: "5.2.2 Mailbox is full" on
//! stderr, bounced, as `dovecot-lda -e` does with Dovecot's default
//! `quota_full_tempfail = no`, and as LMTP answers 552 5.2.2), 78 EX_CONFIG.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use maildex_accounts::{Accounts, User};
use maildex_store::{DeliverOptions, StoreError, UserStore};

use crate::common::{become_owner, error_text, load_config};

/// sysexits(3) codes.
pub mod sysexits {
    /// Delivered.
    pub const OK: u8 = 0;
    /// Command line usage error.
    pub const USAGE: u8 = 64;
    /// The input is not a message.
    pub const DATAERR: u8 = 65;
    /// No such user: postfix bounces.
    pub const NOUSER: u8 = 67;
    /// Temporary failure: postfix retries later.
    pub const TEMPFAIL: u8 = 75;
    /// Refused for good (over quota): postfix bounces with the stderr line.
    pub const NOPERM: u8 = 77;
    /// Configuration error (postfix retries: the admin can fix it).
    pub const CONFIG: u8 = 78;
}

#[derive(Args, Debug)]
pub struct DeliverArgs {
    /// Configuration file (TOML).
    #[arg(long, short = 'c', default_value = maildex_config::DEFAULT_CONFIG_PATH, env = "MAILDEX_CONFIG")]
    pub config: PathBuf,
    /// Recipient's login name (postfix: `${user}@${domain}` or `${recipient}`).
    #[arg(long, short = 'u')]
    pub user: String,
    /// Mailbox to deliver to; a mailbox that does not exist means INBOX (as Dovecot's
    /// deliver does without autocreate).
    #[arg(long, short = 'm', default_value = "INBOX")]
    pub mailbox: String,
    /// Envelope sender, written as a Return-Path header (postfix: `${sender}`).
    #[arg(long, short = 'f')]
    pub from: Option<String>,
    /// Envelope recipient, written as a Delivered-To header (postfix: `${original_recipient}`).
    #[arg(long, short = 'a')]
    pub recipient: Option<String>,
}

/// Header lines to prepend, as Dovecot's deliver writes them (shared with LMTP).
fn trace_headers(a: &DeliverArgs) -> Vec<u8> {
    maildex_store::trace_headers(a.from.as_deref(), a.recipient.as_deref())
}

pub fn run(a: &DeliverArgs) -> ExitCode {
    let mut message_id = None;
    let (code, message) = deliver(a, &mut message_id);
    // the line LMTP logs per message (docs/ARCHITECTURE.md, "Logs")
    let rcpt = maildex_auth::LogName::new(a.recipient.as_deref().unwrap_or(&a.user));
    let result = if code == sysexits::OK {
        format!("<{rcpt}> {message}")
    } else {
        format!("<{rcpt}> failed {code}: {message}")
    };
    tracing::info!(
        message_id = %maildex_auth::LogName::new(message_id.as_deref().unwrap_or("")),
        from = %maildex_auth::LogName::new(a.from.as_deref().unwrap_or("")),
        results = %result,
        "message"
    );
    if code != sysexits::OK {
        // postfix puts this line in the bounce or in its log
        eprintln!("maildex deliver: {message}");
    }
    ExitCode::from(code)
}

/// Delivers; sets `message_id` once the message is read.
fn deliver(a: &DeliverArgs, message_id: &mut Option<String>) -> (u8, String) {
    let config = match load_config(&a.config) {
        Ok(c) => c,
        Err(e) => return (sysexits::CONFIG, error_text(&e)),
    };
    let accounts = match Accounts::load(config) {
        Ok(a) => a,
        Err(e) => return (sysexits::TEMPFAIL, e.to_string()),
    };
    // The users-file entry name is the identity that maps to paths (as for LMTP and IMAP):
    // `alice@example.org` matching a bare `alice` entry delivers into alice's Maildir.
    let user = match accounts.lookup(&a.user) {
        Ok(u) => u,
        // the directory is down: postfix defers (EX_TEMPFAIL), it does not bounce
        Err(e) => return (sysexits::TEMPFAIL, format!("4.3.0 {e}")),
    };
    let Some(user) = user else {
        // postfix bounces on 67 even though stdin was not read (checked with a real
        // postfix pipe transport: tests/it/lmtp/postfix.rs), so nothing needs draining
        return (
            sysexits::NOUSER,
            format!("5.1.1 unknown user {}", maildex_auth::LogName::new(&a.user)),
        );
    };
    // run as root, write as the mail's owner (the directory's for this user, else the
    // daemon's), as the daemon does; the directory was read as root
    if let Err(e) = become_owner(accounts.config(), &[(user.name.clone(), user.owner)]) {
        return (sysexits::TEMPFAIL, error_text(&e));
    }
    // already at or over the quota: refused before reading the message (LMTP's RCPT check)
    match accounts.over_quota(&user, 0) {
        Ok(false) => {}
        Ok(true) => return over_quota(&user),
        Err(e) => return (sysexits::TEMPFAIL, format!("4.3.0 {e}")),
    }
    let store = match accounts.store(&user) {
        Ok(s) => s,
        Err(e) => return (sysexits::TEMPFAIL, e.to_string()),
    };
    let mailbox = match store.mailbox_exists(&a.mailbox) {
        Ok(true) => a.mailbox.as_str(),
        Ok(false) => "INBOX",
        Err(e) => return (sysexits::USAGE, e.to_string()),
    };
    let mut stdin = BufReader::with_capacity(64 * 1024, std::io::stdin().lock());
    match stdin.fill_buf() {
        Ok([]) => return (sysexits::DATAERR, "empty message on stdin".into()),
        Ok(_) => {}
        Err(e) => return (sysexits::TEMPFAIL, format!("reading stdin: {e}")),
    }
    let mut message = std::io::Cursor::new(trace_headers(a)).chain(stdin);
    let delivered = deliver_prepared(&accounts, &user, &store, mailbox, &mut message, message_id);
    match delivered {
        Ok(uid) => (
            sysexits::OK,
            format!("delivered {}/{mailbox} uid={uid}", user.name),
        ),
        Err(failed) => failed,
    }
}

fn over_quota(user: &User) -> (u8, String) {
    (
        sysexits::NOPERM,
        format!("5.2.2 Mailbox is full ({} over quota)", user.name),
    )
}

fn failure(e: &StoreError) -> (u8, String) {
    match e {
        // the mailbox vanished between the check and the delivery: postfix retries
        StoreError::NoMailbox(_) => (sysexits::TEMPFAIL, e.to_string()),
        _ => (sysexits::TEMPFAIL, format!("4.3.0 {e}")),
    }
}

/// Without a quota the message goes straight through the store's write path. With one,
/// its size is known only once it is written: it goes to `tmp/` first (as over LMTP), is
/// checked against the quota, then linked into the mailbox; the `tmp/` file is removed
/// either way. Sets `message_id` (for the log) once the message is read.
fn deliver_prepared(
    accounts: &Accounts,
    user: &User,
    store: &UserStore,
    mailbox: &str,
    message: &mut dyn Read,
    message_id: &mut Option<String>,
) -> Result<u32, (u8, String)> {
    let opts = DeliverOptions::default();
    if user.quota.is_none() {
        let d = store
            .deliver(mailbox, message, &opts)
            .map_err(|e| failure(&e))?;
        *message_id = d.message_id;
        return Ok(d.uid.get());
    }
    let mut incoming = store.incoming(mailbox).map_err(|e| failure(&e))?;
    std::io::copy(message, &mut incoming).map_err(|e| {
        (
            sysexits::TEMPFAIL,
            format!("4.3.0 writing the message: {e}"),
        )
    })?;
    let prepared = incoming.prepare(None, None).map_err(|e| failure(&e))?;
    *message_id = prepared.message_id();
    let quota = accounts
        .storage_quota(user)
        .map_err(|e| (sysexits::TEMPFAIL, format!("4.3.0 {e}")))?;
    if quota.is_some_and(|q| q.exceeded_by(prepared.vsize())) {
        return Err(over_quota(user));
    }
    let (d, _) = store
        .deliver_file(mailbox, &prepared, &opts)
        .map_err(|e| failure(&e))?;
    drop(incoming);
    accounts.quota_warning(user, quota, prepared.vsize());
    Ok(d.uid.get())
}
