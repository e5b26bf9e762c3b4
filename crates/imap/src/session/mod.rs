//! One IMAP connection: reads bytes, feeds the sans-IO receiver, runs each command in order
//! and writes the responses. State is an enum that carries its data ([`State`]); one place
//! ([`State::permits`]) decides what each state may do; the error type ([`CmdError`])
//! decides the response (RFC 3501 §7.1: syntax -> BAD, refusal -> NO [CODE], server fault
//! -> NO [SERVERBUG] plus an error log, I/O -> close).

mod append;
mod auth;
mod binary;
mod body;
mod condstore;
mod fetch;
mod idle;
mod mailbox;
mod messages;
mod quota;
mod render;
mod search_batches;
mod search_cmd;
mod selected;
mod sort_cmd;
mod subscriptions;
mod untagged;
mod update;

use std::net::SocketAddr;
use std::sync::Arc;

use maildex_accounts::User;
use maildex_imap_proto::encode::{self, Status};
use maildex_imap_proto::{Command, Input, Receiver, ResponseCode, Tag};
use maildex_store::{OpError, UserStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::context::Shared;
use crate::stream::Stream;
use selected::Selected;

/// Read buffer size (and the largest read fed to the receiver at once). Small: an idle
/// connection keeps it (the IDLE target is a few KiB per connection).
const READ_CHUNK: usize = 8 * 1024;
/// Output buffer capacity kept between commands (a big FETCH grows it; it shrinks back).
const OUT_KEEP: usize = 4 * 1024;
/// Output is written to the socket once this much is buffered.
const FLUSH_AT: usize = 64 * 1024;

/// A logged-in user and their store.
pub(crate) struct Authed {
    user: User,
    store: Arc<UserStore>,
}

/// The session state (RFC 3501 §3), each with its data.
pub(crate) enum State {
    /// Before LOGIN/AUTHENTICATE.
    NotAuthenticated,
    /// Logged in, no mailbox selected.
    Authenticated(Authed),
    /// Logged in, a mailbox selected.
    Selected(Authed, Box<Selected>),
    /// LOGOUT done or connection closing.
    Logout,
}

impl State {
    /// RFC 3501 §6: which commands each state accepts. Commands valid in any state:
    /// CAPABILITY, NOOP, LOGOUT, ID, plus what each state adds.
    fn permits(&self, cmd: &Command) -> Result<(), CmdError> {
        use Command as C;
        let any = matches!(cmd, C::Capability | C::Noop | C::Logout | C::Id { .. });
        let not_auth = matches!(cmd, C::StartTls | C::Authenticate { .. } | C::Login { .. });
        let auth = matches!(
            cmd,
            C::Select { .. }
                | C::Examine { .. }
                | C::Create { .. }
                | C::Delete { .. }
                | C::Rename { .. }
                | C::Subscribe { .. }
                | C::Unsubscribe { .. }
                | C::List(_)
                | C::Lsub { .. }
                | C::Status { .. }
                | C::Idle
                | C::Namespace
                | C::Enable { .. }
                | C::GetQuota { .. }
                | C::GetQuotaRoot { .. }
                | C::SetQuota { .. }
        );
        let ok = any
            || match self {
                State::NotAuthenticated => not_auth,
                State::Authenticated(_) => auth,
                State::Selected(..) => !not_auth,
                State::Logout => false,
            };
        if ok {
            Ok(())
        } else {
            let why = match self {
                State::NotAuthenticated => "not logged in",
                State::Authenticated(_) if !not_auth => "no mailbox selected",
                _ => "already logged in",
            };
            Err(CmdError::Bad(format!(
                "{} not allowed now: {why}",
                cmd.name()
            )))
        }
    }

    fn authed(&self) -> Option<&Authed> {
        match self {
            State::Authenticated(a) | State::Selected(a, _) => Some(a),
            _ => None,
        }
    }
}

/// How a command failed; decides the tagged response.
#[derive(Debug)]
pub(crate) enum CmdError {
    /// Protocol error: `BAD text`.
    Bad(String),
    /// Refusal: `NO [code] text`.
    No(Option<ResponseCode>, String),
    /// Server fault: logged, `NO [SERVERBUG]`.
    Server(String),
    /// The connection must close after `* BYE text`.
    Bye(String),
    /// The socket failed: close without a word.
    Io(std::io::Error),
}

impl CmdError {
    pub(crate) fn no(code: ResponseCode, text: impl Into<String>) -> CmdError {
        CmdError::No(Some(code), text.into())
    }
    pub(crate) fn server(e: impl std::fmt::Display) -> CmdError {
        CmdError::Server(e.to_string())
    }
}

impl From<std::io::Error> for CmdError {
    fn from(e: std::io::Error) -> Self {
        CmdError::Io(e)
    }
}

impl From<OpError> for CmdError {
    fn from(e: OpError) -> Self {
        use maildex_store::Refusal;
        // RFC 5530 §3: the one place a store refusal becomes a response code
        let code = match e.refusal() {
            Some(Refusal::Nonexistent) => ResponseCode::NonExistent,
            Some(Refusal::AlreadyExists) => ResponseCode::AlreadyExists,
            Some(Refusal::Limit) => ResponseCode::Limit,
            Some(Refusal::Cannot) => ResponseCode::Cannot,
            None => return CmdError::Server(e.to_string()),
        };
        let text = match &e {
            OpError::NoMailbox(_) => "Mailbox doesn't exist".to_string(),
            other => other.to_string(),
        };
        CmdError::No(Some(code), text)
    }
}

impl From<maildex_store::StoreError> for CmdError {
    fn from(e: maildex_store::StoreError) -> Self {
        OpError::from(e).into()
    }
}

/// Runs blocking store work off the reactor.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, CmdError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| CmdError::Server(format!("blocking task failed: {e}")))
}

