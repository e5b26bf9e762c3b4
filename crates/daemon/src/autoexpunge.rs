//! The background autoexpunge (`[mailboxes.NAME] autoexpunge`): a tokio task that, at an
//! interval, hands the stores open now (users logged in or delivered to within the last
//! minute: Dovecot too runs autoexpunge for the users it serves, at session end) to a
//! blocking thread, which expunges what has expired through the store's expunge path
//! ([`maildex_store::UserStore::autoexpunge`]). Sessions never wait for it: it holds a
//! mailbox only while removing a batch, as an EXPUNGE does.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use maildex_accounts::Accounts;
use maildex_config::MailboxConfig;
use tokio_util::sync::CancellationToken;

/// At most this many messages per user per run; the rest go in the next runs.
pub const BUDGET: usize = 1000;

/// How often the task runs: half the shortest autoexpunge age, between a second and an
/// hour (a message is expunged at most that much after it expired). `None` when no
/// folder has an age.
pub fn interval(mailboxes: &[MailboxConfig]) -> Option<Duration> {
    let shortest = mailboxes.iter().filter_map(|m| m.autoexpunge).min()?;
    Some((shortest / 2).clamp(Duration::from_secs(1), Duration::from_secs(3600)))
}

/// Runs every `every` until `shutdown`.
pub async fn run(accounts: Arc<Accounts>, every: Duration, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let stores = accounts.open_stores();
        if stores.is_empty() {
            continue;
        }
        let pass = tokio::task::spawn_blocking(move || {
            let now = SystemTime::now();
            for store in stores {
                match store.autoexpunge(now, BUDGET) {
                    Ok(gone) => {
                        for (mailbox, uids) in gone {
                            tracing::info!(maildir = %store.root().display(), mailbox, count = uids.len(), "autoexpunged");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(maildir = %store.root().display(), error = %e, "autoexpunge failed")
                    }
                }
            }
        });
        if let Err(e) = pass.await {
            tracing::error!(error = %e, "autoexpunge pass panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_is_half_the_shortest_age_within_bounds() {
        let mut m = maildex_config::default_mailboxes();
        assert_eq!(interval(&m), None);
        m[2].autoexpunge = Some(Duration::from_secs(30 * 86400));
        assert_eq!(interval(&m), Some(Duration::from_secs(3600)));
        m[3].autoexpunge = Some(Duration::from_secs(600));
        assert_eq!(interval(&m), Some(Duration::from_secs(300)));
        m[3].autoexpunge = Some(Duration::from_secs(1));
        assert_eq!(interval(&m), Some(Duration::from_secs(1)));
    }
}
