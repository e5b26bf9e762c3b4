//! Message body decoding: DATA transparency (RFC 5321 §4.5.2) and line-end
//! normalisation for both DATA and BDAT.
//!
//! Output has LF line ends, the Maildir convention maildex stores:
//! - CRLF becomes LF; a bare LF (RFC 5321 §2.3.8 forbids it, but postfix and
//!   Dovecot accept it) is a line end too and stays LF.
//! - A bare CR (not followed by LF) is kept as is, inside the line.
//! - DATA only: at the start of a line, one leading "." is removed
//!   (§4.5.2: "..x" gives ".x", ".x" gives "x"), and a line holding only "."
//!   ends the message: CRLF "." CRLF, with LF in place of either CRLF too.
//!   The line end before the "." belongs to the message (§4.1.1.4).
//! - BDAT: no dot handling at all (RFC 3030 §2), a lone "." is data.
//! - NUL and 8-bit bytes pass through.
//!
//! Long lines are not refused: a line over the limit is counted and passed
//! on (Dovecot and postfix store such mail too); the count is reported in
//! [`crate::DataSummary::long_lines`].

use memchr::memchr2;

/// Where the decoder stands between two input bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At the start of a line.
    LineStart,
    /// Inside a line.
    Mid,
    /// Inside a line after a CR not yet known to be part of CRLF.
    MidCr,
    /// DATA: a "." at the start of a line (stuffing or the end).
    Dot,
    /// DATA: ".\r" at the start of a line.
    DotCr,
}

/// Streaming body decoder; keeps at most one pending byte of state.
#[derive(Debug, Clone)]
pub(crate) struct Decoder {
    state: State,
    /// DATA (dot-stuffed, ends at "."), or BDAT (transparent).
    dot_stuffed: bool,
    /// Octets in the current line on the wire, without its line end.
    line_len: usize,
    /// Longest allowed line without its line end (limit minus CRLF).
    max_text: usize,
    /// Lines found longer than `max_text`.
    pub(crate) long_lines: u64,
}

impl Decoder {
    /// A decoder for DATA (`dot_stuffed`) or BDAT; `max_line` counts the CRLF
    /// (RFC 5321 §4.5.3.1.6: 1000 octets including CRLF).
    pub(crate) fn new(dot_stuffed: bool, max_line: usize) -> Self {
        Decoder {
            state: if dot_stuffed {
                State::LineStart
            } else {
                State::Mid
            },
            dot_stuffed,
            line_len: 0,
            max_text: max_line.saturating_sub(2),
            long_lines: 0,
        }
    }

    fn grow_line(&mut self, n: usize) {
        let before = self.line_len;
        self.line_len = self.line_len.saturating_add(n);
        if before <= self.max_text && self.line_len > self.max_text {
            self.long_lines += 1;
        }
    }

    fn end_line(&mut self, out: &mut Vec<u8>) {
        out.push(b'\n');
        self.line_len = 0;
        self.state = if self.dot_stuffed {
            State::LineStart
        } else {
            State::Mid
        };
    }