/// One connection.
pub(crate) struct Session {
    stream: Stream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    rx: Receiver,
    out: Vec<u8>,
    state: State,
    read_buf: Box<[u8]>,
    /// When the connection is logged out if it has not authenticated: `login_timeout`
    /// after the session began, however much it sends meanwhile (a client trickling a
    /// byte at a time, or a NOOP now and then, would otherwise keep its slot for ever).
    login_deadline: tokio::time::Instant,
    /// What the disconnect line reports.
    stats: Stats,
    /// Extensions the client enabled (RFC 5161, RFC 7162 §3.1, §3.2.3).
    enabled: Enabled,
}

/// Extensions that change what the server sends once enabled, for the rest of the
/// connection.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Enabled {
    /// CONDSTORE (RFC 7162 §3.1): MODSEQ in flag FETCHes, HIGHESTMODSEQ at SELECT.
    pub condstore: bool,
    /// QRESYNC (RFC 7162 §3.2; implies CONDSTORE): VANISHED instead of EXPUNGE,
    /// SELECT (QRESYNC ...), CLOSED.
    pub qresync: bool,
}

/// A session's traffic, for the line logged when it ends.
struct Stats {
    started: tokio::time::Instant,
    bytes_in: u64,
    bytes_out: u64,
    commands: u64,
    /// How the session ended, when a deadline or shutdown ended it.
    ended: Option<&'static str>,
}

/// What the main loop does after a command.
#[derive(PartialEq, Eq)]
enum Flow {
    Continue,
    Close,
}

impl Session {
    pub(crate) fn new(stream: Stream, peer: SocketAddr, shared: Arc<Shared>) -> Session {
        Session {
            rx: Receiver::new(shared.settings.limits.clone()),
            login_deadline: tokio::time::Instant::now() + shared.settings.login_timeout,
            stream,
            peer,
            shared,
            out: Vec::with_capacity(OUT_KEEP),
            state: State::NotAuthenticated,
            read_buf: vec![0u8; READ_CHUNK].into_boxed_slice(),
            stats: Stats {
                started: tokio::time::Instant::now(),
                bytes_in: 0,
                bytes_out: 0,
                commands: 0,
                ended: None,
            },
            enabled: Enabled::default(),
        }
    }

