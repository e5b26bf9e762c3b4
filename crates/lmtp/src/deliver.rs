//! One mail transaction: recipients, the message file being written, and the delivery
//! to every recipient. Every function here blocks (file system, LMDB): the connection
//! task calls them through `spawn_blocking`.

use std::io::Write;

use maildex_accounts::{Accounts, LogName, Recipient, RecipientError};
use maildex_lmtp_proto::{RcptOutcome, RcptResult, Status};
use maildex_store::{DeliverOptions, IncomingMessage, LinkOrCopy, PreparedMessage, StoreError};

/// Message bytes gathered before one write on the blocking pool.
pub(crate) const WRITE_BATCH: usize = 64 * 1024;

/// An accepted RCPT: the address as given and where it delivers (aliases expanded).
#[derive(Debug, Clone)]
pub(crate) struct Rcpt {
    pub address: String,
    pub targets: Vec<Recipient>,
}

/// The message data of a transaction.
#[derive(Debug, Default)]
pub(crate) enum Body {
    /// DATA/BDAT not started.
    #[default]
    None,
    /// Being received: the file, and bytes not yet written to it. The file in `tmp/` is
    /// only created when [`WRITE_BATCH`] bytes have gathered or the data ends, so a
    /// message smaller than that (most mail) is created, written, synced and delivered
    /// in one trip to the blocking pool. `tmp` is also None while a write runs there.
    Writing {
        tmp: Option<IncomingMessage>,
        buf: Vec<u8>,
    },
    /// Writing failed: every recipient gets this status; further data is dropped.
    Failed(Failure),
}

/// A failure: the status the client gets and its real cause, for the log.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub status: Status,
    pub cause: String,
}

impl Failure {
    pub(crate) fn new(status: Status, cause: impl Into<String>) -> Failure {
        Failure {
            status,
            cause: cause.into(),
        }
    }

    pub(crate) fn internal() -> Failure {
        Failure::new(Status::temporary("Internal error"), "internal error")
    }

    /// A store error: its text names the file (and, for a permission error, who lacks
    /// what: `maildex_maildir::explain_denied`).
    fn store(e: &StoreError) -> Failure {
        Failure::new(failure_status(e), e.to_string())
    }

    fn accounts(e: &maildex_accounts::AccountsError) -> Failure {
        Failure::new(accounts_status(e), e.to_string())
    }
}

/// What the end of the data did: one outcome per accepted RCPT (for the replies) and
/// one result text per accepted RCPT (for the log), and the message's Message-ID.
pub(crate) struct Finished {
    pub outcomes: Vec<RcptOutcome>,
    pub results: Vec<String>,
    pub message_id: Option<String>,
}

impl Finished {
    /// Every recipient failed the same way before any delivery.
    pub(crate) fn failed(rcpts: &[Rcpt], f: &Failure) -> Finished {
        Finished {
            outcomes: vec![RcptOutcome::Failed(f.status.clone()); rcpts.len()],
            results: rcpts.iter().map(|r| failed_text(&r.address, f)).collect(),
            message_id: None,
        }
    }
}

/// A recipient's result in the message log line.
fn failed_text(address: &str, f: &Failure) -> String {
    let s = &f.status;
    let address = LogName::new(address);
    format!("<{address}> failed {} {}: {}", s.code, s.enhanced, f.cause)
}

/// A recipient refused at RCPT, in the message log line.
pub(crate) fn rejected_text(address: &str, s: &Status) -> String {
    let address = LogName::new(address);
    format!("<{address}> rejected at RCPT {} {}", s.code, s.enhanced)
}

/// A transaction, from MAIL to the end of the data.
#[derive(Debug, Default)]
pub(crate) struct Txn {
    /// Envelope sender, without brackets; empty for the null path `<>`.
    pub reverse_path: String,
    /// SIZE= from MAIL (RFC 1870), for the quota check at RCPT.
    pub declared_size: Option<u64>,
    /// Accepted recipients, in RCPT order (as the session's `accepted_recipients`).
    pub rcpts: Vec<Rcpt>,
    /// Recipients refused at RCPT, as [`rejected_text`] (for the message's log line).
    pub rejected: Vec<String>,
    pub body: Body,
}