    /// Decodes bytes from `input` into `out`. Returns how many input bytes
    /// were used and whether the DATA terminator was reached (its bytes are
    /// included in the count; nothing after it is read).
    pub(crate) fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) -> (usize, bool) {
        let mut i = 0;
        while i < input.len() {
            match self.state {
                State::Mid => {
                    let rest = &input[i..];
                    match memchr2(b'\r', b'\n', rest) {
                        None => {
                            out.extend_from_slice(rest);
                            self.grow_line(rest.len());
                            i = input.len();
                        }
                        Some(k) => {
                            out.extend_from_slice(&rest[..k]);
                            self.grow_line(k);
                            i += k + 1;
                            if rest[k] == b'\n' {
                                self.end_line(out);
                            } else {
                                self.state = State::MidCr;
                            }
                        }
                    }
                }
                State::LineStart => {
                    let b = input[i];
                    i += 1;
                    match b {
                        b'.' => {
                            self.grow_line(1);
                            self.state = State::Dot;
                        }
                        b'\r' => self.state = State::MidCr,
                        b'\n' => self.end_line(out),
                        _ => {
                            out.push(b);
                            self.grow_line(1);
                            self.state = State::Mid;
                        }
                    }
                }
                State::MidCr => {
                    let b = input[i];
                    i += 1;
                    match b {
                        b'\n' => self.end_line(out),
                        // The pending CR was bare; this one is pending now.
                        b'\r' => {
                            out.push(b'\r');
                            self.grow_line(1);
                        }
                        _ => {
                            out.extend_from_slice(&[b'\r', b]);
                            self.grow_line(2);
                            self.state = State::Mid;
                        }
                    }
                }
                State::Dot => {
                    let b = input[i];
                    i += 1;
                    match b {
                        // RFC 5321 §4.5.2: the end of mail data.
                        b'\n' => return (i, self.finish_message()),
                        b'\r' => self.state = State::DotCr,
                        // "..": the first dot was stuffing.
                        // ".x": §4.5.2 deletes the first character too.
                        _ => {
                            out.push(b);
                            self.grow_line(1);
                            self.state = State::Mid;
                        }
                    }
                }
                State::DotCr => {
                    if input[i] == b'\n' {
                        return (i + 1, self.finish_message());
                    }
                    // ".\r" then something else: the dot goes (§4.5.2), the
                    // CR is a bare CR inside the line; look at this byte again.
                    self.state = State::MidCr;
                }
            }
        }
        (i, false)
    }

    fn finish_message(&mut self) -> bool {
        self.state = State::LineStart;
        self.line_len = 0;
        true
    }

    /// BDAT LAST: a CR left pending at the very end is a bare CR and is
    /// emitted as is.
    pub(crate) fn flush(&mut self, out: &mut Vec<u8>) {
        if self.state == State::MidCr {
            out.push(b'\r');
            self.grow_line(1);
            self.state = State::Mid;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes a whole DATA body; returns output, bytes used, ended.
    fn data(input: &[u8]) -> (Vec<u8>, usize, bool) {
        let mut d = Decoder::new(true, 1000);
        let mut out = Vec::new();
        let (used, end) = d.decode(input, &mut out);
        (out, used, end)
    }

    #[test]
    fn transparency_cases() {
        // RFC 5321 §4.5.2 cases, with what must come out.
        let cases: &[(&[u8], &[u8])] = &[
            (b".\r\n", b""),
            (b"a\r\n.\r\n", b"a\n"),
            (b"..x\r\n.\r\n", b".x\n"),
            (b"...\r\n.\r\n", b"..\n"),
            (b"..\r\n.\r\n", b".\n"),
            (b".x\r\n.\r\n", b"x\n"),
            (b"a.\r\nb .\r\n.\r\n", b"a.\nb .\n"),
            (b"x\r\n.\r\n", b"x\n"),
            (b"a\n.\n", b"a\n"),
            (b"a\r\n.\n", b"a\n"),
            (b"a\n.\r\n", b"a\n"),
            (b"\r\n\r\n.\r\n", b"\n\n"),
            (b"a\rb\r\n.\r\n", b"a\rb\n"),
            (b"a\r\r\n.\r\n", b"a\r\n"),
            (b".\r.\r\n.\r\n", b"\r.\n"),
            (b".\r\r\n.\r\n", b"\r\n"),
            (b"\r.\r\n.\r\n", b"\r.\n"),
            (b"a\0b\xff\r\n.\r\n", b"a\0b\xff\n"),
        ];
        for (input, want) in cases {
            let (out, used, end) = data(input);
            assert!(end, "{:?} did not end", String::from_utf8_lossy(input));
            assert_eq!(used, input.len(), "{:?}", String::from_utf8_lossy(input));
            assert_eq!(
                out.as_slice(),
                *want,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn stops_right_after_terminator() {
        let (out, used, end) = data(b"hi\r\n.\r\nQUIT\r\n");
        assert!(end);
        assert_eq!(out, b"hi\n");
        assert_eq!(used, b"hi\r\n.\r\n".len());
    }

    #[test]
    fn no_end_without_line_start() {
        for input in [&b"a.\r\n"[..], b"a\r\n.x", b"a\r\n.\r", b"\r.\r\n"] {
            let (_, used, end) = data(input);
            assert!(!end, "{:?}", String::from_utf8_lossy(input));
            assert_eq!(used, input.len());
        }
    }

    #[test]
    fn bdat_is_transparent_and_flushes_cr() {
        let mut d = Decoder::new(false, 1000);
        let mut out = Vec::new();
        let (used, end) = d.decode(b".\r\n..\r\nx\r", &mut out);
        assert_eq!((used, end), (9, false));
        assert_eq!(out, b".\n..\nx");
        d.flush(&mut out);
        assert_eq!(out, b".\n..\nx\r");
    }

    #[test]
    fn long_lines_counted_once_each() {
        let mut d = Decoder::new(true, 10);
        let mut out = Vec::new();
        // 8 octets + CRLF fits in 10; 9 does not; 30 counts once.
        let mut input = Vec::new();
        input.extend_from_slice(b"12345678\r\n123456789\r\n");
        input.extend_from_slice(&[b'x'; 30]);
        input.extend_from_slice(b"\r\n.\r\n");
        let (_, end) = d.decode(&input, &mut out);
        assert!(end);
        assert_eq!(d.long_lines, 2);
    }
}
