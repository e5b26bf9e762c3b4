//! The byte-fed command receiver (RFC 3501 §2.2, §4.3, §7.5; RFC 7888).

use std::collections::VecDeque;

use crate::code::ResponseCode;
use crate::error::ParseError;
use crate::input::{AppendMessage, Input, LineTooLong};
use crate::limits::Limits;
use crate::parse::{
    check_prefix, parse_append_head, parse_append_more, parse_partial, tag_of, PErr,
};
use crate::types::Tag;

/// A byte-fed IMAP command receiver (sans-IO).
///
/// Feed what one socket read returned with [`Receiver::feed`], then call
/// [`Receiver::next`] until it returns `None` (it then needs more bytes),
/// acting on each [`Input`] in order. Commands are taken one at a time:
/// bytes pipelined after a command stay buffered until asked for, so after
/// `IDLE` or `AUTHENTICATE` the session reads its raw lines with
/// [`Receiver::next_line`] from the same buffer.
///
/// Rules:
/// - Lines end in CRLF; a bare LF is accepted too (as Dovecot does); a CR
///   elsewhere in a line and NUL anywhere in a line are BAD (RFC 3501 §9:
///   CR and LF only as CRLF, `CHAR8` excludes NUL). Empty lines are ignored.
/// - Literals (RFC 3501 §4.3): a line ending in `{n}` is continued with
///   [`Input::Continue`] once the command so far parses; `{n+}`
///   (RFC 7888 LITERAL+) is not. Octets of literals inside a command are
///   collected inline up to [`Limits::max_inline_literal`] and
///   [`Limits::max_command`].
/// - A refused line is skipped to its end, including the literals announced
///   on it: a synchronizing literal on a bad line is never continued (the
///   client waits and gets the BAD), the octets of a non-synchronizing one
///   are read and dropped. A non-synchronizing literal larger than
///   `max(max_append, max_inline_literal)` is not read: [`Input::Fatal`]
///   (RFC 7888 §4 lets the server close the connection instead of reading
///   a literal it will not accept).
/// - A line longer than [`Limits::max_line`] gets `BAD [TOOBIG] Line too
///   long` at once and is skipped (the buffer stays bounded meanwhile).
/// - APPEND streams: see [`Input::AppendBegin`]. A message literal over
///   [`Limits::max_append`] gets `NO [TOOBIG]` (RFC 7889 §4) when
///   synchronizing, [`Input::Fatal`] when not.
#[derive(Debug)]
pub struct Receiver {
    limits: Limits,
    /// Bytes fed; `buf[pos..]` is not consumed yet.
    buf: Vec<u8>,
    pos: usize,
    /// Where the search for the next LF resumes (index into `buf`).
    scan: usize,
    /// The command assembled so far: lines ending in CRLF, literal octets.
    cmd: Vec<u8>,
    state: State,
    mode: Mode,
    pending: VecDeque<Input>,
    /// The last octets of a line being skipped (to see a literal at its end).
    skip_tail: Vec<u8>,
    /// Literals in the command being assembled.
    literals: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a line of a command.
    Line,
    /// Collecting an inline literal into `cmd`.
    Literal { left: usize },
    /// Streaming an APPEND message literal.
    AppendData { left: u64 },
    /// Dropping the rest of a refused line.
    SkipLine,
    /// Dropping literal octets of a refused line, then `SkipLine`.
    SkipLiteral { left: u64 },
    /// After `Fatal`: nothing more.
    Dead,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    Normal,
    /// An APPEND whose head (up to the first message literal) is incomplete.
    AppendHead,
    /// An APPEND after `AppendBegin`; `sync` is the current literal's kind.
    Append {
        tag: Tag,
        sync: bool,
    },
}

/// A literal announcement at the end of a line.
#[derive(Debug, Clone, Copy)]
struct Tail {
    /// The size, `None` when not a valid `number` (RFC 3501 §9: 32 bits).
    size: Option<u64>,
    sync: bool,
}