    /// Serves the connection until LOGOUT, an error, a timeout or shutdown.
    pub(crate) async fn run(mut self) {
        let caps = self.capabilities().join(" ");
        self.untagged(
            Status::Ok,
            None,
            &format!("[CAPABILITY {caps}] maildex ready."),
        );
        let served = self.serve().await;
        let ended = match (&served, self.stats.ended) {
            (Ok(()), _) => "LOGOUT",
            (Err(_), Some(why)) => why,
            (Err(CmdError::Io(e)), None) if client_closed(e) => "client closed",
            (Err(_), None) => "error",
        };
        match served {
            Ok(()) => {}
            Err(CmdError::Io(e)) => tracing::debug!(error = %e, "connection closed"),
            Err(CmdError::Bye(text)) => {
                self.untagged(Status::Bye, None, &text);
                let _ = self.flush().await;
            }
            Err(other) => tracing::error!(error = ?other, "session ended"),
        }
        let _ =
            tokio::time::timeout(self.shared.settings.write_timeout, self.stream.shutdown()).await;
        // one line per session an admin can grep (the span carries session, peer, user)
        tracing::info!(
            ended,
            bytes_in = self.stats.bytes_in,
            bytes_out = self.stats.bytes_out,
            commands = self.stats.commands,
            duration_ms = self.stats.started.elapsed().as_millis() as u64,
            "disconnected"
        );
    }

    async fn serve(&mut self) -> Result<(), CmdError> {
        loop {
            while let Some(input) = self.rx.next() {
                if self.input(input).await? == Flow::Close {
                    self.flush().await?;
                    return Ok(());
                }
                if self.out.len() >= FLUSH_AT {
                    self.flush().await?;
                }
            }
            self.flush().await?;
            self.release_out();
            let n = self.read_some().await?;
            self.rx.feed(&self.read_buf[..n]);
        }
    }

    /// Reads at least one byte, or fails on EOF, autologout or shutdown.
    async fn read_some(&mut self) -> Result<usize, CmdError> {
        let (deadline, why) = self.deadline();
        let read = tokio::select! {
            r = self.stream.read(&mut self.read_buf) => match r {
                Ok(0) => Err(CmdError::Io(std::io::ErrorKind::UnexpectedEof.into())),
                Ok(n) => Ok(n),
                Err(e) => Err(CmdError::Io(e)),
            },
            _ = tokio::time::sleep_until(deadline) => {
                self.stats.ended = Some("autologout");
                Err(CmdError::Bye(why.into()))
            }
            _ = self.shared.shutdown.cancelled() => {
                self.stats.ended = Some("server shutdown");
                Err(CmdError::Bye("Server shutting down.".into()))
            }
        };
        if let Ok(n) = read {
            self.stats.bytes_in += n as u64;
        }
        read
    }

    /// When the next read gives up, and the `* BYE` text. RFC 9051 §5.4: after login an
    /// inactivity timer of at least 30 minutes, restarted by every read; before login the
    /// server may be stricter, and the timer runs from the start of the session.
    fn deadline(&self) -> (tokio::time::Instant, &'static str) {
        match self.state {
            State::NotAuthenticated => (self.login_deadline, "Autologout; no login in time"),
            _ => (
                tokio::time::Instant::now() + self.shared.settings.idle_timeout,
                "Autologout; idle for too long",
            ),
        }
    }