/// The status for a store failure: a full disk is `452 4.3.1`, anything else
/// `451 4.3.0` (RFC 3463 §3.4); the client keeps the message and retries.
pub(crate) fn failure_status(e: &StoreError) -> Status {
    if e.is_no_space() {
        Status::disk_full()
    } else {
        Status::temporary("Temporary local failure, try again later")
    }
}

fn accounts_status(e: &maildex_accounts::AccountsError) -> Status {
    if e.is_no_space() {
        Status::disk_full()
    } else {
        Status::temporary("Temporary local failure, try again later")
    }
}

/// Decides on one RCPT (RFC 2033 §4.2): unknown `550 5.1.1`; every target over quota
/// (counting the SIZE= the client declared) `552 5.2.2`; over-quota targets of an
/// alias are dropped while others remain.
pub(crate) fn check_rcpt(
    accounts: &Accounts,
    address: &str,
    declared_size: Option<u64>,
) -> (RcptResult, Option<Rcpt>) {
    decide_rcpt(
        accounts,
        address,
        declared_size,
        accounts.resolve_recipient(address),
    )
}

/// [`check_rcpt`] when it needs no file system, so the connection task answers without a
/// blocking-pool hop: the address resolves in memory (no detail folder to look up) and no
/// target has a quota (a quota check reads the user's index). None otherwise.
pub(crate) fn check_rcpt_in_memory(
    accounts: &Accounts,
    address: &str,
    declared_size: Option<u64>,
) -> Option<(RcptResult, Option<Rcpt>)> {
    let resolved = accounts.resolve_recipient_in_memory(address)?;
    if let Ok(targets) = &resolved {
        if targets.iter().any(|t| t.user.quota.is_some()) {
            return None;
        }
    }
    Some(decide_rcpt(accounts, address, declared_size, resolved))
}

fn decide_rcpt(
    accounts: &Accounts,
    address: &str,
    declared_size: Option<u64>,
    resolved: Result<Vec<Recipient>, RecipientError>,
) -> (RcptResult, Option<Rcpt>) {
    let targets = match resolved {
        Ok(t) => t,
        Err(RecipientError::Unknown(_)) => {
            return (RcptResult::Rejected(Status::unknown_user()), None)
        }
        Err(RecipientError::Temporary { reason, .. }) => {
            // the address is the client's: escaped and cut (issue 15 #32)
            tracing::warn!(rcpt = %LogName::new(address), error = %LogName::new(&reason), "recipient lookup failed");
            return (
                RcptResult::Rejected(Status::temporary("Temporary lookup failure")),
                None,
            );
        }
    };
    let mut kept = Vec::with_capacity(targets.len());
    let mut temp_failure = None;
    for t in targets {
        match accounts.over_quota(&t.user, declared_size.unwrap_or(0)) {
            Ok(false) => kept.push(t),
            Ok(true) => {
                tracing::info!(user = %t.user.name, "recipient over quota at RCPT");
            }
            Err(e) => {
                tracing::error!(user = %t.user.name, error = %e, "quota check failed");
                temp_failure = Some(accounts_status(&e));
            }
        }
    }
    if kept.is_empty() {
        let status = temp_failure.unwrap_or_else(Status::over_quota);
        return (RcptResult::Rejected(status), None);
    }
    let rcpt = Rcpt {
        address: address.to_owned(),
        targets: kept,
    };
    (RcptResult::Accepted, Some(rcpt))
}