/// How many octets of a skipped line are kept to find a literal at its end.
const TAIL_KEEP: usize = 32;

/// Most literals in one command. Each synchronizing literal makes the
/// receiver check the command so far (linear in its size), so this bounds
/// the work a client can cause with one command of many tiny literals.
pub const MAX_LITERALS: usize = 1000;

/// `{n}`, `{n+}` or `~{n}` at the end of a line (RFC 3501 §9 `literal`,
/// RFC 7888 §8, RFC 3516 §7).
fn literal_tail(line: &[u8]) -> Option<Tail> {
    let inner = line.strip_suffix(b"}")?;
    let open = memchr::memrchr(b'{', inner)?;
    let inner = &inner[open + 1..];
    let (digits, sync) = match inner.strip_suffix(b"+") {
        Some(d) => (d, false),
        None => (inner, true),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let size = if digits.len() > 10 {
        None
    } else {
        let n = digits
            .iter()
            .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
        (n <= u64::from(u32::MAX)).then_some(n)
    };
    Some(Tail { size, sync })
}

/// True when the line is `tag SP APPEND ...`.
fn is_append(line: &[u8]) -> bool {
    let Some(sp) = memchr::memchr(b' ', line) else {
        return false;
    };
    let rest = &line[sp + 1..];
    let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
    rest[..end].eq_ignore_ascii_case(b"APPEND")
}

impl Receiver {
    /// A receiver with these limits.
    pub fn new(limits: Limits) -> Receiver {
        Receiver {
            limits,
            buf: Vec::new(),
            pos: 0,
            scan: 0,
            cmd: Vec::new(),
            state: State::Line,
            mode: Mode::Normal,
            pending: VecDeque::new(),
            skip_tail: Vec::new(),
            literals: 0,
        }
    }

    /// Appends bytes read from the socket. Feed one read at a time and drain
    /// [`Receiver::next`] before the next read: that keeps the buffer
    /// within the limits plus one read.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.state == State::Dead {
            return;
        }
        self.compact();
        if self.buf.is_empty() && self.buf.capacity() > 2 * self.limits.max_line.max(64 * 1024) {
            self.buf = Vec::new();
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Octets held by the receiver (unconsumed input plus the command being
    /// assembled).
    pub fn buffered(&self) -> usize {
        self.buf.len() + self.cmd.len() + self.skip_tail.len()
    }

    /// Octets the client sent that no input returned so far has consumed: the rest of
    /// the buffer and a command being assembled. Unlike [`Receiver::buffered`] it leaves
    /// out the consumed front of the buffer, so right after STARTTLS it counts only what
    /// was pipelined behind that command.
    pub fn unread(&self) -> usize {
        self.avail() + self.cmd.len()
    }

    /// True when nothing of a command is held (no partial line, literal or
    /// APPEND): the session may treat end of input as a clean close.
    pub fn is_idle(&self) -> bool {
        self.pos == self.buf.len()
            && self.cmd.is_empty()
            && self.state == State::Line
            && self.mode == Mode::Normal
            && self.pending.is_empty()
    }

    /// Drops all buffered input (RFC 3501 §6.2.1 / RFC 2595 §3.1: bytes a
    /// client pipelined after STARTTLS must not be read as commands).
    pub fn discard_buffered(&mut self) {
        self.buf.clear();
        self.pos = 0;
        self.scan = 0;
        self.pending.clear();
        if self.state != State::Dead {
            self.reset();
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    fn avail(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn reset(&mut self) {
        self.literals = 0;
        self.cmd.clear();
        self.mode = Mode::Normal;
        self.state = State::Line;
    }

    fn die(&mut self, text: &str) {
        self.close_silently();
        self.pending.push_back(Input::Fatal { text: text.into() });
    }

    /// Forgets all input; nothing more is read (queued inputs stay).
    fn close_silently(&mut self) {
        self.skip_tail = Vec::new();
        self.state = State::Dead;
        self.cmd = Vec::new();
        self.buf = Vec::new();
        self.pos = 0;
        self.scan = 0;
        self.mode = Mode::Normal;
    }

    /// The tag of the command being assembled, for a BAD.
    fn current_tag(&self) -> Option<Tag> {
        match &self.mode {
            Mode::Append { tag, .. } => Some(tag.clone()),
            _ if !self.cmd.is_empty() => tag_of(&self.cmd),
            _ => tag_of(&self.buf[self.pos..]),
        }
    }

    /// The next input, or `None` when more bytes are needed. When it
    /// returns `None`, the receiver holds at most
    /// `max(max_line + 1, max_inline_literal) + max_command + 32` octets.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Input> {
        let next = self.next_inner();
        if next.is_none() {
            self.compact();
        }
        next
    }

    /// Drops consumed octets from the front of the buffer.
    fn compact(&mut self) {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.scan -= self.pos;
            self.pos = 0;
        }
    }

    fn next_inner(&mut self) -> Option<Input> {
        loop {
            if let Some(i) = self.pending.pop_front() {
                return Some(i);
            }
            match self.state {
                State::Dead => return None,
                State::Line => {
                    if !self.step_line() {
                        return None;
                    }
                }
                State::Literal { left } => {
                    let n = left.min(self.avail());
                    if n == 0 && left > 0 {
                        return None;
                    }
                    self.cmd
                        .extend_from_slice(&self.buf[self.pos..self.pos + n]);
                    self.pos += n;
                    self.scan = self.pos;
                    self.state = if n == left {
                        State::Line
                    } else {
                        State::Literal { left: left - n }
                    };
                }
                State::AppendData { left } => return self.append_chunk(left),
                State::SkipLiteral { left } => {
                    let n = usize::try_from(left)
                        .unwrap_or(usize::MAX)
                        .min(self.avail());
                    if n == 0 && left > 0 {
                        return None;
                    }
                    self.pos += n;
                    self.scan = self.pos;
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        self.skip_tail.clear();
                        State::SkipLine
                    } else {
                        State::SkipLiteral { left }
                    };
                }
                State::SkipLine => {
                    if !self.skip_line() {
                        return None;
                    }
                }
            }
        }
    }

    /// Hands out the next piece of an APPEND message.
    fn append_chunk(&mut self, left: u64) -> Option<Input> {
        let avail = self.avail();
        if avail == 0 {
            return None;
        }
        let n = usize::try_from(left)
            .unwrap_or(usize::MAX)
            .min(avail)
            .min(self.limits.max_chunk.max(1));
        let chunk = if self.pos == 0 && n == self.buf.len() {
            // The whole buffer is message data: hand it over without a copy.
            self.scan = 0;
            std::mem::take(&mut self.buf)
        } else {
            let c = self.buf[self.pos..self.pos + n].to_vec();
            self.pos += n;
            self.scan = self.pos;
            c
        };
        let left = left - n as u64;
        self.state = if left == 0 {
            State::Line
        } else {
            State::AppendData { left }
        };
        Some(Input::AppendData(chunk))
    }

    /// Reads one line of a command if complete; false when more input is
    /// needed.
    fn step_line(&mut self) -> bool {
        let Some(i) = memchr::memchr(b'\n', &self.buf[self.scan..]).map(|i| i + self.scan) else {
            self.scan = self.buf.len();
            if self.avail() > self.limits.max_line + 1 {
                self.line_too_long_partial();
                return true;
            }
            return false;
        };
        let mut end = i;
        if end > self.pos && self.buf[end - 1] == b'\r' {
            end -= 1;
        }
        let start = self.pos;
        self.pos = i + 1;
        self.scan = self.pos;
        if end - start > self.limits.max_line {
            let tag = self.overlong_tag(start);
            // Only the last TAIL_KEEP octets, as a line refused before its
            // end arrived keeps (found by fuzzing: a literal announcement
            // longer than that was honoured or not depending on chunking).
            let window = &self.buf[i.saturating_sub(TAIL_KEEP).max(start)..i];
            let tail = literal_tail(window.strip_suffix(b"\r").unwrap_or(window));
            self.bad(tag, Some(ResponseCode::TooBig), "Line too long");
            self.skip_literal_of(tail);
            return true;
        }
        let line_start = self.cmd.len();
        self.cmd.extend_from_slice(&self.buf[start..end]);
        self.complete_line(line_start);
        true
    }

    /// The tag of an overlong line, read only from its first `max_line + 1`
    /// octets and only when a space ends it there, so that it does not
    /// depend on how much of the line had arrived (found by fuzzing).
    fn overlong_tag(&self, start: usize) -> Option<Tag> {
        match &self.mode {
            Mode::Append { tag, .. } => Some(tag.clone()),
            _ if !self.cmd.is_empty() => tag_of(&self.cmd),
            _ => {
                let end = (start + self.limits.max_line + 1).min(self.buf.len());
                let window = &self.buf[start..end];
                let sp = memchr::memchr(b' ', window)?;
                tag_of(&window[..=sp])
            }
        }
    }

    /// A line grew past `max_line` without a line end: refuse it now and
    /// drop its octets as they come.
    fn line_too_long_partial(&mut self) {
        let tag = self.overlong_tag(self.pos);
        let keep = self.avail().min(TAIL_KEEP);
        self.skip_tail.clear();
        self.skip_tail
            .extend_from_slice(&self.buf[self.buf.len() - keep..]);
        self.pos = self.buf.len();
        self.scan = self.pos;
        self.bad(tag, Some(ResponseCode::TooBig), "Line too long");
        self.state = State::SkipLine;
    }

    /// Queues a BAD and forgets the command (and any APPEND) under way.
    fn bad(&mut self, tag: Option<Tag>, code: Option<ResponseCode>, text: &str) {
        self.pending.push_back(Input::Bad {
            tag,
            code,
            text: text.into(),
        });
        self.reset();
    }

    /// After a refusal: skip the octets of a non-synchronizing literal
    /// announced at the end of the refused line (RFC 7888 §4), or close when
    /// it is too large to be worth reading.
    fn skip_literal_of(&mut self, tail: Option<Tail>) {
        match tail {
            Some(Tail { sync: false, size }) => {
                let limit = self
                    .limits
                    .max_append
                    .max(self.limits.max_inline_literal as u64);
                match size {
                    Some(n) if n <= limit => self.state = State::SkipLiteral { left: n },
                    _ => self.die("Literal too big"),
                }
            }
            _ => self.state = State::Line,
        }
    }

    /// Drops a refused line up to its end; false when more input is needed.
    fn skip_line(&mut self) -> bool {
        let rest = &self.buf[self.pos..];
        match memchr::memchr(b'\n', rest) {
            None => {
                self.keep_tail(self.pos, self.buf.len());
                self.pos = self.buf.len();
                self.scan = self.pos;
                false
            }
            Some(i) => {
                let end = self.pos + i;
                self.keep_tail(self.pos, end);
                self.pos = end + 1;
                self.scan = self.pos;
                let mut tail = std::mem::take(&mut self.skip_tail);
                if tail.last() == Some(&b'\r') {
                    tail.pop();
                }
                let t = literal_tail(&tail);
                self.state = State::Line;
                self.skip_literal_of(t);
                true
            }
        }
    }

    fn keep_tail(&mut self, from: usize, to: usize) {
        let new = &self.buf[from..to];
        if new.len() >= TAIL_KEEP {
            self.skip_tail.clear();
            self.skip_tail
                .extend_from_slice(&new[new.len() - TAIL_KEEP..]);
        } else {
            self.skip_tail.extend_from_slice(new);
            let excess = self.skip_tail.len().saturating_sub(TAIL_KEEP);
            self.skip_tail.drain(..excess);
        }
    }

    /// A whole line (without its line end) was appended to `cmd` at
    /// `line_start`.
    fn complete_line(&mut self, line_start: usize) {
        let line = &self.cmd[line_start..];
        if line.is_empty() && self.mode == Mode::Normal && line_start == 0 {
            return; // Empty lines between commands are ignored.
        }
        let tail = literal_tail(line);
        let nul = memchr::memchr(0, line).is_some();
        let cr = memchr::memchr(b'\r', line).is_some();
        let tag = self.current_tag();
        if nul || cr {
            let text = if nul {
                "NUL in command line"
            } else {
                "CR without LF in command line"
            };
            self.bad(tag, None, text);
            self.skip_literal_of(tail);
            return;
        }
        self.cmd.extend_from_slice(b"\r\n");
        if self.cmd.len() > self.limits.max_command {
            self.bad(tag, Some(ResponseCode::TooBig), "Command too long");
            self.skip_literal_of(tail);
            return;
        }
        if self.mode == Mode::Normal && line_start == 0 && is_append(&self.cmd) {
            self.mode = Mode::AppendHead;
        }
        match self.mode.clone() {
            Mode::Normal => match tail {
                None => {
                    match parse_partial(&self.cmd, &self.limits) {
                        Ok((tag, command)) => {
                            self.pending.push_back(Input::Command { tag, command })
                        }
                        Err((tag, PErr::Fail(e))) => self.bad_parse(tag, &e),
                        Err((tag, PErr::Incomplete)) => self.bad(tag, None, "Literal data missing"),
                    }
                    self.reset();
                }
                Some(t) => self.inline_literal(tag, t),
            },
            Mode::AppendHead => match (parse_append_head(&self.cmd, &self.limits), tail) {
                (Ok(head), _) => {
                    self.pending.push_back(Input::AppendBegin {
                        tag: head.tag.clone(),
                        mailbox: head.mailbox,
                    });
                    self.mode = Mode::Append {
                        tag: head.tag.clone(),
                        sync: head.message.sync,
                    };
                    self.start_message(head.tag, head.message);
                }
                (Err((_, PErr::Incomplete)), Some(t)) => self.inline_literal(tag, t),
                (Err((tag, PErr::Incomplete)), None) => {
                    self.bad(tag, None, "Literal data missing");
                }
                (Err((tag, PErr::Fail(e))), t) => {
                    self.bad_parse(tag, &e);
                    self.skip_literal_of(t);
                }
            },
            Mode::Append { tag, .. } => match parse_append_more(&self.cmd, &self.limits) {
                Ok(None) => {
                    self.pending.push_back(Input::AppendEnd);
                    self.reset();
                }
                Ok(Some(msg)) => {
                    self.mode = Mode::Append {
                        tag: tag.clone(),
                        sync: msg.sync,
                    };
                    self.start_message(tag, msg);
                }
                Err(PErr::Fail(e)) => {
                    self.bad_parse(Some(tag), &e);
                    self.skip_literal_of(tail);
                }
                Err(PErr::Incomplete) => {
                    self.bad(Some(tag), None, "Literal data missing");
                    self.skip_literal_of(tail);
                }
            },
        }
    }

    fn bad_parse(&mut self, tag: Option<Tag>, e: &ParseError) {
        self.bad(tag, e.code(), e.text());
    }

    /// A literal inside a command (not an APPEND message) was announced at
    /// the end of the line just read.
    fn inline_literal(&mut self, tag: Option<Tag>, t: Tail) {
        let Some(n) = t.size else {
            self.bad(tag, None, "Invalid literal size");
            self.skip_literal_of(Some(t));
            return;
        };
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        self.literals += 1;
        if self.literals > MAX_LITERALS {
            self.bad(tag, Some(ResponseCode::Limit), "Too many literals");
            self.skip_literal_of(Some(t));
            return;
        }
        if n > self.limits.max_inline_literal
            || self.cmd.len().saturating_add(n) > self.limits.max_command
        {
            self.bad(tag, Some(ResponseCode::TooBig), "Literal too big");
            self.skip_literal_of(Some(t));
            return;
        }
        if t.sync {
            // RFC 3501 §7.5: continue only a command that is right so far.
            let check = if self.mode == Mode::AppendHead {
                parse_append_head(&self.cmd, &self.limits).map(|_| ())
            } else {
                check_prefix(&self.cmd, &self.limits)
            };
            match check {
                Err((_, PErr::Incomplete)) => self.pending.push_back(Input::Continue),
                Err((tag, PErr::Fail(e))) => {
                    self.bad_parse(tag, &e);
                    return;
                }
                Ok(()) => {
                    self.bad(tag, None, "Unexpected literal");
                    return;
                }
            }
        }
        self.state = State::Literal { left: n };
    }

    /// Announces one APPEND message and starts streaming it.
    fn start_message(&mut self, tag: Tag, msg: AppendMessage) {
        self.cmd.clear();
        if msg.len > self.limits.max_append {
            if msg.sync {
                // RFC 7889 §4 / RFC 4469 §5: NO [TOOBIG], never a continuation.
                self.pending.push_back(Input::No {
                    tag,
                    code: Some(ResponseCode::TooBig),
                    text: "Message too big".into(),
                });
                self.reset();
            } else {
                // RFC 7888 §4: the server may close rather than read it.
                self.die("Message too big");
            }
            return;
        }
        let (len, sync) = (msg.len, msg.sync);
        self.pending.push_back(Input::AppendMessage(msg));
        if sync {
            self.pending.push_back(Input::Continue);
        }
        self.state = if len == 0 {
            State::Line
        } else {
            State::AppendData { left: len }
        };
    }

    /// Abandons the APPEND under way, after the session wrote its own
    /// tagged NO (RFC 3502 §6: the whole MULTIAPPEND fails). Call it after
    /// [`Input::AppendBegin`], [`Input::AppendMessage`], [`Input::Continue`]
    /// or [`Input::AppendData`]. A synchronizing literal not yet continued
    /// is never continued (the line is over); otherwise the rest of the
    /// current literal and of the command, including further
    /// non-synchronizing literals, is skipped silently. Does nothing when
    /// no APPEND is under way.
    pub fn reject_append(&mut self) {
        let Mode::Append { sync, .. } = self.mode else {
            return;
        };
        let continued = !self.pending.contains(&Input::Continue);
        self.pending.clear();
        let left = match self.state {
            State::AppendData { left } => left,
            _ => 0,
        };
        self.reset();
        if sync && !continued {
            return;
        }
        self.skip_tail.clear();
        self.state = State::SkipLiteral { left };
    }

    /// The next raw line, without its line end, for AUTHENTICATE responses
    /// (RFC 3501 §6.2.2) and IDLE's DONE (RFC 2177). Use only between
    /// commands (after the `Input::Command` for IDLE/AUTHENTICATE). A line
    /// longer than [`Limits::max_line`] is an error: close the connection.
    pub fn next_line(&mut self) -> Option<Result<Vec<u8>, LineTooLong>> {
        if self.state == State::Dead {
            return None;
        }
        let Some(i) = memchr::memchr(b'\n', &self.buf[self.scan..]).map(|i| i + self.scan) else {
            self.scan = self.buf.len();
            if self.avail() > self.limits.max_line + 1 {
                self.close_silently();
                return Some(Err(LineTooLong));
            }
            self.compact();
            return None;
        };
        let mut end = i;
        if end > self.pos && self.buf[end - 1] == b'\r' {
            end -= 1;
        }
        let line = self.buf[self.pos..end].to_vec();
        self.pos = i + 1;
        self.scan = self.pos;
        if line.len() > self.limits.max_line {
            self.close_silently();
            return Some(Err(LineTooLong));
        }
        Some(Ok(line))
    }
}