    async fn input(&mut self, input: Input) -> Result<Flow, CmdError> {
        match input {
            Input::Command { tag, command } => self.command(tag, command).await,
            Input::Continue => {
                encode::continuation(&mut self.out, "OK");
                self.flush().await?;
                Ok(Flow::Continue)
            }
            Input::AppendBegin { tag, mailbox } => {
                self.append(tag, mailbox).await?;
                Ok(Flow::Continue)
            }
            Input::AppendMessage(_) | Input::AppendData(_) | Input::AppendEnd => {
                // only reached when the APPEND was rejected and the receiver still hands
                // out its pieces: nothing to do
                Ok(Flow::Continue)
            }
            Input::Bad { tag, code, text } => {
                encode::status_line(
                    &mut self.out,
                    tag.as_ref(),
                    Status::Bad,
                    code.as_ref(),
                    &text,
                );
                Ok(Flow::Continue)
            }
            Input::No { tag, code, text } => {
                encode::status_line(&mut self.out, Some(&tag), Status::No, code.as_ref(), &text);
                Ok(Flow::Continue)
            }
            Input::Fatal { text } => Err(CmdError::Bye(text)),
        }
    }

    async fn command(&mut self, tag: Tag, cmd: Command) -> Result<Flow, CmdError> {
        let name = cmd.name();
        tracing::trace!(tag = %tag, command = name, "command");
        self.stats.commands += 1;
        // background work (the full-text indexer) steps aside while any session's command
        // runs; IDLE waits rather than works
        let idle = matches!(cmd, Command::Idle);
        let foreground = match self.state.authed() {
            Some(authed) if !idle => Some(authed.store.foreground()),
            _ => None,
        };
        let result = match self.state.permits(&cmd) {
            Ok(()) => self.dispatch(&tag, cmd).await,
            Err(e) => Err(e),
        };
        // a LOGIN or AUTHENTICATE that opened the store counts as a command ending now:
        // the client's next one (a SELECT) comes within the grace, before the indexer
        // walks the store it just opened
        if foreground.is_none() && !idle {
            if let Some(authed) = self.state.authed() {
                drop(authed.store.foreground());
            }
        }
        drop(foreground);
        match result {
            Ok(Done::Ok(text)) => {
                self.tagged(&tag, Status::Ok, None, &text);
                Ok(Flow::Continue)
            }
            Ok(Done::OkCode(code, text)) => {
                self.tagged(&tag, Status::Ok, Some(&code), &text);
                Ok(Flow::Continue)
            }
            Ok(Done::NoCode(code, text)) => {
                self.tagged(&tag, Status::No, Some(&code), &text);
                Ok(Flow::Continue)
            }
            Ok(Done::Written) => Ok(Flow::Continue),
            Ok(Done::Logout) => {
                self.untagged(Status::Bye, None, "Logging out");
                self.tagged(&tag, Status::Ok, None, "Logout completed.");
                self.state = State::Logout;
                Ok(Flow::Close)
            }
            Err(CmdError::Bad(text)) => {
                self.tagged(&tag, Status::Bad, None, &text);
                Ok(Flow::Continue)
            }
            Err(CmdError::No(code, text)) => {
                self.tagged(&tag, Status::No, code.as_ref(), &text);
                Ok(Flow::Continue)
            }
            Err(CmdError::Server(text)) => {
                tracing::error!(command = name, error = %text, "server error");
                self.tagged(
                    &tag,
                    Status::No,
                    Some(&ResponseCode::ServerBug),
                    "Internal error occurred. Refer to server log for more information.",
                );
                Ok(Flow::Continue)
            }
            Err(e @ (CmdError::Bye(_) | CmdError::Io(_))) => Err(e),
        }
    }

