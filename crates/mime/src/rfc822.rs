//! RFC 5322 / RFC 2045 lexical tokens (atoms, quoted strings, comments,
//! MIME tokens) over a header field body.
//!
//! The tolerance rules (what is skipped, where parsing stops on broken
//! input) follow Dovecot's rfc822-parser so that addresses and Content-*
//! values come out the same as Dovecot reports them.

/// Result of a lexer step, in Dovecot's three-way convention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lex {
    /// Broken input (unterminated quote/comment/literal, missing token).
    Fail,
    /// The token was read and the input is at its end.
    End,
    /// The token was read and more input follows.
    More,
}

impl Lex {
    /// `Fail` or `End`: nothing follows.
    pub(crate) fn stop(self) -> bool {
        self != Lex::More
    }
}

const ATEXT: u8 = 1;
const ALNUM: u8 = 2;
const TSPECIAL_ATEXT: u8 = 4;

/// Character classes: RFC 5322 §3.2.3 atext (1 = atext, 2 = letters, digits
/// and every 8-bit byte, 4 = atext that is a MIME tspecial: `/`, `=`, `?`).
const fn class_table() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        t[i] = if c >= 0x80 || c.is_ascii_alphanumeric() {
            ALNUM
        } else if c == b'/' || c == b'=' || c == b'?' {
            TSPECIAL_ATEXT
        } else if matches!(
            c,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'^'
                | b'_'
                | b'`'
                | b'{'
                | b'|'
                | b'}'
                | b'~'
        ) {
            ATEXT
        } else {
            0
        };
        i += 1;
    }
    t
}

static CLASS: [u8; 256] = class_table();

/// RFC 5322 atext (8-bit bytes count as atext, as in Dovecot).
pub(crate) fn is_atext(c: u8) -> bool {
    CLASS[c as usize] != 0
}

/// RFC 2045 §5.1 token character (atext without the tspecials `/ = ?`).
pub(crate) fn is_token_char(c: u8) -> bool {
    CLASS[c as usize] & (ATEXT | ALNUM) != 0
}

