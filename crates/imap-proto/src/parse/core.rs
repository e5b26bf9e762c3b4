//! Lexical rules shared by all commands (RFC 3501 §4, §9).

use super::{fail, PErr, PResult};
use crate::error::ParseError;
use crate::limits::Limits;
use crate::sequence::{SeqNum, SeqRange, SequenceSet};
use crate::types::{
    is_astring_char, is_atom_char, is_list_char, is_tag_char, Date, DateTime, Flag, Mailbox, Tag,
    MONTHS,
};

/// The tag at the start of `line`, if it is a valid one followed by a
/// space or the end (RFC 3501 §9 `tag`).
pub(crate) fn tag_of(line: &[u8]) -> Option<Tag> {
    let end = line
        .iter()
        .position(|&b| b == b' ' || b == b'\r' || b == b'\n')
        .unwrap_or(line.len());
    std::str::from_utf8(&line[..end]).ok().and_then(Tag::new)
}

/// A cursor over one assembled command.
pub(crate) struct Parser<'a> {
    input: &'a [u8],
    pos: usize,
    pub(crate) limits: &'a Limits,
    depth: usize,
    /// Recursion depth of SEARCH keys (see `search::key`).
    pub(crate) rec_depth: usize,
    /// The input is a prefix cut right after a literal announcement: a
    /// literal reaching its end (an empty one) is `Incomplete` too, since
    /// what follows it has not arrived.
    prefix: bool,
}

