//! One connection: reads bytes into the sans-IO session, acts on its events, writes
//! its replies. Replies are gathered and written once the session needs more input
//! (RFC 2920 §3.2 allows batching), and always before a slow step (a delivery).

use std::sync::Arc;

use maildex_lmtp_proto::{Event, ProtoError, RcptOutcome, Session};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::deliver::{self, Body, Failure, Finished, Txn, WRITE_BATCH};
use crate::Shared;

/// A client stream (TCP or unix).
pub(crate) trait AsyncStream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> AsyncStream for T {}

const READ_SIZE: usize = 64 * 1024;

/// Why event handling stopped early.
enum Stop {
    /// The session ended with a protocol error (its reply is queued).
    Proto(ProtoError),
    /// Writing to the client failed.
    Io(std::io::Error),
}

impl From<ProtoError> for Stop {
    fn from(e: ProtoError) -> Self {
        Stop::Proto(e)
    }
}

/// Why a connection ends.
enum End {
    /// QUIT answered, or the client closed.
    Done,
    /// The socket failed.
    Io(std::io::Error),
}

/// Who is connected: the session id (logs, `Received:`) and the client's IP.
pub(crate) struct Client {
    pub id: String,
    pub peer_ip: Option<std::net::IpAddr>,
}

struct Conn {
    stream: crate::listen::Stream,
    client: Client,
    /// Transactions begun in this session (MAIL commands), for `Received:` ids.
    transactions: u32,
    session: Session,
    shared: Arc<Shared>,
    out: Vec<u8>,
    txn: Option<Txn>,
    quit: bool,
}

/// Serves one connection to its end.
pub(crate) async fn serve(
    stream: crate::listen::Stream,
    client: Client,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) {
    let session = Session::new(shared.limits.proto.clone());
    let mut c = Conn {
        stream,
        client,
        transactions: 0,
        session,
        shared,
        out: Vec::new(),
        txn: None,
        quit: false,
    };
    tracing::debug!("LMTP connection");
    match c.run(shutdown).await {
        Ok(End::Done) => tracing::debug!("LMTP connection closed"),
        Ok(End::Io(e)) | Err(e) => tracing::debug!(error = %e, "LMTP connection ended"),
    }
    if c.txn
        .as_ref()
        .is_some_and(|t| !matches!(t.body, Body::None))
    {
        tracing::info!("connection ended inside a transaction; its data is discarded");
    }
    // dropping the transaction removes any tmp/ file (IncomingMessage's Drop); off the reactor
    if let Some(t) = c.txn.take() {
        log_refused(&t);
        let _ = tokio::task::spawn_blocking(move || drop(t)).await;
    }
}