/// Opens the message file in `tmp/` of the first target that can take it.
pub(crate) fn start(accounts: &Accounts, rcpts: &[Rcpt]) -> Result<IncomingMessage, Failure> {
    let mut last = Failure::new(
        Status::temporary("No recipient can take the message"),
        "no recipient",
    );
    for t in rcpts.iter().flat_map(|r| &r.targets) {
        let opened = accounts
            .store(&t.user)
            .map_err(|e| Failure::accounts(&e))
            .and_then(|s| s.incoming(&t.mailbox).map_err(|e| Failure::store(&e)));
        match opened {
            Ok(tmp) => return Ok(tmp),
            Err(f) => {
                tracing::warn!(user = %t.user.name, mailbox = %t.mailbox, error = %f.cause, "cannot start a message file here");
                last = f;
            }
        }
    }
    Err(last)
}

fn io_failure(e: &std::io::Error, tmp: &IncomingMessage) -> Failure {
    let cause = format!("writing {}: {e}", tmp.path().display());
    tracing::error!(error = %cause, "writing the message failed");
    if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) {
        Failure::new(Status::disk_full(), cause)
    } else {
        Failure::new(
            Status::temporary("Temporary local failure, try again later"),
            cause,
        )
    }
}

/// Appends `buf` to the file, creating it first when `tmp` is None.
pub(crate) fn write(
    accounts: &Accounts,
    rcpts: &[Rcpt],
    tmp: Option<IncomingMessage>,
    buf: &[u8],
) -> Result<IncomingMessage, Failure> {
    let mut tmp = match tmp {
        Some(t) => t,
        None => start(accounts, rcpts)?,
    };
    match tmp.write_all(buf) {
        Ok(()) => Ok(tmp),
        Err(e) => Err(io_failure(&e, &tmp)),
    }
}

/// Ends the data: writes the rest (creating the file when `tmp` is None: then `buf` is
/// the whole message, which is summarized from memory instead of read back), fsyncs and
/// summarizes once, delivers to every recipient (in order), and returns one outcome per
/// accepted RCPT ([`Finished`]). The `tmp/` file is removed when this returns (the deliveries are links
/// or copies of it).
pub(crate) fn finish(
    accounts: &Accounts,
    tmp: Option<IncomingMessage>,
    buf: &[u8],
    rcpts: &[Rcpt],
) -> Finished {
    let whole = tmp.is_none().then_some(buf);
    let mut tmp = match write(accounts, rcpts, tmp, buf) {
        Ok(t) => t,
        Err(f) => return Finished::failed(rcpts, &f),
    };
    let prepared = tmp.prepare(None, whole).map_err(|e| {
        tracing::error!(file = %tmp.path().display(), error = %e, "preparing the message failed");
        Failure::store(&e)
    });
    let prepared = match prepared {
        Ok(p) => p,
        Err(f) => return Finished::failed(rcpts, &f),
    };
    let (outcomes, results) = for_each_parallel(rcpts, |r| deliver_rcpt(accounts, &prepared, r))
        .into_iter()
        .unzip();
    drop(tmp);
    Finished {
        outcomes,
        results,
        message_id: prepared.message_id(),
    }
}

/// Most recipients of one transaction delivered at once.
const RCPT_WORKERS: usize = 8;

