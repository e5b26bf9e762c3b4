//! The LMTP session state machine.

use std::collections::VecDeque;

use crate::address::Address;
use crate::body::Decoder;
use crate::command::{self, Command, CommandError};
use crate::reply::{self, Enhanced};
use crate::{
    DataSummary, Event, Limits, MailFrom, ProtoError, RcptOutcome, RcptResult, MAX_COMMAND_LINE,
};

/// Most input octets turned into one `Data` event; bounds event size when a
/// large read is fed at once.
const DATA_STEP: usize = 64 * 1024;

const OK: Enhanced = Enhanced::new(2, 0, 0);
const BAD_SEQUENCE: Enhanced = Enhanced::new(5, 5, 1);
const SYNTAX: Enhanced = Enhanced::new(5, 5, 4);

/// One LMTP server session (RFC 2033): bytes in, [`Event`]s out.
///
/// Rules, with the RFC each follows:
/// - Greeting `220 <host> LMTP ready` is the first event.
/// - Before LHLO only LHLO, NOOP, RSET and QUIT are allowed; others get
///   `503 5.5.1`. HELO and EHLO get `500` (RFC 2033 §4.1). Enhanced status
///   codes appear in replies from LHLO on (RFC 2034 §3). A second LHLO
///   resets the transaction (RFC 5321 §4.1.4).
/// - LHLO advertises PIPELINING, ENHANCEDSTATUSCODES, 8BITMIME, SIZE and
///   CHUNKING.
/// - MAIL during a transaction, RCPT before MAIL, DATA or BDAT before MAIL
///   get `503 5.5.1`; DATA/BDAT with no accepted recipient `554 5.5.1`
///   (RFC 2033 §4.2); DATA after BDAT in the same transaction `503 5.5.1`
///   (RFC 3030 §3). A refused BDAT still consumes its chunk (RFC 3030 §2).
/// - Unknown verb `500 5.5.2`; bad arguments `501 5.5.4`; unknown MAIL or
///   RCPT parameter `555 5.5.4` (RFC 5321 §4.1.1.11); MAIL `SIZE=` over the
///   limit `552 5.3.4` (RFC 1870 §6); accepted recipients beyond
///   [`Limits::max_recipients`] `452 4.5.3` (RFC 5321 §4.5.3.1.10).
/// - Command lines end with CRLF or a bare LF. Over 512 octets
///   (RFC 5321 §4.5.3.1.4) they get `500 5.5.2 Line too long`; over
///   [`Limits::max_line`] the session ends ([`ProtoError::LineTooLong`]).
/// - Message bodies: see "Message data" in the crate docs; a message over
///   [`Limits::max_message_size`] is read to its end and refused with
///   `552 5.3.4` per recipient ([`Event::MessageTooBig`]).
/// - After the message: one reply per accepted recipient, in RCPT order
///   (RFC 2033 §4.2), for DATA and alike for BDAT LAST, which ends the
///   message under RFC 3030 §2. Non-LAST chunks get
///   `250 2.0.0 <n> octets received`.
#[derive(Debug)]
pub struct Session {
    limits: Limits,
    /// Input fed but not yet consumed: `buf[pos..]`.
    buf: Vec<u8>,
    pos: usize,
    /// Events ready to hand out.
    queue: VecDeque<Event>,
    /// Client name from LHLO; `Some` once LHLO was done.
    lhlo: Option<String>,
    phase: Phase,
    tx: Option<Transaction>,
}

/// What the session does with the next input.
#[derive(Debug)]
enum Phase {
    /// Reading command lines.
    Command,
    /// Waiting for [`Session::rcpt_result`] about this recipient.
    RcptDue(Address),
    /// Reading a DATA body.
    Data,
    /// Reading a BDAT chunk of `remaining` more octets.
    Chunk {
        size: u64,
        remaining: u64,
        last: bool,
        /// `Some(reply)`: the BDAT was refused; discard the chunk, then send
        /// this reply.
        refused: Option<Vec<u8>>,
    },
    /// Waiting for [`Session::data_results`].
    ResultsDue,
    /// Hand out this error next, then close.
    Failing(ProtoError),
    /// Nothing more happens.
    Closed,
}

/// The mail transaction begun by MAIL (RFC 5321 §3.3).
#[derive(Debug)]
struct Transaction {
    accepted: Vec<Address>,
    body: Option<Body>,
}

/// State of the message data of a transaction.
#[derive(Debug)]
struct Body {
    decoder: Decoder,
    chunked: bool,
    stored: u64,
    crlf: u64,
    too_big: bool,
}

