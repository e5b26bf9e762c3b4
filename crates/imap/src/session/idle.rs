//! IDLE (RFC 2177): the session waits for DONE while index commits (deliveries, other
//! sessions' changes) wake it to send EXISTS/EXPUNGE/FETCH at once. Changes by other
//! processes (`maildex deliver`, other Maildir tools) commit nothing in this process: inotify
//! on the folder's `new/` and `cur/` ([`maildex_store::DirWatcher`]) wakes the session for those, and a
//! periodic sync (two `stat`s when nothing changed) is the fallback, which also completes
//! removals (the store removes a message only once its folder has been quiet).
//! An idle session holds no read transaction, no loaded mailbox and no file.

use std::time::Duration;

use maildex_imap_proto::Tag;
use tokio::io::AsyncReadExt;

use super::{CmdError, Done, Session, State};
use maildex_store::SyncFirst;

/// How often an idle session looks at its Maildir for changes made by other processes.
const POLL: Duration = Duration::from_secs(5);

/// How long after an inotify event the session syncs with the folder. A burst of changes
/// (a tool moving many files) becomes one sync; and a delivery by this process, which
/// renames its file into `new/` just before its index commit, is shown by the commit's
/// wake-up without every woken session first queueing for the folder's sync.
const SETTLE: Duration = Duration::from_millis(50);

enum Event {
    Read(std::io::Result<usize>),
    /// An index commit of this process.
    Committed,
    /// inotify: something in the folder changed.
    Changed,
    /// [`SETTLE`] has passed since `Changed`.
    Settled,
    Tick,
    Shutdown,
}

impl Session {
    pub(super) async fn idle(&mut self, _tag: &Tag) -> Result<Done, CmdError> {
        self.refresh(true).await?;
        maildex_imap_proto::encode::continuation(&mut self.out, "idling");
        self.flush().await?;
        let deadline = tokio::time::Instant::now() + self.shared.settings.idle_timeout;
        // other processes' changes to the selected folder (inotify), besides our commits
        let mut folder = match &self.state {
            State::Selected(a, s) => self.shared.watcher.watch_mailbox(&a.store, &s.mailbox),
            _ => None,
        };
        // when an inotify event asked for a sync
        let mut sync_at: Option<tokio::time::Instant> = None;
        loop {
            if let Some(line) = self.rx.next_line() {
                let line = line.map_err(|_| CmdError::Bye("Line too long.".into()))?;
                if maildex_imap_proto::is_done(&line) {
                    break;
                }
                // RFC 2177 §3: anything else ends IDLE as a bad command
                return Err(CmdError::Bad("Expected DONE.".into()));
            }
            let changes = match &mut self.state {
                State::Selected(_, s) => Some(&mut s.changes),
                _ => None,
            };
            let event = tokio::select! {
                r = self.stream.read(&mut self.read_buf) => Event::Read(r),
                _ = async {
                    match changes {
                        Some(c) => { if c.changed().await.is_err() { std::future::pending::<()>().await } }
                        None => std::future::pending::<()>().await,
                    }
                } => Event::Committed,
                _ = async {
                    match folder.as_mut() {
                        Some(f) => f.changed().await,
                        None => std::future::pending::<()>().await,
                    }
                } => Event::Changed,
                _ = async {
                    match sync_at {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending::<()>().await,
                    }
                } => Event::Settled,
                _ = tokio::time::sleep(POLL) => Event::Tick,
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(CmdError::Bye("Autologout; idle for too long".into()));
                }
                _ = self.shared.shutdown.cancelled() => Event::Shutdown,
            };
            match event {
                Event::Read(Ok(0)) => {
                    return Err(CmdError::Io(std::io::ErrorKind::UnexpectedEof.into()))
                }
                Event::Read(Ok(n)) => self.rx.feed(&self.read_buf[..n]),
                Event::Read(Err(e)) => return Err(CmdError::Io(e)),
                // A commit is in the index already: no Maildir sync, so the sessions woken
                // by a delivery only read (hundreds of them each syncing the folder queued
                // behind one another for the mailbox).
                Event::Committed => {
                    self.refresh_from(SyncFirst::Never, true).await?;
                    self.flush().await?;
                }
                Event::Changed => {
                    sync_at.get_or_insert_with(|| tokio::time::Instant::now() + SETTLE);
                }
                Event::Settled | Event::Tick => {
                    sync_at = None;
                    self.refresh(true).await?;
                    self.flush().await?;
                }
                Event::Shutdown => return Err(CmdError::Bye("Server shutting down.".into())),
            }
        }
        self.refresh(true).await?;
        Ok(Done::ok("Idle completed."))
    }
}