/// A cursor over one field body.
pub(crate) struct Lexer<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) pos: usize,
    /// Text of the last comment skipped, when tracking is on (RFC 5322 §3.4:
    /// `addr-spec (Name)` gives the display name).
    pub(crate) last_comment: Option<Vec<u8>>,
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Lexer {
            data,
            pos: 0,
            last_comment: None,
        }
    }

    pub(crate) fn with_comments(data: &'a [u8]) -> Self {
        Lexer {
            data,
            pos: 0,
            last_comment: Some(Vec::new()),
        }
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// The current byte, 0 at the end (never a token or special byte the
    /// callers test for).
    pub(crate) fn cur(&self) -> u8 {
        self.data.get(self.pos).copied().unwrap_or(0)
    }

    fn more_or_end(&self) -> Lex {
        if self.at_end() {
            Lex::End
        } else {
            Lex::More
        }
    }

    /// RFC 5322 §3.2.2 comment, nested, with quoted-pairs. The cursor is on
    /// `(`.
    fn skip_comment(&mut self) -> Lex {
        if let Some(c) = self.last_comment.as_mut() {
            c.clear();
        }
        let mut level = 1;
        self.pos += 1;
        let mut start = self.pos;
        while self.pos < self.data.len() {
            match self.data[self.pos] {
                b'(' => level += 1,
                b')' => {
                    level -= 1;
                    if level == 0 {
                        if let Some(c) = self.last_comment.as_mut() {
                            c.extend_from_slice(&self.data[start..self.pos]);
                        }
                        self.pos += 1;
                        return self.more_or_end();
                    }
                }
                b'\\' => {
                    if let Some(c) = self.last_comment.as_mut() {
                        c.extend_from_slice(&self.data[start..self.pos]);
                    }
                    start = self.pos + 1;
                    self.pos += 1;
                    if self.pos >= self.data.len() {
                        return Lex::Fail;
                    }
                }
                _ => {}
            }
            self.pos += 1;
        }
        Lex::Fail
    }

    /// Skips CFWS (RFC 5322 §3.2.2): white space, CR, LF and comments.
    pub(crate) fn skip_lwsp(&mut self) -> Lex {
        while self.pos < self.data.len() {
            match self.data[self.pos] {
                b' ' | b'\t' | b'\r' | b'\n' => self.pos += 1,
                b'(' => {
                    if self.skip_comment() == Lex::Fail {
                        return Lex::Fail;
                    }
                }
                _ => break,
            }
        }
        self.more_or_end()
    }

    /// Consumes bytes while `pred` holds, appends them, then skips CFWS.
    fn run(&mut self, out: &mut Vec<u8>, pred: impl Fn(u8) -> bool) -> Lex {
        let start = self.pos;
        while self.pos < self.data.len() && pred(self.data[self.pos]) {
            self.pos += 1;
        }
        out.extend_from_slice(&self.data[start..self.pos]);
        if self.at_end() {
            Lex::End
        } else {
            self.skip_lwsp()
        }
    }

    /// RFC 5322 §3.2.3 atom (at least one atext byte).
    pub(crate) fn atom(&mut self, out: &mut Vec<u8>) -> Lex {
        if !is_atext(self.cur()) || self.at_end() {
            return Lex::Fail;
        }
        self.run(out, is_atext)
    }

    /// RFC 5322 §3.2.3 dot-atom, allowing CFWS around the dots (RFC 822).
    pub(crate) fn dot_atom(&mut self, out: &mut Vec<u8>) -> Lex {
        if self.at_end() || !is_atext(self.cur()) {
            return Lex::Fail;
        }
        loop {
            let start = self.pos;
            while self.pos < self.data.len() && is_atext(self.data[self.pos]) {
                self.pos += 1;
            }
            out.extend_from_slice(&self.data[start..self.pos]);
            if self.at_end() {
                return Lex::End;
            }
            let r = self.skip_lwsp();
            if r.stop() {
                return r;
            }
            if self.cur() != b'.' {
                return Lex::More;
            }
            self.pos += 1;
            out.push(b'.');
            let r = self.skip_lwsp();
            if r.stop() {
                return r;
            }
        }
    }

    /// RFC 2045 §5.1 token (may be empty); dots are allowed.
    pub(crate) fn mime_token(&mut self, out: &mut Vec<u8>) -> Lex {
        self.run(out, |c| is_token_char(c) || c == b'.')
    }

    /// RFC 5322 §3.2.4 quoted-string; the cursor is on `"`. Quoted-pairs
    /// are unescaped and folding line breaks removed.
    pub(crate) fn quoted_string(&mut self, out: &mut Vec<u8>) -> Lex {
        self.pos += 1;
        let mut start = self.pos;
        while self.pos < self.data.len() {
            match self.data[self.pos] {
                b'"' => {
                    out.extend_from_slice(&self.data[start..self.pos]);
                    self.pos += 1;
                    return self.skip_lwsp();
                }
                b'\n' => {
                    let mut end = self.pos;
                    if end > start && self.data[end - 1] == b'\r' {
                        end -= 1;
                    }
                    out.extend_from_slice(&self.data[start..end]);
                    start = self.pos + 1;
                }
                b'\\' => {
                    self.pos += 1;
                    if self.pos >= self.data.len() {
                        return Lex::Fail;
                    }
                    out.extend_from_slice(&self.data[start..self.pos - 1]);
                    start = self.pos;
                }
                _ => {}
            }
            self.pos += 1;
        }
        Lex::Fail
    }

    /// RFC 5322 §3.2.5 phrase, with obs-phrase dots; words are joined by one
    /// space. May read nothing (`More` with no output) when the next byte
    /// starts no word.
    pub(crate) fn phrase(&mut self, out: &mut Vec<u8>) -> Lex {
        if self.at_end() {
            return Lex::End;
        }
        if self.cur() == b'.' {
            return Lex::Fail;
        }
        loop {
            let r = if self.cur() == b'"' {
                self.quoted_string(out)
            } else {
                self.run(out, |c| is_atext(c) || c == b'.')
            };
            if r.stop() {
                return r;
            }
            let c = self.cur();
            if !is_atext(c) && c != b'"' && c != b'.' {
                break;
            }
            out.push(b' ');
        }
        self.skip_lwsp()
    }

    /// RFC 5322 §3.4.1 domain-literal, kept with its brackets; the cursor is
    /// on `[`.
    fn domain_literal(&mut self, out: &mut Vec<u8>) -> Lex {
        let start = self.pos;
        while self.pos < self.data.len() {
            match self.data[self.pos] {
                b'\\' => {
                    self.pos += 1;
                    if self.pos >= self.data.len() {
                        break;
                    }
                }
                b']' => {
                    self.pos += 1;
                    out.extend_from_slice(&self.data[start..self.pos]);
                    return self.skip_lwsp();
                }
                _ => {}
            }
            self.pos += 1;
        }
        Lex::Fail
    }

    /// `"@" domain` (RFC 5322 §3.4.1); the cursor is on `@`.
    pub(crate) fn domain(&mut self, out: &mut Vec<u8>) -> Lex {
        self.pos += 1;
        if self.skip_lwsp().stop() {
            return Lex::Fail;
        }
        if self.cur() == b'[' {
            self.domain_literal(out)
        } else {
            self.dot_atom(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrase_joins_words_and_unquotes() {
        let mut l = Lexer::new(b"\"Doe, \\\"J\\\"\"  Smith <x>");
        let mut out = Vec::new();
        assert_eq!(l.phrase(&mut out), Lex::More);
        assert_eq!(out, b"Doe, \"J\" Smith");
        assert_eq!(l.cur(), b'<');
    }

    #[test]
    fn comments_are_remembered() {
        let mut l = Lexer::with_comments(b"a (first) (se\\)cond)");
        let mut out = Vec::new();
        assert_eq!(l.dot_atom(&mut out), Lex::End);
        assert_eq!(l.last_comment.as_deref(), Some(&b"se)cond"[..]));
    }

    #[test]
    fn unterminated_quote_fails() {
        let mut l = Lexer::new(b"\"abc");
        assert_eq!(l.quoted_string(&mut Vec::new()), Lex::Fail);
    }

    #[test]
    fn token_classes() {
        assert!(is_token_char(b'a') && is_token_char(b'-') && is_token_char(0xe9));
        assert!(!is_token_char(b'/') && !is_token_char(b'=') && !is_token_char(b' '));
        assert!(is_atext(b'/') && !is_atext(b'.') && !is_atext(b'@'));
    }
}