impl Session {
    /// A new session; its first event is the `220` greeting.
    pub fn new(mut limits: Limits) -> Self {
        limits.max_line = limits.max_line.max(MAX_COMMAND_LINE);
        let greeting = reply::line(220, None, &format!("{} LMTP ready", limits.hostname));
        Session {
            limits,
            buf: Vec::new(),
            pos: 0,
            queue: VecDeque::from([Event::Reply(greeting)]),
            lhlo: None,
            phase: Phase::Command,
            tx: None,
        }
    }

    /// Appends bytes read from the client. Ignored once the session is
    /// closed (after QUIT or an error).
    pub fn feed(&mut self, bytes: &[u8]) {
        if !matches!(self.phase, Phase::Closed | Phase::Failing(_)) {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// The next event, `Ok(None)` when more input is needed (or the session
    /// is closed), `Err` when the connection must be closed (any reply to
    /// write was handed out before).
    pub fn next_event(&mut self) -> Result<Option<Event>, ProtoError> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Ok(Some(event));
            }
            match &self.phase {
                Phase::RcptDue(_) => return Err(ProtoError::ResultDue("rcpt_result")),
                Phase::ResultsDue => return Err(ProtoError::ResultDue("data_results")),
                Phase::Closed => return Ok(None),
                Phase::Failing(e) => {
                    let e = e.clone();
                    self.phase = Phase::Closed;
                    self.buf = Vec::new();
                    self.pos = 0;
                    return Err(e);
                }
                Phase::Command | Phase::Data | Phase::Chunk { .. } => {}
            }
            if !self.step() {
                self.buf.drain(..self.pos);
                self.pos = 0;
                return Ok(None);
            }
        }
    }

    /// Answers the pending [`Event::RcptTo`].
    pub fn rcpt_result(&mut self, result: RcptResult) -> Result<(), ProtoError> {
        if !matches!(self.phase, Phase::RcptDue(_)) {
            return Err(ProtoError::UnexpectedResult("rcpt_result"));
        }
        let Phase::RcptDue(addr) = std::mem::replace(&mut self.phase, Phase::Command) else {
            return Err(ProtoError::UnexpectedResult("rcpt_result"));
        };
        let bytes = match result {
            RcptResult::Accepted => {
                let bytes = self.reply(250, Enhanced::new(2, 1, 5), "Ok");
                if let Some(tx) = &mut self.tx {
                    tx.accepted.push(addr);
                }
                bytes
            }
            RcptResult::Rejected(status) => {
                reply::recipient_failure(&status, &addr.to_string(), self.lhlo.is_some())
            }
        };
        self.queue.push_back(Event::Reply(bytes));
        Ok(())
    }

    /// Answers [`Event::DataEnd`]: one outcome per accepted recipient, in
    /// the order of [`Session::accepted_recipients`]. Queues one reply per
    /// recipient (RFC 2033 §4.2) and ends the transaction.
    pub fn data_results(&mut self, outcomes: Vec<RcptOutcome>) -> Result<(), ProtoError> {
        if !matches!(self.phase, Phase::ResultsDue) {
            return Err(ProtoError::UnexpectedResult("data_results"));
        }
        let accepted = self.tx.take().map(|tx| tx.accepted).unwrap_or_default();
        if outcomes.len() != accepted.len() {
            let err = ProtoError::OutcomeCount {
                expected: accepted.len(),
                got: outcomes.len(),
            };
            self.tx = Some(Transaction {
                accepted,
                body: None,
            });
            return Err(err);
        }
        let enhanced = self.lhlo.is_some();
        for (addr, outcome) in accepted.iter().zip(outcomes) {
            let bytes = match outcome {
                RcptOutcome::Delivered => {
                    let text = format!("<{addr}> Saved");
                    reply::line(250, enhanced.then_some(OK), &text)
                }
                RcptOutcome::Failed(status) => {
                    reply::recipient_failure(&status, &addr.to_string(), enhanced)
                }
            };
            self.queue.push_back(Event::Reply(bytes));
        }
        self.phase = Phase::Command;
        Ok(())
    }

    /// Accepted recipients of the current transaction, in RCPT order.
    pub fn accepted_recipients(&self) -> &[Address] {
        self.tx.as_ref().map_or(&[], |tx| &tx.accepted)
    }

    /// The client name given with LHLO, once LHLO was done.
    pub fn client_name(&self) -> Option<&str> {
        self.lhlo.as_deref()
    }

    /// Whether a mail transaction is open (MAIL accepted, not yet finished).
    /// When the connection drops while this is true, discard its data.
    pub fn in_transaction(&self) -> bool {
        self.tx.is_some()
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// `421 4.3.2 <host> Service shutting down` to write before closing
    /// for a server shutdown (RFC 5321 §3.8, RFC 3463 §3.4).
    pub fn shutdown_reply(&self) -> Vec<u8> {
        let text = format!("{} Service shutting down", self.limits.hostname);
        self.reply(421, Enhanced::new(4, 3, 2), &text)
    }

    /// `421 4.4.2 <host> Timeout` to write before closing an idle
    /// connection (RFC 5321 §4.5.3.2, RFC 3463 §3.5).
    pub fn timeout_reply(&self) -> Vec<u8> {
        let text = format!("{} Timeout, closing connection", self.limits.hostname);
        self.reply(421, Enhanced::new(4, 4, 2), &text)
    }

    /// A one-line reply; the enhanced code only after LHLO (RFC 2034 §3).
    fn reply(&self, code: u16, enhanced: Enhanced, text: &str) -> Vec<u8> {
        reply::line(code, self.lhlo.is_some().then_some(enhanced), text)
    }

    fn push_reply(&mut self, code: u16, enhanced: Enhanced, text: &str) {
        let bytes = self.reply(code, enhanced, text);
        self.queue.push_back(Event::Reply(bytes));
    }

    /// Drops the open transaction, telling the server (RFC 5321 §4.1.1.5).
    fn reset(&mut self) {
        if self.tx.take().is_some() {
            self.queue.push_back(Event::Reset);
        }
    }

    /// Consumes some input; false when nothing can be done without more.
    fn step(&mut self) -> bool {
        match std::mem::replace(&mut self.phase, Phase::Command) {
            Phase::Command => self.step_command(),
            Phase::Data => self.step_data(),
            Phase::Chunk {
                size,
                remaining,
                last,
                refused,
            } => self.step_chunk(size, remaining, last, refused),
            other => {
                self.phase = other;
                false
            }
        }
    }

    fn step_command(&mut self) -> bool {
        let avail = &self.buf[self.pos..];
        let cap = self.limits.max_line;
        let Some(lf) = memchr::memchr(b'\n', avail) else {
            if avail.len() > cap {
                self.too_long_fatal();
                return true;
            }
            return false;
        };
        // The same verdict whatever the chunking: by the octets before LF.
        if lf > cap {
            self.too_long_fatal();
            return true;
        }
        let mut line = avail[..lf].to_vec();
        self.pos += lf + 1;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.len() + 2 > MAX_COMMAND_LINE {
            // RFC 5321 §4.2.2: 500 covers "command line too long".
            self.push_reply(500, Enhanced::new(5, 5, 2), "Line too long");
            return true;
        }
        self.command(&line);
        true
    }

    fn too_long_fatal(&mut self) {
        self.reset();
        self.push_reply(500, Enhanced::new(5, 5, 2), "Line too long");
        self.phase = Phase::Failing(ProtoError::LineTooLong {
            limit: self.limits.max_line,
        });
    }

    fn command(&mut self, line: &[u8]) {
        let cmd = match command::parse(line) {
            Ok(cmd) => cmd,
            Err(CommandError::Unknown) => {
                return self.push_reply(500, Enhanced::new(5, 5, 2), "Unknown command");
            }
            Err(CommandError::Syntax(text)) => return self.push_reply(501, SYNTAX, text),
            Err(CommandError::UnknownParameter(p)) => {
                return self.push_reply(555, SYNTAX, &format!("Unsupported parameter {p}"));
            }
            Err(CommandError::BdatSize) => {
                self.reset();
                self.push_reply(501, SYNTAX, "Invalid BDAT chunk size");
                self.phase = Phase::Failing(ProtoError::BadChunkSize);
                return;
            }
        };
        // RFC 2033 §4.1 / RFC 5321 §4.1.4: a session starts with LHLO.
        let before_lhlo_ok = matches!(
            cmd,
            Command::Lhlo(_) | Command::HeloEhlo | Command::Noop | Command::Rset | Command::Quit
        );
        if self.lhlo.is_none() && !before_lhlo_ok {
            let bytes = self.reply(503, BAD_SEQUENCE, "Send LHLO first");
            return self.refuse(cmd, bytes);
        }
        match cmd {
            Command::Lhlo(name) => self.lhlo(name),
            Command::HeloEhlo => {
                self.push_reply(500, Enhanced::new(5, 5, 1), "This is LMTP, use LHLO")
            }
            Command::Mail {
                reverse_path,
                size,
                body_8bit,
            } => self.mail(MailFrom {
                reverse_path,
                size,
                body_8bit,
            }),
            Command::Rcpt(addr) => self.rcpt(addr),
            Command::Data => self.data(),
            Command::Bdat { size, last } => self.bdat(size, last),
            Command::Rset => {
                self.reset();
                self.push_reply(250, OK, "Ok");
            }
            Command::Noop => self.push_reply(250, OK, "Ok"),
            Command::Quit => {
                self.reset();
                let text = format!("{} Bye", self.limits.hostname);
                self.push_reply(221, OK, &text);
                self.queue.push_back(Event::Quit);
                self.phase = Phase::Closed;
                self.buf = Vec::new();
                self.pos = 0;
            }
            // RFC 5321 §3.5.3: 252 when the server will not verify.
            Command::Vrfy => self.push_reply(
                252,
                Enhanced::new(2, 5, 0),
                "Cannot VRFY user, but will accept message and attempt delivery",
            ),
            Command::Help => self.push_reply(
                214,
                OK,
                "Commands: LHLO MAIL RCPT DATA BDAT RSET NOOP QUIT VRFY HELP",
            ),
        }
    }

    /// Refuses a command with `bytes`; a BDAT's chunk is still read and
    /// dropped first (RFC 3030 §2).
    fn refuse(&mut self, cmd: Command, bytes: Vec<u8>) {
        if let Command::Bdat { size, last } = cmd {
            self.phase = Phase::Chunk {
                size,
                remaining: size,
                last,
                refused: Some(bytes),
            };
        } else {
            self.queue.push_back(Event::Reply(bytes));
        }
    }

    fn lhlo(&mut self, name: String) {
        self.reset();
        self.lhlo = Some(name);
        // RFC 2033 §4.1 LHLO reply, RFC 1870 §3 SIZE, RFC 2920 PIPELINING,
        // RFC 2034 ENHANCEDSTATUSCODES, RFC 6152 8BITMIME, RFC 3030 CHUNKING.
        let lines = [
            self.limits.hostname.clone(),
            "PIPELINING".to_string(),
            "ENHANCEDSTATUSCODES".to_string(),
            "8BITMIME".to_string(),
            format!("SIZE {}", self.limits.max_message_size),
            "CHUNKING".to_string(),
        ];
        self.queue
            .push_back(Event::Reply(reply::multiline(250, &lines)));
    }

    fn mail(&mut self, mail: MailFrom) {
        if self.tx.is_some() {
            // RFC 5321 §4.1.4: MAIL inside a transaction is out of sequence.
            return self.push_reply(503, BAD_SEQUENCE, "Nested MAIL command");
        }
        let max = self.limits.max_message_size;
        if max > 0 && mail.size.is_some_and(|s| s > max) {
            // RFC 1870 §6: declared size over the fixed maximum.
            return self.push_reply(
                552,
                Enhanced::new(5, 3, 4),
                "Message size exceeds fixed maximum message size",
            );
        }
        self.tx = Some(Transaction {
            accepted: Vec::new(),
            body: None,
        });
        self.queue.push_back(Event::MailFrom(mail));
        self.push_reply(250, Enhanced::new(2, 1, 0), "Ok");
    }

    fn rcpt(&mut self, addr: Address) {
        let Some(tx) = &self.tx else {
            return self.push_reply(503, BAD_SEQUENCE, "Need MAIL command");
        };
        if tx.body.is_some() {
            // RFC 3030 §2: recipients come before the first chunk.
            return self.push_reply(503, BAD_SEQUENCE, "RCPT after BDAT");
        }
        if tx.accepted.len() >= self.limits.max_recipients {
            return self.push_reply(452, Enhanced::new(4, 5, 3), "Too many recipients");
        }
        self.queue.push_back(Event::RcptTo(addr.clone()));
        self.phase = Phase::RcptDue(addr);
    }

    /// Why DATA or BDAT cannot start now, as a reply.
    fn body_refusal(&self, is_bdat: bool) -> Option<Vec<u8>> {
        let Some(tx) = &self.tx else {
            return Some(self.reply(503, BAD_SEQUENCE, "Need MAIL command"));
        };
        if tx.accepted.is_empty() {
            // RFC 2033 §4.2: no recipient was accepted.
            return Some(self.reply(554, BAD_SEQUENCE, "No valid recipients"));
        }
        if !is_bdat && tx.body.is_some() {
            // RFC 3030 §3: no DATA in a BDAT transaction.
            return Some(self.reply(503, BAD_SEQUENCE, "DATA after BDAT"));
        }
        None
    }

    fn data(&mut self) {
        if let Some(bytes) = self.body_refusal(false) {
            return self.queue.push_back(Event::Reply(bytes));
        }
        self.start_body(false);
        // RFC 5321 §4.3.2: 354 has no enhanced code (RFC 2034 §3: 2/4/5xx only).
        self.queue.push_back(Event::Reply(reply::line(
            354,
            None,
            "Start mail input; end with <CRLF>.<CRLF>",
        )));
        self.queue.push_back(Event::DataStart);
        self.phase = Phase::Data;
    }

    fn bdat(&mut self, size: u64, last: bool) {
        if let Some(bytes) = self.body_refusal(true) {
            return self.refuse(Command::Bdat { size, last }, bytes);
        }
        if self.tx.as_ref().is_some_and(|tx| tx.body.is_none()) {
            self.start_body(true);
            self.queue.push_back(Event::DataStart);
        }
        self.phase = Phase::Chunk {
            size,
            remaining: size,
            last,
            refused: None,
        };
    }

    fn start_body(&mut self, chunked: bool) {
        if let Some(tx) = &mut self.tx {
            tx.body = Some(Body {
                decoder: Decoder::new(!chunked, self.limits.max_line),
                chunked,
                stored: 0,
                crlf: 0,
                too_big: false,
            });
        }
    }

    fn step_data(&mut self) -> bool {
        let end = self.buf.len().min(self.pos + DATA_STEP);
        let Some(body) = self.tx.as_mut().and_then(|tx| tx.body.as_mut()) else {
            return false;
        };
        let mut out = Vec::new();
        let (used, ended) = body.decoder.decode(&self.buf[self.pos..end], &mut out);
        self.pos += used;
        self.take_body(out);
        if ended {
            self.finish_message();
        } else {
            self.phase = Phase::Data;
        }
        used > 0 || ended
    }

    fn step_chunk(
        &mut self,
        size: u64,
        remaining: u64,
        last: bool,
        refused: Option<Vec<u8>>,
    ) -> bool {
        let avail = self.buf.len() - self.pos;
        if remaining > 0 && avail == 0 {
            self.phase = Phase::Chunk {
                size,
                remaining,
                last,
                refused,
            };
            return false;
        }
        let n = usize::try_from(remaining)
            .unwrap_or(usize::MAX)
            .min(avail)
            .min(DATA_STEP);
        let input = self.pos..self.pos + n;
        self.pos += n;
        let remaining = remaining - n as u64;
        if refused.is_none() {
            let mut out = Vec::new();
            if let Some(body) = self.tx.as_mut().and_then(|tx| tx.body.as_mut()) {
                body.decoder.decode(&self.buf[input], &mut out);
                if remaining == 0 && last {
                    body.decoder.flush(&mut out);
                }
            }
            self.take_body(out);
        }
        if remaining > 0 {
            self.phase = Phase::Chunk {
                size,
                remaining,
                last,
                refused,
            };
        } else if let Some(bytes) = refused {
            self.queue.push_back(Event::Reply(bytes));
        } else if last {
            self.finish_message();
        } else {
            self.push_reply(250, OK, &format!("{size} octets received"));
        }
        true
    }

    /// Counts decoded message bytes and hands them out, unless the message
    /// is (now) too big (RFC 1870 §6: refuse after reading it).
    fn take_body(&mut self, out: Vec<u8>) {
        let max = self.limits.max_message_size;
        let Some(body) = self.tx.as_mut().and_then(|tx| tx.body.as_mut()) else {
            return;
        };
        if body.too_big || out.is_empty() {
            return;
        }
        let lfs = memchr::memchr_iter(b'\n', &out).count() as u64;
        body.stored += out.len() as u64;
        body.crlf += out.len() as u64 + lfs;
        if max > 0 && body.crlf > max {
            body.too_big = true;
            self.queue.push_back(Event::MessageTooBig);
        } else {
            self.queue.push_back(Event::Data(out));
        }
    }

    /// End of DATA or BDAT LAST.
    fn finish_message(&mut self) {
        let Some(tx) = &mut self.tx else {
            self.phase = Phase::Command;
            return;
        };
        let Some(body) = &tx.body else {
            self.phase = Phase::Command;
            return;
        };
        if body.too_big {
            let status = crate::Status::too_big();
            let enhanced = self.lhlo.is_some();
            for addr in &tx.accepted {
                let bytes = reply::recipient_failure(&status, &addr.to_string(), enhanced);
                self.queue.push_back(Event::Reply(bytes));
            }
            self.tx = None;
            self.phase = Phase::Command;
        } else {
            self.queue.push_back(Event::DataEnd(DataSummary {
                stored_size: body.stored,
                crlf_size: body.crlf,
                long_lines: body.decoder.long_lines,
                chunked: body.chunked,
            }));
            self.phase = Phase::ResultsDue;
        }
    }
}
