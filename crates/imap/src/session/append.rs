//! APPEND and MULTIAPPEND (RFC 3501 §6.3.11, RFC 3502, UIDPLUS APPENDUID RFC 4315 §3,
//! APPENDLIMIT RFC 7889). The message literal is never held whole: its chunks go through
//! a small channel to a blocking thread running the store's delivery path, which streams
//! them into `tmp/` (the same path LMTP uses).

use std::io::Read;
use std::sync::Arc;

use maildex_imap_proto::{encode, Flag, Input, Mailbox, ResponseCode, Tag};
use maildex_store::Flags;
use maildex_store::{DeliverOptions, FlagOp, Uid, UserStore};
use tokio::sync::mpsc;

use super::mailbox::imap_name;
use super::{blocking, CmdError, Session};

/// Feeds literal chunks from the session to the delivery thread.
struct ChannelReader {
    rx: mpsc::Receiver<Result<Vec<u8>, ()>>,
    chunk: Vec<u8>,
    pos: usize,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.pos == self.chunk.len() {
            match self.rx.blocking_recv() {
                Some(Ok(c)) => {
                    self.chunk = c;
                    self.pos = 0;
                }
                Some(Err(())) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "APPEND aborted",
                    ))
                }
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.pos);
        buf[..n].copy_from_slice(&self.chunk[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Splits APPEND flags into system flags and keyword names.
pub(crate) fn split_flags(flags: &[Flag]) -> (Flags, Vec<String>) {
    let mut sys = Flags::EMPTY;
    let mut kw = Vec::new();
    for f in flags {
        match f {
            Flag::Seen => sys.insert(Flags::SEEN),
            Flag::Answered => sys.insert(Flags::ANSWERED),
            Flag::Flagged => sys.insert(Flags::FLAGGED),
            Flag::Deleted => sys.insert(Flags::DELETED),
            Flag::Draft => sys.insert(Flags::DRAFT),
            Flag::Keyword(k) => {
                if !kw.iter().any(|x: &String| x.eq_ignore_ascii_case(k)) {
                    kw.push(k.clone());
                }
            }
        }
    }
    (sys, kw)
}

/// Removes messages appended by a MULTIAPPEND that then failed (RFC 3502 §6.3.11: all or
/// none).
fn roll_back(store: &UserStore, name: &str, uids: &[Uid]) {
    if uids.is_empty() {
        return;
    }
    let r = store
        .set_flags(name, uids, FlagOp::Add, Flags::DELETED, &[], None)
        .and_then(|_| store.expunge(name, Some(uids)));
    if let Err(e) = r {
        tracing::error!(mailbox = name, error = %e, "could not roll back a failed MULTIAPPEND");
    }
}

impl Session {
    /// The next input, reading from the socket as needed.
    async fn next_input(&mut self) -> Result<Input, CmdError> {
        loop {
            if let Some(i) = self.rx.next() {
                return Ok(i);
            }
            self.flush().await?;
            let n = self.read_some().await?;
            self.rx.feed(&self.read_buf[..n]);
        }
    }

    /// Refuses the APPEND under way with `tag NO/BAD` and lets the receiver skip the rest.
    fn refuse_append(&mut self, tag: &Tag, e: CmdError) -> Result<(), CmdError> {
        self.rx.reject_append();
        match e {
            CmdError::Bad(t) => self.tagged(tag, encode::Status::Bad, None, &t),
            CmdError::No(code, t) => self.tagged(tag, encode::Status::No, code.as_ref(), &t),
            CmdError::Server(t) => {
                tracing::error!(error = %t, "APPEND failed");
                self.tagged(
                    tag,
                    encode::Status::No,
                    Some(&ResponseCode::ServerBug),
                    "Internal error occurred. Refer to server log for more information.",
                );
            }
            other => return Err(other),
        }
        Ok(())
    }

    pub(super) async fn append(&mut self, tag: Tag, mailbox: Mailbox) -> Result<(), CmdError> {
        let Some(authed) = self.state.authed() else {
            return self.refuse_append(
                &tag,
                CmdError::Bad("APPEND not allowed now: not logged in".into()),
            );
        };
        let (store, user) = (Arc::clone(&authed.store), authed.user.clone());
        let name = match imap_name(&mailbox) {
            Ok(n) => n,
            Err(e) => return self.refuse_append(&tag, e),
        };
        let (s, n) = (Arc::clone(&store), name.clone());
        let exists = blocking(move || s.mailbox_exists(&n).unwrap_or(false)).await?;
        if !exists {
            // RFC 3501 §6.3.11: TRYCREATE when the mailbox does not exist
            return self.refuse_append(
                &tag,
                CmdError::no(ResponseCode::TryCreate, "Mailbox doesn't exist."),
            );
        }
        let mut appended: Vec<Uid> = Vec::new();
        let mut uidvalidity = 0;
        let fail = |this: &mut Session, appended: &[Uid], e: CmdError| {
            let (s, n, a) = (Arc::clone(&store), name.clone(), appended.to_vec());
            // roll back in the background; the client gets its answer now
            tokio::task::spawn_blocking(move || roll_back(&s, &n, &a));
            this.refuse_append(&tag, e)
        };
        loop {
            match self.next_input().await? {
                Input::AppendMessage(m) => {
                    if m.len == 0 {
                        return fail(
                            self,
                            &appended,
                            CmdError::No(None, "Can't save a zero byte message.".into()),
                        );
                    }
                    let accounts = Arc::clone(&self.shared.accounts);
                    let (u, len) = (user.clone(), m.len);
                    match blocking(move || accounts.over_quota(&u, len)).await? {
                        Ok(false) => {}
                        Ok(true) => {
                            return fail(
                                self,
                                &appended,
                                CmdError::no(
                                    ResponseCode::OverQuota,
                                    "Quota exceeded (mailbox for user is full)",
                                ),
                            );
                        }
                        Err(e) => return fail(self, &appended, CmdError::server(e)),
                    }
                    let (sys, keywords) = split_flags(&m.flags);
                    let opts = DeliverOptions {
                        flags: sys,
                        keywords,
                        internal_date: m.date.map(|d| {
                            let secs = d.unix_seconds();
                            if secs >= 0 {
                                std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64)
                            } else {
                                std::time::UNIX_EPOCH
                            }
                        }),
                    };
                    let (tx, rx) = mpsc::channel::<Result<Vec<u8>, ()>>(4);
                    let (s, n) = (Arc::clone(&store), name.clone());
                    let job = tokio::task::spawn_blocking(move || {
                        let mut reader = ChannelReader {
                            rx,
                            chunk: Vec::new(),
                            pos: 0,
                        };
                        s.deliver(&n, &mut reader, &opts)
                    });
                    let mut left = m.len;
                    let mut sink_ok = true;
                    while left > 0 {
                        match self.next_input().await {
                            Ok(Input::Continue) => {
                                encode::continuation(&mut self.out, "OK");
                                self.flush().await?;
                            }
                            Ok(Input::AppendData(d)) => {
                                left = left.saturating_sub(d.len() as u64);
                                if sink_ok && tx.send(Ok(d)).await.is_err() {
                                    sink_ok = false; // delivery failed early; keep reading
                                }
                            }
                            Ok(other) => {
                                let _ = tx.send(Err(())).await;
                                drop(tx);
                                let _ = job.await;
                                return self
                                    .append_interrupted(&tag, &appended, other, &store, &name)
                                    .await;
                            }
                            Err(e) => {
                                let _ = tx.send(Err(())).await;
                                drop(tx);
                                let _ = job.await;
                                let (s, n, a) =
                                    (Arc::clone(&store), name.clone(), appended.clone());
                                tokio::task::spawn_blocking(move || roll_back(&s, &n, &a));
                                return Err(e);
                            }
                        }
                    }
                    drop(tx);
                    let delivered = job
                        .await
                        .map_err(|e| CmdError::server(format!("delivery task: {e}")))?;
                    match delivered {
                        Ok(d) => {
                            appended.push(d.uid);
                            uidvalidity = d.uidvalidity;
                        }
                        Err(e) => {
                            let err = if e.is_no_space() {
                                tracing::error!(error = %e, "APPEND: disk full");
                                CmdError::no(ResponseCode::OverQuota, "Not enough disk space.")
                            } else {
                                CmdError::from(e)
                            };
                            return fail(self, &appended, err);
                        }
                    }
                }
                Input::Continue => {
                    encode::continuation(&mut self.out, "OK");
                    self.flush().await?;
                }
                Input::AppendData(_) => {}
                Input::AppendEnd => break,
                other => {
                    return self
                        .append_interrupted(&tag, &appended, other, &store, &name)
                        .await
                }
            }
        }
        self.refresh_fast(true).await?;
        let uids = super::untagged::uid_set(appended.iter().map(|u| u.get()));
        let code = ResponseCode::AppendUid { uidvalidity, uids };
        self.tagged(&tag, encode::Status::Ok, Some(&code), "Append completed.");
        Ok(())
    }

    /// The receiver ended an APPEND with something else (a BAD/NO for it, or a fatal
    /// error): roll back what was appended and pass the input on.
    async fn append_interrupted(
        &mut self,
        tag: &Tag,
        appended: &[Uid],
        input: Input,
        store: &Arc<UserStore>,
        name: &str,
    ) -> Result<(), CmdError> {
        let (s, n, a) = (Arc::clone(store), name.to_string(), appended.to_vec());
        tokio::task::spawn_blocking(move || roll_back(&s, &n, &a));
        match input {
            Input::Bad { tag: t, code, text } => {
                encode::status_line(
                    &mut self.out,
                    t.as_ref().or(Some(tag)),
                    encode::Status::Bad,
                    code.as_ref(),
                    &text,
                );
                Ok(())
            }
            Input::No { tag: t, code, text } => {
                encode::status_line(
                    &mut self.out,
                    Some(&t),
                    encode::Status::No,
                    code.as_ref(),
                    &text,
                );
                Ok(())
            }
            Input::Fatal { text } => Err(CmdError::Bye(text)),
            other => {
                tracing::error!(input = ?other, "unexpected input inside APPEND");
                Err(CmdError::Bye("Internal error in APPEND".into()))
            }
        }
    }
}