/// `f` over `items` on up to [`RCPT_WORKERS`] threads, results in item order. Each
/// recipient's delivery is mostly waiting for fsync (message file, folder, index
/// commit) in a Maildir and an index of its own, so a message to 16 users is acknowledged
/// (and seen by their IDLE sessions) in about the time of the slowest one instead of
/// the sum of all. Recipients of one user share the store's locks and commits as
/// concurrent deliveries always do.
fn for_each_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if items.len() <= 1 {
        return items.iter().map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..items.len().min(RCPT_WORKERS))
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break out };
                        out.push((i, f(item)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| match w.join() {
                Ok(out) => out,
                // a delivery panicked: let the connection task see it as it would inline
                Err(p) => std::panic::resume_unwind(p),
            })
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// Delivers to the targets of one RCPT. Several targets (an alias): a temporary
/// failure of any wins (the client retries; targets already served may get the
/// message again, which beats losing it), else delivered if any was. With the result
/// text for the log line.
fn deliver_rcpt(accounts: &Accounts, msg: &PreparedMessage, rcpt: &Rcpt) -> (RcptOutcome, String) {
    let mut delivered = Vec::new();
    let mut temporary = None;
    let mut permanent = None;
    for t in &rcpt.targets {
        match deliver_target(accounts, msg, t) {
            Ok(place) => delivered.push(place),
            Err(f) if f.status.code >= 500 => permanent = Some(f),
            Err(f) => temporary = Some(f),
        }
    }
    match (temporary, permanent) {
        (Some(f), _) => {
            if !delivered.is_empty() {
                tracing::warn!(rcpt = %LogName::new(&rcpt.address), delivered = delivered.len(), "alias partly delivered; a retry will repeat those deliveries");
            }
            let text = failed_text(&rcpt.address, &f);
            (RcptOutcome::Failed(f.status), text)
        }
        (None, Some(f)) if delivered.is_empty() => {
            let text = failed_text(&rcpt.address, &f);
            (RcptOutcome::Failed(f.status), text)
        }
        _ => {
            let address = LogName::new(&rcpt.address);
            let text = format!("<{address}> delivered {}", delivered.join(" "));
            (RcptOutcome::Delivered, text)
        }
    }
}

/// Delivers to one target; Ok names where: `user/mailbox uid=N`.
fn deliver_target(
    accounts: &Accounts,
    msg: &PreparedMessage,
    t: &Recipient,
) -> Result<String, Failure> {
    let user = &t.user.name;
    let quota = match accounts.storage_quota(&t.user) {
        Ok(q) => q,
        Err(e) => {
            tracing::error!(user = %user, error = %e, "quota check failed");
            return Err(Failure::accounts(&e));
        }
    };
    if quota.is_some_and(|q| q.exceeded_by(msg.vsize())) {
        let cause = format!("{user} over quota with {} bytes more", msg.vsize());
        return Err(Failure::new(Status::over_quota(), cause));
    }
    let store = accounts.store(&t.user).map_err(|e| {
        tracing::error!(user = %user, error = %e, "cannot open the user's mail");
        Failure::accounts(&e)
    })?;
    let opts = DeliverOptions::default();
    let mut mailbox = t.mailbox.as_str();
    let mut result = store.deliver_file(mailbox, msg, &opts);
    if matches!(result, Err(StoreError::NoMailbox(_))) && mailbox != "INBOX" {
        // the detail folder went away since RCPT: INBOX, as without the folder
        mailbox = "INBOX";
        result = store.deliver_file(mailbox, msg, &opts);
    }
    match result {
        Ok((d, how)) => {
            tracing::debug!(user = %user, mailbox, uid = d.uid.get(), size = d.size, linked = how == LinkOrCopy::Linked, "delivered");
            accounts.quota_warning(&t.user, quota, msg.vsize());
            Ok(format!("{user}/{mailbox} uid={}", d.uid))
        }
        Err(e) => {
            tracing::error!(user = %user, mailbox, error = %e, "delivery failed");
            Err(Failure::store(&e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::for_each_parallel;
    use std::time::Duration;

    #[test]
    fn parallel_results_come_back_in_recipient_order() {
        // later items finish first, so any ordering by completion would show
        let items: Vec<u64> = (0..40).collect();
        let out = for_each_parallel(&items, |i| {
            std::thread::sleep(Duration::from_millis(40 - i));
            i * 10
        });
        assert_eq!(out, items.iter().map(|i| i * 10).collect::<Vec<_>>());
        assert_eq!(for_each_parallel(&[7u64], |i| i + 1), vec![8]);
        assert!(for_each_parallel(&[] as &[u64], |i| *i).is_empty());
    }
}