impl Conn {
    async fn run(&mut self, shutdown: CancellationToken) -> std::io::Result<End> {
        let mut buf = vec![0u8; READ_SIZE];
        let mut deadline: Option<Instant> = None;
        loop {
            match self.drain().await {
                Ok(()) => {}
                Err(Stop::Proto(e)) => {
                    self.flush().await?;
                    tracing::info!(error = %e, "closing LMTP session");
                    return Ok(End::Done);
                }
                Err(Stop::Io(e)) => return Ok(End::Io(e)),
            }
            self.flush().await?;
            if self.quit {
                return Ok(End::Done);
            }
            let in_data = self.session.in_transaction()
                && self
                    .txn
                    .as_ref()
                    .is_some_and(|t| !matches!(t.body, Body::None));
            let limits = &self.shared.limits;
            let idle = if in_data {
                limits.data_timeout
            } else {
                limits.command_timeout
            };
            if deadline.is_some() && !self.session.in_transaction() {
                // shutting down and the transaction is over
                return self.close_with(self.session.shutdown_reply()).await;
            }
            let wake = match deadline {
                Some(d) => d.min(Instant::now() + idle),
                None => Instant::now() + idle,
            };
            tokio::select! {
                r = self.stream.read(&mut buf) => match r {
                    Ok(0) => return Ok(End::Done),
                    Ok(n) => self.session.feed(&buf[..n]),
                    Err(e) => return Ok(End::Io(e)),
                },
                _ = shutdown.cancelled(), if deadline.is_none() => {
                    if !self.session.in_transaction() {
                        return self.close_with(self.session.shutdown_reply()).await;
                    }
                    deadline = Some(Instant::now() + self.shared.limits.shutdown_timeout);
                }
                _ = tokio::time::sleep_until(wake) => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        tracing::info!("shutdown deadline reached inside a transaction");
                        return self.close_with(self.session.shutdown_reply()).await;
                    }
                    tracing::info!(in_data, "LMTP client timed out");
                    return self.close_with(self.session.timeout_reply()).await;
                }
            }
        }
    }

    async fn close_with(&mut self, reply: Vec<u8>) -> std::io::Result<End> {
        self.out.extend_from_slice(&reply);
        self.flush().await?;
        let timeout = self.shared.limits.write_timeout;
        let _ = tokio::time::timeout(timeout, self.stream.shutdown()).await;
        Ok(End::Done)
    }

    /// Writes the queued replies. A client that takes none of them for `write_timeout`
    /// (it pipelines commands and never reads) is cut off: the replies queued for it
    /// are bounded by what one read of its input produces.
    async fn flush(&mut self) -> std::io::Result<()> {
        if !self.out.is_empty() {
            let timeout = self.shared.limits.write_timeout;
            maildex_net::write_all_within(&mut self.stream, &self.out, timeout, None)
                .await
                .inspect_err(|e| {
                    if e.kind() == std::io::ErrorKind::TimedOut {
                        tracing::info!(error = %e, "closing LMTP connection");
                    }
                })?;
            self.out.clear();
        }
        Ok(())
    }

    /// Handles every event the session has for the input so far.
    async fn drain(&mut self) -> Result<(), Stop> {
        while let Some(event) = self.session.next_event()? {
            match event {
                Event::Reply(bytes) => self.out.extend_from_slice(&bytes),
                Event::MailFrom(m) => {
                    self.transactions += 1;
                    self.txn = Some(Txn {
                        reverse_path: m.reverse_path.map(|a| a.to_string()).unwrap_or_default(),
                        declared_size: m.size,
                        ..Txn::default()
                    });
                }
                Event::RcptTo(addr) => {
                    let address = addr.to_string();
                    let declared = self.txn.as_ref().and_then(|t| t.declared_size);
                    let accounts = Arc::clone(&self.shared.accounts);
                    let checked = deliver::check_rcpt_in_memory(&accounts, &address, declared);
                    let (result, rcpt) = match checked {
                        Some(answer) => answer,
                        None => tokio::task::spawn_blocking(move || {
                            deliver::check_rcpt(&accounts, &address, declared)
                        })
                        .await
                        .unwrap_or_else(|e| {
                            tracing::error!(error = %e, "recipient check panicked");
                            (
                                maildex_lmtp_proto::RcptResult::Rejected(
                                    maildex_lmtp_proto::Status::temporary("Internal error"),
                                ),
                                None,
                            )
                        }),
                    };
                    if let Some(t) = self.txn.as_mut() {
                        match (&result, rcpt) {
                            (_, Some(r)) => t.rcpts.push(r),
                            (maildex_lmtp_proto::RcptResult::Rejected(s), None) => t
                                .rejected
                                .push(deliver::rejected_text(&addr.to_string(), s)),
                            _ => {}
                        }
                    }
                    self.session.rcpt_result(result)?;
                }
                Event::DataStart => self.data_start(),
                Event::Data(chunk) => self.data(chunk).await,
                Event::DataEnd(summary) => {
                    // the replies so far go out before the (slow) delivery
                    // (a client that is gone gets nothing delivered it cannot hear about)
                    self.flush().await.map_err(Stop::Io)?;
                    let outcomes = self.data_end(summary.long_lines).await;
                    self.session.data_results(outcomes)?;
                }
                Event::MessageTooBig => {
                    tracing::info!("message over the size limit; discarding it");
                    if let Some(t) = self.txn.as_mut() {
                        let body = std::mem::replace(
                            &mut t.body,
                            Body::Failed(Failure::new(
                                maildex_lmtp_proto::Status::too_big(),
                                "message over the size limit",
                            )),
                        );
                        tokio::task::spawn_blocking(move || drop(body));
                    }
                }
                Event::Reset => {
                    if let Some(t) = self.txn.take() {
                        log_refused(&t);
                        tokio::task::spawn_blocking(move || drop(t));
                    }
                }
                Event::Quit => self.quit = true,
            }
        }
        Ok(())
    }

    /// Starts the data with the trace headers; the file is created with the first write
    /// (see [`Body::Writing`]).
    fn data_start(&mut self) {
        let Some(t) = self.txn.as_mut() else {
            return;
        };
        // Dovecot writes Delivered-To only for a single recipient (lmtp_hdr_delivery_address)
        let single = (t.rcpts.len() == 1).then(|| t.rcpts[0].address.as_str());
        let mut buf = Vec::with_capacity(WRITE_BATCH);
        buf.extend_from_slice(&maildex_store::trace_headers(Some(&t.reverse_path), single));
        if self.shared.limits.add_received_header {
            // Dovecot's ids: the session's, with `:T<n>` from the second transaction on
            let id = match self.transactions {
                0 | 1 => self.client.id.clone(),
                n => format!("{}:T{n}", self.client.id),
            };
            let received = maildex_store::Received {
                helo: self.session.client_name().unwrap_or("unknown"),
                peer: self.client.peer_ip,
                by: &self.shared.limits.proto.hostname,
                with: "LMTP",
                id: &id,
                envelope_from: &t.reverse_path,
                recipient: single,
                when: std::time::SystemTime::now(),
            };
            buf.extend_from_slice(&maildex_store::received_header(&received));
        }
        t.body = Body::Writing { tmp: None, buf };
    }

    async fn data(&mut self, chunk: Vec<u8>) {
        let Some(t) = self.txn.as_mut() else {
            return;
        };
        let Body::Writing { tmp, buf } = &mut t.body else {
            return; // failed: the data is read and dropped
        };
        buf.extend_from_slice(&chunk);
        if buf.len() < WRITE_BATCH {
            return;
        }
        let (file, data) = (tmp.take(), std::mem::take(buf));
        let accounts = Arc::clone(&self.shared.accounts);
        // only the first write creates the file, which needs the recipients
        let rcpts = if file.is_none() {
            t.rcpts.clone()
        } else {
            Vec::new()
        };
        let written = tokio::task::spawn_blocking(move || {
            deliver::write(&accounts, &rcpts, file, &data).map(|f| (f, data))
        })
        .await
        .unwrap_or_else(|_| Err(Failure::internal()));
        match written {
            Ok((file, mut data)) => {
                data.clear();
                *tmp = Some(file);
                *buf = data;
            }
            Err(f) => t.body = Body::Failed(f),
        }
    }

    async fn data_end(&mut self, long_lines: u64) -> Vec<RcptOutcome> {
        let Some(mut t) = self.txn.take() else {
            return Vec::new();
        };
        if long_lines > 0 {
            tracing::debug!(long_lines, "message has lines over the length limit");
        }
        let rcpts = std::mem::take(&mut t.rcpts);
        let n = rcpts.len();
        let finished = match std::mem::take(&mut t.body) {
            Body::Writing { tmp, buf } => {
                let accounts = Arc::clone(&self.shared.accounts);
                tokio::task::spawn_blocking(move || deliver::finish(&accounts, tmp, &buf, &rcpts))
                    .await
                    .unwrap_or_else(|_| Finished {
                        outcomes: vec![RcptOutcome::Failed(Failure::internal().status); n],
                        results: vec!["delivery panicked".into()],
                        message_id: None,
                    })
            }
            Body::Failed(f) => Finished::failed(&rcpts, &f),
            Body::None => Finished::failed(&rcpts, &Failure::internal()),
        };
        log_message(&t, finished.message_id.as_deref(), &finished.results);
        finished.outcomes
    }
}

/// The message line of a transaction that ends without data (every recipient refused,
/// then RSET or QUIT): its refusals, without a Message-ID.
fn log_refused(t: &Txn) {
    if !t.rejected.is_empty() && matches!(t.body, Body::None) {
        log_message(t, None, &[]);
    }
}

/// One line per message an admin can grep (the span carries the session id): its
/// Message-ID, the sender and every recipient's result, refused ones included.
fn log_message(t: &Txn, message_id: Option<&str>, results: &[String]) {
    let results: Vec<&str> = results
        .iter()
        .chain(&t.rejected)
        .map(String::as_str)
        .collect();
    tracing::info!(
        message_id = %maildex_accounts::LogName::new(message_id.unwrap_or("")),
        from = %maildex_accounts::LogName::new(&t.reverse_path),
        results = %results.join(", "),
        "message"
    );
}