    async fn dispatch(&mut self, tag: &Tag, cmd: Command) -> Result<Done, CmdError> {
        use Command as C;
        match cmd {
            C::Capability => {
                let caps = self.capabilities().join(" ");
                self.out
                    .extend_from_slice(format!("* CAPABILITY {caps}\r\n").as_bytes());
                Ok(Done::ok("Capability completed."))
            }
            C::Noop | C::Check => {
                self.refresh(true).await?;
                Ok(Done::ok(if matches!(cmd, C::Check) {
                    "Check completed."
                } else {
                    "NOOP completed."
                }))
            }
            C::Logout => Ok(Done::Logout),
            C::Id { .. } => {
                // RFC 2971 §3.1: the server answers with its own identification
                self.out.extend_from_slice(
                    format!(
                        "* ID (\"name\" \"maildex\" \"version\" \"{}\")\r\n",
                        env!("CARGO_PKG_VERSION")
                    )
                    .as_bytes(),
                );
                self.refresh(true).await?;
                Ok(Done::ok("ID completed."))
            }
            C::StartTls => self.starttls(tag).await,
            C::Login { username, password } => self.login(username, password).await,
            C::Authenticate {
                mechanism,
                initial_response,
            } => self.authenticate(&mechanism, initial_response).await,
            C::Namespace => {
                // RFC 2342 §5: one personal namespace, "" with "." as separator
                self.out
                    .extend_from_slice(b"* NAMESPACE ((\"\" \".\")) NIL NIL\r\n");
                Ok(Done::ok("Namespace completed."))
            }
            C::Enable { capabilities } => Ok(self.enable(&capabilities)),
            C::GetQuotaRoot { mailbox } => self.get_quota_root(mailbox).await,
            C::GetQuota { root } => self.get_quota(&root).await,
            C::SetQuota { .. } => self.set_quota(),
            C::Select { mailbox, params } => self.select(mailbox, false, params).await,
            C::Examine { mailbox, params } => self.select(mailbox, true, params).await,
            C::Create { mailbox, .. } => self.create(mailbox).await,
            C::Delete { mailbox } => self.delete(mailbox).await,
            C::Rename { from, to } => self.rename(from, to).await,
            C::Subscribe { mailbox } => self.subscribe(mailbox, true).await,
            C::Unsubscribe { mailbox } => self.subscribe(mailbox, false).await,
            C::List(args) => self.list(args).await,
            C::Lsub { reference, pattern } => self.lsub(reference, pattern).await,
            C::Status { mailbox, items } => self.status(mailbox, items).await,
            C::Idle => self.idle(tag).await,
            C::Close => self.close(true).await,
            C::Unselect => self.close(false).await,
            C::Expunge { uids } => self.expunge(uids).await,
            C::Search { uid, args } => self.search(tag, uid, args).await,
            C::Sort { uid, args } => self.sort(tag, uid, args).await,
            C::Thread { uid, args } => self.thread(uid, args).await,
            C::Fetch { uid, set, args } => self.fetch(uid, set, args).await,
            C::Store { uid, set, args } => self.store_flags(uid, set, args).await,
            C::Copy { uid, set, mailbox } => self.copy(uid, set, mailbox, false).await,
            C::Move { uid, set, mailbox } => self.copy(uid, set, mailbox, true).await,
        }
    }