impl<'a> Parser<'a> {
    /// A parser at the start of `input`.
    pub(crate) fn new(input: &'a [u8], limits: &'a Limits) -> Parser<'a> {
        Parser {
            input,
            pos: 0,
            limits,
            depth: 0,
            rec_depth: 0,
            prefix: false,
        }
    }

    /// A parser over a prefix of a command (see `prefix`).
    pub(crate) fn new_prefix(input: &'a [u8], limits: &'a Limits) -> Parser<'a> {
        Parser {
            prefix: true,
            ..Parser::new(input, limits)
        }
    }

    /// The next octet, if any.
    pub(crate) fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    /// The octet after the next one.
    pub(crate) fn peek2(&self) -> Option<u8> {
        self.input.get(self.pos + 1).copied()
    }

    /// True at the end of the command: nothing or only CRLF left.
    pub(crate) fn at_end(&self) -> bool {
        let rest = &self.input[self.pos..];
        rest.is_empty() || rest == b"\r\n"
    }

    /// Consumes `b` if it is next.
    pub(crate) fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Requires `b` next.
    pub(crate) fn expect(&mut self, b: u8, what: &str) -> PResult<()> {
        if self.eat(b) {
            Ok(())
        } else if self.at_end() {
            fail(format!("Missing {what}"))
        } else {
            fail(format!("Expected {what}"))
        }
    }

    /// Consumes `word` (ASCII, case-insensitive) if it comes next and is not
    /// followed by another atom character.
    pub(crate) fn eat_word(&mut self, word: &[u8]) -> bool {
        let end = self.pos + word.len();
        if end <= self.input.len()
            && self.input[self.pos..end].eq_ignore_ascii_case(word)
            && !self.input.get(end).is_some_and(|&b| is_atom_char(b))
        {
            self.pos = end;
            true
        } else {
            false
        }
    }

    /// One space (RFC 3501 §9 `SP`); "Missing argument" at the end.
    pub(crate) fn sp(&mut self) -> PResult<()> {
        if self.eat(b' ') {
            if self.peek() == Some(b' ') {
                return fail("Double space");
            }
            Ok(())
        } else if self.at_end() || self.peek() == Some(b')') {
            fail("Missing argument")
        } else {
            fail("Expected space")
        }
    }

    /// The end of the command (CRLF or nothing left).
    pub(crate) fn end(&mut self) -> PResult<()> {
        if self.at_end() {
            self.pos = self.input.len();
            Ok(())
        } else {
            fail("Unexpected extra arguments")
        }
    }

    /// Counts one more level of parentheses against `max_depth`.
    pub(crate) fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return Err(PErr::Fail(ParseError::Limit("Too deeply nested".into())));
        }
        Ok(())
    }

    /// Leaves one level.
    pub(crate) fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Fails when a list reached `max_items`.
    pub(crate) fn check_items(&self, n: usize) -> PResult<()> {
        if n > self.limits.max_items {
            return Err(PErr::Fail(ParseError::Limit("Too many items".into())));
        }
        Ok(())
    }

    /// The command tag (RFC 3501 §9 `tag`) and the space after it.
    pub(crate) fn tag(&mut self) -> PResult<Tag> {
        let start = self.pos;
        while self.peek().is_some_and(is_tag_char) {
            self.pos += 1;
        }
        let raw = &self.input[start..self.pos];
        if raw.is_empty() {
            return fail(if self.at_end() {
                "Empty command"
            } else {
                "Invalid tag"
            });
        }
        if !matches!(self.peek(), Some(b' ')) {
            return fail(if self.at_end() {
                "Missing command"
            } else {
                "Invalid tag"
            });
        }
        let tag = std::str::from_utf8(raw)
            .ok()
            .and_then(Tag::new)
            .ok_or_else(|| PErr::Fail(ParseError::syntax("Invalid tag")))?;
        self.sp()
            .map_err(|_| PErr::Fail(ParseError::syntax("Missing command")))?;
        Ok(tag)
    }

    /// `1*ATOM-CHAR` (RFC 3501 §9 `atom`).
    pub(crate) fn atom(&mut self) -> PResult<&'a [u8]> {
        self.take_while(is_atom_char, "atom")
    }

    /// Octets while `f` holds; at least one.
    pub(crate) fn take_while(&mut self, f: impl Fn(u8) -> bool, what: &str) -> PResult<&'a [u8]> {
        let start = self.pos;
        while self.peek().is_some_and(&f) {
            self.pos += 1;
        }
        if self.pos == start {
            return if self.at_end() || self.peek() == Some(b')') {
                fail("Missing argument")
            } else {
                fail(format!("Invalid {what}"))
            };
        }
        Ok(&self.input[start..self.pos])
    }

    /// An atom upper-cased, for keywords.
    pub(crate) fn word(&mut self) -> PResult<String> {
        let a = self.atom()?;
        Ok(String::from_utf8_lossy(a).to_ascii_uppercase())
    }

    /// `number` (RFC 3501 §9: 32-bit unsigned).
    pub(crate) fn number(&mut self) -> PResult<u32> {
        let n = self.number64()?;
        u32::try_from(n).or_else(|_| fail("Number too large"))
    }

    /// `nz-number` (RFC 3501 §9).
    pub(crate) fn nz_number(&mut self) -> PResult<u32> {
        match self.number()? {
            0 => fail("Number must not be zero"),
            n => Ok(n),
        }
    }

    /// A 63-bit number (RFC 7162 §7 `mod-sequence-value`).
    pub(crate) fn number64(&mut self) -> PResult<u64> {
        let digits = self.take_while(|b| b.is_ascii_digit(), "number")?;
        let mut n: u64 = 0;
        for &d in digits {
            n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(u64::from(d - b'0')))
                .filter(|&n| n <= i64::MAX as u64)
                .ok_or_else(|| PErr::Fail(ParseError::syntax("Number too large")))?;
        }
        Ok(n)
    }

    /// `quoted` (RFC 3501 §9): `"` with `\"` and `\\` escapes, no CR/LF.
    fn quoted(&mut self) -> PResult<Vec<u8>> {
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None | Some(b'\r') | Some(b'\n') => return fail("Unterminated quoted string"),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => match self.peek2() {
                    Some(c @ (b'"' | b'\\')) => {
                        out.push(c);
                        self.pos += 2;
                    }
                    _ => return fail("Invalid escape in quoted string"),
                },
                Some(0) => return fail("NUL in quoted string"),
                Some(c) => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// A literal `{n}` / `{n+}` (RFC 3501 §4.3, RFC 7888) and its octets;
    /// `~{n}` (RFC 3516 literal8) only when `allow8`.
    pub(crate) fn literal(&mut self, allow8: bool) -> PResult<&'a [u8]> {
        let binary = self.eat(b'~');
        if binary && !allow8 {
            return fail("Literal8 not allowed here");
        }
        self.expect(b'{', "literal")?;
        let n = self.number64()?;
        self.eat(b'+');
        self.expect(b'}', "}")?;
        if !(self.eat(b'\r') && self.eat(b'\n')) {
            return fail("Missing CRLF after literal size");
        }
        let n = usize::try_from(n).or_else(|_| fail("Literal too large"))?;
        let rest = self.input.len() - self.pos;
        if rest < n || (self.prefix && rest == n) {
            return Err(PErr::Incomplete);
        }
        let data = &self.input[self.pos..self.pos + n];
        // RFC 3501 §9: literal octets are CHAR8, which excludes NUL.
        if !binary && memchr::memchr(0, data).is_some() {
            return fail("NUL in literal");
        }
        self.pos += n;
        Ok(data)
    }

    /// True when a literal starts here: `{`, or `~{` (RFC 3516 literal8). A `~` before
    /// anything else is an ordinary ATOM-CHAR (RFC 3501 §9).
    fn at_literal(&self) -> bool {
        match self.peek() {
            Some(b'{') => true,
            Some(b'~') => self.peek2() == Some(b'{'),
            _ => false,
        }
    }

    /// `string = quoted / literal` (RFC 3501 §9).
    pub(crate) fn string(&mut self) -> PResult<Vec<u8>> {
        match self.peek() {
            Some(b'"') => self.quoted(),
            Some(_) if self.at_literal() => Ok(self.literal(false)?.to_vec()),
            None => fail("Missing argument"),
            Some(_) if self.at_end() => fail("Missing argument"),
            Some(_) => fail("Expected string"),
        }
    }

    /// `astring = 1*ASTRING-CHAR / string` (RFC 3501 §9).
    pub(crate) fn astring(&mut self) -> PResult<Vec<u8>> {
        match self.peek() {
            Some(b'"') => self.string(),
            Some(_) if self.at_literal() => self.string(),
            _ => Ok(self.take_while(is_astring_char, "argument")?.to_vec()),
        }
    }

    /// `nstring = string / NIL` (RFC 3501 §9).
    pub(crate) fn nstring(&mut self) -> PResult<Option<Vec<u8>>> {
        if self.eat_word(b"NIL") {
            Ok(None)
        } else {
            self.string().map(Some)
        }
    }

    /// `mailbox = "INBOX" / astring` (RFC 3501 §5.1, §9).
    pub(crate) fn mailbox(&mut self) -> PResult<Mailbox> {
        let raw = self.astring()?;
        if raw.is_empty() {
            return fail("Empty mailbox name");
        }
        Ok(Mailbox::new(raw))
    }

    /// `list-mailbox = 1*list-char / string` (RFC 3501 §9).
    pub(crate) fn list_mailbox(&mut self) -> PResult<Vec<u8>> {
        match self.peek() {
            Some(b'"') => self.string(),
            Some(_) if self.at_literal() => self.string(),
            _ => Ok(self.take_while(is_list_char, "mailbox pattern")?.to_vec()),
        }
    }

    /// `sequence-set` (RFC 3501 §9) or `$` (RFC 5182 §2.1), at most
    /// `max_items` ranges.
    pub(crate) fn sequence_set(&mut self) -> PResult<SequenceSet> {
        if self.eat(b'$') {
            return Ok(SequenceSet::Saved);
        }
        if self.at_end() {
            return fail("Missing argument");
        }
        let mut ranges = Vec::new();
        loop {
            let start = self.seq_number()?;
            let end = if self.eat(b':') {
                self.seq_number()?
            } else {
                start
            };
            ranges.push(SeqRange { start, end });
            self.check_items(ranges.len())?;
            if !self.eat(b',') {
                break;
            }
        }
        if self
            .peek()
            .is_some_and(|b| b != b' ' && b != b')' && b != b'\r')
        {
            return fail("Invalid sequence set");
        }
        Ok(SequenceSet::Ranges(ranges))
    }

    fn seq_number(&mut self) -> PResult<SeqNum> {
        if self.eat(b'*') {
            return Ok(SeqNum::Largest);
        }
        if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
            return fail("Invalid sequence set");
        }
        match self.number() {
            Ok(0) | Err(_) => fail("Invalid sequence set"),
            Ok(n) => Ok(SeqNum::Value(n)),
        }
    }

    /// `date = date-text / DQUOTE date-text DQUOTE` (RFC 3501 §9).
    pub(crate) fn date(&mut self) -> PResult<Date> {
        let quoted = self.eat(b'"');
        let day = self.digits(1, 2, "date")?;
        self.expect(b'-', "date")
            .or_else(|_| fail("Invalid date"))?;
        let month = self.month()?;
        self.expect(b'-', "date")
            .or_else(|_| fail("Invalid date"))?;
        let year = self.digits(4, 4, "date")?;
        if quoted && !self.eat(b'"') {
            return fail("Invalid date");
        }
        Date::new(year as u16, month, day as u8).map_or_else(|| fail("Invalid date"), Ok)
    }

    /// `date-time` (RFC 3501 §9):
    /// `"dd-Mon-yyyy hh:mm:ss +zzzz"` with a space-padded or 2-digit day.
    pub(crate) fn date_time(&mut self) -> PResult<DateTime> {
        const BAD: &str = "Invalid date-time";
        if !self.eat(b'"') {
            return fail(BAD);
        }
        // date-day-fixed = (SP DIGIT) / 2DIGIT
        self.eat(b' ');
        let day = self.digits(1, 2, "date-time").or_else(|_| fail(BAD))?;
        let month = (|| {
            self.expect(b'-', "date-time")?;
            let m = self.month()?;
            self.expect(b'-', "date-time")?;
            Ok(m)
        })()
        .or_else(|_: PErr| fail(BAD))?;
        let num = |p: &mut Self, n: usize, sep: Option<u8>| -> PResult<u32> {
            let v = p.digits(n, n, "date-time").or_else(|_| fail(BAD))?;
            if let Some(s) = sep {
                if !p.eat(s) {
                    return fail(BAD);
                }
            }
            Ok(v)
        };
        let year = num(self, 4, Some(b' '))?;
        let hour = num(self, 2, Some(b':'))?;
        let minute = num(self, 2, Some(b':'))?;
        let second = num(self, 2, Some(b' '))?;
        let sign = match self.peek() {
            Some(b'+') => 1i16,
            Some(b'-') => -1i16,
            _ => return fail(BAD),
        };
        self.pos += 1;
        let zone = num(self, 4, Some(b'"'))?;
        let (zh, zm) = ((zone / 100) as i16, (zone % 100) as i16);
        if zm > 59 {
            return fail(BAD);
        }
        let date = Date::new(year as u16, month, day as u8).map_or_else(|| fail(BAD), Ok)?;
        DateTime::new(
            date,
            hour as u8,
            minute as u8,
            second as u8,
            sign * (zh * 60 + zm),
        )
        .map_or_else(|| fail(BAD), Ok)
    }

    fn month(&mut self) -> PResult<u8> {
        let end = self.pos + 3;
        let m = self.input.get(self.pos..end).and_then(|m| {
            MONTHS
                .iter()
                .position(|name| name.as_bytes().eq_ignore_ascii_case(m))
        });
        match m {
            Some(i) => {
                self.pos = end;
                Ok(i as u8 + 1)
            }
            None => fail("Invalid date"),
        }
    }

    fn digits(&mut self, min: usize, max: usize, what: &str) -> PResult<u32> {
        let start = self.pos;
        while self.pos - start < max && self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        let d = &self.input[start..self.pos];
        if d.len() < min {
            return fail(format!("Invalid {what}"));
        }
        Ok(d.iter().fold(0, |n, &c| n * 10 + u32::from(c - b'0')))
    }

    /// `flag-list = "(" [flag *(SP flag)] ")"` for STORE and APPEND
    /// (RFC 3501 §9 `flag`: no `\Recent`, no unknown `\`-flags, see
    /// [`Flag`]).
    pub(crate) fn flag_list(&mut self) -> PResult<Vec<Flag>> {
        self.expect(b'(', "flag list")?;
        let mut flags = Vec::new();
        if self.eat(b')') {
            return Ok(flags);
        }
        loop {
            flags.push(self.flag()?);
            self.check_items(flags.len())?;
            if self.eat(b')') {
                return Ok(flags);
            }
            self.sp()?;
        }
    }

    /// One `flag` (RFC 3501 §9).
    pub(crate) fn flag(&mut self) -> PResult<Flag> {
        if self.eat(b'\\') {
            let name = self.atom()?;
            let mut full = Vec::with_capacity(name.len() + 1);
            full.push(b'\\');
            full.extend_from_slice(name);
            // Dovecot client_parse_mail_flags: unknown system flags, and
            // \Recent (RFC 3501 §2.3.2: not alterable), are BAD.
            return Flag::system(&full).map_or_else(
                || {
                    fail(format!(
                        "Invalid system flag {}",
                        String::from_utf8_lossy(&full)
                    ))
                },
                Ok,
            );
        }
        let kw = self.atom()?;
        Ok(Flag::Keyword(String::from_utf8_lossy(kw).into_owned()))
    }
}