    /// The capabilities to announce in the current state (RFC 3501 §7.2.1).
    fn capabilities(&self) -> Vec<String> {
        let mut caps: Vec<String> = ["IMAP4rev1", "SASL-IR", "ID", "ENABLE", "IDLE", "LITERAL+"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        match self.state {
            State::NotAuthenticated => {
                if self.shared.tls.is_some() && !self.stream.is_tls() {
                    caps.push("STARTTLS".into());
                }
                if self.plaintext_ok() {
                    caps.push("AUTH=PLAIN".into());
                    caps.push("AUTH=LOGIN".into());
                } else {
                    caps.push("LOGINDISABLED".into());
                }
            }
            _ => {
                for c in [
                    "NAMESPACE",
                    "UIDPLUS",
                    "MOVE",
                    "UNSELECT",
                    "CHILDREN",
                    "SPECIAL-USE",
                    "LIST-EXTENDED",
                    "LIST-STATUS",
                    "STATUS=SIZE",
                    "ESEARCH",
                    "SEARCHRES",
                    "WITHIN",
                    "MULTIAPPEND",
                    "BINARY",
                    "CONDSTORE",
                    "QRESYNC",
                    "QUOTA",
                    "QUOTA=RES-STORAGE",
                    "SORT",
                    "SORT=DISPLAY",
                    "ESORT",
                    "THREAD=ORDEREDSUBJECT",
                    "THREAD=REFERENCES",
                    "THREAD=REFS",
                ] {
                    caps.push(c.into());
                }
                caps.push(format!(
                    "APPENDLIMIT={}",
                    self.shared.settings.limits.max_append
                ));
            }
        }
        caps
    }

    /// Whether a password may travel on this connection now.
    fn plaintext_ok(&self) -> bool {
        self.stream.is_tls()
            || (self.shared.settings.plaintext_auth_on_loopback && self.peer.ip().is_loopback())
    }

    fn store(&self) -> Result<Arc<UserStore>, CmdError> {
        self.state
            .authed()
            .map(|a| Arc::clone(&a.store))
            .ok_or_else(|| CmdError::Bad("not logged in".into()))
    }

    fn tagged(&mut self, tag: &Tag, status: Status, code: Option<&ResponseCode>, text: &str) {
        encode::status_line(&mut self.out, Some(tag), status, code, text);
    }

    fn untagged(&mut self, status: Status, code: Option<&ResponseCode>, text: &str) {
        encode::status_line(&mut self.out, None, status, code, text);
    }

    async fn flush(&mut self) -> Result<(), CmdError> {
        let out = std::mem::take(&mut self.out);
        let written = self.write(&out).await;
        self.out = out;
        self.out.clear();
        written
    }

    /// Gives back the output buffer's memory that a large answer grew, once the session
    /// waits for its next command: an idle session keeps a few KiB. Not on every flush: a
    /// FETCH of large bodies flushes every 64 KiB, and shrinking there made the next
    /// chunk grow the buffer again through five reallocations, a fifth of the server's
    /// CPU in page faults and copies (`perf record` of `FETCH 1:* BODY.PEEK[]`).
    fn release_out(&mut self) {
        if self.out.is_empty() && self.out.capacity() > 4 * OUT_KEEP {
            self.out.shrink_to(OUT_KEEP);
        }
    }

    /// Writes `bytes` to the client and flushes. Every write of a session goes through
    /// here, under a deadline: `write_timeout` without progress (a client that stopped
    /// reading), and before login the login deadline as well, so pipelining commands and
    /// never reading holds a connection slot no longer than sending nothing does.
    async fn write(&mut self, bytes: &[u8]) -> Result<(), CmdError> {
        let by = matches!(self.state, State::NotAuthenticated).then_some(self.login_deadline);
        let stall = self.shared.settings.write_timeout;
        let written = maildex_net::write_all_within(&mut self.stream, bytes, stall, by).await;
        match written {
            Ok(()) => {
                self.stats.bytes_out += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                if e.kind() == std::io::ErrorKind::TimedOut {
                    self.stats.ended = Some("write deadline");
                    tracing::info!(error = %e, "closing the connection");
                }
                Err(CmdError::Io(e))
            }
        }
    }
}

/// Whether a read or write failed because the client went away.
fn client_closed(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        e.kind(),
        K::UnexpectedEof | K::ConnectionReset | K::BrokenPipe | K::ConnectionAborted
    )
}

/// How a command succeeded.
pub(crate) enum Done {
    /// `tag OK text`.
    Ok(String),
    /// `tag OK [code] text`.
    OkCode(ResponseCode, String),
    /// `tag NO [code] text` that is not an error (e.g. FETCH of expunged messages).
    NoCode(ResponseCode, String),
    /// The tagged response is written already.
    Written,
    /// LOGOUT.
    Logout,
}

impl Done {
    fn ok(text: &str) -> Done {
        Done::Ok(text.to_string())
    }
}
